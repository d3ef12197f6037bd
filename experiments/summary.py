"""The markdown summary of a reproduction run: verdicts first, then one section per claim."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from experiments.config import PRIMARY_ALPHA, ExperimentConfig
from experiments.decision_task import SETTINGS, DecisionResults
from experiments.identity_grid import GridResults
from experiments.sign_opposition import ANY, NULL_LEVEL, NULL_POOLED, POOLED, REAL, SignResults
from experiments.verdicts import Verdict

PNG_NOTE = ("PNG figures are not written: plotly's static export needs kaleido and a Chromium "
            "build, which cannot be installed offline here. report.html is self-contained.")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table (no dependency on tabulate)."""
    def cell(value: object) -> str:
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, header)) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


def share(row: pd.Series, metric: str) -> str:
    return f"{row[metric]:.0%} [{row[f'{metric}_low']:.0%}, {row[f'{metric}_high']:.0%}]"


def ratio(estimate: float, low: float, high: float, signed: bool = False) -> str:
    if signed:
        return f"{estimate * 100:+.1f} pp [{low * 100:+.1f}, {high * 100:+.1f}]"
    return f"{estimate:.1%} [{low:.1%}, {high:.1%}]"


def _alpha(frame: pd.DataFrame, alpha: float = PRIMARY_ALPHA) -> pd.DataFrame:
    return frame[np.isclose(frame["alpha"], alpha)]


def gap(row: pd.Series, metric: str) -> str:
    """A null-subtracted share in percentage points with its interval."""
    low, high = row[f"{metric}_low"], row[f"{metric}_high"]
    if not np.isfinite(low):
        return f"{row[metric] * 100:+.1f} pp [no interval]"
    return f"{row[metric] * 100:+.1f} pp [{low * 100:+.1f}, {high * 100:+.1f}]"


def background_sizes(results: SignResults) -> dict[str, float]:
    """The background size each data set's fitted systems used (the smallest, if several)."""
    return results.raw.groupby("dataset", sort=False)["background"].min().to_dict()


def sign_section(results: SignResults, config: ExperimentConfig) -> str:
    s = results.summary
    primary = _alpha(s)
    nulls = _alpha(results.null_subtracted)
    signs = _alpha(results.calibration_signs)
    level = NULL_LEVEL
    out = [
        "## Claim 1 — calibration- and instance-driven attributions often carry opposite signs",
        "",
        f"Every fitted data set gets {config.null_noise} pure-noise columns and permuted copies "
        f"of {config.null_permuted} real columns (redrawn every resplit), fitted and explained "
        f"with the real ones: {config.model} components, background "
        f"{config.sign_background or 'the library default (1,000 with tree tables)'}, "
        f"`{config.sign_method}` Shapley ({config.sign_budget} antithetic permutations: d "
        "reaches 20 with the null columns), φ_C's interval from "
        f"{config.calibration_bootstrap} bootstrap replicates of the calibration set. A sign "
        "counts only where it is settled: φ_C's interval excludes 0 and |φ_C| exceeds 1.96 "
        "Monte Carlo standard errors, |φ_I| (and for reversals |φ_T|) likewise. "
        f"{config.resplits} resplits, α = {PRIMARY_ALPHA}. Background rows used: "
        + ", ".join(f"{d} {int(b)}" for d, b in
                    background_sizes(results).items()) + ".",
        "",
        f"Real minus null: each real feature's share minus the mean share of the null columns "
        f"of the same fitted system, averaged over resplits, with a t interval over resplits at "
        f"family-wise {level:.0%} (Bonferroni over the data set's real features). The pooled "
        "row pools every real feature's (patient, feature) pairs.",
        "",
    ]
    pooled = nulls[nulls["feature"] == POOLED]
    out += [markdown_table(
        ["data set", "family", "opposite (settled): real / null", "real − null",
         "both ≥ 5 % of width: real / null", "real − null", "reversed: real / null",
         "real − null"],
        [[r["dataset"], r["family"],
          f"{r['opposite_real']:.1%} / {r['opposite_null']:.1%}", gap(r, "opposite"),
          f"{r['opposite_sizeable_real']:.1%} / {r['opposite_sizeable_null']:.1%}",
          gap(r, "opposite_sizeable"),
          f"{r['reversed_real']:.1%} / {r['reversed_null']:.1%}", gap(r, "reversed")]
         for _, r in pooled.iterrows()]), ""]
    features = nulls[(nulls["feature"] != POOLED) & (nulls["family"] == "normalized")]
    kept = signs.set_index(["dataset", "family", "feature"])
    out += ["Per real feature (normalized, α = 0.1): real − null shares, and in how many "
            "resplits φ_C's sign was settled and kept its modal sign:", "",
            markdown_table(
                ["data set", "feature", "opposite", "both ≥ 5 %", "reversed", "mean φ_C (width)",
                 "φ_C settled", "φ_C keeps its sign"],
                [[r["dataset"], r["feature"], gap(r, "opposite"),
                  gap(r, "opposite_sizeable"), gap(r, "reversed"),
                  f"{kept.loc[(r['dataset'], 'normalized', r['feature']), 'phi_C_mean']:+.3g}",
                  f"{kept.loc[(r['dataset'], 'normalized', r['feature']), 'settled']:.0%}",
                  f"{kept.loc[(r['dataset'], 'normalized', r['feature']), 'sign_kept']:.0%}"]
                 for _, r in features.iterrows()]), ""]
    null_signs = signs[signs["kind"] != REAL]
    if not null_signs.empty:
        grouped = null_signs.groupby(["dataset", "family", "kind"], sort=False).agg(
            columns=("feature", "count"), phi_C_mean=("phi_C_mean", "mean"),
            positive=("modal_sign", lambda v: float(np.mean(v > 0))),
            settled=("settled", "mean"), kept=("sign_kept", "mean")).reset_index()
        out += ["The null columns' own calibration-driven part (α = 0.1): a column with no "
                "signal still gets a φ_C, and often a settled one, because the fitted σ uses it "
                "and masking it changes the calibration scores:", "",
                markdown_table(["data set", "family", "null columns", "count", "mean φ_C (width)",
                                "modal sign > 0", "settled (mean over columns)",
                                "keeps its sign"],
                               [[r["dataset"], r["family"], r["kind"], int(r["columns"]),
                                 f"{r['phi_C_mean']:+.3g}", f"{r['positive']:.0%}",
                                 f"{r['settled']:.0%}", f"{r['kept']:.0%}"]
                                for _, r in grouped.iterrows()]), ""]
    comparator = primary[primary["feature"].isin([POOLED, NULL_POOLED])]
    out += ["What shap on the fitted interval shows (the fixed-q̂ comparator: Shapley values of "
            "the width with q̂ held at the fitted value, as a fitted conformal regressor's "
            "interval keeps it): share of (patient, feature) pairs whose sign it gets opposite "
            "to φ_I and to φ_T, mean over resplits [95% bootstrap interval over resplits]. "
            "Beside it, the total's own reversals (φ_T·φ_I < 0, settled).", "",
            markdown_table(["data set", "family", "columns", "comparator vs φ_I",
                            "comparator vs φ_T", "φ_T vs φ_I (settled)"],
                           [[r["dataset"], r["family"],
                             "real" if r["feature"] == POOLED else "null",
                             share(r, "fixed_vs_instance"), share(r, "fixed_vs_total"),
                             share(r, "reversed")]
                            for _, r in comparator.iterrows()
                            if np.isfinite(r["fixed_vs_instance"])]), ""]
    any_feature = primary[primary["feature"] == ANY].set_index(["dataset", "family"])
    rows = []
    for _, r in primary[primary["feature"] == POOLED].iterrows():
        anyrow = any_feature.loc[(r["dataset"], r["family"])]
        rows.append([r["dataset"], r["family"], share(r, "opposite_raw"), share(r, "opposite"),
                     share(r, "opposite_sizeable"), share(r, "reversed"),
                     share(r, "cancelled"), f"{anyrow['reversed']:.0%}"])
    out += ["Shares before the null subtraction (real features pooled, α = 0.1, mean over "
            "resplits [95% bootstrap interval over resplits]). \"All signs\" is the old count, "
            "which ignores whether a sign is settled; last column: patients with at least one "
            "settled reversal.", "",
            markdown_table(["data set", "family", "φ_C·φ_I < 0 (all signs)",
                            "φ_C·φ_I < 0 (settled)", "… both ≥ 5% of width",
                            "φ_T·φ_I < 0 (settled)", "total cancels sizeable φ_I",
                            "patients with a reversal"], rows), ""]
    by_alpha = s[(s["feature"] == POOLED) & (s["family"] == "normalized")]
    alphas = sorted(by_alpha["alpha"].unique())
    table = []
    for dataset, group in by_alpha.groupby("dataset", sort=False):
        values = {round(a, 6): g for a, g in group.groupby("alpha")}
        table.append([dataset] + [
            f"{values[round(a, 6)].iloc[0]['opposite_raw']:.0%} / "
            f"{values[round(a, 6)].iloc[0]['opposite']:.0%}" for a in alphas])
    out += ["Pooled opposite-sign share by α (normalized, real features; all signs / settled):",
            "", markdown_table(["data set"] + [f"α = {a:g}" for a in alphas], table), ""]
    check = results.check
    if not check.empty:
        out += [
            "Synthetic ground truth (oracle components, normalized family, no null columns: "
            "the oracle σ ignores every column but two): observed shares (all signs) vs "
            "the closed form φ_I = γx − γ²/2 with the observed φ_C (log units); features the "
            "oracle σ ignores must have φ_I ≡ 0, unused features φ ≡ 0 in every game.", "",
            markdown_table(
                ["α", "feature", "role", "φ_C", "opposite obs / expected",
                 "reversed obs / expected", "tolerance", "passed"],
                [[f"{r['alpha']:g}", r["feature"], r["role"], f"{r['phi_C']:+.3f}",
                  f"{r['observed_opposite']:.3f} / {r['expected_opposite']:.3f}",
                  f"{r['observed_reversed']:.3f} / {r['expected_reversed']:.3f}",
                  f"{r['tolerance']:.3f}", "yes" if r["passed"] else "NO"]
                 for _, r in check.iterrows()]), "",
        ]
    return "\n".join(out)


def decision_section(results: DecisionResults, config: ExperimentConfig) -> str:
    """Every unit at the primary α, then each view's scores pooled over the cells."""
    units = results.units
    out = [
        "## Claim 2 — factorial decision task (pre-registered)",
        "",
        "Design: `experiments/claim2_preregistration.md` and its dated amendment. ACTG 175 "
        "covariates resampled with replacement, a simulated outcome whose noise drivers are "
        f"known; settings {', '.join(config.decision_settings)}; n_cal "
        f"{', '.join(map(str, config.decision_n_cal))}; α {', '.join(map(str, config.alphas))}; "
        f"components {', '.join(config.decision_models)}; {config.decision_draws} outcome draws "
        f"per cell ({config.decision_train} training, {config.decision_test} test patients). "
        f"High-uncertainty patients: the top {config.high_uncertainty_share:.0%} of true σ. "
        "Views: instance φ_I, total φ_T, joint min(φ_I, φ_T), fixed-q̂ (shap on the fitted "
        "interval's width), and width ranking for recall. Intervals: paired bootstrap over "
        f"draws ({config.bootstrap} replicates); Holm over every test at α = {PRIMARY_ALPHA}. "
        "Every cell's scores and tests are in `claim2_scores.csv` and `claim2_comparisons.csv`.",
        "",
    ]
    if not units.empty:
        rows = []
        for _, r in units.iterrows():
            rows.append([
                r["model"], int(r["n_cal"]), r["setting"], r["role"],
                f"{r['phi_C']:+.3f} [{r['phi_C_low']:+.3f}, {r['phi_C_high']:+.3f}]", r["side"],
                _difference(r, "FR_instance_minus_total"),
                _difference(r, "FA_instance_minus_total"),
                _difference(r, "FR_instance_minus_fixed-q̂"),
                "yes" if r["holds_instance"] else "", "yes" if r["holds_joint"] else "",
                "yes" if r.get("old_rule_instance") or r.get("old_rule_joint") else "",
                r["winner"],
            ])
        out += [f"Per unit (α = {PRIMARY_ALPHA}): false reassurance (FR) of the role's true "
                "drivers and false alarms (FA) on the role's features where they drive no "
                "noise, paired difference with its 95 % interval and Holm-adjusted p. The "
                "symmetric rule (second amendment) judges FR where φ_C < 0 and FA where "
                "φ_C > 0, with the other as a guard; \"old rule\" is the first amendment's "
                "FR-only rule, which φ_C's sign decided.", "",
                markdown_table(["components", "n_cal", "setting", "role", "mean φ_C (log)",
                                "φ_C side", "FR instance − total", "FA instance − total",
                                "FR instance − fixed-q̂", "holds (instance)", "holds (joint)",
                                "old rule", "winner"], rows), ""]
        out += null_section(results)
    tests = _alpha(results.comparisons) if not results.comparisons.empty else \
        results.comparisons
    if not tests.empty:
        tally = (tests.groupby(["comparison", "score"], sort=False)["better"]
                 .value_counts().unstack(fill_value=0))
        for column in ("first", "second", "no difference"):
            if column not in tally.columns:
                tally[column] = 0
        out += ["How often each comparison went which way over the cells (Holm-adjusted p < "
                f"0.05, α = {PRIMARY_ALPHA}); \"first\" is the view named first:", "",
                markdown_table(["comparison", "score", "first better", "second better",
                                "no difference"],
                               [[c, sc, int(r["first"]), int(r["second"]),
                                 int(r["no difference"])] for (c, sc), r in tally.iterrows()]),
                ""]
    return "\n".join(out)


def null_section(results: DecisionResults) -> list[str]:
    """The homoscedastic null's false alarms per cell and view (α = the primary one)."""
    s, tests = results.scores, results.comparisons
    if s.empty or tests.empty:
        return []
    nulls = {x.name for x in SETTINGS if x.null}
    s = _alpha(s[s["setting"].isin(nulls)])
    tests = _alpha(tests[tests["setting"].isin(nulls)])
    rows = []
    for (model, n_cal), cell in s.groupby(["model", "n_cal"], sort=False):
        row: list[object] = [model, int(n_cal)]
        for score in ("false_alarm_pairs", "low_flagged"):
            for view in ("instance", "total"):
                hit = cell[(cell["view"] == view) & (cell["score"] == score)]
                row.append("" if hit.empty else ratio(*hit.iloc[0][["estimate", "low", "high"]]))
            t = tests[(tests["model"] == model) & (tests["n_cal"] == n_cal)
                      & (tests["comparison"] == "instance − total") & (tests["score"] == score)]
            row.append("" if t.empty else
                       f"{t.iloc[0]['estimate'] * 100:+.1f} pp [{t.iloc[0]['low'] * 100:+.1f}, "
                       f"{t.iloc[0]['high'] * 100:+.1f}], p = {t.iloc[0]['p_holm']:.2g}")
        rows.append(row)
    if not rows:
        return []
    return ["Homoscedastic null (every γ = 0: no true driver, every flag a false alarm), "
            f"α = {PRIMARY_ALPHA}: (patient, feature) pairs shown raising the width, and "
            "low-uncertainty patients with some feature shown raising it ≥ 25 %; Holm-adjusted "
            "p. Reported, not part of the rule: a negative φ_C lowers the total, so the instance "
            "view raises more features here.", "",
            markdown_table(["components", "n_cal", "false alarms: instance", "total",
                            "instance − total", "low flagged: instance", "total",
                            "instance − total"], rows), ""]


def _difference(row: pd.Series, name: str) -> str:
    if name not in row or not np.isfinite(row[name]):
        return ""
    return (f"{row[name] * 100:+.1f} pp [{row[f'{name}_low'] * 100:+.1f}, "
            f"{row[f'{name}_high'] * 100:+.1f}], p = {row[f'{name}_p_holm']:.2g}")


def identity_section(results: GridResults) -> str:
    grid = results.grid
    ran = grid[grid["status"] != "error"]
    rows = []
    for (dataset, family), group in ran.groupby(["dataset", "family"], sort=False):
        efficient = group[group["efficient"].astype(bool)]
        rows.append([
            dataset, family, group["model"].iloc[0], group["method"].nunique(),
            f"{int((group['status'] == 'pass').sum())}/{len(group)}",
            f"{group['additivity_relative'].max():.1e}",
            f"{efficient['efficiency_relative'].max():.1e}" if len(efficient) else "—",
            f"{group['seconds'].min():.2f}–{group['seconds'].max():.2f}",
        ])
    out = [
        "## Claim 3 — the identity holds for every separable family and every linear method",
        "",
        "This is a software verification, not an empirical finding. The total game is defined "
        "as v_T = v_C + v_I on a separable family's scale, and every method here is linear in "
        "the game, so φ_T = φ_C + φ_I holds by algebra; what the grid checks is that this "
        "implementation computes the three games and applies each design consistently (to "
        "rounding error) on real fitted systems. The negative controls show the check can "
        "fail: a non-linear operator or a non-separable family breaks the identity by orders "
        "of magnitude more than rounding.",
        "",
        "Methods registered at run time: " + ", ".join(f"`{m}`" for m in results.methods) + ".",
        "",
        markdown_table(["data set", "family", "model", "methods", "cells passed",
                        "max additivity / width", "max efficiency / width (efficient methods)",
                        "seconds per cell"], rows),
        "",
    ]
    errors = grid[grid["status"] == "error"]
    if not errors.empty:
        out += ["Cells that could not run:", ""]
        out += [f"* {r.dataset} / {r.family} / {r.method}: {r.error}"
                for r in errors.itertuples()]
        out.append("")
    controls = results.controls
    if not controls.empty:
        out += ["Negative controls (must fail visibly):", "",
                markdown_table(["data set", "control", "family", "what", "max error",
                                "median error", "patients failing"],
                               [[r.dataset, r.control, r.family, r.description,
                                 f"{r.max_error:.3g}", f"{r.median_error:.3g}",
                                 f"{r.share_failing:.0%}"] for r in controls.itertuples()]),
                ""]
    return "\n".join(out)


def render(verdicts: list[Verdict], sign: SignResults, decision: DecisionResults,
           grid: GridResults, config: ExperimentConfig, header: Sequence[str],
           extra_sections: Sequence[str] = ()) -> str:
    """The whole summary.md (`extra_sections`: further settings' sections, after claim 3)."""
    parts = ["# Reproducing the paper's claims", "", *header, "", "## Verdicts", "",
             markdown_table(["claim", "status"], [[v.claim, v.status] for v in verdicts]), ""]
    for verdict in verdicts:
        parts += [f"**{verdict.claim}: {verdict.status}.**", ""]
        parts += [f"* {line}" for line in verdict.evidence] + [""]
    parts += [sign_section(sign, config), decision_section(decision, config),
              identity_section(grid), *extra_sections, PNG_NOTE, ""]
    return "\n".join(parts)
