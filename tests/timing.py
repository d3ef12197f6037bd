"""How long the tests wait for the dashboard: one place, scaled to how busy the machine is.

The AppTest and browser tests wait for the app's own signals: AppTest for the script run to end
(a Run's script run follows the computation to its end), the browser for Streamlit's status
widget to go (the script run finished, the page drawn) and for what the page draws. The
deadlines behind those waits only guard against a hang, yet fixed ones failed on a machine at
load 20 (issue 32, issue 35 item 10): a Run that takes 10 s alone took more than 120 s there.

Every deadline is a base (what an idle 2-core machine needs, with room) times `slowdown()`: how
much slower than alone this process runs now, measured twice, with the larger kept:

* the load average per core this process may use (runnable processes queue for the cores);
* a short busy loop's wall time over its CPU time (how much of a core this process gets).

`CPDECOMP_TEST_SLOWDOWN` sets a least factor (e.g. on a machine slower than the bases assume).
The factor is capped at MAX_SLOWDOWN, so a test that truly hangs still ends.
"""

from __future__ import annotations

import os
import threading
import time

MAX_SLOWDOWN = 20.0
"""The most the deadlines stretch: a hang still fails, after at most 20 × its base."""
PROBE_SECONDS = 0.03
"""Wall time of the contention probe's busy loop."""
PROBE_KEPT = 5.0
"""Seconds a probe's result is reused."""

_probe: tuple[float, float] = (-float("inf"), 1.0)
_probe_lock = threading.Lock()


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def contention() -> float:
    """Wall time over this thread's CPU time for a short busy loop: 1 when the thread has a
    core to itself, about 3 when it gets a third of one (kept PROBE_KEPT seconds)."""
    global _probe
    with _probe_lock:
        taken, ratio = _probe
        if time.monotonic() - taken < PROBE_KEPT:
            return ratio
        wall, cpu = time.perf_counter(), time.thread_time()
        while time.perf_counter() - wall < PROBE_SECONDS:
            pass
        ratio = (time.perf_counter() - wall) / max(time.thread_time() - cpu, 1e-6)
        _probe = (time.monotonic(), ratio)
        return ratio


def slowdown() -> float:
    """How many times slower than alone this process runs now (at least 1, at most
    MAX_SLOWDOWN)."""
    least = float(os.environ.get("CPDECOMP_TEST_SLOWDOWN", "1") or 1)
    load = os.getloadavg()[0] / cores() if hasattr(os, "getloadavg") else 1.0
    return min(MAX_SLOWDOWN, max(1.0, least, load, contention()))


def seconds(base: float) -> float:
    """A deadline of `base` seconds on an idle machine, stretched by the slowdown now."""
    return base * slowdown()


def milliseconds(base: float) -> float:
    """The same in milliseconds (Playwright's unit)."""
    return seconds(base / 1000) * 1000


def wait_for_script_run(runner, timeout: float = 3) -> None:
    """AppTest's wait for a script run to end (streamlit.testing's require_widgets_deltas),
    with its deadline `timeout` × slowdown(), measured again while it waits (a machine that
    gets busier mid-run moves the deadline), and a less busy poll. On the deadline the run is
    stopped and RuntimeError raised, as Streamlit's own does."""
    started = time.monotonic()
    deadline = seconds(timeout)
    while not runner.script_stopped():
        waited = time.monotonic() - started
        if waited > deadline:
            deadline = seconds(timeout)
            if waited > deadline:
                runner.request_stop()
                runner.join()
                raise RuntimeError(
                    f"AppTest script run timed out after {waited:.0f} s ({timeout:g} s on an "
                    f"idle machine, × {slowdown():.1f} for the load now)")
        time.sleep(0.005)


def patch_apptest() -> None:
    """Make every AppTest run wait with wait_for_script_run (tests/conftest.py calls it)."""
    try:
        from streamlit.testing.v1 import local_script_runner
    except ImportError:  # no dashboard extra: no AppTest tests either
        return
    local_script_runner.require_widgets_deltas = wait_for_script_run  # type: ignore[assignment]
