"""Which Linux namespaces the sandbox can create here (probed once with `unshare`)."""

import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

# Without root, namespaces need an unprivileged user namespace first (where the distribution allows it).
AS_USER = ("--user", "--map-root-user")
PID_FLAGS = ("--pid", "--fork", "--kill-child", "--mount-proc")


def _unshare_works(flags: tuple[str, ...]) -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    try:
        probe = subprocess.run([unshare, *flags, "--", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


@lru_cache(maxsize=1)
def user_flags() -> tuple[str, ...] | None:
    """() when namespaces can be made directly, the user-namespace flags when only those work, else None."""
    for flags in ((), AS_USER):
        if _unshare_works((*flags, "--net")) or _unshare_works((*flags, *PID_FLAGS)):
            return flags
    return None


@lru_cache(maxsize=1)
def network_namespace_available() -> bool:
    """True when `unshare --net` works here (root, or user namespaces allowed)."""
    flags = user_flags()
    return flags is not None and _unshare_works((*flags, "--net"))


@lru_cache(maxsize=1)
def pid_namespace_available() -> bool:
    """True when the child can get its own PID namespace and /proc (it then sees no other process)."""
    flags = user_flags()
    return flags is not None and _unshare_works((*flags, *PID_FLAGS))


# Run as the sandboxed child would be: make a file read-only the way sandbox/child.py does, and check that
# it is (a chmod answers EROFS). Exit 0 only then.
_MOUNT_PROBE = """
import errno, os, sys
from pathlib import Path
from autoresearch_mcp.sandbox.child import mount_read_only
target, work = sys.argv[1:]
try:
    if not mount_read_only([target], Path(work)):
        sys.exit(1)
    os.chmod(target, 0o600)
except OSError as exc:
    sys.exit(0 if exc.errno == errno.EROFS else 1)
sys.exit(1)
"""


@lru_cache(maxsize=1)
def read_only_mounts_work() -> bool:
    """Whether the sandboxed child can mount the task's files read-only here: its own code run once, in
    the namespaces it gets (a user namespace where it needs one, a PID namespace where there is one).
    unshare(CLONE_NEWNS) can succeed where mount is refused (Docker with CAP_SYS_ADMIN under AppArmor,
    SELinux), so a prediction from the namespaces alone is not enough. About 0.1 s, on the first run."""
    flags = user_flags()
    if flags is None:
        return False
    prefix = [*flags, *(PID_FLAGS if pid_namespace_available() else ())]
    unshare = shutil.which("unshare")
    with tempfile.TemporaryDirectory(prefix="autoresearch-mount-probe-") as scratch:
        target, work = Path(scratch, "file"), Path(scratch, "work")
        target.write_text("")
        work.mkdir()
        command = [sys.executable, "-I", "-c", _MOUNT_PROBE, str(target), str(work)]
        if prefix and unshare is not None:
            command = [unshare, *prefix, "--", *command]
        try:
            probe = subprocess.run(command, capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return probe.returncode == 0
