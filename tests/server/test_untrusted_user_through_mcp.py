"""Issue 46 through MCP: every break of the attack on 7488d57 that lived in the OS layers, tried again with
the Python layers off ("assume escape": escaped_task.py's codeopt candidates, and a task folder's script,
which never had them), on a real server, tools only. The payloads are tests/escape_probes.py.

On main, with the server as root: the candidate and the script ran as uid 0; add_key put a key in root's
keyring that the next experiment read (and that stayed in the host's /proc/keys); chmod, utime and
setxattr of a root-owned file outside the sandbox worked; unshare(CLONE_NEWUSER | CLONE_NEWNET) worked and
handed back a raw packet socket; netlink sockets opened; another evaluation cgroup's process list was
readable; and a folder script's System V shared memory, message queue and semaphore set were there for
the next experiment. Now each is refused, and the second of two experiments finds nothing the first
left."""

import errno
import json
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from codeopt_rewrites import REFERENCE_SOURCE
from escape_probes import SOURCE
from escaped_task import registered
from mcp import Client

from autoresearch_mcp.sandbox import cgroups, seccomp
from autoresearch_mcp.sandbox.cgroups import EvaluationCgroup
from autoresearch_mcp.sandbox.child import landlock_abi
from autoresearch_mcp.sandbox.identity import sandbox_user
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks.folder import task as _folder_task  # noqa: F401  (admits its entry)

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.skipif(not seccomp.seccomp_available(), reason="no seccomp here"),
    pytest.mark.skipif(landlock_abi() < 1, reason="no Landlock here"),
]
EPERM, EACCES = errno.EPERM, errno.EACCES


@pytest.fixture
def escaped_tasks() -> Iterator[None]:
    with registered():
        yield


@pytest.fixture
def canary() -> Iterator[Path]:
    """A file root owns, outside any sandbox, where any user may reach it (/tmp)."""
    path = Path("/tmp") / f"autoresearch-canary-{secrets.token_hex(6)}"
    path.write_text("root's")
    path.chmod(0o644)
    try:
        yield path
    finally:
        path.unlink()


@pytest.fixture
def other_cgroup() -> Iterator[str]:
    """Another evaluation's candidate leaf, as another run or server would hold it ("" without one)."""
    support = cgroups.cgroup_support()
    if support.version is None:
        yield ""
        return
    group = EvaluationCgroup(support, 64 * 2**20, 8)
    try:
        yield os.path.dirname(group.candidate_spec()["procs"][0])
    finally:
        group.remove()


def a_key() -> int:
    """A System V key and a name of this test's own (two tests may run at once)."""
    return secrets.randbelow(2**30) + 1


def candidate(call: str) -> str:
    """The reference, with escape_probes' `probe` beside it and `call` made first in process_records:
    a dict call raises it back as the experiment's error (PROBE {...}); None lets the reference run."""
    start = "def process_records(records):\n"
    body = (
        f"    if (found := {call}):\n        raise RuntimeError('PROBE ' + __import__('json').dumps(found))\n"
    )
    return SOURCE + "\n\n" + REFERENCE_SOURCE.replace(start, start + body)


def reported(experiment: dict[str, Any]) -> dict[str, int]:
    found = re.search(r"PROBE (\{[^}]*\})", experiment["error_tail"] or "")
    assert found, experiment["error_tail"]
    return json.loads(found[1])


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def benchmarks(settings: ServerSettings, task: str, sources: list[str]) -> list[dict[str, Any]]:
    """One run of `task`; each source in turn set as train.py and benchmarked: the experiments."""
    async with Client(build_server(Research(settings))) as client:
        run_id = (await call(client, "start_run", {"task": task, "budget": len(sources) + 1}))["run_id"]
        done = []
        for i, source in enumerate(sources):
            await call(
                client, "modify_train_py", {"run_id": run_id, "description": f"probe {i}", "source": source}
            )
            done.append((await call(client, "run_benchmark", {"run_id": run_id}))["experiment"])
        return done


def expected_refusals(cgroup: str) -> dict[str, Any]:
    """Each way out, and what refuses it now: seccomp (EPERM), the unprivileged user (EPERM: not the
    file's owner; EACCES: no write permission for a user attribute), Landlock and the cgroup's mode
    (EACCES)."""
    refused = {
        "add_key": EPERM,
        "chmod": EPERM,
        "utime": EPERM,
        "setxattr": (EPERM, EACCES),
        "AF_NETLINK": EPERM,
        "AF_PACKET": EPERM,
        "AF_VSOCK": EPERM,
        "user_namespace": EPERM,
    }
    if cgroup:
        refused |= {"cgroup_procs": EACCES, "cgroup_list": EACCES}
    return refused


def check_refused(found: dict[str, int], cgroup: str) -> None:
    user = sandbox_user().ids
    assert found.pop("uid") == (user[0] if user is not None else os.getuid()), "not the sandbox's user"
    if os.geteuid() == 0:
        assert user is not None, sandbox_user().reason
    for way, answer in expected_refusals(cgroup).items():
        assert found[way] in (answer if isinstance(answer, tuple) else (answer,)), (way, found)


@pytest.mark.parametrize("task", ["codeopt-escaped", "codeopt-escaped-forking"])
async def test_after_an_escape_a_candidate_is_not_root_and_every_way_out_in_the_issue_is_refused(
    settings: ServerSettings, escaped_tasks: None, task: str, canary: Path, other_cgroup: str
):
    probe = f"probe('escape', {a_key()}, {str(canary)!r}, {other_cgroup!r})"
    [experiment] = await benchmarks(settings, task, [candidate(probe)])
    check_refused(reported(experiment), other_cgroup)
    assert canary.stat().st_mode & 0o7777 == 0o644 and canary.read_text() == "root's"
    assert canary.stat().st_mtime > 1


# A folder whose script runs escape_probes' `probe`, the phase a param; each answer a metric line.
FOLDER_TOML = """\
[task]
name = "probe"
command = ["python", "train.py"]
metric = "loss"
direction = "minimize"
timeout_s = 30
processes = true

[params.phase]
type = "categorical"
choices = ["escape", "leave", "find"]
"""
FOLDER_SCRIPT = """
import json as _json
_phase = _json.loads(_os.environ["AUTORESEARCH_PARAMS"])["phase"]
for _name, _value in probe(_phase, {key}, {canary!r}, {cgroup!r}).items():
    print(f"{{_name}}: {{_value}}")
print("loss: 1")
"""


def probe_folder(root: Path, key: int, canary: str = "", cgroup: str = "") -> Path:
    folder = root / "probe"
    folder.mkdir(parents=True)
    (folder / "autoresearch.toml").write_text(FOLDER_TOML)
    (folder / "train.py").write_text(SOURCE + FOLDER_SCRIPT.format(key=key, canary=canary, cgroup=cgroup))
    return folder


async def script_runs(settings: ServerSettings, folder: Path, phases: list[str]) -> list[dict[str, Any]]:
    """One run of the folder's task; one experiment per phase, in turn: the experiments."""
    with Research(settings.model_copy(update={"task_dirs": [str(folder)]})) as research:
        async with Client(build_server(research)) as client:
            run_id = (await call(client, "start_run", {"task": "probe", "budget": len(phases) + 1}))["run_id"]
            return [
                (await call(client, "run_experiment", {"run_id": run_id, "params": {"phase": phase}}))[
                    "experiment"
                ]
                for phase in phases
            ]


async def test_a_folder_script_is_not_root_and_every_way_out_in_the_issue_is_refused(
    settings: ServerSettings, tmp_path: Path, canary: Path, other_cgroup: str
):
    folder = probe_folder(tmp_path, a_key(), str(canary), other_cgroup)
    [experiment] = await script_runs(settings, folder, ["escape"])
    assert experiment["status"] == "ok", experiment["error_tail"]
    found = {name: int(value) for name, value in experiment["metrics"].items() if name != "loss"}
    check_refused(found, other_cgroup)
    assert canary.stat().st_mode & 0o7777 == 0o644


NOTHING_FOUND = {
    "keyring": 0,
    "shm": 0,
    "msg": 0,
    "sem": 0,
    "dev_shm": 0,
    "tmp": 0,
    "abstract_socket": 0,
}


async def test_a_second_candidate_finds_nothing_the_first_left_in_any_kernel_object(
    settings: ServerSettings, escaped_tasks: None
):
    key = a_key()
    leave, find = candidate(f"probe('leave', {key})"), candidate(f"probe('find', {key})")
    left, found = await benchmarks(settings, "codeopt-escaped-forking", [leave, find])
    assert left["status"] == "ok", left["error_tail"]  # it left what it could, and timed as the reference
    assert reported(found) == NOTHING_FOUND


async def test_a_second_folder_script_finds_nothing_the_first_left_in_any_kernel_object(
    settings: ServerSettings, tmp_path: Path
):
    left, found = await script_runs(settings, probe_folder(tmp_path, a_key()), ["leave", "find"])
    assert left["status"] == found["status"] == "ok", (left["error_tail"], found["error_tail"])
    assert {name: int(found["metrics"][name]) for name in NOTHING_FOUND} == NOTHING_FOUND
