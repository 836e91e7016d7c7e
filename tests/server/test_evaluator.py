"""A task folder's `[evaluate]`: the folder's own evaluator decides the metric, after every process of the
candidate has ended, from copies of its declared outputs and reads only it may open. Each attack is a
version of train.py sent through MCP (modify_train_py, run_benchmark) to a real server and the real
sandbox; none moves the recorded metric."""

import re
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from autoresearch_mcp.cli import main
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.dashboard.render import render_report
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.tasks.folder.spec import load_folder

pytestmark = pytest.mark.anyio
ANSWER = 0.3
HONEST = 'open("predictions.txt", "w").write("0.25")\n'
EVALUATE = textwrap.dedent(
    """\
    guess = float(open("predictions.txt").read())
    answer = float(open("secret/answer.txt").read())
    print(f"loss: {(guess - answer) ** 2:.6f}")
    print("evaluated: 1")
    """
)
TOML = textwrap.dedent(
    """\
    [task]
    name = "judged"
    description = "Guess the hidden number."
    command = ["python", "train.py"]
    metric = "loss"
    direction = "minimize"
    timeout_s = 30
    work = "code"
    profile = false
    {extra}

    [evaluate]
    command = ["python", "evaluate.py"]
    reads = ["secret/"]
    outputs = ["predictions.txt"]
    """
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def judged_folder(root: Path, extra: str = "") -> Path:
    folder = root / "judged"
    (folder / "secret").mkdir(parents=True)
    (folder / "secret" / "answer.txt").write_text(f"{ANSWER}\n")
    (folder / "train.py").write_text('open("predictions.txt", "w").write("0.5")\n')
    (folder / "evaluate.py").write_text(EVALUATE)
    (folder / "autoresearch.toml").write_text(TOML.format(extra=extra))
    return folder


async def benchmark_versions(folder: Path, db: Path, *sources: str) -> list[dict[str, Any]]:
    """Each source as a new version of train.py, benchmarked in turn: what run_benchmark answered."""
    settings = ServerSettings(db_path=db, task_dirs=[str(folder)])
    answers = []
    async with Client(build_server(Research(settings)), raise_exceptions=True) as client:
        started = await client.call_tool("start_run", {"task": "judged", "budget": len(sources)})
        run_id = started.structured_content["run_id"]
        assert started.structured_content["judged_by"] == "evaluator"
        for source in sources:
            edit = {"run_id": run_id, "description": "a version", "source": source}
            edited = await client.call_tool("modify_train_py", edit)
            assert not edited.is_error, edited.content
            answer = await client.call_tool("run_benchmark", {"run_id": run_id})
            assert not answer.is_error, answer.content
            answers.append(answer.structured_content["experiment"])
    return answers


async def test_no_version_of_the_script_moves_the_metric_its_evaluator_decides(tmp_path: Path) -> None:
    folder = judged_folder(tmp_path)
    secret = folder / "secret" / "answer.txt"
    fake_metric = HONEST + 'print("loss: 0.0")\n'
    reads_the_secret = textwrap.dedent(
        f"""\
        found = None
        for path in ("secret/answer.txt", {str(secret)!r}):
            try:
                found = open(path).read().strip()
                print("read_secret: 1")
            except OSError:
                print("read_secret: 0")
        open("predictions.txt", "w").write(found or "0.9")
        """
    )
    replaces_the_evaluator = HONEST + 'open("evaluate.py", "w").write("print(\'loss: 0.0\')")\n'
    honest, faked, snooped, replaced = await benchmark_versions(
        folder, tmp_path / "runs.db", HONEST, fake_metric, reads_the_secret, replaces_the_evaluator
    )
    for exp in (honest, faked, snooped, replaced):
        assert exp["status"] == "ok" and exp["metrics"]["evaluated"] == 1.0, exp
    assert honest["metric"] == pytest.approx(0.0025)
    assert faked["metric"] == pytest.approx(0.0025) and faked["metrics"]["reported.loss"] == 0.0
    assert snooped["metric"] == pytest.approx(0.36) and snooped["metrics"]["reported.read_secret"] == 0.0
    assert replaced["metric"] == pytest.approx(0.0025)


async def test_a_process_left_behind_cannot_rewrite_the_outputs_the_evaluator_reads(tmp_path: Path) -> None:
    folder = judged_folder(tmp_path, extra="processes = true")
    leaves_a_writer = textwrap.dedent(
        """\
        import os, time
        open("predictions.txt", "w").write("0.9")
        if os.fork() == 0:  # a daemon with no stdout of ours: the script ends while it waits
            os.setsid()
            for fd in (0, 1, 2):
                os.close(fd)
            time.sleep(1.0)
            open("predictions.txt", "w").write("0.3")
            os._exit(0)
        """
    )
    [exp] = await benchmark_versions(folder, tmp_path / "runs.db", leaves_a_writer)
    assert exp["status"] == "ok" and exp["metric"] == pytest.approx(0.36)


async def test_a_missing_output_or_a_failing_evaluator_is_a_crash_that_says_which(tmp_path: Path) -> None:
    folder = judged_folder(tmp_path)
    leaves_nothing = 'print("loss: 0.0")\n'
    wrong_format = 'open("predictions.txt", "w").write("not a number")\n'
    linked = 'import os\nos.symlink("secret/answer.txt", "predictions.txt")\n'
    missing, failing, link = await benchmark_versions(
        folder, tmp_path / "runs.db", leaves_nothing, wrong_format, linked
    )
    assert missing["status"] == "crash" and "the run left no predictions.txt" in missing["error_tail"]
    assert failing["status"] == "crash" and failing["error_tail"].startswith(
        "the evaluator exited with status 1"
    )
    assert "ValueError: could not convert string to float" in failing["error_tail"]
    assert (
        link["status"] == "crash"
        and "predictions.txt is, or lies behind, a symbolic link" in link["error_tail"]
    )


def test_a_folder_whose_agent_could_edit_the_evaluator_or_share_its_reads_is_refused(tmp_path: Path) -> None:
    folder = judged_folder(tmp_path)
    toml = folder / "autoresearch.toml"
    toml.write_text(TOML.format(extra='edit = ["train.py", "evaluate.py"]'))
    with pytest.raises(ResearchError, match=re.escape("edit: 'evaluate.py' is the evaluator's")):
        load_folder(folder)
    toml.write_text(TOML.format(extra='reads = ["secret/answer.txt"]'))
    with pytest.raises(
        ResearchError, match=re.escape("evaluate.reads: 'secret/' overlaps the script's reads")
    ):
        load_folder(folder)
    toml.write_text(TOML.format(extra="").replace('reads = ["secret/"]', 'reads = ["nowhere/"]'))
    with pytest.raises(
        ResearchError, match=re.escape("evaluate.reads: 'nowhere/': no such file or directory")
    ):
        load_folder(folder)


def test_without_an_evaluator_code_work_says_its_metric_is_self_reported_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = judged_folder(tmp_path)
    toml = folder / "autoresearch.toml"
    toml.write_text(TOML.format(extra="").split("[evaluate]")[0])
    db = tmp_path / "runs.db"
    settings = ServerSettings(db_path=db, task_dirs=[str(folder)])

    async def start() -> dict[str, Any]:
        async with Client(build_server(Research(settings)), raise_exceptions=True) as client:
            return (await client.call_tool("start_run", {"task": "judged", "budget": 2})).structured_content

    started = anyio.run(start)
    assert started["judged_by"] == "self-reported"
    assert "loss is self-reported: the edited script prints it (no [evaluate])" in started["summary"]
    assert main(["show", started["run_id"], "--db", str(db)]) == 0
    assert (
        "the metric is self-reported: the last metric line the edited script prints"
        in capsys.readouterr().out
    )
    html = render_report(Store(db), started["run_id"], tmp_path / "transcripts")
    assert 'id="self-reported-note"' in html and "self-reported" in html


PARAMS_TOML = textwrap.dedent(
    """\
    [task]
    name = "tuned"
    command = ["python", "train.py"]
    metric = "loss"
    direction = "minimize"
    work = "params"

    [params.guess]
    type = "float"
    low = 0.0
    high = 1.0
    default = 0.5
    {evaluate}
    """
)


@pytest.mark.parametrize("evaluated", [False, True], ids=["script-judged", "evaluator-judged"])
async def test_params_work_edits_its_script_only_where_an_evaluator_decides_the_metric(
    tmp_path: Path, evaluated: bool
) -> None:
    folder = judged_folder(tmp_path)
    evaluate = '\n[evaluate]\ncommand = ["python", "evaluate.py"]\nreads = ["secret/"]\noutputs = ["predictions.txt"]'
    (folder / "autoresearch.toml").write_text(PARAMS_TOML.format(evaluate=evaluate if evaluated else ""))
    settings = ServerSettings(db_path=tmp_path / "runs.db", task_dirs=[str(folder)])
    async with Client(build_server(Research(settings)), raise_exceptions=True) as client:
        started = await client.call_tool("start_run", {"task": "tuned", "budget": 2})
        run_id = started.structured_content["run_id"]
        assert started.structured_content["judged_by"] == ("evaluator" if evaluated else "script")
        cheat = {"run_id": run_id, "description": "print a perfect loss", "source": 'print("loss: 0.0")\n'}
        edited = await client.call_tool("modify_train_py", cheat)
        # A search text that is nowhere in the file: where no edit is ever allowed, that is said first,
        # not how to fix the search.
        missing = {
            "run_id": run_id,
            "description": "x",
            "edits": [{"search": "not in the file", "replace": "y"}],
        }
        astray = (await client.call_tool("modify_train_py", missing)).content[0].text  # type: ignore[union-attr]
        current = await client.call_tool("get_current_train_py", {"run_id": run_id})
    text = edited.content[0].text  # type: ignore[union-attr]
    if evaluated:
        assert not edited.is_error, text
        assert "v2" in current.content[0].text  # type: ignore[union-attr]
    else:
        assert edited.is_error
        assert "printed by its own script" in text and "declare [evaluate]" in text
        assert "printed by its own script" in astray and "search text" not in astray
        assert "v1" in current.content[0].text  # type: ignore[union-attr]
