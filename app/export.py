"""Files for people to take away: the review queue as CSV, and one case as a standalone HTML page.

The CSV is opened in spreadsheets, which run a cell that starts with '=', '+', '-', '@', a tab
or a carriage return as a formula (CSV injection); feature names, patient ids and notes come
from users, so every text cell and header is neutralised with a leading apostrophe, and so is
every line and separator inside a cell: a reader that ends lines at a carriage return, a
vertical tab or a Unicode line separator (or ignores the quotes) starts a row or a cell
there. Text cells are quoted; numbers stay numbers. The HTML page draws its charts in HTML
(app/html_charts.py), with no script, and escapes every text, so it opens offline and shows
uploaded text as text.
"""

from __future__ import annotations

import csv
import html
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import pandas as pd
import plotly.graph_objects as go

from cpdecomp.app import html_charts

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n", "−", "＝", "＋", "－", "＠")
"""Starts that make a spreadsheet read a cell as a formula (and their full-width lookalikes)."""

LINE_ENDS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
"""Every character some reader ends a line at (those of str.splitlines)."""

_FORMULA_CHARACTERS = re.escape("".join(c for c in FORMULA_STARTS if c not in "\t\r\n"))
SEPARATORS = ",;\t"
"""Where a reader that ignores quotes starts a new cell inside a quoted one."""

_CELL_START_BEFORE_FORMULA = re.compile(
    # The start of the text, of a line or of a cell as a quote-ignoring reader splits it, then
    # blanks (any Unicode space but a line end, zero-width ones, quotes such a reader keeps),
    # then a formula character.
    rf"(^|[{LINE_ENDS}{SEPARATORS}])"
    rf"(?=(?:[^\S{LINE_ENDS}]|[\u200b\u2060\ufeff\"])*[{_FORMULA_CHARACTERS}])")


def neutralise(value: object) -> object:
    """Text that a spreadsheet would run as a formula, from the cell's start or from any line
    or separator inside it, with an apostrophe there."""
    if not isinstance(value, str):
        return value
    value = _CELL_START_BEFORE_FORMULA.sub(r"\1'", value)
    if value.startswith(("\t", *LINE_ENDS)):
        value = "'" + value
    return value


def safe_csv(frame: pd.DataFrame) -> bytes:
    """CSV bytes (UTF-8 with a byte-order mark, for spreadsheets) with text cells neutralised."""
    safe = frame.copy()
    safe.columns = [neutralise(str(c)) for c in safe.columns]
    for column in safe.columns:
        if not (pd.api.types.is_numeric_dtype(safe[column])
                or pd.api.types.is_bool_dtype(safe[column])):
            safe[column] = safe[column].map(neutralise).astype(object)
    # Every text cell quoted: Python's csv module would leave a carriage return (and the
    # Unicode line ends) unquoted, ending the row there for a spreadsheet.
    return safe.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC).encode("utf-8-sig")


STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 1100px; color: #222; line-height: 1.4; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.meta td { text-align: left; }
.note { white-space: pre-wrap; }
"""


def _key_values(rows: Mapping[str, object]) -> str:
    cells = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in rows.items()
    )
    return f'<table class="meta">{cells}</table>'


def case_summary_html(*, title: str, facts: Mapping[str, object],
                      figures: Sequence[go.Figure], table: pd.DataFrame,
                      reviews: Sequence[Mapping[str, object]], notes: Sequence[str] = ()) -> str:
    """A self-contained page: facts, figures (drawn as HTML, app/html_charts.py), a table, the
    reviews."""
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{STYLE}{html_charts.CSS}</style></head>"
        "<body>",
        f"<h1>{html.escape(title)}</h1>",
        _key_values(facts),
    ]
    parts += [f"<p>{html.escape(note)}</p>" for note in notes]
    # No script: the page opens anywhere, offline, in a few kilobytes (with plotly.js inlined
    # it was 4.8 MB per case).
    parts += [html_charts.chart(figure) for figure in figures]
    parts.append("<h2>Feature values and attributions</h2>")
    parts.append(table.to_html(index=False, escape=True, float_format=lambda v: f"{v:.6g}",
                               na_rep=""))
    parts.append("<h2>Review history</h2>")
    if reviews:
        items = "".join(
            "<li>" + html.escape(f"{r['created_at']} — {r['status']}"
                                 + (f" by {r['reviewer']}" if r.get("reviewer") else ""))
            + (f': <span class="note">{html.escape(str(r["note"]))}</span>' if r.get("note")
               else "")
            + "</li>"
            for r in reviews
        )
        parts.append(f"<ul>{items}</ul>")
    else:
        parts.append("<p>Not reviewed yet.</p>")
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    parts.append(f"<p><small>Written by cpdecomp at {html.escape(stamp)}.</small></p>")
    parts.append("</body></html>")
    return "\n".join(parts)
