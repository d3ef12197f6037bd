"""Claim 2: on a semi-synthetic clinical task, does the total view miss what the two views show?

Cohort: the ACTG 175 covariates with a simulated outcome whose noise has known per-patient
drivers (`sample_data.semisynthetic`). Each resplit draws a fresh outcome, splits, fits the
normalized family (gradient boosting) and explains the test patients with exact Shapley on the
log scale, where φ_T = φ_C + φ_I feature by feature.

The high-uncertainty set H is the 15 % of test patients with the largest true noise scale.
A clinician reads a patient's explanation in one of three ways (views):

* total       — the total attribution φ_T (what ordinary SHAP on the width shows);
* instance    — the instance-driven attribution φ_I (the patient's own push);
* both views  — φ_C and φ_I side by side: a feature counts as raising uncertainty when either
  the instance part or the total (calibration + instance) does, i.e. max(φ_I, φ_T).

Because φ_C is the same for every patient on this scale, ranking patients by one feature is the
same under every view; the views differ through signs, thresholds and which feature tops a
patient's list. The rules therefore work per patient, across features:

* flag at a natural threshold τ: some feature raises the width by more than τ (log units);
* flag at a matched budget b: the b share of patients with the largest top-feature push;
* top driver: the feature with the largest positive push in the patient's explanation.

Metrics on H: recall (share flagged), driver-recall (the top positive driver is a true driver),
false reassurance (share of (patient, true driver) pairs shown as reducing uncertainty, φ < 0)
and drivers shown (share of those pairs shown as raising it by more than τ). Intervals are
paired bootstraps over patients, resampled within each resplit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.typing import FloatArray
from experiments.config import ExperimentConfig
from experiments.datasets import positions_of, prepare, semisynthetic_problem
from experiments.resampling import paired_bootstrap

VIEWS: dict[str, Callable[[FloatArray, FloatArray], FloatArray]] = {
    "total": lambda total, instance: total,
    "instance": lambda total, instance: instance,
    "both views": lambda total, instance: np.maximum(total, instance),
}
COMPARISONS = (("both views", "total"), ("instance", "total"))
WIDTH_RULE = "width (no attribution)"


def by_construction(comparison: str, metric: str, setting: str) -> bool:
    """True where 'both views' beats 'total' whatever the data: not evidence for the claim.

    max(φ_I, φ_T) ≥ φ_T feature by feature, so at a fixed threshold the two-view reading flags
    a superset of the total's patients and shows a superset of its raising drivers, and it
    shows a driver as reducing only when the total does too. Matched budgets and the top
    driver have no such ordering; nor does the instance view alone (φ_I < φ_T when φ_C > 0).
    """
    if not comparison.startswith("both views"):
        return False
    return setting.startswith("tau=") or metric in ("false_reassurance", "drivers_shown")

Progress = Callable[[str], None]


@dataclass(frozen=True, eq=False)
class DecisionResults:
    """Metric intervals, paired differences, per-driver false reassurance, per-resplit values."""

    metrics: pd.DataFrame
    differences: pd.DataFrame
    by_driver: pd.DataFrame
    per_resplit: pd.DataFrame


def high_uncertainty(true_sigma: FloatArray, share: float) -> np.ndarray:
    """The ceil(share · n) patients with the largest true noise scale."""
    k = int(np.ceil(share * len(true_sigma)))
    chosen = np.zeros(len(true_sigma), dtype=bool)
    chosen[np.argsort(-true_sigma, kind="stable")[:k]] = True
    return chosen


def top_share(scores: FloatArray, share: float) -> np.ndarray:
    """Flags for the round(share · n) largest scores (a matched budget)."""
    k = round(share * len(scores))
    flags = np.zeros(len(scores), dtype=bool)
    flags[np.argsort(-scores, kind="stable")[:k]] = True
    return flags


def patient_records(attribution: FloatArray, truth: np.ndarray, high: np.ndarray,
                    config: ExperimentConfig) -> dict[str, FloatArray]:
    """Per-patient numerators and denominators of every metric for one view."""
    n = len(attribution)
    strongest = attribution.max(axis=1)
    top = attribution.argmax(axis=1)
    top_is_true = (strongest > 0) & truth[np.arange(n), top]
    drivers = truth.sum(axis=1).astype(float)
    records: dict[str, FloatArray] = {
        "driver_recall": top_is_true.astype(float),
        "false_reassurance": (truth & (attribution < 0)).sum(axis=1).astype(float),
        "drivers": drivers,
    }
    for tau in config.thresholds:
        records[f"flag@tau={tau:.3f}"] = (strongest > tau).astype(float)
        records[f"shown@tau={tau:.3f}"] = (truth & (attribution > tau)).sum(axis=1).astype(float)
    for budget in config.budgets:
        records[f"flag@budget={budget:.2f}"] = top_share(strongest, budget).astype(float)
    records["high"] = high.astype(float)
    return records


def _ratios(records: dict[str, dict[str, FloatArray]], widths: dict[str, FloatArray],
            config: ExperimentConfig) -> dict[str, tuple[FloatArray, FloatArray]]:
    """{metric name: (numerator, denominator)} per patient, for the paired bootstrap."""
    ratios = {}
    for view, rec in records.items():
        high = rec["high"]
        ratios[f"{view}|driver_recall|-"] = (rec["driver_recall"] * high, high)
        ratios[f"{view}|false_reassurance|-"] = (rec["false_reassurance"] * high,
                                                 rec["drivers"] * high)
        for tau in config.thresholds:
            flags = rec[f"flag@tau={tau:.3f}"]
            ratios[f"{view}|recall|tau={tau:.3f}"] = (flags * high, high)
            ratios[f"{view}|flag_rate|tau={tau:.3f}"] = (flags, np.ones_like(flags))
            ratios[f"{view}|drivers_shown|tau={tau:.3f}"] = (rec[f"shown@tau={tau:.3f}"] * high,
                                                             rec["drivers"] * high)
        for budget in config.budgets:
            flags = rec[f"flag@budget={budget:.2f}"]
            ratios[f"{view}|recall|budget={budget:.2f}"] = (flags * high, high)
    for budget in config.budgets:
        high = next(iter(records.values()))["high"]
        flags = widths[f"budget={budget:.2f}"]
        ratios[f"{WIDTH_RULE}|recall|budget={budget:.2f}"] = (flags * high, high)
    return ratios


def run(config: ExperimentConfig, seed: int = 0, progress: Progress | None = None
        ) -> DecisionResults:
    """Claim 2 over `config.decision_resplits` fresh outcomes and splits, for every alpha."""
    say = progress or (lambda message: None)
    collected: dict[float, list[tuple[dict, dict, int]]] = {a: [] for a in config.alphas}
    driver_rows = []
    resplit_rows = []
    for r in range(config.decision_resplits):
        say(f"claim 2: resplit {r + 1}/{config.decision_resplits}")
        draw_seed = seed * 1000 + 500 + r
        problem, data = semisynthetic_problem(draw_seed, config.max_rows)
        study = prepare(problem, "normalized", config, draw_seed)
        for alpha in config.alphas:
            report = study.explain(method="exact", alpha=alpha, units="log")
            d = report.explanation.decomposition
            rows = positions_of(problem, report.patient_ids)
            truth = data.true_drivers()[list(d.features)].to_numpy()[rows]
            high = high_uncertainty(data.true_sigma[rows], config.high_uncertainty_share)
            records = {view: patient_records(f(d.total, d.instance), truth, high, config)
                       for view, f in VIEWS.items()}
            widths = {f"budget={b:.2f}": top_share(report.explanation.width, b).astype(float)
                      for b in config.budgets}
            collected[alpha].append((records, widths, r))
            for view, f in VIEWS.items():
                shown = f(d.total, d.instance)
                for j, feature in enumerate(d.features):
                    pairs = truth[:, j] & high
                    if pairs.any():
                        driver_rows.append({
                            "alpha": alpha, "resplit": r, "view": view, "feature": feature,
                            "pairs": int(pairs.sum()),
                            "shown_reducing": int((shown[pairs, j] < 0).sum()),
                        })
            resplit_rows.append({"alpha": alpha, "resplit": r,
                                 "calibration": dict(zip(d.features, d.calibration[0],
                                                         strict=True))})
    metrics, differences = _summaries(collected, config, seed)
    return DecisionResults(metrics, differences, _by_driver(driver_rows),
                           _calibration_rows(resplit_rows))


def _summaries(collected: dict[float, list], config: ExperimentConfig,
               seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng((seed, 202))
    metric_rows, difference_rows = [], []
    for alpha, parts in collected.items():
        if not parts:
            continue
        views = list(parts[0][0])
        stacked = {view: {key: np.concatenate([p[0][view][key] for p in parts])
                          for key in parts[0][0][view]} for view in views}
        widths = {key: np.concatenate([p[1][key] for p in parts]) for key in parts[0][1]}
        groups = np.concatenate([np.full(len(p[0][views[0]]["high"]), p[2]) for p in parts])
        ratios = _ratios(stacked, widths, config)
        pairs = []
        for name in ratios:
            view, metric, setting = name.split("|")
            for a, b in COMPARISONS:
                if view == a and f"{b}|{metric}|{setting}" in ratios:
                    pairs.append((name, f"{b}|{metric}|{setting}"))
        singles, diffs = paired_bootstrap(ratios, groups, pairs, config.bootstrap, rng)
        for name, interval in singles.items():
            view, metric, setting = name.split("|")
            metric_rows.append({"alpha": alpha, "view": view, "metric": metric,
                                "setting": setting, "estimate": interval.estimate,
                                "low": interval.low, "high": interval.high})
        for (a, b), interval in diffs.items():
            view_a, metric, setting = a.split("|")
            comparison = f"{view_a} − {b.split('|')[0]}"
            difference_rows.append({"alpha": alpha, "metric": metric, "setting": setting,
                                    "comparison": comparison,
                                    "estimate": interval.estimate, "low": interval.low,
                                    "high": interval.high,
                                    "by_construction": by_construction(comparison, metric,
                                                                       setting)})
    return pd.DataFrame(metric_rows), pd.DataFrame(difference_rows)


def _by_driver(rows: list[dict]) -> pd.DataFrame:
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    grouped = table.groupby(["alpha", "view", "feature"], sort=False)[
        ["pairs", "shown_reducing"]].sum().reset_index()
    grouped["false_reassurance"] = grouped["shown_reducing"] / grouped["pairs"]
    return grouped


def _calibration_rows(rows: list[dict]) -> pd.DataFrame:
    """φ_C per feature (log units) of every resplit: the offset between total and instance."""
    records = [{"alpha": r["alpha"], "resplit": r["resplit"], "feature": f, "calibration": v}
               for r in rows for f, v in r["calibration"].items()]
    return pd.DataFrame(records)
