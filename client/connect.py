"""Connect the agent to the server: spawn it over stdio (default) or reach one over streamable HTTP; and
the typed client of its tools and resources."""

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel, ValidationError

from autoresearch_mcp.client.server_stderr import StderrRelay
from autoresearch_mcp.contract.arguments import Arguments, GetExperimentHistoryArgs, ProfileTrainPyArgs
from autoresearch_mcp.contract.env import ENV_LOG_LEVEL, ENV_PREFIX, data_setting
from autoresearch_mcp.contract.errors import REFUSAL_META, Refusal, ResearchError
from autoresearch_mcp.contract.models import (
    Experiment,
    Run,
    RunList,
    ScriptedPlan,
    TaskInfo,
)
from autoresearch_mcp.contract.profile import ProfileResult
from autoresearch_mcp.contract.tools import TOOL_OF, ToolName, Uri

M = TypeVar("M", bound=BaseModel)
A = TypeVar("A", bound=Arguments[Any])
# A server in this process on (db, the flags a spawned one would get, its log level), as an MCP server
# object the SDK's in-memory client talks to: the CLI passes server/in_process.py's (the client imports
# nothing of the server).
ServeHere = Callable[[Path, list[str], str], AbstractAsyncContextManager[Any]]

# The SDK's stdio client passes only an allow-list of variables; the server also needs these.
FORWARDED_EXACT = ("SCIKIT_LEARN_DATA", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONPATH")


class ToolOutcome(BaseModel):
    """One tool call's answer: the text the model reads; the structured result, or the refusal."""

    ok: bool
    text: str
    data: dict[str, Any] | None
    refusal: Refusal | None = None

    def as_model(self, model: type[M]) -> M:
        """The structured result as its contract model (raises when the call was refused)."""
        if not self.ok or self.data is None:
            raise ResearchError(self.text or "the call returned no result", kind="unavailable")
        return model.model_validate(self.data)


def server_env() -> dict[str, str]:
    """Every AUTORESEARCH_* variable, plus the few others the server needs."""
    return {
        key: value
        for key, value in os.environ.items()
        if key.startswith(ENV_PREFIX) or key in FORWARDED_EXACT
    }


def stdio_params(
    db: Path | None, data: str | None, extra_args: list[str] | None = None, log_level: str = "WARNING"
) -> StdioServerParameters:
    # -P: not the current directory first on sys.path. Run from a clone's root after `pip install .`,
    # the clone's own autoresearch_mcp/ (without server/, which the install maps in) hid the package.
    args = ["-P", "-m", "autoresearch_mcp.server"]
    if db is not None:
        args += ["--db", str(Path(db).expanduser().resolve())]
    if data is not None:
        args += ["--data", data_setting(data)]
    # The spawned server's stderr is the user's terminal: warnings only (errors only for a command that
    # just reads, which need not hear of the server's start-up chores), unless they set the level.
    env = {ENV_LOG_LEVEL: log_level, **server_env()}
    return StdioServerParameters(command=sys.executable, args=args + (extra_args or []), env=env)


def tool_arguments(model: type[A], values: dict[str, Any]) -> A:
    """A tool's arguments from values a caller gathered; one out of range is refused in one line, as
    the server would refuse it, before anything is sent."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ResearchError(f"{TOOL_OF[model].name} refused: {problems}") from None


class ResearchClient:
    """The server's tools and resources, typed by the contract's table (contract/tools.py), over any
    MCP transport. A call is made by its arguments model, which names its tool and its result."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def call(self, args: Arguments[Any]) -> ToolOutcome:
        """The tool of `args`, with what was set in them; a refusal is an outcome, not an error."""
        tool = TOOL_OF[type(args)]
        return await self.call_tool(tool.name, args.model_dump(mode="json", exclude_unset=True))

    async def result(self, args: Arguments[M]) -> M:
        """The tool of `args`, which must succeed: its result as the contract's model, or the refusal
        raised as a ResearchError (its kind and detail kept)."""
        tool = TOOL_OF[type(args)]
        outcome = await self.call(args)
        if not outcome.ok:
            refusal = outcome.refusal or Refusal(kind="bad_argument", message=outcome.text)
            one_line = " ".join(outcome.text.split())
            raise ResearchError(f"{tool.name} refused: {one_line}", kind=refusal.kind, detail=refusal.detail)
        return outcome.as_model(tool.result)  # type: ignore[return-value]

    async def call_tool(self, name: ToolName | str, arguments: dict[str, Any]) -> ToolOutcome:
        """A tool by name with arguments as a model sent them (the agent passes its model's calls on
        unchanged: the server, not the client, judges them)."""
        result = await self.client.call_tool(str(name), arguments)
        text = "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")
        if not result.is_error:
            return ToolOutcome(ok=True, text=text, data=result.structured_content)
        structured = (result.meta or {}).get(REFUSAL_META)
        if structured is not None:  # a refusal of the run logic: the message is the text
            refusal = Refusal.model_validate(structured)
        else:  # the SDK refused the arguments before the tool ran
            refusal = Refusal(kind="bad_argument", message=text)
        return ToolOutcome(ok=False, text=refusal.message, data=None, refusal=refusal)

    async def _read(self, uri: str) -> str:
        contents = (await self.client.read_resource(uri)).contents
        return contents[0].text  # type: ignore[union-attr]

    async def turn(
        self,
        run_id: str,
        profile: str = "neutral",
        reply: str = "tool",
        shown: list[str] | None = None,
        skip: frozenset[str] = frozenset(),
        last: int | None = None,
    ) -> str:
        """What the model reads this turn, as the server writes it (server/turn.py): the summary (with
        the `last` experiments, the server's few where None), the code in focus on a code task (naming,
        not quoting, the functions in `shown`; passing over those in `skip`), and the request for
        `reply`."""
        uri = Uri.TURN.of(
            run_id=run_id, profile=profile, reply=reply, shown=shown or [], skip=skip, last=last
        )
        return await self._read(uri)

    async def runs(self) -> list[Run]:
        """Every run the server keeps, newest first."""
        return RunList.model_validate_json(await self._read(Uri.RUNS)).runs

    async def run(self, run_id: str) -> Run:
        """One run (the agent reads it every turn: one row, however many runs the server keeps)."""
        try:
            text = await self._read(Uri.RUN.of(run_id=run_id))
        except MCPError:  # the resource answers an unknown run with "not found"
            raise ResearchError(
                f"no run {run_id} on this server (`runs` lists them)", kind="unknown_run"
            ) from None
        return Run.model_validate_json(text)

    async def tasks(self) -> list[TaskInfo]:
        listed = json.loads(await self._read(Uri.TASKS))["tasks"]
        return [await self._with_agent(task) for task in listed]

    async def task(self, name: str) -> TaskInfo:
        return await self._with_agent(json.loads(await self._read(Uri.TASK.of(name=name))))

    async def _with_agent(self, task: dict[str, Any]) -> TaskInfo:
        """A task as the server describes it to anyone, with the profile this agent works by."""
        agent = json.loads(await self._read(Uri.TASK_AGENT.of(name=task["name"])))
        return TaskInfo.model_validate({**task, "agent": agent})

    async def scripted_plan(self, name: str) -> ScriptedPlan:
        """What the scripted test double needs to play the task (only the double reads it)."""
        return ScriptedPlan.model_validate_json(await self._read(Uri.SCRIPTED_PLAN.of(name=name)))

    async def train_py(self, run_id: str, version: int | None = None) -> str:
        """The current train.py, or one version of it."""
        if version is None:
            return await self._read(Uri.TRAIN_PY.of(run_id=run_id))
        return await self._read(Uri.VERSION.of(run_id=run_id, version=version))

    async def profile(self, run_id: str) -> ProfileResult | None:
        """The current train.py's version and profile (profile_train_py); None where the server has
        no such tool or refuses it."""
        outcome = await self.call(ProfileTrainPyArgs(run_id=run_id))
        return outcome.as_model(ProfileResult) if outcome.ok else None

    async def history(self, run_id: str) -> list[Experiment]:
        """Every experiment of the run, in iteration order (read page by page)."""
        experiments: list[Experiment] = []
        offset: int | None = 0
        while offset is not None:
            page = await self.result(GetExperimentHistoryArgs(run_id=run_id, offset=offset))
            experiments += page.experiments
            offset = page.next_offset
        return experiments

    async def tools(self) -> list[Any]:
        return (await self.client.list_tools()).tools


def leaf(exc: BaseException) -> BaseException:
    """The first exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


@asynccontextmanager
async def connect(
    *,
    server_url: str | None = None,
    token: str | None = None,
    db: Path | None = None,
    data: str | None = None,
    server_args: list[str] | None = None,
    log_level: str = "WARNING",
    here: ServeHere | None = None,
) -> AsyncIterator[ResearchClient]:
    """An MCP client session: HTTP when server_url is given, else a server in this process on `db`
    when `here` serves one, else a spawned stdio server (logging to the user's terminal from
    `log_level` up; a server that cannot start says why in the one error)."""
    relay = None if server_url or here else StderrRelay()
    try:
        if server_url:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            timeout = httpx2.Timeout(30, read=3600)
            async with (
                httpx2.AsyncClient(headers=headers, timeout=timeout, follow_redirects=True) as http,
                Client(streamable_http_client(server_url, http_client=http)) as client,
            ):
                yield ResearchClient(client)
        elif here is not None:
            assert db is not None, "a server in this process serves a database: pass db"
            async with here(db, server_args or [], log_level) as server, Client(server) as client:
                yield ResearchClient(client)
        else:
            assert relay is not None
            params = stdio_params(db, data, server_args, log_level)
            transport = stdio_client(params, errlog=relay.file)
            async with Client(transport, read_timeout_seconds=3600) as client:
                relay.go_live()
                yield ResearchClient(client)
    except* ResearchError as group:  # raised by the caller inside the session: pass it on unwrapped
        raise leaf(group) from None
    except* BrokenPipeError as group:  # our own stdout closed (`show | head`): not the server's doing
        raise leaf(group) from None
    except* MCPError as group:
        if relay is not None and (said := _server_said(relay)):
            raise ResearchError(said) from None
        first = leaf(group)
        hint = (
            " (an HTTP server that wants a token: check --token / AUTORESEARCH_TOKEN)" if server_url else ""
        )
        raise ResearchError(f"the MCP server failed: {first}{hint}") from None
    except* (OSError, httpx2.HTTPError) as group:
        if relay is not None and (said := _server_said(relay)):
            raise ResearchError(said) from None
        first = leaf(group)
        where = server_url or ("the server in this process" if here else "the spawned stdio server")
        raise ResearchError(f"cannot reach {where}: {first}") from None
    finally:
        if relay is not None:
            relay.close()


def _server_said(relay: StderrRelay) -> str | None:
    """The error line of a spawned server that ended before its session was up."""
    relay.close()
    return relay.failure()
