"""What is alive when the server starts serving stays out of the garbage collector's way.

A server process holds about 106,000 objects once it has imported the SDK, pydantic and its tools and
built its app. CPython's full collection walks all of them: 50 to 110 ms with the event loop held,
every few hundred calls, which was the tail of the load test (a 64 ms collection inside the slowest
calls of every kind; benchmarks/load_test.md). None of them is garbage: moved to the permanent
generation (gc.freeze), they are never walked again, and a full collection walks only what serving
created since.
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def settled() -> Iterator[None]:
    """Collect once, then freeze what is left for as long as the block serves; unfrozen after it (an
    app served inside a longer process, such as a test run, leaves nothing frozen behind)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
