"""The run dashboard (live, in the browser) and the shareable report (one self-contained HTML file).

`dashboard_app(store, token)` is a Starlette app to serve alone or mount at /dashboard;
`render_report(store, run_id, transcripts)` is the report's HTML.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autoresearch_mcp.server.dashboard.app import dashboard_app
    from autoresearch_mcp.server.dashboard.render import render_report

__all__ = ["dashboard_app", "render_report"]


def __getattr__(name: str) -> Any:
    # Imported on first use: every `autoresearch-mcp` command loads this package's cli module, and only
    # the dashboard and report need matplotlib, Jinja2 and Starlette.
    if name == "dashboard_app":
        from autoresearch_mcp.server.dashboard.app import dashboard_app

        return dashboard_app
    if name == "render_report":
        from autoresearch_mcp.server.dashboard.render import render_report

        return render_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
