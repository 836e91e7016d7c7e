"""The local model server (`local-llm`'s `local_llm_server.py`) with one more fix: it honours `seed`.

llama-cpp-python 0.3.36's `chatml-function-calling` handler has no `seed` parameter, so the request's
seed falls into its `**kwargs` and is dropped. Each completion then draws its seed from the previous
one (`random.Random(llama._seed)`): the sampling sequence is fixed by the server's start and the order
of requests, not by the request. Two runs with different seeds, each started on a fresh server, got
token-for-token the same replies (stateless seed 456 at 0b4091a and seed 123 at b572b13, example 2).
Here a request's seed is set on the model before the handler runs, so a run's `--seed` decides its draws.

Run it with the interpreter that has llama_cpp (local-llm's venv) and the server's own arguments:

    ~/.cache/local-llm/venv/bin/python benchmarks/local_llm_seeded.py \\
        --model "$(local-llm path)" --chat_format chatml-function-calling \\
        --host 127.0.0.1 --port 8088 --n_threads 2 --n_ctx 16384

The shared server script is found beside the repository (`../shared/tools/local_llm_server.py`) or at
`$LOCAL_LLM_SERVER`.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

HANDLER = "chatml_function_calling"


def honour_seed(chat_format: ModuleType) -> None:
    """Wrap the function-calling handler so that a request's `seed` seeds the model first (the handler
    itself drops it). The wrapper is looked up by name at call time by the server script's own
    wrapper, so patching the module attribute reaches every request."""
    handler = getattr(chat_format, HANDLER)
    if getattr(handler, "honours_seed", False):
        return

    def seeded(*args: Any, seed: int | None = None, **kwargs: Any) -> Any:
        llama = kwargs["llama"] if "llama" in kwargs else args[0]
        if seed is not None:
            llama.set_seed(seed)
        return handler(*args, **kwargs)

    seeded.honours_seed = True  # type: ignore[attr-defined]
    setattr(chat_format, HANDLER, seeded)


def server_script() -> Path:
    named = os.environ.get("LOCAL_LLM_SERVER")
    path = Path(named) if named else Path(__file__).resolve().parents[2] / "shared/tools/local_llm_server.py"
    if not path.is_file():
        sys.exit(f"local_llm_seeded: no server script at {path}; set LOCAL_LLM_SERVER to local_llm_server.py")
    return path


def main() -> None:
    from llama_cpp import llama_chat_format  # local-llm's venv only

    honour_seed(llama_chat_format)
    script = server_script()
    sys.argv[0] = str(script)
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
