"""LLM backends behind one provider-neutral interface: anthropic, openai (compatible endpoints), scripted."""

from autoresearch_mcp.client.llm.base import (
    LLM,
    LLMError,
    LLMKind,
    LLMRequest,
    LLMResponse,
    Message,
    RetryPolicy,
    ToolCall,
    ToolResult,
    ToolSpec,
    TransientLLMError,
    Usage,
    make_llm,
)

__all__ = [
    "LLM",
    "LLMError",
    "LLMKind",
    "LLMRequest",
    "LLMResponse",
    "Message",
    "RetryPolicy",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "TransientLLMError",
    "Usage",
    "make_llm",
]
