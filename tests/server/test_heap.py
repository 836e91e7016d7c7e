"""While the server serves, what it held at start is frozen out of the garbage collector's walk (a full
collection over it held the event loop for 50 to 110 ms: the load test's tail), and nothing stays frozen
once it stops."""

import gc
from pathlib import Path

import pytest

from autoresearch_mcp.server.heap import settled
from autoresearch_mcp.server.http import build_http_app
from autoresearch_mcp.server.settings import ServerSettings


def test_a_settled_block_leaves_the_collector_only_what_it_makes_and_unfreezes_after():
    before = len(gc.get_objects())
    with settled():
        assert gc.get_freeze_count() >= before // 2  # what was alive is out of the walk
        made = [{"n": i} for i in range(1000)]
        assert len(gc.get_objects()) < 5000 + len(made)  # the walk: what the block made, not the rest
    assert gc.get_freeze_count() == 0


@pytest.mark.asyncio
async def test_the_http_app_settles_its_heap_while_it_serves(tmp_path: Path):
    app = build_http_app(ServerSettings(db_path=tmp_path / "runs.db", workers=1))
    assert gc.get_freeze_count() == 0
    async with app.router.lifespan_context(app):
        assert gc.get_freeze_count() > 50_000  # the SDK, pydantic, the tools, the app
    assert gc.get_freeze_count() == 0
