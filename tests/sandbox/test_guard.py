"""The AST guard: what it refuses, what it lets through, and that its messages say what to do instead."""

import textwrap

import pytest
from pydantic import ValidationError

from autoresearch_mcp.sandbox.guard import GuardPolicy, check_source

POLICY = GuardPolicy(
    allowed_imports=frozenset({"collections", "math", "operator"}),
    extra_forbidden_names=frozenset({"attrgetter"}),
    required_functions={"process_records": ("records",)},
)
OK_FUNCTION = "def process_records(records):\n    return {}\n"


def problems(source: str, policy: GuardPolicy = POLICY) -> list[str]:
    return check_source(textwrap.dedent(source), policy)


def test_a_clean_source_has_no_problems() -> None:
    source = """\
        import math
        from collections import Counter, defaultdict
        import collections.abc as abc


        def process_records(records):
            counts = Counter(r["city"] for r in records)
            return {"n": len(records), "root": math.sqrt(len(counts)), "abc": isinstance(counts, abc.Mapping)}
    """
    assert problems(source) == []


def test_a_syntax_error_is_reported_with_its_line_number() -> None:
    assert problems("x = 1\ndef f(:\n    pass\n") == ["line 2: syntax error: invalid syntax"]


def test_a_source_over_the_size_limit_is_refused_before_parsing() -> None:
    small = GuardPolicy(allowed_imports=frozenset(), max_source_bytes=50)
    assert problems("x = 1\n" * 20, small) == ["the source is 120 bytes; the limit is 50 bytes"]


@pytest.mark.parametrize("expression", ["-" * 50_000 + "1", "not " * 5_000 + "x"])
def test_absurdly_deep_nesting_is_refused_instead_of_crashing_the_checker(expression: str) -> None:
    assert problems(f"x = {expression}\n") == [
        "the source is nested too deeply to check; flatten the deepest expressions"
    ]


def test_an_import_outside_the_allowlist_names_the_line_and_the_allowed_modules() -> None:
    found = problems("import math\nimport os\n" + OK_FUNCTION)
    assert found == ["line 2: import of 'os' is not allowed; allowed: collections, math, operator"]


@pytest.mark.parametrize(
    "line",
    ["import os.path", "from os import path", "import subprocess as math", "from importlib import util"],
)
def test_dotted_and_aliased_imports_are_checked_by_their_first_component(line: str) -> None:
    assert any("is not allowed; allowed:" in p for p in problems(line + "\n" + OK_FUNCTION))


def test_relative_and_star_imports_are_refused() -> None:
    found = problems("from . import helpers\nfrom math import *\n" + OK_FUNCTION)
    assert found == [
        "line 1: relative imports are not allowed; import standard modules by name",
        "line 2: 'from math import *' is not allowed; import the names you use",
    ]


@pytest.mark.parametrize(
    "code",
    [
        "eval('1 + 1')",
        "exec('x = 1')",
        "compile('1', 'f', 'eval')",
        "open('/etc/passwd').read()",
        "getattr(records, 'append')",
        "setattr(records, 'x', 1)",
        "globals()['x'] = 1",
        "vars()",
        "breakpoint()",
        "exit(0)",
        "quit()",
        "memoryview(b'x')",
        "input()",
        "f = print if True else eval",
    ],
)
def test_builtins_for_dynamic_code_files_and_introspection_are_refused(code: str) -> None:
    found = problems(f"def process_records(records):\n    {code}\n    return {{}}\n")
    assert len(found) == 1 and found[0].startswith("line 2: the name '") and "is not allowed" in found[0]


def test_forbidden_names_are_refused_as_names_attributes_and_imports() -> None:
    source = """\
        import operator
        from operator import attrgetter


        def process_records(records):
            return operator.attrgetter("x")
    """
    assert problems(source) == [
        "line 2: the name 'attrgetter' is not allowed (forbidden: ForwardRef, __import__, _eval_type, "
        "_evaluate, attrgetter, breakpoint, compile, delattr, eval, evaluate_forward_ref, exec, exit, "
        "format_map, get_annotations, get_type_hints, getattr, globals, help, input, locals, memoryview, "
        "methodcaller, open, quit, setattr, vars)",
        "line 6: the attribute 'attrgetter' is not allowed",
    ]


@pytest.mark.parametrize(
    "code",
    [
        "().__class__.__base__.__subclasses__()",
        "process_records.__globals__",
        "records.__dict__",
        "__builtins__",
        "__import__('os')",
        "f'{records.__class__}'",
        "__name__ == '__main__'",
    ],
)
def test_dunder_attributes_and_names_are_refused(code: str) -> None:
    found = problems(f"def process_records(records):\n    x = {code}\n    return {{}}\n")
    assert found and all(p.startswith("line 2: ") and "is not allowed" in p for p in found)


def test_matching_a_class_pattern_on_a_dunder_attribute_is_refused() -> None:
    source = """\
        def process_records(records):
            match records:
                case object(__class__=kind):
                    return kind
    """
    assert problems(source) == [
        "line 3: in a class pattern: the attribute '__class__' is not allowed: dunder attributes reach "
        "interpreter internals"
    ]


@pytest.mark.parametrize(
    "code",
    ["gen.gi_frame.f_back.f_globals", "error.tb_frame", "frame.f_locals", "coro.cr_frame"],
)
def test_frame_and_traceback_attributes_are_refused(code: str) -> None:
    found = problems(f"def process_records(records):\n    x = {code}\n    return {{}}\n")
    assert found and all("is not allowed" in p for p in found)


def test_private_attributes_of_imported_modules_are_refused() -> None:
    source = """\
        import collections
        from collections import _count_elements


        def process_records(records):
            return collections._count_elements
    """
    assert problems(source) == [
        "line 2: importing the private name '_count_elements' is not allowed",
        "line 6: the private module attribute collections._count_elements is not allowed",
    ]


def test_defining_dunder_methods_slots_and_private_attributes_of_own_objects_is_allowed() -> None:
    source = """\
        class Item:
            __slots__ = ("key", "_rank")

            def __init__(self, key):
                super().__init__()
                self.key = key
                self._rank = 0

            def __lt__(self, other):
                return self.key < other.key


        def process_records(records):
            total = 0

            def add(value):
                nonlocal total
                total += value

            for r in records:
                add(r["salary"])
            return {"total": total, "first": sorted(Item(r["id"]) for r in records)[0]._rank}
    """
    assert problems(source) == []


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        (
            "def other(records):\n    return {}\n",
            "the required function `def process_records(records)` is missing",
        ),
        (
            "def process_records(records, cache={}):\n    return {}\n",
            "`def process_records(records, cache)` must",
        ),
        ("def process_records(*records):\n    return {}\n", "`def process_records(*records)` must keep"),
        ("def process_records(rows):\n    return {}\n", "`def process_records(rows)` must keep"),
        ("async def process_records(records):\n    return {}\n", "`async def process_records(records)`"),
        (
            "class A:\n    def process_records(records):\n        return {}\n",
            "is missing; define it at the top",
        ),
    ],
)
def test_a_missing_function_or_a_changed_signature_is_reported(definition: str, message: str) -> None:
    found = problems(definition)
    assert len(found) == 1 and message in found[0]


def test_missing_required_calls_are_reported_and_present_ones_accepted() -> None:
    policy = GuardPolicy(
        allowed_imports=frozenset({"harness"}), required_calls=("harness.evaluate", "harness.log", "main")
    )
    source = "import harness\nharness.evaluate([1])\n"
    assert problems(source, policy) == [
        "the source must call `harness.log(...)`",
        "the source must call `main(...)`",
    ]
    assert problems(source + "harness.log(a=1)\nmain()\n", policy) == []


def test_a_flood_of_problems_is_capped_with_a_count_of_the_rest() -> None:
    source = "".join(f"import os{i}\n" for i in range(30)) + OK_FUNCTION
    found = problems(source)
    assert len(found) == 13 and found[-1] == "... and 18 more problems"


def test_the_policy_is_frozen() -> None:
    with pytest.raises(ValidationError):
        POLICY.max_source_bytes = 1  # type: ignore[misc]
