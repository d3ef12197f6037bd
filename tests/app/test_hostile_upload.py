"""Hostile uploads on the Data page: each is refused in an error box with the reason, and the
data and results already there stay usable; awkward but valid tables work end to end."""

from __future__ import annotations

import io
import os
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpus.hostile_files import HOSTILE
from corpus.parquet_bombs import (
    TEXT_TYPES,
    peak_rss_of_upload,
    prefix_compressed_text,
    repeated_text,
    stored_bytes,
)
from dashboard_helpers import csv_bytes, errors, new_app, run_linear, small_table
from streamlit import config
from streamlit.testing.v1 import AppTest

from cpdecomp.app import export, sources
from cpdecomp.app.text import markdown_text


def upload(at: AppTest, name: str, content: bytes) -> AppTest:
    at.switch_page("views/data.py").run()
    at.radio(key="data_source").set_value("upload").run()
    at.file_uploader(key="upload").set_value((name, content, "text/csv"))
    return at.run()


def test_every_hostile_upload_is_refused_and_the_run_stays() -> None:
    at = run_linear(new_app())
    before = at.session_state["last_run"]
    for name, content, expected in HOSTILE:
        upload(at, name, content)
        messages = [m.replace("\\", "") for m in errors(at)]  # Markdown escapes
        assert any(expected in m and name in m for m in messages), (name, messages)
        assert not any("SECRET" in m or "P001" in m for m in messages), (name, messages)
        assert at.session_state["dataset"].name == "sample: diabetes", name
        assert at.session_state["last_run"] is before, name
    # Still usable: the results page draws, and the sample's columns are still offered.
    at.switch_page("views/cohort.py").run()
    assert errors(at) == []
    at.switch_page("views/data.py").run()
    at.radio(key="data_source").set_value("sample").run()
    assert at.selectbox(key="target_column").value == "progression"


DECODE_BOMBS = {
    **{f"repeated {name}": (lambda path, kind=kind: repeated_text(path, kind))
       for name, kind in TEXT_TYPES.items()},
    "prefix-compressed string": prefix_compressed_text,
}
"""The command line's corpus (tests/test_hostile_input.py): a few kilobytes, 3 GB decoded."""

ALLOWANCE_MIB = 64


def test_parquet_decode_bombs_are_refused_in_an_error_box_and_the_run_stays(tmp_path) -> None:
    at = run_linear(new_app())
    before = at.session_state["last_run"]
    for kind, make in DECODE_BOMBS.items():
        path = tmp_path / f"{kind.replace(' ', '-')}.parquet"
        make(path)
        upload(at, path.name, path.read_bytes())
        messages = [m.replace("\\", "") for m in errors(at)]
        assert any("once decompressed; that is the limit" in m for m in messages), (kind,
                                                                                     messages)
        assert at.session_state["last_run"] is before, kind


@pytest.mark.parametrize("kind", DECODE_BOMBS)
def test_the_upload_reader_refuses_a_decode_bomb_in_bounded_memory(tmp_path, kind) -> None:
    """The dashboard's reader in a fresh process: the refusal's peak memory (ru_maxrss) stays
    within twice the footer's declared size plus ALLOWANCE_MIB of reading a small file."""
    path = tmp_path / "bomb.parquet"
    DECODE_BOMBS[kind](path)
    warm = tmp_path / "warm.parquet"
    pq.write_table(pa.table({"note": ["a", "b"] * 50, "y": np.arange(100.0)}), warm)
    measured = peak_rss_of_upload(path, warm_up=warm)
    assert measured.get("refused") == "too_large", measured
    grown = measured["after"] - measured["before"]
    assert grown <= 2 * stored_bytes(path) / 2**20 + ALLOWANCE_MIB, (kind, measured)


def test_the_upload_cap_is_checked_again_on_the_server() -> None:
    """A client that skips the browser's size check still meets server.maxUploadSize."""
    at = new_app()
    previous = config.get_option("server.maxUploadSize")
    config.set_option("server.maxUploadSize", 1)
    try:
        big = csv_bytes(small_table(200)) + b"0,0,0,0,A,0\n" * 120_000
        assert len(big) > 2**20
        upload(at, "big.csv", big)
    finally:
        config.set_option("server.maxUploadSize", previous)
    messages = [m.replace("\\", "") for m in errors(at)]
    assert any("the upload limit is 1.0 MiB" in m for m in messages), messages
    assert at.session_state["dataset"].name == "sample: diabetes"


def test_the_server_cap_follows_streamlits_option() -> None:
    assert sources.upload_limits(100).max_bytes == 100 * 2**20


UNUSABLE = [
    (lambda t: t.assign(outcome=t["outcome"].astype(object).where(t.index != 7, "high")),
     "target 'outcome' must be numeric, but it has text in data row 8"),
    (lambda t: t.assign(outcome=2.5), "target 'outcome' has one value on every row"),
    (lambda t: t.assign(lab=np.nan), "feature 'lab' is entirely missing"),
    (lambda t: t.assign(x2=t["x2"].where(t.index % 3 != 0, 1.7e308)),
     "feature 'x2' has values beyond ±1e+30"),
    (lambda t: t.assign(outcome=t["outcome"].where(t.index != 4, -1.7e308)),
     "target 'outcome' has values beyond ±1e+30"),
]


def test_readable_tables_with_unusable_columns_say_why_and_keep_the_results() -> None:
    at = run_linear(new_app())
    before = at.session_state["last_run"]
    for change, expected in UNUSABLE:
        upload(at, "cohort.csv", csv_bytes(change(small_table())))
        at.selectbox(key="target_column").set_value("outcome").run()
        messages = [m.replace("\\", "") for m in errors(at)]
        assert any(expected in m for m in messages), messages
        assert not any("high" in m for m in messages)
        assert at.session_state["last_run"] is before


def test_an_all_missing_column_is_not_guessed_as_the_target() -> None:
    table = small_table().assign(lab=np.nan)
    assert sources.choose_target(table) == "outcome"


def test_unicode_dotted_spaced_names_and_formula_cells_work_end_to_end() -> None:
    table = small_table().rename(columns={"x1": "Größe µ/m²", "x2": "a.b c", "x3": "病棟 [x]"})
    table["ward"] = ["=cmd|' /C calc'!A0", "+1", "-1", "@SUM(A1)"] * 30
    at = upload(new_app(), "名前 with spaces.csv", csv_bytes(table))
    assert errors(at) == []
    assert at.session_state["dataset"].name == "名前 with spaces.csv"
    run_linear(at)
    assert errors(at) == []
    assert at.session_state["last_run"].dataset_name == "名前 with spaces.csv"
    at.switch_page("views/patient.py").run()
    assert errors(at) == []


def test_markdown_in_an_uploaded_name_is_shown_as_text() -> None:
    """A file named like a link must not become one in the error box."""
    at = upload(new_app(), "[click](http:evil.example)*x*.csv", b"\x89PNG\r\n\x1a\n\x00")
    boxes = [e.value for e in at.error]  # the Markdown sent to the browser
    assert any(markdown_text("[click](http:evil.example)*x*.csv") in m for m in boxes), boxes
    assert any("[click](http:evil.example)*x*.csv" in m for m in errors(at))


def test_preview_of_mixed_columns_is_text() -> None:
    frame = pd.DataFrame({"mixed": [1, "a", None, 2.5]})
    shown = sources.preview(frame)["mixed"]
    assert shown[[0, 1, 3]].tolist() == ["1", "a", "2.5"] and pd.isna(shown[2])


# ------------------------------------------------- formula injection in the exported CSV

LINE_ENDS = ["\r", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
             "\u2029"]
BLANKS = ["", " ", "\t", "\u00a0", "\u2003", "\u3000", "\u200b", "\ufeff", '"']
FORMULAS = ["=1+1", "+1", "-2", "@SUM(1)", "＝1", "−1"]
BLANK_OR_QUOTE = "".join(BLANKS) + " \t\u00a0\u2000\u2001\u2002\u2003\u2009\u202f\u205f"


def _pieces(text: str, line_end: str | None) -> list[str]:
    """Lines of `text` split at one line-end convention (None: every one Python knows), and
    the cells a reader that ignores quotes makes of them."""
    lines = text.splitlines() if line_end is None else text.split(line_end)
    return [piece for line in lines for piece in re.split("[,;\t]", line)]


def _starts_a_formula(piece: str) -> bool:
    stripped = piece.lstrip(BLANK_OR_QUOTE).lstrip()
    if not stripped.startswith(("=", "+", "-", "@", "＝", "＋", "－", "＠", "−")):
        return False
    try:
        float(stripped.rstrip('"'))
    except ValueError:
        return True
    return False  # a number in a numeric column, which spreadsheets read as a number


def test_no_line_or_cell_of_the_exported_csv_starts_a_formula_under_any_line_end() -> None:
    """Names, ids and notes from an upload with formulas after every line end, blank and
    separator: split at every line-end convention, and at separators as a reader that ignores
    quotes would, no piece starts with = + - @ (after any spaces), and a reader that honours
    quotes gets every value back with the apostrophes only."""
    cells = [f"x{i}{end}{blank}{formula}" for i, (end, blank, formula) in enumerate(
        (e, b, f) for e in LINE_ENDS for b in BLANKS for f in FORMULAS)]
    cells += [f"{blank}{formula}" for blank in BLANKS for formula in FORMULAS]
    cells += [f"ok, {formula}" for formula in FORMULAS] + ["x1\r@SUM(1)", "\u00a0=cmd|' /C"]
    frame = pd.DataFrame({
        "patient_id": cells, "note": cells[::-1],
        "width": np.linspace(-3, 3, len(cells)), "=header\r@x": ["fine"] * len(cells)})
    text = export.safe_csv(frame).decode("utf-8-sig")
    for line_end in [*LINE_ENDS, None]:
        bad = [p for p in _pieces(text, line_end) if _starts_a_formula(p)]
        assert bad == [], (repr(line_end), bad[:5])
    back = pd.read_csv(io.StringIO(text), dtype={"patient_id": str, "note": str},
                       keep_default_na=False, lineterminator="\n")
    np.testing.assert_allclose(back["width"], frame["width"], rtol=0, atol=1e-12)
    assert [v.replace("'", "") for v in back["patient_id"]] == [
        v.replace("'", "") for v in cells]


def test_an_upload_killed_while_it_is_parsed_leaves_no_file_behind(tmp_path) -> None:
    """The server killed (SIGKILL) in the middle of parsing a 20 MB upload: nothing named
    cpdecomp-upload-* stays in the temporary folder (the staged bytes had no name)."""
    import signal
    import subprocess
    import sys

    from corpus.parquet_bombs import ROOT

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    # The child holds still inside the table reader (after the upload is staged), so the kill
    # lands mid-parse however fast the machine is: its read_csv says so and then waits.
    script = (
        "import sys, time\n"
        "import cpdecomp.core.tables\n"
        "real = cpdecomp.core.tables.pd.read_csv\n"
        "def held(*args, **kwargs):\n"
        "    if kwargs.get('nrows') != 1:  # the main read, not the header's\n"
        "        print('parsing', flush=True)\n"
        "        time.sleep(60)\n"
        "    return real(*args, **kwargs)\n"
        "cpdecomp.core.tables.pd.read_csv = held\n"
        "from cpdecomp.app.sources import single_upload\n"
        "rows = ''.join(f'{i},{i % 7}.5,{i % 3},ward{i % 5}\\n' for i in range(900_000))\n"
        "content = ('pid,x1,x2,ward\\n' + rows).encode()\n"
        "single_upload('big.csv', content)\n"
        "print('done', flush=True)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "TMPDIR": str(temporary),
                                  "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "parsing"
        seen = sorted(p.name for p in temporary.iterdir())
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL, "the parse ended before the kill"
    finally:
        if child.poll() is None:
            child.kill()
    assert seen == [] and sorted(temporary.iterdir()) == []
