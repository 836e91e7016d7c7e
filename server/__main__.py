"""`python -m autoresearch_mcp.server`: the MCP server (what the client spawns over stdio)."""

import sys

from autoresearch_mcp.server.main import main

sys.exit(main())
