"""Setup draws the Cohort page's four charts out of sight under the session's first results
(app/views/setup.py, `cohort_charts_ahead`): the same figures the Cohort page then shows, and
only under the session's first results, until the Cohort page is visited."""

from __future__ import annotations

import plotly.io as pio
from dashboard_helpers import errors, new_app, run_linear


def specs(at) -> list[dict]:
    return [pio.from_json(chart.proto.spec).to_plotly_json() for chart in at.get("plotly_chart")]


def test_the_first_results_draw_the_cohort_charts_ahead_until_the_cohort_is_seen() -> None:
    at = run_linear(new_app())
    assert errors(at) == []
    on_setup = specs(at)
    # The results' preview, then the four charts in the hidden block.
    assert len(on_setup) == 5
    assert any(".st-key-cohort_charts_ahead" in block.proto.body and "visibility: hidden"
               in block.proto.body for block in at.get("html"))
    # A rerun of the same page (a reconnecting browser, a widget) draws them again: drawn by
    # the first script run alone, a rerun removed them before the browser had drawn them.
    at.run()
    assert errors(at) == []
    assert specs(at) == on_setup
    at.switch_page("views/cohort.py").run()
    assert errors(at) == []
    assert on_setup[1:] == specs(at)  # what the Cohort page draws, chart for chart
    # Once the Cohort page has been seen, Setup again, and after another Run, shows the
    # preview alone.
    at.switch_page("views/setup.py").run()
    assert len(specs(at)) == 1
    at.number_input(key="alpha").set_value(0.2).run()
    at.button(key="run").click().run()
    assert errors(at) == []
    assert any("α = 0.2" in s.value for s in at.success)
    assert len(specs(at)) == 1
