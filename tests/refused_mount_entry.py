"""Test-only harness entry in a child where a mount namespace can be made but every mount is refused, as
AppArmor or SELinux refuse them in a container with CAP_SYS_ADMIN. sandbox/child.py imports this module
before it mounts anything, so the libc it mounts with is the one below.
Kept free of the server's imports."""

import ctypes
import errno
import sys
from typing import Any


class _RefusingLibc:
    @staticmethod
    def unshare(flags: int) -> int:
        return 0  # as if the namespace were made

    @staticmethod
    def mount(*args: Any) -> int:
        ctypes.set_errno(errno.EACCES)
        return -1


# The child runs as `python -m autoresearch_mcp.sandbox.child`: the module that mounts is __main__.
sys.modules["__main__"]._libc = lambda: _RefusingLibc


def run(payload: dict[str, Any]) -> dict[str, Any]:
    print("the entry ran", flush=True)
    return {"ran": True}
