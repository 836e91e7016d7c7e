"""Reading an attribute, or evaluating text, by a name the source does not show as `obj.name`: the Python
layers close the class, not the instance. The guard applies one attribute rule to every syntax that names
an attribute (properties over generated names), and what text can still reach at run time (text built
from pieces passes any guard) finds no evaluator and no string-to-attribute helper in the candidate's fork.

The two escapes that went through the guard on main: a class pattern's keyword reading
`operator.attrgetter` (codeopt), and `typing.get_type_hints` evaluating a string annotation with the real
builtins (hpo-covertype)."""

import keyword
import textwrap

import pytest
from codeopt_rewrites import REFERENCE_SOURCE
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autoresearch_mcp.sandbox.guard import (
    FORBIDDEN_NAMES,
    FRAME_ATTRIBUTES,
    TEXT_TO_CODE,
    GuardPolicy,
    check_source,
)

# The guard's policy as codeopt-records had it while it was a plugin (the guard still serves outside
# plugins and hpo-covertype): what it refuses, by name.
POLICY = GuardPolicy(
    allowed_imports=frozenset(
        {"collections", "itertools", "functools", "heapq", "operator", "math", "statistics", "bisect", "re"}
        | {"decimal", "fractions", "array", "copy", "typing"}
    ),
    extra_forbidden_names=frozenset({"attrgetter", "methodcaller", "get_type_hints", "ForwardRef"}),
    max_source_bytes=60_000,
    required_functions={"process_records": ("records",)},
)

# -- the guard: one rule for every syntax that names an attribute ---------------------------------

# Each reads the attribute `name` of `records` (or sets it, through a library that sets keyword
# arguments as attributes), in a syntax of its own.
ATTRIBUTE_SYNTAXES = {
    "attribute": "x = records.{name}",
    "class-pattern keyword": "match records:\n    case object({name}=x):\n        pass",
    "format field": 'x = "{{0.{name}}}".format(records)',
    "nested format spec": 'x = "{{0:{{1.{name}}}}}".format(1, records)',
}
# Text that names an attribute for a helper or for the interpreter to read later: an attrgetter path,
# a string annotation that typing evaluates, a class dict handed to type(), keyword names.
TEXT_SYNTAXES = {
    "attrgetter path": 'x = ("a.{name}",)',
    "string annotation": 'class C:\n    y: "lambda: records.{name}"',
    "type() dict key": 'C = type("C", (), {{"{name}": ("a",)}})',
    "f-string text": 'x = f"{{records}}.{name}"',
}
DUNDERS = st.from_regex(r"__[a-z][a-z0-9_]{0,10}__", fullmatch=True)
REFUSED = st.one_of(DUNDERS, st.sampled_from(sorted(FRAME_ATTRIBUTES | FORBIDDEN_NAMES | TEXT_TO_CODE)))
PUBLIC = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n) and n not in FORBIDDEN_NAMES | TEXT_TO_CODE | FRAME_ATTRIBUTES
)


def refused(line: str, policy=POLICY) -> bool:
    source = f"def process_records(records):\n{textwrap.indent(line, '    ')}\n    return {{}}\n"
    return check_source(source, policy) != []


@settings(max_examples=150, deadline=None)
@given(name=REFUSED, syntax=st.sampled_from(sorted(ATTRIBUTE_SYNTAXES)))
def test_a_name_refused_as_an_attribute_is_refused_in_every_syntax_that_reads_one(name: str, syntax: str):
    assume(refused(f"x = records.{name}"))  # __init__ is allowed, as an attribute too
    assert refused(ATTRIBUTE_SYNTAXES[syntax].format(name=name)), (syntax, name)


@settings(max_examples=150, deadline=None)
@given(name=PUBLIC, syntax=st.sampled_from(sorted(ATTRIBUTE_SYNTAXES)))
def test_a_public_attribute_is_allowed_in_every_syntax_that_reads_one(name: str, syntax: str):
    # The same rule both ways: nothing refused in one spelling that another admits, or the reverse.
    assert not refused(ATTRIBUTE_SYNTAXES[syntax].format(name=name)), (syntax, name)


@settings(max_examples=150, deadline=None)
@given(
    name=st.one_of(DUNDERS, st.sampled_from(sorted(FRAME_ATTRIBUTES))),
    syntax=st.sampled_from(sorted(TEXT_SYNTAXES)),
)
def test_text_naming_a_dunder_or_frame_attribute_is_refused_wherever_it_appears(name: str, syntax: str):
    assert refused(TEXT_SYNTAXES[syntax].format(name=name)), (syntax, name)


@settings(max_examples=100, deadline=None)
@given(name=DUNDERS)
def test_a_dunder_keyword_argument_is_refused(name: str):
    # type("C", (), dict(__match_args__=...)) and set_params(__class__=...) set attributes by name.
    assert refused(f"C = type('C', (), dict({name}=1))"), name


@pytest.mark.parametrize(
    "line",
    [
        "match records:\n    case list(first):\n        pass",  # reads what __match_args__ names
        "match records:\n    case object(a, b=x):\n        pass",
        "x = ('{0.real}' + '').format(1)",  # a format string that is not a literal
        "f = str.format",
        "x = '{}'.format_map({})",
        "x = '{0.__class__}'.format(records)",
        "x = '{0.gi_frame.f_back}'.format(records)",
    ],
)
def test_syntaxes_whose_attribute_reads_cannot_be_checked_are_refused(line: str) -> None:
    assert refused(line)


def test_a_docstring_may_mention_dunders_and_a_format_literal_its_fields() -> None:
    source = '''def process_records(records):
    """Like __init__, but faster; see gi_frame."""
    return {"n": "{0} of {1.real}".format(len(records), 2), "f": f"{len(records):>8}"}
'''
    assert check_source(source, POLICY) == []


CODEOPT_ESCAPE = """\
import operator


def process_records(records):
    match operator:
        case object(attrgetter=ag):
            base = ag("__class__.__base__")(())
            return ag("__subclasses__")(base)()
"""


def test_the_escape_that_passed_the_guard_is_refused() -> None:
    codeopt = check_source(CODEOPT_ESCAPE, POLICY)
    assert "line 6: in a class pattern: the attribute 'attrgetter' is not allowed" in codeopt


# -- at run time: text built from pieces finds nothing to turn it into code ----------------------

DUNDER = '_ = "_" * 2\n'  # text built at run time: no dunder in the source for the guard to see
ROUTES = {
    # The codeopt escape: attrgetter, by a class pattern's keyword.
    "class-pattern keyword to attrgetter": """\
        import operator
        match operator:
            case object(attrgetter=ag):
                FOUND.append(ag(_ + "class" + _)(()))
        """,
    "methodcaller": """\
        import operator
        FOUND.append(operator.methodcaller(_ + "reduce_ex" + _, 2))
        """,
    # The hpo escape, in codeopt's namespace (typing is allowed in both).
    "typing.get_type_hints on a string annotation": """\
        import typing
        class Door:
            key: "lambda: " + _ + "import" + _ + "('sys')"
        FOUND.append(typing.get_type_hints(Door)["key"]())
        """,
    "ForwardRef evaluation": """\
        import typing
        ref = typing.get_args(typing.Optional[_ + "import" + _ + "('sys')"])[0]
        FOUND.append(ref._evaluate({}, {}, frozenset()))
        """,
    # Passes the guard: functools resolves the annotation through typing, with the real builtins.
    "functools.singledispatch resolving an annotation": """\
        import functools
        grab = "[o for o in I('gc').get_objects() if type(o) is list and o[:1] == ['found']][0]"
        grab += ".append(I('sys')) or int"
        class Door:
            key: grab.replace("I", _ + "import" + _)
            def __call__(self, records):
                return records
        functools.singledispatch(len).register(Door())
        """,
}
PASSES_THE_GUARD = {"functools.singledispatch resolving an annotation"}


def escape_attempt(route: str) -> str:
    """train.py: the reference, after an attempt along `route`; it fails the benchmark when the
    attempt reached anything but a proxy or a plain value."""
    attempt = textwrap.indent(textwrap.dedent(ROUTES[route]), "    ")
    return (
        DUNDER
        + "FOUND = ['found']\ntry:\n"
        + attempt
        + "except Exception as refused:\n    FOUND.append(repr(refused)[:80])\n"
        + "REACHED = [x for x in FOUND[1:] if not isinstance(x, (str, type(None)))]\n\n\n"
        + REFERENCE_SOURCE.replace(
            "def process_records(records):\n",
            "def process_records(records):\n    if REACHED:\n        raise RuntimeError(f'reached {REACHED!r:.200}')\n",
        )
    )
