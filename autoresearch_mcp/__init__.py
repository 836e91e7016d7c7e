"""autoresearch-mcp: stateful autonomous experimentation over MCP."""

__version__ = "0.1.0"
