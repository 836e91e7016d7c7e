"""`serve --transport http` also serves the dashboard at /dashboard/, behind its own token cookie."""

from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from autoresearch_mcp.server.http import ListeningServer, serve_http
from autoresearch_mcp.server.settings import ServerSettings

TOKEN = "a-long-enough-token-for-the-server"


@pytest.fixture
def served_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Starlette:
    """The app serve_http hands to uvicorn, captured instead of served."""
    captured: dict[str, Any] = {}

    def run(server: ListeningServer, sockets: object = None) -> None:
        captured["app"] = server.config.app
        server.started = True

    monkeypatch.setattr(ListeningServer, "run", run)
    serve_http(ServerSettings(db_path=tmp_path / "runs.db"), host="127.0.0.1", port=8765, token=TOKEN)
    return captured["app"]


def test_the_http_server_serves_the_dashboard_at_its_own_route_behind_the_token(served_app):
    research = served_app.state.research
    run, _ = research.runs.start_run("toy-quadratic", budget=4, target=None, seed=1, name="over http")
    with TestClient(served_app, base_url="http://127.0.0.1:8765", follow_redirects=False) as client:
        assert client.get("/dashboard/api/runs").status_code == 401
        assert 'action="/dashboard/login"' in client.get("/dashboard/").text
        login = client.post("/dashboard/login", data={"token": TOKEN})
        assert login.headers["location"] == "/dashboard/"
        assert "Path=/dashboard/;" in login.headers["set-cookie"]
        runs = client.get("/dashboard/api/runs").json()["runs"]
        assert [(r["id"], r["name"]) for r in runs] == [(run.id, "over http")]
        # The MCP endpoint still wants its bearer token; the cookie does not open it.
        assert client.post("/mcp", json={}).status_code == 401


def test_the_dashboard_in_the_http_server_refuses_foreign_host_names(served_app):
    client = TestClient(served_app, base_url="http://127.0.0.1:8765")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    assert client.get("/dashboard/api/runs", headers=headers).status_code == 200
    assert (
        client.get("/dashboard/api/runs", headers={**headers, "host": "rebound.example"}).status_code == 400
    )
