"""Run candidate code in a forked process that holds nothing the harness trusts.

The sandboxed harness is the trusted side: it holds the channel the report goes back through, its own
clock and its judgement. To run candidate code it forks. Before loading anything, the fork joins the
evaluation's candidate cgroup and gets its own IPC namespace, closes every descriptor but a fresh socket to
the harness, enters a Landlock domain nested in the harness's (so it cannot signal or trace the harness,
and writes only where it is told), becomes the sandbox's unprivileged user with no capability, and loses
what no task needs and, unless the task declared them, the right to start processes (candidate.py,
seccomp.py). Before each fork and after it the candidate cgroup is
emptied, so nothing a candidate started outlives its call into the next measurement. What it sends back is
a message on that socket, which the harness reads with a size cap; each message carries two stamps the
fork cannot forge: the kernel's record of when its last packet was sent (SO_TIMESTAMPNS), and the
harness's own clock on arrival. The report is written by the harness alone, from what it measured and
checked. An in-process candidate can forge anything in its own process; here there is nothing left in it
worth forging. One module on purpose: a fork's whole life, from its confinement to its report, in the
order it happens.
"""

import contextlib
import json
import linecache
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from autoresearch_mcp.sandbox import candidate
from autoresearch_mcp.sandbox.child import confine_fork

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_HEADER = struct.Struct(">I")
_PACKET = 32 * 1024
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
_STAMP = struct.Struct("qq")  # struct timespec
clock = time.perf_counter  # CLOCK_MONOTONIC: one clock for every process on the machine


class Channel:
    """The fork's end of the socket: length-prefixed JSON messages, in packets of at most 32 KB."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def send(self, message: dict[str, Any]) -> None:
        framed = memoryview(_HEADER.pack(len(data := json.dumps(message).encode())) + data)
        for start in range(0, len(framed), _PACKET):
            self._sock.sendall(framed[start : start + _PACKET])

    def ready(self) -> None:
        """The start stamp of a measured window: only trusted code, before any candidate code exists,
        may send it (both clocks: see window(); and the fork's CPU time so far, which is not the
        candidate's: see Isolated.cpu_s)."""
        self.send({"ready": clock(), "ready_wall": time.time(), "ready_cpu": time.process_time()})


@dataclass
class Received:
    arrived: float  # the harness's clock when the last byte of the message was read
    message: Any
    sent: float | None = None  # the kernel's CLOCK_REALTIME stamp of the message's last packet


def window(start: Received, end: Received) -> float:
    """Seconds from a `ready` message's stamps to when `end` was sent: the kernel's send stamp where
    there is one (the harness waking up late does not count), bounded by the harness's own arrival
    clock (so a clock step can only ever make it the arrival-based window)."""
    ready = start.message
    by_arrival = end.arrived - ready["ready"]
    if end.sent is not None and isinstance(ready.get("ready_wall"), float):
        by_kernel = end.sent - ready["ready_wall"]
        if 0 <= by_kernel <= by_arrival:
            return by_kernel
    return by_arrival


@dataclass
class Isolated:
    """How a fork ended: the messages it sent, its wait status, and what was wrong with them."""

    forked_at: float
    messages: list[Received] = field(default_factory=list)
    status: int | None = None
    problem: str | None = None
    own_cpu_s: float | None = None  # the fork's own CPU time (rusage), what it started not included
    group_cpu_start: float | None = None  # the candidate cgroup's, emptied, just before the fork
    group_cpu_at: list[float] = field(default_factory=list)  # the candidate cgroup's, at each arrival

    @property
    def cpu_s(self) -> float | None:
        """CPU seconds from the ready stamp to the last message: the candidate cgroup's (the fork and
        all it started) as the harness read it when that message arrived, less the cgroup's before the
        fork and the fork's own until its ready stamp (trusted set-up: making the input). Without a
        cgroup, the fork's own from its ready stamp to its end, exit included. None without a ready
        stamp."""
        ready = self.messages[0].message if self.messages else None
        before = ready.get("ready_cpu") if isinstance(ready, dict) else None
        if not isinstance(before, float):
            return None
        if self.group_cpu_start is not None and len(self.group_cpu_at) >= 2:
            return max(self.group_cpu_at[-1] - self.group_cpu_start - before, 0.0)
        if self.group_cpu_start is None and self.own_cpu_s is not None:
            return max(self.own_cpu_s - before, 0.0)
        return None

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
    harness_end, fork_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if _SO_TIMESTAMPNS is not None:
        with contextlib.suppress(OSError):
            harness_end.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    sys.stdout.flush()
    sys.stderr.flush()
    candidate.before_fork()  # what an earlier candidate left running dies here
    cpu_start = candidate.cpu_now()
    forked_at = clock()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (runs in the fork; its outcome is what the tests check)
        harness_end.close()
        _run_fork(work, fork_end, writable)
    fork_end.close()
    result = Isolated(forked_at=forked_at, group_cpu_start=cpu_start)
    try:
        _collect(pid, harness_end, result, max_messages, max_bytes)
    finally:
        harness_end.close()
        candidate.after_fork()  # and so does what this one left
    return result


def _collect(pid: int, sock: socket.socket, result: Isolated, max_messages: int, max_bytes: int) -> None:
    pidfd = _pidfd(pid)
    poller = select.poll()
    fd = sock.fileno()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    buffer = bytearray()
    try:
        while len(result.messages) < max_messages and result.problem is None:
            events = dict(poller.poll(None if pidfd is not None else 50))
            if fd in events and not _receive(sock, buffer, result, max_bytes):
                break  # every sender is gone
            if (pidfd is not None and pidfd in events) or (pidfd is None and _exited(pid, result)):
                sock.setblocking(False)  # what it sent before it exited is still queued
                with contextlib.suppress(BlockingIOError):
                    while result.problem is None and _receive(sock, buffer, result, max_bytes):
                        pass
                break
        if result.problem is None and result.status is None:
            _await_exit(pid, pidfd, result, grace_s=2.0)  # it has said all it may say: let it end
    finally:
        if pidfd is not None:
            os.close(pidfd)
    if result.status is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _, status, usage = os.wait4(pid, 0)
        _ended(result, status, usage)


def _await_exit(pid: int, pidfd: int | None, result: Isolated, grace_s: float) -> None:
    if pidfd is not None:
        waiter = select.poll()
        waiter.register(pidfd, select.POLLIN)
        if waiter.poll(grace_s * 1000):
            _exited(pid, result)
        return
    deadline = clock() + grace_s
    while not _exited(pid, result) and clock() < deadline:
        time.sleep(0.001)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # Linux < 5.3, or not Linux: poll with a timeout instead
        return None


def _exited(pid: int, result: Isolated) -> bool:
    done, status, usage = os.wait4(pid, os.WNOHANG)
    if done:
        _ended(result, status, usage)
    return bool(done)


def _ended(result: Isolated, status: int, usage: resource.struct_rusage) -> None:
    result.status = status
    result.own_cpu_s = usage.ru_utime + usage.ru_stime


def _receive(sock: socket.socket, buffer: bytearray, result: Isolated, max_bytes: int) -> bool:
    """Read one packet into `buffer` and parse what it completes; False at end of stream."""
    packet, ancillary, flags, _ = sock.recvmsg(_PACKET, socket.CMSG_SPACE(_STAMP.size))
    now = clock()
    if not packet:
        return False
    if flags & socket.MSG_TRUNC:
        result.problem = f"sent a packet over {_PACKET} bytes"
        return True
    sent = None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= _STAMP.size:
            seconds, nanoseconds = _STAMP.unpack_from(data)
            sent = seconds + nanoseconds / 1e9
    buffer += packet
    _parse(buffer, result, now, sent, max_bytes)
    return True


def _parse(buffer: bytearray, result: Isolated, now: float, sent: float | None, max_bytes: int) -> None:
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
            result.messages.append(Received(now, json.loads(data), sent))
        except (ValueError, RecursionError) as exc:
            result.problem = f"sent a message that is not readable JSON ({type(exc).__name__})"
        else:
            if (cpu := candidate.cpu_now()) is not None:
                result.group_cpu_at.append(cpu)


def _run_fork(work: Callable[[Channel], None], sock: socket.socket, writable: Path | None) -> NoReturn:
    code = 1
    try:
        code = _confined(work, sock, writable)
    finally:
        # Whatever happened above, even an exception out of the report of one (a candidate's exception
        # whose text raises), the fork ends here: it never returns into the harness's code.
        os._exit(code)


def _confined(work: Callable[[Channel], None], sock: socket.socket, writable: Path | None) -> int:
    """The fork's life, from its confinement to the end of `work`: its exit code."""
    try:
        candidate.enter()  # the candidate cgroup and an IPC namespace: before anything else runs
        fd = sock.fileno()
        os.closerange(3, fd)
        os.closerange(fd + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        confine_fork(writable)
        candidate.lock()  # the sandbox's user, no capabilities, the seccomp filters
        work(Channel(sock))
        return 0
    except SystemExit as exc:  # the candidate's sys.exit: end with its code, as a script would
        if isinstance(exc.code, int):
            return exc.code
        if exc.code is not None:
            print(exc.code, file=sys.stderr)
        return 1 if exc.code is not None else 0
    except BaseException:  # the fork's top level: anything else is a crash with its traceback
        print(candidate_traceback(), file=sys.stderr)
        return 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a candidate may have replaced or closed them
                stream.flush()


def show_source(filename: str, source: str) -> None:
    """Let tracebacks quote the candidate's own lines: its file exists only as text, so without this a
    traceback says `line 70` and not what line 70 is. Called in the fork before the candidate loads."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def candidate_traceback(limit: int = 1500) -> str:
    """The current exception with only the candidate's own frames (train.py): no harness paths."""
    kind, exc, tb = sys.exc_info()
    frames = [f for f in traceback.extract_tb(tb) if not os.path.isabs(f.filename)]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)] if frames else []
    lines += traceback.format_exception_only(kind, exc)
    return "".join(lines)[-limit:]
