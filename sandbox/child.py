"""The sandboxed process: set our own limits first, then run one trusted harness entry point.

Started by `runner.run_sandboxed` as `python -I -m autoresearch_mcp.sandbox.child SPEC`. Nothing
untrusted has run yet when the limits are set, and they cannot be raised again afterwards. Where the
kernel has Landlock, the process is also shut into its working directory for writes (and out of TCP and
out of signalling anything outside itself), and reads are limited to what Python needs, before the entry
runs. The files a task names in its payload under keys ending in `_path` stay readable (the task builds
the payload; the candidate cannot add to it). An entry module that needs more sets `CONFINES_READS = True`
and calls `confine_reads` itself once it has read what it needs, before it loads candidate code.

Landlock does not handle chmod, chown, utime or setxattr, so before it confines itself the process makes
a mount namespace of its own, where the files the task names (those `_path` files, or what the entry
module's `read_only_paths(payload)` returns) are read-only bind mounts: changing their mode, owner, times
or extended attributes answers EROFS. Landlock then refuses it and its forks any mount, and the seccomp
filter every candidate gets refuses mount_setattr, which Landlock lets through (seccomp.py). The runner
says in the spec whether to (`read_only_mounts`): only where the server ran this same code once and saw
it work (isolation.py). Where it did not (no root and no user namespace, or mounts refused by AppArmor
or SELinux), the files stay as they are and the run's `isolation` list says so; where it did and a mount
fails, the run fails before any task code runs.

The entry is trusted harness code and runs no candidate code itself: it forks for that (isolate.py, which
nests one more Landlock layer with `confine_fork`). Its return value goes back on a pipe the runner
opened, whose write end only this frame holds. Where the server could make one, the process first joins
the run's cgroup (cgroups.py), so every process and thread of the run counts against its caps; the
harness opens the candidate leaf of that cgroup before it confines itself (candidate.py).
"""

import contextlib
import ctypes
import importlib
import json
import os
import re
import resource
import signal
import stat
import sys
import threading
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from autoresearch_mcp.sandbox import candidate, identity, resources, sealed

# Landlock syscalls (Linux >= 5.13) have the same numbers on every architecture.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_FS_WRITES = _FS_WRITE_FILE | sum(1 << bit for bit in range(4, 13))  # remove, make dir/file/link/...
_FS_READS = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
_FS_FILE_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE  # allowed on a file rule
_NET_TCP = 1 | 2  # bind, connect (ABI 4)
_SCOPE_ALL = 1 | 2  # abstract unix sockets, signals (ABI 6)
_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
_MS_LOCKED = 2 | 4 | 8  # nosuid, nodev, noexec: as statvfs reports them, kept on a remount
# What Python, native libraries and CPU-count probes read; nothing here holds a user's data. Not
# /sys/fs/cgroup: other runs' and other servers' evaluation cgroups there say their PIDs and limits (the
# harness reads its own candidate leaf: `read_roots`).
_SYSTEM_READ_PATHS = (
    *("/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/localtime", "/dev/null", "/dev/urandom"),
    *("/proc/cpuinfo", "/proc/meminfo", "/sys/devices/system/cpu"),
)


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@lru_cache(maxsize=1)
def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (old kernel, disabled, not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def _fs_supported(abi: int) -> int:
    rights = _FS_WRITES | _FS_READS
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    return rights


def _check(value: int, what: str) -> int:
    if value < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"landlock {what}: {os.strerror(errno)}")
    return value


def _restrict(handled_fs: int, rules: Iterable[tuple[str, int]], *, tcp: bool, scope: bool) -> bool:
    """Add one Landlock layer: `handled_fs` rights only beneath `rules`; optionally no TCP, no signals."""
    abi = landlock_abi()
    if abi < 1:
        return False
    handled_fs &= _fs_supported(abi)
    attr = _RulesetAttr(
        handled_fs, _NET_TCP if tcp and abi >= 4 else 0, _SCOPE_ALL if scope and abi >= 6 else 0
    )
    size = 8 if abi < 4 else 16 if abi < 6 else 24  # the struct grew with the ABI
    libc = _libc()
    ruleset = _check(
        libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0), "ruleset"
    )
    try:
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this system
            try:
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                allowed = access & handled_fs & (-1 if is_dir else _FS_FILE_RIGHTS)
                if allowed:
                    rule = _PathBeneath(allowed, fd)
                    _check(
                        libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0), path
                    )
            finally:
                os.close(fd)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0), "restrict_self")
    finally:
        os.close(ruleset)
    return True


def confine_writes(work: Path, *, network: bool) -> bool:
    """Writes only beneath `work` (and /dev/null); unless `network`, no TCP; no signals or abstract
    sockets reaching outside this process tree. False where Landlock is unavailable."""
    rules = [(str(work), _FS_WRITES | _FS_REFER | _FS_TRUNCATE), ("/dev/null", _FS_WRITE_FILE | _FS_TRUNCATE)]
    return _restrict(_FS_WRITES | _FS_REFER | _FS_TRUNCATE, rules, tcp=not network, scope=True)


_network = [False]  # whether this run may use the network (set from the spec; forks inherit it)


def confine_fork(writable: Path | None) -> bool:
    """A Landlock domain nested in this process's own, for a fork that loads candidate code
    (sandbox/isolate.py): writes only beneath `writable` (nowhere when None), no TCP unless the run
    allows the network, and no signals or abstract sockets reaching outside the fork. Being a nested
    domain is also what keeps the fork from tracing (ptrace, /proc/PID/mem) the process that forked it,
    even as root. False where Landlock is unavailable."""
    rules = [("/dev/null", _FS_WRITE_FILE | _FS_TRUNCATE)]
    if writable is not None:
        rules.append((str(writable), _FS_WRITES | _FS_REFER | _FS_TRUNCATE))
    return _restrict(_FS_WRITES | _FS_REFER | _FS_TRUNCATE, rules, tcp=not _network[0], scope=True)


def hidden_read_rules(allowed: Iterable[str], hidden: Iterable[str | Path]) -> list[tuple[str, int]]:
    """Landlock rules for reads beneath `allowed` except `hidden`: a directory that holds a hidden path
    is opened up entry by entry around it (a rule on a directory reaches all beneath it), and keeps
    only its listing readable, so a hidden file's name can be seen, never its content."""
    secret = {os.path.realpath(path) for path in hidden}
    rules: list[tuple[str, int]] = []

    def around(path: str) -> None:
        real = os.path.realpath(path)
        if real in secret:
            return
        if not any(Path(inner).is_relative_to(real) for inner in secret):
            rules.append((path, _FS_READS))
            return
        rules.append((path, _FS_READ_DIR))
        try:
            names = sorted(os.listdir(path))
        except OSError:
            return
        for name in names:
            around(os.path.join(path, name))

    for root in allowed:
        around(root)
    return rules


def confine_fork_reads(rules: Iterable[tuple[str, int]]) -> bool:
    """One more Landlock layer, for a fork that may read less than the process that forked it (a task
    folder's script, which may not read what only the evaluator may): reads and executes only as
    `rules` say (hidden_read_rules). False where Landlock is unavailable."""
    return _restrict(_FS_READS, list(rules), tcp=False, scope=False)


def read_roots(extra: Iterable[str | Path] = ()) -> list[str]:
    """What untrusted code may read (and execute): the working directory, the Python installation, the
    sandbox package, system libraries and `extra`; and the files the harness reads itself after it
    confined itself (its candidate leaf's process list, closed to the sandbox's user by its mode)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path}
    roots |= {str(Path(__file__).resolve().parent), os.getcwd(), "/proc/self", *_SYSTEM_READ_PATHS}
    roots |= {str(path) for path in extra}
    if candidate.Setup.group is not None:  # the harness lists its candidate leaf afresh (candidate.py)
        roots |= set(candidate.Setup.group.procs)
    return sorted(root for root in roots if root)


def confine_reads(extra: Iterable[str | Path] = ()) -> bool:
    """Reads and executes only beneath `read_roots(extra)`. Call it after loading data, before loading
    candidate code."""
    return _restrict(_FS_READS, [(root, _FS_READS) for root in read_roots(extra)], tcp=False, scope=False)


def mount_read_only(paths: Iterable[str | Path], writable: Path) -> bool:
    """Make `paths` read-only for this process and all it starts, in a mount namespace of its own:
    each is bound onto itself with what is mounted below it, then it and each of those mounts are
    remounted read-only (binding without what is below would show the empty directories under them
    instead, and a user namespace refuses to split a mount from those locked to it). A path that holds
    `writable` is left as it is (the run writes there), one that does not exist is skipped. False where
    no mount namespace can be made here; OSError where one was made and a mount failed (nothing must run
    believing the files are protected when they are not)."""
    held = writable.resolve()
    targets = sorted(
        {
            real
            for real in (os.path.realpath(path) for path in paths)
            if os.path.lexists(real) and not held.is_relative_to(real)
        }
    )
    if not targets:
        return True
    if not own_mount_namespace():
        return False
    for target in targets:
        mount(target, target, _MS_BIND | _MS_REC)
        for point in [target, *_mounts_below(target)]:
            # In a user namespace a mount's nosuid, nodev and noexec are locked: a remount must keep them.
            locked = os.statvfs(point).f_flag & _MS_LOCKED
            mount(None, point, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | locked)
    return True


_own_namespace = [False]


def own_mount_namespace() -> bool:
    """A mount namespace of this process's own, whose mounts reach no other (made once). False where
    none can be made here: it needs CAP_SYS_ADMIN in this process's user namespace (root, or the mapped
    root under `unshare`)."""
    if not _own_namespace[0]:
        if _libc().unshare(_CLONE_NEWNS) != 0:
            return False
        # Private first: a mount namespace copied from one whose mounts are shared would pass ours on.
        mount(None, "/", _MS_REC | _MS_PRIVATE)
        _own_namespace[0] = True
    return True


def _mounts_below(target: str) -> list[str]:
    """The mount points strictly below `target`, parents first, each once (a path mounted over is
    listed once per mount; a remount by path reaches the one on top)."""
    with open("/proc/self/mountinfo", "rb") as mountinfo:
        lines = mountinfo.read().splitlines()
    below = []
    for line in lines:
        # The fifth field; space, tab, newline and backslash in it are octal escapes.
        field = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), line.split(b" ")[4])
        point = os.fsdecode(field)
        if Path(point).is_relative_to(target) and point != target and point not in below:
            below.append(point)
    return below


def mount(
    source: str | None, target: str, flags: int, fstype: str | None = None, data: str | None = None
) -> None:
    encoded = None if source is None else os.fsencode(source)
    kind, options = (None if v is None else v.encode() for v in (fstype, data))
    if _libc().mount(encoded, os.fsencode(target), kind, ctypes.c_ulong(flags), options) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def _mount_as_promised(paths: Iterable[str | Path]) -> None:
    """Mount `paths` read-only, or end the run before any task code runs: its isolation list says they
    are read-only."""
    try:
        if mount_read_only(paths, Path.cwd()):
            return
        problem = "no mount namespace could be made"
    except OSError as exc:
        problem = str(exc)
    sys.exit(f"sandbox: the task's files could not be mounted read-only ({problem}); nothing was run")


def _reveal_as_promised(paths: list[str]) -> None:
    """Make `paths` reachable to the sandbox's user (identity.reveal), or end the run before any task code
    runs: it would fail on what it may read, for a reason it cannot see."""
    try:
        identity.reveal(paths, candidate.Setup.ids or (0, 0))
    except OSError as exc:
        sys.exit(
            f"sandbox: what the task may read could not be made reachable to its user ({exc}); "
            "nothing was run"
        )


def _set_limits(limits: dict, nproc: bool) -> None:
    memory = int(limits["memory_mb"]) * 1024 * 1024
    cpu = max(1, int(float(limits["cpu_s"]) + 0.999))
    file_bytes = int(limits["file_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if nproc:  # only where it binds: a user namespace of our own, without a pids cgroup (see runner)
        processes = int(limits["processes"])
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def main() -> int:
    spec_path = Path(sys.argv[1])
    spec = json.loads(spec_path.read_text())
    # The spec may hold what the candidate must not see (e.g. the benchmark's input seeds).
    with contextlib.suppress(OSError):
        spec_path.unlink()
    _set_limits(spec["limits"], bool(spec.get("nproc_rlimit")))
    # The pipe the result goes back through: written only from this frame, after the entry returned.
    # Every fork that loads candidate code closes it first (isolate.py), so no candidate can write it.
    result_fd = int(spec["result_fd"])
    os.set_inheritable(result_fd, False)
    if spec.get("sealed_fd") is not None:
        sealed.open_feed(int(spec["sealed_fd"]))
    if spec.get("quota_fd") is not None:
        resources.open_quota_pipe(int(spec["quota_fd"]))
    _network[0] = bool(spec["limits"].get("network", False))
    candidate.configure(spec)  # opens the candidate cgroup's files: Landlock refuses them from here on
    module_name, func_name = spec["entry"].split(":")
    import_root = spec.get("import_root")
    if import_root and import_root not in sys.path:  # a plugin task's harness outside the package
        sys.path.append(import_root)
    # Imported before Landlock (trusted harness code): it names what to mount read-only, and Landlock
    # refuses mounts.
    module = importlib.import_module(module_name)
    payload = spec["payload"]
    named = [v for k, v in payload.items() if k.endswith("_path") and isinstance(v, str) and os.path.isabs(v)]
    if spec.get("read_only_mounts"):  # promised in the run's isolation list
        read_only = getattr(module, "read_only_paths", None)
        _mount_as_promised(named if read_only is None else read_only(payload))
    if candidate.Setup.ids is not None:  # untrusted code runs as another user: what it may read, it can
        readable = getattr(module, "readable_paths", None)
        _reveal_as_promised(read_roots(named if readable is None else readable(payload)))
    confine_writes(Path.cwd(), network=_network[0])
    if not getattr(module, "CONFINES_READS", False):
        confine_reads(named)
    entry = getattr(module, func_name)
    result = entry(payload)
    with os.fdopen(result_fd, "w") as out:
        out.write(json.dumps(result))
    return 0


def _join_cgroup(procs_files: list[str]) -> None:
    """Enter the run's cgroup (one directory per hierarchy) before anything else runs, so every
    process of the run counts."""
    for path in procs_files:
        with open(path, "w") as procs:
            procs.write("0")


def _wait_as_init(pid: int) -> int:
    """As the init of a fresh PID namespace, wait for the harness and pass on how it ended.

    The init of a namespace ignores every signal it has no handler for, the CPU limit's SIGXCPU and a
    candidate's kill of itself included; so the harness runs as its child, where signals act as usual.
    When this returns, the namespace and anything left in it die.
    """
    while True:
        try:
            reaped, status = os.wait()
        except ChildProcessError:
            return 1
        if reaped == pid:
            signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
            return 128 + signum if signum else os.WEXITSTATUS(status)


def _die_with_the_server(fd: int) -> None:
    """The server holds the write end of this pipe; when it dies, the read returns and so do we.

    Without this, a server killed mid-experiment would leave its sandboxed child training on. As the
    init of a PID namespace, exiting takes everything in the namespace along; otherwise the whole process
    group (its own session) is killed.
    """

    def watch() -> None:
        with contextlib.suppress(OSError):
            os.read(fd, 1)
        if os.getpid() == 1:
            os._exit(137)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="die-with-server").start()


if __name__ == "__main__":
    if (cgroup := os.environ.pop("AUTORESEARCH_SANDBOX_CGROUP", None)) is not None:
        _join_cgroup(json.loads(cgroup))
    if (watch_fd := os.environ.get("AUTORESEARCH_SANDBOX_WATCH_FD")) is not None:
        del os.environ["AUTORESEARCH_SANDBOX_WATCH_FD"]
        _die_with_the_server(int(watch_fd))
    if os.getpid() == 1 and (harness := os.fork()):
        sys.exit(_wait_as_init(harness))
    sys.exit(main())
