"""`autoresearch-mcp stop RUN` (or `finish`): end a run through MCP's finish_run, as a host would.

The run takes no more experiments: an agent still driving it is refused its next one and stops. Its
status becomes `stopped` (`converged` when its best already meets its target), with the reason given.
"""

import argparse

from autoresearch_mcp.client.connect import ResearchClient
from autoresearch_mcp.client.inspect_cmd import add_server_arguments, drive
from autoresearch_mcp.contract.arguments import FinishRunArgs

DEFAULT_REASON = "stopped from the command line"


def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "stop",
        aliases=["finish"],
        help="end a running run (finish_run): it takes no more experiments",
        epilog="example:\n  autoresearch-mcp stop r-0123456789 --reason 'good enough'",
    )
    add_server_arguments(p)
    p.add_argument("run_id", metavar="RUN_ID", help="the run to end")
    p.add_argument("--reason", default=DEFAULT_REASON, help="why it ends, kept with the run")
    p.set_defaults(func=lambda args: drive(args, stop_run), command="stop")


async def stop_run(rc: ResearchClient, args: argparse.Namespace) -> int:
    before = await rc.run(args.run_id)  # an unknown run is one line, before anything changes
    if before.status != "running":
        print(
            f"run {before.id} is already {before.status} ({before.used}/{before.budget} used): nothing to do"
        )
        return 0
    await rc.result(FinishRunArgs(run_id=before.id, reason=args.reason))
    after = await rc.run(before.id)
    print(f"run {after.id} {after.status}: {after.finish_reason} ({after.used}/{after.budget} used)")
    return 0
