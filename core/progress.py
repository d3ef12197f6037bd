"""Progress of long cohort runs on stderr: a bar on a terminal, one line per chunk elsewhere.

A batch job's log is not a terminal: there the bar's carriage returns would pile up into one
unreadable line, so each chunk prints a line of its own with the rate and the time left, and a
run of a million patients shows that it is alive and when it will end.
"""

from __future__ import annotations

import sys
import time
from typing import Literal, TextIO

WIDTH = 30

Mode = Literal["auto", "bar", "lines", "off"]


def duration(seconds: float) -> str:
    """Seconds as h:mm:ss (or m:ss under an hour)."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressBar:
    """Call with (done, total) after each chunk.

    `mode` "auto" draws a bar in place when the stream is a terminal and prints a line per
    call otherwise; "off" prints nothing (--quiet).
    """

    def __init__(self, label: str, stream: TextIO | None = None, mode: Mode = "auto") -> None:
        self.label = label
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if getattr(self.stream, "isatty", lambda: False)() else "lines"
        self.mode = mode
        self.enabled = mode != "off"
        self.started = time.perf_counter()
        self._first: tuple[float, int] | None = None

    def remaining(self, done: int, total: int, now: float) -> float | None:
        """Seconds left at the rate since the first chunk, or None before any is done.

        The time before the first chunk also went to fitting and the calibration game, which
        are not spent again: from the second chunk on, only the chunks' own pace counts.
        """
        if done >= total:
            return 0.0
        since, done_then = self.started, 0
        if self._first is not None and done > self._first[1]:
            since, done_then = self._first
        if done <= done_then or now <= since:
            return None
        return (total - done) * (now - since) / (done - done_then)

    def __call__(self, done: int, total: int, now: float | None = None) -> None:
        """Report `done` of `total`; `now` is a time.perf_counter() reading (default: now)."""
        if not self.enabled or total <= 0:
            return
        now = time.perf_counter() if now is None else now
        left = self.remaining(done, total, now)
        if self._first is None:
            self._first = (now, done)
        rate = done / max(now - self.started, 1e-9)
        eta = "ETA --:--" if left is None else f"ETA {duration(left)}"
        if self.mode == "bar":
            filled = round(WIDTH * done / total)
            bar = "#" * filled + "." * (WIDTH - filled)
            end = "\n" if done >= total else ""
            self.stream.write(f"\r{self.label} [{bar}] {done:,}/{total:,} ({rate:,.0f}/s, "
                              f"{eta}){end}")
        else:
            self.stream.write(f"{self.label}: {done:,}/{total:,} ({100 * done / total:.1f}%), "
                              f"{rate:,.0f}/s, elapsed {duration(now - self.started)}, {eta}\n")
        self.stream.flush()
