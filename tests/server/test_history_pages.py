"""The history is read in pages, never whole: without `last` a page of HISTORY_PAGE with next_offset,
`last` at most HISTORY_MAX; the history resource is the latest page; one run reads alone."""

import json
from pathlib import Path
from typing import Any

import pytest
from bulk import bulk_run
from mcp import Client

from autoresearch_mcp.contract.arguments import HISTORY_MAX, HISTORY_PAGE
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store

pytestmark = pytest.mark.asyncio
N = HISTORY_PAGE * 2 + 50


async def history(client: Client, **args: Any) -> dict[str, Any]:
    result = await client.call_tool("get_experiment_history", {"run_id": "r-0000000001", **args})
    assert not result.is_error, result.content[0].text
    return result.structured_content or {}


async def test_the_history_comes_a_page_at_a_time_with_where_the_next_one_starts(tmp_path: Path):
    settings = ServerSettings(db_path=tmp_path / "runs.db")
    store = Store(settings.db_path)
    bulk_run(store, N)
    store.close()
    with Research(settings) as research:
        async with Client(build_server(research)) as client:
            first = await history(client)
            assert len(first["experiments"]) == HISTORY_PAGE and first["total"] == N
            assert first["experiments"][0]["iteration"] == 1 and first["next_offset"] == HISTORY_PAGE
            last_page = await history(client, offset=HISTORY_PAGE * 2)
            assert len(last_page["experiments"]) == 50 and last_page["next_offset"] is None
            best_first = await history(client, order="metric")
            assert (
                best_first["experiments"][0]["iteration"] == N - 3
                and best_first["next_offset"] == HISTORY_PAGE
            )
            # the experiments without a metric come after those with one, read on from where they start
            crashes = N // 7  # every 7th crashed
            tail = await history(client, order="metric", offset=N - crashes - 2)
            assert [e["status"] for e in tail["experiments"]] == ["ok", "ok"] + ["crash"] * crashes
            deep = await history(client, order="metric", offset=N - 10)
            assert [e["status"] for e in deep["experiments"]] == ["crash"] * 10
            assert deep["experiments"][-1]["iteration"] == N - N % 7
            recent = await history(client, last=HISTORY_MAX)
            assert len(recent["experiments"]) == N and recent["experiments"][-1]["iteration"] == N
            too_many = await client.call_tool("get_experiment_history", {"last": HISTORY_MAX + 1})
            assert too_many.is_error and "less than or equal to 1000" in too_many.content[0].text

            page = json.loads(
                (await client.read_resource("autoresearch://runs/r-0000000001/history")).contents[0].text
            )
            assert page["total"] == N and [e["iteration"] for e in page["experiments"]][-1] == N
            assert len(page["experiments"]) == HISTORY_PAGE
            run = json.loads(
                (await client.read_resource("autoresearch://runs/r-0000000001")).contents[0].text
            )
            assert run["id"] == "r-0000000001" and run["used"] == N and run["best"]["iteration"] == N - 3
