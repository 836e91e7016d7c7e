"""The per-mode, per-seed table of a `compare` results folder made with a real model.

For each run: experiments, LLM calls, refused calls by kind, best metric, the billed tokens (what the
provider counted: llama.cpp reports its own usage, Qwen's tokenizer and chat template), every token
measure and the wall-clock, then each mode's mean and the spread of the best metric over seeds.
Everything comes from the folder `compare` wrote: results.json, its runs.db and the transcripts; the
billed figures of folders written before results.json had them are read from the transcripts.

Refusals by kind come from results.json where `compare` recorded them; folders written before it did get
them from the run's event log in runs.db (the server's refusals, by their message) and from the
transcripts (replies the agent could not use: no tool call, or no parsable proposal).

Usage: python benchmarks/real_model_table.py benchmarks/results/hpo-15-qwen2.5-coder-1.5b/seed-*
"""

import json
import sqlite3
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from autoresearch_mcp.contract.transcript import load_transcript, totals

# A server refusal's message starts with words that name its kind (server/runs.py, server/store/).
MESSAGE_KINDS = (
    ("exact repeat", "exact_repeat"),
    ("invalid params", "invalid_params"),
    ("edit ", "rejected_edit"),
    ("no change", "rejected_edit"),
    ("give exactly one", "bad_argument"),
    ("This version of train.py is already benchmarked", "exact_repeat"),
)


def _kind(message: str) -> str:
    return next((kind for start, kind in MESSAGE_KINDS if message.startswith(start)), "other")


def _transcript(folder: Path, mode: str, seed: int) -> list[dict[str, Any]]:
    return load_transcript(folder / "transcripts" / f"{mode}-{seed}.jsonl.gz")


def derived_refusals(folder: Path, run: dict[str, Any]) -> dict[str, int]:
    """Refusals of a run whose results.json predates `refusals`: the event log, then the transcript."""
    conn = sqlite3.connect(folder / "runs.db")
    try:
        rows = conn.execute(
            "SELECT detail FROM events WHERE run_id = ? AND kind = 'refusal'", (run["run_id"],)
        ).fetchall()
    finally:
        conn.close()
    kinds = Counter(_kind(detail) for (detail,) in rows)
    calls = _transcript(folder, run["mode"], run["seed"])
    if run["mode"] == "stateful":
        no_call = sum(1 for c in calls if not c["response"]["tool_calls"])
        if no_call:
            kinds["no_tool_call"] += no_call
    else:
        # A stateless reply records an experiment or is refused by the server; the rest had no proposal.
        unused = len(calls) - run["totals"]["experiments"] - sum(kinds.values())
        if unused > 0:
            kinds["unparsed_reply"] += unused
    return dict(sorted(kinds.items()))


def table(folders: list[Path]) -> str:
    """One table over the runs of every folder (one `compare` per seed keeps each seed's results even
    when a later one is interrupted), then each mode's summary over all of them."""
    everything = [(folder, json.loads((folder / "results.json").read_text())) for folder in folders]
    first = everything[0][1]
    mixed = sorted({f"{r['task']}, {r['iterations']} iterations" for _, r in everything})
    if len(mixed) > 1:  # a mean over two tasks means nothing (it once mixed codeopt into HPO's refusals)
        raise SystemExit(f"these folders hold different studies ({'; '.join(mixed)}): one table each")
    lines = [
        f"task {first['task']}, {first['iterations']} iterations, llm {first['llm']}, "
        f"sampling {json.dumps(first.get('sampling', 'not recorded'))}",
        "",
        "| mode | seed | experiments | LLM calls | refused (by kind) | best | billed | context | symmetric "
        "| full | output | wall-clock s | stop |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    by_mode: dict[str, list[dict[str, Any]]] = {}
    for folder, run in ((f, run) for f, results in everything for run in results["runs"]):
        t = run["totals"]
        refusals = t.get("refusals")
        if refusals is None:
            refusals = derived_refusals(folder, run)
        billed = t.get("billed_tokens")
        if billed is None:
            billed = totals(_transcript(folder, run["mode"], run["seed"])).billed
        by_mode.setdefault(run["mode"], []).append({**t, "refusals": refusals, "billed_tokens": billed})
        kinds = ", ".join(f"{k} {v}" for k, v in refusals.items()) or "none"
        best = f"{t['best_metric']:.4f}" if t["best_metric"] is not None else "none"
        lines.append(
            f"| {run['mode']} | {run['seed']} | {t['experiments']} | {t['llm_calls']} | "
            f"{sum(refusals.values())} ({kinds}) | {best} | {billed:,.0f} | {t['context_tokens']:,.0f} | "
            f"{t.get('symmetric_tokens', 0):,.0f} | {t['full_tokens']:,.0f} | {t['output_tokens']:,.0f} | "
            f"{t['wall_s']:,.0f} | {run['stop_reason']} |"
        )
    lines += [
        "",
        "| mode | mean best | best per seed (sd) | refused / calls | mean billed tokens | mean full tokens "
        "| full tokens per call |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode, runs in by_mode.items():
        bests = [r["best_metric"] for r in runs if r["best_metric"] is not None]
        calls = sum(r["llm_calls"] for r in runs)
        refused = sum(sum(r["refusals"].values()) for r in runs)
        spread = f" (sd {statistics.stdev(bests):.4f})" if len(bests) > 1 else ""
        mean = f"{statistics.fmean(bests):.4f}" if bests else "none"
        per_seed = ", ".join(f"{b:.4f}" for b in bests)
        full = statistics.fmean(r["full_tokens"] for r in runs)
        billed = statistics.fmean(r["billed_tokens"] for r in runs)
        per_call = sum(r["full_tokens"] for r in runs) / calls
        lines.append(
            f"| {mode} | {mean} | {per_seed}{spread} | {refused}/{calls} ({refused / calls:.0%}) | {billed:,.0f} "
            f"| {full:,.0f} | {per_call:,.0f} |"
        )
    uptake = Counter(
        call["suggestion"]
        for folder, results in everything
        if results.get("suggest")
        for run in results["runs"]
        for call in _transcript(folder, run["mode"], run["seed"])
        if "suggestion" in call
    )
    if uptake:  # runs with the optimiser's line: what the model made of it, turn by turn
        said = ", ".join(f"{kind} {uptake[kind]}" for kind in ("took", "changed", "ignored"))
        lines += ["", f"The optimiser's suggestion, over {uptake.total()} turns that offered one: {said}."]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table([Path(arg) for arg in sys.argv[1:]]))
