"""The dashboard as a thin reader: figure builders take data, never the session, and pages read
one flat record of the run (`Shown`) that says what core's report says."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pandas as pd

from cpdecomp import StudyOptions, prepare_study
from cpdecomp.app import cases, summaries
from cpdecomp.app.shown import shown_report

APP = Path(__file__).resolve().parents[2] / "app"
PURE = ("cases.py", "charts.py", "shown.py", "summaries.py", "reading.py", "export.py")
"""Modules that build figures, tables and words from data."""


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_figure_builders_never_import_the_session_or_streamlit() -> None:
    for name in PURE:
        modules = imported(APP / name)
        assert not {m for m in modules if m == "streamlit" or m.startswith("streamlit.")}, name
        assert not {m for m in modules if m.startswith("app.state")}, name
        assert "app.state" not in modules and "app.widgets" not in modules, name


def test_no_page_walks_the_report_chain() -> None:
    for page in (APP / "views").glob("*.py"):
        # An edited patient (what-if) is explained afresh: its explanation is read as such.
        text = page.read_text(encoding="utf-8").replace("edited.decomposition", "")
        assert not re.search(r"\.(explanation|decomposition)\b", text), page.name


def small_report():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(160, 3))
    y = 2 * x[:, 0] + (1 + np.abs(x[:, 1])) * rng.normal(size=160)
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "y": y})
    study = prepare_study(frame, StudyOptions(target="y", model="linear", family="normalized",
                                              background=16))
    return study.explain(method="exact", alpha=0.1, calibration_bootstrap=50)


def test_shown_says_what_the_report_says() -> None:
    report = small_report()
    shown = shown_report(report, ("run", "width"), "y")
    e = report.explanation
    d = e.decomposition
    for name in ("calibration", "instance", "total", "calibration_low", "calibration_high"):
        np.testing.assert_array_equal(getattr(shown, name), getattr(d, name))
    for name in ("width", "lower", "upper", "prediction"):
        np.testing.assert_array_equal(getattr(shown, name), getattr(e, name))
    assert shown.features == d.features and shown.units_label == "width (y units)"
    # The per-patient sign flags against the cohort's counts, computed apart in summaries.
    counts = summaries.sign_disagreement(report)
    np.testing.assert_allclose(shown.disagree.mean(axis=0), counts["calibration_vs_instance"],
                               atol=1e-12)
    # The case reading's flags for a patient are those of the bars drawn for it.
    position = int(np.argmax(shown.disagree.sum(axis=1)))
    figure = cases.bars_figure(shown, position)
    order = np.argsort(-np.abs(shown.total[position]), kind="stable")
    widths = np.asarray(figure.data[0].marker.line.width)
    np.testing.assert_array_equal(widths > 1, shown.disagree[position][order])
