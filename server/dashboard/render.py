"""Jinja2 templates shared by the live dashboard and the report, and the report itself.

The run's view is one partial (`_run.html`): the dashboard swaps it in when the run changes, the report
inlines it once, so both show the same thing.
"""

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from autoresearch_mcp import __version__
from autoresearch_mcp.contract.display import better_way, utc_minute
from autoresearch_mcp.contract.models import JUDGED_BY_WORDS
from autoresearch_mcp.contract.transcript import budget_share
from autoresearch_mcp.server.dashboard.charts import metric_svg, tokens_svg
from autoresearch_mcp.server.dashboard.views import RunDetail, VersionDiff, run_detail, version_diff
from autoresearch_mcp.server.store import Store

TEMPLATES = Path(__file__).resolve().parent / "templates"


def fmt_metric(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "–"
    return f"{value:.4f}" if abs(value) < 1000 else f"{value:,.1f}"


def fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return json.dumps(value) if not isinstance(value, str) else value


def fmt_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={fmt_value(v)}" for k, v in params.items()) or "–"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def fmt_int(value: float) -> str:
    return f"{value:,.0f}"


def make_environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        metric=fmt_metric,
        params=fmt_params,
        value=fmt_value,
        duration=fmt_duration,
        time=lambda stamp: utc_minute(stamp, "–"),
        int=fmt_int,
        better=better_way,
    )
    env.globals.update(version=__version__, budget_share=budget_share, judged_by_words=JUDGED_BY_WORDS)
    return env


ENV = make_environment()


def run_context(detail: RunDetail, diffs: list[VersionDiff] | None = None) -> dict[str, Any]:
    """What `_run.html` needs. `diffs` are pre-rendered diffs (the report); without them the page lets
    the reader pick two versions."""
    return {
        "d": detail,
        "metric_chart": metric_svg(detail),
        "tokens_chart": tokens_svg(detail.tokens) if detail.tokens else None,
        "diffs": diffs,
    }


def report_diffs(store: Store, detail: RunDetail) -> list[VersionDiff]:
    """A static file cannot diff on demand: each version against its parent, and the original against
    the latest when they are further apart."""
    diffs = [
        version_diff(store, detail.run.id, v.parent_version, v.version)
        for v in detail.versions
        if v.parent_version is not None
    ]
    numbers = [v.version for v in detail.versions]
    if len(numbers) > 2:
        diffs.append(version_diff(store, detail.run.id, numbers[0], numbers[-1]))
    return diffs


def render_report(store: Store, run_id: str, transcripts: Path) -> str:
    """One self-contained HTML page for a run: inline CSS and SVG, no scripts, no outside links."""
    detail = run_detail(store, run_id, transcripts)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return ENV.get_template("report.html").render(
        **run_context(detail, report_diffs(store, detail)), generated=generated
    )
