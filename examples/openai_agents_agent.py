"""The OpenAI Agents SDK drives the autoresearch-mcp server through its built-in MCP support.

`MCPServerStdio` spawns `autoresearch-mcp serve --tools-for TASK`: focused on the task, the server lists
only the tools the bundled agent offers its model, shaped the same way, and answers each experiment with
what that agent shows each turn (`--all-tools`: all 14). The instructions are the `autoresearch` prompt;
`Runner.run` loops until the model answers without a tool call, the run ends, or --max-turns. Any
OpenAI-compatible endpoint works; `--tool-choice` forces a call on every turn (for a small local model);
`--string-content` sends each message's content as one string (llama-cpp-python's server refuses the SDK's
content parts and null content, both valid).

Run it for real (needs `pip install openai-agents`; the server uses the Covertype sample it ships
unless --data says otherwise):

    OPENAI_API_KEY=... python examples/openai_agents_agent.py --task hpo-covertype --budget 10 --db runs.db
    # local: --base-url http://127.0.0.1:8000/v1 --model qwen2.5-coder --tool-choice run_experiment
    #        (llama-cpp-python's server: --string-content)
However the loop ends, the run is finished on the way out.
"""

import argparse
import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import agents
import httpx2  # the HTTP library the openai package sends with
from agents.mcp import MCPServerStdio, MCPServerStdioParams
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.tool_context import ToolContext
from mcp.types import TextContent
from openai import APIError, AsyncOpenAI, DefaultAsyncHttpx2Client


def server_params(db: Path | None, data: str | None, focus: str | None) -> MCPServerStdioParams:
    """`autoresearch-mcp serve [--tools-for TASK]`, run by this interpreter (no PATH needed)."""
    args = ["-P", "-m", "autoresearch_mcp.server", *(["--tools-for", focus] if focus else [])]
    args += ["--db", str(db.expanduser().resolve())] if db is not None else []
    args += ["--data", str(Path(data).expanduser().resolve())] if data is not None else []
    # The child gets an allow-list of variables: add the server's settings and a plugin's PYTHONPATH.
    env = {k: v for k, v in os.environ.items() if k.startswith("AUTORESEARCH_") or k == "PYTHONPATH"}
    return {"command": sys.executable, "args": args, "env": env}


class StringContent(httpx2.AsyncHTTPTransport):
    """Each chat message's content as one string: its parts' texts joined, none as ""."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/chat/completions"):
            body = json.loads(request.content)
            for message in body["messages"]:
                if not isinstance(message.get("content"), str):
                    message["content"] = "\n".join(p.get("text", "") for p in message.get("content") or [])
            headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
            request = httpx2.Request(request.method, request.url, headers=headers, json=body)
        return await super().handle_async_request(request)


class PrintTools(agents.RunHooks[Any]):
    """Show each tool call as it happens."""

    async def on_tool_start(
        self, context: agents.RunContextWrapper[Any], agent: agents.Agent[Any], tool: agents.Tool
    ) -> None:
        arguments = context.tool_arguments if isinstance(context, ToolContext) else ""
        print(f"  -> {tool.name} {arguments}")


async def research(args: argparse.Namespace) -> str:
    """Start a run, let the agent work on it, return its final summary as the server tells it."""
    key = os.environ.get("OPENAI_API_KEY") or ("no-key-needed" if args.base_url else None)
    if key is None:  # checked before anything starts
        raise SystemExit("openai_agents_agent: set OPENAI_API_KEY, or pass --base-url for a local endpoint")
    # The script's own calls go to tools a focused server does not list; the MCP client warns on each.
    logging.getLogger("client").setLevel(logging.ERROR)
    focus = None if args.all_tools else args.task
    # A local model can take minutes on a long prompt.
    http = DefaultAsyncHttpx2Client(transport=StringContent(), timeout=900) if args.string_content else None
    # A finished experiment can take minutes; the SDK's default MCP read timeout is 5 s.
    async with (
        MCPServerStdio(
            server_params(args.db, args.data, focus),
            name="autoresearch",
            cache_tools_list=True,  # the tool set never changes; skip a tools/list per turn
            client_session_timeout_seconds=3600,
        ) as server,
        AsyncOpenAI(base_url=args.base_url, api_key=key, max_retries=2, http_client=http) as openai_client,
    ):
        # The script starts the run and names it to the model (see anthropic_mcp_agent.py for why).
        started = await server.call_tool("start_run", {"task": args.task, "budget": args.budget})
        if started.is_error or started.structured_content is None:
            raise SystemExit(f"openai_agents_agent: start_run refused: {started.content[0].text}")
        run_id = started.structured_content["run_id"]
        prompt = await server.get_prompt("autoresearch", {"task": args.task, "run_id": run_id})
        instructions = prompt.messages[0].content
        if not isinstance(instructions, TextContent):
            raise SystemExit(f"the autoresearch prompt is not text: {instructions.type}")

        async def until_the_run_ends(
            _: agents.RunContextWrapper[Any], __: list[agents.FunctionToolResult]
        ) -> Any:
            # A forced tool choice never ends the loop by itself: the run's end (budget, target) does.
            running = (await server.call_tool("list_runs", {"status": "running"})).structured_content
            over = run_id not in {run["id"] for run in (running or {}).get("runs", [])}
            return agents.ToolsToFinalOutputResult(is_final_output=over, final_output="the run has ended")

        forced = args.tool_choice not in (None, "auto")
        agent = agents.Agent(
            name="researcher",
            instructions=instructions.text,
            mcp_servers=[server],
            model=OpenAIChatCompletionsModel(model=args.model, openai_client=openai_client),
            model_settings=agents.ModelSettings(tool_choice=args.tool_choice),
            reset_tool_choice=not forced,
            tool_use_behavior=until_the_run_ends if forced else "run_llm_again",
        )
        # Focused, the prompt holds the run's first turn, and run_id travels by itself.
        kickoff = (
            "Begin." if focus else f"Your run is {run_id} (pass run_id={run_id!r} to every tool). Begin."
        )
        ended, failed = "the model answered without a tool call", False
        try:
            result = await agents.Runner.run(agent, kickoff, max_turns=args.max_turns, hooks=PrintTools())
            print(f"[{args.model}] {result.final_output}")
        except agents.MaxTurnsExceeded:
            ended = f"stopped after --max-turns {args.max_turns}"
        except APIError as exc:  # unreachable endpoint, refused key, ...
            ended, failed = f"the model endpoint failed: {type(exc).__name__}: {exc}", True
        finally:  # never leave the run `running`; a run the model finished keeps its own reason
            await server.call_tool("finish_run", {"run_id": run_id, "reason": ended[:500]})
        final = await server.call_tool("get_run_summary", {"run_id": run_id})
    if failed:
        raise SystemExit(f"openai_agents_agent: {ended} (run {run_id} finished)")
    return str((final.structured_content or {}).get("summary", final.content))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default="hpo-covertype", help="hpo-covertype or codeopt-records")
    parser.add_argument("--budget", type=int, default=10, help="experiments the model may run")
    parser.add_argument("--model", default="gpt-5.4-mini")
    parser.add_argument("--max-turns", type=int, default=60, help="stop the loop after this many turns")
    parser.add_argument("--tool-choice", help='"auto" (default), "required", or a tool to call every turn')
    parser.add_argument("--all-tools", action="store_true", help="offer all 14 tools, not the task's")
    parser.add_argument("--string-content", action="store_true", help="content as strings (llama-cpp-python)")
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"), help="ends in /v1")
    parser.add_argument("--db", type=Path, help="the server's SQLite file (default: its data directory)")
    parser.add_argument("--data", help="Covertype CSV for offline use (hpo-covertype)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Tracing uploads every run to OpenAI's dashboard; off, so the example works with any endpoint.
    agents.set_tracing_disabled(True)
    try:
        print(asyncio.run(research(args)))
    except* SystemExit as group:  # one line, even from inside the MCP client's task group
        while isinstance(group, BaseExceptionGroup):
            group = group.exceptions[0]
        raise group from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
