"""The sandbox entry of the plugin task: lives outside the package, like a third party's harness."""

from typing import Any


def run(payload: dict[str, Any]) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(payload["source"], "train.py", "exec"), namespace)
    return {"value": float(namespace["cube"](float(payload["x"]))), "harness": __name__}
