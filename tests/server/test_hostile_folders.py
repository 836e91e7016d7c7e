"""A hostile task folder is refused when it loads, with one line naming the key: the server does not start
with it, so no tool ever runs its script. A declared read that holds the root, the home directory, the
server's data directory or its database; an `edit` file that is a link; a `python` that is no Python
interpreter. And a folder of more files than a run may create is no reason to fail every experiment:
the layout's own files are not the script's.
On main (7488d57) each hostile folder loaded without a word (reads = ["/"] let the script read
/etc/shadow and the database), and the large folder failed every experiment."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from autoresearch_mcp.contract.env import data_dir_path
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks.base import ExecContext
from autoresearch_mcp.server.tasks.folder import task as folder_task_module
from autoresearch_mcp.server.tasks.folder.task import folder_task_class
from folder_fixture import make_folder


def refusal(settings: ServerSettings, folder: Path) -> str:
    """The one line a server that registers `folder` refuses to start with."""
    with (
        pytest.raises(ResearchError) as refused,
        Research(settings.model_copy(update={"task_dirs": [str(folder)]})) as research,
    ):
        build_server(research)
    assert refused.value.kind == "bad_argument" and "\n" not in str(refused.value)
    return str(refused.value)


def test_a_real_server_given_a_hostile_folder_does_not_start_and_says_why_in_one_line(
    tmp_path: Path, isolated_data_dir: Path
):
    folder = make_folder(tmp_path / "proj", extra='reads = ["/"]')
    serve = shutil.which("autoresearch-mcp", path=str(Path(sys.executable).parent))
    assert serve is not None
    done = subprocess.run(
        [serve, "serve", "--db", str(tmp_path / "runs.db"), "--task-dir", str(folder)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env={"AUTORESEARCH_DATA_DIR": str(isolated_data_dir), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip().endswith(
        "reads: '/' holds the root of the file system (/); declare the "
        "files or directories the script reads, below it"
    )
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("held", ["root", "home", "data directory", "database"])
def test_a_read_that_holds_the_root_the_home_the_data_directory_or_the_database_is_refused(
    settings: ServerSettings, tmp_path: Path, held: str
):
    store = tmp_path / "store" / "runs.db"
    store.parent.mkdir()
    read = {
        "root": Path("/"),
        "home": Path.home(),
        "data directory": data_dir_path().parent,  # a directory above it holds it too
        "database": store.parent,
    }[held]
    folder = make_folder(tmp_path / "proj", extra=f'reads = ["{read}"]')
    text = refusal(settings.model_copy(update={"db_path": store}), folder)
    assert f"autoresearch.toml: reads: '{read}' holds the" in text and held.split()[0] in text


def test_an_edit_file_that_is_a_link_is_refused_even_to_a_file_inside_the_folder(
    settings: ServerSettings, tmp_path: Path
):
    outside = tmp_path / "elsewhere.py"
    outside.write_text("print('loss: 1')\n")
    folder = make_folder(tmp_path / "proj", extra='edit = ["train.py"]\nwork = "code"')
    (folder / "train.py").unlink()
    (folder / "train.py").symlink_to(outside)
    assert "edit: 'train.py' goes through the link train.py" in refusal(settings, folder)
    (folder / "real.py").write_text("print('loss: 1')\n")
    (folder / "train.py").unlink()
    (folder / "train.py").symlink_to(folder / "real.py")  # inside, but still a link: `apply` would follow it
    assert "goes through the link" in refusal(settings, folder)
    (folder / "sub").symlink_to(tmp_path, target_is_directory=True)  # a linked directory on the way
    (folder / "autoresearch.toml").write_text(
        (folder / "autoresearch.toml")
        .read_text()
        .replace('edit = ["train.py"]', 'edit = ["sub/elsewhere.py"]')
    )
    assert "edit: 'sub/elsewhere.py' goes through the link sub" in refusal(settings, folder)


@pytest.mark.parametrize("python", ["/bin/sh", "/bin/true"])
def test_a_python_that_runs_but_is_no_python_interpreter_is_refused_when_the_folder_loads(
    settings: ServerSettings, tmp_path: Path, python: str
):
    folder = make_folder(tmp_path / "proj", extra=f'python = "{python}"')
    assert f"python: {python} is not a Python interpreter" in refusal(settings, folder)


@pytest.mark.asyncio
async def test_a_folder_of_more_files_than_a_run_may_create_still_runs_its_script(
    settings: ServerSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The folder holds more files than the quota, each laid out in the working directory at every
    # experiment. At the real quota (100,000 files) the same holds; it takes minutes to make them here.
    monkeypatch.setattr(folder_task_module, "MAX_FILES", 100)
    folder = make_folder(tmp_path / "proj", script="print('loss: 1')\n")
    for i in range(150):
        (folder / f"{i:03d}.txt").write_text("x")
    with Research(settings.model_copy(update={"task_dirs": [str(folder)]})) as research:
        async with Client(build_server(research)) as client:
            run = await client.call_tool("start_run", {"task": folder.name, "budget": 2})
            run_id = run.structured_content["run_id"]
            result = await client.call_tool("run_experiment", {"run_id": run_id, "params": {}})
    experiment = result.structured_content["experiment"]
    assert experiment["status"] == "ok", experiment["error_tail"]  # on main: "created more than ... files"


SCRIPT_THAT_MAKES_FILES = """\
import os
os.makedirs("made")
for i in range({count}):
    open(f"made/{{i}}", "w").close()
print("loss: 1")
"""


@pytest.mark.parametrize(("made", "status"), [(10, "ok"), (60, "crash")])
def test_what_the_script_creates_counts_against_its_quota_on_top_of_the_layout(
    tmp_path: Path, made: int, status: str
):
    folder = make_folder(tmp_path / "proj", script=SCRIPT_THAT_MAKES_FILES.format(count=made))
    for i in range(200):
        (folder / f"{i}.txt").write_text("x")
    task = folder_task_class(folder)({})
    options = task.options()
    options["limits"]["max_files"] = 50  # four times fewer than the folder's files
    ctx = ExecContext(run_id="r-quota", seed=1, iteration=1, options=options)
    outcome = task.execute(task.params_model(), task.initial_artifact(), ctx)
    assert outcome.status == status, outcome.error_tail
    if status == "crash":
        assert "created more than 50 files in its working directory" in (outcome.error_tail or "")
