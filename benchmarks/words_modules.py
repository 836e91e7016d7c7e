"""Count the product modules that hold words a model reads (prompts, summaries, instructions, hints),
and the lines of contract/ that are not the wire contract, at any commit (issue 47's two counts).

A module counts when one of its string literals (docstrings and comments left out) matches PHRASES,
phrases that only words addressed to a model use; a task's agent.json counts the same way. The wire
contract is WIRE: the tool table, each tool's arguments, the records, the refusals and the profile.

    python benchmarks/words_modules.py aea0719 main
"""

import ast
import re
import subprocess
import sys

PHRASES = re.compile(
    r"Reply with|reply DONE|DONE: <reason>|Next\?|Change at least one value|For example, set|"
    r"Try an idea|make a change|Call a tool|You (improve|tune|run|make|are|may)|[Yy]our (last )?reply|"
    r"Your (REVERT|edit|code)|Best: none yet|budget left|is early|First experiment"
)
ROOTS = ("server/", "client/", "autoresearch_mcp/", "sandbox/")
CONTRACT = "autoresearch_mcp/contract/"
WIRE = {"__init__.py", "arguments.py", "errors.py", "models.py", "profile.py", "tools.py"}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def literals(source: str) -> list[str]:
    """The module's string constants, its docstrings left out."""
    tree = ast.parse(source)
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def counts(rev: str) -> tuple[list[str], int, int]:
    files = git("ls-tree", "-r", "--name-only", rev).split()
    words, contract, wire = [], 0, 0
    for path in files:
        if not path.startswith(ROOTS) or "/dashboard/" in path:
            continue
        if not path.endswith((".py", "agent.json")):
            continue
        text = git("show", f"{rev}:{path}")
        if path.endswith(".py") and path.startswith(CONTRACT) and path.count("/") == 2:
            lines = text.count("\n")
            contract += lines
            wire += lines if path.rpartition("/")[2] in WIRE else 0
        found = literals(text) if path.endswith(".py") else [text]
        if any(PHRASES.search(s) for s in found):
            words.append(path)
    return words, contract, wire


if __name__ == "__main__":
    for rev in sys.argv[1:] or ["HEAD"]:
        words, contract, wire = counts(rev)
        print(f"{rev}: {len(words)} modules with a model's words; contract/ {contract} lines, {wire} wire,")
        print(f"  {contract - wire} not wire. Modules: {' '.join(words)}")
