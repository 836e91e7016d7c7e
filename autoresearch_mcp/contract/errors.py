"""The one user-facing error of the run logic. The MCP glue turns it into a ToolError the model reads."""


class ResearchError(Exception):
    """Something the caller asked for cannot be done; the message says why and what to do instead."""


class RefusedError(ResearchError):
    """A request refused before anything ran (invalid params, an exact repeat, a rejected edit).

    It costs no budget, is logged as an event, and counts toward the consecutive-failure stop.
    """


# How a refused exact repeat starts: agents recognise it by this (the message is all a tool error carries).
REPEAT_PREFIX = "exact repeat of experiment #"


class RepeatError(RefusedError):
    """The same params on the same artifact version already ran; carries the earlier experiment."""

    def __init__(self, message: str, earlier: object) -> None:
        super().__init__(message)
        self.earlier = earlier
