"""The seccomp filter every untrusted process gets (sandbox/seccomp.py, `deny_what_no_task_needs`), on this
kernel, driven by a table: each syscall and socket family a task does not need is refused, with the errno
the table names, while what tasks do need (TCP/IP sockets, socketpair, an IPC namespace) stays allowed.
Each call runs in a fork of the test, once unfiltered and once under the filter, so a row shows that the
filter refused it, not the kernel or a missing module."""

import ctypes
import errno
import os
import platform
import socket
from collections.abc import Callable
from typing import NamedTuple

import pytest

from autoresearch_mcp.sandbox.seccomp import deny_what_no_task_needs, seccomp_available

pytestmark = pytest.mark.skipif(not seccomp_available(), reason="no seccomp here")

# Raw syscall numbers, from the kernel's own tables (not from the module under test). io_uring_setup and
# clone3 share one number everywhere.
IO_URING_SETUP, CLONE3 = 425, 435
NUMBERS = {
    "x86_64": {"add_key": 248, "request_key": 249, "keyctl": 250, "clone": 56},
    "aarch64": {"add_key": 217, "request_key": 218, "keyctl": 219, "clone": 220},
}.get(platform.machine(), {})
CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWIPC, SIGCHLD = 0x10000000, 0x40000000, 0x08000000, 17
KEY_SPEC_SESSION_KEYRING, KEYCTL_GET_KEYRING_ID, KEYCTL_JOIN_SESSION_KEYRING = -3, 0, 1
AF_VSOCK = getattr(socket, "AF_VSOCK", 40)
AF_PACKET = getattr(socket, "AF_PACKET", 17)

Call = Callable[[ctypes.CDLL], int]  # returns the call's result; the errno is read after it


def syscall(name: str, *args: object) -> Call:
    def call(libc: ctypes.CDLL) -> int:
        number = NUMBERS[name] if name in NUMBERS else {"clone3": CLONE3, "io_uring": IO_URING_SETUP}[name]
        return libc.syscall(number, *args)

    return call


def sock(family: int, kind: int, protocol: int = 0) -> Call:
    return lambda libc: libc.socket(family, kind, protocol)


def pair(family: int) -> Call:
    fds = (ctypes.c_int * 2)()
    return lambda libc: libc.socketpair(family, socket.SOCK_STREAM, 0, fds)


def clone_with(flags: int) -> Call:
    """Raw clone, as fork does it: in the new process (0) leave at once."""

    def call(libc: ctypes.CDLL) -> int:
        pid = libc.syscall(NUMBERS["clone"], flags | SIGCHLD, 0, 0, 0, 0)
        if pid == 0:
            os._exit(0)
        if pid > 0:
            os.waitpid(pid, 0)
        return pid

    return call


def add_key(libc: ctypes.CDLL) -> int:
    """add_key into a fresh anonymous session keyring, which dies with the fork (unfiltered, the key
    would otherwise land in the user's session keyring, which outlives it)."""
    libc.syscall(NUMBERS["keyctl"], KEYCTL_JOIN_SESSION_KEYRING, None)
    return syscall("add_key", b"user", b"probe", b"x", 1, KEY_SPEC_SESSION_KEYRING)(libc)


class Row(NamedTuple):
    call: Call
    filtered: int  # the errno under the filter (0: allowed)
    unfiltered: int | None = None  # what the kernel answers without it, where every kernel agrees


EPERM, ENOSYS = errno.EPERM, errno.ENOSYS
TABLE = {
    # socket families: only TCP/IP
    "socket AF_UNIX": Row(sock(socket.AF_UNIX, socket.SOCK_STREAM), EPERM, 0),
    "socket AF_NETLINK": Row(sock(socket.AF_NETLINK, socket.SOCK_RAW, 0), EPERM, 0),
    "socket AF_PACKET": Row(sock(AF_PACKET, socket.SOCK_RAW), EPERM),
    "socket AF_VSOCK": Row(sock(AF_VSOCK, socket.SOCK_STREAM), EPERM),
    "socket AF_INET": Row(sock(socket.AF_INET, socket.SOCK_STREAM), 0, 0),
    "socket AF_INET6": Row(sock(socket.AF_INET6, socket.SOCK_DGRAM), 0),
    "socketpair AF_UNIX": Row(pair(socket.AF_UNIX), 0, 0),
    "socketpair AF_INET": Row(pair(socket.AF_INET), EPERM),
    # keyrings: a key outlives the experiment
    "add_key": Row(add_key, EPERM, 0),
    "keyctl": Row(syscall("keyctl", KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0), EPERM),
    "request_key": Row(syscall("request_key", b"user", b"no-such-key", None, 0), EPERM),
    # user namespaces: capabilities again inside one
    "unshare CLONE_NEWUSER": Row(lambda libc: libc.unshare(CLONE_NEWUSER), EPERM, 0),
    "unshare CLONE_NEWUSER|CLONE_NEWNET": Row(
        lambda libc: libc.unshare(CLONE_NEWUSER | CLONE_NEWNET), EPERM, 0
    ),
    "clone CLONE_NEWUSER": Row(clone_with(CLONE_NEWUSER), EPERM, 0),
    "clone3": Row(syscall("clone3", None, 0), ENOSYS),
    "unshare CLONE_NEWIPC": Row(lambda libc: libc.unshare(CLONE_NEWIPC), 0, 0),  # what the sandbox uses
    # io_uring can open and connect a socket without socket()
    "io_uring_setup": Row(syscall("io_uring", 1, None), EPERM),
}


def errno_of(call: Call, filtered: bool) -> int:
    """The errno of `call` in a fork of the test (0 when it succeeded), with or without the filter."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the fork's own exit status carries the answer
        code = 255
        try:
            if filtered:
                deny_what_no_task_needs()
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            ctypes.set_errno(0)
            code = 0 if call(libc) >= 0 else ctypes.get_errno()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(not NUMBERS, reason=f"no syscall table for {platform.machine()} in this test")
@pytest.mark.parametrize("name", list(TABLE))
def test_the_filter_refuses_each_call_and_family_no_task_needs_and_allows_the_rest(name: str):
    row = TABLE[name]
    unfiltered = errno_of(row.call, filtered=False)
    if row.unfiltered is not None:
        assert unfiltered == row.unfiltered, "the kernel answers otherwise here"
    elif row.filtered and unfiltered == row.filtered:
        pytest.skip(f"{name} is refused by this kernel already: the filter's answer cannot be told apart")
    assert errno_of(row.call, filtered=True) == row.filtered
