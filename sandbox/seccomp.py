"""Seccomp filters for the processes that run untrusted code: what no task needs, and new processes.

Two classic BPF programs, installed through prctl with ctypes (no dependency), so they hold on any Linux
with seccomp on x86-64 or AArch64, whatever Python then does: they are enforced by the kernel, on the
process and everything it becomes. Stacked filters all run; the strictest answer wins.

- Every process that runs candidate code or a task folder's script gets the first
  (`deny_what_no_task_needs`), each refusal answering EPERM:
  - socket() of any family but AF_INET and AF_INET6. AF_UNIX because the empty network namespace leaves
    pathname Unix sockets reachable (/var/run/docker.sock, D-Bus) and Landlock does not mediate
    connect(); AF_NETLINK, AF_PACKET, AF_VSOCK and the rest because no task needs them and each is a
    way to the kernel or the host that the network namespace does not close. socketpair() stays allowed
    for AF_UNIX only (it names no path: multiprocessing's Pipe and asyncio use it). The cost:
    multiprocessing's forkserver start method, its Manager and its AF_UNIX Listener need a Unix socket
    and fail; the fork and spawn start methods need none.
  - the mount syscalls, old API and new, so that a process with CAP_SYS_ADMIN in its user namespace
    cannot undo the read-only mounts of the files its task names (sandbox/child.py): Landlock refuses
    mount and umount, but not mount_setattr.
  - io_uring, whose IORING_OP_SOCKET and IORING_OP_CONNECT make and connect a socket without the
    socket() call the filter reads.
  - the keyrings (add_key, keyctl, request_key): a key outlives the process that added it, in the
    user's keyring, where the next experiment would read it.
  - a new user namespace (unshare or clone with CLONE_NEWUSER): inside one, an unprivileged process
    holds every capability again (raw sockets, interface flags, sethostname, chroot). clone3 answers
    ENOSYS, because its flags sit in memory a filter cannot read; glibc then falls back to clone.
- Unless the task declared that it starts processes, the second (`deny_new_processes`): threads stay
  allowed (XGBoost and BLAS need them); every other way to a new process is refused with an error the
  code sees as an OSError: fork, vfork, clone without CLONE_THREAD, execve and execveat.

They go on the fork that loads candidate code (isolate.py), after the harness's own forks, so the harness
can still fork one process per call; a task folder's command gets the first before exec and the second
from the interpreter, before the script's first line (server/tasks/folder/child.py). Syscalls of another
ABI (32-bit or x32 on x86-64, whose socketcall would hide the domain) kill the process: untrusted code
cannot slip past the table by switching ABI.
"""

import ctypes
import errno
import os
import platform
import struct
import sys
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_CLONE_THREAD = 0x00010000
_CLONE_NEWUSER = 0x10000000
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10
_X32_BIT = 0x40000000
# Classic BPF opcodes: load a word at an absolute offset, jump if equal / if bits set / if greater or
# equal (constant operand), return a constant.
_LD_ABS_W = 0x20
_JEQ_K, _JSET_K, _JGE_K = 0x15, 0x45, 0x35
_RET_K = 0x06
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian here).
_NR, _ARCH, _ARG0_LOW = 0, 4, 16


class _Arch(NamedTuple):
    audit: int  # AUDIT_ARCH_*, as seccomp_data.arch reports it
    refused: tuple[int, ...]  # fork, vfork, execve, execveat where the architecture has them
    clone: int
    socket: int
    socketpair: int
    unshare: int
    mounts: tuple[int, ...]  # mount, umount2, pivot_root
    keys: tuple[int, ...]  # add_key, request_key, keyctl


# Syscall numbers differ between architectures; AArch64 has no fork or vfork (glibc uses clone).
_ARCHES = {
    "x86_64": _Arch(
        0xC000003E,
        refused=(57, 58, 59, 322),
        clone=56,
        socket=41,
        socketpair=53,
        unshare=272,
        mounts=(165, 166, 155),
        keys=(248, 249, 250),
    ),
    "aarch64": _Arch(
        0xC00000B7,
        refused=(221, 281),
        clone=220,
        socket=198,
        socketpair=199,
        unshare=97,
        mounts=(40, 39, 41),
        keys=(217, 218, 219),
    ),
}
# The same on every architecture (new syscalls share one table).
_CLONE3 = 435
# open_tree, move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr, open_tree_attr
_MOUNT_API = (428, 429, 430, 431, 432, 433, 442, 467)
# io_uring_setup, io_uring_enter, io_uring_register: its IORING_OP_SOCKET and IORING_OP_CONNECT make and
# connect a socket without the socket() call the filter reads (kernels from 5.19).
_IO_URING = (425, 426, 427)
_RETURNS = {
    "deny": _RET_ERRNO | errno.EPERM,
    "enosys": _RET_ERRNO | errno.ENOSYS,
    "allow": _RET_ALLOW,
    "kill": _RET_KILL_PROCESS,
}
_OPCODES = {"ld": _LD_ABS_W, "jeq": _JEQ_K, "jge": _JGE_K, "jset": _JSET_K}

# One step: (op, k, where to go when the test holds, where otherwise): a return named in _RETURNS, or
# None for the next step. Quoted: this file also runs as plain source on a task folder's own interpreter
# (server/tasks/folder/child.py), which may be older than the server's.
_Step = tuple[str, int, "str | None", "str | None"]


def _own_abi(machine: str) -> list[_Step]:
    """Where both filters start: kill another ABI's syscalls, then load the syscall's number."""
    steps: list[_Step] = [
        ("ld", _ARCH, None, None),
        ("jeq", _ARCHES[machine].audit, None, "kill"),  # another ABI (32-bit syscalls on x86-64)
        ("ld", _NR, None, None),
    ]
    if machine == "x86_64":
        steps.append(("jge", _X32_BIT, "kill", None))  # the x32 ABI: same arch, other numbers
    return steps


def _what_no_task_needs(machine: str) -> list[_Step]:
    arch = _ARCHES[machine]
    return [
        *_own_abi(machine),
        *[("jeq", n, "deny", None) for n in (*arch.mounts, *_MOUNT_API, *_IO_URING, *arch.keys)],
        ("jeq", _CLONE3, "enosys", None),
        # The syscalls below decide on their first argument: each loads it and returns.
        ("jeq", arch.socket, None, "pair"),
        ("ld", _ARG0_LOW, None, None),  # socket's family
        ("jeq", _AF_INET, "allow", None),
        ("jeq", _AF_INET6, "allow", "deny"),
        ("label", 0, "pair", None),
        ("jeq", arch.socketpair, None, "namespaces"),
        ("ld", _ARG0_LOW, None, None),  # socketpair's family
        ("jeq", _AF_UNIX, "allow", "deny"),
        ("label", 0, "namespaces", None),
        ("jeq", arch.unshare, "flags", None),
        ("jeq", arch.clone, None, "allow"),
        ("label", 0, "flags", None),
        ("ld", _ARG0_LOW, None, None),  # unshare's or clone's flags (their low 32 bits)
        ("jset", _CLONE_NEWUSER, "deny", "allow"),
    ]


def _new_processes(machine: str) -> list[_Step]:
    arch = _ARCHES[machine]
    return [
        *_own_abi(machine),
        *[("jeq", number, "deny", None) for number in arch.refused],
        ("jeq", _CLONE3, "enosys", None),
        ("jeq", arch.clone, None, "allow"),
        ("ld", _ARG0_LOW, None, None),  # clone's flags (their low 32 bits)
        ("jset", _CLONE_THREAD, "allow", "deny"),  # a thread, or a new process
    ]


def _program(steps: list[_Step]) -> bytes:
    """`steps` as raw sock_filter instructions, followed by the returns they jump to. A ("label", 0,
    NAME, None) step emits nothing: it names the instruction after it, for a later jump (BPF jumps
    only forward)."""
    labels: dict[str, int] = {}
    instructions: list[_Step] = []
    for step in steps:
        if step[0] == "label":
            labels[str(step[2])] = len(instructions)
        else:
            instructions.append(step)
    labels.update({name: len(instructions) + i for i, name in enumerate(_RETURNS)})
    out = bytearray()
    for index, (op, k, when_true, when_false) in enumerate(instructions):
        jt = 0 if when_true is None else labels[when_true] - index - 1
        jf = 0 if when_false is None else labels[when_false] - index - 1
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise ValueError(f"a seccomp jump from step {index} does not fit in one byte, or goes back")
        out += struct.pack("HBBI", _OPCODES[op], jt, jf, k)
    for value in _RETURNS.values():
        out += struct.pack("HBBI", _RET_K, 0, 0, value)
    return bytes(out)


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


@lru_cache(maxsize=1)
def seccomp_available() -> bool:
    """Whether this kernel and architecture can take the filters (checked without installing one)."""
    if not sys.platform.startswith("linux") or platform.machine() not in _ARCHES:
        return False
    try:
        with open("/proc/self/status") as status:
            return any(line.startswith("Seccomp:") for line in status)
    except OSError:
        return False


def deny_what_no_task_needs() -> None:
    """Install the first filter on this process (and whatever it runs from now on). Raises OSError where
    it cannot: the caller was told it would hold, so untrusted code must not run without it."""
    _install(_what_no_task_needs)


def deny_new_processes() -> None:
    """Install the second filter, the same way."""
    _install(_new_processes)


def _install(steps_for: Callable[[str], list[_Step]]) -> None:
    machine = platform.machine()
    if machine not in _ARCHES:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {machine}")
    program = _program(steps_for(machine))
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs: " + os.strerror(ctypes.get_errno()))
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp: " + os.strerror(ctypes.get_errno()))
