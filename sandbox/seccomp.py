"""No new processes: a seccomp filter for the processes that run candidate code.

Threads stay allowed (XGBoost and BLAS need them); every other way to a new process is refused with an
error the candidate's code sees as an OSError: fork, vfork, clone without CLONE_THREAD, execve and
execveat. clone3 answers ENOSYS, because its flags sit in memory a filter cannot read, and glibc then
falls back to clone for its threads. The filter is a small classic BPF program installed through prctl
with ctypes (no dependency), so it holds on any Linux with seccomp on x86-64 or AArch64, whatever
Python then does: it is enforced by the kernel, on the process and everything it becomes.

It goes on the fork that loads candidate code (isolate.py), after the harness's own forks, so the harness
can still fork one process per call. Syscalls of another ABI (32-bit or x32 on x86-64) are refused alike:
a candidate cannot slip past the table by switching ABI.
"""

import ctypes
import errno
import os
import platform
import struct
import sys
from functools import lru_cache
from typing import NamedTuple

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_CLONE_THREAD = 0x00010000
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


# Syscall numbers differ between architectures; AArch64 has no fork or vfork (glibc uses clone).
_ARCHES = {
    "x86_64": _Arch(0xC000003E, refused=(57, 58, 59, 322), clone=56),
    "aarch64": _Arch(0xC00000B7, refused=(221, 281), clone=220),
}
_CLONE3 = 435  # the same on every architecture (new syscalls share one table)
_RETURNS = {
    "deny": _RET_ERRNO | errno.EPERM,
    "enosys": _RET_ERRNO | errno.ENOSYS,
    "allow": _RET_ALLOW,
    "kill": _RET_KILL_PROCESS,
}
_OPCODES = {"ld": _LD_ABS_W, "jeq": _JEQ_K, "jge": _JGE_K, "jset": _JSET_K}


def _program(machine: str) -> bytes:
    """The filter for `machine`, as raw sock_filter instructions. Each step is (op, k, where to go when
    the test holds, where otherwise): a return named in _RETURNS, or None for the next step."""
    arch = _ARCHES[machine]
    steps: list[tuple[str, int, str | None, str | None]] = [
        ("ld", _ARCH, None, None),
        ("jeq", arch.audit, None, "kill"),  # another ABI (32-bit syscalls on x86-64)
        ("ld", _NR, None, None),
    ]
    if machine == "x86_64":
        steps.append(("jge", _X32_BIT, "kill", None))  # the x32 ABI: same arch, other numbers
    steps += [("jeq", number, "deny", None) for number in arch.refused]
    steps += [
        ("jeq", _CLONE3, "enosys", None),
        ("jeq", arch.clone, None, "allow"),
        ("ld", _ARG0_LOW, None, None),  # clone's flags (their low 32 bits)
        ("jset", _CLONE_THREAD, "allow", "deny"),  # a thread, or a new process
    ]
    labels = {name: len(steps) + i for i, name in enumerate(_RETURNS)}
    out = bytearray()
    for index, (op, k, when_true, when_false) in enumerate(steps):
        jt = 0 if when_true is None else labels[when_true] - index - 1
        jf = 0 if when_false is None else labels[when_false] - index - 1
        out += struct.pack("HBBI", _OPCODES[op], jt, jf, k)
    for value in _RETURNS.values():
        out += struct.pack("HBBI", _RET_K, 0, 0, value)
    return bytes(out)


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


@lru_cache(maxsize=1)
def seccomp_available() -> bool:
    """Whether this kernel and architecture can take the filter (checked without installing it)."""
    if not sys.platform.startswith("linux") or platform.machine() not in _ARCHES:
        return False
    try:
        with open("/proc/self/status") as status:
            return any(line.startswith("Seccomp:") for line in status)
    except OSError:
        return False


def deny_new_processes() -> None:
    """Install the filter on this process (and whatever it runs from now on). Raises OSError where it
    cannot: the caller was told it would hold, so a candidate must not run without it."""
    machine = platform.machine()
    if machine not in _ARCHES:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {machine}")
    program = _program(machine)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs: " + os.strerror(ctypes.get_errno()))
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp: " + os.strerror(ctypes.get_errno()))
