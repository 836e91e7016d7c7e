"""Connect the agent to the server: spawn it over stdio (default) or reach one over streamable HTTP."""

import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel

from autoresearch_mcp.contract.env import ENV_LOG_LEVEL, ENV_PREFIX, data_setting
from autoresearch_mcp.contract.errors import REFUSAL_META, Refusal, ResearchError
from autoresearch_mcp.contract.models import Experiment, HistoryPage, Run, RunList, TaskInfo, TaskList
from autoresearch_mcp.contract.profile import ProfileResult

M = TypeVar("M", bound=BaseModel)

# "Error executing tool start_run: 1 validation error for start_runArguments\n<field>\n  <problem>\n  ..."
VALIDATION = re.compile(r"Error executing tool \w+: \d+ validation errors? for \w+\n(?P<rest>.*)", re.S)

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
    args = ["-m", "autoresearch_mcp.server"]
    if db is not None:
        args += ["--db", str(Path(db).expanduser().resolve())]
    if data is not None:
        args += ["--data", data_setting(data)]
    # The spawned server's stderr is the user's terminal: warnings only (errors only for a command that
    # just reads, which need not hear of the server's start-up chores), unless they set the level.
    env = {ENV_LOG_LEVEL: log_level, **server_env()}
    return StdioServerParameters(command=sys.executable, args=args + (extra_args or []), env=env)


def condensed(text: str) -> str:
    """A refusal on one line; the SDK's argument validation dump becomes `field: problem`."""
    match = VALIDATION.match(text)
    if match:
        fields = [
            f"{name}: {problem.split(' [type=')[0]}"
            for name, problem in zip(
                match["rest"].splitlines()[::3], match["rest"].splitlines()[1::3], strict=False
            )
        ]
        text = "; ".join(" ".join(field.split()) for field in fields) or text
    return " ".join(text.split())


class ResearchClient:
    """The few calls the agent makes, over any MCP transport."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        result = await self.client.call_tool(tool, arguments)
        text = "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")
        if not result.is_error:
            return ToolOutcome(ok=True, text=text, data=result.structured_content)
        structured = (result.meta or {}).get(REFUSAL_META)
        if structured is not None:  # a refusal of the run logic: the message is the text
            refusal = Refusal.model_validate(structured)
        else:  # the SDK refused the arguments before the tool ran
            refusal = Refusal(kind="bad_argument", message=text)
        return ToolOutcome(ok=False, text=refusal.message, data=None, refusal=refusal)

    async def typed(self, tool: str, arguments: dict[str, Any], model: type[M]) -> M:
        """Call a tool that must succeed and read its result as a contract model."""
        outcome = await self.call(tool, arguments)
        if not outcome.ok:
            refusal = outcome.refusal or Refusal(kind="bad_argument", message=outcome.text)
            raise ResearchError(
                f"{tool} refused: {condensed(outcome.text)}", kind=refusal.kind, detail=refusal.detail
            )
        return outcome.as_model(model)

    async def must(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        outcome = await self.call(tool, arguments)
        if not outcome.ok or outcome.data is None:
            raise ResearchError(f"{tool} refused: {condensed(outcome.text)}")
        return outcome.data

    async def summary(self, run_id: str) -> str:
        contents = (await self.client.read_resource(f"autoresearch://runs/{run_id}/summary")).contents
        return contents[0].text  # type: ignore[union-attr]

    async def runs(self) -> list[Run]:
        """Every run the server keeps, newest first."""
        contents = (await self.client.read_resource("autoresearch://runs")).contents
        return RunList.model_validate_json(contents[0].text).runs  # type: ignore[union-attr]

    async def run(self, run_id: str) -> Run:
        """One run (the agent reads it every turn: one row, however many runs the server keeps)."""
        try:
            contents = (await self.client.read_resource(f"autoresearch://runs/{run_id}")).contents
        except MCPError:  # the resource answers an unknown run with "not found"
            raise ResearchError(
                f"no run {run_id} on this server (`runs` lists them)", kind="unknown_run"
            ) from None
        return Run.model_validate_json(contents[0].text)  # type: ignore[union-attr]

    async def tasks(self) -> list[TaskInfo]:
        contents = (await self.client.read_resource("autoresearch://tasks")).contents
        return TaskList.model_validate_json(contents[0].text).tasks  # type: ignore[union-attr]

    async def task(self, name: str) -> TaskInfo:
        contents = (await self.client.read_resource(f"autoresearch://tasks/{name}")).contents
        return TaskInfo.model_validate_json(contents[0].text)  # type: ignore[union-attr]

    async def train_py(self, run_id: str) -> str:
        contents = (await self.client.read_resource(f"autoresearch://runs/{run_id}/train.py")).contents
        return contents[0].text  # type: ignore[union-attr]

    async def profile(self, run_id: str) -> ProfileResult | None:
        """The current train.py's version and profile (profile_train_py); None where the server has
        no such tool or refuses it."""
        outcome = await self.call("profile_train_py", {"run_id": run_id})
        return outcome.as_model(ProfileResult) if outcome.ok else None

    async def history(self, run_id: str) -> list[Experiment]:
        """Every experiment of the run, in iteration order (read page by page)."""
        experiments: list[Experiment] = []
        offset: int | None = 0
        while offset is not None:
            page = await self.typed(
                "get_experiment_history", {"run_id": run_id, "offset": offset}, HistoryPage
            )
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
) -> AsyncIterator[ResearchClient]:
    """An MCP client session: HTTP when server_url is given, else a spawned stdio server (logging to
    the user's terminal from `log_level` up)."""
    try:
        if server_url:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            timeout = httpx2.Timeout(30, read=3600)
            async with (
                httpx2.AsyncClient(headers=headers, timeout=timeout, follow_redirects=True) as http,
                Client(streamable_http_client(server_url, http_client=http)) as client,
            ):
                yield ResearchClient(client)
        else:
            params = stdio_params(db, data, server_args, log_level)
            async with Client(params, read_timeout_seconds=3600) as client:
                yield ResearchClient(client)
    except* ResearchError as group:  # raised by the caller inside the session: pass it on unwrapped
        raise leaf(group) from None
    except* MCPError as group:
        first = leaf(group)
        hint = (
            " (an HTTP server that wants a token: check --token / AUTORESEARCH_TOKEN)" if server_url else ""
        )
        raise ResearchError(f"the MCP server failed: {first}{hint}") from None
    except* (OSError, httpx2.HTTPError) as group:
        first = leaf(group)
        where = server_url or "the spawned stdio server"
        raise ResearchError(f"cannot reach {where}: {first}") from None
