"""Claude drives the autoresearch-mcp server through the Anthropic SDK's own MCP helpers.

The script spawns `autoresearch-mcp serve --tools-for TASK` over stdio with `mcp.Client`, turns the
server's tools into runnable tools with `anthropic.lib.tools.mcp.async_mcp_tool`, takes its instructions
from the server's `autoresearch` prompt, starts a run, and lets `llm.beta.messages.tool_runner` loop until
the model stops calling tools (or --max-turns). Focused on the task, the server lists only the tools the
bundled agent offers its model, shaped the same way, and answers each experiment with what that agent
shows its model each turn; `--all-tools` lists all 14 instead. The script keeps no state: experiments, the best result and notes live
in the server's SQLite file.

Run it for real (needs ANTHROPIC_API_KEY, the paid API; the server uses the Covertype sample it ships
unless --data says otherwise):

    python examples/anthropic_mcp_agent.py --task hpo-covertype --budget 10 --db runs.db

`--base-url` (or ANTHROPIC_BASE_URL) points it at any Messages-API endpoint, such as a local proxy or a
fake; a local endpoint needs no key. However the loop ends, the run is finished on the way out.
Every request resends the whole conversation and all tool definitions (`thread=False`), so this is the
plain, stateless-host way of using the server; `autoresearch-mcp run` is the token-frugal agent.
"""

import argparse
import asyncio
import json
import logging
import os
import sys
from pathlib import Path

import anthropic
from anthropic.lib.tools.mcp import async_mcp_tool, mcp_message
from anthropic.types.beta import BetaMessageParam
from mcp import Client, StdioServerParameters


def server_params(db: Path | None, data: str | None, focus: str | None = None) -> StdioServerParameters:
    """`autoresearch-mcp serve [--tools-for TASK]`, run by this interpreter so the command need not be on
    PATH (-P: the installed package, never a folder of that name in the current directory)."""
    args = ["-P", "-m", "autoresearch_mcp.server", *(["--tools-for", focus] if focus else [])]
    if db is not None:
        args += ["--db", str(db.expanduser().resolve())]
    if data is not None:
        args += ["--data", str(Path(data).expanduser().resolve())]
    # The child gets an allow-list of variables: add the server's settings and a plugin's PYTHONPATH.
    env = {k: v for k, v in os.environ.items() if k.startswith("AUTORESEARCH_") or k == "PYTHONPATH"}
    return StdioServerParameters(command=sys.executable, args=args, env=env)


def api_key(base_url: str | None) -> str | None:
    """The key to send; a local endpoint needs none, but the SDK wants one, so it gets a placeholder."""
    if os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"):
        return None  # the SDK reads it
    if base_url:
        return "no-key-needed"
    raise SystemExit(
        "anthropic_mcp_agent: set ANTHROPIC_API_KEY (the paid Anthropic API), or pass --base-url for"
        " another Messages-API endpoint"
    )


async def research(args: argparse.Namespace) -> str:
    """Start a run, let the model work on it, return its final summary as the server tells it."""
    key = api_key(args.base_url)  # before anything starts
    # The script's own calls go to tools a focused server does not list; the MCP client warns on each.
    logging.getLogger("client").setLevel(logging.ERROR)
    focus = None if args.all_tools else args.task
    async with Client(server_params(args.db, args.data, focus), read_timeout_seconds=3600) as mcp:
        # The script starts the run and names it to the model: under Client's default protocol the server
        # cannot tie a run to this session, and "the latest running run" is ambiguous on a shared server.
        started = await mcp.call_tool("start_run", {"task": args.task, "budget": args.budget})
        if started.is_error or started.structured_content is None:
            raise SystemExit(f"anthropic_mcp_agent: start_run refused: {started.content[0].text}")
        run_id = started.structured_content["run_id"]
        prompt = await mcp.get_prompt("autoresearch", {"task": args.task, "run_id": run_id})
        # Focused, the prompt already holds the run's first turn (and run_id travels by itself).
        begin = "Begin." if focus else f"Your run is {run_id} (pass run_id={run_id!r} to every tool). Begin."
        kickoff: BetaMessageParam = {
            "role": "user",
            "content": [*mcp_message(prompt.messages[0])["content"], {"type": "text", "text": begin}],
        }
        # The helper is typed for a ClientSession; it only calls call_tool(name=, arguments=), as Client does.
        tools = [async_mcp_tool(tool, mcp) for tool in (await mcp.list_tools()).tools]  # type: ignore[arg-type]

        ended, failed = "the model stopped calling tools", False
        try:
            async with anthropic.AsyncAnthropic(base_url=args.base_url, api_key=key, max_retries=2) as llm:
                # thread=False: resend history and tools each turn instead of the server-side threads beta.
                runner = llm.beta.messages.tool_runner(
                    model=args.model,
                    max_tokens=args.max_tokens,
                    max_iterations=args.max_turns,
                    thread=False,
                    tools=tools,
                    messages=[kickoff],
                )
                async for message in runner:
                    for block in message.content:
                        if block.type == "text" and block.text.strip():
                            print(f"[{args.model}] {block.text.strip()}")
                        elif block.type == "tool_use":
                            print(f"  -> {block.name} {json.dumps(block.input)}")
        except anthropic.APIError as exc:  # unreachable endpoint, refused key, ...
            ended, failed = f"the model endpoint failed: {type(exc).__name__}: {exc}", True
        finally:  # never leave the run `running`; a run the model finished keeps its own reason
            await mcp.call_tool("finish_run", {"run_id": run_id, "reason": ended[:500]})
        final = await mcp.call_tool("get_run_summary", {"run_id": run_id})
    if failed:  # raised outside the MCP client, whose task group would wrap it
        raise SystemExit(f"anthropic_mcp_agent: {ended} (run {run_id} finished)")
    return str((final.structured_content or {}).get("summary", final.content))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default="hpo-covertype", help="hpo-covertype or codeopt-records")
    parser.add_argument("--budget", type=int, default=10, help="experiments the model may run")
    parser.add_argument("--model", default="claude-haiku-4-5")
    parser.add_argument("--max-tokens", type=int, default=1024, help="max output tokens per model turn")
    parser.add_argument("--max-turns", type=int, default=60, help="stop the loop after this many turns")
    parser.add_argument(
        "--all-tools",
        action="store_true",
        help="offer the model all 14 tools of the server, not only the task's (the server unfocused)",
    )
    parser.add_argument(
        "--base-url",
        default=os.environ.get("ANTHROPIC_BASE_URL"),
        help="Messages API endpoint (default: $ANTHROPIC_BASE_URL, else Anthropic's)",
    )
    parser.add_argument("--db", type=Path, help="the server's SQLite file (default: its data directory)")
    parser.add_argument("--data", help="Covertype CSV for offline use (hpo-covertype)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        print(asyncio.run(research(args)))
    except* SystemExit as group:  # one line, even from inside the MCP client's task group
        while isinstance(group, BaseExceptionGroup):
            group = group.exceptions[0]
        raise group from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
