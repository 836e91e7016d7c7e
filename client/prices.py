"""The providers' published prompt-cache rules and a few named models' prices, read from prices.toml
(the one place they are kept, each with its source and the date it was read)."""

import tomllib
from functools import cache
from importlib.resources import files
from typing import Literal

from pydantic import BaseModel, Field


class AnthropicRules(BaseModel):
    caching: Literal["explicit"]
    max_breakpoints: int
    lookback_blocks: int
    ttl_s: float
    cache_write: float
    cache_write_1h: float
    cache_read: float
    default_min_tokens: int
    source: str
    checked: str
    verified: str


class OpenAIRules(BaseModel):
    caching: Literal["automatic"]
    min_tokens: int
    step_tokens: int
    ttl_s: float
    source: str
    checked: str
    verified: str


class ModelPrice(BaseModel):
    """One model: its provider's rules apply; USD per million tokens."""

    name: str
    provider: Literal["anthropic", "openai"]
    label: str
    min_cacheable_tokens: int | None = Field(default=None, description="anthropic: per model")
    tool_use_system_tokens: int = Field(
        default=0,
        description="anthropic: the system prompt the API adds to every request that offers tools "
        "(tool_choice auto, as the anthropic backend sends), billed as input",
    )
    input: float
    cache_write: float
    cache_read: float
    output: float
    source: str
    checked: str
    verified: str

    def usd(self, *, uncached: float, cache_write: float, cache_read: float, output: float) -> float:
        return (
            uncached * self.input + cache_write * self.cache_write + cache_read * self.cache_read
        ) / 1e6 + output * self.output / 1e6


class Prices(BaseModel):
    anthropic: AnthropicRules
    openai: OpenAIRules
    models: dict[str, ModelPrice]

    def min_tokens(self, model: ModelPrice) -> int:
        if model.provider == "openai":
            return self.openai.min_tokens
        return model.min_cacheable_tokens or self.anthropic.default_min_tokens


@cache
def prices() -> Prices:
    data = tomllib.loads(files("autoresearch_mcp.client").joinpath("prices.toml").read_text())
    models = {name: ModelPrice(name=name, **entry) for name, entry in data["model"].items()}
    return Prices(
        anthropic=AnthropicRules(**data["provider"]["anthropic"]),
        openai=OpenAIRules(**data["provider"]["openai"]),
        models=models,
    )
