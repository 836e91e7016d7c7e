"""What `autoresearch-mcp compare` writes of its runs: one record per run (per-iteration tokens, calls,
best so far and wall time from the transcript and the server's history; totals, billed usage, cost) and
the summary across seeds (means, spreads, refusals, ratios of each baseline to stateful)."""

import statistics
from collections import Counter
from datetime import datetime
from typing import Any

from autoresearch_mcp.client.billing import run_cost
from autoresearch_mcp.client.check import AgentResult
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Run
from autoresearch_mcp.contract.transcript import TokenTotals, load_transcript, totals, totals_by_iteration

# The paper's baseline, the strongest honest one (docs/benchmarks.md), and the agent.
MODES = ("stateless", "stateless-strong", "stateful")
BASELINES = ("stateless", "stateless-strong")
HEADLINE_BASELINE = "stateless-strong"
MEASURES = (
    "billed_tokens",
    "context_tokens",
    "symmetric_tokens",
    "full_tokens",
    "cache_weighted_tokens",
    "output_tokens",
)
RATIO_MEASURES = MEASURES[:5]
_FIELDS = {  # results.json measure -> TokenTotals field
    "billed_tokens": "billed",
    "context_tokens": "context",
    "symmetric_tokens": "symmetric",
    "full_tokens": "full",
    "cache_weighted_tokens": "cache_weighted",
    "output_tokens": "output",
}


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def _run_of(result: AgentResult) -> Run:
    if result.run is None:
        raise ResearchError(f"run {result.run_id}: the agent did not report the run's final state")
    return result.run


def per_iteration(result: AgentResult) -> list[dict[str, Any]]:
    """One row per experiment: its tokens and calls (from the transcript), best so far, wall seconds."""
    calls = totals_by_iteration(load_transcript(result.transcript))
    run = _run_of(result)
    experiments = result.history
    rows, best, previous = [], None, _seconds(run.created_at)
    for exp in experiments:
        if exp.kept and exp.metric is not None:  # the server's rule decides what is a new best
            best = exp.metric
        finished = _seconds(exp.finished_at or exp.started_at)
        t = calls.get(exp.iteration, TokenTotals())
        rows.append(
            {
                "iteration": exp.iteration,
                **{measure: getattr(t, field) for measure, field in _FIELDS.items()},
                "best_metric": best,
                "wall_s": round(finished - previous, 3),
                "llm_calls": t.calls,
                "latency_s": round(t.latency_s, 3),
            }
        )
        previous = finished
    # Calls after the last experiment (e.g. the model saying DONE) still cost tokens: add them to it.
    extra = [t for i, t in calls.items() if i > len(rows)]
    if rows and extra:
        for t in extra:
            for measure, field in _FIELDS.items():
                rows[-1][measure] = round(rows[-1][measure] + getattr(t, field), 1)
            rows[-1]["llm_calls"] += t.calls
            rows[-1]["latency_s"] = round(rows[-1]["latency_s"] + t.latency_s, 3)
    return rows


def run_record(mode: str, seed: int, result: AgentResult) -> dict[str, Any]:
    rows = per_iteration(result)
    run = _run_of(result)
    wall = _seconds(run.finished_at or run.created_at) - _seconds(run.created_at)
    # Totals come from the whole transcript: calls that recorded no experiment cost tokens too.
    records = load_transcript(result.transcript)
    spent = totals(records)
    record_totals: dict[str, Any] = {m: round(float(getattr(spent, f)), 1) for m, f in _FIELDS.items()}
    record_totals.update(
        cacheable_calls=sum(1 for r in records if r["tokens"].get("cacheable")),
        best_metric=rows[-1]["best_metric"] if rows else None,
        best_low=run.best.low if run.best else None,
        best_high=run.best.high if run.best else None,
        wall_s=round(wall, 2),
        llm_calls=result.llm_calls,
        latency_s=round(spent.latency_s, 2),
        experiments=len(rows),
        refusals=result.refusals,
        billed={
            "source": spent.billed_source,
            "input": spent.billed_input,
            "cached_read": spent.billed_cached_read if spent.provider_calls else None,
            "cache_write": spent.billed_cache_write if spent.provider_calls else None,
            "output": spent.billed_output,
        },
        # What the same requests would cost on each named model, its caching rules applied to both modes.
        cost=run_cost(records),
    )
    return {
        "mode": mode,
        "seed": seed,
        "run_id": result.run_id,
        "from_run": run.from_run,
        "stop_reason": result.stop_reason,
        "stop_detail": result.detail,
        "token_budget": budget_record(result),
        "per_iteration": rows,
        "totals": record_totals,
    }


def budget_record(result: AgentResult) -> dict[str, Any] | None:
    """How close the run came to its token budget (full tokens, as CHECK held them against it)."""
    if result.token_budget is None:
        return None
    spent, budget = result.full_tokens, result.token_budget
    return {"budget": budget, "spent": spent, "percent": round(100 * spent / budget, 1)}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for mode in MODES:
        mine = [r["totals"] for r in runs if r["mode"] == mode]
        if not mine:
            continue
        keys = [k for k in (*MEASURES, "wall_s", "llm_calls", "latency_s") if all(k in t for t in mine)]
        means = {k: round(statistics.fmean(t[k] for t in mine), 2) for k in keys}
        bests = [t["best_metric"] for t in mine if t["best_metric"] is not None]
        means["best_metric"] = round(statistics.fmean(bests), 4) if bests else None
        calls = sum(t["llm_calls"] for t in mine)
        exps = sum(t["experiments"] for t in mine)
        means["llm_calls_per_experiment"] = round(calls / exps, 3) if exps else None
        if "latency_s" in means and calls:
            means["latency_s_per_call"] = round(sum(t["latency_s"] for t in mine) / calls, 3)
        # Sampling models differ from run to run: every seed's best and the spread, not just the mean.
        means["best_metric_per_seed"] = [t["best_metric"] for t in mine]
        means["best_metric_sd"] = round(statistics.stdev(bests), 4) if len(bests) > 1 else None
        refusals: Counter[str] = Counter()
        for t in mine:
            refusals.update(t.get("refusals", {}))
        means["refusals"] = dict(sorted(refusals.items()))
        means["refused_share_of_calls"] = round(sum(refusals.values()) / calls, 3) if calls else None
        sources = sorted({t["billed"]["source"] for t in mine if "billed" in t})
        if sources:
            means["billed_source"] = sources[0] if len(sources) == 1 else "mixed"
        if all("cost" in t for t in mine):
            models = mine[0]["cost"]
            means["cost_usd"] = {
                m: round(statistics.fmean(t["cost"][m]["usd"] for t in mine), 6) for m in models
            }
        if not any(t.get("cacheable_calls") for t in mine):
            means["cache_weighted_note"] = (
                "equals full: the fixed prefix is below the provider's minimum cacheable length, "
                "so nothing would be cached"
            )
        summary[mode] = means
    for baseline in BASELINES:
        if baseline not in summary or "stateful" not in summary:
            continue
        suffix = "" if baseline == "stateless" else "_strong"
        ratios, note = _ratios(runs, summary, baseline)
        summary[f"ratio{suffix}"] = ratios
        if note:
            summary[f"ratio{suffix}_note"] = note
        elif "cost_usd" in summary[baseline] and "cost_usd" in summary["stateful"]:
            summary.setdefault("cost_ratio", {})[baseline] = {
                m: round(usd / summary["stateful"]["cost_usd"][m], 2)
                if summary["stateful"]["cost_usd"][m]
                else None
                for m, usd in summary[baseline]["cost_usd"].items()
            }
        if not note and baseline == "stateless":
            # Per iteration, like the ratios: only where both modes ran the same iterations.
            summary["full_tokens_crossover_iteration"] = crossover(runs)
    headline = HEADLINE_BASELINE if "ratio_strong" in summary else "stateless"
    if f"ratio{'_strong' if headline != 'stateless' else ''}" in summary:
        summary["headline"] = {
            "baseline": headline,
            "measure": "billed_tokens",
            "billed_source": summary["stateful"].get("billed_source"),
        }
    return summary


def _ratios(
    runs: list[dict[str, Any]], summary: dict[str, Any], baseline: str
) -> tuple[dict[str, float | None], str | None]:
    """`baseline` / stateful for each token measure; none when the two recorded different numbers of
    experiments (tokens per run mean nothing side by side when one mode did less of the work)."""
    counts = {
        m: sorted(r["totals"]["experiments"] for r in runs if r["mode"] == m) for m in (baseline, "stateful")
    }
    if counts[baseline] != counts["stateful"]:
        return {}, (
            f"no ratio: the modes recorded different numbers of experiments ({baseline} "
            f"{counts[baseline]}, stateful {counts['stateful']} per seed)"
        )
    a, b = summary[baseline], summary["stateful"]
    return {m: round(a[m] / b[m], 2) if b.get(m) else None for m in RATIO_MEASURES if m in a and m in b}, None


def crossover(runs: list[dict[str, Any]], baseline: str = "stateless") -> int | None:
    """The first iteration from which stateful's cumulative full tokens stay below the baseline's."""

    def mean_cumulative(mode: str) -> list[float]:
        series = [[row["full_tokens"] for row in r["per_iteration"]] for r in runs if r["mode"] == mode]
        length = min(len(s) for s in series)
        out, total = [], 0.0
        for i in range(length):
            total += statistics.fmean(s[i] for s in series)
            out.append(total)
        return out

    stateless, stateful = mean_cumulative(baseline), mean_cumulative("stateful")
    first = None
    for i, (cost_stateless, cost_stateful) in enumerate(zip(stateless, stateful, strict=False), start=1):
        if cost_stateful >= cost_stateless:
            first = None
        elif first is None:
            first = i
    return first
