"""The outcome's range is kept with the run (issue 35, item 2): every page and export of a run
clips its intervals the same way, whatever a widget says later; the Data page, for the run's own
data and target, is the one place that changes it.

The bundled sample's outcome is never negative, so its range starts as "never below 0" and a
linear model's widest intervals reach below it."""

from __future__ import annotations

import html

import numpy as np
from dashboard_helpers import errors, new_app, run_linear

from cpdecomp.app import cases, state
from cpdecomp.app.planning import OutcomeRange


def queue_intervals(at) -> list[str]:
    return list(at.dataframe[0].value["interval"])


def test_the_queue_keeps_the_runs_range_when_a_widget_is_reset() -> None:
    at = run_linear(new_app())
    at.switch_page("views/queue.py").run()
    at.slider(key="queue_percentile").set_value(0).run()  # every patient but the narrowest
    assert errors(at) == []
    table = at.dataframe[0].value
    below = table["lower"] < 0
    assert below.any(), "no flagged interval reaches below 0: the check would prove nothing"
    assert all(text.endswith("✂") for text in table.loc[below, "interval"])
    assert (table["shown_lower"] >= 0).all()
    assert set(table.loc[below, "clipped_to"]) == {"never below 0"}

    # A widget back at its default (what a click on the Patient page did, issue 35 item 1):
    # the run's intervals are still clipped, on the page and in what it exports.
    at.session_state["outcome_low_on"] = False
    at.run()
    assert queue_intervals(at) == list(table["interval"])

    # Unticked on the Data page, for the run's own data and target: the run follows.
    at.switch_page("views/data.py").run()
    at.checkbox(key="outcome_low_on").uncheck().run()
    at.switch_page("views/queue.py").run()
    assert not any("✂" in text for text in queue_intervals(at))


def test_the_case_summary_shows_the_clipped_interval_its_note_and_the_reading() -> None:
    at = run_linear(new_app())
    at.switch_page("views/queue.py").run()
    results = state.Results(at.session_state["last_run"], *_study_and_report(at), "width")
    shown = results.shown
    position = int(np.flatnonzero(shown.lower < 0)[0])
    outcome = OutcomeRange(low=0.0, unit="points")
    reading = cases.case_reading(shown, position, unit=outcome.unit)
    page = cases.case_html(shown, position, {}, [], outcome=outcome, reading=reading)
    interval = cases.interval_text(shown, position, outcome)
    assert interval.startswith("[0, ") and interval.endswith(" ✂")
    assert f"<td>{interval}</td>" in page
    note = cases.clip_note(shown, position, outcome)
    assert note is not None and "never below 0" in note and "points" in note
    assert f"<p>{html.escape(note)}</p>" in page
    assert f"<p>{html.escape(reading)}</p>" in page
    assert "<td>never below 0 (points)</td>" in page


def _study_and_report(at):
    from cpdecomp.app import runs

    config = at.session_state["last_run"]
    handle = runs.fitted_study(config.digest, config.options, at.session_state["run_dataset"])
    report = handle.report(config.method, config.alpha, "width", config.budget,
                           background_bootstrap=config.background_bootstrap)
    return handle.study, report
