"""The compare command's table (markdown, shaped like the paper's) and 4-panel figure (its Figure 2)."""

import statistics
from pathlib import Path
from typing import Any

# The paper's figures: arXiv 2606.14945, Claude Haiku 4.5, mean of 3 seeds (tokens, best metric, wall-clock s).
PAPER = {
    "hpo-covertype": {"iterations": 15, "stateless": (24_465, 0.764, 116), "stateful": (2_492, 0.779, 373)},
    "codeopt-records": {
        "iterations": 40,
        "stateless": (1_275_309, 1.87, 357),
        "stateful": (626_702, 1.91, 418),
    },
}


def _mean_series(results: dict[str, Any], mode: str, key: str) -> list[float]:
    series = [[row.get(key) for row in r["per_iteration"]] for r in results["runs"] if r["mode"] == mode]
    if not series:
        return []
    length = min(len(s) for s in series)
    means = []
    for i in range(length):
        values = [s[i] for s in series if s[i] is not None]
        means.append(statistics.fmean(values) if values else float("nan"))  # nan: a gap in the line
    return means


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and digits:
        return f"{value:.{digits}f}"
    return f"{value:,.0f}"


MODE_LABELS = {
    "stateless": "stateless (paper's)",
    "stateless-strong": "stateless-strong",
    "stateful": "stateful",
}
COLOURS = {"stateless": "#c0504d", "stateless-strong": "#f79646", "stateful": "#4f81bd"}
BILLED_SOURCE = {
    "provider": "as the provider counted",
    "tiktoken": "cl100k_base: no provider reported usage",
    "mixed": "the provider's count where it reported one",
}


def _modes(results: dict[str, Any]) -> list[str]:
    return [m for m in MODE_LABELS if m in results["summary"]]


def write_table(results: dict[str, Any], path: Path) -> None:
    from autoresearch_mcp.client.prices import prices

    s = results["summary"]
    modes = _modes(results)
    baselines = [m for m in ("stateless", "stateless-strong") if m in modes and "stateful" in modes]
    ratio_of = {"stateless": s.get("ratio", {}), "stateless-strong": s.get("ratio_strong", {})}
    paper = PAPER.get(results["task"])
    same_budget = paper is not None and paper["iterations"] == results["iterations"]
    head = ["", *(MODE_LABELS[m] for m in modes), *(f"ratio, {MODE_LABELS[b]} / stateful" for b in baselines)]
    if same_budget:
        head += ["paper stateless", "paper stateful"]
    lines = [
        f"**{results['task']}**, {results['iterations']} iterations, seeds {', '.join(map(str, results['seeds']))},"
        f" LLM: {results['llm']}, stateful window: {results['window']}. Means over seeds."
        + (
            f" The modes ran at the same time, {results['hpo_threads']} training thread(s) each."
            if results.get("parallel") and results.get("hpo_threads")
            else ""
        )
        + (
            f" Token budget: {results['token_budget']:,} full tokens per run."
            if results.get("token_budget")
            else ""
        ),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]

    def row(label: str, key: str, digits: int = 0, paper_index: int | None = None) -> None:
        cells = [label, *(_fmt(s[m].get(key), digits) for m in modes)]
        cells += [f"{ratio_of[b][key]:.1f}x" if ratio_of[b].get(key) else "" for b in baselines]
        if same_budget and paper is not None:
            cells += [
                _fmt(paper["stateless"][paper_index], digits) if paper_index is not None else "",
                _fmt(paper["stateful"][paper_index], digits) if paper_index is not None else "",
            ]
        lines.append("| " + " | ".join(cells) + " |")

    sources = {s[m].get("billed_source") for m in modes} - {None}
    source = BILLED_SOURCE.get(sources.pop() if len(sources) == 1 else "mixed", "")
    row(f"billed tokens ({source})", "billed_tokens")
    row("context tokens (paper's measure)", "context_tokens", paper_index=0)
    row("symmetric tokens (instructions counted on both sides)", "symmetric_tokens")
    row("full tokens (everything sent, as serialised, + output)", "full_tokens")
    row("cache-weighted tokens", "cache_weighted_tokens")
    row("output tokens", "output_tokens")
    table = prices().models
    for name, model in table.items():
        if not all(name in s[m].get("cost_usd", {}) for m in modes):
            continue
        cells = [
            f"USD on {model.label}, cached by its rules",
            *(f"{s[m]['cost_usd'][name]:.4f}" for m in modes),
        ]
        cells += [
            f"{s['cost_ratio'][b][name]:.1f}x" if s.get("cost_ratio", {}).get(b, {}).get(name) else ""
            for b in baselines
        ]
        lines.append("| " + " | ".join(cells + (["", ""] if same_budget else [])) + " |")
    row("best metric", "best_metric", 4, paper_index=1)
    row("wall-clock (s)", "wall_s", paper_index=2)
    row("LLM calls per experiment", "llm_calls_per_experiment", 2)
    row("LLM latency per call (s)", "latency_s_per_call", 2)
    # From the first iteration a model call went toward: with --first defaults, #1 had none (0 tokens).
    firsts = {m: _mean_series(results, m, "context_tokens") for m in modes}
    asked = {m: [v for v in series if v > 0] or series for m, series in firsts.items()}
    if all(firsts.values()):
        cells = ["context tokens per iteration, first call / last"]
        cells += [f"{asked[m][0]:,.0f} / {asked[m][-1]:,.0f}" for m in modes]
        cells += [""] * (len(head) - len(cells))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if results.get("from_run"):
        lines.append(
            f"Every run started from {results['from_run']} (--from-run): its best was re-measured as each"
            " run's experiment #1."
        )
    for key in ("ratio_note", "ratio_strong_note"):
        if s.get(key):
            lines.append(s[key][0].upper() + s[key][1:] + ".")
    for mode in modes:
        if s.get(mode, {}).get("cache_weighted_note"):
            lines.append(
                f"{MODE_LABELS[mode].capitalize()} cache-weighted tokens {s[mode]['cache_weighted_note']}."
            )
    if "stateless" in modes and "stateful" in modes and "full_tokens_crossover_iteration" in s:
        crossover = s["full_tokens_crossover_iteration"]
        lines.append(
            f"Stateful's cumulative full tokens stay below stateless's from iteration {crossover} on."
            if crossover
            else "Stateful's cumulative full tokens never fall below stateless's."
        )
    if any(name in s[m].get("cost_usd", {}) for m in modes for name in table):
        lines.append(
            "USD: each run's requests billed by the model's published prompt-cache rules and prices"
            " (client/prices.toml, with sources and dates), counted with cl100k_base for every model."
        )
    stopped = [
        f"{r['mode']} seed {r['seed']}: {r['stop_reason']} ({r.get('stop_detail', '')})"
        for r in results["runs"]
        if r.get("stop_reason") not in (None, "budget")
    ]
    if stopped:
        lines.append("Runs that ended before their budget: " + "; ".join(stopped) + ".")
    intervals = [
        f"{r['mode']} seed {r['seed']}: {r['totals']['best_metric']:.4g} "
        f"[{r['totals']['best_low']:.4g}, {r['totals']['best_high']:.4g}]"
        for r in results["runs"]
        if r["totals"].get("best_low") is not None and r["totals"].get("best_high") is not None
    ]
    if intervals:
        lines.append("Best metric of each run with its 95% interval: " + "; ".join(intervals) + ".")
    per_b = _mean_series(results, "stateful", "billed_tokens") if "stateful" in modes else []
    if len(per_b) >= 200:
        early, late = statistics.fmean(per_b[100:110]), statistics.fmean(per_b[190:200])
        lines.append(
            f"Stateful billed tokens per iteration: mean {early:,.1f} over iterations 101-110, {late:,.1f} over "
            f"191-200 ({(late - early) / early * 100:+.1f}%)."
        )
    path.write_text("\n".join(lines) + "\n")


def write_figure(results: dict[str, Any], path: Path) -> None:
    """Billed tokens per iteration, best metric so far, totals, and the model's latency per iteration:
    the long run's story (a stateless prefill that grows, a stateful one that does not) in one view."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = results["summary"]
    modes = _modes(results)
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for mode in modes:
        label, colour = MODE_LABELS[mode], COLOURS[mode]
        tokens = _mean_series(results, mode, "billed_tokens")
        best = _mean_series(results, mode, "best_metric")
        latency = _mean_series(results, mode, "latency_s")
        axes[0][0].plot(range(1, len(tokens) + 1), tokens, label=label, color=colour)
        axes[0][1].plot(range(1, len(best) + 1), best, label=label, color=colour)
        axes[1][1].plot(range(1, len(latency) + 1), latency, label=label, color=colour)
    axes[0][0].set(title="Billed tokens per iteration", xlabel="iteration", ylabel="tokens")
    axes[0][1].set(
        title="Best metric so far", xlabel="iteration", ylabel=results["runs"][0].get("metric", "metric")
    )
    measures = ["billed_tokens", "context_tokens", "full_tokens"]
    width = 0.8 / max(1, len(modes))
    for i, mode in enumerate(modes):
        values = [s.get(mode, {}).get(m, 0) for m in measures]
        axes[1][0].bar(
            [x + i * width for x in range(len(measures))],
            values,
            width,
            label=MODE_LABELS[mode],
            color=COLOURS[mode],
        )
    axes[1][0].set_xticks(
        [x + width * (len(modes) - 1) / 2 for x in range(len(measures))], ["billed", "context", "full"]
    )
    axes[1][0].set(title="Total tokens (mean over seeds)", ylabel="tokens")
    axes[1][0].set_yscale("log")
    axes[1][1].set(title="LLM latency per iteration (s)", xlabel="iteration", ylabel="seconds")
    for ax in (axes[0][0], axes[0][1], axes[1][0], axes[1][1]):
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.suptitle(f"{results['task']}: {results['iterations']} iterations, LLM: {results['llm']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
