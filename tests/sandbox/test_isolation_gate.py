"""CI fails loudly where an isolation layer is missing (tests/isolation_gate.py): every layer's tests run
there, or the run fails; elsewhere they skip and say why."""

import pytest

import isolation_gate
from autoresearch_mcp.sandbox.isolation import weaker_guarantees

SKIPS = """
import pytest

@pytest.mark.skipif(True, reason="no Landlock here: files are not confined")
def test_files():
    pass

def test_processes():
    pytest.skip("no cgroup (cgroup2 is not delegated to this user)")

@pytest.mark.skipif(True, reason="syscall numbers of x86-64")
def test_platform():
    pass
"""


@pytest.mark.parametrize(
    ("required", "outcomes"), [(True, {"errors": 1, "failed": 1, "skipped": 1}), (False, {"skipped": 3})]
)
def test_where_every_layer_is_required_a_test_skipped_for_want_of_one_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, required: bool, outcomes: dict[str, int]
):
    monkeypatch.setattr(isolation_gate, "REQUIRED", required)
    pytester.makepyfile(SKIPS)
    result = pytester.runpytest("-p", "isolation_gate", "-p", "no:asyncio", "-p", "no:xdist", "-rs")
    result.assert_outcomes(**outcomes)  # a skipif fails the setup (an error), a skip() the call
    if required:
        result.stdout.fnmatch_lines(
            ["*AUTORESEARCH_TEST_REQUIRE_ISOLATION=1 and an isolation layer is missing here: no Landlock*"]
        )


@pytest.mark.skipif(
    not isolation_gate.REQUIRED,
    reason=f"{isolation_gate.VARIABLE}=1 is set on CI only (.ci/run), whose machine has every layer",
)
def test_where_every_layer_is_required_the_server_states_no_weaker_guarantee():
    assert weaker_guarantees() == []
