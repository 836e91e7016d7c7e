"""The read-only SQL tool, named like its logic (server/query.py)."""

from autoresearch_mcp.contract.arguments import QueryResultsArgs
from autoresearch_mcp.contract.models import QueryResult
from autoresearch_mcp.server import query
from autoresearch_mcp.server.research import Research


def query_results(research: Research, args: QueryResultsArgs) -> QueryResult:
    return query.query_results(research.settings.db_path, args.sql, args.max_rows)
