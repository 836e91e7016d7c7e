"""Values the harness takes one at a time, so that no fork it makes holds a later one.

A fork is a copy of the harness's memory. Were the inputs of every timed call in that memory (the
benchmark's seeds, in the payload), a candidate that escaped Python in an early, untimed call could read
them there and work out the answers of the calls to come; it would then need only a channel to its later
forks (a keyring, once) to answer them in no time. So such values never enter the payload: the runner
writes them into a pipe before the sandboxed child starts (`pipe_with`), and the harness reads the next one
(`take`) only when it is about to use it. Until then they sit in the kernel's pipe buffer, which no fork
can reach: each closes every descriptor but its own socket before it runs anything (isolate.py), and
/proc/PID/fd of the harness is closed to it (another user, a Landlock domain nested below the harness's).
Each value is framed with its length, and read to the byte: a buffered read would pull the next ones in.
"""

import json
import os
import struct
from collections.abc import Iterable
from typing import Any

MAX_BYTES = 60_000  # all of them fit in a pipe's buffer (64 KiB), so the runner never blocks writing
_HEADER = struct.Struct(">I")
_feed: list[int] = []  # the harness's read end, once open


def pipe_with(values: Iterable[Any]) -> int:
    """A pipe holding `values` (JSON), its write end closed: the read end, for the harness."""
    data = b"".join(_HEADER.pack(len(item)) + item for item in (json.dumps(v).encode() for v in values))
    if len(data) > MAX_BYTES:
        raise ValueError(f"sealed values take {len(data)} bytes; at most {MAX_BYTES} fit in a pipe")
    read_end, write_end = os.pipe()
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view) :]
    finally:
        os.close(write_end)
    return read_end


def open_feed(fd: int) -> None:
    """In the harness: read sealed values from `fd` from now on (no child process inherits it)."""
    os.set_inheritable(fd, False)
    if _feed and _feed[0] != fd:  # the values an earlier feed did not give are not taken
        os.close(_feed[0])
    _feed[:] = [fd]


def take() -> Any:
    """The next sealed value. LookupError when there is no feed or it has no more."""
    if not _feed:
        raise LookupError("no sealed values were given to this harness")
    (size,) = _HEADER.unpack(_read_exactly(_HEADER.size))
    return json.loads(_read_exactly(size))


def _read_exactly(size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = os.read(_feed[0], size - len(data))
        if not chunk:
            raise LookupError("the sealed values ran out")
        data += chunk
    return data
