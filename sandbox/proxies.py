"""What a candidate gets when it imports: proxy modules that lead nowhere else.

A real module is a door to the interpreter: `statistics.sys`, `typing.sys.modules['os']`, `re.enum`,
`fractions.sys` are plain, dunder-free attribute reads. A candidate's `import` therefore returns a fresh
`types.ModuleType` holding only the module's public attributes that are not modules, plus proxies of the
allowed public submodules of the same package. Mutating a proxy changes nothing the harness uses (the
harness holds the real modules), and a proxy's `__name__` is no key of `sys.modules`, so the
`from package import name` fallback of the interpreter finds nothing real either.

Dunder attributes (`().__class__.__subclasses__()`, `f.__globals__`) are closed by the AST guard and the
restricted builtins, not here; `tests/sandbox/test_proxies.py` walks every non-dunder attribute chain from
a candidate's namespace and finds no module but these proxies.

Some library functions read attributes by a name given as text, or evaluate text with the real builtins
(a string annotation resolved by `typing.get_type_hints`, which `functools.singledispatch` calls too):
text can be built at run time, past anything the guard can see. Proxies leave them out (WITHHELD), and
`disarm_evaluators`, called in a candidate's fork before its code loads, makes the evaluators the
library itself calls refuse (in that fork only: the harness is another process).
"""

import builtins
import contextlib
import importlib
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

PROXY_PREFIX = "sandbox-proxy:"
# Builtins a candidate never gets: dynamic code, files, introspection that reads attributes by string
# (which would undo the ban on dunders), and the loader, which imports any built-in module.
HIDDEN_BUILTINS = frozenset(
    {"eval", "exec", "compile", "open", "__import__", "globals", "locals", "vars", "getattr", "setattr"}
    | {"delattr", "input", "breakpoint", "exit", "quit", "help", "memoryview", "__loader__", "__spec__"}
)

# Public callables that turn text into attribute reads or code; a proxy never holds them.
WITHHELD = {
    "operator": frozenset({"attrgetter", "methodcaller"}),
    "typing": frozenset({"get_type_hints", "ForwardRef"}),
    "pandas": frozenset({"eval"}),
}

Importer = Callable[..., types.ModuleType]


def make_importer(
    allowed: Iterable[str], *, denied: Iterable[str] = (), provided: Mapping[str, types.ModuleType] = {}
) -> Importer:
    """The candidate's `__import__`: proxies of modules under the `allowed` top-level names, never a
    real module. `denied` names submodules (dotted, e.g. "numpy.ctypeslib") that are never proxied;
    `provided` maps names to ready-made modules (the task's harness) returned as they are.

    A closure rather than an object, so that it has no attribute a candidate could call instead."""
    allowed, denied, provided = frozenset(allowed), frozenset(denied), dict(provided)
    cache: dict[str, types.ModuleType] = {}

    def refuse(name: str) -> ImportError:
        names = ", ".join(sorted(allowed | set(provided)))
        return ImportError(f"import of {name!r} is not allowed in this sandbox (allowed: {names})")

    def permitted(name: str) -> bool:
        parts = name.split(".")
        if parts[0] not in allowed or any(not p.isidentifier() or p.startswith("_") for p in parts):
            return False
        return not any(".".join(parts[:i]) in denied for i in range(2, len(parts) + 1))

    def proxy(name: str) -> types.ModuleType:
        if name in provided:
            return provided[name]
        if name in cache:
            return cache[name]
        if not permitted(name):
            raise refuse(name)
        real = importlib.import_module(name)
        made = types.ModuleType(PROXY_PREFIX + name, getattr(real, "__doc__", None))
        cache[name] = made  # before filling it: packages and submodules refer to each other
        withheld = WITHHELD.get(name, frozenset())
        for attr, value in list(vars(real).items()):  # not dir(): no lazy __getattr__ imports
            if attr.startswith("_") or attr in withheld:
                continue
            if isinstance(value, types.ModuleType):
                sub = f"{name}.{attr}"
                if getattr(value, "__name__", None) == sub and permitted(sub):
                    setattr(made, attr, proxy(sub))
                continue
            setattr(made, attr, value)
        if "." in name:  # `import a.b` binds `a`, whose proxy must then have `b`
            parent, _, leaf = name.rpartition(".")
            setattr(proxy(parent), leaf, made)
        return made

    def candidate_import(
        name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> types.ModuleType:
        if level or not isinstance(name, str):
            raise ImportError("relative imports are not allowed in this sandbox")
        if name in provided:
            return provided[name]
        try:
            target = proxy(name)
        except ModuleNotFoundError:
            raise refuse(name) from None
        for item in fromlist or ():
            # `from a import b` where b is a submodule not yet loaded: load it the way import would.
            if isinstance(item, str) and not hasattr(target, item) and permitted(f"{name}.{item}"):
                # Not a submodule either: the name is simply missing, and the import says so.
                with contextlib.suppress(ModuleNotFoundError):
                    proxy(f"{name}.{item}")
        return target if fromlist else proxy(name.partition(".")[0])

    return candidate_import


def safe_builtins(importer: Importer) -> dict[str, Any]:
    """The builtins of a candidate's namespace: the real ones less HIDDEN_BUILTINS, with `importer`."""
    namespace = {key: value for key, value in vars(builtins).items() if key not in HIDDEN_BUILTINS}
    namespace["__import__"] = importer
    return namespace


def candidate_namespace(importer: Importer, name: str = "candidate") -> dict[str, Any]:
    """A fresh module namespace for candidate code."""
    return {"__builtins__": safe_builtins(importer), "__name__": name}


class EvaluationRefused(TypeError):
    """A string annotation or expression was to be evaluated in a candidate's process."""


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise EvaluationRefused(
        "evaluating text (string annotations, expressions) is not allowed in this sandbox"
    )


def disarm_evaluators() -> None:
    """In a fork that is about to load candidate code: every evaluator of text that library code
    reaches (typing's, inspect's with eval_str, pandas' expressions) refuses. Typing's evaluate with
    the real builtins when the object's globals are not at hand, whatever the candidate's namespace
    holds. Not undone: the fork ends with the call."""
    import typing

    for name in ("get_type_hints", "_eval_type", "evaluate_forward_ref"):
        if hasattr(typing, name):
            setattr(typing, name, _refuse)
    for name in ("_evaluate", "evaluate"):
        if hasattr(typing.ForwardRef, name):
            setattr(typing.ForwardRef, name, _refuse)
    inspect = sys.modules.get("inspect")
    if inspect is not None:
        get_annotations = inspect.get_annotations

        def annotations_unevaluated(
            obj: Any, *, globals: Any = None, locals: Any = None, eval_str: bool = False
        ) -> Any:
            return _refuse() if eval_str else get_annotations(obj, globals=globals, locals=locals)

        inspect.get_annotations = annotations_unevaluated
    pandas = sys.modules.get("pandas")
    if pandas is not None:
        pandas.eval = _refuse
        pandas.DataFrame.eval = pandas.DataFrame.query = _refuse
