"""Claim 1: calibration- and instance-driven attributions often carry opposite signs.

Per feature and pooled over features, across seeded resplits, for several alphas:

* opposite          — share of patients with φ_C · φ_I < 0 (the two parts pull apart);
* opposite_sizeable — the same, with both parts sizeable (each ≥ 5 % of the patient's width),
  so that tiny attributions of arbitrary sign do not count;
* reversed          — share with φ_T · φ_I < 0 (the total shows the feature's
  patient-specific push with the wrong sign);
* cancelled         — share where the instance part is sizeable and the total shows at most
  half of it (|φ_T| ≤ |φ_I| / 2).

Attributions are in width units; signs do not depend on the unit. On the synthetic cohort the
instance part of the oracle sigma is known in closed form, so the expected shares are computed
and checked (see `synthetic_check`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from core.data import split_rows
from core.decomposition import Decomposition
from core.explainer import Explainer
from core.system import system_from_functions
from core.typing import FloatArray
from experiments.config import ExperimentConfig
from experiments.datasets import Problem, prepare, real_problem, synthetic_problem
from experiments.resampling import bootstrap_mean
from sample_data.synthetic import FEATURES, ROLES, SyntheticData

SIZEABLE = 0.05
"""An attribution is sizeable when it is at least this share of the patient's width."""
CANCELLED = 0.5
"""The total cancels it when it keeps at most this share of it."""
POOLED = "all features (pooled)"
ANY = "any feature (per patient)"
METRICS = ("opposite", "opposite_sizeable", "reversed", "cancelled")
ORACLE_BACKGROUND = 1000
"""Background rows for the oracle: the closed form's offset then has a standard error ≈ 0.02."""

Progress = Callable[[str], None]


def sign_shares(d: Decomposition, width: FloatArray) -> pd.DataFrame:
    """The three shares per feature, pooled over (patient, feature) pairs, and per patient."""
    c, i, t = d.calibration, d.instance, d.total
    opposite = c * i < 0
    reversed_ = t * i < 0
    floor = SIZEABLE * np.abs(width)[:, None]
    sizeable = np.abs(i) >= floor
    flags = {
        "opposite": opposite,
        "opposite_sizeable": opposite & sizeable & (np.abs(c) >= floor),
        "reversed": reversed_,
        "cancelled": sizeable & (np.abs(t) <= CANCELLED * np.abs(i)),
    }
    rows = [
        {"feature": feature, **{m: float(f[:, j].mean()) for m, f in flags.items()}}
        for j, feature in enumerate(d.features)
    ]
    rows.append({"feature": POOLED, **{m: float(f.mean()) for m, f in flags.items()}})
    rows.append({"feature": ANY, **{m: float(f.any(axis=1).mean()) for m, f in flags.items()}})
    return pd.DataFrame(rows)


@dataclass(frozen=True, eq=False)
class SignResults:
    """Per-resplit shares, their summary with intervals, the synthetic check, and examples."""

    raw: pd.DataFrame
    summary: pd.DataFrame
    check: pd.DataFrame
    examples: pd.DataFrame
    """Per-patient φ_C, φ_I, φ_T of one resplit at alpha 0.1 (normalized), for the figure."""


def _explain_fitted(problem: Problem, family: str, config: ExperimentConfig, seed: int,
                    label: str) -> list[dict]:
    """Shares and decompositions for every alpha of one resplit (one fit, alphas re-ranked)."""
    study = prepare(problem, family, config, seed)
    out = []
    for alpha in config.alphas:
        report = study.explain(method="exact", alpha=alpha, units="width")
        explanation = report.explanation
        shares = sign_shares(explanation.decomposition, explanation.width)
        out.append({"dataset": label, "family": family, "alpha": alpha, "shares": shares,
                    "decomposition": explanation.decomposition})
    return out


def _oracle_explanations(data: SyntheticData, config: ExperimentConfig,
                         seed: int) -> tuple[dict[float, tuple], np.ndarray, FloatArray]:
    """The oracle normalized system on one split: {alpha: (width-unit, log-unit results)}."""
    table = data.table
    train, calibration, test = split_rows(len(table), (0.5, 0.25, 0.25), seed)
    features = list(FEATURES)
    system = system_from_functions(
        "normalized", {"f": data.spec.mean, "sigma": data.spec.sigma}, table.iloc[train][features]
    ).conformalize(table.iloc[calibration][features], table["y"].to_numpy()[calibration])
    explainer = Explainer(system, background_size=min(ORACLE_BACKGROUND, len(train)), seed=seed)
    patients = table.iloc[test][features]
    results = {
        alpha: (explainer.explain(patients, method="exact", alpha=alpha, units="width"),
                explainer.explain(patients, method="exact", alpha=alpha, units="log"))
        for alpha in config.alphas
    }
    return results, test, explainer.background


def expected_shares(gamma: float, calibration: float) -> dict[str, float]:
    """Population shares for a feature with φ_I = γx − γ²/2 (x ~ N(0,1)) and constant φ_C = c.

    φ_I > 0 ⟺ x > γ/2; φ_T = φ_I + c changes sign against φ_I for x between γ/2 and γ/2 − c/γ.
    """
    if gamma == 0:
        return {"opposite": 0.0, "reversed": 0.0}
    threshold = gamma / 2
    positive = float(norm.sf(threshold)) if gamma > 0 else float(norm.cdf(threshold))
    opposite = positive if calibration < 0 else (1 - positive if calibration > 0 else 0.0)
    edge = threshold - calibration / gamma
    reversed_ = float(abs(norm.cdf(edge) - norm.cdf(threshold)))
    return {"opposite": opposite, "reversed": reversed_}


def synthetic_check(data: SyntheticData, log_result, test_rows: np.ndarray,
                    background: FloatArray, alpha: float, resplit: int) -> list[dict]:
    """Observed vs known answers on the oracle synthetic cohort, one row per feature."""
    d = log_result.decomposition
    x = data.features[test_rows]
    n = len(test_rows)
    closed_form = x * data.spec.gamma - np.log(np.mean(np.exp(background * data.spec.gamma),
                                                       axis=0))
    rows = []
    for j, feature in enumerate(FEATURES):
        gamma = float(data.spec.gamma[j])
        c = float(d.calibration[0, j])
        observed = {"opposite": float(np.mean(d.calibration[:, j] * d.instance[:, j] < 0)),
                    "reversed": float(np.mean(d.total[:, j] * d.instance[:, j] < 0))}
        expected = expected_shares(gamma, c)
        rows.append({
            "alpha": alpha, "resplit": resplit, "feature": feature, "role": ROLES[feature],
            "phi_C": c,
            "max_instance_error": float(np.max(np.abs(d.instance[:, j] - closed_form[:, j]))),
            **{f"observed_{m}": observed[m] for m in observed},
            **{f"expected_{m}": expected[m] for m in expected},
            # Four binomial standard errors of a share over n patients, plus the background's
            # Monte Carlo error in the offset γ²/2 (≈ 0.02 in share at 1,000 rows).
            "tolerance": float(4 * np.sqrt(0.25 / n) + 0.02) if gamma else 0.0,
            # The oracle sigma ignores these features: their instance part must be exactly 0;
            # dummy and correlated are used by no component: null players in every game.
            "exact_zeros_hold": bool(
                (gamma != 0 or np.all(d.instance[:, j] == 0.0))
                and (data.spec.beta[j] != 0 or gamma != 0 or np.all(d.total[:, j] == 0.0))
            ),
        })
    return rows


def _summarize(raw: pd.DataFrame, config: ExperimentConfig, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng((seed, 101))
    rows = []
    keys = ["dataset", "family", "alpha", "feature"]
    for key, group in raw.groupby(keys, sort=False):
        row = dict(zip(keys, key, strict=True))
        row["resplits"] = len(group)
        for metric in METRICS:
            interval = bootstrap_mean(group[metric].to_numpy(), config.bootstrap, rng)
            row[metric] = interval.estimate
            row[f"{metric}_low"] = interval.low
            row[f"{metric}_high"] = interval.high
            row[f"{metric}_resplit_min"] = float(group[metric].min())
            row[f"{metric}_resplit_max"] = float(group[metric].max())
        rows.append(row)
    return pd.DataFrame(rows)


def _check_summary(rows: list[dict]) -> pd.DataFrame:
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    for metric in ("opposite", "reversed"):
        gap = (table[f"observed_{metric}"] - table[f"expected_{metric}"]).abs()
        table[f"{metric}_ok"] = gap <= table["tolerance"] + 1e-12
    table["passed"] = table["opposite_ok"] & table["reversed_ok"] & table["exact_zeros_hold"]
    grouped = table.groupby(["alpha", "feature", "role"], sort=False).agg(
        phi_C=("phi_C", "mean"),
        observed_opposite=("observed_opposite", "mean"),
        expected_opposite=("expected_opposite", "mean"),
        observed_reversed=("observed_reversed", "mean"),
        expected_reversed=("expected_reversed", "mean"),
        tolerance=("tolerance", "max"),
        max_instance_error=("max_instance_error", "max"),
        resplits=("resplit", "count"),
        passed=("passed", "all"),
    )
    return grouped.reset_index()


def run(config: ExperimentConfig, seed: int = 0, progress: Progress | None = None) -> SignResults:
    """Claim 1 on the synthetic cohort (oracle and fitted) and the real data sets."""
    say = progress or (lambda message: None)
    records: list[dict] = []
    checks: list[dict] = []
    examples: list[pd.DataFrame] = []
    real = {name: real_problem(name, config.max_rows, seed) for name in config.sign_datasets}
    for r in range(config.resplits):
        split_seed = seed * 1000 + r
        say(f"claim 1: resplit {r + 1}/{config.resplits}")
        problem, data = synthetic_problem(config.synthetic_rows, seed=split_seed)
        oracle, test_rows, background = _oracle_explanations(data, config, split_seed)
        for alpha, (width_result, log_result) in oracle.items():
            records.append({"dataset": "synthetic (oracle)", "family": "normalized",
                            "alpha": alpha,
                            "shares": sign_shares(width_result.decomposition, width_result.width),
                            "decomposition": width_result.decomposition, "resplit": r})
            checks += synthetic_check(data, log_result, test_rows, background, alpha, r)
        fitted = [("synthetic (gbm)", problem)] + [(name, p) for name, p in real.items()]
        for label, prob in fitted:
            for family in config.sign_families:
                for item in _explain_fitted(prob, family, config, split_seed, label):
                    records.append({**item, "resplit": r})
    raw_parts = []
    for record in records:
        shares = record["shares"].assign(dataset=record["dataset"], family=record["family"],
                                         alpha=record["alpha"], resplit=record["resplit"])
        raw_parts.append(shares)
        if record["resplit"] == 0 and record["alpha"] == 0.1 and record["family"] == "normalized":
            examples.append(_example_frame(record["dataset"], record["decomposition"]))
    raw = pd.concat(raw_parts, ignore_index=True)[
        ["dataset", "family", "alpha", "resplit", "feature", *METRICS]
    ]
    examples_frame = pd.concat(examples, ignore_index=True) if examples else pd.DataFrame()
    return SignResults(raw, _summarize(raw, config, seed), _check_summary(checks),
                       examples_frame)


def _example_frame(dataset: str, d: Decomposition) -> pd.DataFrame:
    n, k = d.total.shape
    return pd.DataFrame({
        "dataset": dataset,
        "patient": np.repeat(np.arange(n), k),
        "feature": np.tile(np.array(d.features, dtype=object), n),
        "calibration": d.calibration.ravel(),
        "instance": d.instance.ravel(),
        "total": d.total.ravel(),
    })
