"""Run candidate code in a forked process that holds nothing the harness trusts.

The sandboxed harness is the trusted side: it holds the channel the report goes back through, its own
clock and its judgement. To run candidate code it forks. Before loading anything, the fork closes every
descriptor but a fresh pipe to the harness, enters a Landlock domain nested in the harness's (so it cannot
signal or trace the harness, and writes only where it is told), gets its own IPC namespace and drops every
capability. What it sends back is a message on that pipe, which the harness reads with a size cap and
stamps on arrival with its own clock; the report is written by the harness alone, from what it measured
and checked. An in-process candidate can forge anything in its own process; here there is nothing left
in it worth forging.
"""

import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import struct
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from autoresearch_mcp.sandbox.child import confine_fork

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_HEADER = struct.Struct(">I")
_CLONE_NEWIPC = 0x08000000
clock = time.perf_counter  # CLOCK_MONOTONIC: one clock for every process on the machine


class Channel:
    """The fork's end of the pipe: length-prefixed JSON messages."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode()
        view = memoryview(_HEADER.pack(len(data)) + data)
        while view:
            view = view[os.write(self._fd, view) :]


@dataclass
class Received:
    arrived: float  # the harness's clock when the last byte of the message was read
    message: Any


@dataclass
class Isolated:
    """How a fork ended: the messages it sent, its wait status, and what was wrong with them."""

    forked_at: float
    messages: list[Received] = field(default_factory=list)
    status: int | None = None
    problem: str | None = None

    def mirror(self, what: str) -> NoReturn:
        """End the harness the way the fork ended (so the runner reports the same signal or exit code),
        after saying why there is no result."""
        print(f"{what}: {self.describe()}", file=sys.stderr, flush=True)
        status = self.status or 0
        if self.problem is None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP take no handler
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
        os._exit(code or 1)

    def describe(self) -> str:
        if self.problem:
            return self.problem
        status = self.status or 0
        if os.WIFSIGNALED(status):
            return f"killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
        return f"exited with code {os.WEXITSTATUS(status)} without a result"


def run_isolated(
    work: Callable[[Channel], None],
    *,
    writable: Path | None,
    max_messages: int,
    max_bytes: int = MAX_MESSAGE_BYTES,
) -> Isolated:
    """Fork, confine the fork, run `work(channel)` there, and collect what it sends, stamped on arrival.

    Reading stops at `max_messages` messages, when the fork has exited (a stray process it left holding
    the pipe cannot stall the harness), or at the first protocol error, such as a message over
    `max_bytes` (then the fork is killed)."""
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    forked_at = clock()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (runs in the fork; its outcome is what the tests check)
        os.close(read_fd)
        _run_fork(work, write_fd, writable)
    os.close(write_fd)
    result = Isolated(forked_at=forked_at)
    try:
        _collect(pid, read_fd, result, max_messages, max_bytes)
    finally:
        os.close(read_fd)
    return result


def _collect(pid: int, fd: int, result: Isolated, max_messages: int, max_bytes: int) -> None:
    pidfd = _pidfd(pid)
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    buffer = bytearray()
    try:
        while len(result.messages) < max_messages and result.problem is None:
            events = dict(poller.poll(None if pidfd is not None else 50))
            if fd in events:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break  # every writer is gone
                buffer += chunk
                _parse(buffer, result, clock(), max_bytes)
            if (pidfd is not None and pidfd in events) or (pidfd is None and _exited(pid, result)):
                _drain(fd, buffer, result, max_bytes)  # what it wrote before it exited is still in the pipe
                break
    finally:
        if pidfd is not None:
            os.close(pidfd)
    if result.problem is None:
        _await_exit(pid, result, grace_s=2.0)  # it has said all it may say: let it end by itself
    if result.status is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _, result.status = os.waitpid(pid, 0)


def _await_exit(pid: int, result: Isolated, grace_s: float) -> None:
    deadline = clock() + grace_s
    while result.status is None and not _exited(pid, result) and clock() < deadline:
        time.sleep(0.001)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # Linux < 5.3, or not Linux: poll with a timeout instead
        return None


def _exited(pid: int, result: Isolated) -> bool:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        result.status = status
    return bool(done)


def _drain(fd: int, buffer: bytearray, result: Isolated, max_bytes: int) -> None:
    os.set_blocking(fd, False)
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 1 << 20):
            buffer += chunk
            if len(buffer) > max_bytes + _HEADER.size:
                break
    _parse(buffer, result, clock(), max_bytes)


def _parse(buffer: bytearray, result: Isolated, now: float, max_bytes: int) -> None:
    while len(buffer) >= _HEADER.size and result.problem is None:
        (size,) = _HEADER.unpack_from(buffer)
        if size > max_bytes:
            result.problem = f"sent a message of {size} bytes (at most {max_bytes} are read)"
            return
        if len(buffer) < _HEADER.size + size:
            return
        data = bytes(buffer[_HEADER.size : _HEADER.size + size])
        del buffer[: _HEADER.size + size]
        try:
            result.messages.append(Received(now, json.loads(data)))
        except (ValueError, RecursionError) as exc:
            result.problem = f"sent a message that is not readable JSON ({type(exc).__name__})"


def _run_fork(work: Callable[[Channel], None], fd: int, writable: Path | None) -> NoReturn:
    code = 0
    try:
        os.closerange(3, fd)
        os.closerange(fd + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        confine_fork(writable)
        _drop_privileges()
        work(Channel(fd))
    except SystemExit as exc:  # the candidate's sys.exit: end with its code, as a script would
        if isinstance(exc.code, int):
            code = exc.code
        elif exc.code is not None:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # the fork's top level: anything else is a crash with its traceback
        print(candidate_traceback(), file=sys.stderr)
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a candidate may have replaced or closed them
                stream.flush()
    os._exit(code)


def _drop_privileges() -> None:
    """Own IPC namespace (no System V shared memory with a later fork), no capabilities (the sandbox
    may run as root), no way to regain them."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare(_CLONE_NEWIPC)  # needs CAP_SYS_ADMIN in its user namespace; harmless if refused
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty
    if hasattr(libc, "capset"):
        libc.capset(header, data)


def candidate_traceback(limit: int = 1500) -> str:
    """The current exception with only the candidate's own frames (train.py): no harness paths."""
    kind, exc, tb = sys.exc_info()
    frames = [f for f in traceback.extract_tb(tb) if not os.path.isabs(f.filename)]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)] if frames else []
    lines += traceback.format_exception_only(kind, exc)
    return "".join(lines)[-limit:]
