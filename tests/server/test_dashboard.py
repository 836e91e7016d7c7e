"""The dashboard's routes, its token cookie, and the report file, against a realistic run in a real SQLite file."""

import gzip
import json
import random
import re
from pathlib import Path

import pytest
from dashboard_data import make_run, record, write_transcript
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from autoresearch_mcp.cli import main
from autoresearch_mcp.contract.transcript import load_transcript, totals, totals_by_iteration
from autoresearch_mcp.server.dashboard import dashboard_app, render_report
from autoresearch_mcp.server.dashboard.app import COOKIE
from autoresearch_mcp.server.dashboard.views import best_so_far, run_detail
from autoresearch_mcp.server.store import Store

TOKEN = "s3cret-token"


@pytest.fixture
def run(tmp_path: Path) -> tuple[Store, Path, str]:
    return make_run(tmp_path)


def client_for(run: tuple[Store, Path, str], token: str | None = None) -> TestClient:
    store, transcripts, _ = run
    return TestClient(dashboard_app(store, token, transcripts=transcripts), follow_redirects=False)


def test_the_run_list_route_gives_task_status_best_metric_and_budget_used(run):
    _, _, run_id = run
    runs = client_for(run).get("/api/runs").json()["runs"]
    assert [r["id"] for r in runs] == [run_id]
    row = runs[0]
    assert (row["task"], row["status"], row["used"], row["budget"]) == ("hpo-covertype", "running", 20, 30)
    assert row["metric_name"] == "macro_f1"
    experiments, _ = run[0].experiments(run_id)
    assert row["best_metric"] == max(e.metric for e in experiments if e.metric is not None)


def test_the_run_route_gives_experiments_best_so_far_versions_notes_and_tokens_per_iteration(run):
    _, transcripts, run_id = run
    detail = client_for(run).get(f"/api/runs/{run_id}").json()
    assert [e["iteration"] for e in detail["experiments"]] == list(range(1, 21))
    assert [e["status"] for e in detail["experiments"] if e["status"] != "ok"] == [
        "crash",
        "crash",
        "timeout",
    ]
    bests = [p["best"] for p in detail["curve"]]
    assert bests == sorted(bests)  # best so far never gets worse on a max metric
    assert bests[-1] == detail["run"]["best"]["metric"]
    assert [v["version"] for v in detail["versions"]] == [1, 2, 3]
    assert [n["kind"] for n in detail["notes"]] == ["strategy", "failed", "strategy"]
    [use] = detail["tokens"]
    expected = totals_by_iteration(load_transcript(transcripts / f"{run_id}-stateful.jsonl"))
    assert use["mode"] == "stateful"
    assert [row["totals"]["context"] for row in use["per_iteration"]] == [
        t.context for t in expected.values()
    ]
    assert use["total"]["calls"] == 20


def test_an_unknown_run_is_a_404_with_the_reason(run):
    response = client_for(run).get("/api/runs/r-nope")
    assert response.status_code == 404
    assert "unknown run" in response.json()["error"]


def test_the_diff_route_shows_what_changed_between_two_versions(run):
    _, _, run_id = run
    client = client_for(run)
    diff = client.get(f"/api/runs/{run_id}/diff", params={"a": 1, "b": 3}).json()
    assert (diff["added"], diff["removed"]) == (4, 3)
    added = [line["text"] for line in diff["lines"] if line["kind"] == "add"]
    assert "+    model.fit(X_train, y_train, sample_weight=weights)" in added
    assert diff["unified"].startswith("--- train.py v1\n+++ train.py v3")
    html = client.get(f"/fragments/runs/{run_id}/diff", params={"a": 1, "b": 3}).text
    assert '<span class="add">+    weights = balanced_weights(y_train)</span>' in html


def test_a_diff_needs_two_existing_versions(run):
    _, _, run_id = run
    client = client_for(run)
    assert client.get(f"/api/runs/{run_id}/diff", params={"a": "x", "b": 2}).status_code == 400
    missing = client.get(f"/api/runs/{run_id}/diff", params={"a": 1, "b": 9})
    assert missing.status_code == 404
    assert "versions are 1..3" in missing.json()["error"]


def test_the_run_fragment_holds_the_chart_the_experiment_table_and_the_token_table(run):
    _, _, run_id = run
    html = client_for(run).get(f"/fragments/runs/{run_id}").text
    assert html.count('<tr class="exp') == 20
    assert '<div class="chart" id="metric-chart"><svg' in html
    assert '<div class="chart" id="tokens-chart"><svg' in html
    assert "Depth above 11 crashes" in html


def test_a_transcript_written_with_a_token_budget_shows_the_full_tokens_against_it_on_the_page_and_the_report(
    run,
):
    store, transcripts, run_id = run
    path = transcripts / f"{run_id}-stateful.jsonl"
    spent = totals(load_transcript(path)).full
    path.unlink()
    write_transcript(path, run_id, 20, token_budget=4 * spent)  # the same calls, under a budget
    client = client_for(run)
    [use] = client.get(f"/api/runs/{run_id}").json()["tokens"]
    assert (use["token_budget"], use["budget_spent"]) == (4 * spent, spent)
    shown = f"full {spent:,} / {4 * spent:,} budget (25%)"  # as the client's live panel says it
    assert shown in client.get(f"/fragments/runs/{run_id}").text
    assert shown in render_report(store, run_id, transcripts)


def test_a_transcript_from_before_the_token_budget_field_still_renders_with_no_budget(run):
    store, transcripts, run_id = run
    path = transcripts / f"{run_id}-stateful.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text(
        "".join(json.dumps({k: v for k, v in line.items() if k != "token_budget"}) + "\n" for line in lines)
    )
    client = client_for(run)
    [use] = client.get(f"/api/runs/{run_id}").json()["tokens"]
    assert use["token_budget"] is None and use["total"]["calls"] == 20
    page = client.get(f"/fragments/runs/{run_id}")
    assert page.status_code == 200 and '<table class="tokens">' in page.text
    assert "token budget" not in page.text and "token budget" not in render_report(store, run_id, transcripts)


def test_after_a_resume_the_budget_counts_only_the_calls_since_as_the_client_held_it(run):
    _, transcripts, run_id = run
    path = transcripts / f"{run_id}-stateful.jsonl"
    before = totals(load_transcript(path)).full
    write_transcript(path, run_id, 3, token_budget=100_000)  # `run --run-id`: a new session, calls from 1
    since = totals(load_transcript(path)).full - before
    client = client_for(run)
    [use] = client.get(f"/api/runs/{run_id}").json()["tokens"]
    assert (use["token_budget"], use["budget_spent"], use["total"]["calls"]) == (100_000, since, 23)
    html = client.get(f"/fragments/runs/{run_id}").text
    assert f"full {since:,} / 100,000 budget" in html and "the calls since the run was resumed" in html


def test_the_stamp_the_page_polls_changes_when_an_experiment_is_recorded(run):
    store, _, run_id = run
    client = client_for(run)
    before = client.get("/api/runs").json()["runs"][0]["stamp"]
    record(store, run_id, 21, random.Random(1), 3)
    assert client.get("/api/runs").json()["runs"][0]["stamp"] != before


def test_without_a_token_configured_the_page_needs_no_login(run):
    response = client_for(run).get("/")
    assert response.status_code == 200
    assert 'data-base="/"' in response.text


def test_with_a_token_every_data_route_answers_401_until_the_login_sets_a_strict_httponly_cookie(run):
    _, _, run_id = run
    client = client_for(run, TOKEN)
    for path in ("/api/runs", f"/api/runs/{run_id}", f"/fragments/runs/{run_id}", "/fragments/runs"):
        assert client.get(path).status_code == 401
    page = client.get("/")
    assert page.status_code == 401
    assert 'name="token"' in page.text
    wrong = client.post("/login", data={"token": "guess"})
    assert wrong.status_code == 401
    assert "set-cookie" not in wrong.headers
    login = client.post("/login", data={"token": TOKEN})
    assert login.status_code == 303
    assert login.headers["location"] == "/"
    cookie = login.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    assert TOKEN not in cookie  # a digest, not the token itself
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert "Path=/;" in cookie
    assert client.get("/api/runs").status_code == 200
    assert client.get("/").status_code == 200


def test_with_a_token_a_bearer_header_also_opens_the_data_routes(run):
    client = client_for(run, TOKEN)
    assert client.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert client.get("/api/runs", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_mounted_at_dashboard_its_links_and_cookie_live_under_the_mount(run):
    store, transcripts, _ = run
    outer = Starlette(routes=[Mount("/dashboard", app=dashboard_app(store, TOKEN, transcripts=transcripts))])
    client = TestClient(outer, follow_redirects=False)
    assert 'action="/dashboard/login"' in client.get("/dashboard/").text
    login = client.post("/dashboard/login", data={"token": TOKEN})
    assert login.headers["location"] == "/dashboard/"
    assert "Path=/dashboard/;" in login.headers["set-cookie"]
    assert 'data-base="/dashboard/"' in client.get("/dashboard/").text
    assert client.get("/dashboard/api/runs").status_code == 200


def test_with_allowed_hosts_a_request_for_another_host_name_is_refused(run):
    store, transcripts, _ = run
    app = dashboard_app(store, None, transcripts=transcripts, allowed_hosts=["127.0.0.1", "localhost"])
    client = TestClient(app, base_url="http://127.0.0.1:8770")
    assert client.get("/api/runs").status_code == 200
    assert client.get("/api/runs", headers={"host": "attacker.example"}).status_code == 400


def test_the_report_is_one_file_with_no_outside_references(run):
    store, transcripts, run_id = run
    html = render_report(store, run_id, transcripts)
    refs = re.findall(r"""\b(?:src|href|action)\s*=\s*["']?([^"'\s>]+)""", html, flags=re.I)
    assert refs  # the SVG's internal references, at least
    assert all(ref.startswith("#") for ref in refs), [r for r in refs if not r.startswith("#")]
    assert "<script" not in html
    assert "<link" not in html
    assert "@import" not in html
    assert not re.search(r"url\((?!#)", html)  # only the SVG's own clip paths
    assert html.count('<tr class="exp') == 20
    assert html.count("<svg") == 2
    # A static file cannot diff on demand: each version against its parent, and v1 against the latest.
    assert re.findall(r"train.py v(\d) → v(\d)", html) == [("1", "2"), ("2", "3"), ("1", "3")]


def test_best_so_far_steps_only_at_the_experiments_that_became_the_best(run):
    store, transcripts, run_id = run
    experiments = run_detail(store, run_id, transcripts).experiments
    curve = best_so_far(experiments, "max")
    steps = [
        p.iteration
        for i, p in enumerate(curve)
        if p.best is not None and (i == 0 or curve[i - 1].best != p.best)
    ]
    assert steps == [e.iteration for e in experiments if e.kept]
    # A higher metric that the task's rule did not keep (within the noise) leaves the curve where it was.
    unkept = experiments[-1].model_copy(update={"kept": False, "metric": 99.0, "status": "ok"})
    assert best_so_far([*experiments[:-1], unkept], "max")[-1].best == curve[-2].best


def test_the_report_command_writes_the_latest_run_to_the_file_asked_for(run, tmp_path):
    store, _, run_id = run
    out = tmp_path / "out" / "report.html"
    assert main(["report", "latest", "--db", str(store.path), "--out", str(out)]) == 0
    assert "<title>autoresearch-mcp report: hpo demo (synthetic metrics)</title>" in out.read_text()
    assert main(["report", run_id, "--db", str(tmp_path / "missing.db"), "--out", str(out)]) == 2


def test_the_dashboard_command_refuses_to_bind_off_loopback_without_a_token(run, capsys):
    store, _, _ = run
    assert main(["dashboard", "--db", str(store.path), "--host", "0.0.0.0"]) == 2
    assert "set --token" in capsys.readouterr().err


def test_the_report_reads_higher_is_better_and_labels_every_time_in_utc(run):
    store, transcripts, run_id = run
    html = render_report(store, run_id, transcripts)
    assert "best macro_f1 (higher is better)" in html
    stamps = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d(?: [A-Z]+)?", html)
    assert stamps and all(stamp.endswith(" UTC") for stamp in stamps), stamps
    assert "(UTC)" not in html  # one label, on the times themselves


def test_the_experiments_table_shows_changes_from_the_best_not_every_param(run):
    store, transcripts, run_id = run
    detail = run_detail(store, run_id, transcripts)
    best = detail.run.best
    assert best is not None and detail.changes[best.iteration] == {}
    for exp in detail.experiments:
        assert detail.changes[exp.iteration] == {k: v for k, v in exp.params.items() if best.params[k] != v}
    html = render_report(store, run_id, transcripts)
    assert "changes vs best" in html and 'class="params best-params"' in html and 'class="changed"' in html


def test_a_code_task_report_shows_each_rows_edit_description(tmp_path):
    store = Store(tmp_path / "runs.db")
    run = store.create_run(
        task="codeopt-records",
        budget=5,
        target=None,
        seed=1,
        name=None,
        config={"metric": "speedup", "direction": "max", "options": {}},
        initial_source="def process_records(records):\n    return records\n",
    )
    version = store.artifacts.add(
        run.id, "def process_records(records):\n    return list(records)\n", "copy once"
    )
    exp = store.reserve_experiment(run.id, {}, version.version, None)
    store.complete_experiment(
        exp.id, status="ok", metrics={"speedup": 1.5}, metric=1.5, error_tail=None, duration_s=2.0
    )
    html = render_report(store, run.id, tmp_path)
    assert "train.py edit" in html and "v2: copy once" in html


def test_line_counts_agree_between_the_tool_the_view_and_the_dashboard(tmp_path):
    from autoresearch_mcp.contract.models import line_count
    from autoresearch_mcp.server.query import query_results

    store = Store(tmp_path / "runs.db")
    source = "a = 1\nb = 2\n"
    run = store.create_run(
        task="codeopt-records",
        budget=5,
        target=None,
        seed=1,
        name=None,
        config={"metric": "speedup", "direction": "max", "options": {}},
        initial_source=source,
    )
    store.artifacts.add(run.id, "a = 1", "no final newline")
    viewed = query_results(store.path, "SELECT version, lines FROM v_artifacts ORDER BY version", 10).rows
    shown = [(v.version, v.lines) for v in run_detail(store, run.id, tmp_path).versions]
    assert viewed == [[1, 2], [2, 1]] and shown == [(1, 2), (2, 1)]
    assert [line_count(source), line_count("a = 1"), line_count("")] == [2, 1, 0]


def test_a_gzipped_transcript_reads_as_the_plain_one(tmp_path):
    plain = tmp_path / "r-stateful.jsonl"
    plain.write_text('{"call": 1}\n{"call": 2}\n{"call": 3, "torn')
    packed = tmp_path / "r-stateful.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load_transcript(packed) == load_transcript(plain) == [{"call": 1}, {"call": 2}]


def test_a_scripted_run_is_marked_in_the_list_and_on_its_page_and_a_new_tag_changes_its_stamp(
    tmp_path: Path,
):
    from autoresearch_mcp.server.manage import tag_run

    store = Store(tmp_path / "runs.db")
    run = store.create_run(
        task="toy-quadratic",
        budget=2,
        target=None,
        seed=1,
        name="a name that does not say scripted",
        config={"metric": "score", "direction": "max", "options": {}, "llm": "scripted"},
        initial_source="x = 1\n",
    )
    client = TestClient(dashboard_app(store, None, transcripts=tmp_path), follow_redirects=False)
    [row] = client.get("/api/runs").json()["runs"]
    assert row["scripted"] is True and "scripted double" in client.get("/fragments/runs").text
    assert "Scripted backend:" in client.get(f"/fragments/runs/{run.id}").text
    tag_run(store, run.id, ["baseline"], [])
    [tagged] = client.get("/api/runs").json()["runs"]
    assert tagged["tags"] == ["baseline"] and tagged["stamp"] != row["stamp"]
