"""How many experiments run at once on this machine, and how many training threads each may take: the
rule `serve --workers` and `run --workers` share, so both refuse the same values in the same words."""

import argparse
import os

MAX_WORKERS = 1024  # ServerSettings' bound


def cores() -> int:
    """The cores this process may run on (its affinity where the OS says, else every core)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not every OS has affinity
        return os.cpu_count() or 1


def workers_arg(value: str) -> int:
    """`--workers`: a whole number, 1 or more (how many it may be is checked once `--force` is known)."""
    text = value.strip()
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_WORKERS):
        raise argparse.ArgumentTypeError(
            f"expected a whole number of workers from 1 to {MAX_WORKERS}, not {value!r}"
        )
    return int(text)


def workers_problem(workers: int | None, force: bool) -> str | None:
    """Why `workers` would oversubscribe this machine (more experiments at once than cores: each one's
    timing and training slow the others), unless `force` says the operator means it; else None."""
    if workers is None or force or workers <= cores():
        return None
    return (
        f"--workers {workers} is more than this machine's {cores()} cores: experiments would slow each "
        "other; give at most that, or add --force"
    )


def threads_per_worker(workers: int) -> int:
    """The training threads (OMP/BLAS, XGBoost's n_jobs) each of `workers` experiments at once may use,
    so that together they fit the cores."""
    return max(1, cores() // max(1, workers))
