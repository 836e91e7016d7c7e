"""The OS layers around candidate processes, with no Python layer in the way (plain scripts, real modules):
no new processes unless the task declares them and no Unix sockets in any case (seccomp), one cgroup per
run holding the memory, the
number and the CPU time of every process the candidate starts, emptied before each measurement; and
where the machine has no cgroup, a run that says so and still works."""

import logging
import os
import platform
import textwrap
from pathlib import Path
from typing import Any

import pytest

from autoresearch_mcp.sandbox import candidate, cgroups, isolate, seccomp
from autoresearch_mcp.sandbox.cgroups import EvaluationCgroup, Support
from autoresearch_mcp.sandbox.runner import Limits, SandboxResult, run_sandboxed
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings

SCRIPT = "autoresearch_mcp.sandbox.script:run_script"
QUICK = Limits(wall_s=20, cpu_s=20, memory_mb=512)
FORKING = QUICK.model_copy(update={"new_processes": True})
needs_seccomp = pytest.mark.skipif(not seccomp.seccomp_available(), reason="no seccomp here")
needs_cgroup = pytest.mark.skipif(
    cgroups.cgroup_support().version is None, reason=f"{cgroups.cgroup_support().describe()}"
)


def attack(source: str, limits: Limits = QUICK, *args: Any) -> SandboxResult:
    payload = {"source": textwrap.dedent(source), "call": "attack", "args": list(args)}
    return run_sandboxed(SCRIPT, payload, limits)


def returned(result: SandboxResult) -> Any:
    assert result.status == "ok", (result.reason, result.output_tail)
    assert result.result is not None
    return result.result["value"]


# -- no new processes: seccomp ---------------------------------------------------------------------

WAYS_TO_A_PROCESS = {
    "os.fork": "os.fork() or os._exit(0)",
    "os.posix_spawn": "os.posix_spawn('/bin/true', ['true'], {})",
    "subprocess.run": "subprocess.run(['true'])",
    "os.execv": "os.execv('/bin/true', ['true'])",
    "os.system": "assert os.system('true') == 0, 'no shell'",
    "multiprocessing": "p = multiprocessing.Process(target=print); p.start(); p.join()",
}


@needs_seccomp
@pytest.mark.parametrize("way", WAYS_TO_A_PROCESS)
def test_a_candidate_cannot_start_a_process_in_any_way_unless_its_task_declares_it(way: str) -> None:
    source = f"""\
        import multiprocessing, os, subprocess
        def attack():
            try:
                {WAYS_TO_A_PROCESS[way]}
            except (OSError, AssertionError) as exc:
                return "refused: " + type(exc).__name__
            return "started"
    """
    assert returned(attack(source)).startswith("refused"), way
    if way not in ("os.system", "os.execv"):  # exec replaces the process: no result to return
        assert returned(attack(source, FORKING)) == "started", way


@needs_seccomp
def test_threads_stay_allowed_under_the_filter() -> None:
    source = """\
        import concurrent.futures, threading
        def attack():
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                squares = sum(pool.map(lambda x: x * x, range(100)))
            return [squares, threading.active_count()]
    """
    assert returned(attack(source)) == [328350, 1]


@needs_seccomp
@pytest.mark.skipif(platform.machine() != "x86_64", reason="syscall numbers of x86-64")
def test_the_kernel_refuses_raw_process_syscalls_whatever_python_does() -> None:
    # ctypes straight to the kernel: no Python-level wrapper to get around. fork, vfork and execve are
    # refused, clone3 answers "no such call" (so glibc uses clone for threads), and clone is refused
    # unless it makes a thread.
    source = """\
        import ctypes, os
        def attack():
            libc = ctypes.CDLL(None, use_errno=True)
            answers = {}
            for name, number, args in [("fork", 57, ()), ("vfork", 58, ()), ("execve", 59, (0, 0, 0)),
                                       ("clone3", 435, (0, 0)), ("clone", 56, (17, 0, 0, 0, 0))]:
                result = libc.syscall(number, *args)
                answers[name] = os.strerror(ctypes.get_errno()) if result == -1 else f"returned {result}"
                if result == 0:  # a child got through: it must not run on
                    os._exit(0)
            return answers
    """
    assert returned(attack(source)) == {
        "fork": "Operation not permitted",
        "vfork": "Operation not permitted",
        "execve": "Operation not permitted",
        "clone3": "Function not implemented",
        "clone": "Operation not permitted",
    }


def test_the_isolation_list_says_whether_new_processes_are_refused() -> None:
    plain = attack("def attack():\n    return 1\n")
    declared = attack("def attack():\n    return 1\n", FORKING)
    expected = "no new processes" if seccomp.seccomp_available() else "new processes NOT refused"
    assert any(line.startswith(expected) for line in plain.isolation), plain.isolation
    assert any(line.startswith("new processes allowed") for line in declared.isolation)
    sockets = "no sockets but TCP/IP" if seccomp.seccomp_available() else "Unix, netlink, packet and vsock"
    assert all(any(line.startswith(sockets) for line in r.isolation) for r in (plain, declared))


@needs_seccomp
@pytest.mark.parametrize("limits", [QUICK, FORKING], ids=["plain", "declares-processes"])
def test_a_candidate_cannot_open_a_unix_socket_whether_or_not_its_task_declares_processes(
    limits: Limits,
) -> None:
    # A pathname Unix socket (the Docker daemon's, D-Bus) is outside what the network namespace covers;
    # socketpair names no path and stays allowed.
    source = """\
        import errno, socket
        def attack():
            try:
                socket.socket(socket.AF_UNIX).close()
                opened = "opened"
            except OSError as exc:
                opened = errno.errorcode[exc.errno]
            left, right = socket.socketpair()
            left.send(b"x")
            return [opened, right.recv(1).decode()]
    """
    assert returned(attack(source, limits)) == ["EPERM", "x"]


# -- one cgroup per run ---------------------------------------------------------------------------

HOLD_400_MB_IN_EACH_OF_6_FORKS = """\
    import os, time
    def attack():
        children = []
        for _ in range(6):
            ready_r, ready_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(ready_r)
                block = bytearray(400 * 1024 * 1024)
                block[::4096] = b"x" * len(block[::4096])  # touch every page: resident, not reserved
                os.write(ready_w, b"1")
                time.sleep(60)
                os._exit(0)
            os.close(ready_w)
            os.read(ready_r, 1)  # b"" when the kernel killed it first
            os.close(ready_r)
            children.append(pid)
        holding = [pid for pid in children if os.waitpid(pid, os.WNOHANG) == (0, 0)]
        return len(holding)
"""


@needs_cgroup
def test_forks_each_under_the_per_process_limit_cannot_together_pass_the_trees_memory_limit() -> None:
    # Each fork stays under the 512 MB address-space limit; without a cgroup, six of them hold 2.4 GB.
    result = attack(HOLD_400_MB_IN_EACH_OF_6_FORKS, FORKING)
    assert returned(result) <= 1  # the kernel killed the others
    assert result.memory_peak_mb is not None and result.memory_peak_mb <= 512


@needs_cgroup
def test_the_cpu_time_of_everything_a_candidate_starts_is_counted_in_its_cgroup() -> None:
    # Two grandchildren, orphaned at once, burn 0.4 s of CPU each; the candidate's own process reaps
    # neither (it only waits until they closed a pipe), so its own resource usage shows none of it.
    source = """\
        import os, time
        def attack():
            done_r, done_w = os.pipe()
            for _ in range(2):
                if os.fork() == 0:
                    if os.fork() == 0:
                        start = time.process_time()
                        while time.process_time() - start < 0.4:
                            pass
                    os._exit(0)
            os.close(done_w)
            os.read(done_r, 1)  # b"" once both grandchildren have exited
            return "done"
    """
    result = attack(source, FORKING)
    assert returned(result) == "done"
    assert result.candidate_cpu_s is not None and result.candidate_cpu_s >= 0.75


def fork_after_a_burner(monkeypatch: pytest.MonkeyPatch) -> tuple[isolate.Isolated, isolate.Isolated]:
    """The harness's side, run here: a first fork leaves a process burning CPU in its own session, and
    a next fork, started at once, says who is in the candidate cgroup with it."""
    group = EvaluationCgroup(cgroups.cgroup_support(), 256 * 2**20, 64)
    try:
        monkeypatch.setattr(candidate.Setup, "group", candidate.CandidateGroup(group.candidate_spec()))
        monkeypatch.setattr(candidate.Setup, "deny_processes", False)
        procs = Path(group.candidate_spec()["procs"][0])

        def leave_a_burner(channel: isolate.Channel) -> None:
            channel.ready()
            if os.fork() == 0:
                os.setsid()
                while True:
                    pass
            channel.send({"left": True})

        def look(channel: isolate.Channel) -> None:
            channel.ready()
            channel.send({"me": str(os.getpid()), "in_cgroup": procs.read_text().split()})

        first = isolate.run_isolated(leave_a_burner, writable=None, max_messages=2)
        second = isolate.run_isolated(look, writable=None, max_messages=2)
    finally:
        group.remove()
    assert first.messages[1].message == {"left": True}
    return first, second


@needs_cgroup
def test_what_a_fork_leaves_running_is_killed_before_the_next_fork_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, second = fork_after_a_burner(monkeypatch)
    seen = second.messages[1].message
    assert seen["in_cgroup"] == [seen["me"]]  # alone in the candidate cgroup: the burner is gone


@pytest.mark.slow  # a measured CPU time: the default suite asserts no timing
@needs_cgroup
def test_the_next_fork_counts_only_its_own_cpu_time(monkeypatch: pytest.MonkeyPatch) -> None:
    _, second = fork_after_a_burner(monkeypatch)
    assert second.cpu_s is not None and second.cpu_s < 0.2  # no burner's time in it


# -- where there is no cgroup ---------------------------------------------------------------------

NO_CGROUP = Support(None, reason="forced off for this test")


def test_without_a_cgroup_a_run_says_so_and_still_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cgroups, "cgroup_support", lambda: NO_CGROUP)
    result = attack("def attack():\n    return 21 * 2\n")
    assert returned(result) == 42 and result.memory_peak_mb is None and result.candidate_cpu_s is None
    assert any("no cgroup (forced off for this test)" in line for line in result.isolation)


def test_without_seccomp_a_run_says_so_and_new_processes_are_not_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(seccomp, "seccomp_available", lambda: False)
    source = "import os\ndef attack():\n    if os.fork() == 0:\n        os._exit(0)\n    return 'forked'\n"
    result = attack(source)
    assert returned(result) == "forked"
    assert "new processes NOT refused (no seccomp here)" in result.isolation
    assert any(
        line.startswith("Unix, netlink, packet and vsock sockets, keyrings") for line in result.isolation
    )


def test_the_server_says_once_at_start_what_it_cannot_enforce(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    def started() -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="autoresearch_mcp.server.runs"):
            Research(ServerSettings(db_path=tmp_path / f"runs-{len(os.listdir(tmp_path))}.db")).open().close()
        return [r.getMessage() for r in caplog.records if "weaker guarantees" in r.getMessage()]

    if cgroups.cgroup_support().version is not None:
        assert not any("no cgroup" in line for line in started())
    monkeypatch.setattr(cgroups, "cgroup_support", lambda: NO_CGROUP)
    warned = started()
    assert len(warned) == 1
    assert "no cgroup (forced off for this test): memory is limited per process only" in warned[0]
    assert "not before each measurement" in warned[0]


def test_a_filter_that_cannot_be_installed_stops_the_candidate_instead_of_running_it_unfiltered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The harness was told to refuse processes; if the kernel takes no filter, no candidate code runs.
    monkeypatch.setattr(candidate.Setup, "group", None)
    monkeypatch.setattr(candidate.Setup, "deny_processes", True)
    monkeypatch.setattr(seccomp, "_ARCHES", {})

    def work(channel: isolate.Channel) -> None:
        channel.send({"ran": True})

    done = isolate.run_isolated(work, writable=None, max_messages=1)
    assert done.messages == [] and os.WEXITSTATUS(done.status or 0) == 1
