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
from autoresearch_mcp.server.listen import BoundedListen
from autoresearch_mcp.server.notify import Notifier
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tools.connection import RunResolver
from autoresearch_mcp.server.tools.focus import focus_on
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
    tools_for: str | None = None,
) -> MCPServer:
    """The MCP server over `research` (opened here if it is not yet). `token_verifier` and `auth`
    (together) protect it over HTTP; see http.py. `tools_for`: a task to focus on, whose agent's tools
    alone are listed, as our agent offers them (tools/focus.py); default: the settings'. The caller
    closes `research` at shutdown."""
    research.open()
    tools_for = tools_for or research.settings.tools_for
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
    BoundedListen(notifier.bus).install(mcp)
    # One token shared by every client cannot tell one client's handshake session from another's: whoever
    # learns a session id could use it, so with a token no run is remembered for a session.
    register_tools(mcp, research, RunResolver(research.runs, remember=token_verifier is None))
    focus = None if tools_for is None else research.tasks(tools_for)
    if focus is not None:
        focus_on(mcp, research, focus)
    resources.register(mcp, research)
    program.register(mcp, research, focus)
    completions.register(mcp, research)
    return mcp
