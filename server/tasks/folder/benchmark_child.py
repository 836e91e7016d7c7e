"""A task folder's `[benchmark]` harness, inside the sandbox: time a version's function beside the
reference's (and the run's best's) on fresh inputs, and check its output.

The folder is laid out three times in the working directory: the user's own files (`original`: what
makes the inputs, the reference and the check come from there), the run's version of the edited files
(`candidate`), and the best's version where there is one (`rival`). This process, the harness, runs none
of the agent's code: each call is a fork of it (sandbox/isolate.py) that makes the input from the call's
seed with the folder's own `inputs` function, stamps the moment the input is ready, and only then loads
its member's module and calls the function; the call's time runs from that stamp to the arrival of its
output, copied into plain JSON types in the fork. Each seed is sealed (sandbox/sealed.py): taken only
when its call comes, so no fork holds a later input. The members are called one right after the other
on each seed, the order reversed from one seed to the next: every two see the same load.

The output is checked in a fork of its own after the timed calls of its seed: there the reference runs
again on the same input and the folder's `check` (or plain equality, numbers within 1e-9) compares the
two, so the harness never holds a reference output that a later candidate fork could copy. The
candidate's failure (it raised, returned something that is not data, broke the protocol) ends the
benchmark there; the server turns what comes back into the speedup and the keep decision (speed.py).
"""

import gc
import importlib
import math
import os
import sys
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from autoresearch_mcp.contract.functions import functions_in
from autoresearch_mcp.sandbox import candidate, identity, resources, sealed
from autoresearch_mcp.sandbox.child import confine_reads, landlock_abi
from autoresearch_mcp.sandbox.isolate import Channel, Isolated, clock, run_isolated, window
from autoresearch_mcp.sandbox.profiler import LineProfiler, Sampler, calibrate
from autoresearch_mcp.server.tasks.folder.child import read_only_paths, readable_paths
from autoresearch_mcp.server.tasks.folder.layout import lay_out
from autoresearch_mcp.server.tasks.outputs import NotPlain, first_difference, plain_copy

CONFINES_READS = True  # reads are confined here, once the folder is laid out (sandbox/child.py)
MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # one call's output as JSON
# The profile: sampled over whole calls for at least this long (and this many calls), then one call
# traced line by line in the hottest function.
PROFILE_MIN_CALLS, PROFILE_MAX_CALLS, PROFILE_SAMPLE_S = 3, 30, 0.4
MAX_PROFILE_ROWS = 5000
__all__ = ["read_only_paths", "readable_paths", "run_benchmark"]


def run_benchmark(payload: dict[str, Any]) -> dict[str, Any]:
    """Payload: the folder, the run's files (and the best's, `rival_files`), its reads, and the
    `benchmark` table. Returns every call's time in ms per member (and CPU time where measured), or the
    candidate's failure (`error`, `detail`), or its first wrong output (`wrong`)."""
    work = Path.cwd()
    folder = Path(payload["folder_path"])
    links = landlock_abi() > 0
    resources.hold_quota()  # the layouts are not the candidate's files
    places = {"reference": lay_out(folder, work / "original", {}, payload["reads"], links=links)}
    places["candidate"] = lay_out(folder, work / "candidate", payload["files"], payload["reads"], links=links)
    if payload.get("rival_files"):
        places["rival"] = lay_out(
            folder, work / "rival", payload["rival_files"], payload["reads"], links=links
        )
    if candidate.Setup.ids is not None:
        identity.hand_over(work, candidate.Setup.ids)
    resources.exclude_from_quota(work)
    confine_reads(readable_paths(payload))
    spec = payload["benchmark"]
    original = places["reference"]
    # The folder's own code, trusted as its owner's script is: imported here once, so every fork has it.
    sys.path.insert(0, str(original))
    inputs = _function(original, spec["inputs"])
    if payload.get("profile_only"):  # profile_train_py: where the version spends its time, nothing timed
        found = _profile(
            inputs, int(payload["seed"]), original, places["candidate"], spec["function"], payload["files"]
        )
        return {"profile": found}
    check = _function(original, spec["check"]) if spec.get("check") else None
    targets = {name: spec["function"] for name in places}
    targets["reference"] = spec.get("reference") or spec["function"]
    gc.collect()
    gc.freeze()  # the forks' collections skip what they share with this process (no copy-on-write)
    times: dict[str, list[float]] = {name: [] for name in places}
    cpu: dict[str, list[float]] = {name: [] for name in places}
    for index in range(int(spec["calls"]) + 1):  # the first call of each member warms up, untimed
        seed = int(sealed.take())
        output: Any = None
        members = list(places) if index % 2 == 0 else list(reversed(places))
        for name in members:
            if name == "rival" and "rival" not in times:
                continue  # a best that failed once is timed no more
            call = run_isolated(
                partial(_one_call, inputs, seed, original, places[name], targets[name]),
                writable=None,
                max_messages=2,
                max_bytes=MAX_MESSAGE_BYTES,
            )
            verdict = _judge_call(call)
            if "error" in verdict:
                if name == "candidate":
                    return verdict
                if name == "reference":
                    return {"error": "harness", "detail": f"the reference failed: {verdict['detail']}"}
                times.pop("rival")
                continue
            times[name].append(verdict["time_ms"])
            if call.cpu_s is not None:
                cpu[name].append(call.cpu_s * 1000)
            if name == "candidate":
                output = verdict["output"]
        wrong = _check_output(inputs, check, seed, original, targets["reference"], output)
        if wrong is not None:
            return {"wrong": wrong, "call": index + 1, "seed": seed}
    report: dict[str, Any] = {"times_ms": times["candidate"], "reference_times_ms": times["reference"]}
    if "rival" in times:
        report["rival_times_ms"] = times["rival"]
    calls = len(times["candidate"])
    for name, key in (("candidate", "cpu_ms"), ("reference", "reference_cpu_ms"), ("rival", "rival_cpu_ms")):
        if name in times and len(cpu[name]) == calls:
            report[key] = cpu[name]
    if payload.get("profile"):
        report["profile"] = _profile(
            inputs, seed, original, places["candidate"], spec["function"], payload["files"]
        )
    return report


def _profile(
    inputs: Callable[..., Any], seed: int, original: Path, place: Path, target: str, files: dict[str, str]
) -> dict[str, Any] | None:
    """Where the version's calls spend their time, from a fork of its own (no timed call shares it):
    seconds by line of the edited files, sampled over whole calls on the last input, then one call
    traced line by line in the hottest function. None when the fork sent nothing usable."""
    message, _ = _answer(partial(_profile_calls, inputs, seed, original, place, target, files))
    return message if message is not None and "sampled" in message else None


def _profile_calls(
    inputs: Callable[..., Any],
    seed: int,
    original: Path,
    place: Path,
    target: str,
    files: dict[str, str],
    channel: Channel,
) -> None:
    arguments = _arguments(inputs, seed, original)
    _enter(place, original)
    names = {str((place / name).resolve()): name for name in files} | {
        str(place / name): name for name in files
    }
    overhead = calibrate()  # before any of the version's code exists
    spans = {
        (name, f.first_line, f.last_line) for name, text in files.items() for f in functions_in(text, name)
    }
    try:
        function = _function(place, target)
        sampler, calls, spent = Sampler(set(names)), 0, 0.0
        while calls < PROFILE_MIN_CALLS or (spent < PROFILE_SAMPLE_S and calls < PROFILE_MAX_CALLS):
            started = clock()
            sampler.start()
            try:
                function(*arguments)
            finally:
                sampler.stop()
            spent += clock() - started
            calls += 1
        sampled = [[names[f], line, seconds, hits] for f, line, seconds, hits in sampler.rows()]
        hot = _hottest(sampled, spans)
        traced = None
        if hot is not None:
            file, first, last = hot
            tracer = LineProfiler({f for f, name in names.items() if name == file}, lines=(first, last))
            tracer.start()
            try:
                function(*arguments)
            finally:
                tracer.stop()
            traced = [[names[f], line, seconds, hits] for f, line, seconds, hits in tracer.rows(overhead)]
    except BaseException:  # the version's failure: no profile
        return
    channel.send(
        {"sampled": sampled[:MAX_PROFILE_ROWS], "traced": traced, "other_s": sampler.other_s, "calls": calls}
    )


def _hottest(rows: list[list[Any]], spans: set[tuple[str, int, int]]) -> tuple[str, int, int] | None:
    """The (file, first line, last line) of the function with the most sampled time."""
    totals: dict[tuple[str, int, int], float] = {}
    for file, line, seconds, _ in rows:
        for span in spans:
            if span[0] == file and span[1] <= line <= span[2]:
                totals[span] = totals.get(span, 0.0) + seconds
                break
    return max(totals, key=lambda span: totals[span]) if totals else None


def _function(place: Path, name: str) -> Callable[..., Any]:
    """`file.py:name` from the folder laid out at `place`, imported as its module (so that it imports
    its neighbours as it would in the folder)."""
    file, _, attribute = name.partition(":")
    module_name = file.removesuffix(".py").replace("/", ".")
    module = importlib.import_module(module_name)
    if Path(getattr(module, "__file__", "") or "").resolve() != (place / file).resolve():
        raise ImportError(f"{module_name} was not loaded from the folder's {file}")
    found = getattr(module, attribute, None)
    if not callable(found):
        raise TypeError(f"{file} must define a function {attribute}, got {type(found).__name__}")
    return found


def _arguments(inputs: Callable[..., Any], seed: int, original: Path) -> tuple[Any, ...]:
    os.chdir(original)  # the inputs function reads relative paths as it would in the folder
    made = inputs(seed)
    return made if isinstance(made, tuple) else (made,)


def _enter(place: Path, original: Path) -> None:
    """Make the folder's modules at `place` the ones an import finds: the ones loaded from the original
    layout leave sys.modules, `place` goes first on sys.path."""
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if where and Path(where).resolve().is_relative_to(original.resolve()):
            del sys.modules[name]
    sys.path.insert(0, str(place))
    os.chdir(place)


def _one_call(
    inputs: Callable[..., Any], seed: int, original: Path, place: Path, target: str, channel: Channel
) -> None:
    """In the fork: make the input (trusted: the folder's own code), stamp the start, then load the
    member's module and call its function (from here on, nothing is trusted)."""
    arguments = _arguments(inputs, seed, original)
    if place != original:
        _enter(place, original)
    gc.collect()
    gc.disable()  # as timeit does: a collection triggered by earlier garbage is not this call's cost
    channel.ready()
    try:
        function = _function(place, target)
    except BaseException:  # whatever loading raises, SystemExit too, is the version's failure
        channel.send({"error": "load", "detail": _traceback(place)})
        return
    try:
        output = function(*arguments)
    except BaseException:
        channel.send({"error": "raised", "detail": _traceback(place)})
        return
    try:
        plain = plain_copy(output, arrays=True)
    except NotPlain as exc:
        channel.send({"error": "type", "detail": str(exc)})
        return
    channel.send({"output": plain})


def _check_output(
    inputs: Callable[..., Any],
    check: Callable[[Any, Any], Any] | None,
    seed: int,
    original: Path,
    reference: str,
    got: Any,
) -> str | None:
    """What is wrong with the candidate's output on `seed`, decided in a fork where the reference runs
    again (the harness never holds its output); None when it matches."""
    message, call = _answer(partial(_compare, inputs, check, seed, original, reference, got))
    if message is None or "difference" not in message:
        return f"the check could not run ({call.describe()})"
    difference = message["difference"]
    return None if difference is None else str(difference)[:2000]


def _compare(
    inputs: Callable[..., Any],
    check: Callable[[Any, Any], Any] | None,
    seed: int,
    original: Path,
    reference: str,
    got: Any,
    channel: Channel,
) -> None:
    expected = plain_copy(_function(original, reference)(*_arguments(inputs, seed, original)), arrays=True)
    if check is None:
        difference = first_difference(expected, got)
    else:
        said = check(expected, got)
        difference = None if said is None or said is True else ("the check failed" if said is False else said)
    channel.send({"difference": None if difference is None else str(difference)})


def _answer(work: Callable[[Channel], None]) -> tuple[dict[str, Any] | None, Isolated]:
    """A fork that sends one message and times nothing (a check, a profile): the message, and how the
    fork ended."""
    call = run_isolated(work, writable=None, max_messages=1, max_bytes=MAX_MESSAGE_BYTES)
    message = call.messages[0].message if call.messages and call.problem is None else None
    return (message if isinstance(message, dict) else None), call


def _judge_call(call: Isolated) -> dict[str, Any]:
    """One call's measured time and output, from what the harness received and when."""
    if call.problem is not None:
        return {"error": "protocol", "detail": f"the call's process {call.problem}"}
    received = [item.message for item in call.messages]
    ready = received[0].get("ready") if received and isinstance(received[0], dict) else None
    if not isinstance(ready, float) or not call.forked_at <= ready <= call.messages[0].arrived:
        return {"error": "protocol", "detail": f"the call's process {call.describe()} before its start stamp"}
    if len(received) < 2:
        return {"error": "protocol", "detail": f"the call's process {call.describe()}"}
    result = received[1]
    if not isinstance(result, dict) or ("error" in result) == ("output" in result):
        return {"error": "protocol", "detail": "the call's process sent a malformed result"}
    if "error" in result:
        kind = result["error"] if result["error"] in ("load", "raised", "type") else "raised"
        return {"error": kind, "detail": str(result.get("detail", ""))[:4000]}
    measured = window(call.messages[0], call.messages[1])
    if not math.isfinite(measured) or measured < 0:
        return {"error": "protocol", "detail": "the call's window could not be measured"}
    return {"time_ms": measured * 1000, "output": result["output"]}


def _traceback(place: Path) -> str:
    """The current exception, with only the frames of the folder's files at `place`, named as they are
    in the folder (`slow.py`): no harness paths."""
    kind, exc, tb = sys.exc_info()
    root = str(place.resolve()) + os.sep
    frames = []
    for frame in traceback.extract_tb(tb):
        if frame.filename.startswith(root):
            frame.filename = frame.filename[len(root) :]
            frames.append(frame)
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)] if frames else []
    lines += traceback.format_exception_only(kind, exc)
    return "".join(lines)[-4000:]
