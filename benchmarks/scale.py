"""Flat at any size: what one turn costs the server on runs of 100 to 100,000 experiments.

For each size it builds an hpo-covertype run (bulk SQL inserts on the store's own connection: 90% ok,
5% crash, 5% timeout, a refusal event every 50 experiments, ten notes, a best that improves now and
then), then measures, as medians:

- the summary rendered in process (RunService.summary), and over stdio (get_run_summary against a
  spawned `autoresearch-mcp-server` on the same file);
- the default history page (get_experiment_history with no `last`), in process and over stdio;
- the exact-repeat lookup (reserve_experiment refusing a repeat, as run_experiment does under the write
  lock);
- and, where the code has it, `autoresearch-mcp import` of the largest run, exported as a file.

The bulk inserts use only the schema every release has, so the same script measures an older checkout:
put it first on PYTHONPATH (a directory holding its autoresearch_mcp/ with its server/, client/ and
sandbox/ linked inside, as the package-dir mapping installs them) and keep --json; `--before` then puts
those figures beside this checkout's (benchmarks/scale-before.json: main at 9e13c32).

    python benchmarks/scale.py --json /tmp/after.json --out benchmarks/scale.md [--before /tmp/before.json]
"""

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.store.db import canonical_json, sha256

SIZES = (100, 1_000, 10_000, 100_000)
RUN_ID = "r-5ca1e00000"
TASK = "hpo-covertype"
SAMPLE_S = 8.0  # at most this long per measurement (at least 3 samples, at most 25)
LOAD_BEFORE = os.getloadavg()[0]
STDIO_CALL_S = 120.0  # a call over stdio not answered by then is reported as such
PARAMS: dict[str, tuple[float, float, bool]] = {  # name -> (low, high, integer)
    "n_estimators": (10, 1000, True),
    "max_depth": (1, 15, True),
    "learning_rate": (0.001, 1.0, False),
    "subsample": (0.1, 1.0, False),
    "colsample_bytree": (0.1, 1.0, False),
    "min_child_weight": (0.0, 100.0, False),
    "gamma": (0.0, 20.0, False),
    "reg_alpha": (0.0, 100.0, False),
    "reg_lambda": (0.0, 100.0, False),
}


def stamp(i: int) -> str:
    return f"2026-01-01T00:00:00.{i:06d}+00:00"


def build(store: Store, n: int) -> None:
    """A run of n experiments, written with executemany in one transaction."""
    rng = random.Random(n)
    config = {"metric": "macro_f1", "direction": "max", "options": {}}
    with store.db.transaction() as conn:
        conn.execute(
            "INSERT INTO runs (id, name, task, status, budget, target, seed, config_json, created_at, updated_at)"
            " VALUES (?, 'scale', ?, 'running', ?, NULL, 42, ?, ?, ?)",
            (RUN_ID, TASK, n + 1000, canonical_json(config), stamp(0), stamp(0)),
        )
        conn.execute(
            "INSERT INTO artifacts (run_id, version, source, sha256, description, parent_version, created_at)"
            " VALUES (?, 1, 'print(1)\n', ?, 'original', NULL, ?)",
            (RUN_ID, sha256("print(1)\n"), stamp(0)),
        )
        rows, best, seq = [], -1.0, 0
        for i in range(1, n + 1):
            params = {
                name: rng.randint(int(low), int(high)) if whole else round(rng.uniform(low, high), 4)
                for name, (low, high, whole) in PARAMS.items()
            }
            roll = rng.random()
            status = "ok" if roll < 0.9 or i > n - 3 else ("crash" if roll < 0.95 else "timeout")
            metric = round(0.6 + 0.2 * rng.random() ** 3, 4) if status == "ok" else None
            kept = metric is not None and metric > best
            if kept:
                best, seq = metric, seq + 1
            text = canonical_json(params)
            rows.append(
                (
                    RUN_ID, i, text, sha256(text), 1, status,
                    canonical_json({"macro_f1": metric} if metric is not None else {}), metric, int(kept),
                    seq if kept else None, None, None if status == "ok" else f"{status}: boom",
                    stamp(i), stamp(i), 1.0,
                )
            )  # fmt: skip
        conn.executemany(
            "INSERT INTO experiments (run_id, iteration, params_json, params_key, artifact_version, status,"
            " metrics_json, metric, kept, kept_seq, note, error_tail, started_at, finished_at, duration_s)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.executemany(
            "INSERT INTO events (run_id, kind, tool, detail, created_at) VALUES (?, 'refusal', 'run_experiment', ?, ?)",
            [(RUN_ID, "exact repeat", stamp(i)) for i in range(50, n + 1, 50)],
        )
        conn.executemany(
            "INSERT INTO notes (run_id, kind, text, created_at) VALUES (?, ?, ?, ?)",
            [(RUN_ID, "strategy" if k % 2 else "failed", f"note {k}", stamp(k)) for k in range(10)],
        )


def median_ms(work: Callable[[], object]) -> float:
    samples: list[float] = []
    deadline = time.monotonic() + SAMPLE_S
    while len(samples) < 3 or (len(samples) < 25 and time.monotonic() < deadline):
        start = time.perf_counter()
        work()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def repeat_lookup(store: Store) -> Callable[[], object]:
    params = json.loads(
        store.db.reader()
        .execute("SELECT params_json FROM experiments WHERE run_id = ? AND iteration = 1", (RUN_ID,))
        .fetchone()[0]
    )

    def work() -> None:
        try:
            store.reserve_experiment(RUN_ID, params, 1, None)
        except Exception as exc:  # the refusal is the point
            assert "exact repeat" in str(exc), exc
        else:
            raise AssertionError("not refused as a repeat")

    return work


async def over_stdio(db: Path) -> dict[str, float]:
    # (PYTHONPATH too: an older checkout is measured by putting it first on the path)
    env = {k: v for k, v in os.environ.items() if k.startswith("AUTORESEARCH_") or k == "PYTHONPATH"}
    env["AUTORESEARCH_LOG_LEVEL"] = "WARNING"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "autoresearch_mcp.server", "--db", str(db)], env=env
    )
    async with Client(params, read_timeout_seconds=STDIO_CALL_S + 60) as client:

        async def timed(tool: str, args: dict[str, Any]) -> float | None:
            samples: list[float] = []
            deadline = time.monotonic() + SAMPLE_S
            while len(samples) < 3 or (len(samples) < 25 and time.monotonic() < deadline):
                start = time.perf_counter()
                try:
                    with anyio.fail_after(STDIO_CALL_S):
                        result = await client.call_tool(tool, args)
                except TimeoutError:  # recorded as not answered within STDIO_CALL_S
                    return None
                samples.append(time.perf_counter() - start)
                assert not result.is_error, result.content
            return statistics.median(samples) * 1000

        for _ in range(3):  # warm: the task is made once, the process's first calls cost more
            await client.call_tool("get_run_summary", {"run_id": RUN_ID})
            await client.call_tool("get_experiment_history", {"run_id": RUN_ID})
        return {
            "summary_stdio_ms": await timed("get_run_summary", {"run_id": RUN_ID}),
            "history_stdio_ms": await timed("get_experiment_history", {"run_id": RUN_ID}),
        }


def import_seconds(store: Store, workdir: Path) -> float | None:
    """`autoresearch-mcp import` of the run, exported as `export --format json` writes it."""
    try:
        from autoresearch_mcp.server.store.transfer import export_run
    except ImportError:  # a checkout from before the import command
        return None
    file = workdir / "run.json"
    file.write_text(export_run(store, RUN_ID).model_dump_json())
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "autoresearch_mcp.cli",
            "import",
            str(file),
            "--db",
            str(workdir / "imported.db"),
        ],
        check=True,
    )
    return time.perf_counter() - start


def measure(n: int, workdir: Path, with_import: bool) -> dict[str, Any]:
    db = workdir / f"scale-{n}.db"
    store = Store(db)
    start = time.perf_counter()
    build(store, n)
    built = time.perf_counter() - start
    service = Research(ServerSettings(db_path=db), store).open()
    service.runs.get_run_summary(RUN_ID)  # warm
    figures: dict[str, Any] = {
        "n": n,
        "build_s": built,
        "summary_ms": median_ms(lambda: service.runs.get_run_summary(RUN_ID)),
        "history_ms": median_ms(
            lambda: service.experiments.get_experiment_history(RUN_ID, None, 0, "iteration", None)
        ),
        "repeat_ms": median_ms(repeat_lookup(store)),
        **anyio.run(over_stdio, db),
    }
    if with_import:
        figures["import_s"] = import_seconds(store, workdir)
    store.close()
    print(json.dumps(figures), file=sys.stderr)
    return figures


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return f"> {STDIO_CALL_S:g} s"
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.2f} {unit}"


def table(after: list[dict[str, Any]], before: list[dict[str, Any]] | None) -> list[str]:
    columns = [
        ("summary_ms", "summary, in process", "ms"),
        ("summary_stdio_ms", "summary, over stdio", "ms"),
        ("history_ms", "default history page, in process", "ms"),
        ("history_stdio_ms", "default history page, over stdio", "ms"),
        ("repeat_ms", "exact-repeat lookup", "ms"),
    ]
    old = {row["n"]: row for row in before or []}
    lines = [
        "| experiments | " + " | ".join(title for _, title, _ in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for row in after:
        cells = []
        for key, _, unit in columns:
            now = fmt(row.get(key), unit)
            was = old.get(row["n"], {}).get(key)
            cells.append(f"{fmt(was, unit)} → **{now}**" if row["n"] in old else f"**{now}**")
        lines.append(f"| {row['n']:,} | " + " | ".join(cells) + " |")
    return lines


def report(after: list[dict[str, Any]], before: list[dict[str, Any]] | None, command: str) -> str:
    small, large = after[0], after[-1]
    lines = [
        "# Flat at any size: one turn's server work on runs of 100 to 100,000 experiments",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} logical CPUs (shared with other jobs: 1-minute load "
        f"average {LOAD_BEFORE:.2f} before the run, {os.getloadavg()[0]:.2f} after), Python "
        f"{platform.python_version()}. Medians of up to 25 calls (at least 3) per cell. An hpo-covertype run "
        "built with bulk SQL inserts (90% ok, 5% crash, 5% timeout, a refused repeat every 50, ten notes).",
        "",
        *(
            ["Each cell: before (main at 9e13c32, the same script) → **after** (this branch).", ""]
            if before
            else []
        ),
        *table(after, before),
        "",
        f"Summary in process at {large['n']:,}: {fmt(large['summary_ms'], 'ms')}, "
        f"{large['summary_ms'] / small['summary_ms']:.2f}x its time at {small['n']:,} (target: at most 10 ms and "
        f"1.5x); over stdio {fmt(large['summary_stdio_ms'], 'ms')} (target: at most 50 ms). Default history "
        f"page at {large['n']:,}: {fmt(large['history_ms'], 'ms')} in process, "
        f"{fmt(large['history_stdio_ms'], 'ms')} over stdio (target: at most 100 ms). At 100 experiments "
        "the default page and the whole history are the same 100 rows, so that row shows the noise of the "
        "machine, not a change.",
        "",
        "Build (bulk SQL, one transaction): "
        + ", ".join(f"{row['n']:,} in {row['build_s']:.1f} s" for row in after)
        + (
            "; before: " + ", ".join(f"{row['n']:,} in {row['build_s']:.1f} s" for row in before)
            if before
            else ""
        )
        + " (after includes the triggers that keep the counters).",
    ]
    if large.get("import_s") is not None:
        lines += [
            "",
            f"`autoresearch-mcp import` of the {large['n']:,}-experiment run (exported as `export --format json`"
            f" writes it): {large['import_s']:.1f} s, the whole command (target: at most 2 minutes).",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated run lengths")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--before", type=Path, help="figures of an earlier checkout (its --json), shown beside"
    )
    parser.add_argument("--out", type=Path, help="write the Markdown report here")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="autoresearch-scale-") as tmp:
        after = [measure(n, Path(tmp), with_import=n == max(sizes)) for n in sizes]
    if args.json:
        args.json.write_text(json.dumps(after, indent=2))
    before = json.loads(args.before.read_text()) if args.before else None
    command = "python benchmarks/scale.py " + " ".join(sys.argv[1:] if argv is None else argv)
    text = report(after, before, command.strip())
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
