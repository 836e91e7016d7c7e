"""The dashboard as a Starlette app: a page, JSON routes it polls, and HTML fragments it swaps in.

Mountable anywhere (`Mount("/dashboard", app=dashboard_app(store, token))`): every link is built from the
mount point. With a token, the page asks for it once and keeps a derived value in an HttpOnly,
SameSite=Strict cookie; every data route checks the cookie (or an `Authorization: Bearer` header).
"""

import hashlib
import hmac
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from autoresearch_mcp.contract.env import transcripts_dir
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.body_limit import DASHBOARD_BODY_BYTES, BodyLimit
from autoresearch_mcp.server.dashboard.render import ENV, run_context
from autoresearch_mcp.server.dashboard.views import VersionDiff, run_detail, run_rows, version_diff
from autoresearch_mcp.server.store import Store

COOKIE = "autoresearch_dashboard"
COOKIE_MAX_AGE_S = 30 * 24 * 3600
MAX_LOGIN_BODY = 4096


def cookie_value(token: str) -> str:
    # The cookie holds a digest, not the token: a leaked cookie does not open the MCP endpoint.
    return hmac.new(token.encode(), b"autoresearch-mcp dashboard", hashlib.sha256).hexdigest()


def base_path(request: Request) -> str:
    """Where the dashboard lives: "/" alone, "/dashboard/" when mounted there (Mount sets root_path)."""
    return request.scope.get("root_path", "").rstrip("/") + "/"


Handler = Callable[[Request], Response]


class Dashboard:
    def __init__(self, store: Store, token: str | None, transcripts: Path) -> None:
        self.store = store
        self.token = token
        self.transcripts = transcripts
        self.templates = Jinja2Templates(env=ENV)

    # -- auth --------------------------------------------------------------------------------
    def authorized(self, request: Request) -> bool:
        if self.token is None:
            return True
        cookie = request.cookies.get(COOKIE, "")
        if cookie and hmac.compare_digest(cookie, cookie_value(self.token)):
            return True
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(credentials.encode(), self.token.encode())

    def guarded(self, handler: Handler) -> Handler:
        """A data route: 401 without the token; an unknown run or version is a 404, a bad query a 400."""

        def endpoint(request: Request) -> Response:
            if not self.authorized(request):
                return JSONResponse({"error": "token required"}, status_code=401)
            try:
                response = handler(request)
            except ResearchError as exc:
                return JSONResponse({"error": str(exc)}, status_code=404)
            except BadQuery as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
            response.headers["Cache-Control"] = "no-store"  # live data: never a stale copy
            return response

        return endpoint

    def login_page(self, request: Request, error: str | None, status: int) -> Response:
        context = {"login_url": base_path(request) + "login", "error": error}
        return self.templates.TemplateResponse(request, "login.html", context, status_code=status)

    async def login(self, request: Request) -> Response:
        base = base_path(request)
        if request.method == "GET" or self.token is None:
            return RedirectResponse(base, status_code=303)
        body = await request.body()
        token = parse_qs(body[:MAX_LOGIN_BODY].decode(errors="replace")).get("token", [""])[0]
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            return self.login_page(request, "That is not the token.", 401)
        response = RedirectResponse(base, status_code=303)
        response.set_cookie(
            COOKIE,
            cookie_value(self.token),
            max_age=COOKIE_MAX_AGE_S,
            path=base,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    # -- pages and data ----------------------------------------------------------------------
    def index(self, request: Request) -> Response:
        if not self.authorized(request):
            return self.login_page(request, None, 401)
        return self.templates.TemplateResponse(request, "index.html", {"base": base_path(request)})

    def api_runs(self, request: Request) -> Response:
        rows = run_rows(self.store, self.transcripts)
        return JSONResponse({"runs": [row.model_dump(mode="json") for row in rows]})

    def api_run(self, request: Request) -> Response:
        detail = run_detail(self.store, request.path_params["run_id"], self.transcripts)
        return JSONResponse(detail.model_dump(mode="json"))

    def api_diff(self, request: Request) -> Response:
        return JSONResponse(self._diff(request).model_dump(mode="json"))

    def fragment_runs(self, request: Request) -> Response:
        rows = run_rows(self.store, self.transcripts)
        context = {"runs": rows, "selected": request.query_params.get("selected")}
        return self._fragment(request, "_runs.html", context)

    def fragment_run(self, request: Request) -> Response:
        detail = run_detail(self.store, request.path_params["run_id"], self.transcripts)
        return self._fragment(request, "_run.html", run_context(detail))

    def fragment_diff(self, request: Request) -> Response:
        return self._fragment(request, "_diff.html", {"diff": self._diff(request)})

    def _diff(self, request: Request) -> VersionDiff:
        try:
            a, b = int(request.query_params["a"]), int(request.query_params["b"])
        except (KeyError, ValueError):
            raise BadQuery("give two versions as integers: ?a=1&b=2") from None
        return version_diff(self.store, request.path_params["run_id"], a, b)

    def _fragment(self, request: Request, name: str, context: dict[str, Any]) -> Response:
        return self.templates.TemplateResponse(request, name, context)


class BadQuery(Exception):
    pass


def dashboard_app(
    store: Store | Path | str,
    token: str | None = None,
    *,
    transcripts: Path | None = None,
    allowed_hosts: Sequence[str] | None = None,
) -> Starlette:
    """The dashboard, to serve alone or mount (e.g. at /dashboard) in another Starlette app.

    `token` None means no login (only for loopback). `allowed_hosts` turns on Host-header checking,
    the defence against DNS rebinding, when nothing in front of the app does it already.
    """
    dash = Dashboard(
        store if isinstance(store, Store) else Store(store), token, transcripts or transcripts_dir()
    )
    routes = [
        Route("/", dash.index),
        Route("/login", dash.login, methods=["GET", "POST"]),
        Route("/api/runs", dash.guarded(dash.api_runs)),
        Route("/api/runs/{run_id}", dash.guarded(dash.api_run)),
        Route("/api/runs/{run_id}/diff", dash.guarded(dash.api_diff)),
        Route("/fragments/runs", dash.guarded(dash.fragment_runs)),
        Route("/fragments/runs/{run_id}", dash.guarded(dash.fragment_run)),
        Route("/fragments/runs/{run_id}/diff", dash.guarded(dash.fragment_diff)),
    ]
    middleware = [Middleware(BodyLimit, max_bytes=DASHBOARD_BODY_BYTES)]  # the login form is the only body
    if allowed_hosts:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)))
    return Starlette(routes=routes, middleware=middleware)
