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
    series = [[row[key] for row in r["per_iteration"]] for r in results["runs"] if r["mode"] == mode]
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


def write_table(results: dict[str, Any], path: Path) -> None:
    s = results["summary"]
    a, b = s.get("stateless", {}), s.get("stateful", {})
    ratio = s.get("ratio", {})
    paper = PAPER.get(results["task"])
    same_budget = paper is not None and paper["iterations"] == results["iterations"]
    head = "| | stateless | stateful | ratio |" + (
        " paper stateless | paper stateful |" if same_budget else ""
    )
    rule = "|---|---|---|---|" + ("---|---|" if same_budget else "")
    lines = [
        f"**{results['task']}**, {results['iterations']} iterations, seeds {', '.join(map(str, results['seeds']))},"
        f" LLM: {results['llm']}, stateful window: {results['window']}. Means over seeds."
        + (
            f" The two modes ran at the same time, {results['hpo_threads']} training thread(s) each."
            if results.get("parallel") and results.get("hpo_threads")
            else ""
        )
        + (
            f" Token budget: {results['token_budget']:,} full tokens per run."
            if results.get("token_budget")
            else ""
        ),
        "",
        head,
        rule,
    ]

    def row(label: str, key: str, digits: int = 0, paper_index: int | None = None) -> None:
        r = ratio.get(key)
        cells = [label, _fmt(a.get(key), digits), _fmt(b.get(key), digits), f"{r:.1f}x" if r else ""]
        if same_budget and paper is not None:
            cells += [
                _fmt(paper["stateless"][paper_index], digits) if paper_index is not None else "",
                _fmt(paper["stateful"][paper_index], digits) if paper_index is not None else "",
            ]
        lines.append("| " + " | ".join(cells) + " |")

    row("context tokens (paper's measure)", "context_tokens", paper_index=0)
    row("symmetric tokens (instructions counted on both sides)", "symmetric_tokens")
    row("full tokens (everything sent, as serialised, + output)", "full_tokens")
    row("cache-weighted tokens", "cache_weighted_tokens")
    row("output tokens", "output_tokens")
    row("best metric", "best_metric", 4, paper_index=1)
    row("wall-clock (s)", "wall_s", paper_index=2)
    row("LLM calls per experiment", "llm_calls_per_experiment", 2)
    per_a = _mean_series(results, "stateless", "context_tokens")
    per_b = _mean_series(results, "stateful", "context_tokens")
    if per_a and per_b:
        lines.append(
            f"| context tokens per iteration, first / last | {per_a[0]:,.0f} / {per_a[-1]:,.0f} |"
            f" {per_b[0]:,.0f} / {per_b[-1]:,.0f} | |" + (" | |" if same_budget else "")
        )
    lines.append("")
    if results.get("from_run"):
        lines.append(
            f"Every run started from {results['from_run']} (--from-run): its best was re-measured as each"
            " run's experiment #1."
        )
    if s.get("ratio_note"):
        lines.append(s["ratio_note"][0].upper() + s["ratio_note"][1:] + ".")
    for mode in ("stateless", "stateful"):
        if s.get(mode, {}).get("cache_weighted_note"):
            lines.append(f"{mode.capitalize()} cache-weighted tokens {s[mode]['cache_weighted_note']}.")
    if a and b and "full_tokens_crossover_iteration" in s:  # only where both modes did the same work
        crossover = s["full_tokens_crossover_iteration"]
        lines.append(
            f"Stateful's cumulative full tokens stay below stateless's from iteration {crossover} on."
            if crossover
            else "Stateful's cumulative full tokens never fall below stateless's."
        )
    intervals = [
        f"{r['mode']} seed {r['seed']}: {r['totals']['best_metric']:.4g} "
        f"[{r['totals']['best_low']:.4g}, {r['totals']['best_high']:.4g}]"
        for r in results["runs"]
        if r["totals"].get("best_low") is not None and r["totals"].get("best_high") is not None
    ]
    if intervals:
        lines.append("Best metric of each run with its 95% interval: " + "; ".join(intervals) + ".")
    if len(per_b) >= 200:
        early, late = statistics.fmean(per_b[100:110]), statistics.fmean(per_b[190:200])
        lines.append(
            f"Stateful context tokens per iteration: mean {early:,.1f} over iterations 101-110, {late:,.1f} over "
            f"191-200 ({(late - early) / early * 100:+.1f}%)."
        )
    path.write_text("\n".join(lines) + "\n")


def write_figure(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = results["summary"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    colours = {"stateless": "#c0504d", "stateful": "#4f81bd"}
    for mode in ("stateless", "stateful"):
        tokens = _mean_series(results, mode, "context_tokens")
        best = _mean_series(results, mode, "best_metric")
        xs = range(1, len(tokens) + 1)
        axes[0][0].plot(xs, tokens, label=mode, color=colours[mode])
        axes[0][1].plot(range(1, len(best) + 1), best, label=mode, color=colours[mode])
    axes[0][0].set(title="Context tokens per iteration", xlabel="iteration", ylabel="tokens")
    axes[0][1].set(
        title="Best metric so far", xlabel="iteration", ylabel=results["runs"][0].get("metric", "metric")
    )
    measures = ["context_tokens", "full_tokens", "cache_weighted_tokens"]
    width = 0.38
    for i, mode in enumerate(("stateless", "stateful")):
        values = [s.get(mode, {}).get(m, 0) for m in measures]
        axes[1][0].bar(
            [x + i * width for x in range(len(measures))], values, width, label=mode, color=colours[mode]
        )
    axes[1][0].set_xticks(
        [x + width / 2 for x in range(len(measures))], ["context", "full", "cache-weighted"]
    )
    axes[1][0].set(title="Total tokens (mean over seeds)", ylabel="tokens")
    axes[1][0].set_yscale("log")
    walls = [s.get(m, {}).get("wall_s", 0) for m in ("stateless", "stateful")]
    axes[1][1].bar(["stateless", "stateful"], walls, color=[colours["stateless"], colours["stateful"]])
    axes[1][1].set(title="Wall-clock (s, mean over seeds)", ylabel="seconds")
    for ax in (axes[0][0], axes[0][1], axes[1][0]):
        ax.legend()
    fig.suptitle(f"{results['task']}: {results['iterations']} iterations, LLM: {results['llm']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
