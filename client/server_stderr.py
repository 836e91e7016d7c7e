"""The spawned stdio server's stderr, relayed to ours, so that a server that cannot start says why in
the one line the command prints.

Until the handshake is done, what the server writes is held: a server that refuses its settings (a
bad autoresearch.toml, a bad flag) writes one line and exits, and that line becomes the command's
error instead of a bare "Connection closed" after it. Once the session is up, every line is passed on
as it comes (the server's warnings are the user's to see).
"""

import os
import sys
import threading
from typing import IO, TextIO

SERVER_PREFIX = "autoresearch-mcp-server: "


class StderrRelay:
    """A pipe the server writes its stderr into, and a thread that reads it."""

    def __init__(self, out: TextIO | None = None) -> None:
        read_fd, write_fd = os.pipe()
        self.file: IO[str] = os.fdopen(write_fd, "w")  # what the spawned server gets as its stderr
        self._out = out
        self._held: list[str] = []
        self._live = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._pump, args=(read_fd,), daemon=True)
        self._thread.start()

    def _write(self, text: str) -> None:
        out = self._out or sys.stderr
        out.write(text)
        out.flush()

    def _pump(self, read_fd: int) -> None:
        with os.fdopen(read_fd, "r", encoding="utf-8", errors="replace") as stream:
            for line in stream:
                with self._lock:
                    if self._live:
                        self._write(line)
                    else:
                        self._held.append(line)

    def go_live(self) -> None:
        """The session is up: what was held, then everything as it comes."""
        with self._lock:
            self._live = True
            if self._held:
                self._write("".join(self._held))
            self._held.clear()

    def close(self) -> None:
        """Our end of the pipe closed; what the server wrote before it exited is read to the end."""
        self.file.close()
        self._thread.join(timeout=5)

    def failure(self) -> str | None:
        """What a server that never answered said last, without its program name: its error line."""
        with self._lock:
            lines = [line.strip() for line in self._held if line.strip()]
        if not lines:
            return None
        return lines[-1].removeprefix(SERVER_PREFIX)
