"""Cohort page: widths, coverage, the calibration vector, the instance spread, disagreements."""

from __future__ import annotations

from dashboard_helpers import (
    drawn_charts,
    drawn_figures,
    errors,
    new_app,
    run_linear,
    shown_table,
)

from cpdecomp.app import cases, html_charts


def test_without_results_it_points_to_setup() -> None:
    at = new_app()
    at.switch_page("views/cohort.py").run()
    assert errors(at) == []
    assert any("Run" in i.value for i in at.info)


def test_cohort_views() -> None:
    at = run_linear(new_app())
    at.switch_page("views/cohort.py").run()
    assert errors(at) == []
    # The four charts drawn as HTML, each the run's kept figure for its slot.
    drawn = drawn_charts(at)
    assert list(drawn) == ["cohort_widths", "cohort_calibration", "cohort_instance",
                           "cohort_disagreement"]
    assert at.get("plotly_chart") == []
    assert any(drawn == {f"cohort_{name}": page for name, page in kept.pages.items()}
               for (kind, _, _), kept in cases._kept.items() if kind == "cohort")
    # Each the HTML of its figure (the numbers the other tests check).
    assert [figure.data[0].type for figure in drawn_figures(at).values()] == [
        "histogram", "bar", "box", "bar"]
    # The disagreement table: the chart's numbers in percent, one decimal, from core's
    # report through summaries (the shares the chart's bars show).
    table = shown_table(at, "cohort_disagreement_table")
    assert list(table.columns) == ["feature", "% calibration vs instance",
                                   "% total vs instance"]
    bars = drawn_figures(at)["cohort_disagreement"].data
    for column, trace in zip(table.columns[1:], bars, strict=True):
        assert list(table[column]) == [round(float(x), 1) for x in trace.x]
    assert all(text.count(".") == 1 for text in table.attrs["text"]["% total vs instance"])
    # The style sheet once, outside the charts.
    assert [h.proto.body for h in at.get("html") if h.proto.body.startswith("<style>")] \
        == [f"<style>{html_charts.CSS}</style>"]
    labels = {m.label: m.value for m in at.metric}
    assert labels["Patients explained"] == "111"
    assert labels["Empirical coverage"].endswith("%")
    assert any("Specific to α = 0.1" in c.value for c in at.caption)


def test_log_units_show_the_single_calibration_vector() -> None:
    at = run_linear(new_app())
    at.switch_page("views/cohort.py").run()
    assert any("cohort mean" in c.value or "mean over patients" in c.value for c in at.caption)
    at.radio(key="units").set_value("log").run()
    assert errors(at) == []
    assert not any("mean over patients" in c.value for c in at.caption)


def test_identity_family_has_no_units_toggle() -> None:
    at = new_app()
    at.switch_page("views/setup.py").run()
    at.selectbox(key="cp_family").set_value("cqr").run()
    at = run_linear(at)
    at.switch_page("views/cohort.py").run()
    assert errors(at) == []
    assert not [r for r in at.radio if r.key == "units"]


def test_a_bug_shows_a_short_error_and_keeps_cell_values_out_of_the_log(
        monkeypatch, caplog) -> None:
    from cpdecomp.app.views import interactions

    secret = "-".join(["secret", "cell", "value"])  # a runtime value, as a cell would be

    def broken(results):
        raise ValueError(f"could not convert {secret!r}")

    at = run_linear(new_app())
    # Something the page works out on every visit (its summaries come with the run).
    monkeypatch.setattr(interactions, "unavailable_reason", broken)
    with caplog.at_level("ERROR"):
        at.switch_page("views/cohort.py").run()
    assert [e.value for e in at.error] == [
        "Unexpected error (ValueError); the previous results are kept. Please report it."]
    assert "ValueError" in caplog.text and "secret-cell-value" not in caplog.text


def test_the_analysts_details_say_how_a_log_link_model_is_averaged() -> None:
    """The gamma family's linear model is a gamma GLM (log link): its removal is averaged on
    the log scale, and the details say so; a run whose only log link is the normalized family's
    sigma says that sigma is averaged on its log scale, and offers no other scale."""
    at = new_app()
    at.switch_page("views/setup.py").run()
    at.selectbox(key="cp_family").set_value("gamma").run()
    at = run_linear(at)
    at.switch_page("views/cohort.py").run()
    assert errors(at) == []
    details = analyst_details(at)
    assert "The model behind f has a log link" in details
    assert "--masking response" in details
    plain = run_linear(new_app())  # the default family: normalized
    plain.switch_page("views/cohort.py").run()
    assert plain.session_state["last_run"].options.family == "normalized"
    details = analyst_details(plain)
    assert "σ has a log link" in details
    assert "The model behind" not in details and "--masking response" not in details


def analyst_details(at) -> str:
    (expander,) = [e for e in at.expander if e.label == "Analyst's details"]
    return " ".join(m.value for m in expander.markdown)
