"""Logs carry event names, counts and durations: never a cell value or an uploaded file's name.

A distinctive marker is put in cells (a category, an id, the target) and in the uploaded file's
name; the command line, the dashboard (AppTest) and a real `streamlit run` server read it, run
it, and refuse malformed variants of it, with every logger at DEBUG. The marker must appear in
no log record (message, arguments, exception or stack), nor on stderr.

The command line's error line names the files given on its command line (the user's own
arguments) but never a cell, so its malformed variants have plain names.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit.logger
from ci_policy import unavailable

from cpdecomp.core.cli import main

sys.path.insert(0, str(Path(__file__).parent / "app"))
from dashboard_helpers import csv_bytes, errors, new_app, run_linear

MARKER = "QX7ZMARKER"
FAST = ["--model", "linear", "--background", "8"]


def marked_table(n: int = 120, seed: int = 5) -> pd.DataFrame:
    """A cohort whose ward, and one id, hold the marker."""
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=(2, n))
    ids = [f"M{i:03d}" for i in range(n)]
    ids[3] = f"{MARKER}-id"
    return pd.DataFrame({"mrn": ids, "x1": x1, "x2": x2,
                         "ward": rng.choice([f"{MARKER}-ward", "general"], size=n),
                         "outcome": 2 * x1 + (1 + np.abs(x2)) * rng.normal(size=n)})


def malformed_variants() -> dict[str, bytes]:
    """Files that are refused, each with the marker in a cell."""
    table = marked_table()
    good = csv_bytes(table)
    text_target = table.assign(outcome=table["outcome"].astype(object))
    text_target.loc[5, "outcome"] = MARKER
    stray = table.assign(x1=table["x1"].astype(object))
    stray.loc[9, "x1"] = MARKER
    return {
        "latin1": good + f"1,2,3,{MARKER}-Größe,4\n".encode("latin-1"),
        "text_target": csv_bytes(text_target),
        "stray_text": csv_bytes(stray),
        "long_field": good + f"M999,1,2,{MARKER}{'x' * 200_000},3\n".encode(),
        "ragged": good + f"M998,1,2,{MARKER},3,4\n".encode(),
    }


def rendered(record: logging.LogRecord) -> str:
    """Everything a handler could write for the record."""
    text = logging.Formatter("%(name)s %(message)s").format(record)
    return " ".join([text, repr(record.args), str(record.exc_info), str(record.stack_info)])


@pytest.fixture
def every_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[logging.LogRecord]]:
    """Every record any logger handles at DEBUG, whatever its handlers and propagation
    (Streamlit's loggers do not propagate to the root, so caplog alone would miss them)."""
    records: list[logging.LogRecord] = []
    original = logging.Logger.handle

    def handle(self: logging.Logger, record: logging.LogRecord) -> None:
        records.append(record)
        original(self, record)

    monkeypatch.setattr(logging.Logger, "handle", handle)
    loggers = [logging.getLogger()] + [
        lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    levels = {lg: lg.level for lg in loggers}
    streamlit_level = logging.getLevelName(streamlit.logger._global_log_level)
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
    streamlit.logger.set_log_level("DEBUG")  # and Streamlit's loggers created later
    try:
        yield records
    finally:
        streamlit.logger.set_log_level(streamlit_level)
        for lg, level in levels.items():
            lg.setLevel(level)


def assert_clean(records: list[logging.LogRecord], *streams: str) -> None:
    leaks = [rendered(r)[:300] for r in records if MARKER in rendered(r)]
    assert leaks == [], leaks
    for stream in streams:
        assert MARKER not in stream, stream[:2000]


# ---------------------------------------------------------------------------- command line


def test_the_command_line_logs_no_marker(tmp_path: Path, capfd, every_log) -> None:
    data = tmp_path / f"{MARKER}-cohort.csv"
    data.write_bytes(csv_bytes(marked_table()))
    status = main(["explain", str(data), "--target", "outcome", "--id-column", "mrn", *FAST,
                   "--out", str(tmp_path / "explained.csv")])
    assert status == 0
    assert MARKER in (tmp_path / "explained.csv").read_text(encoding="utf-8")  # it was read
    for name, content in malformed_variants().items():
        path = tmp_path / f"{name}.csv"
        path.write_bytes(content)
        status = main(["explain", str(path), "--target", "outcome", "--id-column", "mrn", *FAST,
                       "--out", str(tmp_path / "o.csv")])
        assert status == 2, name
    # A refused file whose own name holds the marker: the error line may name it, the log not.
    (tmp_path / f"{MARKER}.csv").write_bytes(malformed_variants()["latin1"])
    assert main(["explain", str(tmp_path / f"{MARKER}.csv"), "--target", "outcome",
                 "--out", str(tmp_path / "o.csv")]) == 2
    captured = capfd.readouterr()
    assert_clean(every_log)
    stderr = captured.err.replace(f"{MARKER}.csv", "")  # the command line's own argument
    assert_clean([], stderr, captured.out)
    events = [r.getMessage() for r in every_log if r.name.startswith("cpdecomp")]
    assert any(e.startswith("table.read format=csv rows=120 columns=5") for e in events), events
    assert sum(e.startswith("table.refused") for e in events) >= 3, events


# ------------------------------------------------------------------------------- dashboard


def test_the_dashboard_logs_no_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd,
                                     every_log) -> None:
    monkeypatch.setenv("CPDECOMP_REVIEW_DB", str(tmp_path / "reviews.sqlite3"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    at = new_app()
    at.radio(key="data_source").set_value("upload").run()
    at.file_uploader(key="upload").set_value(
        (f"{MARKER}-cohort.csv", csv_bytes(marked_table()), "text/csv"))
    at.run()
    assert errors(at) == [] and at.session_state["dataset"].name == f"{MARKER}-cohort.csv"
    at.selectbox(key="id_column").set_value("mrn").run()
    run_linear(at)
    assert errors(at) == []
    for page in ("cohort", "patient", "queue"):
        at.switch_page(f"views/{page}.py").run()
        assert errors(at) == [], page
    for name, content in malformed_variants().items():
        at.switch_page("views/data.py").run()
        at.file_uploader(key="upload").set_value((f"{MARKER}-{name}.csv", content, "text/csv"))
        at.run()
        assert errors(at), name  # refused (or, for a readable file, its target refused)
    captured = capfd.readouterr()
    assert_clean(every_log, captured.err, captured.out)
    events = [r.getMessage() for r in every_log if r.name.startswith("cpdecomp")]
    assert any(e.startswith("upload.read files=1 rows=120 columns=5") for e in events), events
    assert any(e.startswith("upload.refused reason=encoding") for e in events), events


def test_streamlits_arrow_fallback_would_log_the_cell_and_is_stopped(every_log) -> None:
    """The fallback attaches pyarrow's error, which quotes the failing cell: proof that the
    capture sees Streamlit's records, and that app.sources' filter is what keeps them clean."""
    from streamlit import dataframe_util

    from cpdecomp.app import sources

    mixed = pd.DataFrame({"x": [1, f"{MARKER}-cell", 2.5]})
    conversion = logging.getLogger("streamlit.dataframe_util")
    filters = [f for f in conversion.filters if isinstance(f, sources.WithoutPatientData)]
    assert filters, "app.sources installs the filter when it is imported"
    for f in filters:
        conversion.removeFilter(f)
    try:
        dataframe_util.convert_pandas_df_to_arrow_bytes(mixed)
        assert any(MARKER in rendered(r) for r in every_log), "the leak this guards against"
    finally:
        for f in filters:
            conversion.addFilter(f)
    every_log.clear()
    dataframe_util.convert_pandas_df_to_arrow_bytes(mixed)
    assert every_log and not any(MARKER in rendered(r) for r in every_log)


def test_an_exception_escaping_a_script_is_logged_without_its_message(every_log) -> None:
    """Streamlit logs an exception that escapes a page or a widget callback (main.py catches
    the pages' own) with its message; the filter keeps its type and place only."""
    from streamlit import error_util

    from cpdecomp.app import sources

    def failing_callback() -> None:
        raise ValueError(f"value {MARKER} is too long for the column")

    try:
        failing_callback()
    except ValueError as error:
        escaped = error
    handler = logging.getLogger("streamlit.error_util")
    filters = [f for f in handler.filters if isinstance(f, sources.WithoutPatientData)]
    assert filters, "app.sources installs the filter when it is imported"
    for f in filters:
        handler.removeFilter(f)
    try:
        error_util._log_uncaught_app_exception(escaped)
        assert any(MARKER in rendered(r) for r in every_log), "the leak this guards against"
    finally:
        for f in filters:
            handler.addFilter(f)
    every_log.clear()
    error_util._log_uncaught_app_exception(escaped)
    assert not any(MARKER in rendered(r) for r in every_log)
    assert any("ValueError" in r.getMessage() and "failing_callback" in r.getMessage()
               for r in every_log)


# --------------------------------------------------------------------------- a real server


@pytest.mark.slow
def test_a_real_server_at_debug_logs_no_marker(tmp_path: Path) -> None:
    """`streamlit run` at logger.level=debug, driven in chromium: upload, run, look at the
    patient, then upload a malformed file with the marker in its name and cells."""
    from dashboard_driver import (
        STEP_TIMEOUT,
        browser_missing,
        dashboard_command,
        free_port,
        launch,
        open_page,
        run_current_data,
        streamlit_server,
    )

    reason = browser_missing()
    if reason is not None:
        unavailable(reason)
    from playwright.sync_api import expect, sync_playwright

    good = tmp_path / f"{MARKER}-cohort.csv"
    good.write_bytes(csv_bytes(marked_table()))
    bad = tmp_path / f"{MARKER}-bad.csv"
    bad.write_bytes(malformed_variants()["latin1"])
    environment = {**os.environ, "CPDECOMP_REVIEW_DB": str(tmp_path / "reviews.sqlite3"),
                   "CPDECOMP_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    log = tmp_path / "server.log"
    port = free_port()
    command = [*dashboard_command(port), "--logger.level", "debug"]
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            with streamlit_server(environment, log, command=command, port=port) as (url, _):
                page = browser.new_page()
                page.goto(url)
                expect(page.locator(".st-key-data_source")).to_be_visible(timeout=STEP_TIMEOUT)
                page.locator(".st-key-data_source").get_by_text("Upload one table").click()
                page.locator(".st-key-upload input[type='file']").set_input_files(str(good))
                expect(page.get_by_text(f"Current data: {good.name}")).to_be_visible(
                    timeout=STEP_TIMEOUT)
                run_current_data(page)
                open_page(page, "Patient")
                open_page(page, "Data")
                page.locator(".st-key-upload input[type='file']").set_input_files(str(bad))
                expect(page.get_by_text("is not UTF-8 text")).to_be_visible(timeout=STEP_TIMEOUT)
        finally:
            browser.close()
    server_log = log.read_text(encoding="utf-8", errors="replace")
    assert "Runtime state:" in server_log  # a debug record: the server logged at debug level
    assert MARKER not in server_log, [line for line in server_log.splitlines() if MARKER in line]
