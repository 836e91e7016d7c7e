"""AST guardrails: checked in the parent before a candidate runs, so obvious escapes never start a process.

The guard is the first of several layers (the child also runs candidates with restricted builtins, and the
OS limits what the process can touch); it refuses what a benchmark candidate has no business doing:
imports outside an allowlist, dynamic code, file and introspection builtins, dunder attributes (the
classic `().__class__.__subclasses__()` escape), frame and traceback internals, and private module
attributes. Messages name the line and say what is allowed instead, since an LLM reads them and retries.

Reading an attribute is one rule (`_attribute_problem`) whatever the syntax that names it: `obj.name`, a
class pattern's keyword (`case C(name=x)`), a keyword argument (which libraries set as an attribute), a
field of a format string (`"{0.name}"`), and text that names one (`attrgetter("a.b")`, a string
annotation, a dict key handed to `type()`): strings may not hold a dunder or frame attribute name, and
`.format` is called only on a literal whose fields are checked. Positional class patterns are refused:
they read the attributes a class's `__match_args__` names, which no source shows. Functions that turn
text into attribute reads or code are refused by name (TEXT_TO_CODE); the proxies leave them out and the
fork disarms what library code calls (proxies.py), since text can be built at run time.
"""

import ast
import re
import string

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
# Callables and methods that read attributes named by text, or evaluate text with the real builtins.
TEXT_TO_CODE = frozenset(
    {"attrgetter", "methodcaller", "get_type_hints", "ForwardRef", "_evaluate", "_eval_type"}
    | {"evaluate_forward_ref", "get_annotations", "format_map"}
)
# Dunders that only name the class being defined, never reach outside it.
ALLOWED_DUNDER_ATTRIBUTES = frozenset({"__init__"})
ALLOWED_DUNDER_NAMES = frozenset({"__slots__"})
MAX_PROBLEMS = 12
_DUNDER = re.compile(r"^__\w+__$")
# A dunder or frame attribute anywhere in a string, as a word of its own.
_NAMED_IN_TEXT = re.compile(r"__\w+__|\b(?:" + "|".join(sorted(FRAME_ATTRIBUTES)) + r")\b")


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
        self.forbidden = FORBIDDEN_NAMES | TEXT_TO_CODE | policy.extra_forbidden_names
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

    def _attribute_problem(self, attr: str, on_module: str | None = None) -> str | None:
        """Why reading `attr` is refused, however the source names it; None when it is allowed."""
        if _DUNDER.match(attr) and attr not in ALLOWED_DUNDER_ATTRIBUTES:
            return f"the attribute {attr!r} is not allowed: dunder attributes reach interpreter internals"
        if attr in self.forbidden or attr in FRAME_ATTRIBUTES:
            return f"the attribute {attr!r} is not allowed"
        if attr.startswith("_") and on_module is not None:
            return f"the private module attribute {on_module}.{attr} is not allowed"
        if attr.startswith("_") and not self.policy.private_attributes:
            return f"the private attribute {attr!r} is not allowed in this task"
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        base = node.value
        module = base.id if isinstance(base, ast.Name) and base.id in self.modules else None
        if problem := self._attribute_problem(node.attr, module):
            self._add(node, problem)
        elif node.attr == "format" and not (isinstance(base, ast.Constant) and isinstance(base.value, str)):
            # A format string's fields read attributes by name: only a literal's can be checked.
            self._add(node, "call .format only on a string literal (or use an f-string)")
        elif node.attr == "format":
            for field in _format_fields(base.value):
                for attr in field:
                    if problem := self._attribute_problem(attr):
                        self._add(node, f"in a format field: {problem}")
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        # `case C(name=x)` reads C's attribute `name`, with no Attribute node to see; `case C(x)` reads
        # the attributes C.__match_args__ names, which the source may not show at all.
        for attr in node.kwd_attrs:
            if problem := self._attribute_problem(attr):
                self._add(node, f"in a class pattern: {problem}")
        if node.patterns:
            self._add(node, "positional class patterns are not allowed; match keywords: `C(name=x)`")
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        # Libraries set keyword arguments as attributes (`set_params(**kw)`, `type(name, bases, dict(...))`).
        if node.arg is not None and _DUNDER.match(node.arg):
            self._add(node, f"the keyword argument {node.arg!r} is not allowed: dunder names reach internals")
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant):  # a docstring or a bare string: never read as a name
            return
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        # Text that names an attribute: attrgetter paths, format fields, string annotations, dict keys
        # handed to type(). Built at run time it passes; the proxies and the fork close those routes.
        if isinstance(node.value, str) and (found := _NAMED_IN_TEXT.search(node.value)):
            self._add(
                node, f"a string naming {found.group()!r} is not allowed: it reads interpreter internals"
            )

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


def _format_fields(text: str) -> list[list[str]]:
    """The attribute names each replacement field of a format string reads (`{0.a.b}` -> ["a", "b"]),
    nested format specs included; a malformed string gives one field that no rule allows."""
    fields: list[list[str]] = []
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return [["__malformed__"]]
    for _, field, spec, _ in parsed:
        if field:
            fields.append(re.findall(r"\.([^.\[]*)", field))
        if spec and "{" in spec:
            fields += _format_fields(spec)
    return fields


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
