"""The README and docs/ stay true to the repository: links resolve, the README stays a short front door,
its tools table and layout tree match the code, and the reference tables match what they document."""

import ast
import json
import re
from pathlib import Path
from typing import get_args

import pytest

from autoresearch_mcp.contract import env
from autoresearch_mcp.contract.errors import RefusalKind
from autoresearch_mcp.contract.tools import TOOLS, ToolName
from autoresearch_mcp.server.query import VIEWS
from conftest import ROOT

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
# The folders whose modules and subpackages the README's layout tree must name.
PACKAGES = ["autoresearch_mcp", "server", "client", "sandbox"]
ARTIFACT = "train.py"  # the name of a run's mutable artifact, not a file of this repository


def prose(text: str) -> str:
    """The text outside code blocks (links inside them are examples, not links)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in prose(page.read_text()).splitlines() if line.startswith("#")}


def section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def table_rows(text: str) -> list[list[str]]:
    """The body rows of every Markdown table in `text`, as stripped cells."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not re.match(r"^\|[-| ]+\|$", line):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def declared_tools() -> dict[str, str]:
    """Every MCP tool, from the contract's table: name -> the module under server/tools/ whose function
    of the same name is the tool."""
    tools = {}
    for tool in TOOLS.values():
        path = f"server/tools/{tool.subject}.py"
        functions = {
            n.name for n in ast.parse((ROOT / path).read_text()).body if isinstance(n, ast.FunctionDef)
        }
        assert tool.name in functions, f"{path} has no function named {tool.name}"
        tools[tool.name] = path
    return tools


def check_arguments(name: str, cell: str) -> None:
    """A table's arguments cell names exactly the tool's arguments, with their defaults where it shows
    one (`budget=15`, `kind="strategy"`, `target=None`)."""
    fields = TOOLS[ToolName(name)].arguments.model_fields
    named = {}
    for token in re.findall(r"`([^`]+)`", cell):
        match = re.match(r"^(\w+)(?:=(.*))?$", token)
        if match:
            named[match[1]] = match[2]
    assert set(named) == set(fields), (
        f"{name}: the table names {sorted(named)}, the tool takes {sorted(fields)}"
    )
    for arg, shown in named.items():
        if shown is not None and re.match(r'^(-?[\d.]+|None|".*")$', shown):
            default = fields[arg].default
            assert shown == (json.dumps(default) if isinstance(default, str) else str(default)), (name, arg)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_points_at_a_file_that_exists(page: Path):
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"^[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{page.name}: broken links {broken}"


def test_the_readme_is_a_short_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= 220, f"README.md has {len(lines)} lines: move detail into docs/"


def test_no_page_points_outside_the_repository():
    for page in PAGES:
        for target in LINK.findall(prose(page.read_text())):
            if not re.match(r"^[a-z]+:", target):
                resolved = (page.parent / target.partition("#")[0]).resolve()
                assert resolved.is_relative_to(ROOT), f"{page.name} links outside the repository: {target}"


def test_the_readme_tools_table_names_every_tool_its_arguments_and_the_file_that_holds_it():
    tools = declared_tools()
    assert len(tools) == 16
    listed = {}
    for row in table_rows(section(README.read_text(), "Tools")):
        name = row[0].strip("`")
        if name in ("tool",):
            continue
        files = re.findall(r"\]\(([^)]+)\)", row[-1])
        assert files, f"README tools table: {name} names no file"
        listed[name] = files[0]
        check_arguments(name, row[1])
    assert listed == tools


def test_docs_tools_table_matches_the_contract():
    tools = declared_tools()
    rows = [
        r for r in table_rows(section((ROOT / "docs" / "tools.md").read_text(), "Tools")) if r[0] != "tool"
    ]
    assert {r[0].strip("`"): f"server/tools/{r[-1].strip('`')}" for r in rows} == tools
    for row in rows:
        check_arguments(row[0].strip("`"), row[1])
        read_only = TOOLS[ToolName(row[0].strip("`"))].annotations.read_only_hint
        assert row[3] == ("yes" if read_only else "no"), row[0]


def tree_entries() -> list[tuple[str, str]]:
    """The README layout tree as (path, description) pairs, paths relative to the repository root."""
    block = re.search(r"```\n(.*?)```", section(README.read_text(), "Layout"), re.S)
    assert block, "the Layout section has a tree"
    entries, stack = [], []
    for line in block.group(1).splitlines():
        match = re.match(r"^( *)(\S+)(?: +(.*))?$", line)
        if not match:
            continue
        indent, name, description = len(match.group(1)), match.group(2), match.group(3) or ""
        if indent == 0 and not name.endswith((".py", ".toml", "/")):
            continue  # a wrapped description line
        if indent > 0 and line[:22].strip() == "":
            continue  # a description continued on the next line
        depth = indent // 2
        stack = [*stack[:depth], name]
        entries.append(("".join(stack), description))
    return entries


def test_the_layout_tree_names_only_files_that_exist():
    missing = []
    for path, description in tree_entries():
        if not (ROOT / path).exists():
            missing.append(path)
        folder = path if path.endswith("/") else path.rpartition("/")[0] + "/" if "/" in path else ""
        for module in set(re.findall(r"\b[\w]+\.py\b", description)) - {ARTIFACT}:
            if not (ROOT / folder / module).exists() and not (ROOT / module).exists():
                missing.append(f"{folder}{module} (in the description of {path})")
    assert not missing, f"README layout names what does not exist: {missing}"


def test_the_layout_tree_names_every_subpackage_and_top_module():
    entries = tree_entries()
    named = {path for path, _ in entries}
    mentioned = named | {
        (path if path.endswith("/") else path.rpartition("/")[0] + "/") + module
        for path, description in entries
        for module in re.findall(r"\b[\w]+\.py\b", description)
    }
    missing = []
    for top in PACKAGES:
        for package in sorted((ROOT / top).rglob("__init__.py")):
            rel = package.parent.relative_to(ROOT).as_posix() + "/"
            if package.parent != ROOT / top and rel not in named:
                missing.append(rel)
        for module in sorted((ROOT / top).glob("*.py")):
            rel = module.relative_to(ROOT).as_posix()
            if module.name not in ("__init__.py", "__main__.py") and rel not in mentioned:
                missing.append(rel)
    assert not missing, f"add these to the README's Layout tree: {missing}"


def test_the_query_views_table_matches_the_code():
    rows = {r[0].strip("`"): r[1] for r in table_rows((ROOT / "docs" / "query-results.md").read_text())}
    rows.pop("view", None)
    assert set(rows) == set(VIEWS)
    for view, columns in VIEWS.items():
        documented = [re.sub(r"\s*\(.*?\)", "", c).strip() for c in rows[view].split(", ")]
        in_code = [re.sub(r"\s*\(.*?\)", "", c).strip() for c in columns.split(", ")]
        assert documented == in_code, view


def test_the_refusal_kinds_table_matches_the_code():
    text = section((ROOT / "docs" / "tools.md").read_text(), "Refusals")
    kinds = [r[0].strip("`") for r in table_rows(text) if r[0] != "kind"]
    assert kinds == list(get_args(RefusalKind))


def test_every_environment_variable_is_documented():
    names = [value for key, value in vars(env).items() if key.startswith("ENV_") and key != "ENV_PREFIX"]
    text = (ROOT / "docs" / "configuration.md").read_text()
    assert names and [n for n in names if n not in text] == []


# The README's results rows -> the committed study folder under benchmarks/results/ they come from.
RESULT_ROWS = {
    "hpo-covertype, 15 iterations": "hpo-15",
    "hpo-covertype, 200 iterations": "hpo-200",
    "codeopt-records, 40 iterations": "codeopt-40",
}


RESULT_MEASURES = {
    "billed tokens": "billed_tokens",
    "full tokens": "full_tokens",
    "context tokens": "context_tokens",
}


def test_the_readme_results_table_is_what_the_committed_results_say():
    rows = table_rows(section(README.read_text(), "Results"))
    checked = 0
    for label, strong, stateful, ratio, paper, paper_ratio, *_ in rows:
        study = next((folder for prefix, folder in RESULT_ROWS.items() if label.startswith(prefix)), None)
        if study is None:
            continue
        key = next(key for words, key in RESULT_MEASURES.items() if words in label)
        results = ROOT / "benchmarks" / "results" / study / "results.json"
        summary = json.loads(results.read_text())["summary"]
        # The headline: the strong baseline against stateful, then the paper's baseline beside it (a
        # study committed before the strong baseline existed says so).
        if "stateless-strong" in summary:
            assert strong == f"{summary['stateless-strong'][key]:,.0f}", label
            assert ratio == f"{summary['ratio_strong'][key]:.2f}x", label
        else:
            assert (strong, ratio) == ("not run", ""), label
        assert stateful == f"{summary['stateful'][key]:,.0f}", label
        assert paper == f"{summary['stateless'][key]:,.0f}", label
        assert paper_ratio == f"{summary['ratio'][key]:.1f}x", label
        checked += 1
    assert checked == 6


def test_ci_runs_the_browser_and_conformance_markers_from_the_files_that_hold_them():
    """.ci/run collects those two steps from their files alone: a test marked elsewhere would not run."""
    ci = (ROOT / ".ci" / "run").read_text()
    for marker, where in (
        ("browser", "tests/server/test_dashboard_browser.py"),
        ("conformance", "tests/conformance"),
    ):
        assert f"-m {marker} -n 0 -rs {where}" in ci
        holders = {
            str(path.relative_to(ROOT))
            for path in (ROOT / "tests").rglob("test_*.py")
            if f"pytest.mark.{marker}" in path.read_text()
        }
        assert holders and all(holder.startswith(where) for holder in holders), holders
