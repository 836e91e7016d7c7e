"""What the operator changes about a stored run from outside its research loop: its name, its tags,
or the run itself (`autoresearch-mcp rename`, `tag`, `delete`).

No MCP tool calls these, so no model can rename or delete a run; the commands open the database the
way `dashboard` and `report` do. Stopping a run needs no code here: it is MCP's finish_run
(client/stop_cmd.py). Deleting removes the run and everything recorded under it (experiments, train.py
versions, notes, events, jobs) in one transaction; a run that is still running is deleted only with
--force, and never while one of its experiments is in flight (a server would write its result into a
run that no longer exists).
"""

import argparse
import json
import re
from pathlib import Path

from pydantic import BaseModel

from autoresearch_mcp.contract.env import ENV_DB
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Run
from autoresearch_mcp.server.dashboard.cli import open_store
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.store.db import canonical_json, now
from autoresearch_mcp.server.text import check_text

PROG = "autoresearch-mcp"
MAX_NAME = 100  # start_run's bound
MAX_TAGS = 20
TAG = re.compile(r"^[\w.:+@/-]{1,40}$")


class Removed(BaseModel):
    """What deleting a run removed, counted."""

    run: Run
    experiments: int
    versions: int
    notes: int
    events: int
    jobs: int
    detached: list[str]  # runs that had started from it and no longer say so


def unknown(store: Store, run_id: str) -> ResearchError:
    return ResearchError(f"no run {run_id} in {store.path} (`{PROG} runs` lists them)", kind="unknown_run")


def known_run(store: Store, run_id: str) -> Run:
    try:
        return store.get_run(run_id)
    except ResearchError:
        raise unknown(store, run_id) from None


def rename_run(store: Store, run_id: str, name: str) -> Run:
    name = name.strip()
    if not name or len(name) > MAX_NAME:
        raise ResearchError(f"a run name is 1 to {MAX_NAME} characters, not {len(name)}")
    check_text(name, "the run name")
    known_run(store, run_id)
    with store.db.transaction() as conn:
        conn.execute("UPDATE runs SET name = ?, updated_at = ? WHERE id = ?", (name, now(), run_id))
    return store.get_run(run_id)


def tag_run(store: Store, run_id: str, add: list[str], remove: list[str]) -> Run:
    """Add and remove tags (each a word: letters, digits and ._:+@/-, up to 40 characters)."""
    for tag in add:
        if not TAG.match(tag):
            raise ResearchError(
                f"a tag is one word of letters, digits and ._:+@/- (at most 40 characters), not {tag!r}"
            )
    with store.db.transaction() as conn:
        row = conn.execute("SELECT tags_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise unknown(store, run_id)
        tags = [t for t in json.loads(row["tags_json"]) if t not in remove]
        tags += [t for t in dict.fromkeys(add) if t not in tags]
        if len(tags) > MAX_TAGS:
            raise ResearchError(f"a run has at most {MAX_TAGS} tags; this would give it {len(tags)}")
        conn.execute(
            "UPDATE runs SET tags_json = ?, updated_at = ? WHERE id = ?",
            (canonical_json(tags), now(), run_id),
        )
    return store.get_run(run_id)


def delete_run(store: Store, run_id: str, *, force: bool = False) -> Removed:
    """Remove the run and everything recorded under it. Refused for a running run without `force`, for
    a run that other runs started from without `force` (with it, they forget where they started), and
    always while an experiment of the run is in flight."""
    with store.db.transaction() as conn:  # checked and removed under one write lock: nothing starts meanwhile
        row = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise unknown(store, run_id)
        running = conn.execute(
            "SELECT iteration FROM experiments WHERE run_id = ? AND status = 'running' ORDER BY iteration",
            (run_id,),
        ).fetchall()
        if running:
            raise ResearchError(
                f"experiment #{running[0]['iteration']} of run {run_id} is running: stop the run"
                f" (`{PROG} stop {run_id}`) and wait for it to end before deleting the run",
                kind="bad_argument",
            )
        if row["status"] == "running" and not force:
            raise ResearchError(
                f"run {run_id} is running: stop it first (`{PROG} stop {run_id}`), or add --force",
                kind="bad_argument",
            )
        children = [r["id"] for r in conn.execute("SELECT id FROM runs WHERE from_run = ?", (run_id,))]
        if children and not force:
            raise ResearchError(
                f"runs {', '.join(children)} started from run {run_id}: add --force to delete it anyway"
                " (they keep their own experiments and forget where they started)",
                kind="bad_argument",
            )
        run = store.get_run(run_id)
        counts = {
            table: conn.execute(f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", (run_id,)).fetchone()[0]
            for table in ("jobs", "experiments", "artifacts", "notes", "events")
        }
        conn.execute("UPDATE runs SET from_run = NULL WHERE from_run = ?", (run_id,))
        # jobs point at experiments; the counters the writes kept (migration 008) go with the run
        for table in (
            "jobs",
            "experiments",
            "artifacts",
            "notes",
            "events",
            "run_counts",
            "param_values",
            "param_counts",
            "profiles",
        ):
            conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
        conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))
    return Removed(
        run=run,
        experiments=counts["experiments"],
        versions=counts["artifacts"],
        notes=counts["notes"],
        events=counts["events"],
        jobs=counts["jobs"],
        detached=children,
    )


# -- the commands ---------------------------------------------------------------------------------
def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    db_help = f"SQLite file (default: ${ENV_DB} or the user data directory)"
    p = sub.add_parser(
        "rename",
        help="give a stored run a new name",
        epilog=f"example:\n  {PROG} rename r-0123456789 'depth sweep, seed 42'",
    )
    p.add_argument("run_id", metavar="RUN_ID", help="the run")
    p.add_argument("name", metavar="NAME", help=f"its new name (1 to {MAX_NAME} characters)")
    p.add_argument("--db", type=Path, help=db_help)
    p.set_defaults(func=rename_command)

    p = sub.add_parser(
        "tag",
        help="put tags on a stored run (or take them off with --remove)",
        epilog=f"example:\n  {PROG} tag r-0123456789 baseline paper\n  {PROG} tag r-0123456789 paper --remove",
    )
    p.add_argument("run_id", metavar="RUN_ID", help="the run")
    p.add_argument("tags", metavar="TAG", nargs="+", help="one word each: letters, digits and ._:+@/-")
    p.add_argument("--remove", action="store_true", help="take these tags off instead")
    p.add_argument("--db", type=Path, help=db_help)
    p.set_defaults(func=tag_command)

    p = sub.add_parser(
        "delete",
        help="delete a stored run with its experiments, train.py versions, notes and events",
        epilog=f"example:\n  {PROG} delete r-0123456789 --yes",
    )
    p.add_argument("run_id", metavar="RUN_ID", help="the run (its id: no 'latest' here)")
    p.add_argument("--yes", action="store_true", help="really delete it (without: say what would go)")
    p.add_argument(
        "--force",
        action="store_true",
        help="also delete a run that is still running, or one other runs started from",
    )
    p.add_argument("--db", type=Path, help=db_help)
    p.set_defaults(func=delete_command)


def rename_command(args: argparse.Namespace) -> int:
    run = rename_run(open_store(args.db), args.run_id, args.name)
    print(f"run {run.id} is now named {run.name!r}")
    return 0


def tag_command(args: argparse.Namespace) -> int:
    store = open_store(args.db)
    add, remove = ([], args.tags) if args.remove else (args.tags, [])
    run = tag_run(store, args.run_id, add, remove)
    print(f"run {run.id} tags: {', '.join(run.tags) or '(none)'}")
    return 0


def delete_command(args: argparse.Namespace) -> int:
    store = open_store(args.db)
    if not args.yes:
        run = known_run(store, args.run_id)
        raise ResearchError(
            f"delete removes run {run.id} ({run.task}, {run.status}, {run.used}/{run.budget} used) with"
            " its experiments, train.py versions, notes and events for good: add --yes to do it"
        )
    removed = delete_run(store, args.run_id, force=args.force)
    line = (
        f"deleted run {removed.run.id} ({removed.run.task}, {removed.run.status}): {removed.experiments}"
        f" experiments, {removed.versions} train.py versions, {removed.notes} notes, {removed.events} events"
    )
    if removed.detached:
        line += f"; {', '.join(removed.detached)} no longer say they started from it"
    print(line)
    return 0
