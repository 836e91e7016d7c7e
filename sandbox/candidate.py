"""The harness's side of the OS layers around candidate code: the candidate cgroup and the seccomp filters.

The runner makes one cgroup per evaluation (cgroups.py) and names its `candidate` leaf in the spec. The
harness opens the files it writes (cgroup.procs to join, cgroup.kill) once, before it confines itself
(Landlock refuses writes there later), and keeps the descriptors; the files it reads stay readable.
Then, for every fork that loads candidate code (isolate.py):
- before the fork, the leaf is emptied: whatever an earlier candidate left running (a CPU burner
  started to slow the next measurement) is killed before anything is measured again;
- the fork joins the leaf before it loads anything, so it and everything it starts count against the
  tree's memory limit and CPU time, and gets a System V IPC namespace of its own (`enter`); once
  confined, it becomes the sandbox's unprivileged user with no capability, and seccomp filters refuse
  it what no task needs (sockets but TCP/IP, mounts, keyrings, user namespaces) and new processes
  unless the task declared that it starts them (`lock`, seccomp.py);
- as each message of the fork arrives, the leaf's CPU time is read: from the ready stamp to the result
  is the call's CPU time, everything it started included (and its exit not);
- after the fork ended, the leaf is emptied again.
Without a cgroup the fork still gets the filters where the kernel has seccomp, and its CPU time comes
from its own resource usage (what it started and did not wait for is not counted).
Every process that runs untrusted code, a candidate fork or a task folder's script, goes through `enter`
and `lock` before it loads anything: the server may run as root, and untrusted code never does.
"""

import contextlib
import ctypes
import errno
import os
import signal
import time
from typing import Any

from autoresearch_mcp.sandbox.cgroups import read_cpu_ns
from autoresearch_mcp.sandbox.seccomp import (
    deny_new_processes,
    deny_what_no_task_needs,
    seccomp_available,
)

_PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 24, 28, 38, 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAPABILITY_VERSION_3 = 0x20080522
_CAP_SETPCAP = 8
_CLONE_NEWIPC = 0x08000000
# Root gets no capabilities on exec (NOROOT), none are kept or restored on a change of uid
# (NO_SETUID_FIXUP; KEEP_CAPS off), none can be raised as ambient; each locked, so that nothing this
# process becomes can turn it back.
_SECUREBITS = sum(1 << bit for bit in (0, 1, 2, 3, 5, 6, 7))
# Looked up at import: a folder script's preexec runs in a fork of a threaded harness, where entering the
# dynamic loader (dlopen, dlsym) could deadlock. None where there is no such call (not Linux).
_LIBC = ctypes.CDLL(None, use_errno=True)
_CAPGET, _CAPSET, _PRCTL, _UNSHARE = (
    getattr(_LIBC, name, None) for name in ("capget", "capset", "prctl", "unshare")
)


def drop_capabilities(ids: tuple[int, int] | None = None) -> None:
    """Leave this process (and all it becomes, exec included) no capability and no way to regain one:
    the securebits above, an empty bounding set, no ambient, effective, permitted or inheritable
    capability, and no_new_privs; with `ids` (uid, gid), it also becomes that user, with no
    supplementary group, for real, effective and saved ids. A server that runs as root would otherwise
    hand its untrusted code root in the host's user namespace (or the sandbox's, with CAP_SYS_ADMIN over
    its read-only mounts), and root without capabilities still owns root's files: it may chmod, utime and
    setxattr any of them. The securebits and the bounding set need CAP_SETPCAP; a process without it has
    nothing to drop there that it could use (no_new_privs keeps an exec from gaining what the process
    does not hold). OSError where a step fails: nothing untrusted may start with what it should not
    have."""
    if _CAPGET is None or _CAPSET is None or _PRCTL is None:
        if ids is not None:  # not Linux: no capabilities, but a user to become all the same
            _become(ids)
        return
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)  # this process
    sets = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: low words, then high words
    _checked(_CAPGET(header, sets), "capget")
    if sets[0] & (1 << _CAP_SETPCAP):
        _checked(_PRCTL(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0), "securebits")
        cap = 0
        while _PRCTL(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
            cap += 1
        if ctypes.get_errno() != errno.EINVAL or cap == 0:  # EINVAL: past the kernel's last capability
            _checked(-1, f"dropping capability {cap} from the bounding set")
    if (
        _PRCTL(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0
        and ctypes.get_errno() != errno.EINVAL
    ):
        _checked(-1, "clearing the ambient capabilities")  # EINVAL: Linux < 4.3, which has none
    if ids is not None:
        # NO_SETUID_FIXUP keeps CAP_SETUID and CAP_SETGID through the change; capset then empties them.
        _become(ids)
    _checked(_CAPSET(header, (ctypes.c_uint32 * 6)()), "capset")
    _checked(_PRCTL(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _become(ids: tuple[int, int]) -> None:
    """The sandbox's user and group for every id this process has (os.* calls only: a folder script's
    preexec runs in a fork of a threaded harness, where nothing may enter the dynamic loader)."""
    uid, gid = ids
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def _checked(value: int, what: str) -> None:
    if value != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"dropping capabilities: {what}: {os.strerror(code)}")


class CandidateGroup:
    """Descriptors on the candidate leaf: its cgroup.procs files (one per hierarchy), cgroup.kill (v2)
    and its CPU time file."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.procs = list(spec["procs"])
        self.join_fds = [os.open(path, os.O_WRONLY | os.O_CLOEXEC) for path in self.procs]
        self.kill_fd = os.open(spec["kill"], os.O_WRONLY | os.O_CLOEXEC) if spec.get("kill") else None
        self.cpu_fd = os.open(spec["cpu"], os.O_RDONLY | os.O_CLOEXEC) if spec.get("cpu") else None

    def join(self) -> None:
        """In the fork, first thing: move this process into the leaf (in every hierarchy)."""
        for fd in self.join_fds:
            os.write(fd, b"0")

    def empty(self) -> None:
        """Kill everything in the leaf and wait until it is empty (v1 needs a loop: a process may fork
        while it is being killed, up to the pids limit)."""
        if self.kill_fd is not None:
            with contextlib.suppress(OSError):
                os.write(self.kill_fd, b"1")
        for _ in range(200):
            # Opened afresh each time: cgroup v1 keeps the list an open file read first for a second.
            pids = {int(p) for path in self.procs for p in _read(path).split()}
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.001)

    def cpu_ns(self) -> int | None:
        if self.cpu_fd is None:
            return None
        return read_cpu_ns(os.pread(self.cpu_fd, 4096, 0))


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


class Setup:
    """What every candidate fork of this harness gets: set once from the runner's spec."""

    group: CandidateGroup | None = None
    # What no task needs (seccomp.py) is refused to every candidate, whatever its task declares, where
    # there is seccomp.
    filters: bool = seccomp_available()
    # Refused unless the runner says the task declared new processes (or seccomp is missing here).
    deny_processes: bool = seccomp_available()
    # The unprivileged user untrusted code runs as (sandbox/identity.py); None where there is none here.
    ids: tuple[int, int] | None = None
    # Whether each fork gets a System V IPC namespace of its own (promised by the runner where the
    # harness may make one: root, or the mapped root of a user namespace).
    own_ipc: bool = False


def configure(spec: dict[str, Any]) -> None:
    """In the harness, before it confines itself: open the candidate leaf, note the process rule, the
    user and the IPC namespace."""
    if spec.get("candidate_cgroup"):
        Setup.group = CandidateGroup(spec["candidate_cgroup"])
    Setup.deny_processes = bool(spec.get("deny_processes", Setup.deny_processes))
    Setup.ids = tuple(spec["sandbox_ids"]) if spec.get("sandbox_ids") else None  # type: ignore[assignment]
    Setup.own_ipc = bool(spec.get("own_ipc"))


def before_fork() -> None:
    """In the harness: empty the leaf, so that nothing an earlier candidate started runs on."""
    if Setup.group is not None:
        Setup.group.empty()


def cpu_now() -> float | None:
    """The leaf's CPU time so far, in seconds (None without a cgroup, or without CPU accounting)."""
    if Setup.group is None or (ns := Setup.group.cpu_ns()) is None:
        return None
    return ns / 1e9


def enter() -> None:
    """In the fork (or a script's child before exec), first thing: join the leaf, then a System V IPC
    namespace of its own, so no shared memory, message queue or semaphore set outlives it into another
    experiment. OSError where the namespace was promised and cannot be made."""
    if Setup.group is not None:
        Setup.group.join()
    if Setup.own_ipc and (_UNSHARE is None or _UNSHARE(_CLONE_NEWIPC) != 0):
        code = ctypes.get_errno()
        raise OSError(code, f"no IPC namespace of its own: {os.strerror(code)}")


def lock(*, before_exec: bool = False) -> None:
    """In the fork, once confined and before anything of the candidate's loads: the sandbox's user with
    no capability, then the filters. `before_exec`: a script's child, which must still exec, so the
    process filter is left to its interpreter (server/tasks/folder/child.py). A step that fails where it
    was promised ends the fork (OSError): no candidate runs without."""
    drop_capabilities(Setup.ids)
    if Setup.filters:
        deny_what_no_task_needs()
    if Setup.deny_processes and not before_exec:
        deny_new_processes()


def after_fork() -> None:
    """In the harness, after the fork was reaped: empty the leaf again."""
    if Setup.group is not None:
        Setup.group.empty()
