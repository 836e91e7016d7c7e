"""The `autoresearch-mcp` command: serve, and the client commands."""

import argparse
import sys

from autoresearch_mcp import __version__
from autoresearch_mcp.client import compare, run_cmd
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server import main as serve
from autoresearch_mcp.server.dashboard import cli as dashboard_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autoresearch-mcp",
        description="Stateful autonomous ML experimentation over MCP.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve.configure(sub)
    run_cmd.configure(sub)
    dashboard_cli.configure(sub)
    compare.configure(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ResearchError as exc:
        print(f"autoresearch-mcp: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
