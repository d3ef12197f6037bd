"""Data: pick the bundled sample or upload tables, preview them, and choose the columns' roles."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import streamlit as st

from cpdecomp import choose_columns, target_values
from cpdecomp.app import charts, housekeeping, planning, sources, state, targets, widgets
from cpdecomp.app.text import markdown_text, people_number
from cpdecomp.core.data import require_values, require_varied_target
from cpdecomp.core.errors import CpdecompError
from cpdecomp.sample_data import SAMPLES

st.title("Data")
st.caption("Start from the bundled sample, or bring a table of patients (CSV or Parquet). "
           "A file that cannot be used is refused with the reason; the data already loaded "
           "stays until a file is read.")

source = st.radio("Source", list(state.SOURCES), key="data_source",
                  format_func=state.SOURCES.__getitem__, horizontal=True)


def refuse(origin: tuple[str, ...], message: str) -> None:
    """Remember a refused file so reruns show the reason without parsing it again."""
    st.session_state["refused"] = (origin, message)


def try_load(origin: tuple[str, ...], load: Callable[[], sources.Dataset]) -> bool:
    """Load a dataset unless it is the current one or was already refused; True when loaded."""
    if st.session_state.get("dataset_origin") == origin:
        return False
    refused = st.session_state.get("refused")
    if refused and refused[0] == origin:
        st.error(markdown_text(refused[1]))
        return False
    try:
        dataset = load()
    except CpdecompError as error:
        refuse(origin, str(error))
        st.error(markdown_text(str(error)))
        return False
    state.set_dataset(dataset, origin)
    return True


# Streamlit's upload cap (server.maxUploadSize) is checked again here, with core's row, column
# and cell caps, before a file is read.
limits = sources.upload_limits(st.get_option("server.maxUploadSize"))


if source == "sample":
    name = st.selectbox("Sample", list(SAMPLES), key="sample")
    try_load(("sample", name), lambda: sources.load_sample(name))
elif source == "upload":
    upload = st.file_uploader("Patients table (CSV or Parquet)", type=sources.UPLOAD_TYPES,
                              key="upload")
    if upload is not None:
        chosen = upload
        # Keyed by Streamlit's id of this upload, not by a hash of its bytes: hashing up to the
        # upload cap on every rerun of this page would cost more than the page itself.
        try_load(("upload", chosen.file_id),
                 lambda: sources.single_upload(chosen.name, chosen.getvalue(), limits))
    else:
        st.info("Upload a table with one row per patient: a numeric target column and feature "
                "columns. Rows are split into training, calibration and patients to explain.")
elif source == "model":
    table_upload = st.file_uploader("Patients table (CSV or Parquet)", key="model_table",
                                    type=sources.UPLOAD_TYPES)
    st.caption("Your model files, one per part of the model: skops (.skops), XGBoost "
               "(.json, .ubj) or LightGBM (.txt). Pickle files (.pkl, .joblib) are refused: "
               "opening one runs code from it; save the model with skops instead. A point "
               "model alone gives the absolute family (or gamma, chosen on Setup); with a "
               "difficulty model, normalized; lower and upper quantile models give cqr.")
    model_slots = st.columns(len(sources.MODEL_COMPONENTS))
    model_uploads = {}
    for slot, (component, label) in zip(model_slots, sources.MODEL_COMPONENTS.items(), strict=True):
        with slot:
            given_model = st.file_uploader(label, key=f"model_{component}",
                                           type=sources.MODEL_TYPES)
        if given_model is not None:
            model_uploads[component] = given_model
    # Each model file is read as soon as it is given, so a refused one (a pickle, a damaged
    # file) is said at once, with or without a table; the reason is kept per upload.
    checks = st.session_state.setdefault("model_checks", {})
    refused_models = []
    for component, given_model in model_uploads.items():
        if given_model.file_id not in checks:
            try:
                sources.read_model_upload(component, given_model.name,
                                          given_model.getvalue(), limits)
                checks[given_model.file_id] = ""
            except CpdecompError as error:
                checks[given_model.file_id] = str(error)
        if checks[given_model.file_id]:
            refused_models.append(component)
            st.error(markdown_text(checks[given_model.file_id]))
    if refused_models:
        pass  # the data already loaded stays
    elif table_upload is not None and model_uploads:
        chosen_table = table_upload
        origin = ("model", chosen_table.file_id,
                  *(f"{c}={f.file_id}" for c, f in sorted(model_uploads.items())))
        loaded = try_load(origin, lambda: sources.model_upload(
            (chosen_table.name, chosen_table.getvalue()),
            {c: (f.name, f.getvalue()) for c, f in model_uploads.items()}, limits))
        current = state.current_dataset()
        if loaded and current is not None:
            # The study uses the models as given: their columns are the features, in their
            # order, and the family is the one their components make (the target was guessed
            # by set_dataset, as for every upload).
            if current.model_features is not None:
                st.session_state["all_features"] = False
                st.session_state["features"] = list(current.model_features)
            st.session_state["cp_family"] = sources.family_for(list(model_uploads))
    else:
        st.info("Upload the patients table and at least one model file. The models are used "
                "as they are: nothing is refitted but a difficulty model, if normalized needs "
                "one and none is given. The Model choice on Setup does not apply.")
else:
    slots = st.columns(3)
    given = []
    for slot, role in zip(slots, sources.ROLES, strict=True):
        with slot:
            given.append(st.file_uploader(f"{role.capitalize()} file", key=f"upload_{role}",
                                          type=sources.UPLOAD_TYPES))
    files = [f for f in given if f is not None]
    if len(files) == len(given):
        try_load(("separate", *(f.file_id for f in files)),
                 lambda: sources.separate_uploads([(f.name, f.getvalue()) for f in files],
                                                  limits))
    else:
        st.info("Give all three files: training rows fit the models, calibration rows set the "
                "conformal quantile, and every patients row is explained.")

# Only the files the uploaders above hold stay in memory: a replaced upload, or one under
# another source, is parsed already or no longer wanted.
housekeeping.drop_superseded_uploads([st.session_state.get(key) for key in (
    "upload", "model_table", *(f"model_{c}" for c in sources.MODEL_COMPONENTS),
    *(f"upload_{role}" for role in sources.ROLES))])

dataset = state.current_dataset()
if dataset is None:
    st.stop()

st.subheader(f"Current data: {markdown_text(dataset.name)}")
if dataset.description:
    st.caption(dataset.description)
if dataset.separate:
    tabs = st.tabs(["training", "calibration", "patients"])
    for tab, table in zip(tabs, (dataset.train, dataset.calibration, dataset.patients),
                          strict=True):
        with tab:
            st.caption(f"{table.shape[0]} rows × {table.shape[1]} columns; first rows:")
            st.dataframe(sources.preview(table), hide_index=True)
else:
    table = dataset.patients
    st.caption(f"{table.shape[0]} rows × {table.shape[1]} columns; first rows:")
    st.dataframe(sources.preview(table), hide_index=True)

st.subheader("Columns")
columns = dataset.columns
state.ensure_choice("target_column", columns, dataset.default_target)
st.selectbox("Target (the outcome the model predicts)", columns, key="target_column",
                      help="Chosen for you: the numeric column with the most distinct values "
                           "that is not an id or a yes/no flag. Change it if the outcome is "
                           "another column.")
id_options = [state.NO_ID] + [c for c in dataset.id_choices
                              if c != st.session_state["target_column"]]
state.ensure_choice("id_column", id_options, dataset.default_id or state.NO_ID)
st.selectbox("Patient id column", id_options, key="id_column",
             help="Names the patients in the views, the queue and the reviews.")
st.checkbox("Use every other column as a feature", key="all_features")
if not st.session_state["all_features"]:
    id_column = st.session_state["id_column"]
    feature_options = [c for c in columns
                       if c not in (st.session_state["target_column"], id_column)]
    st.session_state["features"] = [f for f in st.session_state.get("features", [])
                                    if f in feature_options]
    st.multiselect("Features", feature_options, key="features")

def outcome_numbers(values: np.ndarray) -> None:
    """The outcome's range in four numbers, beside its histogram. Also the first metrics a
    session meets: the browser loads their code here, on the page the session opens on, not
    on the first visit to the Cohort page after a Run (measured: the only code the browser
    still fetched on that visit)."""
    known = values[np.isfinite(values)]
    scale = float(np.max(np.abs(known), initial=0.0))
    cells = st.columns(4)
    cells[0].metric("Rows with an outcome", f"{known.size:,}")
    for cell, label, value in zip(cells[1:], ("Lowest", "Median", "Highest"),
                                  (np.min(known), np.median(known), np.max(known)),
                                  strict=True):
        cell.metric(label, people_number(float(value), scale))


target, id_column, features = state.chosen_columns()
try:
    source_table = state.source_table(dataset)
    choice = choose_columns(source_table, target, id_column, features)
    values = target_values(source_table, target)
    require_varied_target(values, target)
    # Each feature column is scanned once per table and choice of features, not on every
    # rerun of this page (a passed check is remembered; a refusal is said again).
    checked = (dataset.digest, tuple(choice.features))
    if st.session_state.get("features_checked") != checked:
        require_values(source_table, choice.features)
        st.session_state["features_checked"] = checked
except CpdecompError as error:
    st.error(markdown_text(str(error)))
else:
    st.success(markdown_text(
        f"Target {choice.target!r}, {len(choice.features)} features, patients named by "
        f"{choice.id_column or 'row number'}."))
    for note in (planning.target_note(values, target),
                 targets.censored_time_note(source_table, target),
                 sources.position_note(dataset.models, choice.features)):
        if note:
            st.warning(markdown_text(note))

    st.subheader("What the outcome can be")
    # Also the first chart a session meets, on the page it opens on: the browser loads its
    # chart code here, not on the first visit to the results.
    widgets.chart(charts.outcome_histogram(values, target=target), key="outcome_histogram")
    outcome_numbers(values)
    state.ensure_outcome_range(dataset, target)
    if st.session_state.get("outcome_inferred"):
        st.caption("No training value of the target is below 0, so it is taken as never "
                   "negative (a count, a length of stay); untick if it can be.")
    low_on, low, high_on, high, unit = st.columns([1.3, 1, 1.3, 1, 1.4],
                                                   vertical_alignment="bottom")
    low_on.checkbox("Has a lowest value", key="outcome_low_on")
    low.number_input("Lowest", key="outcome_low", disabled=not st.session_state["outcome_low_on"],
                     format="%g", label_visibility="collapsed")
    high_on.checkbox("Has a highest value", key="outcome_high_on")
    high.number_input("Highest", key="outcome_high", format="%g", label_visibility="collapsed",
                      disabled=not st.session_state["outcome_high_on"])
    unit.text_input("Unit (e.g. days)", key="outcome_unit", max_chars=40)
    state.data_page_range_changed(dataset, target)  # the results on show follow their range
    st.caption("Intervals are shown clipped to this range and marked as clipped; the width and "
               "its parts stay those of the model's unclipped interval. The range goes with "
               "each Run, into the pages and the exports.")
    st.page_link("views/setup.py", label="Next: set up the model and run",
                 icon=":material/arrow_forward:")
