"""`autoresearch-mcp dashboard` (serve the live page) and `autoresearch-mcp report` (write one HTML file)."""

import argparse
import errno
import os
import socket
import sys
from pathlib import Path

from autoresearch_mcp.contract.env import ENV_DB, ENV_TOKEN, default_db_path, transcripts_dir
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.http import is_loopback
from autoresearch_mcp.server.main import port_arg
from autoresearch_mcp.server.store import Store

DEFAULT_PORT = 8770


def open_store(db: Path | None) -> Store:
    """The existing database: the dashboard reads runs, it never starts an empty one by mistake."""
    path = db or default_db_path()
    if not path.is_file():
        raise ResearchError(f"no database at {path}; pass --db PATH or set ${ENV_DB}")
    return Store(path)


def check_port(host: str, port: int) -> None:
    """Bind the address once before saying where the dashboard is: a port in use is one line, not a
    printed URL that nothing serves followed by uvicorn's own error."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind((host, port))
    except OSError as exc:
        reason = (
            "is in use (another dashboard?)" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc})"
        )
        raise ResearchError(f"port {port} on {host} {reason}: pick another with --port N") from None


def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    dash = sub.add_parser("dashboard", help="serve a live dashboard of the runs in the browser")
    dash.add_argument("--db", type=Path, help=f"SQLite file (default: ${ENV_DB} or the user data directory)")
    dash.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    dash.add_argument("--port", type=port_arg, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    dash.add_argument(
        "--token",
        default=os.environ.get(ENV_TOKEN),
        help=f"ask for this token before showing anything (default ${ENV_TOKEN}); required off loopback",
    )
    dash.set_defaults(func=run_dashboard)

    report = sub.add_parser("report", help="write one self-contained HTML report of a run")
    report.add_argument("run_id", nargs="?", default="latest", help="a run id, or 'latest' (default)")
    report.add_argument(
        "--db", type=Path, help=f"SQLite file (default: ${ENV_DB} or the user data directory)"
    )
    report.add_argument("--out", type=Path, help="the HTML file to write (default: <run_id>.html)")
    report.set_defaults(func=run_report)


def run_dashboard(args: argparse.Namespace) -> int:
    import uvicorn

    from autoresearch_mcp.server.dashboard.app import dashboard_app

    loopback = is_loopback(args.host)
    if not loopback and not args.token:
        raise ResearchError(f"binding {args.host} exposes your runs: set --token or ${ENV_TOKEN}")
    store = open_store(args.db)
    # On loopback, only loopback Host headers: a DNS-rebinding page cannot read the runs.
    hosts = ["127.0.0.1", "localhost", "[::1]", args.host] if loopback else None
    app = dashboard_app(store, args.token or None, allowed_hosts=hosts)
    check_port(args.host, args.port)
    print(f"dashboard: http://{args.host}:{args.port}/  ({store.path})", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def run_report(args: argparse.Namespace) -> int:
    from autoresearch_mcp.server.dashboard.render import render_report

    store = open_store(args.db)
    run_id = args.run_id
    if run_id == "latest":
        runs = store.list_runs()
        if not runs:
            raise ResearchError(f"{store.path} has no runs yet")
        run_id = runs[0].id
    elif run_id not in store.run_ids():  # said as `show` says it: a person reads this, not a model
        raise ResearchError(f"no run {run_id} in {store.path} (`autoresearch-mcp runs` lists them)")
    html = render_report(store, run_id, transcripts_dir())
    out: Path = args.out or Path(f"{run_id}.html")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    print(f"report for {run_id}: {out}", file=sys.stderr)
    return 0
