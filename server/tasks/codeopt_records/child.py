"""Harness entry for codeopt-records: time `process_records` on fresh inputs, in the sandbox.

The process this runs in (the harness) never runs candidate code. Each call is made in a fork of it
(sandbox/isolate.py) that generates its input from the call's seed, stamps the moment the input is ready,
and only then loads train.py and calls it. The call's time runs from that stamp to the moment the fork
sent the copied output, as the kernel stamped it (bounded by the harness's own clock on arrival). The candidate can neither do work on an
input before that stamp (no candidate code exists in the fork before it), nor carry work from one call to
the next (each fork starts from the harness, writes nowhere and cannot reach its siblings), nor move the
harness's clock or write its report (another process). What the fork says about its own timing is only
checked: it must fit in the measured window.

The reference (and the run's current best) is timed the same way, in the same sandbox run, call by call
beside the candidate (run_benchmark says how): a baseline timed once, earlier, would carry whatever load
the machine had then into every later speedup. Each of its calls is a fork that holds no candidate code,
and before each fork the candidate cgroup is emptied, so nothing a candidate started runs while
another is measured. Correctness is judged in the server.
Inside the fork the candidate runs with proxy modules and restricted builtins (sandbox/proxies.py); the
guard (checked in the server) refuses dunder attributes.
One module on purpose: it is all this task runs inside the sandbox (the timed calls, the small check,
the profile, each in its fork), so that the trusted side can be read and audited in one place.
"""

import gc
import math
import time
import types
from functools import lru_cache, partial
from typing import Any

from autoresearch_mcp.sandbox import sealed
from autoresearch_mcp.sandbox.isolate import (
    Channel,
    Isolated,
    candidate_traceback,
    run_isolated,
    show_source,
    window,
)
from autoresearch_mcp.sandbox.profiler import LineProfiler, Sampler, calibrate
from autoresearch_mcp.sandbox.proxies import (
    HIDDEN_BUILTINS,
    Importer,
    disarm_evaluators,
    make_importer,
    safe_builtins,
)
from autoresearch_mcp.server.tasks.codeopt_records.records import (
    REFERENCE_SOURCE,
    make_records,
    process_records_fast,
)
from autoresearch_mcp.server.tasks.outputs import NotPlain, first_difference, plain_copy

# The task's guard policy is built from these (task.py); they live here, free of pydantic, because the
# child enforces them again at run time and should start fast.
ALLOWED_IMPORTS = frozenset(
    {"collections", "itertools", "functools", "heapq", "operator", "math", "statistics", "bisect", "re"}
    | {"decimal", "fractions", "array", "copy", "typing"}
)
# String-to-attribute helpers would undo the ban on dunder attributes; get_type_hints evaluates strings.
EXTRA_FORBIDDEN_NAMES = frozenset({"attrgetter", "methodcaller", "get_type_hints", "ForwardRef"})
MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # one call's output as JSON (the reference's is about 4 KB)
# The profile: sampled over whole calls for at least this long (and this many calls), then one call
# traced line by line in the hottest function.
PROFILE_MIN_CALLS, PROFILE_MAX_CALLS, PROFILE_SAMPLE_S = 3, 30, 0.4
MAX_PROFILE_ROWS = 5000
_clock = time.perf_counter  # CLOCK_MONOTONIC: the fork's stamps and the harness's compare directly
__all__ = ["HIDDEN_BUILTINS", "candidate_globals", "run_benchmark"]


@lru_cache(maxsize=1)
def _importer() -> Importer:
    """The candidate's __import__, with every allowed module's proxy built now: in the harness, once,
    before any fork (so building them is never part of a timed call). Each fork gets its own copy."""
    importer = make_importer(ALLOWED_IMPORTS)
    for name in sorted(ALLOWED_IMPORTS):
        importer(name)
    return importer


def candidate_globals() -> dict[str, Any]:
    """A fresh namespace for train.py: proxies of the allowed modules only, restricted builtins."""
    return {"__builtins__": safe_builtins(_importer()), "__name__": "candidate"}


def run_benchmark(payload: dict[str, Any]) -> dict[str, Any]:
    """Payload: n_records, calls (the first is a warm-up), source (the candidate) and optionally rival
    (the run's current best, when it is not the reference). Each call's seed is sealed (sandbox/sealed.py):
    taken only when its call comes, so no fork made before it, the small check's included, holds the
    input of a later call to work out its answer early. For every seed the
    candidate, the reference and the rival are each called once on the same input, one right after the
    other, the order reversed from one seed to the next (candidate, reference, rival; then rival,
    reference, candidate): every two of them see the same load, each first as often as second. So
    the speedup and the comparison with the best are ratios of calls made side by side, which load
    from other processes moves alike on both sides.

    Before any of that, the candidate runs once on a small input (`check`: n and seed), and a wrong
    output or an exception ends the benchmark there, in milliseconds: the output goes back for the
    server to judge. After the timed calls, with `profile` (the functions' line spans), one more fork
    profiles the candidate on the benchmark's input size, apart from every timed call.

    Returns every call's measured time in ms (and CPU time, where measured) per member, the
    candidate's outputs, and the rival's times only when every rival call ended with a result (a rival
    failure is no failure of the candidate); or an error."""
    n = int(payload["n_records"])
    calls = int(payload["calls"])
    source = payload.get("source", REFERENCE_SOURCE)
    try:
        code = compile(source, "train.py", "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # compiling runs none of it
        return {"error": "load", "detail": candidate_traceback()}
    if "check" in payload:
        wrong = _check(code, source, int(payload["check"]["n"]), int(payload["check"]["seed"]))
        if wrong is not None:
            return wrong
    members: dict[str, types.CodeType | None] = {
        "candidate": code,
        "reference": compile(REFERENCE_SOURCE, "train.py", "exec"),
    }
    if (rival := _compiled(payload.get("rival"))) is not None:
        members["rival"] = rival
    candidate_globals()  # the proxies, built here once: every fork finds them ready
    gc.collect()
    gc.freeze()  # the forks' collections skip what they share with this process (no copy-on-write)
    times: dict[str, list[float]] = {name: [] for name in members}
    cpu: dict[str, list[float]] = {name: [] for name in members}
    outputs: list[Any] = []
    seeds: list[int] = []
    for index in range(calls):
        seeds.append(seed := int(sealed.take()))
        for name in list(members) if index % 2 == 0 else list(reversed(members)):
            member = members[name]
            if member is None:
                continue  # a rival that failed once is timed no more
            call = run_isolated(
                partial(_one_call, member, n, seed, source if name == "candidate" else None),
                writable=None,
                max_messages=2,
                max_bytes=MAX_MESSAGE_BYTES,
            )
            if name == "rival" and not _rival_answered(call):
                members["rival"] = None
                continue
            verdict = _judge_call(call)
            if "error" in verdict:
                if name == "candidate":
                    return verdict
                if name == "reference":
                    return {"error": "harness", "detail": f"the reference failed: {verdict['detail']}"}
                members["rival"] = None
                continue
            times[name].append(verdict["time_ms"])
            if call.cpu_s is not None:
                cpu[name].append(call.cpu_s * 1000)
            if name == "candidate":
                outputs.append(verdict["output"])
    report: dict[str, Any] = {"times_ms": times["candidate"], "outputs": outputs}
    report["reference_times_ms"] = times["reference"]
    if members.get("rival") is not None:
        report["rival_times_ms"] = times["rival"]
    for name, key in (("candidate", "cpu_ms"), ("reference", "reference_cpu_ms"), ("rival", "rival_cpu_ms")):
        if name in members and members[name] is not None and len(cpu[name]) == len(seeds):
            report[key] = cpu[name]
    if isinstance(payload.get("profile"), dict):
        report["profile"] = profile(code, source, n, seeds[0], payload["profile"])
    return report


def _check(code: types.CodeType, source: str, n: int, seed: int) -> dict[str, Any] | None:
    """The candidate once on a small input: None when its output matches the trusted twin's, else the
    failure (an exception, or the output for the server to judge: the harness only stops early)."""
    call = run_isolated(
        partial(_one_call, code, n, seed, source), writable=None, max_messages=2, max_bytes=MAX_MESSAGE_BYTES
    )
    verdict = _judge_call(call)
    if "error" in verdict:
        return verdict
    if first_difference(process_records_fast(make_records(n, seed)), verdict["output"]) is None:
        return None
    return {"error": "wrong", "detail": "", "n": n, "seed": seed, "output": verdict["output"]}


def profile(
    code: types.CodeType, source: str, n: int, seed: int, spans: dict[str, Any]
) -> dict[str, Any] | None:
    """The candidate's profile, from a fork of its own (no timed call shares it): seconds by line of
    train.py, sampled over whole calls, and traced line by line in the hottest function. None when the
    fork sent nothing usable (it raised, or broke the protocol): a benchmark does not need it."""
    call = run_isolated(
        partial(_profile_calls, code, source, n, seed, spans),
        writable=None,
        max_messages=1,
        max_bytes=MAX_MESSAGE_BYTES,
    )
    message = call.messages[0].message if call.messages and call.problem is None else None
    if not isinstance(message, dict) or "sampled" not in message:
        return None
    return message


def _profile_calls(
    code: types.CodeType, source: str, n: int, seed: int, spans: dict[str, Any], channel: Channel
) -> None:
    """In the fork: load the candidate, sample a few calls, trace one call of the hottest function."""
    namespace = candidate_globals()
    disarm_evaluators()
    show_source("train.py", source)
    overhead = calibrate()  # before any candidate code exists
    try:
        exec(code, namespace)
        function = namespace["process_records"]
        sampler = Sampler({"train.py"})
        calls, spent = 0, 0.0
        while calls < PROFILE_MIN_CALLS or (spent < PROFILE_SAMPLE_S and calls < PROFILE_MAX_CALLS):
            records = make_records(n, seed + calls)
            start = _clock()
            sampler.start()
            try:
                function(records)
            finally:
                sampler.stop()
            spent += _clock() - start
            calls += 1
        sampled = sampler.rows()
        hot = _hottest(sampled, spans)
        traced = None
        if hot is not None:
            tracer = LineProfiler({"train.py"}, lines=hot)
            records = make_records(n, seed)
            tracer.start()
            try:
                function(records)
            finally:
                tracer.stop()
            traced = tracer.rows(overhead)[:MAX_PROFILE_ROWS]
    except BaseException:  # the candidate's failure: no profile
        return
    channel.send(
        {"sampled": sampled[:MAX_PROFILE_ROWS], "traced": traced, "other_s": sampler.other_s, "calls": calls}
    )


def _hottest(rows: list[list[Any]], spans: dict[str, Any]) -> tuple[int, int] | None:
    """The line span of the function with the most sampled time."""
    totals: dict[tuple[int, int], float] = {}
    for _, line, seconds, _ in rows:
        for first, last in spans.values():
            if first <= line <= last:
                totals[(first, last)] = totals.get((first, last), 0.0) + seconds
                break
    return max(totals, key=lambda span: totals[span]) if totals else None


def _compiled(source: Any) -> types.CodeType | None:
    if not isinstance(source, str):
        return None
    try:
        return compile(source, "train.py", "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _rival_answered(call: Isolated) -> bool:
    """Whether a rival call came back with its two messages (checked before _judge_call, which ends
    the harness on a fork that died without a ready stamp)."""
    first = call.messages[0].message if call.messages else None
    if call.problem is not None or len(call.messages) < 2 or not isinstance(first, dict):
        return False
    return isinstance(first.get("ready"), float)


def _judge_call(call: Isolated) -> dict[str, Any]:
    """One call's measured time and output, from what the harness received and when."""
    if call.problem is not None:
        return {"error": "protocol", "detail": f"process_records' process {call.problem}"}
    received = [item.message for item in call.messages]
    ready = received[0].get("ready") if received and isinstance(received[0], dict) else None
    if not isinstance(ready, float):
        call.mirror("the benchmark call ended without a result")
    if not call.forked_at <= ready <= call.messages[0].arrived:
        return {"error": "harness", "detail": "the call's start stamp is outside its process's lifetime"}
    if len(received) < 2:
        call.mirror("process_records' process ended without a result")
    result = received[1]
    if not isinstance(result, dict) or ("error" in result) == ("output" in result):
        return {"error": "harness", "detail": "the call's process sent a malformed result"}
    if "error" in result:
        kind = result["error"] if result["error"] in ("load", "raised", "type") else "raised"
        return {"error": kind, "detail": str(result.get("detail", ""))[:2000]}
    measured = window(call.messages[0], call.messages[1])
    reported = result.get("call_ms")
    # The one claim the fork makes about time: it must fit in what was measured around it.
    if not isinstance(reported, float) or not math.isfinite(reported) or not 0 <= reported / 1000 <= measured:
        return {
            "error": "harness",
            "detail": f"the call reported {reported!r} ms, which does not fit in "
            f"the {measured * 1000:.3f} ms the harness measured around it",
        }
    return {"time_ms": measured * 1000, "output": result["output"]}


def _one_call(code: types.CodeType, n: int, seed: int, source: str | None, channel: Channel) -> None:
    """In the fork: make the input, stamp the start, then load and call the candidate (whose lines a
    traceback quotes, given its `source`)."""
    records = make_records(n, seed)
    namespace = candidate_globals()
    disarm_evaluators()
    if source is not None:
        show_source("train.py", source)
    clock = _clock
    gc.collect()
    gc.disable()  # as timeit does: a collection triggered by earlier garbage is not this call's cost
    channel.ready()  # from here on, candidate code may run: nothing below is trusted
    try:
        exec(code, namespace)
        function = namespace.get("process_records")
        if not isinstance(function, types.FunctionType):
            raise TypeError(f"train.py must define a function process_records(records), got {type(function)}")
    except BaseException:  # whatever the candidate raises, SystemExit too, is its failure
        channel.send({"error": "load", "detail": candidate_traceback()})
        return
    try:
        start = clock()
        output = function(records)
        elapsed = clock() - start
    except BaseException:
        channel.send({"error": "raised", "detail": candidate_traceback()})
        return
    try:
        plain = plain_copy(output)
    except NotPlain as exc:
        channel.send({"error": "type", "detail": str(exc)})
        return
    channel.send({"output": plain, "call_ms": elapsed * 1000})


def run_profile(payload: dict[str, Any]) -> dict[str, Any]:
    """Payload: source, n_records, seed, spans. The candidate's profile alone, timing nothing (a version
    no benchmark has profiled yet: the run's first, or one whose benchmark failed)."""
    source = payload["source"]
    try:
        code = compile(source, "train.py", "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return {"error": "load", "detail": candidate_traceback()}
    candidate_globals()
    found = profile(code, source, int(payload["n_records"]), int(payload["seed"]), payload["spans"])
    return {"profile": found}
