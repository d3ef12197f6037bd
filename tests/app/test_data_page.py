"""Data page: the sample opens by default, uploads are read or refused with a reason."""

from __future__ import annotations

from dashboard_helpers import SAMPLE, csv_bytes, errors, figure_numbers, new_app, shown, small_table


def test_first_open_shows_the_bundled_sample_with_its_roles() -> None:
    at = new_app()
    assert errors(at) == []
    assert at.session_state["dataset"].name == "sample: diabetes"
    assert at.selectbox(key="target_column").value == "progression"
    assert at.selectbox(key="id_column").value == "patient_id"
    assert len(at.dataframe) == 1  # the preview
    assert any("10 features" in s.value for s in at.success)


def test_a_bad_upload_shows_the_reason_and_keeps_the_previous_data() -> None:
    at = new_app()
    at.radio(key="data_source").set_value("upload").run()
    at.file_uploader(key="upload").set_value(("broken.csv", b"\x00\x01\x02garbage", "text/csv"))
    at.run()
    assert any("broken.csv" in message and "binary" in message for message in errors(at))
    assert at.session_state["dataset"].name == "sample: diabetes"
    assert at.selectbox(key="target_column").value == "progression"
    # A rerun shows the reason again without re-reading the file, and the state still holds.
    at.run()
    assert any("binary" in message for message in errors(at))
    assert at.session_state["dataset"].name == "sample: diabetes"


def test_an_empty_upload_is_refused() -> None:
    at = new_app()
    at.radio(key="data_source").set_value("upload").run()
    at.file_uploader(key="upload").set_value(("empty.csv", b"", "text/csv"))
    at.run()
    assert any("empty.csv is empty" in message for message in errors(at))
    assert at.session_state["dataset"].name == "sample: diabetes"


def test_a_good_upload_replaces_the_data_and_guesses_roles() -> None:
    at = new_app()
    at.radio(key="data_source").set_value("upload").run()
    at.file_uploader(key="upload").set_value(("cohort.csv", csv_bytes(small_table()), "text/csv"))
    at.run()
    assert errors(at) == []
    assert at.session_state["dataset"].name == "cohort.csv"
    assert at.selectbox(key="target_column").value == "outcome"
    assert at.selectbox(key="id_column").value == "mrn"
    # The sidebar, drawn before the page read the upload, names the new data in the same run.
    sidebar = [shown(caption.value) for caption in at.sidebar.caption]
    assert "Data: cohort.csv" in sidebar, sidebar
    assert not any("diabetes" in caption for caption in sidebar), sidebar


def test_a_text_target_is_refused_with_a_fix() -> None:
    at = new_app()
    at.radio(key="data_source").set_value("upload").run()
    at.file_uploader(key="upload").set_value(("cohort.csv", csv_bytes(small_table()), "text/csv"))
    at.run()
    at.selectbox(key="target_column").set_value("ward").run()
    assert any("must be numeric" in message for message in errors(at))


def test_choosing_features_by_hand() -> None:
    at = new_app()
    at.checkbox(key="all_features").uncheck().run()
    at.multiselect(key="features").set_value(["bmi", "bp"]).run()
    assert errors(at) == []
    assert any("2 features" in s.value for s in at.success)


def test_separate_training_calibration_and_patients_files() -> None:
    table = small_table(160)
    at = new_app()
    at.radio(key="data_source").set_value("separate").run()
    at.file_uploader(key="upload_training").set_value(
        ("train.csv", csv_bytes(table.iloc[:80]), "text/csv"))
    at.file_uploader(key="upload_calibration").set_value(
        ("cal.csv", csv_bytes(table.iloc[80:130]), "text/csv"))
    at.file_uploader(key="upload_patients").set_value(
        ("new.csv", csv_bytes(table.iloc[130:].drop(columns="outcome")), "text/csv"))
    at.run()
    assert errors(at) == []
    dataset = at.session_state["dataset"]
    assert dataset.separate and len(dataset.patients) == 30
    assert at.selectbox(key="target_column").value == "outcome"


def test_the_outcome_chart_shows_the_chosen_target() -> None:
    import numpy as np
    import pandas as pd
    import plotly.io as pio

    at = new_app()
    (chart,) = at.get("plotly_chart")
    trace = pio.from_json(chart.proto.spec).data[0]
    sample = pd.read_csv(SAMPLE)
    np.testing.assert_allclose(np.sort(figure_numbers(trace.x)),
                               np.sort(sample["progression"].to_numpy(dtype=float)))
    # Another target: the chart follows it.
    at.selectbox(key="target_column").set_value("bmi").run()
    trace = pio.from_json(at.get("plotly_chart")[0].proto.spec).data[0]
    np.testing.assert_allclose(np.sort(figure_numbers(trace.x)),
                               np.sort(sample["bmi"].to_numpy(dtype=float)))


def test_the_outcome_s_range_in_four_numbers() -> None:
    import numpy as np

    from cpdecomp import target_values
    from cpdecomp.app.sources import load_sample, source_table

    at = new_app()
    values = target_values(source_table(load_sample("diabetes")), "progression")
    shown = {m.label: m.value for m in at.metric}
    assert shown["Rows with an outcome"] == f"{np.isfinite(values).sum():,}" == "442"
    # Rounded at the largest value's scale (three significant figures: no decimals here).
    assert shown["Lowest"] == f"{values.min():.0f}" == "25"
    assert shown["Highest"] == f"{values.max():.0f}" == "346"
    assert abs(float(shown["Median"]) - np.median(values)) <= 0.5
