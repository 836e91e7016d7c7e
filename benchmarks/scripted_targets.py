"""The scripted-double token benchmarks of issues 16 and 30: run them, judge them against their
targets, and check that the committed results are what the documented commands give.

The three studies are the commands docs/benchmarks.md documents (hpo-covertype at 15 iterations on
three seeds and at 200 on one, codeopt-records at 40 on three), all with the `scripted` backend: a
deterministic test double, not a language model, so these measure what each context strategy sends,
not what a model decides. Each target is read off the study's results.json.

    python benchmarks/scripted_targets.py                        # judge the committed results
    python benchmarks/scripted_targets.py --run /tmp/scripted    # regenerate all three there, judge them
    python benchmarks/scripted_targets.py --run /tmp/s --check   # ... and fail if they differ from the
                                                                 # committed results beyond the tolerance
    python benchmarks/scripted_targets.py --quick /tmp/q         # a few minutes: seed 42 of hpo-15 and
                                                                 # the first iterations of codeopt-40

The full regeneration takes about 40 minutes on 2 cores: run it after a change to what a request holds
(the summary, the prompts, the tools), and commit what it writes. CI runs the quick form on every commit:
it catches a change in the per-turn token shape, iteration by iteration, against the committed runs of
seed 42. Tokens must agree within --tolerance (default 2%: codeopt's summary carries measured speedups,
whose digits move with timing noise), the profile lines and the quoted functions of a code turn left out
of both sides (which slowest lines are named, and which function is hottest, move with the load); the
best F1 of the HPO studies within 0.002.
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from autoresearch_mcp.client.meter import count
from autoresearch_mcp.contract.transcript import load_transcript

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "benchmarks" / "results"
COVTYPE_20K = ROOT / "server" / "tasks" / "builtin" / "hpo-covertype" / "source" / "covtype_20k.csv.gz"
FIXTURE = ROOT / "tests" / "data" / "covtype_2k.csv.gz"

# study -> the `compare` arguments docs/benchmarks.md gives (the data path filled in by --data)
STUDIES: dict[str, list[str]] = {
    "hpo-15": [
        "--task",
        "hpo-covertype",
        "--iterations",
        "15",
        "--seeds",
        "42,123,456",
        "--hpo-threads",
        "1",
    ],
    "hpo-200": ["--task", "hpo-covertype", "--iterations", "200", "--seeds", "42", "--hpo-threads", "1"],
    # Two modes, side by side: the study predates the strong baseline, and a third mode would add half
    # again to CI's quick check of it.
    "codeopt-40": [
        "--task",
        "codeopt-records",
        "--iterations",
        "40",
        "--seeds",
        "42,123,456",
        "--modes",
        "stateless,stateful",
        "--parallel",
    ],
}
TOKEN_KEYS = ("context_tokens", "symmetric_tokens", "full_tokens", "cache_weighted_tokens", "output_tokens")
MODES = ("stateless", "stateless-strong", "stateful")


def run_study(name: str, out: Path, covtype: Path) -> float:
    """One documented command, into out/name; returns its wall-clock seconds."""
    data = {"hpo-15": ["--data", str(covtype)], "hpo-200": ["--data", str(FIXTURE)]}.get(name, [])
    command = [
        "autoresearch-mcp",
        "compare",
        *STUDIES[name],
        "--llm",
        "scripted",
        "--out",
        str(out / name),
        *data,
    ]
    print("$ " + " ".join(command), flush=True)
    started = time.monotonic()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


# The quick check: (study, the committed seed it reruns, iterations compared)
QUICK = (("hpo-15", 42, 15), ("codeopt-40", 42, 8))


def run_quick(out: Path, covtype: Path, tolerance: float) -> list[str]:
    """Rerun seed 42 of hpo-15 and the first iterations of codeopt-40's seed 42 (both modes side by
    side), and say where their per-iteration tokens, up to each iteration, or best F1 differ from the
    committed runs."""
    found = []
    for study, seed, iterations in QUICK:
        args = list(STUDIES[study])
        args[args.index("--iterations") + 1] = str(iterations)
        args[args.index("--seeds") + 1] = str(seed)
        data = ["--data", str(covtype)] if study == "hpo-15" else []
        side_by_side = [] if "--parallel" in args else ["--parallel"]
        command = ["autoresearch-mcp", "compare", *args, "--llm", "scripted", *side_by_side, *data]
        command += ["--out", str(out / study)]
        print("$ " + " ".join(command), flush=True)
        started = time.monotonic()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        print(
            f"{study}, seed {seed}, {iterations} iterations: {time.monotonic() - started:.0f} s", flush=True
        )
        fresh = json.loads((out / study / "results.json").read_text())
        committed = json.loads((COMMITTED / study / "results.json").read_text())
        # Every mode the committed study holds (codeopt-40 has no strong baseline).
        for mode in [m for m in MODES if any(r["mode"] == m for r in committed["runs"])]:
            new, old = (_per_iteration(r, mode, seed, iterations) for r in (fresh, committed))
            for rows, folder in ((new, out / study), (old, COMMITTED / study)):
                _without_measured_parts(rows, folder / "transcripts" / f"{mode}-{seed}.jsonl.gz")
            found += _row_differences(
                f"{study} seed {seed} {mode}", new, old, study.startswith("hpo"), tolerance
            )
    return found


# A code task's turn carries the profile of the current version: measured times whose digits, and the
# slowest lines named, move with the machine's load as the speedups do (one line more or less: ~40
# tokens). The function(s) shown follow the profile's hottest one, so which function a turn quotes (and
# its length) moves with the load too. The quick check compares the rest of each request, which is the
# shape it is about: the summary, the history, the prompts and the tools.
MEASURED_PARTS = re.compile(
    r"^(?:Time by function: |Slowest lines of |train\.py defines: )[^\n]*$"
    r"|^\w+ \([\w./-]+ lines \d+-\d+\):(?: as in your reply below\.|\n```python\n.*?\n```)$",
    re.MULTILINE | re.DOTALL,
)
SENT_KEYS = ("context_tokens", "symmetric_tokens", "full_tokens", "cache_weighted_tokens")


def _without_measured_parts(rows: list[dict[str, Any]], transcript: Path) -> None:
    """Take the tokens of each call's profile lines and quoted functions off its iteration's row (one
    call per iteration, as the scripted double makes them; rows are left as they are otherwise)."""
    records = load_transcript(transcript) if transcript.is_file() else []
    if len(records) < len(rows):
        return
    for row, record in zip(rows, records, strict=False):
        sent = "\n".join(m.get("text") or "" for m in record["request"]["messages"])
        measured = sum(count(part) + 1 for part in MEASURED_PARTS.findall(sent))
        for key in SENT_KEYS:
            row[key] -= measured


def _per_iteration(results: dict[str, Any], mode: str, seed: int, iterations: int) -> list[dict[str, Any]]:
    (run,) = [r for r in results["runs"] if r["mode"] == mode and r["seed"] == seed]
    return [row for row in run["per_iteration"] if row["iteration"] <= iterations]


def _row_differences(
    label: str, new: list[dict[str, Any]], old: list[dict[str, Any]], compare_metric: bool, tolerance: float
) -> list[str]:
    if len(new) != len(old):
        return [f"{label}: {len(new)} iterations recorded, the committed run has {len(old)}"]
    for row_old, row_new in zip(old, new, strict=True):  # the first iteration whose request moved
        for key in TOKEN_KEYS:
            a, b = row_old[key], row_new[key]
            if abs(a - b) > max(tolerance * abs(a), 2):
                return [
                    f"{label} {key} at iteration {row_new['iteration']}: committed {a:,.0f}, regenerated {b:,.0f}"
                ]
    if compare_metric and abs(old[-1]["best_metric"] - new[-1]["best_metric"]) > 0.002:
        return [
            f"{label} best_metric: committed {old[-1]['best_metric']:.4f}, regenerated {new[-1]['best_metric']:.4f}"
        ]
    return []


def stateful_context_per_iteration(results: dict[str, Any], first: int, last: int) -> float:
    """Mean stateful context tokens per iteration over iterations first..last (all seeds)."""
    rows = [
        row["context_tokens"]
        for run in results["runs"]
        if run["mode"] == "stateful"
        for row in run["per_iteration"]
        if first <= row["iteration"] <= last
    ]
    return statistics.fmean(rows)


def targets(folder: Path) -> list[tuple[str, str, float, str, bool]]:
    """(study, measure, value, target, met) for each of the scripted targets: issue 16's (against the
    paper's baseline), then issue 30's (dollars against the strong baseline, each side cached by its
    provider's rules, for every named model)."""
    load = {name: json.loads((folder / name / "results.json").read_text()) for name in STUDIES}
    rows: list[tuple[str, str, float, str, bool]] = []

    def ratio(study: str, key: str, at_least: float) -> None:
        value = load[study]["summary"]["ratio"].get(key)
        label = key.replace("_tokens", "") + " ratio (stateless / stateful)"
        rows.append((study, label, value or 0.0, f">= {at_least:g}x", bool(value) and value >= at_least))

    ratio("hpo-15", "context_tokens", 7)
    ratio("hpo-15", "full_tokens", 2)
    ratio("hpo-200", "context_tokens", 50)
    ratio("hpo-200", "full_tokens", 20)
    ratio("codeopt-40", "full_tokens", 20)
    per_iteration = stateful_context_per_iteration(load["hpo-15"], 1, 15)
    rows.append(
        ("hpo-15", "stateful context tokens per iteration", per_iteration, "<= 170", per_iteration <= 170)
    )
    early = stateful_context_per_iteration(load["hpo-200"], 101, 110)
    late = stateful_context_per_iteration(load["hpo-200"], 191, 200)
    change = (late - early) / early
    rows.append(
        (
            "hpo-200",
            "stateful context per iteration, 191-200 vs 101-110",
            change * 100,
            "within ±10%",
            abs(change) <= 0.1,
        )
    )
    for study, at_least in (("hpo-15", 2.0), ("hpo-200", 1.0)):
        summary = load[study]["summary"]
        strong = summary.get("cost_ratio", {}).get("stateless-strong")
        if strong is None:
            rows.append((study, "USD ratio, strong cached baseline / stateful", 0.0, "not run", False))
            continue
        for model, value in strong.items():
            label = f"USD ratio on {model}, strong cached baseline / stateful"
            target = f">= {at_least:g}x" if at_least > 1 else "> 1x (cheaper)"
            rows.append((study, label, value or 0.0, target, bool(value) and value >= at_least and value > 1))
        billed = summary.get("ratio_strong", {}).get("billed_tokens")
        rows.append((study, "billed ratio, strong baseline / stateful", billed or 0.0, "(reported)", True))
    return rows


def differences(fresh: Path, committed: Path, tolerance: float) -> list[str]:
    """Where the regenerated results differ from the committed ones beyond the tolerance."""
    found = []
    for name in STUDIES:
        new = json.loads((fresh / name / "results.json").read_text())["summary"]
        old = json.loads((committed / name / "results.json").read_text())["summary"]
        for mode in [m for m in MODES if m in old]:
            for key in TOKEN_KEYS:
                a, b = old[mode][key], new[mode][key]
                if abs(a - b) > tolerance * max(abs(a), 1):
                    found.append(f"{name} {mode} {key}: committed {a:,.0f}, regenerated {b:,.0f}")
            if name.startswith("hpo"):
                a, b = old[mode]["best_metric"], new[mode]["best_metric"]
                if abs(a - b) > 0.002:
                    found.append(f"{name} {mode} best_metric: committed {a:.4f}, regenerated {b:.4f}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="regenerate the three studies into this folder")
    parser.add_argument(
        "--check", action="store_true", help="with --run: fail on a difference from the committed"
    )
    parser.add_argument("--tolerance", type=float, default=0.02, help="relative, for token totals")
    parser.add_argument(
        "--quick",
        type=Path,
        help="rerun seed 42 of hpo-15 and codeopt's first iterations here, and check them",
    )
    parser.add_argument("--data", type=Path, default=COVTYPE_20K, help="the 20,000-row Covertype CSV")
    args = parser.parse_args(argv)
    if args.quick is not None:
        found = run_quick(args.quick, args.data, args.tolerance)
        if found:
            print(
                "\nThe per-turn token shape differs from the committed runs (regenerate them with --run,"
                " see docs/benchmarks.md):\n" + "\n".join(found)
            )
            return 1
        print(
            f"\nSeed 42 matches the committed runs iteration by iteration (tokens within {args.tolerance:.0%})."
        )
        return 0
    folder = COMMITTED
    if args.run is not None:
        if not args.data.is_file():
            raise SystemExit(
                f"hpo-15 needs the 20,000-row Covertype CSV: nothing at {args.data} (--data PATH)"
            )
        args.run.mkdir(parents=True, exist_ok=True)
        for name in STUDIES:
            print(f"{name}: {run_study(name, args.run, args.data):.0f} s", flush=True)
        folder = args.run
    print("\nScripted double (a deterministic test double, not a language model):\n")
    print("| study | measure | measured | target | |")
    print("|---|---|---:|---|---|")
    for study, measure, value, target, met in targets(folder):
        shown = f"{value:+.1f}%" if target.startswith("within") else f"{value:,.1f}"
        print(f"| {study} | {measure} | {shown} | {target} | {'met' if met else '**missed**'} |")
    if args.check:
        if args.run is None:
            raise SystemExit("--check compares a fresh --run against the committed results: give --run DIR")
        found = differences(args.run, COMMITTED, args.tolerance)
        if found:
            print("\nThe committed results are not what the commands give here:\n" + "\n".join(found))
            return 1
        print(f"\nThe regenerated results match the committed ones (tokens within {args.tolerance:.0%}).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
