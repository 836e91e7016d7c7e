"""Threads that watch a sandboxed child from outside: its exit (with CPU time), its output, its result."""

import os
import select
import threading
import time
from collections import deque
from typing import Any


class Waiter(threading.Thread):
    """Reaps the child with wait4, which also gives the CPU time of it and its descendants."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.returncode: int | None = None
        self.cpu_s = 0.0

    def run(self) -> None:
        _, status, usage = os.wait4(self.pid, 0)
        self.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_s = usage.ru_utime + usage.ru_stime


class TailReader(threading.Thread):
    """Drains a pipe so the child never blocks on it, keeping only the last `cap` bytes.

    It polls instead of blocking in read, so that it can stop (and the pipe can be closed) even while a
    stray descendant still holds the write end open.
    """

    def __init__(self, stream: Any, cap: int) -> None:
        super().__init__(daemon=True)
        self.fd, self.cap = stream if isinstance(stream, int) else stream.fileno(), cap
        self.chunks: deque[bytes] = deque()
        self.kept = 0
        self.total = 0
        self.deadline: float | None = None  # set once the child has ended: drain until then, then stop

    def finish(self, grace_s: float) -> None:
        self.deadline = time.monotonic() + grace_s
        self.join(timeout=grace_s + 1)

    def run(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN | select.POLLHUP)
        while self.deadline is None or time.monotonic() < self.deadline:
            if not poller.poll(50):
                if self.deadline is not None:
                    return  # the child has ended and nothing more is coming now
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return
            self.total += len(chunk)
            self.chunks.append(chunk)
            self.kept += len(chunk)
            while self.kept - len(self.chunks[0]) >= self.cap:
                self.kept -= len(self.chunks.popleft())

    def tail(self) -> str:
        data = b"".join(self.chunks)[-self.cap :]
        return data.decode("utf-8", errors="replace")


class HeadReader(TailReader):
    """Like _TailReader, but keeps the first `cap` bytes (the result) and notes whether there was more."""

    def run(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN | select.POLLHUP)
        while self.deadline is None or time.monotonic() < self.deadline:
            if not poller.poll(50):
                if self.deadline is not None:
                    return
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return
            self.total += len(chunk)
            if self.kept < self.cap:  # beyond the cap, drain and discard, so the writer never blocks
                self.chunks.append(chunk[: self.cap - self.kept])
                self.kept += len(self.chunks[-1])

    def data(self) -> bytes:
        return b"".join(self.chunks)

    @property
    def overflowed(self) -> bool:
        return self.total > self.cap
