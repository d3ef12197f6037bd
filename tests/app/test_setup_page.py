"""Setup page: Run computes on demand, refuses bad settings with a message, keeps old results."""

from __future__ import annotations

from dashboard_helpers import csv_bytes, errors, new_app, run_linear, small_table


def test_run_explains_every_held_out_patient() -> None:
    at = run_linear(new_app())
    assert errors(at) == []
    assert any("Results for 111 patients" in s.value for s in at.success)
    run = at.session_state["last_run"]
    assert run.options.model == "linear" and run.options.background == 16
    assert run.method == "exact" and run.alpha == 0.1


def test_alpha_and_confidence_stay_in_step() -> None:
    at = new_app()
    at.switch_page("views/setup.py").run()
    at.number_input(key="alpha").set_value(0.2).run()
    assert abs(at.number_input(key="confidence").value - 0.8) < 1e-9
    at.number_input(key="confidence").set_value(0.95).run()
    assert abs(at.number_input(key="alpha").value - 0.05) < 1e-9


def test_a_refused_setting_shows_the_message_and_keeps_the_previous_results() -> None:
    at = run_linear(new_app())
    before = at.session_state["last_run"]
    # 40 rows split 50/25/25 leave 10 calibration rows: alpha = 0.05 needs 19.
    at.switch_page("views/data.py").run()
    at.radio(key="data_source").set_value("upload").run()
    at.file_uploader(key="upload").set_value(
        ("tiny.csv", csv_bytes(small_table(40)), "text/csv"))
    at.run()
    at.switch_page("views/setup.py").run()
    at.number_input(key="alpha").set_value(0.05)
    at.button(key="run").click().run()
    messages = errors(at)
    assert any("calibration" in m and "19" in m for m in messages), messages
    assert at.session_state["last_run"] is before
    assert any("Results for 111 patients" in s.value for s in at.success)


def test_permutation_budget_reaches_the_report() -> None:
    at = new_app()
    at.switch_page("views/setup.py").run()
    at.selectbox(key="attribution_method").set_value("permutation").run()
    at = run_linear(at, budget=8)
    assert errors(at) == []
    assert at.session_state["last_run"].budget == 8


def test_every_offered_method_runs_and_keeps_its_budget_in_range() -> None:
    from cpdecomp.core.attribution import METHOD_BUDGETS, METHODS

    at = new_app()
    for method in METHODS:
        if method.startswith("shap"):
            continue  # shap's own explainers are slow; core tests them
        at.switch_page("views/setup.py").run()
        at.selectbox(key="attribution_method").set_value(method).run()
        budget = METHOD_BUDGETS[method]
        assert at.number_input(key="budget").disabled == (budget is None)
        at = run_linear(at)
        assert errors(at) == [], method
        at.switch_page("views/patient.py").run()
        assert errors(at) == [], method


def test_the_default_setup_runs_on_the_sample() -> None:
    """What the dashboard's first open shows (docs/clinician.md): gradient boosting, automatic
    background, exact."""
    at = new_app()
    at.switch_page("views/setup.py").run()
    at.button(key="run").click().run(timeout=120)
    assert errors(at) == []
    run = at.session_state["last_run"]
    assert (run.options.model, run.options.background, run.method) == ("gbm", None, "exact")
    assert any("Results for 111 patients" in s.value for s in at.success)


def test_the_background_shown_follows_the_model_and_family() -> None:
    at = new_app()
    at.switch_page("views/setup.py").run()
    assert at.number_input(key="background_used").value == 221  # all training rows, tables
    at.selectbox(key="cp_family").set_value("gamma").run()
    assert at.number_input(key="background_used").value == 64  # brute force: kept small
    assert any("brute force" in w.value and "Expected time" in w.value for w in at.warning)
    at.selectbox(key="cp_family").set_value("normalized").run()
    assert at.number_input(key="background_used").value == 221
    assert not any("brute force" in w.value for w in at.warning)
