"""Memory across runs: does a run started from an earlier one (`run --from-run`) pick up where it left off?

Per seed s, four runs of the real agent against a spawned stdio server (the client API, as `compare`
drives it), all on one database:

- first:   N iterations, seed s;
- chained: N iterations, seed s+OFFSET, started from `first` (start_run's from_run: `first`'s best is
           re-measured as its experiment #1, its summary carries `first`'s best, notes and failures);
- single:  2N iterations, seed s (the same work as the pair, in one run);
- cold:    N iterations, seed s+OFFSET, started from nothing (the second run without memory).

The second runs take another seed so that `cold` is a second, independent run (with seed s it would
repeat `first` step for step) and `chained` cannot replay `first`'s draws. With the scripted double and
one training thread everything is deterministic (the double's proposals depend only on its seed and the
summary's Best line), so `single`'s first N experiments are `first`'s.

Then the re-check: each run's final best is trained again on the same K fresh seeds (--recheck-seeds,
default 5; each an experiment of its own run on that seed, no LLM) and compared on the mean. A run's
own best is the highest of its noisy measurements, so it flatters the run with more of them: `single`
keeps the lucky figure of a configuration that `chained` re-measured on another seed. The split is the
same for every run (the paper's one stratified 80/20 split), so the re-check varies the training seed
only: it takes out the luck of a maximum over noisy measurements, not a fit to the test split, and a
configuration without row or column sampling scores the same on every seed.

    python benchmarks/memory_chain.py --llm scripted \
        --hpo-threads 1 --seeds 42,123,456 --budget 15 --jobs 2

A local model instead (opt-in; any OpenAI-compatible endpoint):

    python benchmarks/memory_chain.py --llm openai --base-url http://127.0.0.1:8088/v1 \
        --tool-choice run_experiment --temperature 1.0 --max-failures 10 --max-tokens 300 \
        --llm-timeout 900 --hpo-threads 1 --seeds 42 \
        --budget 15 --out benchmarks/memory_chain_local --transcripts benchmarks/memory_chain_local --resume

Writes OUT.md and OUT.json (default benchmarks/memory_chain.*) after every seed, so a long run stopped
part way keeps the seeds it finished; --resume reuses them and runs only the seeds OUT.json lacks (and
re-checks the kept seeds that have no re-check yet). --jobs 2 runs two seeds at a time (each run trains
on --hpo-threads, so 2 x 1 thread fills 2 cores; the figures do not change, the wall-clock does).
--recheck-only runs no agent: it re-checks the seeds of OUT.json, taking each best's params from the
record, else from --db, else from the run's transcript in --transcripts (the Best line naming it). The
runs' database goes to a temporary directory unless --db is given; transcripts too, unless --transcripts
names a folder (they are kept there, gzipped beside the raw ones).
"""

import argparse
import asyncio
import json
import re
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autoresearch_mcp.client.agent_args import add_agent_arguments, check_agent_args, positive_int
from autoresearch_mcp.client.check import AgentResult
from autoresearch_mcp.client.compare import pack_transcripts
from autoresearch_mcp.client.connect import ResearchClient, connect
from autoresearch_mcp.client.run_cmd import run_session, spawn_args
from autoresearch_mcp.contract.arguments import FinishRunArgs, RunExperimentArgs, StartRunArgs
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.transcript import load_transcript, totals

TOLERANCE = 0.002  # the chained pair should reach the single long run's best within this much
LABELS = ("first", "chained", "single", "cold")
# The re-check's common seeds are 10001, 10002, ...: apart from the runs' own seeds (s and s + 1).
RECHECK_SEED_BASE = 10_000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_agent_arguments(parser)  # --task, --llm, --budget, --data, --db, --hpo-threads, ... as `run` has them
    parser.add_argument("--seeds", default="42,123,456", help="comma-separated seeds")
    parser.add_argument("--second-seed-offset", type=int, default=1, help="the second runs' seed is s + this")
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/memory_chain"), help="writes OUT.md, OUT.json"
    )
    parser.add_argument(
        "--render-only", action="store_true", help="run nothing: write OUT.md again from OUT.json's runs"
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep the seeds OUT.json already has; run only the others"
    )
    parser.add_argument(
        "--transcripts", type=Path, default=None, help="keep the transcripts in this folder (and gzipped)"
    )
    parser.add_argument(
        "--recheck-seeds",
        type=int,
        default=5,
        choices=range(0, 11),
        metavar="K",
        help="train each run's final best again on these many common seeds (0: no re-check)",
    )
    parser.add_argument(
        "--recheck-only", action="store_true", help="run no agent: re-check the seeds OUT.json holds"
    )
    parser.add_argument("--jobs", type=positive_int, default=1, help="seeds run at a time")
    args = parser.parse_args(argv)
    if args.recheck_only and not args.recheck_seeds:
        parser.error("--recheck-only needs --recheck-seeds of 1 or more")
    args.run_id = None
    return args


async def one_run(
    args: argparse.Namespace, work: Path, label: str, seed: int, budget: int, from_run: str | None
) -> dict[str, Any]:
    run_args = argparse.Namespace(**{**vars(args), "iterations": budget, "from_run": from_run})
    transcript = (args.transcripts or work / "transcripts") / f"{label}-{seed}.jsonl"
    started = time.monotonic()
    result: AgentResult = await run_session(
        run_args, mode="stateful", seed=seed, transcript=transcript, name=f"memory-chain {label} seed {seed}"
    )
    run = result.run
    assert run is not None
    first = result.history[0] if result.history else None
    best = next((e for e in result.history if run.best and e.iteration == run.best.iteration), None)
    calls = load_transcript(transcript)
    spent = totals(calls)
    record = {
        "label": label,
        "seed": seed,
        "budget": budget,
        "run_id": run.id,
        "from_run": run.from_run,
        "experiments": run.used,
        "best": None if run.best is None else round(run.best.metric, 4),
        "best_iteration": None if run.best is None else run.best.iteration,
        "best_params": None if best is None else best.params,
        "first_experiment": None
        if first is None
        else {"metric": first.metric, "note": first.note, "params": first.params},
        "context_tokens": spent.context,
        "full_tokens": spent.full,
        "llm_calls": spent.calls,
        "stop_reason": result.stop_reason,
        "llm": calls[0].get("llm") if calls else None,  # the model the endpoint named
        "wall_s": round(time.monotonic() - started, 1),
    }
    print(
        f"{label} seed {seed}: {run.id} best {record['best']} at #{record['best_iteration']}"
        f" ({run.used}/{budget}, {record['wall_s']} s)",
        flush=True,
    )
    return record


async def chain(args: argparse.Namespace, work: Path, seed: int) -> dict[str, Any]:
    n, second = args.iterations, seed + args.second_seed_offset
    first = await one_run(args, work, "first", seed, n, None)
    chained = await one_run(args, work, "chained", second, n, first["run_id"])
    single = await one_run(args, work, "single", seed, 2 * n, None)
    cold = await one_run(args, work, "cold", second, n, None)
    remeasure = chained["first_experiment"] or {}
    pair = max(v for v in (first["best"], chained["best"]) if v is not None)
    return {
        "seed": seed,
        "second_seed": second,
        "runs": [first, chained, single, cold],
        "first_best": first["best"],
        "remeasured": remeasure.get("metric"),
        "chained_best": chained["best"],
        "pair_best": pair,
        "single_best": single["best"],
        "cold_best": cold["best"],
    }


def recheck_seeds(k: int) -> list[int]:
    return [RECHECK_SEED_BASE + i for i in range(1, k + 1)]


_BEST_LINE = re.compile(r"^Best \w+=[-+\d.eE]+.*?\(#(\d+)\): (.+)$", re.MULTILINE)
_PAIR = re.compile(r"(\w+)=([-+\d.eE]+)")


class RecheckError(Exception):
    """A re-check that cannot be done: the seed's runs stay recorded without it (--resume tries again)."""


def params_from_transcript(path: Path, iteration: int) -> dict[str, Any] | None:
    """Experiment #iteration's params as a later request's summary shows them, for results recorded before
    the records kept `best_params`: the Best line gives the best in full (`Best macro_f1=0.69 (#10): a=1 b=2`),
    each value to 4 significant digits. A best found by a run's last experiment is on no later line."""
    for candidate in (path, path.with_name(path.name + ".gz")):
        for call in load_transcript(candidate):
            for message in call["request"]["messages"]:
                for match in _BEST_LINE.finditer(message.get("text") or ""):
                    if int(match.group(1)) == iteration:
                        return {name: json.loads(value) for name, value in _PAIR.findall(match.group(2))}
    return None


async def best_params(
    rc: ResearchClient, record: dict[str, Any], transcripts: Path | None
) -> tuple[dict[str, Any], str]:
    """A run's final best params and where they came from: its record, else its history on the server,
    else its transcript."""
    if record.get("best_params") is not None:
        return dict(record["best_params"]), "record"
    where = f"{record['label']} seed {record['seed']} ({record['run_id']})"
    if record.get("best_iteration") is None:
        raise RecheckError(f"{where} has no best to re-check")
    try:
        history = await rc.history(record["run_id"])
    except ResearchError:  # not in this database: the transcript may still say
        history = []
    for experiment in history:
        if experiment.iteration == record["best_iteration"]:
            return experiment.params, "database"
    if transcripts is not None:
        found = params_from_transcript(
            transcripts / f"{record['label']}-{record['seed']}.jsonl", record["best_iteration"]
        )
        if found:
            return found, "transcript"
    raise RecheckError(
        f"no params for {where}'s best #{record['best_iteration']}: the record has none, the"
        " database (--db) does not hold the run and no transcript (--transcripts) names it"
    )


async def recheck(args: argparse.Namespace, seed_result: dict[str, Any]) -> dict[str, Any]:
    """Each run's final best trained again on the same fresh seeds, one re-check run per seed (as any
    run: start_run, run_experiment, finish_run), each configuration once even where runs share it."""
    seed, seeds = seed_result["seed"], recheck_seeds(args.recheck_seeds)
    records = {r["label"]: r for r in seed_result["runs"]}
    configs: list[tuple[dict[str, Any], list[str]]] = []
    sources: dict[str, str] = {}
    async with connect(
        server_url=args.server_url, token=args.token, db=args.db, data=args.data, server_args=spawn_args(args)
    ) as rc:
        for label in LABELS:
            params, sources[label] = await best_params(rc, records[label], args.transcripts)
            shared = next((labels for known, labels in configs if known == params), None)
            if shared is None:
                configs.append((params, [label]))
            else:
                shared.append(label)
        metrics: list[list[float]] = [[] for _ in configs]
        for other in seeds:
            arguments = {
                "task": args.task,
                "budget": len(configs),
                "seed": other,
                "name": f"memory-chain re-check of seed {seed}'s bests on seed {other}",
            }
            started = await rc.result(StartRunArgs(**arguments))
            reason = "re-check stopped part way"
            try:
                for values, (params, labels) in zip(metrics, configs, strict=True):
                    note = f"re-check: the best of {', '.join(labels)} (seed {seed})"
                    call = RunExperimentArgs(run_id=started.run_id, params=params, base="defaults", note=note)
                    result = await rc.result(call)
                    if result.experiment.metric is None:
                        raise RecheckError(
                            f"the best of {', '.join(labels)} (seed {seed}) ended"
                            f" {result.experiment.status} on seed {other}: {result.experiment.error_tail}"
                        )
                    values.append(result.experiment.metric)
                reason = "re-check done"
            finally:  # no re-check run is left open, however this one ends
                await rc.result(FinishRunArgs(run_id=started.run_id, reason=reason))
    runs = {
        label: {
            "params": params,
            "metrics": [round(v, 6) for v in values],
            "mean": round(statistics.fmean(values), 4),
            "params_from": sources[label],
        }
        for values, (params, labels) in zip(metrics, configs, strict=True)
        for label in labels
    }
    print(
        f"re-check seed {seed}: " + ", ".join(f"{label} {runs[label]['mean']}" for label in LABELS),
        flush=True,
    )
    return {"seeds": seeds, "runs": runs}


def mean(values: list[float | None]) -> float | None:
    numbers = [v for v in values if v is not None]
    return round(statistics.fmean(numbers), 4) if numbers else None


def summarise(seeds: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("first_best", "remeasured", "chained_best", "pair_best", "single_best", "cold_best")
    means = {key: mean([s[key] for s in seeds]) for key in keys}
    gaps = [s["chained_best"] - s["single_best"] for s in seeds]
    tokens = {
        label: mean([r["context_tokens"] for s in seeds for r in s["runs"] if r["label"] == label])
        for label in ("first", "chained", "single", "cold")
    }
    return {
        "means": means,
        "chained_minus_single_per_seed": [round(g, 4) for g in gaps],
        "chained_minus_single_sd": round(statistics.stdev(gaps), 4) if len(gaps) > 1 else None,
        "chained_within_tolerance_of_single": round(means["single_best"] - means["chained_best"], 4)
        <= TOLERANCE,
        "chained_beats_cold": means["chained_best"] > means["cold_best"],
        "mean_context_tokens": tokens,
        "recheck": summarise_recheck(seeds),
    }


def summarise_recheck(seeds: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The targets on the re-check's means, where every seed has a re-check on the same seeds."""
    checks = [s.get("recheck") for s in seeds]
    if not checks or any(c is None for c in checks) or len({tuple(c["seeds"]) for c in checks}) > 1:
        return None
    means = {label: mean([c["runs"][label]["mean"] for c in checks]) for label in LABELS}
    gaps = [c["runs"]["chained"]["mean"] - c["runs"]["single"]["mean"] for c in checks]
    return {
        "seeds": checks[0]["seeds"],
        "means": means,
        "chained_minus_single_per_seed": [round(g, 4) for g in gaps],
        "chained_minus_single_sd": round(statistics.stdev(gaps), 4) if len(gaps) > 1 else None,
        "chained_within_tolerance_of_single": round(means["single"] - means["chained"], 4) <= TOLERANCE,
        "chained_beats_cold": means["chained"] > means["cold"],
    }


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def describe_llm(results: dict[str, Any]) -> str:
    if results["llm"].startswith("scripted"):
        return results["llm"]
    sampling = "" if results.get("temperature") is None else f", temperature {results['temperature']}"
    named = [r["llm"] for s in results["per_seed"] for r in s["runs"] if r.get("llm")]
    model = results.get("model") or (named[0] if named else "the endpoint's model")
    return f"{model} via {results['llm']} at {results.get('base_url')}{sampling}"


def markdown(results: dict[str, Any]) -> str:
    s, n = results["summary"], results["iterations"]
    m = s["means"]
    lines = [
        "# Memory across runs: two chained runs against one long run and a cold second run",
        "",
        f"Task {results['task']}, LLM: {describe_llm(results)}, seeds {', '.join(map(str, results['seeds']))}"
        f" (second runs: seed + {results['second_seed_offset']}), {n} iterations per run"
        f" ({2 * n} for the single run), {results['hpo_threads'] or 'all'} training thread(s),"
        f" data {results['data']}. Written by `benchmarks/memory_chain.py`.",
        "",
        "```",
        *results.get("commands", [results.get("command")]),  # older files hold one "command"
        "```",
        "",
        f"- **first**: {n} iterations, seed s. **chained**: {n} iterations, seed s+1, `--from-run` first:"
        " its experiment #1 re-measures first's best (one unit of its budget), its summary carries first's"
        " best, notes and failed approaches.",
        f"- **single**: one run of {2 * n} iterations, seed s. **cold**: {n} iterations, seed s+1, no memory.",
        "- The pair's best is the chained run's best (first's best, re-measured, is one of its"
        " experiments); `max(first, chained)` is shown beside it.",
        "",
        "| seed | first | re-measured as chained #1 | chained | max(first, chained) | single "
        f"{2 * n} | cold | chained − single | chained − cold |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for seed in results["per_seed"]:
        lines.append(
            f"| {seed['seed']} | {fmt(seed['first_best'])} | {fmt(seed['remeasured'])} |"
            f" {fmt(seed['chained_best'])} | {fmt(seed['pair_best'])} | {fmt(seed['single_best'])} |"
            f" {fmt(seed['cold_best'])} | {seed['chained_best'] - seed['single_best']:+.4f} |"
            f" {seed['chained_best'] - seed['cold_best']:+.4f} |"
        )
    lines.append(
        f"| **mean** | {fmt(m['first_best'])} | {fmt(m['remeasured'])} | {fmt(m['chained_best'])} |"
        f" {fmt(m['pair_best'])} | {fmt(m['single_best'])} | {fmt(m['cold_best'])} |"
        f" {m['chained_best'] - m['single_best']:+.4f} | {m['chained_best'] - m['cold_best']:+.4f} |"
    )
    tokens = s["mean_context_tokens"]
    gaps, sd = s["chained_minus_single_per_seed"], s["chained_minus_single_sd"]
    within = "met" if s["chained_within_tolerance_of_single"] else "missed"
    beats = "met" if s["chained_beats_cold"] else "missed"
    lines += [
        "",
        f"Targets: the chained pair within {TOLERANCE} macro F1 of the single {2 * n}-iteration run on"
        f" average: **{within}** ({m['chained_best'] - m['single_best']:+.4f}); the chained second run"
        f" beats the cold second run on average: **{beats}** ({m['chained_best'] - m['cold_best']:+.4f}).",
        f"Chained − single per seed ranges from {min(gaps):+.4f} to {max(gaps):+.4f}"
        + (
            f" (sd {sd:.4f}): a difference of {TOLERANCE} is well inside the seed-to-seed noise."
            if sd
            else "."
        ),
        "",
        f"Mean context tokens per run: first {tokens['first']:,.0f}, chained {tokens['chained']:,.0f},"
        f" cold {tokens['cold']:,.0f}, single {tokens['single']:,.0f} (the chained run's summary carries"
        f" the earlier run in a few bounded lines; its re-measure is not an LLM call).",
        f"Wall-clock: {results['wall_s'] / 60:.1f} min for everything.",
    ]
    moved = [
        f"seed {x['seed']}: {x['first_best']:.4f} → {x['remeasured']:.4f}"
        for x in results["per_seed"]
        if x["remeasured"] is not None and abs(x["remeasured"] - x["first_best"]) >= 5e-5
    ]
    if moved:
        lines.append(
            "The re-measure trains with the second run's seed, so it can differ from the first run's figure"
            f" ({', '.join(moved)}): a new measurement, not a copy."
        )
    lines += recheck_markdown(results)
    if results["llm"].startswith("scripted"):
        lines += [
            "",
            "With a local model instead (opt-in): [memory_chain_local.md](memory_chain_local.md), written by"
            " the command in this script's docstring.",
            "",
            "The scripted double is a seeded search, not a language model: it reads only the summary's"
            " Best line, so the chained run gains from the carried best, not from the notes or the earlier"
            " run's worst results. A run that starts without a best opens with the task's defaults; the"
            " chained run starts perturbing the carried best at once.",
        ]
    return "\n".join(lines) + "\n"


def recheck_markdown(results: dict[str, Any]) -> list[str]:
    r = results["summary"].get("recheck")
    if r is None:
        return []
    n, m, k = results["iterations"], r["means"], len(r["seeds"])
    on = f"seed {r['seeds'][0]}" if k == 1 else f"seeds {r['seeds'][0]}-{r['seeds'][-1]}"
    lines = [
        "",
        f"## Re-checked on {k} common seed{'s' if k > 1 else ''}",
        "",
        f"Each run's final best trained again on {on} (the same for every run, none of them a run's own"
        " seed; `--recheck-seeds`), mean macro F1. A run's own best is"
        " the highest of its noisy measurements, so it favours the run with more of them: the single run"
        " keeps the lucky figure of a configuration the chained run measured again on another seed. The"
        " split is the same for every run, so this varies the training seed only (a configuration without"
        " row or column sampling scores the same on every seed).",
        "",
        f"| seed | first | chained | single {2 * n} | cold | chained − single | chained − cold |",
        "|---|---|---|---|---|---|---|",
    ]
    for seed in results["per_seed"]:
        c = {label: seed["recheck"]["runs"][label]["mean"] for label in LABELS}
        lines.append(
            f"| {seed['seed']} | {fmt(c['first'])} | {fmt(c['chained'])} | {fmt(c['single'])} |"
            f" {fmt(c['cold'])} | {c['chained'] - c['single']:+.4f} | {c['chained'] - c['cold']:+.4f} |"
        )
    lines.append(
        f"| **mean** | {fmt(m['first'])} | {fmt(m['chained'])} | {fmt(m['single'])} | {fmt(m['cold'])} |"
        f" {m['chained'] - m['single']:+.4f} | {m['chained'] - m['cold']:+.4f} |"
    )
    within = "met" if r["chained_within_tolerance_of_single"] else "missed"
    beats = "met" if r["chained_beats_cold"] else "missed"
    gaps, sd = r["chained_minus_single_per_seed"], r["chained_minus_single_sd"]
    read = sum(
        1 for seed in results["per_seed"] for run in seed["recheck"]["runs"].values()
        if run.get("params_from") == "transcript"
    )  # fmt: skip
    lines += [
        "",
        f"Targets on the re-check: the chained pair within {TOLERANCE} macro F1 of the single {2 * n}-iteration"
        f" run on average: **{within}** ({m['chained'] - m['single']:+.4f}); the chained second run beats"
        f" the cold second run on average: **{beats}** ({m['chained'] - m['cold']:+.4f}). Chained − single"
        f" per seed ranges from {min(gaps):+.4f} to {max(gaps):+.4f}" + (f" (sd {sd:.4f})." if sd else "."),
    ]
    if read:
        lines.append(
            f"The params of {read} of these bests were read from the transcripts' Best lines (4 significant"
            " digits): their runs were recorded before the results kept each best's params."
        )
    return lines


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """What the figures depend on: --resume adds seeds only to results measured the same way."""
    return {
        "task": args.task,
        "llm": args.llm
        if args.llm != "scripted"
        else "scripted (deterministic test double, no language model)",
        "model": args.model,
        "base_url": args.base_url,
        "temperature": args.temperature,
        "iterations": args.iterations,
        "second_seed_offset": args.second_seed_offset,
        "hpo_threads": args.hpo_threads,
        "data": Path(args.data).name if args.data else None,
    }


def assemble(
    fixed: dict[str, Any], per_seed: list[dict[str, Any]], commands: list[str], wall: float
) -> dict[str, Any]:
    return {
        **fixed,
        "seeds": [s["seed"] for s in per_seed],
        "commands": commands,
        "per_seed": per_seed,
        "summary": summarise(per_seed),
        "wall_s": round(wall, 1),
    }


def write(out: Path, results: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(results))


def earlier_results(args: argparse.Namespace) -> dict[str, Any] | None:
    """OUT.json's finished seeds, for --resume; refused if they were measured with other settings."""
    path = args.out.with_suffix(".json")
    if args.recheck_only and not path.exists():
        raise SystemExit(f"--recheck-only: {path} does not exist; run the benchmark first")
    if not args.resume or not path.exists():
        return None
    earlier = json.loads(path.read_text())
    if args.recheck_only:
        # No agent runs, so the file keeps its settings; the re-check must train as its runs did.
        own = settings(args)
        differ = [key for key in ("task", "data", "hpo_threads") if earlier.get(key) != own[key]]
        if differ:
            raise SystemExit(
                f"--recheck-only: {path}'s runs were trained with other settings ({', '.join(differ)}:"
                f" {', '.join(repr(earlier.get(k)) for k in differ)}); give the same --task, --data and"
                " --hpo-threads"
            )
        return earlier
    differ = [key for key, value in settings(args).items() if key in earlier and earlier[key] != value]
    if differ:
        raise SystemExit(
            f"--resume: {path} was measured with other settings ({', '.join(differ)}); "
            "use another --out or drop --resume"
        )
    return earlier


async def main_async(args: argparse.Namespace, earlier: dict[str, Any] | None) -> dict[str, Any]:
    kept = {s["seed"]: s for s in (earlier or {}).get("per_seed", [])}
    wanted = [int(s) for s in args.seeds.split(",") if s.strip()]
    seeds = list(kept) + [s for s in wanted if s not in kept]
    command = "python benchmarks/memory_chain.py " + shlex.join(sys.argv[1:])
    commands = [c for c in (earlier or {}).get("commands", []) if c != command] + [command]
    wall_before = (earlier or {}).get("wall_s", 0.0)
    done: dict[int, dict[str, Any]] = {}
    # A re-check runs no agent, so the file's settings stay what its runs were measured with.
    fixed = {key: (earlier or {}).get(key) for key in settings(args)} if args.recheck_only else settings(args)
    with tempfile.TemporaryDirectory(prefix="memory-chain-") as tmp:
        work = Path(tmp)
        if args.db is None:
            args.db = work / "runs.db"
        started = time.monotonic()
        slots = asyncio.Semaphore(args.jobs)
        saved: list[dict[str, Any]] = []

        def save() -> None:
            per_seed = [done.get(s) or kept[s] for s in seeds if s in done or s in kept]
            results = assemble(fixed, per_seed, commands, wall_before + time.monotonic() - started)
            write(args.out, results)  # after every seed: a long run stopped part way keeps what it did
            if args.transcripts is not None:
                pack_transcripts(args.transcripts)
            saved.append(results)

        wanted = recheck_seeds(args.recheck_seeds)

        async def one(seed: int) -> None:
            """A seed's four runs (kept ones are not run again), then its re-check where it lacks this
            one; each written before the slot frees, so a stop in the next seed keeps this one."""
            async with slots:
                if seed in kept:
                    result = kept[seed]
                elif args.recheck_only:
                    print(
                        f"seed {seed}: not in {args.out.with_suffix('.json')}, nothing to re-check",
                        flush=True,
                    )
                    return
                else:
                    result = done[seed] = await chain(args, work, seed)
                    save()  # the runs are kept before the re-check is tried
                if wanted and (result.get("recheck") or {}).get("seeds") != wanted:
                    try:
                        done[seed] = {**result, "recheck": await recheck(args, result)}
                    except (RecheckError, ResearchError) as exc:
                        print(f"re-check seed {seed}: not done ({exc}); --resume tries it again", flush=True)
                        return
                    save()

        tasks = [asyncio.ensure_future(one(seed)) for seed in seeds]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # One seed failed: stop the others (and their servers) before the work directory goes.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    if not saved:
        raise SystemExit(f"no seed to run or re-check (--seeds {args.seeds})")
    return saved[-1]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_agent_args(args)
    if args.render_only:
        results = json.loads(args.out.with_suffix(".json").read_text())
        results["summary"] = summarise(results["per_seed"])
        write(args.out, results)
    else:
        if args.recheck_only:
            args.resume = True  # the seeds to re-check are OUT.json's
        results = asyncio.run(main_async(args, earlier_results(args)))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
