"""The fork that runs candidate code (sandbox/isolate.py) ends where it ends, whatever the candidate raised:
it never returns into the harness's code, which would then run on in a process the candidate holds."""

import os

import pytest

from autoresearch_mcp.sandbox import isolate


class TextThatRaises:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def exit_with_text_that_raises(channel: isolate.Channel) -> None:
    raise SystemExit(TextThatRaises())


def raise_with_text_that_raises(channel: isolate.Channel) -> None:
    raise ValueError(TextThatRaises())


@pytest.mark.parametrize("work", [exit_with_text_that_raises, raise_with_text_that_raises])
def test_a_candidate_exception_whose_text_raises_still_ends_the_fork_with_a_failure(work):
    harness = os.getpid()
    try:
        done = isolate.run_isolated(work, writable=None, max_messages=1)
    finally:
        if os.getpid() != harness:  # pragma: no cover - the fork came back into its caller's code
            os._exit(86)
    assert done.messages == [] and done.problem is None
    assert os.WIFEXITED(done.status or 0) and os.WEXITSTATUS(done.status or 0) == 1
