"""The MCP surface, declared over an open `Research`: the tools, resources, prompt and completions.

The tools are registered from the contract's table (contract/tools.py), each the function named like it
in the module of its subject under server/tools/ (surface.py says how); the logic they call (runs.py,
experiments.py, train_py.py, jobs/) knows nothing of MCP. What a host sees besides (logs, resource
updates, list changes) comes from the notifier (notify.py), which watches the research's events.
"""

from mcp.server import MCPServer
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings

from autoresearch_mcp import __version__
from autoresearch_mcp.server import completions, program, resources
from autoresearch_mcp.server.notify import Notifier
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tools.connection import RunResolver
from autoresearch_mcp.server.tools.surface import register_tools

INSTRUCTIONS = (
    "Autonomous ML experimentation with server-side state. start_run, then loop: read get_run_summary, "
    "run one experiment (run_experiment, or modify_train_py + run_benchmark), add notes; finish_run at the end. "
    "The prompt `autoresearch` has the full instructions."
)


def build_server(
    research: Research,
    *,
    token_verifier: TokenVerifier | None = None,
    auth: AuthSettings | None = None,
) -> MCPServer:
    """The MCP server over `research` (opened here if it is not yet). `token_verifier` and `auth`
    (together) protect it over HTTP; see http.py. The caller closes `research` at shutdown."""
    research.open()
    notifier = Notifier()
    research.events.add(notifier)
    mcp = MCPServer(
        "autoresearch",
        version=__version__,
        instructions=INSTRUCTIONS,
        token_verifier=token_verifier,
        auth=auth,
        subscriptions=notifier.bus,
        middleware=[notifier.middleware],
    )
    notifier.serve_handshake_methods(mcp)
    register_tools(mcp, research, RunResolver(research.runs))
    resources.register(mcp, research)
    program.register(mcp, research)
    completions.register(mcp, research)
    return mcp
