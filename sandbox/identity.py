"""Who untrusted code runs as: an unprivileged user, never root.

Root without capabilities still owns every file root owns: it may chmod, utime and setxattr the server's
files, the store and the user's folder (Landlock does not handle those calls). So where the server runs as
root, every process that runs untrusted code, a candidate fork or a task folder's script and all they
start, becomes the sandbox's user before it loads anything (candidate.drop_capabilities): `nobody` by
default, or the user AUTORESEARCH_SANDBOX_USER names (a name, a uid, or uid:gid), which should own no
file. The server's files then belong to someone else at the OS level. The harness stays root: it makes the
mounts and the cgroup moves that the untrusted processes may not.

That user reads only what others may read, and the interpreter or a task folder often lies below a
directory only root may enter (/root, pytest's temporary directories). The harness, in its own mount
namespace, makes each path untrusted code is allowed to read reachable (`reveal`): the highest directory
above it that the user cannot enter is covered by a read-only tmpfs holding only the way down to the
allowed paths, each bound there from the original. What else was in that directory is gone from the
sandbox's view, for the harness too. The files themselves keep their modes: one only root may read stays
unreadable. The working directory is handed to the user (`hand_over`).

Where the server is not root there is no other user to become, and where the server cannot make what the
user must reach reachable here (no mount namespace, mounts refused), untrusted code runs as the server's
user or as root with no capability; the server says so at start, and each run's `isolation` list too.
"""

import contextlib
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from autoresearch_mcp.contract.env import ENV_SANDBOX_USER
from autoresearch_mcp.sandbox.namespaces import PID_FLAGS, pid_namespace_available

DEFAULT_USER = "nobody"
NOBODY = 65534  # where there is no `nobody` in the user database: the kernel's overflow id


class SandboxUser(NamedTuple):
    ids: tuple[int, int] | None  # (uid, gid) untrusted code runs as; None: as the server's user
    reason: str  # what it is, or why there is none


def _named(value: str) -> tuple[int, int]:
    """`name`, `uid` or `uid:gid` as (uid, gid); ValueError when it names no user."""
    if ":" in value:
        uid, _, gid = value.partition(":")
        return int(uid), int(gid)
    if value.isdigit():
        return int(value), int(value)
    try:
        entry = pwd.getpwnam(value)
    except KeyError:
        if value == DEFAULT_USER:
            return NOBODY, NOBODY
        raise ValueError(f"no user {value!r} here") from None
    return entry.pw_uid, entry.pw_gid


@lru_cache(maxsize=1)
def sandbox_user() -> SandboxUser:
    """The user untrusted code runs as, probed once: only a root server has another to become, and
    only where the probe (the harness's own steps, run once) shows the interpreter runs as that user."""
    if not sys.platform.startswith("linux"):
        return SandboxUser(None, "not Linux: untrusted code runs as the server's user")
    if os.geteuid() != 0:
        return SandboxUser(
            None,
            f"the server runs as uid {os.geteuid()}, not root: untrusted code runs as that user too, "
            "with no capability (the files that user owns, other than those the task names, can have "
            "their mode and times changed)",
        )
    named = os.environ.get(ENV_SANDBOX_USER) or DEFAULT_USER
    try:
        ids = _named(named)
    except ValueError as exc:
        return SandboxUser(None, f"{ENV_SANDBOX_USER}={named}: {exc}; untrusted code runs as root")
    if 0 in ids:
        return SandboxUser(None, f"{ENV_SANDBOX_USER}={named} is root's: untrusted code runs as root")
    if not _probe(ids):
        return SandboxUser(
            None,
            f"uid {ids[0]} cannot run this server's interpreter here (no mount namespace to make it "
            "reachable, or mounts refused): untrusted code runs as root with no capability, which can "
            "change the mode and times of any file root owns but those the task names",
        )
    return SandboxUser(ids, f"uid {ids[0]} ({named})")


# The harness's steps, run once as a sandboxed child would run them: reveal what untrusted code may read,
# then, in a fork, become the user and start the interpreter (which reads its standard library).
_PROBE = """
import os, sys
from autoresearch_mcp.sandbox import candidate, identity
from autoresearch_mcp.sandbox.child import read_roots
ids = (int(sys.argv[1]), int(sys.argv[2]))
identity.reveal(read_roots(), ids)
pid = os.fork()
if pid == 0:
    try:
        candidate.drop_capabilities(ids)
        os.execv(sys.executable, [sys.executable, "-I", "-c", "import decimal, json"])
    finally:
        os._exit(1)
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def _probe(ids: tuple[int, int]) -> bool:
    unshare = shutil.which("unshare")
    with tempfile.TemporaryDirectory(prefix="autoresearch-user-probe-") as scratch:
        hand_over(Path(scratch), ids)
        command = [sys.executable, "-I", "-c", _PROBE, *map(str, ids)]
        if unshare is not None and pid_namespace_available():
            command = [unshare, *PID_FLAGS, "--", *command]
        try:
            probe = subprocess.run(command, cwd=scratch, capture_output=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return probe.returncode == 0


def hand_over(root: Path, ids: tuple[int, int]) -> None:
    """`root` and everything beneath it (links themselves, not what they point to) owned by the user."""
    uid, gid = ids
    os.lchown(root, uid, gid)
    for directory, names, files in os.walk(root):
        for name in (*names, *files):
            os.lchown(os.path.join(directory, name), uid, gid)


# -- in the harness, in its own mount namespace ----------------------------------------------------
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC = 32, 4096, 16384


def reveal(paths: Iterable[str | Path], ids: tuple[int, int]) -> None:
    """Make each of `paths` reachable by the user: wherever a directory above one is closed to it, that
    directory is covered, in this process's own mount namespace, by a read-only tmpfs holding only the
    way down to the paths below it, each bound there from the original. Repeated until no path has a
    closed directory above it (one inside another revealed path gets its own cover). OSError where a
    mount fails: nothing may run believing it can reach what it cannot."""
    from autoresearch_mcp.sandbox.child import mount, own_mount_namespace

    targets = sorted({os.path.realpath(path) for path in paths if os.path.exists(path)})
    covered: set[str] = set()
    while blocked := {found for target in targets if (found := _closed_above(target, ids))}:
        top = min(blocked, key=len)
        if top in targets:
            # Itself a path to read, closed to the user: covering it would hide it from the harness too.
            # What is below stays unreachable to the user (its own mode says so).
            targets = [t for t in targets if not Path(t).is_relative_to(top)]
            continue
        if top in covered or not own_mount_namespace():
            raise OSError(f"cannot make what is below {top} reachable to uid {ids[0]}")
        covered.add(top)
        below = [t for t in targets if Path(t).is_relative_to(top) and t != top]
        outer = [t for t in below if not any(t != o and Path(t).is_relative_to(o) for o in below)]
        held = [os.open(target, os.O_PATH | os.O_CLOEXEC) for target in outer]
        try:
            mount("tmpfs", top, _MS_NOSUID | _MS_NODEV, "tmpfs", "mode=755,size=1m")
            for target, fd in zip(outer, held, strict=True):
                _make_way(top, target, is_dir=stat.S_ISDIR(os.fstat(fd).st_mode))
                mount(f"/proc/self/fd/{fd}", target, _MS_BIND | _MS_REC)
            mount(None, top, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
        finally:
            for fd in held:
                os.close(fd)


def _make_way(top: str, target: str, *, is_dir: bool) -> None:
    """The directories from `top` down to `target` on the tmpfs, open to everyone, and a mount point."""
    place = Path(top)
    for part in Path(target).relative_to(top).parts[:-1]:
        place = place / part
        with contextlib.suppress(FileExistsError):
            place.mkdir()
        os.chmod(place, 0o755)  # whatever the umask
    point = Path(target)
    if is_dir:
        point.mkdir()
    else:
        point.touch()
    os.chmod(point, 0o755 if is_dir else 0o644)


def _closed_above(path: str, ids: tuple[int, int]) -> str | None:
    """The highest directory above `path` that the user may not enter (search), or None."""
    for directory in reversed(Path(path).parents):
        try:
            info = os.stat(directory)
        except OSError:
            return None
        if not _may_enter(info, ids):
            return str(directory)
    return None


def _may_enter(info: os.stat_result, ids: tuple[int, int]) -> bool:
    uid, gid = ids
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid == gid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)
