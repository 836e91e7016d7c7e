"""AST guardrails: checked in the parent before a candidate runs, so obvious escapes never start a process.

The guard is the first of several layers (the child also runs candidates with restricted builtins, and the
OS limits what the process can touch); it refuses what a benchmark candidate has no business doing:
imports outside an allowlist, dynamic code, file and introspection builtins, dunder attributes (the
classic `().__class__.__subclasses__()` escape), frame and traceback internals, and private module
attributes. Messages name the line and say what is allowed instead, since an LLM reads them and retries.
"""

import ast
import re

from pydantic import BaseModel, ConfigDict, Field

FORBIDDEN_NAMES = frozenset(
    {"eval", "exec", "compile", "open", "__import__", "globals", "locals", "vars", "getattr", "setattr"}
    | {"delattr", "input", "breakpoint", "exit", "quit", "help", "memoryview"}
)
# Attributes that reach live frames, and through them the harness's globals (the timer, the result).
FRAME_ATTRIBUTES = frozenset(
    {"gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code"}
    | {
        "ag_await",
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_code",
        "f_trace",
        "tb_frame",
        "tb_next",
    }
)
# Dunders that only name the class being defined, never reach outside it.
ALLOWED_DUNDER_ATTRIBUTES = frozenset({"__init__"})
ALLOWED_DUNDER_NAMES = frozenset({"__slots__"})
MAX_PROBLEMS = 12
_DUNDER = re.compile(r"^__\w+__$")


class GuardPolicy(BaseModel):
    """What one task allows its candidate source to contain."""

    model_config = ConfigDict(frozen=True)

    allowed_imports: frozenset[str] = Field(description="top-level module names a candidate may import")
    extra_forbidden_names: frozenset[str] = frozenset()
    max_source_bytes: int = Field(default=100_000, ge=1)
    private_attributes: bool = Field(
        default=True, description="allow `obj._name` (private attributes of modules are refused always)"
    )
    required_functions: dict[str, tuple[str, ...]] = Field(
        default_factory=dict, description="function name -> its exact positional parameter names"
    )
    required_calls: tuple[str, ...] = Field(default=(), description='e.g. "harness.evaluate" or "evaluate"')


def check_source(source: str, policy: GuardPolicy) -> list[str]:
    """Problems with `source` under `policy`, one actionable line each; empty when it may run."""
    size = len(source.encode("utf-8", errors="replace"))
    if size > policy.max_source_bytes:
        return [f"the source is {size} bytes; the limit is {policy.max_source_bytes} bytes"]
    try:
        tree = ast.parse(source)
        checker = _Checker(policy)
        checker.visit(tree)
    except SyntaxError as exc:
        return [f"line {exc.lineno}: syntax error: {exc.msg}"]
    except ValueError as exc:  # e.g. a NUL byte
        return [f"the source cannot be parsed: {exc}"]
    except (MemoryError, RecursionError):  # the parser and the walk recurse with the nesting
        return ["the source is nested too deeply to check; flatten the deepest expressions"]
    problems = list(dict.fromkeys(checker.problems))
    problems += _missing_functions(tree, policy) + _missing_calls(tree, policy)
    if len(problems) > MAX_PROBLEMS:
        problems = [*problems[:MAX_PROBLEMS], f"... and {len(problems) - MAX_PROBLEMS} more problems"]
    return problems


class _Checker(ast.NodeVisitor):
    def __init__(self, policy: GuardPolicy) -> None:
        self.policy = policy
        self.forbidden = FORBIDDEN_NAMES | policy.extra_forbidden_names
        self.allowed = ", ".join(sorted(policy.allowed_imports)) or "none"
        self.modules: set[str] = set()  # names bound to imported modules
        self.problems: list[str] = []

    def _add(self, node: ast.AST, text: str) -> None:
        self.problems.append(f"line {getattr(node, 'lineno', '?')}: {text}")

    def _check_bound_name(self, node: ast.AST, name: str, what: str) -> None:
        if name in self.forbidden:
            self._add(
                node, f"{what} {name!r} is not allowed (forbidden: {', '.join(sorted(self.forbidden))})"
            )
        elif _DUNDER.match(name) and name not in ALLOWED_DUNDER_NAMES:
            self._add(node, f"{what} {name!r} is not allowed: dunder names reach interpreter internals")

    def _check_module(self, node: ast.AST, module: str) -> bool:
        top = module.split(".")[0]
        if top in self.policy.allowed_imports:
            return True
        self._add(node, f"import of {module!r} is not allowed; allowed: {self.allowed}")
        return False

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if self._check_module(node, alias.name):
                self.modules.add(alias.asname or alias.name.split(".")[0])
            if alias.asname:
                self._check_bound_name(node, alias.asname, "the name")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self._add(node, "relative imports are not allowed; import standard modules by name")
            return
        if not self._check_module(node, node.module or ""):
            return
        for alias in node.names:
            if alias.name == "*":
                self._add(node, f"'from {node.module} import *' is not allowed; import the names you use")
            elif alias.name.startswith("_"):
                self._add(node, f"importing the private name {alias.name!r} is not allowed")
            else:
                self._check_bound_name(node, alias.name, "the name")
            if alias.asname:
                self._check_bound_name(node, alias.asname, "the name")

    def visit_Name(self, node: ast.Name) -> None:
        allowed = node.id in ALLOWED_DUNDER_NAMES and isinstance(node.ctx, ast.Store)
        if not allowed:
            self._check_bound_name(node, node.id, "the name")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if _DUNDER.match(attr) and attr not in ALLOWED_DUNDER_ATTRIBUTES:
            self._add(
                node, f"the attribute {attr!r} is not allowed: dunder attributes reach interpreter internals"
            )
        elif attr in self.forbidden or attr in FRAME_ATTRIBUTES:
            self._add(node, f"the attribute {attr!r} is not allowed")
        elif attr.startswith("_") and isinstance(node.value, ast.Name) and node.value.id in self.modules:
            self._add(node, f"the private module attribute {node.value.id}.{attr} is not allowed")
        elif attr.startswith("_") and not self.policy.private_attributes:
            self._add(node, f"the private attribute {attr!r} is not allowed in this task")
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        # `case object(__class__=c)` reads an attribute without an Attribute node.
        for attr in node.kwd_attrs:
            if _DUNDER.match(attr) or attr in FRAME_ATTRIBUTES:
                self._add(node, f"matching on the attribute {attr!r} is not allowed")
        self.generic_visit(node)

    def _visit_bindings(self, node: ast.AST, names: list[str]) -> None:
        for name in names:
            self._check_bound_name(node, name, "the name")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self._visit_bindings(node, node.names)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self._visit_bindings(node, node.names)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        self._visit_bindings(node, [node.name] if node.name else [])

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        self._visit_bindings(node, [node.name] if node.name else [])

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        self._visit_bindings(node, [node.name] if node.name else [])

    def visit_arg(self, node: ast.arg) -> None:
        self._visit_bindings(node, [node.arg])


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    args = node.args
    parts = [a.arg for a in args.posonlyargs + args.args]
    if args.vararg:
        parts.append("*" + args.vararg.arg)
    parts += [a.arg for a in args.kwonlyargs]
    if args.kwarg:
        parts.append("**" + args.kwarg.arg)
    return f"def {node.name}({', '.join(parts)})"


def _missing_functions(tree: ast.Module, policy: GuardPolicy) -> list[str]:
    defined = {
        node.name: node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    problems = []
    for name, params in policy.required_functions.items():
        wanted = f"def {name}({', '.join(params)})"
        node = defined.get(name)
        if node is None:
            problems.append(f"the required function `{wanted}` is missing; define it at the top level")
        elif isinstance(node, ast.AsyncFunctionDef) or _signature(node) != wanted:
            kind = "async " if isinstance(node, ast.AsyncFunctionDef) else ""
            problems.append(
                f"line {node.lineno}: `{kind}{_signature(node)}` must keep the signature `{wanted}`"
            )
    return problems


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _missing_calls(tree: ast.Module, policy: GuardPolicy) -> list[str]:
    if not policy.required_calls:
        return []
    called = {_dotted(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return [f"the source must call `{name}(...)`" for name in policy.required_calls if name not in called]
