"""What an experiment's answer and finish_run say beyond the numbers: why a version was not kept, which
version the next edit changes, and a reason given to a run that had already ended."""

import textwrap
from pathlib import Path

import pytest
from mcp import Client

from autoresearch_mcp.contract.errors import RepeatError
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store
from folder_fixture import make_folder

pytestmark = pytest.mark.anyio
TOML = textwrap.dedent(
    """\
    [task]
    name = "printed"
    command = ["python", "train.py"]
    metric = "loss"
    direction = "minimize"
    timeout_s = 30
    work = "code"
    profile = false
    """
)


def printed(tmp_path: Path) -> Research:
    """A server's logic for a code folder whose script prints its loss, 2.0 as it stands."""
    folder = tmp_path / "printed"
    folder.mkdir()
    (folder / "train.py").write_text('print("loss: 2.0")\n')
    (folder / "autoresearch.toml").write_text(TOML)
    return Research(ServerSettings(db_path=tmp_path / "runs.db", task_dirs=[str(folder)]))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_version_not_kept_is_told_the_next_edit_changes_it_and_a_late_reason_is_kept(
    tmp_path: Path,
) -> None:
    async with Client(build_server(printed(tmp_path)), raise_exceptions=True) as client:
        run_id = (await client.call_tool("start_run", {"task": "printed", "budget": 3})).structured_content[
            "run_id"
        ]
        first = (await client.call_tool("run_benchmark", {"run_id": run_id})).structured_content
        answers = []
        for loss in ("5.0", "6.0"):
            edit = {"run_id": run_id, "description": "worse", "source": f'print("loss: {loss}")\n'}
            assert not (await client.call_tool("modify_train_py", edit)).is_error
            answers.append((await client.call_tool("run_benchmark", {"run_id": run_id})).structured_content)
        worse, last = answers
        assert last["run_status"] == "exhausted"
        ended = await client.call_tool("finish_run", {"run_id": run_id, "reason": "nothing left to try"})
        run = (await client.call_tool("list_runs", {})).structured_content["runs"][0]
    assert first["message"] == "kept: the run's first result (loss 2)"
    assert worse["message"] == (
        "not kept: loss 5 does not beat the best's 2 (#1). Your next edit applies to v2; the best is v1 "
        "(revert_train_py to build on it)"
    )
    # The run's last experiment: nothing is left to build on, and the answer gives no order.
    assert last["message"] == "not kept: loss 6 does not beat the best's 2 (#1)"
    assert not ended.is_error
    assert run["finish_reason"] == "exhausted after experiment #3; finish_run: nothing left to try"


async def test_a_version_reverted_to_the_best_is_not_told_to_revert_to_the_best(tmp_path: Path) -> None:
    async with Client(build_server(printed(tmp_path)), raise_exceptions=True) as client:
        run_id = (await client.call_tool("start_run", {"task": "printed", "budget": 5})).structured_content[
            "run_id"
        ]
        await client.call_tool("run_benchmark", {"run_id": run_id})
        edit = {"run_id": run_id, "description": "worse", "source": 'print("loss: 5.0")\n'}
        assert not (await client.call_tool("modify_train_py", edit)).is_error
        await client.call_tool("run_benchmark", {"run_id": run_id})
        reverted = await client.call_tool("revert_train_py", {"run_id": run_id, "version": 1})
        again = (await client.call_tool("run_benchmark", {"run_id": run_id})).structured_content
    # v3 is v1's code (the best's): an edit to it builds on the best already
    assert reverted.structured_content["version"] == 3
    assert again["message"] == "not kept: loss 2 does not beat the best's 2 (#1)"


async def test_an_exact_repeat_names_the_tasks_own_file_and_no_edit_where_none_is_allowed(
    tmp_path: Path,
) -> None:
    tuned = make_folder(tmp_path)  # a params folder with no `edit`: nothing may be changed but params
    code = tmp_path / "slow"
    code.mkdir()
    (code / "slow.py").write_text('print("loss: 2.0")\n')
    toml = TOML.replace('name = "printed"', 'name = "slow"').replace('"train.py"', '"slow.py"')
    (code / "autoresearch.toml").write_text(toml + 'edit = ["slow.py"]\n')
    settings = ServerSettings(db_path=tmp_path / "runs.db", task_dirs=[str(tuned), str(code)])
    research = Research(settings)
    async with Client(build_server(research), raise_exceptions=True) as client:
        # hpo-covertype's file is train.py: its words stay as the small profile's prompts were tuned on
        started = await client.call_tool("start_run", {"task": "hpo-covertype", "budget": 3})
        run_id = started.structured_content["run_id"]
        research.store.reserve_experiment(
            run_id, research.tasks("hpo-covertype").params_model().model_dump(), 1, None
        )
        hpo = await client.call_tool("run_experiment", {"run_id": run_id, "params": {}})
        refusals = []
        for task, tool, args in (("bowl", "run_experiment", {"params": {}}), ("slow", "run_benchmark", {})):
            run_id = (await client.call_tool("start_run", {"task": task, "budget": 3})).structured_content[
                "run_id"
            ]
            assert not (await client.call_tool(tool, {"run_id": run_id, **args})).is_error
            again = await client.call_tool(tool, {"run_id": run_id, **args})
            assert again.is_error
            refusals.append(again.content[0].text)
    tuned_refusal, code_refusal = refusals
    assert hpo.is_error and hpo.content[0].text == (
        "exact repeat of experiment #1 (same params on train.py v1), which has not finished yet (queued or "
        "running): its result comes with a later summary. Not run again; try different params or change "
        "train.py."
    )
    assert tuned_refusal.startswith("exact repeat of experiment #1 (same params), which ended ok with ")
    assert tuned_refusal.endswith(". Not run again; try different params.")
    # The loss the script prints is no timing: no re-measurement is offered, which the server refuses.
    assert code_refusal == (
        "exact repeat of experiment #1 (same params on slow.py v1), which ended ok with 2.0000. Not run "
        "again; change slow.py."
    )


def test_an_exact_repeat_of_a_timed_version_offers_a_re_measurement_and_an_untimed_one_does_not(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "runs.db")
    refusals = []
    for noisy in (True, False):
        run = store.create_run(
            task="codeopt-records", budget=5, target=None, seed=1, name=None,
            config={"metric": "speedup", "direction": "max", "options": {}}, initial_source="x = 1\n",
        )  # fmt: skip
        store.reserve_experiment(run.id, {}, 1, None, files=["train.py"], noisy=noisy)
        with pytest.raises(RepeatError) as refused:
            store.reserve_experiment(run.id, {}, 1, None, files=["train.py"], noisy=noisy)
        refusals.append(str(refused.value))
    timed, untimed = refusals
    assert timed.endswith("Not run again; change train.py, or pass remeasure=true for another sample.")
    assert untimed.endswith("Not run again; change train.py.")
