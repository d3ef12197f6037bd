"""Setup: model, conformal family, α, attribution method, budget, background, seed, and Run."""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import StopException

from cpdecomp import FAMILIES, MODELS, target_values
from cpdecomp.app import planning, runs, state, targets, warmup_notice, widgets
from cpdecomp.app.text import markdown_text
from cpdecomp.core.attribution import MAX_EXACT_PLAYERS, METHOD_BUDGETS, METHOD_LABELS, METHODS
from cpdecomp.core.errors import CpdecompError

st.title("Setup")
warmup_notice.show()  # after an install: the kernels being compiled ahead, step by step
dataset = state.current_dataset()
if dataset is None:
    st.info("Choose data first.")
    st.page_link("views/data.py", label="Go to Data", icon=":material/table:")
    st.stop()

target, id_column, features = state.chosen_columns()
n_features = len(features) if features else len(
    [c for c in dataset.columns if c not in (target, id_column)])
# Names come from the uploaded file: shown as written, never as Markdown.
st.caption(markdown_text(
    f"Data: {dataset.name} · target {target!r} · {n_features} features · patients named by "
    f"{id_column or 'row number'}"))


def method_changed() -> None:
    """A new method starts from its own default budget (permutations and coalitions differ)."""
    budget = METHOD_BUDGETS.get(st.session_state["attribution_method"])
    if budget is not None:
        st.session_state["budget"] = max(budget.default, budget.minimum(n_features))


def alpha_changed() -> None:
    st.session_state["confidence"] = round(1 - float(st.session_state["alpha"]), 6)


def confidence_changed() -> None:
    st.session_state["alpha"] = round(1 - float(st.session_state["confidence"]), 6)


# A tool that sets alpha directly leaves the confidence box stale; realign it before drawing.
if abs(float(st.session_state["confidence"]) + float(st.session_state["alpha"]) - 1) > 1e-9:
    alpha_changed()

source_table = state.source_table(dataset)
try:
    target_array = target_values(source_table, target)
except CpdecompError as error:  # the Data page says what is wrong with the target
    st.error(markdown_text(str(error)))
    st.page_link("views/data.py", label="Back to Data", icon=":material/table:")
    st.stop()
for note in (planning.target_note(target_array, target),
             targets.censored_time_note(source_table, target)):
    if note:
        st.warning(markdown_text(note))
family_options, family_note = planning.families_that_run(target_array)
state.ensure_choice("cp_family", family_options, state.DEFAULTS["cp_family"])


def background_check(size: state.RunSize) -> None:
    """The analyst's option: redraw the background N times, so each part gets a second range,
    the reference sample's error, beside the calibration set's (off by default: it costs a
    calibration game per redraw)."""
    on = st.checkbox(
        "Also check how much the reference sample moves each part", key="background_check",
        help="A removed feature is averaged over a sample of training rows (the reference "
             "sample, or background). Another sample would move each part a little: this "
             "draws it afresh several times and shows that range as a second, green mark on "
             "the Patient page. Each redraw recomputes the calibration game once more and "
             "keeps about 13 MB of memory while the results are kept.")
    if on:
        st.number_input("Redraws of the reference sample", min_value=2,
                        max_value=state.MAX_BACKGROUND_BOOTSTRAP, step=1,
                        key="background_redraws")
    redraws = int(st.session_state["background_redraws"])
    per_redraw = size.redraw_seconds
    if per_redraw is not None:
        more = planning.rounded_seconds(per_redraw * redraws)
        st.caption(f"{redraws} redraws: {more} more on this machine "
                   f"(about {per_redraw:.1f} s each)." if on else
                   f"Off. With {redraws} redraws the run would take {more} more.")


# The warnings about the choices below (a slow model, a family that will stop) are drawn here,
# above the choices: drawn after them, beside Run, they were below the fold at 1280x720.
warnings_slot = st.container()
left, right = st.columns(2)
with left:
    st.selectbox("Model", list(MODELS), key="model", format_func=lambda k: MODELS[k].label)
    st.selectbox("Conformal family", family_options, key="cp_family",
                 format_func=lambda k: f"{k}: {FAMILIES[k].label}",
                 help="How the interval's width is made. absolute: the same width for every "
                      "patient. normalized, gamma, cqr, cqr-r: a width that follows how hard "
                      "the patient is to predict.")
    if family_note:
        st.caption(family_note)
    if planning.has_link(str(st.session_state["model"]), str(st.session_state["cp_family"]),
                         getattr(dataset, "models", None)):
        st.checkbox(
            "Average a left-out feature on the outcome's own scale (slow)",
            key="response_scale",
            help="This model predicts through a log link (as length-of-stay, count and cost "
                 "models do). A left-out feature is averaged over the reference sample on the "
                 "model's log scale by default: exact and fast, and the same as shap's 'raw' "
                 "output. Ticked, it is averaged on the outcome's own scale instead: exact too, "
                 "but every feature combination runs the model on many mixed rows, minutes "
                 "where the default takes seconds. The intervals are the same; the parts "
                 "share the width out differently.")
    a, c = st.columns(2)
    a.number_input("Miscoverage α", min_value=0.01, max_value=0.5, step=0.01, format="%.2f",
                   key="alpha", on_change=alpha_changed,
                   help="The interval misses the outcome for about a fraction α of patients.")
    c.number_input("or confidence 1 − α", min_value=0.5, max_value=0.99, step=0.01,
                   format="%.2f", key="confidence", on_change=confidence_changed)
with right:
    method = st.selectbox("Attribution method", list(METHODS), key="attribution_method",
                          format_func=lambda k: METHOD_LABELS.get(k, k),
                          on_change=method_changed)
    budget = METHOD_BUDGETS.get(method)
    if budget is not None and int(st.session_state["budget"]) < budget.minimum(n_features):
        st.session_state["budget"] = budget.minimum(n_features)  # a value below min would raise
    st.number_input(f"Budget ({budget.unit})" if budget else "Budget (not used by this method)",
                    min_value=budget.minimum(n_features) if budget else 1, max_value=100_000,
                    step=1, key="budget", disabled=budget is None,
                    help="Sampling methods try this many feature combinations (more is slower "
                         "and more precise); exact methods try them all and take no budget.")
    auto = st.checkbox("Choose the background size automatically", key="background_auto",
                       help="Up to 1,000 training rows for tree models and linear models, "
                            "where this is cheap; 64 where every row costs model runs.")
    config = state.run_config(dataset)
    options = config.options
    plan = planning.run_plan(dataset, options)
    size = state.run_size(dataset, config)
    n_train, n_explained, used_background = size.n_train, size.n_explained, size.background
    if auto:
        # The size the run will use, not the manual setting (core caps it at the training rows).
        # Set each run: a keyed widget would keep its first value when the size changes.
        st.session_state["background_used"] = used_background
        st.number_input("Background rows (used)", disabled=True, key="background_used",
                        min_value=1, step=1, format="%d",
                        help="Training rows a removed feature is averaged over.")
    else:
        st.number_input("Background rows", min_value=1, max_value=5000, step=1,
                        key="background",
                        help="Training rows a removed feature is averaged over.")
        if int(st.session_state["background"]) > n_train:
            st.caption(f"Only {n_train} training rows: all of them are used.")
    st.number_input("Seed", min_value=0, max_value=2**31 - 1, step=1, key="seed")
    background_check(size)



def crossing_warning(model: str, family: str, user_models: object) -> str | None:
    """Before Run: a family undefined where the quantile models cross, with straight-line
    quantile models, stops on most resplits of several data sets (docs/method.md: 4 of 5 of
    diabetes, 5 of 5 of rand_hie); say so, and what runs instead, while the choice can still
    change."""
    if user_models or model != "linear" or not FAMILIES[family].refuses_crossing:
        return None
    others = " or ".join(MODELS[k].label.lower() for k in MODELS if k != model)
    crossing_ok = [k for k in family_options
                   if FAMILIES[k].uses_quantile_level and not FAMILIES[k].refuses_crossing]
    instead = f", or the {' or '.join(crossing_ok)} family, which allows it" if crossing_ok else ""
    return (f"{FAMILIES[family].label} with the linear model will most likely stop with an "
            "error. It needs the upper quantile line above the lower one for every patient, "
            "and two straight lines cross somewhere: on most splits of several data sets they "
            f"do. Choose {others} as the model{instead}.")


crossing = crossing_warning(options.model, options.family, getattr(dataset, "models", None))
if crossing is not None:
    with warnings_slot.container(key="crossing_warning"):
        st.warning(crossing, icon=":material/warning:")

if budget is None:
    note = (f"{METHOD_LABELS.get(method, method)} is computed without sampling"
            if n_features <= MAX_EXACT_PLAYERS or method != "exact" else
            f"Exact Shapley is limited to {MAX_EXACT_PLAYERS} features; choose a sampling "
            "method")
else:
    note = (f"{METHOD_LABELS.get(method, method)} spends {int(st.session_state['budget']):,} "
            f"{budget.unit}")
st.caption(f"{note}, on the same coalitions for the calibration game (once) and every patient, "
           "so calibration + instance = total exactly. Changing α or the units later reuses the "
           "fitted models and the calibration game (the CQR families refit their quantile "
           "models for a new α).")
if not plan.fast:
    seconds = size.brute_force_seconds
    expected = ("" if seconds is None else
                f" Expected time on this machine: {planning.rounded_seconds(seconds)} "
                f"({n_explained:,} rows × {used_background} background rows per feature "
                "combination, at the measured model speed).")
    user_models = getattr(dataset, "models", None)
    label = (planning.user_models_label(user_models, plan.slow_names) if user_models
             else f"{MODELS[options.model].label} with the {options.family} family")
    what = (f"{label}, its left-out features averaged on the outcome's own scale,"
            if options.masking == "response" else label)
    faster = ("Averaging on the model's log scale (untick the box below), a smaller "
              "background or a sampling method is faster." if options.masking == "response"
              else "A smaller background or a sampling method is faster"
              + (" (the user guide's page on bringing a model lists the models and "
                 "preprocessing steps that are fast)." if user_models else
                 ", and so is another family."))
    verb = "have" if user_models and len(plan.slow_names) > 1 else "has"
    with warnings_slot.container(key="slow_path_warning"):
        st.warning(markdown_text(
            f"{what} {verb} no fast exact way to remove features: every removal runs the model "
            f"on many mixed rows (brute force).{expected} {faster}"))


HIDE_RUN_BUTTON = "<style>.st-key-run { display: none; }</style>"


def follow(job: state.RunJob) -> None:
    """Show the running job's progress until it ends, then draw the page with its outcome.

    The computation runs on its own worker: a click on Stop reruns this page, whose callback
    stops the worker. Streamlit stops this loop (StopException) for every rerun, a click or a
    page switch as well as its own Stop button: the run goes on unless no script run of the
    session follows (Streamlit's Stop) or the session ends (a closed tab), which the worker
    notices itself (RunJob).
    """
    with st.status("Computing…", expanded=True) as status:
        # Streamlit keeps an element of the script run before this one on screen, faded, until
        # this script run ends, and this one lasts as long as the computation: the Run button
        # it drew would stay beside the progress. Hidden while the run is followed.
        st.html(HIDE_RUN_BUTTON)
        bar = st.progress(0.0, text=job.label)
        st.button("Stop", key="stop_run", icon=":material/stop:",
                  on_click=lambda: job.cancel("Stop pressed"),
                  help="Stops the computation within a second or two; the previous results "
                       "are kept.")
        try:
            # Only polling: the work other runs leave for quiet moments need not wait for it.
            with runs.following():
                while not job.finished.wait(0.25):
                    job.seen()
                    label = "Stopping…" if job.stop_asked is not None else job.label
                    bar.progress(min(max(job.share, 0.0), 1.0), text=label)
        except StopException:  # a rerun, Streamlit's Stop, or the session ending
            job.unwatched()
            raise
        status.update(label="Done" if job.error is None and not job.cancelled else
                      "Stopped" if job.cancelled else "Could not compute",
                      state="complete" if job.error is None else "error", expanded=False)
    state.collect_run()
    st.rerun()  # draw the page (and the sidebar, drawn before it) with the outcome


def run_pressed() -> None:
    """Start the run in the click's callback, before the page is drawn: the script run that
    follows draws the progress where the Run button was, and never the button."""
    current = state.current_dataset()
    if current is None:  # the data went away between the drawing and the click
        return
    try:
        state.start_run(state.run_config(current), current)
    except CpdecompError as error:  # over the budget, or a run of this user's still going
        st.session_state["run_refused"] = str(error)


state.collect_run()  # a run that ended while this session was on another page
refused = st.session_state.pop("run_refused", None)
running = state.current_job()
if running is None:
    st.button("Run", key="run", type="primary", icon=":material/play_arrow:",
              on_click=run_pressed)
    if refused is not None:
        st.error(markdown_text(refused))
else:
    follow(running)

outcome = st.session_state.pop("run_outcome", None)
if outcome is not None and outcome[0] == "error":
    st.error(markdown_text(str(outcome[1])))
elif outcome is not None and outcome[0] == "stopped":
    st.info("Stopped: nothing was kept from that run; the previous results, if any, are shown "
            "below.")

run = st.session_state.get("last_run")
if run is not None:
    done = state.results(units="width")
    if done is not None:
        n = done.shown.n
        st.success(f"Results for {n} patients ({markdown_text(run.dataset_name)}; "
                   f"{markdown_text(planning.run_model_name())}, {run.options.family}, "
                   f"α = {run.alpha:g}, "
                   f"{run.method}).")
        if done.study.warnings:
            st.warning("\n".join(f"- {markdown_text(w)}" for w in done.study.warnings))
        timings = st.session_state.get("run_timings") or {}
        if timings:
            st.caption(f"Computed in {sum(timings.values()):.1f} s: "
                       + " · ".join(f"{k}: {v:.1f} s" for k, v in timings.items()))
        cols = st.columns(3)
        cols[0].page_link("views/cohort.py", label="Cohort", icon=":material/groups:")
        cols[1].page_link("views/patient.py", label="Patient", icon=":material/person:")
        cols[2].page_link("views/queue.py", label="Review queue", icon=":material/checklist:")
        widgets.results_preview(done)
