"""The sandboxed process: set our own limits first, then run one trusted harness entry point.

Started by `runner.run_sandboxed` as `python -I -m autoresearch_mcp.sandbox.child SPEC`. Nothing
untrusted has run yet when the limits are set, and they cannot be raised again afterwards.
"""

import importlib
import json
import os
import resource
import sys
from pathlib import Path


def _set_limits(limits: dict) -> None:
    memory = int(limits["memory_mb"]) * 1024 * 1024
    cpu = max(1, int(float(limits["cpu_s"]) + 0.999))
    file_bytes = int(limits["file_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main() -> int:
    spec_path = Path(sys.argv[1])
    spec = json.loads(spec_path.read_text())
    _set_limits(spec["limits"])
    result_path = Path(spec["result_path"])
    module_name, func_name = spec["entry"].split(":")
    entry = getattr(importlib.import_module(module_name), func_name)
    result = entry(spec["payload"])
    # Written only by this trusted frame after the entry returned; a partial write is not a result.
    tmp = result_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
