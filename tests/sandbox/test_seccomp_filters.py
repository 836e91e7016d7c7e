"""The socket-and-mount seccomp filter (sandbox/seccomp.py) on this kernel: io_uring, which can open and
connect a Unix socket without the socket() call the filter reads, is refused like socket(AF_UNIX)."""

import ctypes
import errno
import os

import pytest

from autoresearch_mcp.sandbox.seccomp import deny_unix_sockets_and_mounts, seccomp_available

IO_URING_SETUP = 425  # the same number on x86-64 and AArch64

pytestmark = pytest.mark.skipif(not seccomp_available(), reason="no seccomp here")


def io_uring_setup_errno(filtered: bool) -> int:
    """The errno of io_uring_setup(1, NULL) in a fork, with or without the filter."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the fork's own exit status carries the answer
        code = 100
        try:
            if filtered:
                deny_unix_sockets_and_mounts()
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            code = 0 if libc.syscall(IO_URING_SETUP, 1, None) >= 0 else ctypes.get_errno()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_io_uring_is_refused_with_eperm_under_the_filter():
    unfiltered = io_uring_setup_errno(filtered=False)
    if unfiltered == errno.EPERM:
        pytest.skip("io_uring is disabled on this kernel: the filter's answer cannot be told apart")
    assert unfiltered != 0  # NULL params: the kernel refuses the call itself (EFAULT), or has no io_uring
    assert io_uring_setup_errno(filtered=True) == errno.EPERM
