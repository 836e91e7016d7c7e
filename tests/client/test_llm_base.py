"""The shared retry policy: exponential backoff with jitter, bounded attempts, only transient errors."""

import random

import pytest

from autoresearch_mcp.client.llm.base import (
    LLMError,
    RetryPolicy,
    TransientLLMError,
    is_transient_status,
    with_retries,
)


def test_the_backoff_doubles_within_its_jitter_band_is_capped_and_honours_retry_after() -> None:
    policy = RetryPolicy(attempts=6, base_delay=1.0, max_delay=5.0)
    rng = random.Random(0)
    for retry, step in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0)):
        wait = policy.delay(retry, rng)
        assert step / 2 <= wait <= step
    assert policy.delay(1, rng, retry_after=3.0) == 3.0
    assert policy.delay(1, rng, retry_after=60.0) == 5.0


def test_rate_limits_overloads_and_server_errors_are_transient_and_client_errors_are_not() -> None:
    assert all(is_transient_status(s) for s in (408, 409, 429, 500, 503, 529))
    assert not any(is_transient_status(s) for s in (400, 401, 403, 404, 413, 422))


@pytest.mark.asyncio
async def test_only_transient_errors_are_retried() -> None:
    calls: list[str] = []

    async def flaky() -> str:
        calls.append("x")
        if len(calls) < 3:
            raise TransientLLMError("HTTP 529: overloaded")
        return "ok"

    async def fatal() -> str:
        calls.append("y")
        raise LLMError("bad request")

    fast = RetryPolicy(attempts=3, base_delay=0.0)
    assert await with_retries(flaky, fast, label="t") == "ok" and len(calls) == 3
    with pytest.raises(LLMError, match="bad request"):
        await with_retries(fatal, fast, label="t")
    assert calls.count("y") == 1
