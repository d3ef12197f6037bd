"""The Patient page says whether a case was reviewed (issue 35, item 8): in its patient box and
in a line at the top of the panel, before the numbers (the history stays further down; the
browser test tests/e2e/test_exports_and_review_status.py checks the line is on screen at
1280x720 without scrolling)."""

from __future__ import annotations

from dashboard_helpers import errors, new_app, run_linear


def test_the_patient_box_and_the_top_line_show_the_review() -> None:
    at = run_linear(new_app())
    at.switch_page("views/queue.py").run()
    case = int(at.selectbox(key="review_patient").value)
    patient = str(at.dataframe[0].value.set_index("position").loc[case, "patient_id"])
    at.text_input(key="reviewer").input("Dr. B")
    at.text_area(key="review_note").input("seen")
    at.button(key="mark_reviewed").click().run()

    at.switch_page("views/patient.py").run()
    assert errors(at) == []
    box = at.selectbox(key="patient")
    reviewed = [label for label in box.options if label.endswith(" · reviewed")]
    assert [label.split(" · ")[0] for label in reviewed] == [patient]
    box.set_value(case).run()
    lines = [c.value for c in at.caption if "Reviewed on" in c.value]
    assert lines and "Dr" in lines[0] and "seen" in lines[0], [c.value for c in at.caption]

    other = next(i for i in range(len(box.options)) if i != case)
    at.selectbox(key="patient").set_value(other).run()
    assert any(c.value.startswith("Not reviewed yet") for c in at.caption)
