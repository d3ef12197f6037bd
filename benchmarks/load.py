"""Several clinicians at once: N concurrent dashboard sessions against one server.

    python benchmarks/load.py                         # N = 1, 4, 8; writes docs/benchmarks/load.md
    python benchmarks/load.py --sessions 2 --switches 5 --out /tmp/load.md

For each N a fresh `streamlit run app/main.py` server starts (empty caches, as after a deploy)
and N browser contexts in one headless chromium (each its own Streamlit session, as N people
with N tabs) do at the same time what a clinician does: open the dashboard on the bundled
diabetes sample, press Run, open the Patient page, and step through different patients (session
i jumps to patient 7·i + 1 in the select box, so no two look at the same patients, then presses
Next). The sessions press Run at the same moment, and start switching patients together once
every one has its results, so the switch latencies are those of N people clicking at once
(`--read` gives them time to read between two switches). Every session works through a real
websocket with Streamlit's real reruns.

Measured per session: Run (press → "Results for" on screen: model fit, calibration game and the
cohort, or the shared cache after the first session), and each patient switch (the keystroke
that chooses the option or presses Next → the new patient's heading on screen). The server's
memory is its resident set: the kernel's high-water mark (VmHWM) against the resident set once
it is up and idle.

Prints a Markdown table and writes it to docs/benchmarks/load.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from dashboard import (  # noqa: E402
    HEADING_SHOWN,
    PATIENT_HEADING,
    TRIVIAL_APP,
    TRIVIAL_HEADING,
    WATCH_SWITCH,
    subheading,
)
from dashboard_driver import (  # noqa: E402  (the tests folder is not a package)
    CHROMIUM,
    CHROMIUM_ARGS,
    STEP_TIMEOUT,
    browser_missing,
    dashboard_command,
    free_port,
    streamlit_server,
)
from speed.harness import load_text, percentile, publish, status_kib, table  # noqa: E402

DEFAULT_OUT = ROOT / "docs" / "benchmarks" / "load.md"
MEMORY_WAITS = [10.0, 60.0, 180.0]
"""Seconds after the tab closed at which the server's memory is read."""
RUN_TIMEOUT = 600_000  # ms: eight sessions fitting at once on two cores take a while


@dataclass
class SessionTimes:
    run: float | None = None
    switches: list[float] = field(default_factory=list)
    answers: list[float] = field(default_factory=list)
    """Per switch: until the server's "script finished" message, before the browser draws."""
    error: str | None = None


def watch_script_finishes(page) -> list[float]:
    """Arrival times of the server's "script finished" messages on the page's websocket."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    finishes: list[float] = []

    def on_frame(payload: bytes | str) -> None:
        if isinstance(payload, bytes):
            message = ForwardMsg()
            message.ParseFromString(payload)
            if message.WhichOneof("type") == "script_finished":
                finishes.append(time.perf_counter())

    page.on("websocket", lambda socket: socket.on("framereceived", on_frame))
    return finishes


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a running process (its own threads, not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def settle(page) -> None:
    """Wait until the rerun that the last action started has finished drawing."""
    await page.wait_for_timeout(300)  # the rerun request is sent asynchronously
    await page.get_by_test_id("stStatusWidget").wait_for(state="hidden", timeout=RUN_TIMEOUT)
    await page.wait_for_timeout(100)


async def until_new_heading(page, text: str, finishes: list[float],
                            act: Callable[[], Awaitable[None]],
                            timeout: float = STEP_TIMEOUT / 1000) -> tuple[float, float]:
    """Seconds from `act` (the user's last keystroke or click) until the subheading holding
    `text` shows new text, and until the server's "script finished" message.

    Nothing here polls the page: the heading is watched by a MutationObserver and the rerun's
    end by the websocket's messages, so the browser works only for what the user asked for.
    Playwright's own waits poll the page, about 35 ms of a renderer per second of waiting on
    the Patient page (the CDP's TaskDuration), and eight renderers polling take that from the
    two cores being measured.
    """
    await page.evaluate(WATCH_SWITCH, [text, False])
    start = time.perf_counter()
    await act()
    await asyncio.wait_for(page.evaluate(HEADING_SHOWN), timeout)
    shown = time.perf_counter() - start
    deadline = start + timeout
    while not any(t > start for t in finishes):
        if time.perf_counter() > deadline:
            raise TimeoutError("the server's script did not finish")
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)  # the page applies the last messages
    return shown, min(t for t in finishes if t > start) - start


async def switch_to(page, keys: int, finishes: list[float]) -> tuple[float, float]:
    """Choose the patient `keys` places down the Patient page's select box: `until_new_heading`
    from the Enter that chooses it."""
    # Type-ahead through the keyboard: the option list is virtual, so a patient far down is
    # reached by arrows, not by a click on an element that may not exist yet.
    await page.locator(".st-key-patient [role='combobox']").click()
    for _ in range(keys):
        await page.keyboard.press("ArrowDown")
    return await until_new_heading(page, PATIENT_HEADING, finishes,
                                   lambda: page.keyboard.press("Enter"))


async def press_next(page, finishes: list[float]) -> tuple[float, float]:
    """Press the Patient page's Next button (with Enter, as the trivial sessions press theirs):
    `until_new_heading` from that keystroke."""
    await page.locator(".st-key-patient_next button").focus()
    return await until_new_heading(page, PATIENT_HEADING, finishes,
                                   lambda: page.keyboard.press("Enter"))


async def open_page(page, name: str) -> None:
    await page.get_by_test_id("stSidebarNav").get_by_role("link", name=name).click()
    await settle(page)


def browsers_cpu(server_pid: int) -> float:
    """CPU seconds of this process's children but the server: Playwright's driver and every
    chromium process (the browsers), while they run."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            if child.pid != server_pid and server_pid not in {p.pid for p in child.parents()}:
                times = child.cpu_times()
                total += times.user + times.system
        except psutil.Error:  # ended meanwhile
            continue
    return total


@dataclass
class SwitchingPhase:
    """The server's and the browsers' CPU seconds when the first session starts switching and
    when the last one is done: their work for the switches alone (the Runs are over by then)."""

    server_pid: int
    start: tuple[float, float, float] | None = None
    end: tuple[float, float, float] | None = None
    """(server CPU s, browsers' CPU s, wall clock s)"""

    def _now(self) -> tuple[float, float, float]:
        return process_cpu(self.server_pid), browsers_cpu(self.server_pid), time.perf_counter()

    def started(self) -> None:
        if self.start is None:
            self.start = self._now()

    def ended(self) -> None:
        if self.end is None:  # every session has finished switching by then
            self.end = self._now()

    def per_switch(self, switches: int) -> str:
        """Milliseconds of the server's and of the browsers' CPU per switch, and how many of
        the machine's cores they kept busy together over the phase."""
        if self.start is None or self.end is None or not switches:
            return "–"
        server, browsers, wall = (end - start for start, end in
                                  zip(self.start, self.end, strict=True))
        return (f"{1000 * server / switches:.0f} / {1000 * browsers / switches:.0f} "
                f"({(server + browsers) / wall:.1f} of {os.cpu_count()} cores)")


Step = Callable[[Any, list[float], int], Awaitable[tuple[float, float]]]
"""One timed action of a session: (page, the script-finished times, its count) → seconds until
the page shows its answer, and until the server's script finished."""


def reading_times(read: float, seed: int) -> Iterator[float]:
    """Seconds a user reads between two switches: none when `read` is 0 (switching back to
    back), else drawn uniformly from 0.5·read to 1.5·read, seeded per session, so that the
    sessions' clicks drift apart as people's do instead of landing together every round."""
    rng = random.Random(seed)
    while True:
        yield rng.uniform(0.5 * read, 1.5 * read) if read > 0 else 0.0


async def session(browser, url: str, switches: int, together: asyncio.Barrier,
                  phase: SwitchingPhase, prepare: Callable[[Any, SessionTimes], Awaitable[None]],
                  act: Step, read: float = 0.0, seed: int = 0) -> SessionTimes:
    """One user: `prepare` the page, wait for the others, `act` `switches` times (reading for
    `reading_times(read, seed)` between two), and wait for the others again before leaving, so
    that the switches of all N sessions overlap and every browser is still open (its CPU still
    counted) when the switching phase ends."""
    times = SessionTimes()
    pauses = reading_times(read, seed)
    context = await browser.new_context(viewport={"width": 1400, "height": 1400})
    page = await context.new_page()
    finishes = watch_script_finishes(page)
    met = 0  # meetings at `together`: each session must come to both, whatever happens
    step = "prepare"
    try:
        await page.goto(url)
        await prepare(page, times)
        met += 1
        await together.wait()
        phase.started()
        for switch in range(switches):
            step = f"switch {switch}"
            shown, answered = await act(page, finishes, switch)
            times.switches.append(shown)
            times.answers.append(answered)
            if switch < switches - 1:
                await asyncio.sleep(next(pauses))
    except Exception as error:  # a session that fails is reported, not hidden
        times.error = f"{step}: {type(error).__name__}: {str(error).splitlines()[0][:120]}"
    finally:
        for _ in range(met, 2):
            await together.wait()  # the others must not wait for it forever
        phase.ended()
        await context.close()
    return times


async def one_session(browser, url: str, index: int, switches: int,
                      together: asyncio.Barrier, phase: SwitchingPhase,
                      read: float = 0.0) -> SessionTimes:
    """One clinician: run the sample, wait for the others, then step through `switches`
    patients of their own: the first chosen in the select box (session i jumps to patient
    7·i + 1), the others with Next, as a clinician works through a list."""
    from playwright.async_api import expect

    async def prepare(page, times: SessionTimes) -> None:
        await expect(page.get_by_text("Current data: sample")).to_be_visible(
            timeout=STEP_TIMEOUT)
        await open_page(page, "Setup")
        start = time.perf_counter()
        await page.locator(".st-key-run button").click()
        await expect(page.get_by_text("Results for")).to_be_visible(timeout=RUN_TIMEOUT)
        times.run = time.perf_counter() - start
        await open_page(page, "Patient")
        await expect(subheading(page, PATIENT_HEADING)).to_be_visible(timeout=STEP_TIMEOUT)

    async def act(page, finishes: list[float], switch: int) -> tuple[float, float]:
        # Next after the first: the select box's own closing costs the browser about 45 ms
        # before the rerun is even asked for (Next: 2 ms), and the baseline presses a button.
        return await (switch_to(page, 7 * index + 1, finishes) if switch == 0
                      else press_next(page, finishes))

    return await session(browser, url, switches, together, phase, prepare, act, read, index)


async def trivial_session(browser, url: str, index: int, switches: int,
                          together: asyncio.Barrier, phase: SwitchingPhase,
                          read: float = 0.0) -> SessionTimes:
    """The baseline's user: open the trivial app, wait for the others, then press its button
    `switches` times, timed as a patient switch is (the keystroke → the new heading)."""
    from playwright.async_api import expect

    async def prepare(page, times: SessionTimes) -> None:
        await expect(subheading(page, TRIVIAL_HEADING)).to_be_visible(timeout=STEP_TIMEOUT)

    async def act(page, finishes: list[float], switch: int) -> tuple[float, float]:
        await page.locator(".st-key-next button").focus()  # pressed with Enter, as a patient
        return await until_new_heading(  # is chosen
            page, TRIVIAL_HEADING, finishes, lambda: page.keyboard.press("Enter"))

    return await session(browser, url, switches, together, phase, prepare, act, read, index)


async def run_sessions(url: str, sessions: int, switches: int, phase: SwitchingPhase,
                       user=one_session, read: float = 0.0) -> list[SessionTimes]:
    """`sessions` browser sessions at once, each a `user` (one_session or trivial_session)
    reading about `read` seconds between two switches."""
    from playwright.async_api import async_playwright

    together = asyncio.Barrier(sessions)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            return list(await asyncio.gather(
                *(user(browser, url, i, switches, together, phase, read)
                  for i in range(sessions))))
        finally:
            await browser.close()


def fmt(values: list[float], q: float) -> str:
    return f"{percentile(values, q):,.0f}" if values else "–"


def measure(sessions: int, switches: int, folder: Path, read: float = 0.0) -> dict[str, str]:
    """A fresh server, `sessions` concurrent sessions, and the figures of one table row."""
    environment = {**os.environ,
                   "CPDECOMP_REVIEW_DB": str(folder / f"reviews-{sessions}.sqlite3"),
                   "CPDECOMP_CACHE_DIR": str(folder / f"cache-{sessions}")}
    with streamlit_server(environment, folder / f"server-{sessions}.log") as (url, server):
        time.sleep(1.0)
        idle = status_kib("VmRSS", server.pid)
        server_before = process_cpu(server.pid)
        started = time.perf_counter()
        phase = SwitchingPhase(server.pid)
        results = asyncio.run(run_sessions(url, sessions, switches, phase, read=read))
        wall = time.perf_counter() - started
        server_cpu = process_cpu(server.pid) - server_before
        peak = status_kib("VmHWM", server.pid)
    switch_times = [t for result in results for t in result.switches]
    answers = [1000 * t for result in results for t in result.answers]
    runs = [result.run for result in results if result.run is not None]
    errors = [result.error for result in results if result.error]
    ms = [1000 * t for t in switch_times]
    return {
        "N": str(sessions), "wall (s)": f"{wall:.1f}",
        "switches": str(len(switch_times)),
        "switch p50 (ms)": fmt(ms, 50), "p90": fmt(ms, 90), "p95": fmt(ms, 95),
        "p99": fmt(ms, 99),
        "max": fmt(ms, 100),
        "server answered p50 / p90 (ms)": f"{fmt(answers, 50)} / {fmt(answers, 90)}",
        "CPU per switch, server / browsers (ms)": phase.per_switch(len(switch_times)),
        "Run p50 / max (s)": (f"{statistics.median(runs):.1f} / {max(runs):.1f}"
                              if runs else "–"),
        "server CPU s": f"{server_cpu:.0f}",
        "server RSS idle → peak (MiB)": f"{idle / 1024:,.0f} → {peak / 1024:,.0f}",
        "failed sessions": str(len(errors)) + (f" ({errors[0]})" if errors else ""),
    }


@contextmanager
def trivial_server(folder: Path, log: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """A fresh server of the trivial app (its script and `log` in `folder`): its URL and
    process."""
    app = folder / "trivial_app.py"
    app.write_text(TRIVIAL_APP, encoding="utf-8")
    port = free_port()
    with streamlit_server(dict(os.environ), folder / log, command=dashboard_command(port, app),
                          port=port) as served:
        yield served


def measure_trivial(sessions: int, switches: int, folder: Path,
                    read: float = 0.0) -> dict[str, str]:
    """The baseline row: a fresh server of the trivial Streamlit app (one button, one line of
    text: Streamlit's own floor for a round trip, as in benchmarks/dashboard.py) under the same
    `sessions` browser sessions pressing its button at once."""
    with trivial_server(folder, f"trivial-{sessions}.log") as (url, server):
        time.sleep(1.0)
        phase = SwitchingPhase(server.pid)
        results = asyncio.run(run_sessions(url, sessions, switches, phase,
                                           user=trivial_session, read=read))
    ms = [1000 * t for result in results for t in result.switches]
    answers = [1000 * t for result in results for t in result.answers]
    errors = [result.error for result in results if result.error]
    return {
        "N": str(sessions), "clicks": str(len(ms)),
        "click p50 (ms)": fmt(ms, 50), "p90": fmt(ms, 90), "p95": fmt(ms, 95),
        "server answered p50 (ms)": fmt(answers, 50),
        "CPU per click, server / browsers (ms)": phase.per_switch(len(ms)),
        "failed sessions": str(len(errors)) + (f" ({errors[0]})" if errors else ""),
    }


def ratios(dashboard: dict[str, str], trivial: dict[str, str]) -> dict[str, str]:
    """The dashboard's switch against the trivial app's click under the same load."""
    def ratio(mine: str, floor: str) -> str:
        try:
            return f"{float(mine.replace(',', '')) / float(floor.replace(',', '')):.1f}×"
        except ValueError:
            return "–"

    return {"N": dashboard["N"],
            "p50: dashboard / trivial (ms)":
                f"{dashboard['switch p50 (ms)']} / {trivial['click p50 (ms)']}",
            "ratio p50": ratio(dashboard["switch p50 (ms)"], trivial["click p50 (ms)"]),
            "p95: dashboard / trivial (ms)": f"{dashboard['p95']} / {trivial['p95']}",
            "ratio p95": ratio(dashboard["p95"], trivial["p95"])}


PROGRESS = re.compile(r"^(Computing the calibration game|Explaining every patient \()")
"""A run's progress label past its fit (the Setup page's caption names the game too)."""
SLOW_FAMILY = "gamma"
"""The slow configuration: gbm with the gamma family, its left-out features averaged on the
outcome's own scale (Setup's box for a model with a log link), has no fast way to remove
features, so exact Shapley masks by brute force (minutes on the bundled sample, as Setup
warns)."""


async def switch_patients(page, finishes: list[float], count: int,
                          first_step: int) -> list[float]:
    """`count` patient switches on the Patient page: choosing one → its heading on screen."""
    return [(await switch_to(page, first_step if step == 0 else 1, finishes))[0]
            for step in range(count)]


async def start_slow_run(browser, url: str):
    """A session that chose the slow configuration and pressed Run; returns once the worker
    is past the fit, masking by brute force."""
    from playwright.async_api import expect

    context = await browser.new_context(viewport={"width": 1400, "height": 1400})
    page = await context.new_page()
    await page.goto(url)
    await expect(page.get_by_text("Current data: sample")).to_be_visible(timeout=STEP_TIMEOUT)
    await open_page(page, "Setup")
    await page.locator(".st-key-cp_family [role='combobox']").click()
    await page.get_by_role("option", name=re.compile(f"^{SLOW_FAMILY}:")).click()
    await settle(page)
    await page.locator(".st-key-response_scale label").click()
    await settle(page)
    await page.locator(".st-key-run button").click()
    await expect(page.get_by_text(PROGRESS)).to_be_visible(timeout=RUN_TIMEOUT)
    return context, page


def stop_lines(log: Path) -> list[float]:
    """The server's seconds from each stop request to the end of that run's work."""
    return [float(found) for found in
            re.findall(r"run\.stopped after_stop_s=([0-9.]+) cancelled=True", log.read_text())]


async def contention(url: str, log: Path, switches: int) -> dict[str, str]:
    """A second user's patient switches while the first runs the slow configuration, against
    the same switches with nobody computing; then the first user's Stop, and a slow run whose
    tab is closed."""
    from playwright.async_api import async_playwright, expect

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            second = await browser.new_context(viewport={"width": 1400, "height": 1400})
            page = await second.new_page()
            finishes = watch_script_finishes(page)
            await page.goto(url)
            await expect(page.get_by_text("Current data: sample")).to_be_visible(
                timeout=STEP_TIMEOUT)
            await open_page(page, "Setup")
            await page.locator(".st-key-run button").click()
            await expect(page.get_by_text("Results for")).to_be_visible(timeout=RUN_TIMEOUT)
            await open_page(page, "Patient")
            alone = await switch_patients(page, finishes, switches, 3)

            _, slow = await start_slow_run(browser, url)
            during = await switch_patients(page, finishes, switches, 1)
            still_running = await slow.locator(".st-key-stop_run button").first.is_visible()
            stopped_before = len(stop_lines(log))
            start = time.perf_counter()
            await slow.locator(".st-key-stop_run button").first.click()
            await expect(slow.get_by_text("Stopped: nothing was kept")).to_be_visible(
                timeout=RUN_TIMEOUT)
            stop_on_screen = time.perf_counter() - start
            while len(stop_lines(log)) == stopped_before:
                await asyncio.sleep(0.05)
            stop_server = stop_lines(log)[-1]

            closing, _ = await start_slow_run(browser, url)
            stopped_before = len(stop_lines(log))
            start = time.perf_counter()
            await closing.close()
            while len(stop_lines(log)) == stopped_before and time.perf_counter() - start < 120:
                await asyncio.sleep(0.05)
            closed = (f"{time.perf_counter() - start:.2f}"
                      if len(stop_lines(log)) > stopped_before else "not stopped in 120 s")
        finally:
            await browser.close()
    ms_alone, ms_during = [1000 * t for t in alone], [1000 * t for t in during]
    return {
        "switches alone / during": f"{len(alone)} / {len(during)}",
        "switch p50 alone (ms)": f"{percentile(ms_alone, 50):,.0f}",
        "switch p50 / max during the slow run (ms)":
            f"{percentile(ms_during, 50):,.0f} / {max(ms_during):,.0f}",
        "slow run still computing after": "yes" if still_running else "no",
        "Stop → stopped on screen (s)": f"{stop_on_screen:.2f}",
        "Stop → work ended, server (s)": f"{stop_server:.2f}",
        "tab closed → work ended (s)": closed,
    }


def measure_contention(switches: int, folder: Path) -> dict[str, str]:
    environment = {**os.environ,
                   "CPDECOMP_REVIEW_DB": str(folder / "reviews-contention.sqlite3"),
                   "CPDECOMP_CACHE_DIR": str(folder / "cache-contention")}
    log = folder / "server-contention.log"
    with streamlit_server(environment, log) as (url, _):
        return asyncio.run(contention(url, log, switches))


def upload_tables(folder: Path, count: int, rows: int) -> list[Path]:
    """`count` different CSV tables of `rows` patients × 16 numeric features and a target."""
    import numpy as np

    rng = np.random.default_rng(0)
    paths = []
    for index in range(count):
        values = rng.normal(size=(rows, 17)).round(6)
        path = folder / f"upload-{index:02d}.csv"
        header = ",".join([*(f"x{j}" for j in range(16)), "outcome"])
        np.savetxt(path, values, delimiter=",", header=header, comments="", fmt="%.6f")
        paths.append(path)
    return paths


async def memory_after_leaving(url: str, pid: int, tables: list[Path],
                               waits: list[float]) -> dict[str, str]:
    """One session uploads every table in turn, then closes; the server's resident set before,
    after the uploads, and `waits` seconds after the tab closed."""
    from playwright.async_api import async_playwright, expect

    def mib() -> str:
        return f"{status_kib('VmRSS', pid) / 1024:,.0f}"

    figures = {"tables": f"{len(tables)} × {tables[0].stat().st_size / 2**20:.0f} MiB",
               "RSS before (MiB)": mib()}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(viewport={"width": 1400, "height": 1400})
            page = await context.new_page()
            await page.goto(url)
            await expect(page.get_by_text("Current data: sample")).to_be_visible(
                timeout=STEP_TIMEOUT)
            await page.locator(".st-key-data_source").get_by_text("Upload one table").click()
            await settle(page)
            for upload in tables:
                await page.locator(".st-key-upload input[type='file']").set_input_files(
                    str(upload))
                await expect(page.get_by_text(f"Current data: {upload.name}")).to_be_visible(
                    timeout=RUN_TIMEOUT)
            await settle(page)
            figures["RSS after the uploads (MiB)"] = mib()
            await context.close()
            closed = time.perf_counter()
            for wait in waits:
                await asyncio.sleep(max(0.0, closed + wait - time.perf_counter()))
                figures[f"{wait:.0f} s after closing (MiB)"] = mib()
        finally:
            await browser.close()
    return figures


def measure_memory(folder: Path, count: int, rows: int, waits: list[float]) -> dict[str, str]:
    environment = {**os.environ,
                   "CPDECOMP_REVIEW_DB": str(folder / "reviews-memory.sqlite3"),
                   "CPDECOMP_CACHE_DIR": str(folder / "cache-memory")}
    tables = upload_tables(folder, count, rows)
    with streamlit_server(environment, folder / "server-memory.log") as (url, server):
        time.sleep(1.0)
        figures = asyncio.run(memory_after_leaving(url, server.pid, tables, waits))
        figures["peak (MiB)"] = f"{status_kib('VmHWM', server.pid) / 1024:,.0f}"
    for upload in tables:
        upload.unlink()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, nargs="*", default=[1, 4, 8])
    parser.add_argument("--switches", type=int, default=10,
                        help="patient switches per session (default 10)")
    parser.add_argument("--read", type=float, default=0.0,
                        help="seconds a session reads between two switches, drawn from 0.5 to "
                             "1.5 times this (default 0: back to back, every session switching "
                             "at the same moment)")
    parser.add_argument("--contention-switches", type=int, default=10,
                        help="the second user's switches, alone and during the slow run "
                             "(0: no contention row)")
    parser.add_argument("--uploads", type=int, default=20,
                        help="tables one session uploads before leaving (0: no memory row)")
    parser.add_argument("--upload-rows", type=int, default=150_000)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    reason = browser_missing()
    if reason is not None:
        print(f"load.py: {reason}", file=sys.stderr)
        return 2

    folder = Path(tempfile.mkdtemp(prefix="cpdecomp-load-"))
    load_before = os.getloadavg()
    started = time.perf_counter()
    rows, baseline, compared = [], [], []
    for sessions in args.sessions:
        # The baseline right after the dashboard's row, so that both meet the machine alike.
        rows.append(measure(sessions, args.switches, folder, args.read))
        print(" | ".join(f"{k} {v}" for k, v in rows[-1].items()), file=sys.stderr)
        baseline.append(measure_trivial(sessions, args.switches, folder, args.read))
        print(" | ".join(f"trivial {k} {v}" for k, v in baseline[-1].items()), file=sys.stderr)
        compared.append(ratios(rows[-1], baseline[-1]))
    contended = []
    if args.contention_switches:
        contended.append(measure_contention(args.contention_switches, folder))
        print(" | ".join(f"{k} {v}" for k, v in contended[-1].items()), file=sys.stderr)
    memory = []
    if args.uploads:
        memory.append(measure_memory(folder, args.uploads, args.upload_rows,
                                     MEMORY_WAITS))
        print(" | ".join(f"{k} {v}" for k, v in memory[-1].items()), file=sys.stderr)
    minutes = (time.perf_counter() - started) / 60
    load_after = os.getloadavg()

    lines = [
        "# Dashboard under concurrent sessions",
        "",
        f"Generated by `python benchmarks/load.py` on "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC ({minutes:.1f} min).",
        "",
        f"* {os.cpu_count()} cores, Python {platform.python_version()}; the server and "
        "chromium share the machine. Load average (1/5/15 min) "
        f"{load_text(load_before)} at the start, {load_text(load_after)} at the end.",
        "* Each row: a fresh server with empty caches; N browser contexts at once, each "
        "running the diabetes sample with the default setup (gbm, normalized, exact Shapley) "
        f"and then switching patient {args.switches} times, on patients of its own: the first "
        "in the select box (session i to patient 7·i + 1), the others with Next.",
        "* Run = pressing Run → results on screen, all N at once (one fit and one calibration "
        "game are shared through the caches). Switch = the Enter that chooses a patient or "
        "presses Next → the new heading on screen, all N sessions starting to switch at the "
        "same time after every Run is done, "
        + ("and each switching again as soon as the heading is on screen (no reading time: "
           "the heaviest load N people can make)."
           if args.read <= 0 else
           f"and each reading {0.5 * args.read:g}-{1.5 * args.read:g} s (uniform, seeded per "
           "session) before the next switch, so that their clicks drift apart."),
        "* Server answered = that Enter → the server's \"script finished\" message "
        "on the websocket: the server's share of a switch, before the browser draws.",
        "* CPU per switch = the server process's CPU seconds, and those of the browsers "
        "(every chromium process and Playwright's driver), from the first session's first "
        "switch to the last session's last, over the switches: what one switch costs each "
        "side (with whatever else it did meanwhile, such as the server preparing the run's "
        "patients' figures after the Runs); in brackets, how many cores the two kept busy "
        "together in that time.",
        "* The harness does not poll the page: each switch's heading is watched by a "
        "MutationObserver and the rerun's end by the websocket's messages (Playwright's own "
        "waits poll, about 35 ms of a renderer per second of waiting on the Patient page).",
        "* Server memory: resident set once idle, and the kernel's high-water mark (VmHWM).",
        "* Server CPU s: the dashboard server's over the row, Runs included. The browsers' "
        "CPU is read from their running processes during the switches (above): chromium's "
        "processes are not all waited for by their parents, so the CPU of children that have "
        "exited (os.times) misses most of it, as the rows of earlier versions of this script "
        "did. On a real deployment the browsers run on the clinicians' computers; here they "
        "take their share of the same two cores.",
        "",
        *(table(rows) if rows else []),
        "",
    ]
    if baseline:
        lines += [
            "## Baseline: a trivial Streamlit app under the same load",
            "",
            "After each row above, a fresh server of a trivial Streamlit app (one button and "
            "one line of text, as in `benchmarks/dashboard.py`: the least a Streamlit round "
            "trip costs) and the same number of browser sessions pressing its button "
            f"{args.switches} times each, all at once, timed the same way (the Enter that "
            "presses it → the new text on the page).",
            "",
            *table(baseline),
            "",
            *table(compared),
            "",
        ]
    if contended:
        lines += [
            "## One user's slow Run, another user's patient switches, and Stop",
            "",
            "A fresh server. The second user runs the default setup and switches patient "
            f"{args.contention_switches} times with nobody else computing (alone); the first "
            f"user then chooses the {SLOW_FAMILY} family (brute-force masking, minutes of work) "
            "and presses Run, and once that run is past its fit the second user switches "
            f"{args.contention_switches} times more (during). The first user then presses Stop: "
            "Stop → the page says it stopped, and the server's own figure from the stop request "
            "to the end of the work (its log's `run.stopped after_stop_s`). Last, a third "
            "session starts the same slow run and its tab is closed: closed → the server's log "
            "line that the work ended.",
            "",
            *table(contended),
            "",
        ]
    if memory:
        lines += [
            "## Memory after a user leaves",
            "",
            f"A fresh server. One session uploads {args.uploads} different tables in turn "
            f"({args.upload_rows:,} patients × 16 features each) on the Data page, then its tab "
            "is closed. The server's resident set (VmRSS) before, after the uploads, and at "
            "times after the tab closed (Streamlit keeps a closed session for 2 minutes in "
            "case it reconnects).",
            "",
            *table(memory),
            "",
        ]
    publish("\n".join(lines), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
