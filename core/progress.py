"""A progress bar on stderr for long cohort runs; silent when stderr is not a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 30


class ProgressBar:
    """Call with (done, total); draws in place on a terminal, prints nothing otherwise."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        filled = round(WIDTH * done / total)
        rate = done / max(time.perf_counter() - self.started, 1e-9)
        bar = "#" * filled + "." * (WIDTH - filled)
        end = "\n" if done >= total else ""
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total} ({rate:,.0f}/s){end}")
        self.stream.flush()
