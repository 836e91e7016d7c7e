"""Reading text replies: the edit forms Qwen2.5-Coder-1.5B wrote when asked for SEARCH/REPLACE edits
(the replies below are its own, from probes of codeopt-records' first turn), and the whole-file check."""

from pathlib import Path

import pytest

from autoresearch_mcp.client.code_blocks import cut_off, parse_code
from autoresearch_mcp.client.prompts import text_format, text_nudge
from autoresearch_mcp.client.replies import TextReply, read_text_reply
from autoresearch_mcp.client.search_replace import parse_edits, whole_file_edit
from autoresearch_mcp.contract.edits import EditError, apply_edits

AIDER = """Read the records in place.
```python
<<<<<<< SEARCH
    for key in sorted(team_sizes):
=======
    for key in team_sizes:
>>>>>>> REPLACE
```
<<<<<<< SEARCH
a = 1
=======
a = 2
>>>>>>> REPLACE"""

NO_OPENING_MARKER = """Change: Use set() to get unique values and avoid duplicates.
SEARCH
    for record in data:
        copy["skills"] = list(record["skills"])
=======
    for record in data:
        copy["skills"] = set(record["skills"]) # Use set to get unique values
>>>>>>> REPLACE"""

FENCE_THEN_DIVIDER = """Change: Replace `copy["skills"] = list(record["skills"])` with `copy["skills"] = record["skills"].copy()`

SEARCH/REPLACE edits:
```python
for record in records:
    copy["skills"] = list(record["skills"])
=======
    for record in records:
        copy["skills"] = record["skills"].copy()
>>>>>>> REPLACE
```"""

LABELLED_FENCES = """Change: Remove the list comprehension in `department_sizes`.
SEARCH:
```python
for key in sorted(team_sizes):
```
REPLACE:
```python
for i in range(len(team_sizes)):
```
Next? One line on what you change, then SEARCH/REPLACE edits."""

REPLACE_WITH_ONLY = """Remove the sorting in the `team_sizes` loop.

```python
for key in sorted(team_sizes):
```

REPLACE with

```python
for key in team_sizes:
```
Benchmarking shows a 20% speedup."""

ONE_LINE = """Change the for loop to use a generator expression.

Search: `salary_max[dept] = record["salary"]`
Replace: `salary_max = {dept: max(record["salary"] for record in data)}`"""


@pytest.mark.parametrize(
    ("reply", "edits"),
    [
        (
            AIDER,
            [
                ("    for key in sorted(team_sizes):\n", "    for key in team_sizes:\n"),
                ("a = 1\n", "a = 2\n"),
            ],
        ),
        (
            NO_OPENING_MARKER,
            [
                (
                    '    for record in data:\n        copy["skills"] = list(record["skills"])\n',
                    '    for record in data:\n        copy["skills"] = set(record["skills"]) # Use set to get unique values\n',
                )
            ],
        ),
        (
            FENCE_THEN_DIVIDER,
            [
                (
                    'for record in records:\n    copy["skills"] = list(record["skills"])\n',
                    '    for record in records:\n        copy["skills"] = record["skills"].copy()\n',
                )
            ],
        ),
        (LABELLED_FENCES, [("for key in sorted(team_sizes):\n", "for i in range(len(team_sizes)):\n")]),
        (REPLACE_WITH_ONLY, [("for key in sorted(team_sizes):\n", "for key in team_sizes:\n")]),
        (
            ONE_LINE,
            [
                (
                    'salary_max[dept] = record["salary"]\n',
                    'salary_max = {dept: max(record["salary"] for record in data)}\n',
                )
            ],
        ),
        (
            "Search: for record in data:\nReplace with: for record in sorted(data):\n=======",
            [("for record in data:\n", "for record in sorted(data):\n")],
        ),
        (
            "Replace `active_counts[dept] = active_counts[dept] + 1` with `active_counts[dept] += 1`. Replace "
            "`top = top_earners[dept]` with `top = sorted(top_earners[dept])`.",
            [
                ("active_counts[dept] = active_counts[dept] + 1", "active_counts[dept] += 1"),
                ("top = top_earners[dept]", "top = sorted(top_earners[dept])"),
            ],
        ),
        (
            "Change `active_counts[dept] = active_counts[dept] + 1` to `active_counts[dept] += 1`. This change",
            [("active_counts[dept] = active_counts[dept] + 1", "active_counts[dept] += 1")],
        ),
        (
            "Change: replace the line `salary_totals[dept] = salary_totals[dept] + 1` with `salary_totals[dept] += 1`",
            [("salary_totals[dept] = salary_totals[dept] + 1", "salary_totals[dept] += 1")],
        ),
        (
            "change: replace '    for record in data:' with '    for record in records:'",
            [("    for record in data:", "    for record in records:")],
        ),
        ("Change: x\n<<<<<<< SEARCH\n=======\n>>>>>>> REPLACE", [("", "")]),  # empty: the agent refuses it
        (
            "<<<<<<< SEARCH\n```python\na = 1\n```\n=======\n```python\na = 2\n```\n>>>>>>> REPLACE",
            [("a = 1\n", "a = 2\n")],
        ),
    ],
)
def test_every_edit_form_the_real_model_wrote_is_read_as_the_search_and_replace_it_meant(
    reply: str, edits: list[tuple[str, str]]
):
    assert parse_edits(reply) == edits


def test_replies_without_edits_are_not_taken_for_edits():
    whole_file = "Faster.\n```python\ndef f(xs):\n    return sum(xs)\n```"
    assert parse_edits(whole_file) is None and parse_code(whole_file) == "def f(xs):\n    return sum(xs)\n"
    assert parse_edits("Change: Remove the sorted() calls. SEARCH/REPLACE\n```\nfor d in x:\n```") is None
    assert parse_edits("REVERT v2") is None
    # The first line describing a whole file in the same reply: the file is the proposal.
    described = "Change `a = a + 1` to `a += 1`.\n```python\ndef f(a):\n    a += 1\n    return a\n```"
    assert parse_edits(described) is None and parse_code(described) is not None


SOURCE = "def f(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n"


def test_an_edit_copied_flush_left_applies_where_exactly_one_place_matches_and_the_replacement_lands_there():
    flush_left = apply_edits(SOURCE, [("for x in xs:\n    total += x\n", "total = sum(xs)\n")])
    assert flush_left == "def f(xs):\n    total = 0\n    total = sum(xs)\n    return total\n"
    # A replacement the model did indent is not indented twice.
    indented = apply_edits(
        SOURCE, [("for x in xs:\n    total += x\n", "    for x in xs:\n        total += 2 * x\n")]
    )
    assert indented == SOURCE.replace("total += x", "total += 2 * x")
    with pytest.raises(EditError, match="not found"):  # relative indentation must still match
        apply_edits(SOURCE, [("for x in xs:\ntotal += x\n", "pass\n")])
    twice = SOURCE + "def g(xs):\n    for x in xs:\n        total += x\n"
    with pytest.raises(EditError, match="not found"):  # two places: ambiguous, nothing applied
        apply_edits(twice, [("for x in xs:\n    total += x\n", "pass\n")])


def test_a_whole_file_reply_whose_function_stops_returning_is_taken_for_a_cut_off_start():
    fragment = "def f(xs):\n    total = 0\n"
    assert cut_off(fragment, SOURCE) is not None and "f never returns a value" in (
        cut_off(fragment, SOURCE) or ""
    )
    assert cut_off("def f(xs):\n    return sum(xs)\n", SOURCE) is None
    assert cut_off("def f(xs:\n", SOURCE) is None  # a syntax error is the server's to explain


def test_an_empty_search_over_a_whole_file_is_that_file_and_over_anything_else_is_not():
    reply = "CHANGE:\n- Remove a list copy\n=======\n```python\ndef f(xs):\n    return sum(xs)\n```"
    edits = parse_edits(reply)
    assert edits is not None and whole_file_edit(edits) == "def f(xs):\n    return sum(xs)\n"
    assert whole_file_edit([("", "x = 1\n")]) is None
    assert whole_file_edit([("a = 1\n", "def f(): pass\n")]) is None


def test_a_text_reply_asks_for_exactly_one_thing_and_what_cannot_be_used_is_refused_with_its_kind():
    whole = f"Sum at once.\n```python\n{SOURCE.replace('total += x', 'total += x  # summed')}```"
    edit = "Double it.\nSEARCH\ntotal += x\n=======\ntotal += 2 * x\n>>>>>>> REPLACE"
    assert read_text_reply(whole, SOURCE, ran_well=True) == TextReply(
        "source", source=SOURCE.replace("total += x", "total += x  # summed")
    )
    assert read_text_reply(edit, SOURCE, ran_well=True) == TextReply(
        "edits", edits=[("total += x\n", "total += 2 * x\n")]
    )
    assert read_text_reply("REVERT v2", SOURCE, ran_well=True) == TextReply("revert", version=2)
    assert read_text_reply("DONE: nothing left", SOURCE, ran_well=True).action == "done"
    assert read_text_reply("DONE: nothing left", SOURCE, ran_well=False) == TextReply(
        "refused", kind="unparsed_reply"
    )
    assert read_text_reply("I would sort it.", SOURCE, ran_well=True) == TextReply(
        "refused", kind="unparsed_reply"
    )
    cut = read_text_reply("```python\ndef f(xs):\n    total = 0\n```", SOURCE, ran_well=True)
    assert cut.kind == "cut_off_code" and "never returns a value" in (cut.why_not or "")
    empty = read_text_reply("SEARCH\n=======\ntotal = 1\n>>>>>>> REPLACE", SOURCE, ran_well=True)
    assert empty.kind == "empty_edit" and "SEARCH part was empty" in (empty.why_not or "")
    # An edit and a revert in one reply: the edit is what the reply does.
    assert read_text_reply(f"{edit}\nor REVERT v1", SOURCE, ran_well=True).action == "edits"


DIGITS_TRAIN = (Path(__file__).parents[2] / "examples" / "tasks" / "digits-mlp" / "train.py").read_text()
# Qwen2.5-Coder-1.5B's first reply to digits-mlp's 53-line train.py, word for word (seed 42).
HELPER_ONLY = """>>>>>>> REPLACE
>>> replace the `import prepare` line with an import for a new function or class that will be used to generate data batches faster. For example:

```python
def faster_data_batch_generator(rng, y_train, BATCH):
    # Implement a more efficient way of generating batches here
    return batch

# Replace the existing `batch = rng.integers(0, len(y_train), BATCH)` line with this new one
batch = faster_data_batch_generator(rng, y_train, BATCH)
```"""


def test_a_block_that_lacks_the_files_functions_is_refused_not_taken_as_the_whole_file():
    reply = read_text_reply(HELPER_ONLY, DIGITS_TRAIN, ran_well=False)
    assert reply.action == "refused" and reply.kind == "part_of_file"
    assert "it lacks forward, which train.py defines" in (reply.why_not or "")
    # the whole file with a change is still a whole file
    whole = f"Wider.\n```python\n{DIGITS_TRAIN.replace('HIDDEN = 32', 'HIDDEN = 64')}```"
    assert read_text_reply(whole, DIGITS_TRAIN, ran_well=False).action == "source"
    # a file without functions: a block of a third of its lines or less is part of it
    flat = "".join(f"x{i} = {i}\n" for i in range(30))
    short = read_text_reply("```python\nx0 = 1\ndef f():\n    return 1\n```", flat, ran_well=True)
    assert short.kind == "part_of_file" and "3 lines, train.py 30" in (short.why_not or "")


def test_a_block_that_reads_names_only_the_top_of_train_py_defines_is_refused_before_it_runs():
    """Seeds 123 and 456 of digits-mlp at 9cf0ae3: the 1.5B model answered the whole-file turn with the
    file from `W2 = rng.normal(...)` to its end (this reply, word for word, but for the file's own
    constants); taken as the file, each crashed on `rng`, and sent again it was refused as a repeat."""
    tail = DIGITS_TRAIN[DIGITS_TRAIN.index("W2 = rng.normal") :]
    reply = read_text_reply(
        f"Change the learning rate from 0.05 to 0.01 for better performance.\n```python\n{tail}```",
        DIGITS_TRAIN,
        ran_well=True,
    )
    assert reply.action == "refused" and reply.kind == "part_of_file"
    assert (reply.why_not or "").startswith(
        "Your python block is not all of train.py: it uses BATCH, HIDDEN, LEARNING_RATE, X_train, X_val,"
        " np, prepare, rng and more, which train.py imports or defines and your block never does."
    )
    # the agents pass the task's files, ["train.py"] for one file: the same refusal
    named = read_text_reply(f"```python\n{tail}```", DIGITS_TRAIN, ran_well=True, files=["train.py"])
    assert named.kind == "part_of_file" and "your block never does" in (named.why_not or "")
    # a whole file that dropped one import (seed 42, three crashes in a row) names that one
    no_json = read_text_reply(f"```python\n{DIGITS_TRAIN.replace('import json', '')}```", DIGITS_TRAIN, True)
    assert no_json.kind == "part_of_file" and "it uses json, which" in (no_json.why_not or "")
    # a star import may bind anything: the block is the file, and the run says what it lacks
    star = DIGITS_TRAIN.replace("import json", "from json import *")
    assert read_text_reply(f"```python\n{star}```", DIGITS_TRAIN, True).action == "source"


def test_done_ends_the_run_only_once_an_experiment_ran_well():
    early = read_text_reply(
        "DONE: No improvements observed after the 14th run.", DIGITS_TRAIN, ran_well=False
    )
    assert early == TextReply("refused", kind="unparsed_reply")
    assert "No version has run well yet: DONE is early." in text_nudge(
        "DONE: No improvements observed", latest_version=2, ran_well=False
    )
    assert "DONE" not in text_format(latest_version=2, offer_done=False)
    assert "DONE: <reason>" in text_format(latest_version=2, offer_done=True)
    # after a turn that showed the whole file, a refusal asks for the whole file too, not a function
    whole = text_format(latest_version=2, offer_done=False, whole_file=True)
    assert "the whole new train.py" in whole and "one def" not in whole
    assert "the whole new train.py" in text_nudge("hm", latest_version=2, ran_well=False, whole_file=True)


def test_a_reply_that_opens_with_revert_is_a_revert_when_its_code_is_the_current_version_already():
    # Qwen2.5-Coder-1.5B's reply on digits-mlp seed 42, word for word but for its last sentence: its
    # forward is the one train.py v2 (current, crashed) has, so only the revert changes anything.
    crashed_forward = "def forward(X):\n    h = np.tanh(X @ W1 + b1)\n    p = h @ W2 + b2\n    return h, p / p.sum(axis=1, keepdims=True)\n"
    original_forward = DIGITS_TRAIN[DIGITS_TRAIN.index("def forward") : DIGITS_TRAIN.index("\n\n\nbudget")]
    v2 = DIGITS_TRAIN.replace(original_forward, crashed_forward.rstrip("\n"))
    reply = (
        "REVERT v1\n\n=======\n\n```python\n" + crashed_forward + "\n# Rest of the train.py file...\n"
        "```\n\nIn this new version, I've reverted to the previous version of `forward`."
    )
    assert read_text_reply(reply, v2, ran_well=False) == TextReply("revert", version=1)
    assert read_text_reply("REVERT v1", v2, ran_well=False) == TextReply("revert", version=1)


def test_a_reply_that_opens_with_revert_and_holds_a_new_whole_file_is_that_file():
    # digits-mlp seed 123: "REVERT v2" while v2 was current, then a whole train.py that differs from it,
    # five times; read as reverts, each changed nothing.
    new_file = DIGITS_TRAIN.replace("HIDDEN = 32", "HIDDEN = 64")
    reply = f"REVERT v2\n\nDouble the hidden layer.\n```python\n{new_file}```"
    assert read_text_reply(reply, DIGITS_TRAIN, ran_well=True) == TextReply("source", source=new_file)
    # the same file as the current one: the revert is all the reply can mean
    same = f"REVERT v1\n```python\n{DIGITS_TRAIN}```"
    assert read_text_reply(same, DIGITS_TRAIN, ran_well=True) == TextReply("revert", version=1)


def test_a_revert_is_a_line_that_says_so_not_a_mention_in_prose():
    # digits-mlp seed 456: the model's own replies, no code in them
    for prose in (
        "Change the learning rate to 0.1 (revert... v3)",
        "Change the learning rate to 0.01 (reverted v3): `LEARNING_RATE = 0.01`",
    ):
        assert read_text_reply(prose, DIGITS_TRAIN, ran_well=True) == TextReply(
            "refused", kind="unparsed_reply"
        )
    for line in (
        "REVERT v2",
        "Sure.\nREVERT v2",
        "**Revert to v2**",
        "revert: 2",
        "> REVERT v2",
        "# revert to version 2",
    ):
        assert read_text_reply(line, DIGITS_TRAIN, ran_well=True) == TextReply("revert", version=2)


def test_an_edit_offering_a_revert_at_its_end_is_the_edit():
    edit = "Double it.\nSEARCH\ntotal += x\n=======\ntotal += 2 * x\n>>>>>>> REPLACE\nor REVERT v1"
    assert read_text_reply(edit, SOURCE, ran_well=True).action == "edits"


def test_a_block_with_the_one_function_of_a_file_that_trains_at_module_level_is_that_function():
    # digits-mlp's train.py has one function and its training loop at module level: a block holding
    # only a new forward is forward's new version, not a 6-line whole file.
    forward = "def forward(X):\n    h = np.maximum(X @ W1 + b1, 0)\n    return h, h @ W2 + b2\n"
    reply = read_text_reply(f"ReLU.\n```python\n{forward}```", DIGITS_TRAIN, ran_well=True)
    assert reply == TextReply("functions", functions=[("forward", forward)])


def test_a_whole_file_that_ends_with_the_stateless_prompts_own_labels_ends_before_them():
    # Qwen2.5-Coder-1.5B, digits-mlp seed 42, stateless: 8 of 9 files ended so, each refused as invalid
    # syntax at the label's line.
    reply = f"Code:\n```python\n{DIGITS_TRAIN.rstrip()}\nBenchmark:\nNot run yet.\n```"
    assert parse_code(reply) == DIGITS_TRAIN.rstrip() + "\n"
    echoed = f"CODE:\n{DIGITS_TRAIN.rstrip()}\nBenchmark:\n=== Iteration 2 (crash) ===\nCode:\n"
    assert parse_code(echoed) == DIGITS_TRAIN.rstrip() + "\n"


def test_code_marker_counts_only_at_the_start_of_a_line():
    # digits-mlp seed 42, stateless: the prompt's request echoed after the block, and a `# CODE:` comment
    # opening it; the prose after either was read as the file.
    block = f"```python\n{DIGITS_TRAIN.rstrip()}\n```"
    assert parse_code(f"Here it is:\n\n{block}\nReply with CODE: and the complete file.") == DIGITS_TRAIN
    commented = f"```python\n# CODE:\n\n{DIGITS_TRAIN.rstrip()}\n```\nThis script now includes more."
    assert parse_code(commented) == f"# CODE:\n\n{DIGITS_TRAIN}"
    assert parse_code(f"CODE:\n{block}") == DIGITS_TRAIN
