"""Claim 1: calibration- and instance-driven attributions often carry opposite signs.

Built so that it can fail. Every fitted data set gets null columns — `null_noise` pure-noise
columns and permuted copies of `null_permuted` real columns, redrawn every resplit — fitted and
explained with the real ones; a real feature's share means something only as far as it exceeds
the null columns' share on the same fitted system. Per feature and pooled, across seeded
resplits, for several alphas:

* opposite          — share of pairs with φ_C · φ_I < 0, counted only where both signs are
  settled: φ_C's bootstrap interval over resampled calibration sets excludes 0 (and |φ_C|
  exceeds 1.96 Monte Carlo standard errors of a sampled method), and |φ_I| exceeds 1.96 of its
  own (exact Shapley has none: φ_I ≠ 0 suffices);
* opposite_raw      — the same without the settled-sign condition (the old count);
* opposite_sizeable — counted opposite, both parts ≥ 5 % of the patient's width;
* reversed          — φ_T · φ_I < 0 with all three signs settled (the total shows the feature's
  patient-specific push with the wrong sign);
* cancelled         — the instance part is sizeable and the total shows at most half of it;
* fixed_vs_instance, fixed_vs_total — the practitioners' comparator (Shapley values of the
  width at the fitted q̂: shap on a fitted conformal regressor) has the opposite sign of φ_I,
  of φ_T.

The null-subtracted table (`null_subtracted`) gives each real feature's share minus the mean
share of the null columns of the same resplit, with a t interval over resplits, Bonferroni
over the data set's real features; the sign table says in how many resplits each φ_C was
settled and kept its modal sign.

Attributions are in width units; signs do not depend on the unit. On the synthetic cohort the
instance part of the oracle sigma is known in closed form, so the expected shares are computed
and checked (see `synthetic_check`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import norm

from cpdecomp.core.data import split_rows
from cpdecomp.core.decomposition import Decomposition
from cpdecomp.core.explainer import Explainer
from cpdecomp.core.system import system_from_functions
from cpdecomp.core.typing import FloatArray
from cpdecomp.sample_data.synthetic import FEATURES, ROLES, SyntheticData
from experiments.config import ExperimentConfig
from experiments.datasets import Problem, prepare, real_problem, synthetic_problem
from experiments.resampling import bootstrap_mean, mean_interval

SIZEABLE = 0.05
"""An attribution is sizeable when it is at least this share of the patient's width."""
CANCELLED = 0.5
"""The total cancels it when it keeps at most this share of it."""
MC_Z = 1.96
"""A sampled attribution's sign counts when it is this many Monte Carlo standard errors from 0."""
POOLED = "all real features (pooled)"
NULL_POOLED = "null columns (pooled)"
ANY = "any real feature (per patient)"
AGGREGATES = (POOLED, NULL_POOLED, ANY)
METRICS = ("opposite", "opposite_raw", "opposite_sizeable", "reversed", "cancelled",
           "fixed_vs_instance", "fixed_vs_total")
NULL_METRICS = ("opposite", "opposite_sizeable", "reversed")
"""The shares judged against the null columns."""
REAL, NOISE, PERMUTED = "real", "null: noise", "null: permuted copy"
NOISE_PREFIX, PERMUTED_PREFIX = "null_noise_", "null_perm_"
ORACLE_BACKGROUND = 1000
"""Background rows for the oracle: the closed form's offset then has a standard error ≈ 0.02."""

Progress = Callable[[str], None]


def column_kind(feature: str) -> str:
    if feature.startswith(NOISE_PREFIX):
        return NOISE
    if feature.startswith(PERMUTED_PREFIX):
        return PERMUTED
    return REAL


def with_null_columns(problem: Problem, config: ExperimentConfig, seed: int,
                      resplit_seed: int) -> Problem:
    """The problem with pure-noise columns and permuted copies of real columns added.

    Which real columns are copied is fixed per data set (seed); the noise and the permutations
    are redrawn every resplit, so the null columns' shares vary over resplits as the real
    features' do.
    """
    table = problem.table.copy()
    features = [f for f in problem.features if pd.api.types.is_numeric_dtype(table[f])]
    chooser = np.random.default_rng((seed, 13))
    copied = chooser.choice(features, size=min(config.null_permuted, len(features)),
                            replace=False)
    rng = np.random.default_rng((resplit_seed, 17))
    added = {f"{NOISE_PREFIX}{k + 1}": rng.normal(size=len(table))
             for k in range(config.null_noise)}
    added.update({f"{PERMUTED_PREFIX}{name}": rng.permutation(table[name].to_numpy())
                  for name in sorted(copied)})
    nulls = pd.DataFrame(added, index=table.index)
    front = table.drop(columns=[problem.target])
    augmented = pd.concat([front, nulls, table[[problem.target]]], axis=1)
    return Problem(problem.name, augmented, problem.target, problem.id_column, problem.kind)


def settled(values: FloatArray, se: FloatArray | None) -> np.ndarray:
    """Where a sign counts: non-zero, and beyond the Monte Carlo error of a sampled method."""
    if se is None:
        return values != 0
    return np.abs(values) > MC_Z * se


def sign_flags(d: Decomposition, width: FloatArray) -> dict[str, np.ndarray]:
    """(n_patients, n_features) booleans per metric (see the module doc)."""
    c, i, t = d.calibration, d.instance, d.total
    c_ok = settled(c, d.calibration_se)
    if d.calibration_sign_uncertain is not None:
        c_ok &= ~d.calibration_sign_uncertain
    i_ok, t_ok = settled(i, d.instance_se), settled(t, d.total_se)
    opposite = (c * i < 0) & c_ok & i_ok
    floor = SIZEABLE * np.abs(width)[:, None]
    sizeable = np.abs(i) >= floor
    flags = {
        "opposite": opposite,
        "opposite_raw": c * i < 0,
        "opposite_sizeable": opposite & sizeable & (np.abs(c) >= floor),
        "reversed": (t * i < 0) & c_ok & i_ok & t_ok,
        "cancelled": sizeable & (np.abs(t) <= CANCELLED * np.abs(i)),
    }
    if d.fixed_quantile is not None:
        flags["fixed_vs_instance"] = d.fixed_quantile * i < 0
        flags["fixed_vs_total"] = d.fixed_quantile * t < 0
    return flags


def sign_shares(d: Decomposition, width: FloatArray) -> pd.DataFrame:
    """Shares per feature, pooled over real features' and null columns' pairs, per patient.

    Also each feature's φ_C sign (+1, −1 or 0) and whether its sign is settled: one value per
    fitted system, since φ_C has one sign for every patient.
    """
    flags = sign_flags(d, width)
    kinds = np.array([column_kind(f) for f in d.features])
    real, null = kinds == REAL, kinds != REAL
    nan = float("nan")

    def pooled(mask: np.ndarray, how: str) -> dict[str, float]:
        out = {}
        for metric in METRICS:
            if metric not in flags or not mask.any():
                out[metric] = nan
            elif how == "any":
                out[metric] = float(flags[metric][:, mask].any(axis=1).mean())
            else:
                out[metric] = float(flags[metric][:, mask].mean())
        return out

    c_settled = settled(d.calibration, d.calibration_se)
    if d.calibration_sign_uncertain is not None:
        c_settled &= ~d.calibration_sign_uncertain
    rows = [
        {"feature": feature, "kind": kinds[j],
         **{m: float(flags[m][:, j].mean()) if m in flags else nan for m in METRICS},
         "phi_C": float(d.calibration[:, j].mean()),
         "phi_C_sign": float(np.sign(d.calibration[0, j])),
         "phi_C_settled": float(c_settled[:, j].all())}
        for j, feature in enumerate(d.features)
    ]
    rows.append({"feature": POOLED, "kind": REAL, **pooled(real, "mean")})
    rows.append({"feature": NULL_POOLED, "kind": "null", **pooled(null, "mean")})
    rows.append({"feature": ANY, "kind": REAL, **pooled(real, "any")})
    return pd.DataFrame(rows)


@dataclass(frozen=True, eq=False)
class SignResults:
    """Per-resplit shares, their summaries with intervals, the synthetic check, and examples."""

    raw: pd.DataFrame
    summary: pd.DataFrame
    check: pd.DataFrame
    examples: pd.DataFrame
    """Per-patient φ_C, φ_I, φ_T of one resplit at alpha 0.1 (normalized), for the figure."""
    null_subtracted: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Real features' shares minus the null columns' (per resplit), with intervals."""
    calibration_signs: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Per feature: resplits in which φ_C's sign was settled and kept its modal sign."""


def _explain_fitted(problem: Problem, family: str, config: ExperimentConfig, seed: int,
                    label: str) -> list[dict]:
    """Shares and decompositions for every alpha of one resplit (one fit, alphas re-ranked)."""
    study = prepare(problem, family, config.with_changes(background=config.sign_background),
                    seed)
    out = []
    for alpha in config.alphas:
        report = study.explain(method=config.sign_method, budget=config.sign_budget,
                               alpha=alpha, units="width",
                               calibration_bootstrap=config.calibration_bootstrap,
                               fixed_quantile=True)
        explanation = report.explanation
        shares = sign_shares(explanation.decomposition, explanation.width)
        out.append({"dataset": label, "family": family, "alpha": alpha, "shares": shares,
                    "decomposition": explanation.decomposition,
                    "background": explanation.background_size})
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
        alpha: (explainer.explain(patients, method="exact", alpha=alpha, units="width",
                                  calibration_bootstrap=config.calibration_bootstrap,
                                  fixed_quantile=True),
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
        row["kind"] = group["kind"].iloc[0]
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


NULL_LEVEL = 0.95
"""Family-wise level of the null-subtracted intervals (Bonferroni over a data set's real
features and their pooled row)."""


def null_subtracted(raw: pd.DataFrame, level: float = NULL_LEVEL) -> pd.DataFrame:
    """Each real feature's (and the pooled real) share minus the null columns' pooled share.

    The difference is taken within each resplit, on the same fitted system, then averaged
    over resplits with a t interval (resplits are the independent units: each refits every
    component). Bonferroni over the m real rows of a (data set, family, alpha): a rule that
    asks whether *some* feature beats the nulls must pay for asking m times.
    """
    keys = ["dataset", "family", "alpha"]
    rows = []
    for key, group in raw.groupby(keys, sort=False):
        null = group[group["feature"] == NULL_POOLED].set_index("resplit")
        if null.empty or null["opposite"].isna().all():
            continue  # no null columns (the oracle cohort)
        real = group[(group["kind"] == REAL) & (group["feature"] != ANY)]
        m = real["feature"].nunique()
        for feature, part in real.groupby("feature", sort=False):
            part = part.set_index("resplit")
            row = dict(zip(keys, key, strict=True))
            row.update(feature=feature, resplits=len(part), comparisons=m)
            for metric in NULL_METRICS:
                gap = (part[metric] - null.loc[part.index, metric]).to_numpy()
                interval = mean_interval(gap, 1 - (1 - level) / m)
                row[f"{metric}_real"] = float(part[metric].mean())
                row[f"{metric}_null"] = float(null.loc[part.index, metric].mean())
                row[metric] = interval.estimate
                row[f"{metric}_low"] = interval.low
                row[f"{metric}_high"] = interval.high
            rows.append(row)
    return pd.DataFrame(rows)


def calibration_signs(raw: pd.DataFrame) -> pd.DataFrame:
    """Per feature: mean φ_C, and the share of resplits in which its sign was settled (the
    bootstrap interval excluded 0) and in which it kept its modal sign over resplits."""
    per_feature = raw[~raw["feature"].isin(AGGREGATES)]
    rows = []
    for key, group in per_feature.groupby(["dataset", "family", "alpha", "feature"], sort=False):
        signs = group["phi_C_sign"].to_numpy()
        values, counts = np.unique(signs, return_counts=True)
        modal = float(values[np.argmax(counts)])  # ties: the smaller sign, a stated choice
        rows.append({
            "dataset": key[0], "family": key[1], "alpha": key[2], "feature": key[3],
            "kind": group["kind"].iloc[0], "resplits": len(group),
            "phi_C_mean": float(group["phi_C"].mean()),
            "phi_C_resplit_min": float(group["phi_C"].min()),
            "phi_C_resplit_max": float(group["phi_C"].max()),
            "modal_sign": modal,
            "sign_kept": float(np.mean(signs == modal)),
            "settled": float(group["phi_C_settled"].mean()),
            "settled_and_kept": float(np.mean((signs == modal) & (group["phi_C_settled"] > 0))),
        })
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


def fitted_records(problems: dict[str, Problem], config: ExperimentConfig, seed: int,
                   resplit: int) -> list[dict]:
    """One resplit of every fitted data set, null columns added, every family and alpha."""
    split_seed = seed * 1000 + resplit
    records = []
    for label, problem in problems.items():
        augmented = with_null_columns(problem, config, seed, split_seed)
        for family in config.sign_families:
            for item in _explain_fitted(augmented, family, config, split_seed, label):
                records.append({**item, "resplit": resplit})
    return records


def results_from(records: list[dict], checks: list[dict], config: ExperimentConfig,
                 seed: int) -> SignResults:
    """The tables of claim 1 from its per-(data set, family, alpha, resplit) records."""
    raw_parts, examples = [], []
    for record in records:
        shares = record["shares"].assign(dataset=record["dataset"], family=record["family"],
                                         alpha=record["alpha"], resplit=record["resplit"],
                                         background=record.get("background", ORACLE_BACKGROUND))
        raw_parts.append(shares)
        if record["resplit"] == 0 and record["alpha"] == 0.1 and record["family"] == "normalized":
            examples.append(_example_frame(record["dataset"], record["decomposition"]))
    raw = pd.concat(raw_parts, ignore_index=True)[
        ["dataset", "family", "alpha", "resplit", "feature", "kind", *METRICS,
         "phi_C", "phi_C_sign", "phi_C_settled", "background"]
    ]
    examples_frame = pd.concat(examples, ignore_index=True) if examples else pd.DataFrame()
    return SignResults(raw, _summarize(raw, config, seed), _check_summary(checks),
                       examples_frame, null_subtracted(raw), calibration_signs(raw))


def run_problems(problems: dict[str, Problem], config: ExperimentConfig, seed: int = 0
                 ) -> SignResults:
    """Claim 1 on given tables only (no synthetic cohort, no ground-truth check)."""
    records = [record for r in range(config.resplits)
               for record in fitted_records(problems, config, seed, r)]
    return results_from(records, [], config, seed)


def run(config: ExperimentConfig, seed: int = 0, progress: Progress | None = None) -> SignResults:
    """Claim 1 on the synthetic cohort (oracle and fitted) and the real data sets."""
    say = progress or (lambda message: None)
    records: list[dict] = []
    checks: list[dict] = []
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
        records += fitted_records({"synthetic (gbm)": problem, **real}, config, seed, r)
    return results_from(records, checks, config, seed)


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
