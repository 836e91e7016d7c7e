"""Which Linux namespaces the sandbox can create here (probed once with `unshare`)."""

import shutil
import subprocess
from functools import lru_cache

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
