"""The code a reply holds: a whole file, or new versions of some of train.py's functions, and why a
block is plainly not what it claims to be (cut off, part of the file)."""

import ast
import builtins
import re
import symtable

from autoresearch_mcp.contract.edits import fence_body
from autoresearch_mcp.contract.functions import all_functions, functions_in


def cut_off(code: str, current: str) -> str | None:
    """Why a whole-file reply is plainly the start of one (None if it is not): a function that returns
    a value in the current train.py and, in the reply, never does. Taken as the whole file, a reply cut
    short would become the version every later one builds on."""
    try:
        new, old = ast.parse(code), ast.parse(current)
    except SyntaxError:
        return None  # the server's check says what is wrong with it
    returning = {f.name for f in _functions(old) if _returns_value(f)}
    for function in _functions(new):
        if function.name in returning and not _returns_value(function):
            return (
                f"Your python block's {function.name} never returns a value (train.py's does): it looks "
                f"like part of it. Send the whole new {function.name}, or SEARCH/REPLACE edits."
            )
    return None


def part_of_file(code: str, current: str, files: list[str] | None = None) -> str | None:
    """Why a block taken as the whole new train.py plainly is not one (None if it may be): it lacks
    functions train.py defines, or, in a file without functions, most of its lines. A short block that
    defines a helper of its own is meant to go into the file, not to replace it; taken as the file, it
    crashes, and the version to revert to is no longer the one in view."""
    have = {f.name for f in all_functions(code, files)}
    lacking = [f.name for f in all_functions(current, files) if f.name not in have]
    if lacking:
        return (
            f"Your python block is not all of train.py: it lacks {', '.join(lacking)}, which train.py "
            "defines. Send the whole new train.py, or the new version of one of its functions (the same "
            "name), or SEARCH/REPLACE edits."
        )
    if len(files or ()) <= 1 and (missing := _head_missing(code, current)):  # one file: its head
        return (
            f"Your python block is not all of train.py: it uses {', '.join(missing[:8])}"
            f"{' and more' if len(missing) > 8 else ''}, which train.py imports or defines and your block "
            "never does. Send the whole new train.py, from its first line (the imports) to its last."
        )
    if not all_functions(current, files) and 3 * len(code.splitlines()) < len(current.splitlines()):
        return (
            f"Your python block has {len(code.splitlines())} lines, train.py {len(current.splitlines())}: "
            "it looks like part of it. Send the whole new train.py, or SEARCH/REPLACE edits."
        )
    return None


def _head_missing(code: str, current: str) -> list[str]:
    """The module-level names the block reads, that train.py binds (imports, assignments) and the block
    never does: the top of the file left out (a file quoted from its middle, `W2 = rng.normal(...)`
    onwards). Taken as the file it crashes on the missing name, and sent again it is refused as a
    repeat of a version that crashed."""
    try:
        block, whole = symtable.symtable(code, "block", "exec"), symtable.symtable(current, "train", "exec")
    except SyntaxError:
        return []  # the server's check says what is wrong with it
    if re.search(r"^\s*from\s+\S+\s+import\s+\*", code, re.MULTILINE):
        return []  # a star import may bind any name
    bound = {s.get_name() for s in whole.get_symbols() if s.is_assigned() or s.is_imported()}
    defined = {s.get_name() for s in block.get_symbols() if s.is_assigned() or s.is_imported()}
    read = _global_reads(block)
    return sorted((read & bound) - defined - set(dir(builtins)))


def _global_reads(table: symtable.SymbolTable) -> set[str]:
    """The names a module or any scope in it reads from the module's globals."""
    names = {
        s.get_name()
        for s in table.get_symbols()
        if s.is_referenced() and (table.get_type() == "module" or s.is_global())
    }
    for child in table.get_children():
        names |= _global_reads(child)
    return names


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def _returns_value(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(node, ast.Return) and node.value is not None for node in ast.walk(function))


def function_versions(
    code: str, current: str, files: list[str] | None = None
) -> list[tuple[str, str]] | None:
    """New versions of some of train.py's top-level functions: a code block holding only defs that
    train.py has (and import lines), but not all of them, as replace_function's (name, source) pairs,
    the imports sent with the first. None when the block is a whole file (or not code at all)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    defs = functions_in(code)
    if not defs or len(imports) + len(defs) != len(tree.body):
        return None
    existing = {f.name for f in all_functions(current, files)}
    names = [f.name for f in defs]
    if not set(names) <= existing or len(set(names)) != len(names):
        return None
    if existing <= set(names) and _only_definitions(current):
        return None  # every function of a file that holds nothing else: the whole file
    lines = code.splitlines()
    header = "".join("\n".join(lines[node.lineno - 1 : node.end_lineno]) + "\n" for node in imports)
    return [(f.name, (header if i == 0 else "") + f.source) for i, f in enumerate(defs)]


def _only_definitions(source: str) -> bool:
    """Whether a file holds only imports, functions, classes and its docstring (no code at module level:
    a script that trains in a loop there is more than a block with its one function)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    kinds = ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    docstring = (
        [0] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else []
    )
    return all(isinstance(node, kinds) for i, node in enumerate(body) if i not in docstring)


CODE_MARKER = re.compile(r"^CODE:", re.MULTILINE)
PROMPT_LABEL = re.compile(r"^(?:Benchmark:|=== Iteration \d+)", re.MULTILINE)


def parse_code(text: str) -> str | None:
    """The proposed source: after `CODE:` at the start of a line (fenced or not), else the last fenced
    python block holding a `def` (small models often drop the marker and answer with a plain code block).
    A marker elsewhere is not one: a reply that echoes "Reply with CODE: and the complete file." after
    its block, or opens the block with `# CODE:`, would have its prose taken for the code."""
    found = CODE_MARKER.search(text)
    if found is not None:
        body = text[found.end() :].strip("\n")
        if "```" in body:
            body = _fenced_blocks(body)[0] if _fenced_blocks(body) else body.replace("```", "")
    else:
        blocks = [b for b in _fenced_blocks(text) if "def " in b]
        if not blocks:
            return None
        body = blocks[-1]
    # The stateless prompt lists each version as `Code:`, the code, `Benchmark:`, its result, unfenced,
    # and a reply that follows that layout ends its file with "Benchmark:" (invalid syntax). No Python
    # line is a bare label at column 0, so the code ends there.
    body = PROMPT_LABEL.split(body, maxsplit=1)[0]
    body = body.strip("\n") + "\n"
    return body if body.strip() else None


def _fenced_blocks(text: str) -> list[str]:
    """The bodies of ```-fenced blocks, without their language tag."""
    return [fence_body(block) for block in text.split("```")[1::2]]
