"""The load benchmark's harness (benchmarks/load.py) in a real browser: its baseline row, its
wait for a new heading (which must fail when nothing changes), and its sessions' meeting
points (a session that fails must not leave the others waiting). Speed is not asserted here:
benchmarks/load.py measures it."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest
from dashboard_driver import CHROMIUM, CHROMIUM_ARGS
from timing import seconds

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import load  # benchmarks/ is not a package: found on the path set above

pytestmark = pytest.mark.slow


def test_baseline_row_counts_every_click_and_the_browsers_cpu(tmp_path: Path) -> None:
    row = load.measure_trivial(2, 5, tmp_path)
    assert row["clicks"] == "10"
    assert row["failed sessions"] == "0"
    figures = re.fullmatch(r"(\d+) / (\d+) \((\d+\.\d) of \d+ cores\)",
                           row["CPU per click, server / browsers (ms)"])
    assert figures is not None, row
    server, browsers, cores = (float(part) for part in figures.groups())
    # Measured while every browser is still open: a browser closed before the phase's end
    # took its CPU with it (a negative figure before the sessions met again to leave).
    assert server > 0 and browsers > 0
    # Read within the phase's wall time: no process counted twice (a clock tick of slack each).
    assert 0 < cores <= (os.cpu_count() or 1) + 0.5
    assert float(row["p95"].replace(",", "")) >= float(row["click p50 (ms)"].replace(",", ""))


async def on_trivial_page(url: str, check) -> None:
    from playwright.async_api import async_playwright, expect

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            finishes = load.watch_script_finishes(page)
            await page.goto(url)
            await expect(load.subheading(page, load.TRIVIAL_HEADING)).to_be_visible()
            await check(page, finishes)
        finally:
            await browser.close()


def test_the_wait_sees_the_new_heading_and_fails_without_one(tmp_path: Path) -> None:
    async def check(page, finishes: list[float]) -> None:
        button = page.locator(".st-key-next button")
        shown, answered = await load.until_new_heading(
            page, load.TRIVIAL_HEADING, finishes, button.click)
        assert 0 < answered and 0 < shown
        assert "Clicked 1 times" in await page.locator("h3").first.inner_text()
        with pytest.raises(TimeoutError):  # a keystroke that changes nothing
            await load.until_new_heading(page, load.TRIVIAL_HEADING, finishes,
                                         lambda: page.keyboard.press("Shift"), timeout=2)


    with load.trivial_server(tmp_path, "trivial.log") as (url, _):
        asyncio.run(on_trivial_page(url, check))


def test_a_failing_session_does_not_hold_up_the_others(tmp_path: Path) -> None:
    async def sessions(url: str, server_pid: int) -> list[load.SessionTimes]:
        from playwright.async_api import async_playwright

        together = asyncio.Barrier(2)
        phase = load.SwitchingPhase(server_pid)

        async def prepare(page, times) -> None:
            return None

        def act_for(fails: bool):
            async def act(page, finishes: list[float], switch: int) -> tuple[float, float]:
                if fails and switch == 1:
                    raise RuntimeError("this session breaks at its second switch")
                await asyncio.sleep(0.2)
                return 0.2, 0.1
            return act

        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM,
                                                       args=CHROMIUM_ARGS)
            try:
                return list(await asyncio.wait_for(asyncio.gather(
                    load.session(browser, url, 4, together, phase, prepare, act_for(False)),
                    load.session(browser, url, 4, together, phase, prepare, act_for(True))),
                    timeout=seconds(60)))
            finally:
                await browser.close()

    with load.trivial_server(tmp_path, "trivial.log") as (url, server):
        healthy, broken = asyncio.run(sessions(url, server.pid))
    assert healthy.error is None and len(healthy.switches) == 4
    assert broken.error is not None and "second switch" in broken.error
    assert len(broken.switches) == 1


def test_reading_times_are_seeded_and_within_half_to_one_and_a_half_times_the_read() -> None:
    def first(read: float, seed: int) -> list[float]:
        pauses = load.reading_times(read, seed)
        return [next(pauses) for _ in range(200)]

    assert first(0.0, 3) == [0.0] * 200  # back to back, as before the option existed
    drawn = first(2.0, 3)
    assert drawn == first(2.0, 3)  # a rerun of the benchmark reads alike
    assert drawn != first(2.0, 4)  # two sessions do not click in step
    assert all(1.0 <= t <= 3.0 for t in drawn)
    assert min(drawn) < 1.2 and max(drawn) > 2.8  # spread over the range, not one value
