"""The test double's params policy: the task's search space as the double reads it from the params
schema and its plan, the best configuration read back from the request, and the next proposal."""

import json
import math
import random
import re
from typing import Any

from autoresearch_mcp.client.llm.base import LLMRequest
from autoresearch_mcp.contract.models import ScriptedPlan, TaskInfo

# Share of proposals that perturb the best so far (the rest explore the prior), as an LLM mostly
# refines what works and now and then tries something new.
EXPLOIT = 0.7
_NUMBER = r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?"


class ParamSpace:
    """The numeric params of a task: bounds and defaults from its JSON schema, the prior from its plan."""

    def __init__(self, schema: dict[str, Any], plan: ScriptedPlan) -> None:
        self.names: list[str] = []
        self.kinds: dict[str, type[int] | type[float]] = {}
        self.bounds: dict[str, tuple[float, float]] = {}
        self.defaults: dict[str, Any] = {}
        for name, prop in schema.get("properties", {}).items():
            lo, hi = prop.get("minimum"), prop.get("maximum")
            if lo is None or hi is None or prop.get("type") not in ("integer", "number"):
                continue  # nothing numeric to search
            self.names.append(name)
            self.kinds[name] = int if prop["type"] == "integer" else float
            self.bounds[name] = (float(lo), float(hi))
            self.defaults[name] = prop.get("default")
        self.plan = plan

    def prior(self, name: str) -> tuple[float, float]:
        lo, hi = self.bounds[name]
        plo, phi = self.plan.prior.get(name, (lo, hi))
        return max(lo, plo), min(hi, phi)

    def clean(self, name: str, value: float) -> int | float:
        lo, hi = self.bounds[name]
        if self.kinds[name] is int and name in self.plan.prior:
            hi = min(hi, self.prior(name)[1])  # perturbations must not creep into hour-long fits either
        value = min(hi, max(lo, value))
        if self.kinds[name] is int:
            return round(value)
        return float(f"{value:.3g}")

    def sample(self, rng: random.Random) -> dict[str, Any]:
        config: dict[str, Any] = {}
        for name in self.names:
            lo, hi = self.prior(name)
            if name in self.plan.log_scale and lo > 0:
                value = math.exp(rng.uniform(math.log(lo), math.log(hi)))
            else:
                value = rng.uniform(lo, hi)
            config[name] = self.clean(name, value)
        return config

    def perturb(self, centre: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], list[str]]:
        """Move a few parameters of `centre` (at least one); returns the config and the names changed."""
        base = {n: centre.get(n, self.defaults[n]) for n in self.names}
        chosen = [n for n in self.names if rng.random() < 0.35] or [rng.choice(self.names)]
        for name in chosen:
            lo, hi = self.prior(name)
            if name in self.plan.log_scale and base[name] > 0:
                value = base[name] * math.exp(rng.gauss(0, 0.5))
            else:
                value = base[name] + rng.gauss(0, 0.25 * (hi - lo))
            base[name] = self.clean(name, value)
        return base, chosen


def request_text(request: LLMRequest) -> str:
    parts: list[str] = []
    for m in request.messages:
        parts.append(m.text)
        parts += [r.content for r in m.tool_results]
    return "\n".join(parts)


def _params_on(line: str, names: list[str]) -> dict[str, float]:
    """The known params on one line: from a JSON object on it, else from name=value pairs."""
    brace = re.search(r"\{.*\}", line)
    if brace:
        try:
            obj = json.loads(brace.group(0))
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            found = {k: float(v) for k, v in obj.items() if k in names and isinstance(v, int | float)}
            if found:
                return found
    found = {}
    for name in names:
        match = re.search(rf"\b{name}\s*[=:]\s*({_NUMBER})", line)
        if match:
            found[name] = float(match.group(1))
    return found


def parse_best(text: str, names: list[str]) -> dict[str, float] | None:
    """The best params as the last line starting with "Best" gives them: on that line itself, or on the
    line of the experiment it points at ("Best so far: Iter 3 ..." -> the "Iter 3: ... params={...}" line)."""
    lines = text.splitlines()
    for line in reversed([ln.strip() for ln in lines if ln.strip().lower().startswith("best")]):
        if re.search(r"\bnone yet\b", line):  # "Best: none yet; params left out take the defaults: ..."
            return None
        found = _params_on(line, names)
        if found:
            return found
        if re.search(r"\bdefaults\b", line):  # the summary's "Best ...: defaults" (no param changed)
            return {}
        ref = re.search(r"(?:\bIter(?:ation)?\s*|#)(\d+)", line)
        if ref:
            pattern = re.compile(rf"\s*(?:Iter(?:ation)?\s*|#){ref.group(1)}\b")
            for other in lines:
                if pattern.match(other) and (found := _params_on(other, names)):
                    return found
                if pattern.match(other) and re.search(r"\ball defaults\b", other):
                    return {}  # the strong baseline's compact line for the defaults
    return None


class ParamsPolicy:
    def __init__(self, task: TaskInfo, plan: ScriptedPlan, rng: random.Random) -> None:
        self.space = ParamSpace(task.params_schema, plan)
        self.rng = rng
        self.seen: set[tuple[Any, ...]] = set()

    def _key(self, config: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(config[n] for n in self.space.names)

    def _centre(self, best: dict[str, float]) -> dict[str, Any]:
        return {n: self.space.clean(n, v) for n, v in best.items() if n in self.space.bounds}

    def propose(self, text: str) -> tuple[dict[str, Any], str] | None:
        """The next new config and a one-line reason, or None when nothing new can be found."""
        best = parse_best(text, self.space.names)
        if not self.seen:
            if best is None:
                config, why = dict(self.space.defaults), "Start from the defaults to get a baseline."
                self.seen.add(self._key(config))
                return config, why
            # A run that starts with a best (from an earlier run, or resumed) builds on it, as a
            # practitioner would, instead of spending a unit on the defaults again.
            self.seen.add(self._key({**self.space.defaults, **self._centre(best)}))
        for _ in range(1000):
            if best is not None and self.rng.random() < EXPLOIT:
                config, changed = self.space.perturb(self._centre(best), self.rng)
                why = f"Perturb the best configuration: change {', '.join(changed)}."
            else:
                config, why = self.space.sample(self.rng), "Explore: a random configuration from the prior."
            if self._key(config) not in self.seen:
                self.seen.add(self._key(config))
                return config, why
        return None
