"""Top-level functions of train.py, read by the AST: find one, and take a new definition of one back.

`replace_function` is the edit a model can make without copying anything: it sends one `def` with the
name and parameters of a function the file has, and everything else in the file stays as it was. Import
lines written before the def are added at the top of the file (a rewrite often needs `heapq` or
`Counter`). The client reads the same functions to show a model the part of the file it works on.

An artifact of several files (a task folder's `edit`, packed under header lines by files.py) is read
file by file; a function is then named by its name alone when one file defines it, else `file:name`.
"""

import ast
import textwrap
from dataclasses import dataclass

from autoresearch_mcp.contract import files as packing
from autoresearch_mcp.contract.edits import EditError

MODULE = "<module>"  # the file's top-level statements outside any def, as a profile names them


@dataclass(frozen=True)
class Function:
    """A top-level def: its name, the file it is in, its lines (decorators included), its source."""

    name: str
    file: str
    first_line: int
    last_line: int
    source: str
    signature: str  # `name(a, b=..., *args)`: what a replacement must keep


def signature_of(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """`name(a, b=..., *, c, **kw)`: the parameters by name and kind, defaults as `=...`."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    parts = [a.arg + ("=..." if d is not None else "") for a, d in zip(positional, defaults, strict=True)]
    if args.posonlyargs:
        parts.insert(len(args.posonlyargs), "/")
    if args.vararg:
        parts.append(f"*{args.vararg.arg}")
    elif args.kwonlyargs:
        parts.append("*")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        parts.append(arg.arg + ("=..." if default is not None else ""))
    if args.kwarg:
        parts.append(f"**{args.kwarg.arg}")
    return f"{node.name}({', '.join(parts)})"


def _defs(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def functions_in(source: str, file: str = "train.py") -> list[Function]:
    """The top-level functions of one file, in order; none when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines = source.splitlines()
    found = []
    for node in _defs(tree):
        first, last = _first_line(node), node.end_lineno or node.lineno
        text = "\n".join(lines[first - 1 : last]) + "\n"
        found.append(Function(node.name, file, first, last, text, signature_of(node)))
    return found


def split_files(text: str, names: list[str] | None) -> dict[str, str]:
    """The artifact's files (one file: the text as train.py, or as the one name given)."""
    if not names or len(names) == 1:
        return {(names or ["train.py"])[0]: text}
    return packing.unpack(text, names)


def all_functions(text: str, names: list[str] | None = None) -> list[Function]:
    """The top-level functions of every file of the artifact, file by file."""
    return [f for file, source in split_files(text, names).items() for f in functions_in(source, file)]


def find_function(text: str, name: str, names: list[str] | None = None) -> Function | None:
    """The function `name` (or `file:name`) names, when exactly one file defines it."""
    file, _, bare = name.rpartition(":")
    matches = [f for f in all_functions(text, names) if f.name == bare and (not file or f.file == file)]
    return matches[0] if len(matches) == 1 else None


def replace_function(text: str, name: str, new: str, names: list[str] | None = None) -> str:
    """The artifact with the top-level function `name` replaced by `new`: one def of the same name and
    parameters, optionally after import lines (added at the top of its file when missing). Everything
    else stays as it was. EditError says what is wrong, in words a model can act on."""
    files = split_files(text, names)
    file, _, bare = name.rpartition(":")
    holders = [f for f in all_functions(text, names) if f.name == bare and (not file or f.file == file)]
    known = ", ".join(f.signature for f in all_functions(text, names)) or "none"
    if not holders:
        raise EditError(f"train.py has no top-level function {name!r}; its functions: {known}")
    if len(holders) > 1:
        where = ", ".join(f"{f.file}:{f.name}" for f in holders)
        raise EditError(f"{len(holders)} files define {bare!r}: name one of {where}")
    old = holders[0]
    imports, node, body = _one_def(new, old.name)
    if signature_of(node) != old.signature:
        raise EditError(
            f"the new {old.name} must keep its parameters: {old.signature}, not {signature_of(node)}"
        )
    lines = files[old.file].split("\n")
    replaced = "\n".join(
        [*lines[: old.first_line - 1], *body.rstrip("\n").split("\n"), *lines[old.last_line :]]
    )
    files[old.file] = _with_imports(replaced, imports)
    if len(files) == 1:
        return next(iter(files.values()))
    return packing.pack(list(files.items()))


def _one_def(new: str, name: str) -> tuple[list[str], ast.FunctionDef | ast.AsyncFunctionDef, str]:
    """(the import lines, the def, the def's source) of a replacement; EditError unless it is one def
    named `name`, with nothing but imports before it."""
    source = textwrap.dedent(new.strip("\n")) + "\n"
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise EditError(f"the new {name} does not parse: line {exc.lineno}: {exc.msg}") from None
    defs = _defs(tree)
    others = [node for node in tree.body if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    if len(defs) != 1 or any(not isinstance(node, ast.Import | ast.ImportFrom) for node in others):
        found = ", ".join(d.name for d in defs) or "no def"
        raise EditError(
            f"send one function: a single `def {name}(...)` (import lines before it are added at the top "
            f"of the file); this held {found}"
            + (
                " and other statements"
                if len(others) > sum(isinstance(n, ast.Import | ast.ImportFrom) for n in others)
                else ""
            )
        )
    node = defs[0]
    if node.name != name:
        raise EditError(f"the function is named {node.name!r}; send `def {name}(...)`")
    if any(node.lineno < imp.lineno for imp in others):
        raise EditError("put the import lines before the def")
    lines = source.split("\n")
    imports = [ast.get_source_segment(source, imp) or "" for imp in others]
    body = "\n".join(lines[_first_line(node) - 1 : node.end_lineno])
    return [line for line in imports if line], node, body


def _with_imports(source: str, imports: list[str]) -> str:
    """`source` with each import statement it lacks added after its existing top-of-file imports."""
    present = {line.strip() for line in source.splitlines()}
    missing = [line for line in dict.fromkeys(imports) if line.strip() not in present]
    if not missing:
        return source
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "\n".join(missing) + "\n" + source
    at = 0  # after a module docstring and the imports that open the file
    for index, node in enumerate(tree.body):
        is_docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if is_docstring or isinstance(node, ast.Import | ast.ImportFrom):
            at = node.end_lineno or at
        else:
            break
    lines = source.split("\n")
    block = [*missing, "", ""] if at == 0 else missing
    return "\n".join([*lines[:at], *block, *lines[at:]])
