"""Class 1 of issue 13, in process and in the sandbox: nothing a candidate can name leads to a real module.

A candidate's imports give proxy modules; a breadth-first walk over every non-dunder attribute chain from
its namespace (the guard refuses dunder attributes, and the namespace has no getattr) finds no module
object but those proxies, so no `sys`, `os`, `gc`, `importlib` or harness module, for both tasks.
"""

import collections
import sys
import textwrap
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autoresearch_mcp.sandbox.proxies import PROXY_PREFIX
from autoresearch_mcp.server.tasks.base import ExecContext, NoParams, Outcome
from autoresearch_mcp.server.tasks.codeopt_records import child as codeopt_child
from autoresearch_mcp.server.tasks.codeopt_records.records import REFERENCE_SOURCE
from autoresearch_mcp.server.tasks.codeopt_records.task import POLICY, CodeOptTask
from autoresearch_mcp.server.tasks.hpo_covertype import child as hpo_child
from autoresearch_mcp.server.tasks.hpo_covertype.task import GUARD

FORBIDDEN_MODULES = {"sys", "os", "gc", "importlib", "builtins", "ctypes", "posix", "subprocess"}


def reachable_modules(roots: dict[str, Any], depth: int, private: bool) -> list[str]:
    """Paths to every module object, other than a proxy, within `depth` attribute reads of `roots`."""
    seen: set[int] = set()
    queue = collections.deque((value, name, 0) for name, value in roots.items())
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated aliases warn when read
        while queue:
            obj, path, level = queue.popleft()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, types.ModuleType) and not obj.__name__.startswith(PROXY_PREFIX):
                found.append(f"{path} -> {obj.__name__}")
                continue
            if level >= depth:
                continue
            try:
                names = dir(obj)
            except Exception:  # a hostile or broken __dir__ is simply not walked
                continue
            for name in names:
                if (name.startswith("__") and name.endswith("__")) or (name.startswith("_") and not private):
                    continue
                try:
                    value = getattr(obj, name)
                except Exception:  # properties that raise on a class or an empty instance
                    continue
                queue.append((value, f"{path}.{name}", level + 1))
    return found


def namespace_roots(namespace: dict[str, Any], modules: list[str]) -> dict[str, Any]:
    """Every builtin the candidate gets and every allowed module imported through its own __import__."""
    builtins = namespace["__builtins__"]
    roots = {f"builtins.{k}": v for k, v in builtins.items() if not (k.startswith("__") and k.endswith("__"))}
    for name in modules:
        roots[name] = builtins["__import__"](name, namespace, None, ("x",), 0)
    return roots


def test_a_proxy_has_the_functions_of_its_module_but_none_of_the_modules_it_imported() -> None:
    namespace = codeopt_child.candidate_globals()
    statistics = namespace["__builtins__"]["__import__"]("statistics")
    assert statistics.median([3, 1, 2]) == 2
    assert not hasattr(statistics, "sys") and not hasattr(statistics, "random")
    assert statistics is not sys.modules["statistics"] and statistics.__name__ not in sys.modules


def test_no_attribute_chain_from_the_codeopt_candidate_namespace_reaches_a_real_module() -> None:
    namespace = codeopt_child.candidate_globals()
    roots = namespace_roots(namespace, sorted(codeopt_child.ALLOWED_IMPORTS))
    imp = roots["re"], roots["decimal"], roots["fractions"], roots["array"], roots["collections"]
    re, decimal, fractions, array, collections_proxy = imp
    # objects a candidate can make with what it has
    roots.update(
        pattern=re.compile("a(b)"),
        match=re.match("a(b)", "ab"),
        context=decimal.getcontext(),
        fraction=fractions.Fraction(1, 3),
        array=array.array("i", [1]),
        counter=collections_proxy.Counter("ab"),
        generator=(x for x in ()),
    )
    assert reachable_modules(roots, depth=5, private=True) == []


@pytest.fixture
def hpo_namespace(tmp_path: Path) -> dict[str, Any]:
    data = hpo_child.Data(
        X_train=np.zeros((4, 3), dtype=np.float32),
        y_train=np.array([0, 1, 0, 1]),
        X_test=np.zeros((2, 3), dtype=np.float32),
        n_classes=2,
        seed=1,
        threads=1,
    )
    return hpo_child.candidate_globals(hpo_child.make_harness(data, {"log": {}}))


def test_no_attribute_chain_from_the_hpo_candidate_namespace_reaches_a_real_module(hpo_namespace) -> None:
    modules = sorted(GUARD.allowed_imports - {"harness"})
    roots = namespace_roots(hpo_namespace, modules)
    importer = hpo_namespace["__builtins__"]["__import__"]
    for sub in ("sklearn.ensemble", "sklearn.model_selection", "numpy.random", "scipy.stats"):
        roots[sub] = importer(sub, hpo_namespace, None, ("x",), 0)
    harness = importer("harness", hpo_namespace, None, ("x",), 0)
    roots.update(
        harness=harness,
        data=harness.load_data(),
        array=np.zeros(3),
        frame=roots["pandas"].DataFrame({"a": [1]}),
        model=roots["xgboost"].XGBClassifier(),
    )
    # The guard refuses private attributes in hpo-covertype (`array.ctypes._ctypes` is the ctypes module).
    assert reachable_modules(roots, depth=3, private=False) == []


def test_importing_a_submodule_or_a_module_name_through_from_gives_a_proxy_or_an_import_error() -> None:
    namespace = codeopt_child.candidate_globals()
    source = textwrap.dedent(
        """\
        import collections.abc
        from collections import abc
        import re as r
        found = [type(collections.abc).__name__, abc is collections.abc, hasattr(r, "enum")]
        """
    )
    exec(compile(source, "train.py", "exec"), namespace)
    assert namespace["found"] == ["module", True, False]
    assert namespace["collections"].__name__.startswith(PROXY_PREFIX)
    for line in (
        "from statistics import sys",
        "from typing import sys",
        "from re import _compiler",
        "import os",
        "from fractions import math",
        "import importlib",
    ):
        with pytest.raises(ImportError):
            exec(compile(line, "train.py", "exec"), codeopt_child.candidate_globals())


# -- the same attacks in the sandbox, the way a candidate would write them (the guard accepts all) ---

SMALL = {"codeopt_records": 1000, "codeopt_repeats": 3}
# Each one, if it worked, would make a reference-speed candidate look a million times faster.
ESCAPES = {
    "a module attribute": "import statistics\nstatistics.sys.modules['statistics'].median = lambda t: 1e-9\n",
    "from-import of a module-valued name": "from fractions import sys\nsys.modules['statistics'].median = lambda t: 1e-9\n",
    "an alias and a chain": "import re as r\nr.enum.sys.modules['statistics'].median = lambda t: 1e-9\n",
    "typing's imports": "import typing\ntyping.sys.modules['gc'].disable()\ntyping.sys.modules['statistics'].median = min\n",
}


def _benchmark(source: str) -> Outcome:
    task = CodeOptTask(SMALL)
    options = task.options()
    return task.execute(NoParams(), source, ExecContext(run_id="r-p", seed=1, iteration=1, options=options))


@pytest.mark.parametrize("name", list(ESCAPES))
def test_a_path_to_sys_through_an_allowed_module_fails_to_load_in_the_sandbox(name: str) -> None:
    source = ESCAPES[name] + REFERENCE_SOURCE
    assert CodeOptTask({}).check_artifact(source) == []  # nothing for the guard to see
    outcome = _benchmark(source)
    assert outcome.status == "crash" and outcome.metric is None, (name, outcome)
    tail = outcome.error_tail or ""
    assert "train.py failed to load" in tail
    assert "has no attribute" in tail or "cannot import name" in tail, tail


def test_the_candidate_gets_proxies_in_the_sandbox_and_mutating_them_changes_only_its_own_copy() -> None:
    source = (
        "import statistics\nimport math\n"
        "statistics.median = lambda t: 1e-9\nmath.fsum = sum\n\n" + REFERENCE_SOURCE
    )
    assert CodeOptTask({}).check_artifact(source) == []
    outcome = _benchmark(source)
    assert outcome.status == "ok" and outcome.metric is not None and outcome.metric < 1000, outcome
    assert POLICY.allowed_imports == codeopt_child.ALLOWED_IMPORTS
