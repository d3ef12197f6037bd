"""The tests' waits follow the machine's load, not fixed wall-clock deadlines (issue 32, issue 35
item 10): tests/timing.py, which every AppTest run (tests/conftest.py) and every browser wait
(tests/dashboard_driver.py) goes through.

A script run longer than its AppTest deadline passes when the machine is that much slower (here
told so by CPDECOMP_TEST_SLOWDOWN; the load average and the contention probe say it by
themselves under load), and a script that truly hangs still fails, at the stretched deadline.
"""

from __future__ import annotations

import pytest
import timing


def slow_script() -> None:
    import time

    import streamlit as st

    time.sleep(2.5)
    st.write("drawn")


def test_an_apptest_run_longer_than_its_base_passes_on_a_slower_machine(monkeypatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("CPDECOMP_TEST_SLOWDOWN", "4")  # as a loaded machine measures itself
    at = AppTest.from_function(slow_script, default_timeout=1).run()
    assert [m.value for m in at.markdown] == ["drawn"]


def test_a_hang_still_fails_at_the_stretched_deadline(monkeypatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("CPDECOMP_TEST_SLOWDOWN", "1")
    monkeypatch.setattr(timing, "contention", lambda: 1.0)
    monkeypatch.setattr(timing.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    with pytest.raises(RuntimeError, match=r"timed out after \d+ s \(0.5 s on an idle machine"):
        AppTest.from_function(slow_script, default_timeout=0.5).run()


def test_the_slowdown_reads_the_load_and_the_least_factor(monkeypatch) -> None:
    monkeypatch.setattr(timing, "contention", lambda: 1.0)
    monkeypatch.setattr(timing, "cores", lambda: 2)
    monkeypatch.delenv("CPDECOMP_TEST_SLOWDOWN", raising=False)
    monkeypatch.setattr(timing.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert timing.slowdown() == 1.0  # never below 1
    monkeypatch.setattr(timing.os, "getloadavg", lambda: (20.0, 20.0, 20.0))
    assert timing.slowdown() == 10.0  # load 20 on 2 cores
    assert timing.seconds(120) == 1200.0 and timing.milliseconds(30_000) == 300_000.0
    monkeypatch.setattr(timing.os, "getloadavg", lambda: (400.0, 400.0, 400.0))
    assert timing.slowdown() == timing.MAX_SLOWDOWN  # a hang still ends
    monkeypatch.setattr(timing.os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    monkeypatch.setenv("CPDECOMP_TEST_SLOWDOWN", "3")
    assert timing.slowdown() == 3.0


def test_the_contention_probe_is_about_one_on_a_free_core() -> None:
    ratio = timing.contention()
    assert 0.9 <= ratio <= timing.MAX_SLOWDOWN * 10


def test_the_browser_deadlines_are_derived() -> None:
    import dashboard_driver

    assert dashboard_driver.STEP_TIMEOUT >= 30_000
    assert dashboard_driver.RUN_TIMEOUT >= 180_000
    assert dashboard_driver.START_TIMEOUT >= 60
