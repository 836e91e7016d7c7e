"""The run's charts, drawn server-side by matplotlib as inline SVG: the page and the report need no JS chart
library and work offline."""

import io
import threading

import matplotlib
from matplotlib.figure import Figure

from autoresearch_mcp.server.dashboard.views import RunDetail, TokenUse

# rc_context changes matplotlib's global settings for the duration of a drawing; the dashboard draws on
# worker threads, so drawings take turns.
_LOCK = threading.Lock()
_STYLE = {
    "svg.fonttype": "none",  # text stays text: smaller, and the page's font renders it
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
FAILED_COLOR = "#c0392b"
POINT_COLOR = "#7f8c8d"
BEST_COLOR = "#1f6feb"
TOKEN_COLORS = ("#1f6feb", "#e67e22", "#27ae60", "#8e44ad")


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    # Inline <svg> only: the XML prolog and DOCTYPE are not allowed inside an HTML body.
    return text[text.index("<svg") :]


def metric_svg(detail: RunDetail) -> str:
    """Each experiment's metric, the best-so-far curve, failures marked on the axis, and the target."""
    run, curve = detail.run, detail.curve
    with _LOCK, matplotlib.rc_context(_STYLE):
        fig = Figure(figsize=(7.5, 3.0))
        ax = fig.add_subplot()
        ok = [p for p in curve if p.status == "ok" and p.metric is not None]
        ax.scatter(
            [p.iteration for p in ok],
            [p.metric for p in ok],
            s=18,
            color=POINT_COLOR,
            label="experiment",
            zorder=3,
        )
        kept = [p for p in ok if p.kept]
        ax.scatter(
            [p.iteration for p in kept],
            [p.metric for p in kept],
            s=34,
            color=BEST_COLOR,
            label="new best",
            zorder=4,
        )
        steps = [p for p in curve if p.best is not None]
        if steps:
            ax.step(
                [p.iteration for p in steps],
                [p.best for p in steps],
                where="post",
                color=BEST_COLOR,
                linewidth=1.6,
                label="best so far",
            )
        failed = [p for p in curve if p.status not in ("ok", "running")]
        if failed:
            # Failures have no metric: mark them along the bottom edge of the plot.
            ax.scatter(
                [p.iteration for p in failed],
                [0.0] * len(failed),
                marker="x",
                color=FAILED_COLOR,
                transform=ax.get_xaxis_transform(),
                clip_on=False,
                label="failed",
                zorder=5,
            )
        if run.target is not None:
            ax.axhline(run.target, color="#27ae60", linestyle="--", linewidth=1, label="target")
        ax.set_xlabel("iteration")
        ax.set_ylabel(f"{run.metric_name} ({'higher' if run.direction == 'max' else 'lower'} is better)")
        ax.set_xlim(0.5, max(run.budget, len(curve), 1) + 0.5)
        ax.xaxis.get_major_locator().set_params(integer=True)
        if not curve:
            ax.text(0.5, 0.5, "no experiments yet", transform=ax.transAxes, ha="center", color=POINT_COLOR)
        else:
            # Outside the axes, on the right: the points it would cover are the interesting ones.
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        return _svg(fig)


def tokens_svg(uses: list[TokenUse]) -> str:
    """Context tokens (solid) and full tokens (dashed) per iteration, one colour per transcript."""
    with _LOCK, matplotlib.rc_context(_STYLE):
        fig = Figure(figsize=(7.5, 2.6))
        ax = fig.add_subplot()
        for use, color in zip(uses, TOKEN_COLORS * len(uses), strict=False):
            its = [row.iteration for row in use.per_iteration]
            ax.plot(
                its,
                [row.totals.context for row in use.per_iteration],
                marker="o",
                markersize=3,
                color=color,
                label=f"{use.mode}: context",
            )
            ax.plot(
                its,
                [row.totals.full for row in use.per_iteration],
                linestyle="--",
                color=color,
                alpha=0.7,
                label=f"{use.mode}: full",
            )
        ax.set_xlabel("iteration")
        ax.set_ylabel("tokens per iteration")
        ax.set_ylim(bottom=0)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        return _svg(fig)
