"""What a host's model reads in the text of start_run, run_experiment, get_experiment_history: how long
an experiment may run and how long each took, the notes beside long params, and none of our internal
names (a folder's params model, the keep rule's bookkeeping metrics)."""

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from autoresearch_mcp.contract.models import Experiment, ExperimentResult, Job, JobInfo
from autoresearch_mcp.server.answers import Reading, experiment_text, job_text
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from folder_fixture import make_folder

pytestmark = pytest.mark.anyio
MORE_PARAMS = "".join(
    f'\n[params.{name}]\ntype = "float"\nlow = 0.0\nhigh = 100.0\ndefault = 1.0\n'
    for name in ("alpha", "beta", "gamma", "delta")
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def text_of(result: Any) -> str:
    assert not result.is_error, result.content
    return "".join(block.text for block in result.content if block.type == "text")


async def test_a_host_reads_the_timeout_the_run_times_and_the_notes_beside_long_params(tmp_path: Path):
    folder = make_folder(tmp_path, timeout=25)
    with (folder / "autoresearch.toml").open("a") as toml:
        toml.write(MORE_PARAMS)
    settings = ServerSettings(db_path=tmp_path / "runs.db", task_dirs=[str(folder)])
    params = {"x": 0.1234567, "y": -0.7654321, "alpha": 12.34567, "beta": 23.45678, "gamma": 34.5678}
    note = "gamma high because the last three runs improved as it rose"
    async with Client(build_server(Research(settings)), raise_exceptions=True) as client:
        started = await client.call_tool("start_run", {"task": "bowl", "budget": 3})
        run_id = started.structured_content["run_id"]
        answer = await client.call_tool("run_experiment", {"run_id": run_id, "params": params, "note": note})
        history = text_of(await client.call_tool("get_experiment_history", {"run_id": run_id}))
        resource = json.loads((await client.read_resource("autoresearch://tasks/bowl")).contents[0].text)
        listed = json.dumps([tool.model_dump(mode="json") for tool in (await client.list_tools()).tools])

    # the time limit, before any experiment meets it
    assert "each is stopped after 25 s." in text_of(started) and started.structured_content["timeout_s"] == 25
    took = answer.structured_content["experiment"]["duration_s"]
    assert text_of(answer).startswith(f"#1 ok in {took:.2g}s: loss ")
    header, row = history.splitlines()[:2]
    assert "| time |" in header and f"| {took:.2g}s |" in row
    # long params give way to the note, which says why the experiment was tried
    assert len(row) <= 120 and row.endswith("| " + note[:49] + "…") and "alpha=12.346" in row
    # the params schema is titled by the task, not by the class the server builds
    assert resource["params_schema"]["title"] == "bowl params" and "FolderParams" not in listed


def test_an_answer_shows_no_keep_rule_bookkeeping_among_its_metrics():
    exp = Experiment(
        id=1,
        run_id="r-test",
        iteration=1,
        params={},
        artifact_version=1,
        status="ok",
        metric=2.0,
        metrics={
            "speedup": 2.0,
            "speedup_low": 1.8,
            "speedup_high": 2.2,
            "inputs": 20.0,
            "time_ms": 5.0,
            "vs_best": 2.0,
            "vs_best_low": 1.8,
            "vs_best_high": 2.2,
            "vs_best_iteration": 0.0,
        },
        kept=True,
        started_at="2026-01-01T00:00:00+00:00",
    )
    result = ExperimentResult(
        experiment=exp, is_new_best=True, best=None, budget_left=3, run_status="running"
    )
    text = experiment_text(result, Reading(metric="speedup"))
    assert text.startswith("#1 ok: speedup 2 [1.8, 2.2] at 99% (time_ms 5);"), text
    assert "inputs" not in text and "vs_best" not in text


def test_a_failed_jobs_answer_says_its_error_once_with_its_parentheses_closed():
    reason = (
        "the server shut down before this job finished (the worker process (pid 12231) died: "
        "killed by signal SIGKILL)"
    )
    exp = Experiment(
        id=1,
        run_id="r-test",
        iteration=1,
        params={},
        artifact_version=1,
        status="interrupted",
        error_tail=f"job failed: {reason}",
        started_at="2026-01-01T00:00:00+00:00",
        duration_s=0.73,
    )
    job = Job(
        id="j-1",
        run_id="r-test",
        experiment_id=1,
        iteration=1,
        status="failed",
        executor="local",
        error=reason,
        submitted_at="2026-01-01T00:00:00+00:00",
    )
    result = ExperimentResult(
        experiment=exp, is_new_best=False, best=None, budget_left=3, run_status="running"
    )
    text = job_text(JobInfo(job=job, result=result), Reading())
    assert text.count("killed by signal SIGKILL") == 1, text
    assert text.startswith(f"job j-1: failed (#1): {reason}\n#1 interrupted in 0.73s; "), text
    # an error cut to fit an answer still closes what it opened
    long = exp.model_copy(update={"error_tail": "job failed: " + reason.replace("the server", "x" * 40)})
    cut = experiment_text(result.model_copy(update={"experiment": long}), Reading())
    assert cut.count("(") == cut.count(")"), cut
