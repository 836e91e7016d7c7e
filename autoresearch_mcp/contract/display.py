"""How a run's stamps and direction read wherever a person sees them (the CLI, the dashboard, the
report): one wording on both sides of the wire."""

from datetime import UTC, datetime


def utc_minute(stamp: str | None, missing: str = "-") -> str:
    """A stored ISO timestamp to the minute, in UTC and saying so; `missing` where there is none."""
    if not stamp:
        return missing
    moment = datetime.fromisoformat(stamp)
    moment = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def better_way(direction: str) -> str:
    """ "higher is better" for a metric to maximise, else "lower is better"."""
    return "higher is better" if direction == "max" else "lower is better"
