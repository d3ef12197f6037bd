"""Progress of long runs: the work meter the computations tick, and the bar or lines on stderr.

The work is counted in masked cells, (feature combination, row) pairs: every calibration row
and every patient costs one cell per combination the design evaluates, however it is masked
(a brute-force cell costs a background's worth of model rows, a tree-table cell far less, but
within one run all cells cost alike). Masking ticks `advance(cells)` as it goes, between model
calls on brute force, so a run reports from its first seconds, before any patient is done;
inside `metered(meter)` each tick reaches the meter, and outside it a tick costs one lookup.

A batch job's log is not a terminal: there the bar's carriage returns would pile up into one
unreadable line, so each report prints a line of its own with the time left (at most one per
LINE_SECONDS), and a run of a million patients shows that it is alive and when it will end.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal, TextIO

Meter = Callable[[int], None]
"""Called with the masked cells done since its last call."""
_METER: ContextVar[Meter | None] = ContextVar("cpdecomp_work_meter", default=None)


@contextmanager
def metered(meter: Meter) -> Iterator[None]:
    """Within the block (on this thread), the computations' ticks reach `meter`."""
    token = _METER.set(meter)
    try:
        yield
    finally:
        _METER.reset(token)


def unmetered() -> contextlib.AbstractContextManager[None]:
    """Within the block the ticks reach no meter: work that is not the run's (a probe, a
    spot check of the fast paths) does not move its progress."""
    return metered(lambda cells: None)


def advance(cells: int) -> None:
    """Tick the enclosing meter: `cells` more masked cells are done."""
    meter = _METER.get()
    if meter is not None and cells > 0:
        meter(cells)

WIDTH = 30
LINE_SECONDS = 5.0
"""Fewest seconds between two progress lines in a log (the bar redraws more often)."""
BAR_SECONDS = 0.25
"""Fewest seconds between two redraws of the bar on a terminal."""
FIRST_SECONDS = 2.0
"""A run's first report comes at its first tick or after this long, whichever is first."""
HEARTBEAT_SECONDS = 10.0
"""Most seconds without a report: a quiet stretch (a compile, a large sort) says it is alive."""

Mode = Literal["auto", "bar", "lines", "off"]


def duration(seconds: float) -> str:
    """Seconds as h:mm:ss (or m:ss under an hour)."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class RunProgress:
    """A run's progress on a stream: a bar in place on a terminal, lines in a log, or nothing.

    Give it the run's expected work (`expect`), then use it as the work meter (`running`): the
    masked cells advance it, and the explained patients (`patients`, per chunk) name where the
    run is. It reports at its first tick, at most every LINE_SECONDS after (the bar every
    BAR_SECONDS), at the end, and, while the work is quiet (a kernel compiling, a large sort), at
    least every HEARTBEAT_SECONDS, so a log shows the run is alive from its first seconds.
    """

    def __init__(self, label: str, stream: TextIO | None = None, mode: Mode = "auto",
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if getattr(self.stream, "isatty", lambda: False)() else "lines"
        self.mode = mode
        self.enabled = mode != "off"
        self.clock = clock
        self.started = clock()
        self.total = 0
        self.calibration_cells = 0
        self.n_patients = 0
        self.done = 0
        self.patients_done = 0
        self._said_at: float | None = None
        self._open = False
        """The bar is drawn in place: a line of its own starts on the next line."""
        self._lock = threading.Lock()

    def expect(self, total_cells: int, calibration_cells: int, n_patients: int) -> None:
        """The run's masked cells, of which the calibration set's come first, and its patients;
        the time left is reckoned from here."""
        with self._lock:
            self.total, self.calibration_cells = max(total_cells, 1), calibration_cells
            self.n_patients = n_patients
            self.done = self.patients_done = 0
            self.started = self.clock()
            # The work's first tick reports, even right after a "preparing" line: a run shorter
            # than LINE_SECONDS would otherwise say nothing between that line and its end.
            self._said_at = None

    def __call__(self, cells: int) -> None:
        """The work meter: `cells` more masked cells are done."""
        with self._lock:
            self.done += cells
            self._report(final=False)

    def patients(self, done: int, total: int) -> None:
        """`done` of `total` patients explained (their cells are counted done too: a worker
        process's ticks do not reach this process)."""
        with self._lock:
            self.patients_done, self.n_patients = done, total
            per_patient = (self.total - self.calibration_cells) / max(total, 1)
            self.done = max(self.done, round(self.calibration_cells + per_patient * done))
            self._report(final=done >= total)

    def say(self, message: str) -> None:
        """A line of its own (an estimate before the work), between reports."""
        if self.enabled:
            with self._lock:
                self._write(f"{self.label}: {message}", end="\n")

    @contextmanager
    def running(self) -> Iterator[None]:
        """The work meter is on, and a heartbeat reports whenever the work is quiet."""
        stop = threading.Event()

        def beat() -> None:
            wait = min(FIRST_SECONDS, HEARTBEAT_SECONDS)  # the first report within seconds
            while not stop.wait(wait):
                with self._lock:
                    if self._said_at is None or self.clock() - self._said_at >= wait:
                        self._report(final=False, forced=True)
                wait = HEARTBEAT_SECONDS

        heartbeat = threading.Thread(target=beat, name="cpdecomp-progress", daemon=True)
        if self.enabled:
            heartbeat.start()
        try:
            with metered(self):
                yield
        finally:
            stop.set()
            if heartbeat.is_alive():
                heartbeat.join()

    def remaining(self, now: float) -> float | None:
        """Seconds left at the pace since `expect`, or None before any work is done."""
        if self.total and self.done >= self.total:
            return 0.0
        if self.done <= 0 or now <= self.started or not self.total:
            return None
        return (self.total - self.done) * (now - self.started) / self.done

    def _where(self) -> str:
        if self.patients_done:
            return f"{self.patients_done:,}/{self.n_patients:,} patients"
        if self.done >= self.calibration_cells:
            return f"the {self.n_patients:,} patients"
        return "the calibration set"

    def _report(self, final: bool, forced: bool = False) -> None:
        if not self.enabled:
            return
        now = self.clock()
        least = BAR_SECONDS if self.mode == "bar" else LINE_SECONDS
        if not (final or forced or self._said_at is None or now - self._said_at >= least):
            return
        elapsed = duration(now - self.started)
        if not self.total:  # before `expect`: the run's estimate is being measured
            self._write(f"{self.label}: preparing, elapsed {elapsed}", end="\n")
            self._said_at = now
            return
        share = min(self.done / self.total, 1.0 if final else 0.999)
        left = self.remaining(now)
        eta = "ETA --:--" if left is None else f"ETA {duration(0 if final else left)}"
        if self.mode == "bar":
            filled = round(WIDTH * share)
            bar = "#" * filled + "." * (WIDTH - filled)
            self._write(f"\r{self.label} [{bar}] {100 * share:5.1f}% ({self._where()}, "
                        f"elapsed {elapsed}, {eta})", end="\n" if final else "")
        else:
            self._write(f"{self.label}: {100 * share:.1f}% ({self._where()}), elapsed "
                        f"{elapsed}, {eta}", end="\n")
        self._said_at = now

    def _write(self, text: str, end: str) -> None:
        if self._open and not text.startswith("\r"):
            text = "\n" + text  # a line of its own under the bar drawn in place
        self.stream.write(text + end)
        self.stream.flush()
        self._open = self.mode == "bar" and not end
