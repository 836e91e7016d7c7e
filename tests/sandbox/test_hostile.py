"""Hostile code at the sandbox level: every case is refused by the guard or contained by the child
process, comes back as a structured result, and leaves the sandbox working for the next run."""

import os
import signal
import subprocess
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from codeopt_rewrites import REFERENCE_SOURCE, codeopt_folder

from autoresearch_mcp.sandbox import isolation
from autoresearch_mcp.sandbox.child import landlock_abi
from autoresearch_mcp.sandbox.guard import GuardPolicy, check_source
from autoresearch_mcp.sandbox.runner import (
    Limits,
    SandboxResult,
    pid_namespace_available,
    run_sandboxed,
)
from autoresearch_mcp.server.tasks.base import ExecContext, NoParams
from autoresearch_mcp.server.tasks.registry import make_task

# A policy like the built-in tasks' once were (the guard still serves outside plugins): what it refuses.
POLICY = GuardPolicy(allowed_imports=frozenset({"collections", "math"}))

SCRIPT = "autoresearch_mcp.sandbox.script:run_script"
QUICK = Limits(wall_s=10, cpu_s=10, memory_mb=512)
# A task that declares it starts processes: no seccomp filter, so what the other layers do is visible.
FORKING = QUICK.model_copy(update={"new_processes": True})
needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="no Landlock here: files are not confined")
needs_pid_namespace = pytest.mark.skipif(
    not pid_namespace_available(), reason="no permission to create a PID namespace (unshare --pid)"
)


def run(
    source: str, limits: Limits = QUICK, call: str | None = None, args: list[Any] | None = None
) -> SandboxResult:
    payload = {"source": textwrap.dedent(source), "call": call, "args": args or []}
    return run_sandboxed(SCRIPT, payload, limits)


def value(source: str, *args: Any, limits: Limits = QUICK) -> Any:
    """Run `source`, call its attack(*args), and return what it returned."""
    result = run(source, limits, call="attack", args=list(args))
    assert result.status == "ok", result.output_tail
    assert result.result is not None
    return result.result["value"]


@pytest.fixture(autouse=True)
def sandbox_still_works_afterwards() -> Iterator[None]:
    yield
    after = run("def f(x):\n    return x * 2\n", call="f", args=[21])
    assert after.status == "ok" and after.result == {"value": 42}


def test_an_infinite_loop_is_killed_at_the_wall_clock_limit() -> None:
    result = run("while True:\n    pass\n", Limits(wall_s=1, cpu_s=30))
    assert result.status == "timeout" and result.reason == "killed after the wall-clock limit of 1 s"
    assert result.result is None and result.wall_s < 5


def test_burning_cpu_is_stopped_by_the_cpu_limit() -> None:
    result = run("while True:\n    pass\n", Limits(wall_s=20, cpu_s=1))
    assert result.status == "crash" and result.reason == "exceeded the CPU limit of 1 s"


def test_a_fork_bomb_is_refused_by_the_guard() -> None:
    source = "import os\n\n\ndef process_records(records):\n    while True:\n        os.fork()\n"
    assert check_source(source, POLICY)[0].startswith("line 1: import of 'os' is not allowed")


@needs_pid_namespace
def test_processes_forked_by_a_task_that_declares_them_die_with_the_sandbox_even_in_their_own_session() -> (
    None
):
    # A bounded fork bomb: 32 processes that leave the process group and linger, then a normal return.
    marker = f"hostile-{uuid.uuid4().hex}"
    source = f"""\
        import os
        def attack():
            children = []
            for _ in range(32):
                pid = os.fork()
                if pid == 0:
                    os.setsid()
                    os.execv("/bin/sleep", ["{marker}", "300"])
                children.append(pid)
            return len(set(children))
    """
    assert value(source, limits=FORKING) == 32
    assert _processes_with(marker) == []


def test_without_a_pid_namespace_a_stray_holding_the_output_pipe_does_not_hang_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Where namespaces are not allowed, a process that leaves the session survives the run; the run
    # must still end promptly and say what was not enforced.
    monkeypatch.setattr(isolation, "pid_namespace_available", lambda: False)
    marker = f"hostile-{uuid.uuid4().hex}"
    source = f"""\
        import os
        def attack():
            if os.fork() == 0:
                os.setsid()
                os.execv("/bin/sleep", ["{marker}", "60"])
            print("parent done")
            return "returned"
    """
    try:
        result = run(source, FORKING, call="attack")
        assert result.status == "ok" and result.result == {"value": "returned"} and result.wall_s < 4
        assert "parent done" in result.output_tail
        assert any(line.startswith("no PID namespace") for line in result.isolation)
    finally:
        for pid in _processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue  # exited while we looked
    return found


def test_a_memory_bomb_is_a_crash_that_says_out_of_memory() -> None:
    result = run("hog = []\nwhile True:\n    hog.append(bytearray(10_000_000))\n", Limits(memory_mb=256))
    assert result.status == "crash" and result.reason == "ran out of memory (limit 256 MB of address space)"


def test_recursion_past_the_c_stack_is_a_crash_not_a_hang() -> None:
    source = """\
        import sys
        sys.setrecursionlimit(10**7)
        nested = []
        for _ in range(300_000):
            nested = [nested]
        repr(nested)  # recurses in C, past the 8 MB stack
    """
    # a crash within the CPU limit; the wall limit leaves room for a loaded machine
    result = run(source, QUICK.model_copy(update={"wall_s": 120}))
    assert result.status == "crash" and result.reason == "killed by signal SIGSEGV"


def test_huge_output_is_capped_to_its_tail_and_flagged() -> None:
    source = "for i in range(200_000):\n    print('x' * 40, i)\n"
    result = run(source, Limits(output_bytes=4096))
    assert result.status == "ok" and result.output_truncated
    assert result.output_tail.startswith("[output truncated: ")
    assert len(result.output_tail) < 4096 + 100 and result.output_tail.rstrip().endswith(" 199999")


def test_secrets_in_the_server_environment_do_not_reach_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"sk-ant-{uuid.uuid4().hex}"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    monkeypatch.setenv("AUTORESEARCH_TOKEN", secret)
    # A process that has the secret in its startup environment, as the server has its API key.
    with subprocess.Popen(["sleep", "30"], env={**os.environ}) as holder:
        try:
            source = """\
                import os
                def attack():
                    seen = [k for k, v in os.environ.items() if "sk-ant-" in v]
                    try:
                        pids = [p for p in os.listdir("/proc") if p.isdigit()]
                    except OSError as exc:
                        return {"env": seen, "proc": type(exc).__name__}
                    for pid in pids:
                        try:
                            with open(f"/proc/{pid}/environ", "rb") as f:
                                if b"sk-ant-" in f.read():
                                    seen.append(pid)
                        except OSError:
                            pass
                    return {"env": seen, "proc": len(pids)}
            """
            found = value(source)
        finally:
            holder.kill()
    assert found["env"] == []
    if not pid_namespace_available() and landlock_abi() < 1:
        pytest.skip("neither a PID namespace nor Landlock here: other processes' /proc/<pid>/environ is open")
    assert secret not in str(found)


@needs_landlock
def test_files_outside_the_working_directory_cannot_be_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's private notes")
    source = """\
        def attack(paths):
            out = {}
            for path in paths:
                try:
                    with open(path) as f:
                        out[path] = f.read()[:40]
                except OSError as exc:
                    out[path] = type(exc).__name__
            return out
    """
    paths = [str(secret), "/etc/passwd", str(Path.home() / ".bashrc"), "../spec.json"]
    found = value(source, paths)
    assert found[str(secret)] == found["/etc/passwd"] == "PermissionError"
    assert found[str(Path.home() / ".bashrc")] in ("PermissionError", "FileNotFoundError")
    # The spec (which carries a benchmark's input seeds) is gone before any candidate code runs.
    assert found["../spec.json"] in ("PermissionError", "FileNotFoundError")


@needs_landlock
def test_a_file_the_task_names_in_its_payload_stays_readable(tmp_path: Path) -> None:
    data, other = tmp_path / "split.npz", tmp_path / "other.txt"
    data.write_text("training data")
    other.write_text("not named")
    source = """\
        def attack(paths):
            out = []
            for path in paths:
                try:
                    with open(path) as f:
                        out.append(f.read())
                except OSError as exc:
                    out.append(type(exc).__name__)
            return out
    """
    payload = {"source": textwrap.dedent(source), "call": "attack", "args": [[str(data), str(other)]]}
    result = run_sandboxed(SCRIPT, {**payload, "data_path": str(data)}, QUICK)
    assert result.result is not None, result.output_tail
    named, beside = result.result["value"]
    assert named == "training data"
    # Refused by Landlock; or not there at all where the sandbox's user cannot enter the directory above
    # it, which the sandbox covers, bringing back only the named file (sandbox/identity.py).
    assert beside in ("PermissionError", "FileNotFoundError")


@needs_landlock
def test_files_outside_the_working_directory_cannot_be_written_or_a_result_forged(tmp_path: Path) -> None:
    planted = tmp_path / "planted.txt"
    source = """\
        import os
        def attack(paths):
            out = {}
            for path in paths:
                try:
                    with open(path, "w") as f:
                        f.write("x")
                    out[path] = "written"
                except OSError as exc:
                    out[path] = type(exc).__name__
            return out
    """
    found = value(source, [str(planted), f"/tmp/{uuid.uuid4().hex}", "../result.json", "inside.txt"])
    assert list(found.values()) == ["PermissionError", "PermissionError", "PermissionError", "written"]
    assert not planted.exists()


def test_a_cache_written_in_one_run_is_gone_in_the_next() -> None:
    token = uuid.uuid4().hex
    source = f"""\
        def attack():
            found = []
            for path in ("cache-{token}.json", "/tmp/cache-{token}.json"):
                try:
                    with open(path) as f:
                        found.append(f.read())
                except OSError:
                    pass
                try:
                    with open(path, "w") as f:
                        f.write("cached answer")
                except OSError:
                    pass
            return found
    """
    assert value(source) == []
    assert value(source) == []
    Path(f"/tmp/cache-{token}.json").unlink(missing_ok=True)  # only if no Landlock let it through


def test_spawning_a_process_is_refused_by_the_guard_and_the_child_of_a_raw_run_is_no_freer() -> None:
    assert "import of 'subprocess' is not allowed" in check_source("import subprocess\n", POLICY)[0]
    source = """\
        import subprocess
        def attack():
            done = subprocess.run(["sh", "-c", "env; cat /etc/passwd"], capture_output=True, text=True)
            return {"out": done.stdout, "err": done.stderr}
    """
    found = value(source, limits=FORKING)  # where the task declares processes (else: test_processes.py)
    assert "ANTHROPIC" not in found["out"] and "root:" not in found["out"]
    if landlock_abi():
        assert "Permission denied" in found["err"]


@pytest.mark.parametrize(
    "source",
    [
        "import sys\nsys.exit(0)\n",
        "import os\nos._exit(0)\n",
        "raise SystemExit(0)\n",
        "import sys\nsys.exit(3)\n",
    ],
)
def test_exiting_the_interpreter_is_a_crash_without_a_result(source: str) -> None:
    result = run(source)
    assert result.status == "crash" and result.result is None


@pytest.mark.parametrize(("sig", "name"), [(signal.SIGKILL, "SIGKILL"), (signal.SIGTERM, "SIGTERM")])
def test_a_signal_to_itself_is_a_crash_that_names_the_signal(sig: signal.Signals, name: str) -> None:
    result = run(f"import os\nos.kill(os.getpid(), {int(sig)})\n")
    assert result.status == "crash" and result.reason == f"killed by signal {name}"


def test_the_child_cannot_signal_the_server() -> None:
    received: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: received.append(signum))
    try:
        source = """\
            import os, signal
            def attack(pid):
                try:
                    os.kill(pid, signal.SIGUSR1)
                except OSError as exc:
                    return type(exc).__name__
                return "sent"
        """
        outcome = value(source, os.getpid())
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert received == []
    assert outcome in ("ProcessLookupError", "PermissionError")  # not visible, or Landlock-scoped


# -- the code-optimisation harness: the candidate cannot move its own measurement ----------------

ESCAPE = """\
def _module(name):
    for kind in ().__class__.__base__.__subclasses__():
        if kind.__name__ == "_wrap_close":
            return kind.__init__.__globals__["sys"].modules[name]


"""


def _benchmark(source: str, tmp_path: Path) -> Any:
    task = make_task(
        "codeopt-records", {"task_dirs": [str(codeopt_folder(tmp_path / "codeopt-records", 1000, 3))]}
    )
    options = task.options()
    return task.execute(NoParams(), source, ExecContext(run_id="r-h", seed=1, iteration=1, options=options))


def test_patching_the_reference_and_the_checker_inside_the_sandbox_changes_nothing(tmp_path: Path) -> None:
    source = ESCAPE + textwrap.dedent(
        """\
        harness = _module("autoresearch_mcp.server.tasks.folder.benchmark_child")
        harness.first_difference = lambda expected, got, path="output": None
        harness._function = lambda place, name: (lambda *args: {})
        _module("autoresearch_mcp.server.tasks.outputs").first_difference = harness.first_difference
        assert harness.first_difference(1, 2) is None  # the patch took


        def process_records(records):
            return {}
        """
    )
    outcome = _benchmark(source, tmp_path)
    assert outcome.status == "incorrect" and "keys differ" in (outcome.error_tail or "")


def test_patching_the_timer_cannot_shrink_the_measured_time(tmp_path: Path) -> None:
    source = (
        ESCAPE
        + textwrap.dedent(
            """\
        _module("time").perf_counter = lambda: 0.0
        _module("time").perf_counter_ns = lambda: 0
        assert _module("time").perf_counter() == 0.0  # the patch took
        """
        )
        + REFERENCE_SOURCE
    )
    outcome = _benchmark(source, tmp_path)
    assert outcome.status == "ok" and outcome.metrics["time_ms"] > 0.5
