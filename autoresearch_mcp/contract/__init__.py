"""The contract both sides share: wire models, refusal kinds, environment names, the transcript format.

The client imports only this and `mcp`; the server builds its tools on these models."""
