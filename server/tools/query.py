"""Read-only SQL over the results views: query_results."""

from typing import Annotated

from mcp.server import MCPServer
from pydantic import Field

from autoresearch_mcp.contract.models import QueryResult
from autoresearch_mcp.server.query import MAX_ROWS, describe_views, query_views
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tools.common import READ_ONLY, refusals


def register(mcp: MCPServer, research: Research) -> None:
    db_path = research.settings.db_path

    @mcp.tool(
        annotations=READ_ONLY,
        description="Read-only SQL (one SELECT; SQLite dialect, json_extract for JSON columns) over "
        "these views of every run:\n" + describe_views() + "\nRaw tables, writes, PRAGMA and ATTACH are "
        "refused; a query stops after 2 s.",
    )
    @refusals
    def query_results(
        sql: Annotated[str, Field(min_length=1, max_length=20_000, description="one SELECT statement")],
        max_rows: Annotated[int, Field(ge=1, le=MAX_ROWS, description="rows to return at most")] = 200,
    ) -> QueryResult:
        return query_views(db_path, sql, max_rows)
