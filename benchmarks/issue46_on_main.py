"""Issue 46's breaks, run against a checkout: what tests/server/test_untrusted_user_through_mcp.py,
test_hostile_folders.py and test_transport_bounds.py check, through the same MCP tools on a real server,
printed instead of asserted, so that one script shows main and this checkout side by side.

Run it with the Python whose `autoresearch_mcp` is to be measured (the payloads come from this checkout's
tests/escape_probes.py), as root, e.g. main at 7488d57 in a worktree beside this one:

    git worktree add /tmp/main-old 7488d57 && python3 -m venv /tmp/old-venv   # + the deps, main editable
    cd /tmp && /tmp/old-venv/bin/python /work/main/benchmarks/issue46_on_main.py

This script needs a checkout with the shipped task folders (421e464 or later); against an older one, such
as 7488d57 above, run the script of a checkout of fdd7e13 (`git worktree add /tmp/at-fdd7e13 fdd7e13`, then
/tmp/at-fdd7e13/benchmarks/issue46_on_main.py: it reads the payloads beside it).

What it leaves behind where a break holds (a key in root's keyring, System V objects in the host's IPC
namespace) it removes at the end.
"""

import asyncio
import ctypes
import json
import logging
import os
import re
import secrets
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
import sys  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))

from autoresearch_mcp.server.tasks import registry  # noqa: E402

if not hasattr(registry, "BUILTIN"):  # the payloads' codeopt-records is the shipped folder
    sys.exit(
        f"{registry.__file__} predates the shipped task folders (421e464): against it, run this script as "
        "of fdd7e13: git worktree add /tmp/at-fdd7e13 fdd7e13, then run "
        "/tmp/at-fdd7e13/benchmarks/issue46_on_main.py"
    )

import httpx2  # noqa: E402
import uvicorn  # noqa: E402
from codeopt_rewrites import REFERENCE_SOURCE  # noqa: E402
from escape_probes import SOURCE  # noqa: E402
from escaped_task import registered  # noqa: E402
from mcp import Client, MCPError  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

import toy_task  # noqa: E402, F401  (registers toy-quadratic, for the HTTP runs)
from autoresearch_mcp.contract.errors import ResearchError  # noqa: E402
from autoresearch_mcp.sandbox import cgroups  # noqa: E402
from autoresearch_mcp.sandbox.cgroups import EvaluationCgroup  # noqa: E402
from autoresearch_mcp.server.build import build_server  # noqa: E402
from autoresearch_mcp.server.http import build_http_app, uvicorn_config  # noqa: E402
from autoresearch_mcp.server.research import Research  # noqa: E402
from autoresearch_mcp.server.settings import ServerSettings  # noqa: E402
from autoresearch_mcp.server.tasks.base import ExecContext  # noqa: E402
from autoresearch_mcp.server.tasks.folder.task import folder_task_class  # noqa: E402

TOKEN = "issue46-token-0123456789"
FOLDER_TOML = """\
[task]
name = "{name}"
command = ["python", "train.py"]
metric = "loss"
direction = "minimize"
timeout_s = 30
processes = true
{extra}
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


def candidate(call: str) -> str:
    start = "def process_records(records):\n"
    body = (
        f"    if (found := {call}):\n        raise RuntimeError('PROBE ' + __import__('json').dumps(found))\n"
    )
    return SOURCE + "\n\n" + REFERENCE_SOURCE.replace(start, start + body)


def probed(experiment: dict[str, Any]) -> Any:
    found = re.search(r"PROBE (\{[^}]*\})", experiment.get("error_tail") or "")
    return json.loads(found[1]) if found else f"{experiment['status']}, no report"


def folder(root: Path, name: str, key: int, canary: str = "", cgroup: str = "", extra: str = "") -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "autoresearch.toml").write_text(FOLDER_TOML.format(name=name, extra=extra))
    (path / "train.py").write_text(SOURCE + FOLDER_SCRIPT.format(key=key, canary=canary, cgroup=cgroup))
    return path


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    if result.is_error:
        raise RuntimeError(result.content[0].text)
    return result.structured_content


async def candidates(settings: ServerSettings, canary: str, cgroup: str, key: int) -> None:
    async with Client(build_server(Research(settings))) as client:
        run_id = (await call(client, "start_run", {"task": "codeopt-escaped-forking", "budget": 5}))["run_id"]
        for label, probe in [
            ("1-4, 7 candidate, escaped", f"probe('escape', {key}, {canary!r}, {cgroup!r})"),
            ("1-2 candidate, first experiment leaves", f"probe('leave', {key})"),
            ("1-2 candidate, second experiment finds", f"probe('find', {key})"),
        ]:
            await call(
                client,
                "modify_train_py",
                {"run_id": run_id, "description": label, "source": candidate(probe)},
            )
            experiment = (await call(client, "run_benchmark", {"run_id": run_id}))["experiment"]
            print(label + ":", probed(experiment) if "leaves" not in label else experiment["status"])


async def scripts(settings: ServerSettings, root: Path, canary: str, cgroup: str, key: int) -> None:
    path = folder(root, "probe", key, canary, cgroup)
    with Research(settings.model_copy(update={"task_dirs": [str(path)]})) as research:
        async with Client(build_server(research)) as client:
            run_id = (await call(client, "start_run", {"task": "probe", "budget": 4}))["run_id"]
            for phase in ("escape", "leave", "find"):
                args = {"run_id": run_id, "params": {"phase": phase}}
                experiment = (await call(client, "run_experiment", args))["experiment"]
                found = {k: int(v) for k, v in (experiment["metrics"] or {}).items() if k != "loss"}
                print(
                    f"{'1-4, 7' if phase == 'escape' else '1-2'} folder script, {phase}:",
                    found or experiment["status"],
                )


def hostile_folders(settings: ServerSettings, root: Path) -> None:
    root.mkdir(parents=True)
    outside = root / "outside.py"
    outside.write_text("print('loss: 1')\n")
    cases = {
        'reads = ["/"]': 'reads = ["/"]',
        f'reads = ["{Path.home()}"]': f'reads = ["{Path.home()}"]',
        'python = "/bin/sh"': 'python = "/bin/sh"',
        "edit = a link to a file outside": 'edit = ["train.py"]\nwork = "code"',
    }
    for i, (label, extra) in enumerate(cases.items()):
        path = folder(root / f"hostile-{i}", f"hostile{i}", 1, extra=extra)
        if label.startswith("edit"):
            (path / "train.py").unlink()
            (path / "train.py").symlink_to(outside)
        try:
            with Research(settings.model_copy(update={"task_dirs": [str(path)]})) as research:
                build_server(research)
                research.tasks(f"hostile{i}")
            print(f"5 {label}: accepted")
        except ResearchError as exc:
            print(f"5 {label}: refused: {str(exc).split(': ', 1)[1]}")
    many = folder(root / "many", "many", 1)
    for i in range(200):
        (many / f"{i}.txt").write_text("x")
    task = folder_task_class(many)({})
    options = task.options()
    options["limits"]["max_files"] = 50  # the folder holds four times the quota
    outcome = task.execute(
        task.params_model(phase="find"),
        task.initial_artifact(),
        ExecContext(run_id="r", seed=1, iteration=1, options=options),
    )
    print(
        "5 a folder of 200 files, a quota of 50:", outcome.status, (outcome.error_tail or "").split("\n")[0]
    )


@contextmanager
def http_server(settings: ServerSettings) -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = build_http_app(settings, host="127.0.0.1", token=TOKEN)
    server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", port))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=30)


async def http(settings: ServerSettings) -> None:
    with http_server(settings) as port:
        url, auth = f"http://127.0.0.1:{port}/mcp", {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=auth, timeout=60) as client_http,
            Client(streamable_http_client(url, http_client=client_http)) as client,
        ):
            uris = [f"autoresearch://runs/{i:04d}/" + "x" * 3000 for i in range(300)]
            try:
                async with client.listen(resource_subscriptions=uris) as stream:
                    print(
                        f"6 listen, 300 URIs of {len(uris[0])} characters: accepted ({len(stream.honored.resource_subscriptions or [])} honored)"
                    )
            except MCPError as exc:
                print(f"6 listen, 300 URIs of {len(uris[0])} characters: refused: {exc}")
            opened = 0
            async with AsyncExitStack() as streams:
                for _ in range(40):
                    try:
                        await streams.enter_async_context(client.listen(resources_list_changed=True))
                        opened += 1
                    except MCPError:
                        break
            print(f"6 listen streams one client held open at once: {opened} of 40")
        seen: dict[str, str] = {}

        async def note(response: httpx2.Response) -> None:
            seen.setdefault("session", response.headers.get("mcp-session-id", ""))

        async with (
            httpx2.AsyncClient(headers=auth, timeout=60, event_hooks={"response": [note]}) as victim_http,
            Client(streamable_http_client(url, http_client=victim_http), mode="legacy") as victim,
        ):
            for _ in range(2):  # others' runs: with several running, no call falls to "the only one"
                await call(victim, "start_run", {"task": "toy-quadratic"})
            mine = (await call(victim, "start_run", {"task": "toy-quadratic"}))["run_id"]  # the session's
            headers = {
                **auth,
                "mcp-session-id": seen["session"],
                "Accept": "application/json, text/event-stream",
            }
            headers["mcp-protocol-version"] = str(victim.session.protocol_version)
            body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
            body["params"] = {"name": "add_note", "arguments": {"text": "planted by another token holder"}}
            async with httpx2.AsyncClient(timeout=60) as attacker:
                answer = (await attacker.post(url, json=body, headers=headers)).text
            summary = (await call(victim, "get_run_summary", {"run_id": mine}))["summary"]
            planted = "planted by another token holder" in summary
            refused = '"isError":true' in answer.replace(" ", "")
            print(
                f"6 a stolen handshake session, shared token: add_note {'refused' if refused else 'accepted'}; "
                f"planted in the victim's run: {planted}"
            )


def clean_up(key: int) -> None:
    """What a break left in the host: the key in root's keyring, System V objects with the probe's key."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    keyctl, request_key = {"x86_64": (250, 249), "aarch64": (219, 218)}[os.uname().machine]
    for _ in range(4):
        found = libc.syscall(request_key, b"user", f"autoresearch-probe-{key}".encode(), None, -4)
        if found < 0:
            break
        libc.syscall(keyctl, 21, found)  # KEYCTL_INVALIDATE
    for get, control, size in ((libc.shmget, libc.shmctl, 0), (libc.msgget, libc.msgctl, None)):
        ident = get(key, 0, 0) if size is not None else get(key, 0)
        if ident >= 0:
            control(ident, 0, None)  # IPC_RMID
    ident = libc.semget(key, 0, 0)
    if ident >= 0:
        libc.semctl(ident, 0, 0)


async def main() -> None:
    logging.disable(logging.INFO)  # the HTTP stack's request lines
    root = Path(tempfile.mkdtemp(prefix="issue46-"))
    os.chmod(root, 0o755)
    key = secrets.randbelow(2**30) + 1
    canary = Path("/tmp") / f"autoresearch-canary-{secrets.token_hex(4)}"
    canary.write_text("root's")
    canary.chmod(0o644)
    support = cgroups.cgroup_support()
    other = EvaluationCgroup(support, 64 * 2**20, 8) if support.version else None
    cgroup = os.path.dirname(other.candidate_spec()["procs"][0]) if other else ""
    os.environ["AUTORESEARCH_DATA_DIR"] = str(root / "data")
    settings = ServerSettings(db_path=root / "runs.db")
    try:
        with registered(records=1500, calls=3):
            await candidates(settings, str(canary), cgroup, key)
        await scripts(settings, root / "folders", str(canary), cgroup, key + 1)
        print(f"3 the canary after them: {oct(canary.stat().st_mode & 0o7777)}")
        hostile_folders(settings, root / "hostile")
        await http(settings.model_copy(update={"db_path": root / "http.db"}))
    finally:
        clean_up(key)
        clean_up(key + 1)
        canary.unlink()
        if other is not None:
            other.remove()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
