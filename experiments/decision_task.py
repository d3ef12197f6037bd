"""Claim 2, as pre-registered: a factorial decision task that the total view can win.

The design, scores and decision rule are fixed in experiments/claim2_preregistration.md (with
its dated amendment); this module implements them and nothing else.

Cohort: the ACTG 175 covariates, resampled with replacement, with a simulated outcome whose
noise has known per-patient drivers (`sample_data.semisynthetic`). Every cell holds three
kinds of feature: dual-role drivers (a noise effect γ and a mean effect β), noise-only drivers
(γ only) and mean-only features (β only). A cell is one mean-effect setting (|β| ∈ {0, 0.4,
0.8}, sign of β the same as γ's or opposite, or the homoscedastic null where every γ = 0), one
calibration size n_cal, one α and one component type (gbm or linear). Each draw simulates a
fresh outcome, fits the normalized family once on the training rows, calibrates on the first
n_cal of its calibration rows and explains the test patients with exact Shapley on the log
scale (φ_T = φ_C + φ_I per feature), with the fixed-q̂ comparator alongside.

Views of a patient's explanation: instance (φ_I), total (φ_T), joint (min(φ_I, φ_T): a feature
raises the width only where both views agree, so it is *not* a superset of the total), the
fixed-q̂ comparator (shap on the fitted interval's width, put on the log scale), and, for
recall only, ranking patients by their interval width. Scores per view and draw are kept as
(numerator, denominator) so that a paired bootstrap over draws (the independent units) can
pool them; every test's p-value comes from the bootstrap standard error of the paired
difference (Student t with draws − 1 degrees of freedom), Holm-corrected over every test of
one α.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.stats import t as t_dist

from cpdecomp.core.decomposition import logarithmic_mean_factor
from cpdecomp.core.explainer import Explainer
from cpdecomp.core.system import fit_system
from cpdecomp.core.typing import FloatArray
from cpdecomp.sample_data.semisynthetic import (
    ID_COLUMN,
    TARGET,
    load_covariates,
    make_semisynthetic,
)
from experiments.config import PRIMARY_ALPHA, ExperimentConfig

Progress = Callable[[str], None]

DUAL = {"cd4_baseline": -0.35, "karnofsky": -0.30}
"""Dual-role drivers: noise effect γ per SD; their mean effect is ±|β|·sign(γ)."""
NOISE_ONLY = {"symptomatic": 0.45, "age": 0.30, "iv_drugs": 0.40}
"""Noise-only drivers: γ per SD, no mean effect."""
MEAN_ONLY = {"weight_kg": 1.0, "prior_art_days": -1.0, "cd8_baseline": 1.0}
"""Mean-only features: the sign of their mean effect (times |β|); no noise effect."""
ROLES = {**{f: "dual" for f in DUAL}, **{f: "noise-only" for f in NOISE_ONLY},
         **{f: "mean-only" for f in MEAN_ONLY}}
DRIVER_ROLES = ("dual", "noise-only")

VIEWS = ("instance", "total", "joint", "fixed-q̂")
WIDTH = "width ranking"
"""Patients ranked by interval width, no attribution: scored on recall only."""
PRIMARY_COMPARISONS = (("instance", "total"), ("joint", "total"), ("instance", "fixed-q̂"))
LOW_FLAG = float(np.log(1.25))
"""A low-uncertainty patient is flagged when some feature is shown raising the width ≥ 25 %."""
PRECISION_K = (1, 3)
SIGNIFICANT = 0.05
"""Holm-adjusted p below this is a significant difference."""
MIN_DRAWS = 5
"""Fewer draws give no p-value (so no significant difference): with 2 or 3 draws a discrete
score's paired difference is often the same in every draw, and its bootstrap spread is 0."""

LOWER_IS_BETTER = ("false_reassurance", "false_alarm", "low_flagged")
"""Score name prefixes where smaller is better; for precision and recall larger is."""


@dataclass(frozen=True)
class Setting:
    """The mean-effect level of a cell: |β|, the sign of β relative to γ, or the null."""

    name: str
    beta: float
    sign: str
    """'same' or 'opposite' (β's sign relative to the dual-role drivers' γ), '-' at |β| = 0."""
    null: bool = False
    """Homoscedastic: every γ = 0, so there is no true driver and every flag is a false alarm."""

    def effects(self) -> tuple[dict[str, float], dict[str, float]]:
        """(mean effects, noise effects) per SD, for `make_semisynthetic`."""
        direction = -1.0 if self.sign == "opposite" else 1.0
        mean = {f: direction * self.beta * float(np.sign(g)) for f, g in DUAL.items()}
        mean.update({f: self.beta * s for f, s in MEAN_ONLY.items()})
        noise = {} if self.null else {**DUAL, **NOISE_ONLY}
        return {f: b for f, b in mean.items() if b != 0.0}, noise


SETTINGS = (
    Setting("|β|=0", 0.0, "-"),
    Setting("|β|=0.4 same", 0.4, "same"),
    Setting("|β|=0.4 opposite", 0.4, "opposite"),
    Setting("|β|=0.8 same", 0.8, "same"),
    Setting("|β|=0.8 opposite", 0.8, "opposite"),
    Setting("null (homoscedastic)", 0.8, "same", null=True),
)
SETTING_BY_NAME = {s.name: s for s in SETTINGS}
CELL = ["setting", "model", "n_cal", "alpha"]


@dataclass(frozen=True, eq=False)
class DecisionResults:
    """Per-cell scores, per-cell comparisons (with Holm), per-unit rule outcomes, per-draw φ_C."""

    scores: pd.DataFrame
    """One row per (cell, view, score): estimate and 95 % interval over draws."""
    comparisons: pd.DataFrame
    """One row per (cell, comparison, score): paired difference, interval, p, Holm p, better."""
    units: pd.DataFrame
    """One row per (cell at the primary α, driver role): φ_C side, the rule, the winner."""
    offsets: pd.DataFrame
    """φ_C per feature (log units) of every draw: the offset between the total and instance."""
    draws: int


def ranked_first(values: FloatArray, share: float, rng: np.random.Generator) -> np.ndarray:
    """Flags for the ceil(share · n) largest values, ties broken at random (seeded)."""
    k = int(np.ceil(share * len(values)))
    order = np.lexsort((rng.random(len(values)), -np.asarray(values, dtype=float)))
    chosen = np.zeros(len(values), dtype=bool)
    chosen[order[:k]] = True
    return chosen


def top_share(scores: FloatArray, share: float) -> np.ndarray:
    """Flags for the round(share · n) largest scores (a matched budget)."""
    k = round(share * len(scores))
    flags = np.zeros(len(scores), dtype=bool)
    flags[np.argsort(-scores, kind="stable")[:k]] = True
    return flags


def fixed_quantile_on_log_scale(fixed: FloatArray, width: FloatArray) -> FloatArray:
    """The fixed-q̂ view (width units) divided by the logarithmic mean of the width and its own
    fully masked width: signs kept, and the row sums to the log-width gap, as φ_I's does."""
    masked = width - fixed.sum(axis=1)
    factor = logarithmic_mean_factor(width, np.where(masked > 0, masked, width))
    return fixed / factor[:, None]


def score_draw(views: dict[str, FloatArray], width: FloatArray, truth: np.ndarray,
               roles: Sequence[str], true_sigma: FloatArray, config: ExperimentConfig,
               rng: np.random.Generator) -> list[tuple[str, str, float, float]]:
    """(view, score, numerator, denominator) of every score for one draw of one cell.

    views: (patients, features) attributions on the log scale; truth: the patients' true
    drivers; roles: each feature's role ('dual', 'noise-only', 'mean-only' or '' for none).
    """
    roles = np.asarray(roles)
    high = ranked_first(true_sigma, config.high_uncertainty_share, rng)
    low = ranked_first(-np.asarray(true_sigma), 0.5, rng)
    driver_feature = np.isin(roles, DRIVER_ROLES)
    no_noise_role = ~driver_feature
    rows: list[tuple[str, str, float, float]] = []
    for view, phi in views.items():
        pairs = truth & high[:, None]
        strata = {"": np.ones(len(roles), dtype=bool),
                  **{f"[{r}]": roles == r for r in DRIVER_ROLES}}
        for suffix, columns in strata.items():
            chosen = pairs[:, columns]
            rows.append((view, f"false_reassurance{suffix}",
                         float((chosen & (phi[:, columns] < 0)).sum()), float(chosen.sum())))
        rows.append((view, "false_alarm_pairs", float((phi[:, no_noise_role] > 0).sum()),
                     float(phi[:, no_noise_role].size)))
        for role in DRIVER_ROLES:
            # The mirror of false reassurance, for the symmetric rule (second amendment):
            # (patient, driver-role feature) pairs where the feature is not a true driver of
            # that patient, over every test patient, shown raising the width.
            columns = roles == role
            spared = ~truth[:, columns]
            rows.append((view, f"false_alarm[{role}]",
                         float((spared & (phi[:, columns] > 0)).sum()), float(spared.sum())))
        strongest = phi.max(axis=1)
        rows.append((view, "low_flagged", float((strongest[low] > LOW_FLAG).sum()),
                     float(low.sum())))
        order = np.argsort(-phi, axis=1, kind="stable")
        for k in PRECISION_K:
            top = order[high, :k]
            positive = np.take_along_axis(phi[high], top, axis=1) > 0
            true = np.take_along_axis(truth[high], top, axis=1)
            rows.append((view, f"precision@{k}", float((positive & true).sum()),
                         float(positive.sum())))
        for budget in config.budgets:
            flags = top_share(strongest, budget)
            rows.append((view, f"recall@{budget:.2f}", float((flags & high).sum()),
                         float(high.sum())))
    for budget in config.budgets:
        flags = top_share(width, budget)
        rows.append((WIDTH, f"recall@{budget:.2f}", float((flags & high).sum()),
                     float(high.sum())))
    return rows


def draw_seed(seed: int, setting: int, draw: int) -> int:
    return int(np.random.SeedSequence((seed, 1202, setting, draw)).generate_state(1)[0])


def run(config: ExperimentConfig, seed: int = 0, progress: Progress | None = None
        ) -> DecisionResults:
    """Every cell of the factorial design at `config`'s size."""
    say = progress or (lambda message: None)
    records: list[dict] = []
    offsets: list[dict] = []
    settings = [SETTING_BY_NAME[name] for name in config.decision_settings]
    n_cal_pool = max(config.decision_n_cal)
    covariates = load_covariates()
    for setting in settings:
        mean_effects, noise_effects = setting.effects()
        for draw in range(config.decision_draws):
            say(f"claim 2: {setting.name}, draw {draw + 1}/{config.decision_draws}")
            this_seed = draw_seed(seed, SETTINGS.index(setting), draw)
            rng = np.random.default_rng(this_seed)
            n = config.decision_train + n_cal_pool + config.decision_test
            # The population is the covariates' empirical distribution: every level of n_cal
            # draws from it alike, so n_cal is the only thing that changes between levels.
            sample = covariates.iloc[rng.integers(0, len(covariates), n)].reset_index(drop=True)
            sample[ID_COLUMN] = [f"D{i:05d}" for i in range(n)]
            data = make_semisynthetic(seed=this_seed, covariates=sample,
                                      mean_effects=mean_effects, noise_effects=noise_effects)
            table, features = data.table, list(data.features)
            y = table[TARGET].to_numpy()
            train = slice(0, config.decision_train)
            cal_start = config.decision_train
            test = slice(cal_start + n_cal_pool, n)
            truth = data.true_drivers()[features].to_numpy()[test]
            roles = [ROLES.get(f, "") if not setting.null or ROLES.get(f) == "mean-only"
                     else "" for f in features]
            true_sigma = data.true_sigma[test]
            for model in config.decision_models:
                fitted = fit_system(table.iloc[train], y[train], features, family="normalized",
                                    model=model, seed=this_seed)
                test_rows = fitted.encode(table.iloc[test])
                for n_cal in config.decision_n_cal:
                    cal = slice(cal_start, cal_start + n_cal)
                    system = fitted.conformalize(table.iloc[cal], y[cal])
                    explainer = Explainer(system, background_size=config.background or 64,
                                          seed=this_seed)
                    for alpha in config.alphas:
                        e = explainer.explain_rows(test_rows, method="exact", alpha=alpha,
                                                   units="log", fixed_quantile=True)
                        d = e.decomposition
                        assert d.fixed_quantile is not None
                        views = {
                            "instance": d.instance, "total": d.total,
                            "joint": np.minimum(d.instance, d.total),
                            "fixed-q̂": fixed_quantile_on_log_scale(d.fixed_quantile, e.width),
                        }
                        cell = {"setting": setting.name, "model": model, "n_cal": n_cal,
                                "alpha": alpha, "draw": draw}
                        score_rng = np.random.default_rng((this_seed, n_cal, 77))
                        for view, score, num, den in score_draw(
                                views, e.width, truth, roles, true_sigma, config, score_rng):
                            records.append({**cell, "view": view, "score": score,
                                            "num": num, "den": den})
                        phi_c = d.calibration[0]
                        for role in DRIVER_ROLES:
                            chosen = [j for j, f in enumerate(features) if roles[j] == role]
                            if chosen:
                                records.append({**cell, "view": "calibration",
                                                "score": f"phi_C[{role}]",
                                                "num": float(phi_c[chosen].mean()), "den": 1.0})
                        offsets += [{**cell, "feature": f, "role": roles[j] or "none",
                                     "calibration": float(phi_c[j]), "q_hat": e.q_hat}
                                    for j, f in enumerate(features)]
    frame = pd.DataFrame(records)
    scores, comparisons = infer(frame, config.bootstrap, np.random.default_rng((seed, 203)))
    return DecisionResults(scores, comparisons, rule_units(scores, comparisons),
                           pd.DataFrame(offsets), config.decision_draws)


def holm(p: FloatArray) -> FloatArray:
    """Holm's step-down adjusted p-values (NaN stays NaN and is not counted)."""
    p = np.asarray(p, dtype=float)
    adjusted = np.full_like(p, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    m = finite.size
    if m == 0:
        return adjusted
    order = finite[np.argsort(p[finite], kind="stable")]
    steps = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted[order] = np.maximum.accumulate(steps)
    return adjusted


def comparisons_for(scores: Sequence[str], null: bool) -> list[tuple[str, str, str]]:
    """(view a, view b, score) tests of one cell (see the amendment)."""
    tests = []
    for score in scores:
        if score.startswith("phi_C"):
            continue
        if score.startswith("recall"):
            rules = [*VIEWS, WIDTH]
            pairs = (list(combinations(rules, 2)) if null else
                     [*PRIMARY_COMPARISONS, *((v, WIDTH) for v in VIEWS)])
        else:
            pairs = list(PRIMARY_COMPARISONS)
        tests += [(a, b, score) for a, b in pairs]
    return tests


def infer(frame: pd.DataFrame, replicates: int, rng: np.random.Generator
          ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-cell estimates and paired bootstrap intervals over draws; tests with Holm per α."""
    score_rows, test_rows = [], []
    tail = 0.025
    for key, cell in frame.groupby(CELL, sort=False):
        labels = dict(zip(CELL, key, strict=True))
        draws = np.sort(cell["draw"].unique())
        wide_num = cell.pivot_table(index="draw", columns=["view", "score"], values="num",
                                    aggfunc="sum").reindex(draws)
        wide_den = cell.pivot_table(index="draw", columns=["view", "score"], values="den",
                                    aggfunc="sum").reindex(draws)
        num, den = wide_num.to_numpy(), wide_den.to_numpy()
        index = rng.integers(0, len(draws), size=(replicates, len(draws)))
        with np.errstate(invalid="ignore", divide="ignore"):
            point = num.sum(axis=0) / den.sum(axis=0)
            boot = num[index].sum(axis=1) / den[index].sum(axis=1)
        columns = {c: i for i, c in enumerate(wide_num.columns)}
        for (view, score), i in columns.items():
            low, high = _percentiles(boot[:, i], tail)
            score_rows.append({**labels, "view": view, "score": score, "estimate": point[i],
                               "low": low, "high": high, "draws": len(draws)})
        null = SETTING_BY_NAME.get(labels["setting"], SETTINGS[0]).null
        scores = list(dict.fromkeys(s for _, s in columns))
        for a, b, score in comparisons_for(scores, null):
            if (a, score) not in columns or (b, score) not in columns:
                continue
            ia, ib = columns[a, score], columns[b, score]
            estimate = point[ia] - point[ib]
            differences = boot[:, ia] - boot[:, ib]
            low, high = _percentiles(differences, tail)
            finite = differences[np.isfinite(differences)]
            se = float(finite.std(ddof=1)) if finite.size > 1 else np.nan
            if not np.isfinite(estimate) or len(draws) < MIN_DRAWS:
                p = np.nan
            elif se > 0:
                p = float(2 * t_dist.sf(abs(estimate) / se, len(draws) - 1))
            else:  # every replicate gives the same difference
                p = 1.0 if estimate == 0 else 0.0
            test_rows.append({**labels, "comparison": f"{a} − {b}", "score": score,
                              "estimate": estimate, "low": low, "high": high, "se": se,
                              "p": p})
    scores_table = pd.DataFrame(score_rows)
    tests = pd.DataFrame(test_rows)
    if tests.empty:
        return scores_table, tests
    tests["p_holm"] = np.nan
    for _, family in tests.groupby("alpha", sort=False):
        tests.loc[family.index, "p_holm"] = holm(family["p"].to_numpy())
    lower = tests["score"].str.startswith(LOWER_IS_BETTER)
    significant = tests["p_holm"] < SIGNIFICANT
    first_better = np.where(lower, tests["estimate"] < 0, tests["estimate"] > 0)
    tests["better"] = np.where(~significant, "no difference",
                               np.where(first_better, "first", "second"))
    return scores_table, tests


def _percentiles(values: FloatArray, tail: float) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return np.nan, np.nan
    low, high = np.quantile(finite, [tail, 1 - tail])
    return float(low), float(high)


INSTANCE_NOT_RULE = "instance (rule not met)"
"""A unit where the instance view is better on some score and worse on none, but the rule does
not hold (its false reassurance is not lower than the total's)."""
GUARDED = ("false_alarm_pairs", "low_flagged")
"""Scores the two-view reading must not be worse on (with matched-budget recall, and under the
symmetric rule the role's mirror error, `mirror_score`)."""


def unit_name(row: pd.Series | dict) -> str:
    return (f"{row['model']}, n_cal={int(row['n_cal'])}, {row['setting']}, "
            f"{row['role']} drivers")


def primary_score(side: str, role: str) -> str | None:
    """The error the total view is pushed towards on a unit's φ_C side (second amendment).

    φ_T = φ_I + φ_C with φ_C one constant per feature on the log scale: φ_C < 0 pushes the
    total towards showing a true driver as reducing uncertainty (false reassurance), φ_C > 0
    towards showing the feature raising the width where it is not a driver (false alarms).
    Near-zero units are reported and not judged.
    """
    if side == "negative":
        return f"false_reassurance[{role}]"
    if side == "positive":
        return f"false_alarm[{role}]"
    return None


def mirror_score(side: str, role: str) -> str | None:
    """The other error of the role, which the instance view pays on that side by the same
    algebra: a guard (the instance view must not be significantly worse on it)."""
    if side == "negative":
        return f"false_alarm[{role}]"
    if side == "positive":
        return f"false_reassurance[{role}]"
    return None


def rule_units(scores: pd.DataFrame, tests: pd.DataFrame) -> pd.DataFrame:
    """The symmetric rule (second amendment) per (cell at the primary α, driver role), the
    first amendment's rule beside it (`old_rule_*`), and who wins there."""
    rows = []
    if tests.empty:
        return pd.DataFrame(rows)
    at = tests[np.isclose(tests["alpha"], PRIMARY_ALPHA)]
    s = scores[np.isclose(scores["alpha"], PRIMARY_ALPHA)]
    for key, cell in at.groupby(["setting", "model", "n_cal"], sort=False):
        labels = dict(zip(["setting", "model", "n_cal"], key, strict=True))
        if SETTING_BY_NAME.get(labels["setting"], SETTINGS[0]).null:
            continue  # no true driver: the null is judged on recall alone (null_passes)
        cell_scores = s[(s["setting"] == key[0]) & (s["model"] == key[1])
                        & (s["n_cal"] == key[2])]
        recall = [c for c in cell["score"].unique() if c.startswith("recall")]
        for role in DRIVER_ROLES:
            phi = cell_scores[(cell_scores["view"] == "calibration")
                              & (cell_scores["score"] == f"phi_C[{role}]")]
            if phi.empty:
                continue
            phi_row = phi.iloc[0]
            side = ("negative" if phi_row["high"] < 0 else
                    "positive" if phi_row["low"] > 0 else "near zero")
            reassurance = f"false_reassurance[{role}]"
            primary, mirror = primary_score(side, role), mirror_score(side, role)

            holds, old = {}, {}
            for view in ("instance", "joint"):
                comparison = f"{view} − total"
                guards = (*GUARDED, *recall)
                old[view] = (_better(cell, comparison, reassurance) == "first"
                             and all(_better(cell, comparison, g) != "second" for g in guards))
                holds[view] = (primary is not None and mirror is not None
                               and _better(cell, comparison, primary) == "first"
                               and all(_better(cell, comparison, g) != "second"
                                       for g in (*guards, mirror)))
            judged = [reassurance, f"false_alarm[{role}]", *GUARDED, *recall,
                      *(f"precision@{k}" for k in PRECISION_K)]
            against_total = [_better(cell, "instance − total", g) for g in judged]
            against_fixed = [_better(cell, "instance − fixed-q̂", g) for g in judged]
            if holds["instance"]:
                winner = "instance"
            elif holds["joint"]:
                winner = "joint"
            elif "second" in against_total and "first" not in against_total:
                winner = "total"
            elif "second" in against_fixed and "first" not in against_fixed:
                winner = "fixed-q̂"
            else:
                found = {*against_total, *against_fixed} - {"no difference"}
                # "first": the instance view better. One-way differences in its favour that
                # miss the rule (e.g. fewer false alarms, equal false reassurance) are not
                # "mixed": that label is for differences both ways.
                winner = ("mixed" if found == {"first", "second"} else
                          INSTANCE_NOT_RULE if found == {"first"} else "none")
            row = {**labels, "role": role, "phi_C": phi_row["estimate"],
                   "phi_C_low": phi_row["low"], "phi_C_high": phi_row["high"], "side": side,
                   "primary_score": primary or "",
                   "holds_instance": holds["instance"], "holds_joint": holds["joint"],
                   "old_rule_instance": old["instance"], "old_rule_joint": old["joint"],
                   "winner": winner}
            for prefix, score in (("FR", reassurance), ("FA", f"false_alarm[{role}]")):
                for comparison in ("instance − total", "joint − total", "instance − fixed-q̂"):
                    hit = cell[(cell["comparison"] == comparison) & (cell["score"] == score)]
                    if len(hit):
                        h = hit.iloc[0]
                        short = f"{prefix}_" + comparison.replace(" − ", "_minus_")
                        row.update({short: h["estimate"], f"{short}_low": h["low"],
                                    f"{short}_high": h["high"],
                                    f"{short}_p_holm": h["p_holm"]})
            rows.append(row)
    return pd.DataFrame(rows)


def _better(tests: pd.DataFrame, comparison: str, score: str) -> str:
    """'first', 'second' or 'no difference' for one test of a cell (none run: no difference)."""
    hit = tests[(tests["comparison"] == comparison) & (tests["score"] == score)]
    return "no difference" if hit.empty else str(hit.iloc[0]["better"])


def null_passes(tests: pd.DataFrame) -> pd.DataFrame:
    """Recall comparisons in the null cells (primary α) that came out significant: each one
    marks the rule as broken (there are no high-uncertainty patients beyond noise)."""
    if tests.empty:
        return tests
    nulls = {s.name for s in SETTINGS if s.null}
    chosen = (tests["setting"].isin(nulls) & np.isclose(tests["alpha"], PRIMARY_ALPHA)
              & tests["score"].str.startswith("recall") & (tests["better"] != "no difference"))
    return tests[chosen]
