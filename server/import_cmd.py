"""`autoresearch-mcp import FILE`: store the runs of a file that `export --format json` wrote.

It writes the database itself, as `serve` does (there is no MCP tool that records experiments: results
come from running them), so it takes the same --db. See store/transfer.py for what is kept and what
comes back new.
"""

import argparse
import json
import sys
from pathlib import Path

from pydantic import ValidationError

from autoresearch_mcp.contract.env import ENV_DB, default_db_path
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.transfer import run_documents


def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "import",
        help="store the runs of a file that `export --format json` wrote",
        epilog="example:\n  autoresearch-mcp export latest --format json --out run.json\n"
        "  autoresearch-mcp import run.json --db other.db",
    )
    p.add_argument("file", type=Path, help="a JSON file: one exported run, or a list of them")
    p.add_argument("--db", type=Path, help=f"SQLite file (default: ${ENV_DB} or the user data directory)")
    p.add_argument(
        "--new-ids",
        action="store_true",
        help="import a run whose id this database already has as a new run (default: refuse it)",
    )
    p.set_defaults(func=import_file)


def import_file(args: argparse.Namespace) -> int:
    # Imported here: every other command of the CLI starts without the store and the task registry.
    from autoresearch_mcp.server.settings import ServerSettings
    from autoresearch_mcp.server.store import Store
    from autoresearch_mcp.server.store.transfer import import_run
    from autoresearch_mcp.server.tasks.registry import make_task

    try:
        data = json.loads(Path(args.file).read_bytes())
        documents = run_documents(data)
    except OSError as exc:
        raise ResearchError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ResearchError(f"{args.file} is not JSON: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ResearchError(
            f"{args.file} is not what `export --format json` writes: {where}: {first['msg']}"
        ) from None
    db = Path(args.db).expanduser().resolve() if args.db else default_db_path()
    settings = ServerSettings(db_path=db).task_settings()
    store = Store(db)
    try:
        for doc in documents:
            run_id = import_run(
                store, doc, lambda task: make_task(task, settings).initial_artifact(), new_id=args.new_ids
            )
            renamed = f" (as {run_id})" if run_id != doc.run.id else ""
            print(f"imported run {doc.run.id}{renamed}: {len(doc.experiments)} experiments", file=sys.stderr)
    finally:
        store.close()
    print(f"{len(documents)} run(s) imported into {db}", file=sys.stderr)
    return 0
