"""The MCP glue, one module per subject: each tool is declared in the module named after its subject."""
