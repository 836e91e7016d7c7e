"""What the sandbox can enforce on this machine, said once at start and listed with every run.

The OS layers are the boundary (docs/sandbox.md): the run's cgroup (memory of the whole tree, processes, CPU
time, kill before measuring), seccomp (no sockets but TCP/IP, no mounts, no keyrings, no user namespaces,
no new processes), namespaces (network, PIDs, System V IPC, mounts: the task's files read-only), the
unprivileged user untrusted code runs as (identity.py) and Landlock (files, signals). Each is probed here; a run's
`isolation` list says what applied to it, and `weaker_guarantees()` says, for the server's start-up warning,
what is missing and what holds instead.
"""

import os
from typing import TYPE_CHECKING, NamedTuple

from autoresearch_mcp.sandbox import cgroups, seccomp
from autoresearch_mcp.sandbox.cgroups import EvaluationCgroup
from autoresearch_mcp.sandbox.child import landlock_abi
from autoresearch_mcp.sandbox.identity import sandbox_user
from autoresearch_mcp.sandbox.namespaces import (
    AS_USER,
    PID_FLAGS,
    network_namespace_available,
    pid_namespace_available,
    read_only_mounts_work,
    user_flags,
)

if TYPE_CHECKING:
    from autoresearch_mcp.sandbox.runner import Limits


def nproc_binds() -> bool:
    # The kernel never applies RLIMIT_NPROC to root; a mapped root in a user namespace of its own is
    # counted there, apart from the user's other processes.
    return os.geteuid() != 0 and user_flags() == AS_USER


def process_cap_available() -> bool:
    """Whether a run's process count can be capped here (a cgroup, or RLIMIT_NPROC that binds)."""
    return cgroups.cgroup_support().version is not None or nproc_binds()


def weaker_guarantees() -> list[str]:
    """What this machine cannot enforce, each with what holds instead; empty when everything can be."""
    missing = []
    support = cgroups.cgroup_support()
    if support.version is None:
        missing.append(
            f"{support.describe()}: memory is limited per process only (RLIMIT_AS: a candidate that "
            "starts processes can hold that much in each), the process count "
            + ("by RLIMIT_NPROC" if nproc_binds() else "not at all")
            + ", CPU time is the forked process's own, and what a candidate starts is killed when the "
            "run ends (PID namespace), not before each measurement"
        )
    if (user := sandbox_user()).ids is None:
        missing.append(user.reason)
    if not seccomp.seccomp_available():
        missing.append(
            "no seccomp filter here: candidates may fork and exec, connect to the Unix sockets the "
            "server's user may (Docker, D-Bus), open netlink, packet and vsock sockets, use the keyrings "
            "(a key outlives the experiment) and make user namespaces; the cgroup (if any) still holds "
            "their memory and process count and is emptied before each measurement"
        )
    if not landlock_abi():
        missing.append("no Landlock: a candidate's process can read what the server's user can read")
    if not network_namespace_available():
        missing.append("no network namespace: a candidate can use the network")
    if not pid_namespace_available():
        missing.append("no PID namespace: a process that leaves its process group can outlive a run")
    if user_flags() is None:
        missing.append(
            "no mount or IPC namespace: a candidate can change the mode, owner and times of the files "
            "its task names (a task folder's included), though not their content, and a folder script's "
            "System V shared memory, message queues and semaphores outlive its experiment"
        )
    return missing


class Plan(NamedTuple):
    prefix: list[str]  # the unshare flags
    isolation: list[str]  # what is enforced, as the run's `isolation` list says it
    read_only_mounts: bool  # promised to the child: it mounts the task's files read-only, or fails
    ids: tuple[int, int] | None  # the user untrusted code runs as (None: the server's)
    own_ipc: bool  # promised: each untrusted process gets a System V IPC namespace of its own


def plan(limits: "Limits", cgroup: EvaluationCgroup | None) -> Plan:
    """The unshare flags for a run, the list of what is enforced for it, whether the child must mount
    the task's files read-only, the user untrusted code runs as, and whether it gets its own IPC
    namespace."""
    isolation = [
        f"rlimit: address space {limits.memory_mb} MB, cpu {limits.cpu_s:g} s, files {limits.file_mb} MB",
        f"wall clock {limits.wall_s:g} s",
        f"disk quota {limits.disk_mb} MB and {limits.max_files} files in the working directory",
        "scrubbed environment",
        "temporary working directory",
    ]
    if cgroup is not None:
        isolation.append(
            f"{cgroup.support.describe()} for this run: at most {limits.processes} processes and "
            f"threads; candidate processes and all they start: {limits.memory_mb} MB of memory "
            "together, their CPU time counted, and killed before each measurement and at the end"
        )
    elif nproc_binds():
        isolation.append(
            f"processes and threads: at most {limits.processes} (RLIMIT_NPROC; no cgroup: memory per process)"
        )
    else:
        isolation.append(
            f"process count NOT capped and memory per process only ({cgroups.cgroup_support().describe()})"
        )
    user = sandbox_user()
    if user.ids is not None:
        isolation.append(
            f"untrusted code runs as {user.reason}, with no capability: the server's files, the store and "
            "the task's folder belong to another user"
        )
    else:
        isolation.append(f"untrusted code NOT run as another user ({user.reason})")
    if seccomp.seccomp_available():
        isolation.append(
            "no sockets but TCP/IP (AF_INET, AF_INET6: no Unix, netlink, packet or vsock socket; "
            "socketpair for AF_UNIX only), no io_uring, no mounts, no keyrings (add_key, keyctl, "
            "request_key) and no user namespaces (unshare or clone with CLONE_NEWUSER; clone3 answers "
            "ENOSYS) for candidate code (seccomp)"
        )
    else:
        isolation.append(
            "Unix, netlink, packet and vsock sockets, keyrings and user namespaces NOT refused (no "
            "seccomp here)"
        )
    if limits.new_processes:
        isolation.append("new processes allowed (the task declares that it starts them)")
    elif seccomp.seccomp_available():
        isolation.append(
            "no new processes for candidate code (seccomp: fork, clone, exec refused; threads allowed)"
        )
    else:
        isolation.append("new processes NOT refused (no seccomp here)")
    prefix: list[str] = []
    if not limits.network and network_namespace_available():
        prefix += ["--net"]
        isolation.append("no network (empty network namespace)")
    elif not limits.network:
        isolation.append("network NOT isolated (no permission to create a network namespace)")
    if pid_namespace_available():
        # Every process the child starts dies with it (the namespace's init is the child), and its own
        # /proc hides every other process, with their environments.
        prefix += PID_FLAGS
        isolation.append("own PID namespace and /proc (stray processes die with it)")
    else:
        isolation.append("no PID namespace: a process that leaves its process group can outlive the run")
    # System V shared memory, message queues and semaphores live in the IPC namespace, not in a process:
    # one of the run's own, and one of each untrusted process's own, so none outlives the experiment.
    own_ipc = user_flags() is not None
    if own_ipc:
        prefix += ["--ipc"]
        isolation.append(
            "own System V IPC namespace for the run and for each untrusted process (shared memory, "
            "message queues, semaphores)"
        )
    else:
        isolation.append("System V IPC NOT isolated (no namespaces here): it can outlive the experiment")
    # The child makes the mount namespace itself (child.mount_read_only), under `unshare` where there is
    # a prefix, else as this process is; the probe ran that code once as such a child. Nothing that runs
    # untrusted code can undo the mounts, seccomp or not: it holds no capability (candidate.py), and the
    # mounts a new user namespace would copy are locked read-only.
    read_only = bool(prefix or user_flags() == ()) and read_only_mounts_work()
    if read_only:
        isolation.append(
            "the files the task names (a folder, its declared reads) mounted read-only in the child's own "
            "mount namespace, except one that holds the working directory (such as /tmp): no chmod, "
            "chown, utime or xattr on them"
        )
    else:
        isolation.append(
            "the files the task names NOT mounted read-only (no mount namespace, or mounts refused here): "
            "their mode, owner and times can be changed"
        )
    abi = landlock_abi()
    if abi:
        isolation.append(
            f"Landlock ABI {abi}: writes only in the working directory, reads only Python, system "
            "libraries and the files the task names"
            + (", no TCP" if abi >= 4 and not limits.network else "")
            + (", no signals to other processes" if abi >= 6 else "")
            + "; candidate code runs in a fork nested one Landlock domain deeper, holding no descriptor "
            "of the harness"
        )
    else:
        isolation.append("filesystem NOT confined (no Landlock): the child can read what this user can")
    return Plan(prefix, isolation, read_only, user.ids, own_ipc)
