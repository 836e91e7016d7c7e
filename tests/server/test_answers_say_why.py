"""What an experiment's answer and finish_run say beyond the numbers: why a version was not kept, which
version the next edit changes, and a reason given to a run that had already ended."""

import textwrap
from pathlib import Path

import pytest
from mcp import Client

from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings

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


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_version_not_kept_is_told_the_next_edit_changes_it_and_a_late_reason_is_kept(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "printed"
    folder.mkdir()
    (folder / "train.py").write_text('print("loss: 2.0")\n')
    (folder / "autoresearch.toml").write_text(TOML)
    settings = ServerSettings(db_path=tmp_path / "runs.db", task_dirs=[str(folder)])
    async with Client(build_server(Research(settings)), raise_exceptions=True) as client:
        run_id = (await client.call_tool("start_run", {"task": "printed", "budget": 2})).structured_content[
            "run_id"
        ]
        first = (await client.call_tool("run_benchmark", {"run_id": run_id})).structured_content
        edit = {"run_id": run_id, "description": "worse", "source": 'print("loss: 5.0")\n'}
        assert not (await client.call_tool("modify_train_py", edit)).is_error
        worse = (await client.call_tool("run_benchmark", {"run_id": run_id})).structured_content
        assert worse["run_status"] == "exhausted"
        ended = await client.call_tool("finish_run", {"run_id": run_id, "reason": "nothing left to try"})
        run = (await client.call_tool("list_runs", {})).structured_content["runs"][0]
    assert first["message"] == "kept: the run's first result (loss 2)"
    assert worse["message"] == (
        "not kept: loss 5 does not beat the best's 2 (#1). train.py stays v2, the version edits change; "
        "the best is v1 (revert_train_py to build on it)"
    )
    assert not ended.is_error
    assert run["finish_reason"] == "exhausted after experiment #2; finish_run: nothing left to try"
