"""The server the load test runs: `serve`'s own app and transport (build_http_app and uvicorn_config,
or serve_stdio) with one tool more, `floor`, of get_run_summary's shape with nothing behind it (what any
tool call costs in the SDK); and `prefill`, a long run written through the import path before the
server starts.

    python benchmarks/load_server.py --db runs.db [--transport http --port 8765 [--trace FILE]]
"""

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import uvicorn
from starlette.applications import Starlette

from autoresearch_mcp.contract.models import Experiment, Run, SummaryText
from autoresearch_mcp.contract.transfer import RunDocument
from autoresearch_mcp.server import http
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.heap import settled
from autoresearch_mcp.server.http import build_http_app, uvicorn_config
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.stdio import serve_stdio
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.store.transfer import import_run

TOY_TASK_DIR = Path(__file__).resolve().parents[1] / "tests"  # tests/toy_task.py
FLOOR_TEXT = "x" * 1200  # about the size of a summary


def main(argv: list[str] | None = None) -> int:
    """`serve`, plus the `floor` tool: the app, transport and settings `serve` uses (one job worker)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--trace", type=Path, help="HTTP: time every request, written here at shutdown")
    parser.add_argument(
        "--no-settle", action="store_true", help="serve without server/heap.py's freeze (to measure it)"
    )
    args = parser.parse_args(argv)

    async def floor(run_id: str | None = None) -> SummaryText:
        """get_run_summary's shape with nothing behind it (the load test's floor)."""
        return SummaryText(run_id=run_id or "-", summary=FLOOR_TEXT)

    settings = ServerSettings(db_path=args.db, workers=1)
    # --no-settle: the server as it was before heap.py (every collection walks every object); the HTTP
    # app's lifespan looks `settled` up in server/http.py when it starts
    settle = contextlib.nullcontext if args.no_settle else settled
    http.settled = settle
    if args.transport == "http":
        app = build_http_app(settings, host=args.host)
        app.state.mcp.tool()(floor)
        if args.trace is not None:
            traced(app, args.trace)
        uvicorn.Server(uvicorn_config(app, args.host, args.port)).run()
        return 0
    with Research(settings) as research:
        mcp = build_server(research)
        mcp.tool()(floor)
        with settle():
            anyio.run(serve_stdio, mcp)
    return 0


def traced(app: Starlette, path: Path) -> None:
    """load_trace.py's request timer, loop watcher and collection log on the app; written at shutdown."""
    from load_trace import ServerTrace, TraceRequests

    trace = ServerTrace()
    trace.collections.install()
    app.add_middleware(TraceRequests, trace=trace)
    serving = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with serving(app), anyio.create_task_group() as tg:
            tg.start_soon(trace.loop.watch)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
                trace.write(path)

    app.router.lifespan_context = lifespan


PREFILLED = "r-1000ad0000"


def prefill(db: Path, n: int) -> None:
    """A running toy-quadratic run of n experiments, stored through the import path."""
    sys.path.insert(0, str(TOY_TASK_DIR))
    from toy_task import SOURCE, ToyTask

    experiments = [
        Experiment(
            id=i,
            run_id=PREFILLED,
            iteration=i,
            params={"x": round(-10 + 20 * ((i * 0.6180339887) % 1), 6), "y": 0.0, "sleep": 0.0},
            artifact_version=1,
            status="ok",
            metrics={"score": -float(i % 97)},
            metric=-float(i % 97),
            kept=i == 97,
            started_at=f"2026-01-01T00:00:00.{i:06d}+00:00",
            finished_at=f"2026-01-01T00:00:01.{i:06d}+00:00",
            duration_s=0.01,
        )
        for i in range(1, n + 1)
    ]
    run = Run(
        id=PREFILLED, name="prefilled", task="toy-quadratic", status="running", budget=n + 10_000, used=n,
        target=None, seed=42, metric_name="score", direction="max", created_at="2026-01-01T00:00:00+00:00",
        config={"metric": "score", "direction": "max", "options": ToyTask({}).options()},
    )  # fmt: skip
    store = Store(db)
    import_run(store, RunDocument(run=run, experiments=experiments), lambda task: SOURCE)
    store.close()


if __name__ == "__main__":
    sys.exit(main())
