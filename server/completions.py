"""Completions: what a host offers while the user types a prompt or resource argument.

The `autoresearch` prompt's `task` completes to the registered tasks; its `run_id`, and the `{run_id}` of
the run resource templates, complete to known runs, most recent first. Other references complete to nothing (never an
error: hosts ask about every argument they show).
"""

from collections.abc import Iterable
from typing import Final

import anyio
from mcp.server import MCPServer
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

from autoresearch_mcp.contract.tools import RUN_URIS
from autoresearch_mcp.server.program import PROMPT_NAME
from autoresearch_mcp.server.research import Research

MAX_VALUES: Final = 100  # the protocol's limit on completion values


def completion(values: Iterable[str], prefix: str) -> Completion:
    """The values starting with `prefix`, in the given order, at most MAX_VALUES of them."""
    matching = [value for value in values if value.startswith(prefix)]
    return Completion(values=matching[:MAX_VALUES], total=len(matching), has_more=len(matching) > MAX_VALUES)


def register(mcp: MCPServer, research: Research) -> None:
    @mcp.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        if isinstance(ref, PromptReference) and ref.name == PROMPT_NAME and argument.name == "task":
            return completion(research.tasks.names(), argument.value)
        prompt_run = isinstance(ref, PromptReference) and ref.name == PROMPT_NAME
        if argument.name == "run_id" and (
            prompt_run or (isinstance(ref, ResourceTemplateReference) and ref.uri in RUN_URIS)
        ):
            run_ids = await anyio.to_thread.run_sync(research.store.run_ids)
            return completion(run_ids, argument.value)
        return None
