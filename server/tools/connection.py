"""Which run a call means when it names none: the run its connection started or last used, else the
only running run (RunService.resolve refuses when several are running).

A connection is known only by what the transport itself established: its initialize parameters, an
object the server holds for exactly as long as the connection lives (a stdio or in-memory connection,
or an HTTP session of the handshake protocol, whose session id the SDK issues and checks against the
credential that opened it). Never by a header: on the 2026-07-28 protocol the SDK does not check
`mcp-session-id`, so a client could send another's and read or redirect that client's run. A call on
that protocol has no session and never inherits one. One run is remembered per live connection and
forgotten with it, so no number of calls can push another connection's out. Where the credential
cannot tell clients apart (one bearer token shared by a team), a handshake session id is all that
stands between one client and another's session, so none is remembered (`remember=False`): a call's
run is its run_id, else the only running run.
"""

import threading
import weakref
from typing import Any

from mcp.server.mcpserver import Context

from autoresearch_mcp.contract.models import Run
from autoresearch_mcp.server.runs import RunService


class RunResolver:
    def __init__(self, runs: RunService, *, remember: bool = True) -> None:
        self.runs = runs
        self.remembers = remember
        # id(initialize params) -> (a weak reference to them, the run); the entry goes when they do
        self._runs: dict[int, tuple[weakref.ref[object], str]] = {}
        self._lock = threading.Lock()

    def _remembered(self, ctx: Context) -> str | None:
        return self.remembered_on(ctx.session)

    def remembered_on(self, session: Any) -> str | None:
        """The run remembered for the connection of `session` (a server session), if any."""
        params = session.client_params
        if params is None:
            return None
        with self._lock:
            entry = self._runs.get(id(params))
        return entry[1] if entry is not None and entry[0]() is params else None

    def remember(self, ctx: Context, run_id: str) -> None:
        params = ctx.session.client_params
        if params is None or not self.remembers:
            return
        key = id(params)
        with self._lock:
            entry = self._runs.get(key)
            if entry is not None and entry[0]() is params:
                self._runs[key] = (entry[0], run_id)
                return
            ref = weakref.ref(params, lambda dead: self._forget(key, dead))
            self._runs[key] = (ref, run_id)

    def _forget(self, key: int, dead: "weakref.ref[object]") -> None:
        with self._lock:
            entry = self._runs.get(key)
            if entry is not None and entry[0] is dead:
                del self._runs[key]

    def __len__(self) -> int:
        """Connections with a remembered run."""
        return len(self._runs)

    def __call__(self, ctx: Context, run_id: str | None) -> Run:
        """The run, read once here and handed to the tool's logic."""
        run = self.runs.resolve(run_id or self._remembered(ctx))
        self.remember(ctx, run.id)
        return run
