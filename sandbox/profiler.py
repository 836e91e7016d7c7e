"""Where the time goes in the files a profile is about: by function (sampled), and by line (traced).

Self-contained (the standard library only): the codeopt harness imports it in a candidate's fork, and a
task folder's boot runs its text in the script's own interpreter, which may not have this package.

Two instruments, because neither alone is right at both levels:
- the Sampler interrupts the process every 0.5 ms and gives the CPU time since the previous sample to
  the innermost line of a named file on the stack. Cheap, and right about functions; but CPython
  handles signals only at calls and backward jumps, so within a function the time lands on a loop's
  header or a call's line (and an outer loop's jump has no line at all);
- the LineProfiler traces (sys.settrace) the frames of the named files, and gives each line its own
  CPU time, from one line event to the next in its frame, less the time spent in the files' other
  functions called from it (so a function's lines add up to its own time, and the builtins and
  libraries it calls count where they are called). Right about lines, but tracing slows Python lines
  more than the C work they call, so it is used for shares within one function. The tracer's own work
  is taken out (calibrate), and tracing stops after `max_events` line events: a long run is traced in
  its first part, then runs at full speed.
CPU time, not wall time: on a loaded machine the process is descheduled now and then, and a wall clock
gives the whole pause to whatever line it fell on, so on a busy machine one line seems to take most of
the time.

A profile is advice for whoever optimises the code, never a verdict: it runs in processes apart from
the timed calls, and the code it measures can disturb it (its own signal handlers or sys.settrace).
"""

import signal
import sys
import time

MAX_EVENTS = 3_000_000
INTERVAL_S = 0.0005
clock = time.thread_time  # a system call per read; the calibration takes its cost out


class Sampler:
    """CPU time by line of the named files, sampled: `start()`, run the code, `stop()`, then `rows()`.

    A wall-clock timer (ITIMER_REAL every 0.5 ms: the CPU timers tick only every 4 ms here) interrupts
    the process; the handler walks the stack out to the innermost frame of a named file and adds the
    CPU time since the previous sample to its line. Weighted by time, not by count: the expirations
    during one long C call arrive as one signal, which carries the call's whole time to its line."""

    def __init__(self, files, interval_s=INTERVAL_S):
        self.files = frozenset(files)
        self.interval_s = interval_s
        self.times = {}  # (file, line) -> seconds
        self.other_s = 0.0  # sampled time with none of the files on the stack
        self._last = 0.0
        self._previous = None

    def _sample(self, signum, frame):
        now = clock()
        elapsed, self._last = now - self._last, now
        while frame is not None and frame.f_code.co_filename not in self.files:
            frame = frame.f_back
        if frame is None:
            self.other_s += elapsed
            return
        key = (frame.f_code.co_filename, frame.f_lineno or frame.f_code.co_firstlineno)
        self.times[key] = self.times.get(key, 0.0) + elapsed

    def start(self):
        self._previous = signal.signal(signal.SIGALRM, self._sample)
        self._last = clock()
        signal.setitimer(signal.ITIMER_REAL, self.interval_s, self.interval_s)

    def stop(self):
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._previous or signal.SIG_DFL)

    def rows(self):
        return [[f, line, seconds, 0] for (f, line), seconds in self.times.items()]


class LineProfiler:
    """CPU time by line of the named files (of one function: `lines`), traced: `start()`, run the code,
    `stop()`; then `rows()` gives [file, line, seconds, intervals] per line. Each interval ends at a
    tracer call (a line, call or return event), and costs the tracer's overhead once: `rows` takes
    that out, per interval, so a generator resumed for every item is not charged its tracing."""

    def __init__(self, files, max_events=MAX_EVENTS, lines=None):
        self.files = frozenset(files)
        self.span = lines  # (first, last): only code defined there (one function), else all of it
        self.max_events = max_events
        self.events = 0
        self.complete = True  # False once the event cap stopped the tracing
        self.times = {}  # (file, line) -> seconds
        self.hits = {}  # (file, line) -> intervals
        self._stack = []  # [frame, line, start] for each traced frame, innermost last
        self._on = False

    def start(self):
        self._on = True
        sys.settrace(self._call)

    def stop(self):
        sys.settrace(None)
        now = clock()
        while self._stack:
            frame, line, start = self._stack.pop()
            self._add(frame, line, now - start)
        self._on = False

    def rows(self, overhead_s=0.0):
        """[file, line, seconds, intervals] per line, `overhead_s` taken off each (see calibrate)."""
        return [
            [f, line, max(seconds - overhead_s * self.hits[(f, line)], 0.0), self.hits[(f, line)]]
            for (f, line), seconds in self.times.items()
        ]

    def _add(self, frame, line, seconds):
        key = (frame.f_code.co_filename, line)
        self.times[key] = self.times.get(key, 0.0) + seconds
        self.hits[key] = self.hits.get(key, 0) + 1

    def _call(self, frame, event, arg):
        now = clock()
        code = frame.f_code
        if not self._on or code.co_filename not in self.files:
            return None
        if self.span is not None and not self.span[0] <= code.co_firstlineno <= self.span[1]:
            return None
        if self._stack:  # the caller's line pauses while the callee runs
            caller = self._stack[-1]
            self._add(caller[0], caller[1], now - caller[2])
        self._stack.append([frame, frame.f_lineno, clock()])
        return self._local

    def _local(self, frame, event, arg):
        now = clock()
        if not self._on:
            return None
        stack = self._stack
        if not stack or stack[-1][0] is not frame:
            return self._local  # a frame entered before tracing started: not measured
        top = stack[-1]
        self._add(frame, top[1], now - top[2])
        if event == "line":
            self.events += 1
            top[1] = frame.f_lineno
            if self.events >= self.max_events:
                self.complete = False
                self.stop()
                return None
            top[2] = clock()
        elif event == "return":
            stack.pop()
            if stack:
                stack[-1][2] = clock()  # the caller's line resumes
        else:  # an exception passing through: the line goes on
            top[2] = clock()
        return self._local


_CALIBRATION = "<profiler calibration>"
_LOOP = compile("def loop(n):\n    i = 0\n    while i < n:\n        i += 1\n", _CALIBRATION, "exec")


def calibrate(events=20_000, rounds=5):
    """Seconds the tracing adds to each line event, beyond what the clock reads take out: a loop of
    trivial lines, timed traced and untraced, the difference per line event (the least of a few
    rounds: load only ever adds)."""
    namespace = {}
    exec(_LOOP, namespace)
    loop = namespace["loop"]
    found = []
    for _ in range(rounds):
        start = clock()
        loop(events // 2)
        plain = clock() - start
        profiler = LineProfiler({_CALIBRATION})
        profiler.start()
        loop(events // 2)
        profiler.stop()
        hits = sum(profiler.hits.values()) or 1  # intervals: one per line event here
        found.append(max((sum(profiler.times.values()) - plain) / hits, 0.0))
    return min(found)
