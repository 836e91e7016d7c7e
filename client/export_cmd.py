"""`autoresearch-mcp export`: a run's experiments as CSV or JSON, read through MCP like `show`.

A run the scripted test double drove says so in the file (an `llm` column, a `note` in JSON) and on
stderr, since the numbers in it came from no language model.
"""

import argparse
import csv
import io
import sys
from pathlib import Path
from typing import Any

from autoresearch_mcp.client.connect import ResearchClient
from autoresearch_mcp.client.inspect_cmd import add_server_arguments, drive, resolve_run
from autoresearch_mcp.client.live import SCRIPTED_NOTE
from autoresearch_mcp.client.run_document import run_document
from autoresearch_mcp.contract.models import Experiment


def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "export",
        help="write a run's experiments as CSV or JSON",
        epilog="example:\n  autoresearch-mcp export latest --format csv --out experiments.csv",
    )
    add_server_arguments(p)
    p.add_argument("run_id", nargs="?", default="latest", help="a run id, or 'latest' (default)")
    p.add_argument("--format", choices=["csv", "json"], default="csv", help="CSV: one row per experiment")
    p.add_argument("--out", type=Path, help="the file to write (default: standard output)")
    p.set_defaults(func=lambda args: drive(args, export_run))


def csv_rows(experiments: list[Experiment], llm: str | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """One row per experiment; `llm` (who proposed it: `scripted` for the test double) on every row, so
    the file says so wherever it goes."""
    params = sorted({k for e in experiments for k in e.params})
    metrics = sorted({k for e in experiments for k in e.metrics})
    head = ["run_id", "iteration", "status", "metric", "kept", "duration_s", "artifact_version"]
    tail = ["note", "error_tail", "started_at", "finished_at"]
    header = head[:1] + ["llm"] + head[1:] + [f"params.{k}" for k in params]
    header += [f"metrics.{k}" for k in metrics] + tail
    rows = []
    for e in experiments:
        row: dict[str, Any] = {k: getattr(e, k) for k in head + tail}
        row["llm"] = llm or ""
        row.update({f"params.{k}": e.params.get(k) for k in params})
        row.update({f"metrics.{k}": e.metrics.get(k) for k in metrics})
        rows.append(row)
    return header, rows


async def export_run(rc: ResearchClient, args: argparse.Namespace) -> int:
    run = await resolve_run(rc, args.run_id)
    history = await rc.history(run.id)
    if args.format == "json":  # what `autoresearch-mcp import` reads back
        document = await run_document(rc, run, history)
        if run.scripted:
            document.note = SCRIPTED_NOTE
        text = document.model_dump_json(indent=2, exclude=None if document.note else {"note"})
    else:
        header, rows = csv_rows(history, run.llm)
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        text = buffer.getvalue()
    if run.scripted:
        print(f"{run.id}: {SCRIPTED_NOTE}", file=sys.stderr)
    if args.out is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    print(f"{len(history)} experiments of {run.id} written to {args.out}", file=sys.stderr)
    return 0
