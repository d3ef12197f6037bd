"""A setting where the calibration-driven part has a ground truth: recalibrate or re-measure?

Pre-registered (written, with its parameters and its rule, before any of it ran; a change
after a run would be added below as a dated amendment, and none has been).

Question. When an interval is wrong, is the fault in the calibration set ("recalibrate": φ_C
should carry it) or in the patient's recorded features ("re-measure this patient": φ_I should
carry it)? Do the two views tell the two apart, and point at the right feature?

What holds by construction (reported, not tested as findings). φ_I does not depend on the
calibration set at all, and φ_C does not depend on the patient: a calibration fault leaves every
φ_I exactly unchanged, a patient's mis-recorded value leaves φ_C exactly unchanged. What is
empirical is whether the moved part moves beyond its own noise, at the faulted feature, and
whether one run can see it. One φ_C on its own cannot say whether its calibration set is
representative (a representative set has a non-zero φ_C too): the calibration faults are read
against a reference calibration set, a fresh representative sample of the same size, as a
practitioner would keep one to check a calibration set against (Δφ_C = φ_C(set) − φ_C(reference),
on the same fitted models and background, so only the calibration rows differ).

System (seeded per replicate). Three real features and three pure-noise columns (standard
normal): x_noise ~ N(0, 1) and site_b ~ Bernoulli(0.3) drive the noise, x_mean ~ N(0, 1) the
mean: y = x_mean + σ(x)ε, σ(x) = exp(0.5 x_noise + 0.8 site_b), ε ~ N(0, 1). gbm for f and σ
(normalized family), fitted on 2,000 training rows; the library's background (1,000 rows, tree
tables); exact Shapley; α = 0.1; log units (φ_C one vector for the cohort).

Cells, each over `fault_replicates` seeded replicates (a fresh population draw, fit, reference
set, test cohort of 300 and 50 probe patients per replicate):
* calibration, n = 500: "representative" (control: another clean draw); "covariate shift"
  (site B is 80 % of the rows instead of 30 %: named feature site_b); "label noise" (half of
  the site-B rows get y + 3·N(0, 1): named feature site_b);
* calibration, n = 30: "small n_cal" (a clean draw, too small to pin q̂ down);
* patients (the run's calibration set is the reference): "clean" (control: 50 probe patients
  as recorded); "x_noise mis-recorded" (the probes' x_noise + 3: named x_noise); "x_mean
  mis-recorded" (the probes' x_mean + 3: named x_mean, a mean-only feature; the width does not
  depend on it, so this fault is not expected to show in the interval at all: reported, no rule).

Readings.
* "Recalibrate feature j" fires in a replicate when |Δφ_C,j| exceeds the largest |Δφ_C| of the
  null columns and Δφ_C,j's 90 % interval excludes 0. The interval is the percentile interval of
  Δ over paired calibration-bootstrap replicates (each set resampled on its own seed, 200
  replicates in the full run).
* "Re-measure feature j of this patient" fires when the probe's |φ_I,j| exceeds the 95th
  percentile of |φ_I,j| over the clean test cohort of the same run (the cohort's own scale).
* Small n_cal: the ratio of the median (over real features) φ_C interval width at n = 30 to that
  at the reference (n = 500), and the share of real features whose interval holds 0.

Verdict rule (fixed here, before running):
* (a) each systematic calibration fault (covariate shift, label noise): "recalibrate site_b"
  fires in ≥ 70 % of replicates;
* (b) representative control: "recalibrate" fires for some real feature in ≤ 20 % of replicates;
* (c) small n_cal: the interval-width ratio is ≥ 2 in ≥ 90 % of replicates;
* (d) x_noise mis-recorded: "re-measure x_noise" fires for ≥ 70 % of the probes (mean over
  replicates), and in the clean control "re-measure" fires for some real feature of ≤ 20 % of
  the probes (three features at the 95th percentile each give about 14 %).
"reproduced" when (a)–(d) all hold; "partly reproduced" when (b) and (d) hold and (a) or (c)
holds in part; "not reproduced" otherwise. Every cell is reported, including where a rule fails.

Amendment (2026-12-01, after one replicate run as a pipeline check, before any full run; the
rule is unchanged): the calibration table's rows for the real features other than the named one
are read as mis-localisation ("recalibrate" firing at a feature that is not at fault); the
pipeline check showed covariate shift moving x_mean's φ_C too. Reported, not part of the rule.

Amendment (2026-12-03, after the full run of 2026-12-01; the rule, the cells and their sizes are
unchanged): the setting now runs on the library's comparison of calibration sets
(core.recalibration.compare_calibrations) instead of its own code. Its resampling streams
differ: the reference set resamples on the run's seed's stream 0 (what `explain` uses) and each
cell on a stream of its own (before: seeds 2·s and 2·s + 1, one shared by every cell), and
each set's resamples are paired with the reference's by position after either's refused ones
are dropped from both (before: dropped separately, then truncated). The intervals are the same
percentile intervals of independently resampled sets, so only the bootstrap's draws move; the
tables in docs/results/calibration_faults* were regenerated with this runner.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cpdecomp.core.explainer import Explainer
from cpdecomp.core.recalibration import CalibrationRows, compare_calibrations
from cpdecomp.core.system import ConformalSystem, fit_system
from cpdecomp.core.typing import FloatArray
from experiments.config import FULL, PRIMARY_ALPHA, QUICK, ExperimentConfig
from experiments.resampling import mean_interval, share_interval
from experiments.verdicts import Verdict

Progress = Callable[[str], None]

REAL = ("x_noise", "site_b", "x_mean")
NULLS = ("null_1", "null_2", "null_3")
FEATURES = REAL + NULLS
NOISE_EFFECT = {"x_noise": 0.5, "site_b": 0.8}
SITE_B_SHARE = 0.3
N_TRAIN, N_CAL, N_SMALL, N_COHORT, N_PROBES = 2000, 500, 30, 300, 50
SHIFTED_SITE_B_SHARE = 0.8
LABEL_NOISE_SD = 3.0
MISRECORD = 3.0
INTERVAL_LEVEL = 0.9
COHORT_PERCENTILE = 95

CALIBRATION_CELLS = ("representative", "covariate shift", "label noise", "small n_cal")
CALIBRATION_NAMED = {"covariate shift": "site_b", "label noise": "site_b"}
PATIENT_CELLS = ("clean", "x_noise mis-recorded", "x_mean mis-recorded")
PATIENT_NAMED = {"x_noise mis-recorded": "x_noise", "x_mean mis-recorded": "x_mean"}

FIRES_SHARE, CONTROL_SHARE, WIDTH_RATIO, WIDTH_SHARE = 0.7, 0.2, 2.0, 0.9


@dataclass(frozen=True, eq=False)
class FaultResults:
    calibration: pd.DataFrame
    """Per (calibration cell, feature): Δφ_C, its interval width and the fire share over
    replicates, each with a 95 % interval over replicates."""
    patients: pd.DataFrame
    """Per (patient cell, feature): the probes' |φ_I|, the share where "re-measure" fires, and
    Δφ_C (exactly 0: the calibration set is untouched)."""
    replicates: pd.DataFrame
    """One row per (replicate, cell, feature): the raw numbers the tables summarise."""
    rules: pd.DataFrame
    """The pre-registered rule's parts (a)-(d): value, threshold, held."""
    status: str


def population(rng: np.random.Generator, n: int, site_b_share: float = SITE_B_SHARE
               ) -> tuple[pd.DataFrame, FloatArray]:
    table = pd.DataFrame({
        "x_noise": rng.normal(size=n),
        "site_b": (rng.random(n) < site_b_share).astype(float),
        "x_mean": rng.normal(size=n),
        **{name: rng.normal(size=n) for name in NULLS},
    })
    sigma = np.exp(sum(g * table[f] for f, g in NOISE_EFFECT.items()))
    y = table["x_mean"].to_numpy() + sigma.to_numpy() * rng.normal(size=n)
    return table, y


def calibration_set(cell: str, rng: np.random.Generator) -> tuple[pd.DataFrame, FloatArray]:
    """The cell's calibration rows: a clean draw, or one with the cell's fault."""
    if cell == "covariate shift":
        return population(rng, N_CAL, SHIFTED_SITE_B_SHARE)
    table, y = population(rng, N_SMALL if cell == "small n_cal" else N_CAL)
    if cell == "label noise":
        site_b = np.flatnonzero(table["site_b"].to_numpy() == 1)
        noisy = rng.choice(site_b, size=len(site_b) // 2, replace=False)
        y = y.copy()
        y[noisy] += LABEL_NOISE_SD * rng.normal(size=len(noisy))
    return table, y


def one_replicate(replicate: int, seed: int, bootstrap: int, alpha: float) -> list[dict]:
    rng = np.random.default_rng((seed, 14, replicate))
    run_seed = seed * 1000 + replicate
    train, y_train = population(rng, N_TRAIN)
    fitted = fit_system(train, y_train, list(FEATURES), family="normalized", model="gbm",
                        seed=run_seed)
    # One background and its tables for every calibration set (core.recalibration): the
    # reference's explainer also explains the patient cells.
    explainer = Explainer(fitted.conformalize(*population(rng, N_CAL)), background_size=1000,
                          seed=run_seed)
    sets: dict[str, CalibrationRows | ConformalSystem] = {"reference": explainer.system}
    sets.update({cell: calibration_set(cell, rng) for cell in CALIBRATION_CELLS})
    cohort, _ = population(rng, N_COHORT)
    probes, _ = population(rng, N_PROBES)
    comparison = compare_calibrations(fitted, sets, probes, units="log", alpha=alpha,
                                      calibration_bootstrap=bootstrap, level=INTERVAL_LEVEL,
                                      explainer=explainer)
    reference = comparison.set("reference").decomposition
    ref_phi = reference.calibration[0]
    ref_low, ref_high = reference.calibration_low[0], reference.calibration_high[0]
    rows: list[dict] = []
    for cell in CALIBRATION_CELLS:
        result = comparison.set(cell)
        d = result.decomposition
        phi, low, high = d.calibration[0], d.calibration_low[0], d.calibration_high[0]
        delta, d_low, d_high = result.change[0], result.change_low[0], result.change_high[0]
        null_max = np.max(np.abs(delta[len(REAL):]))
        for j, feature in enumerate(FEATURES):
            rows.append({
                "replicate": replicate, "kind": "calibration", "cell": cell, "feature": feature,
                "phi_c": phi[j], "reference_phi_c": ref_phi[j], "delta_phi_c": delta[j],
                "delta_low": d_low[j], "delta_high": d_high[j],
                "interval_width": high[j] - low[j],
                "reference_interval_width": ref_high[j] - ref_low[j],
                "sign_uncertain": bool(low[j] <= 0 <= high[j]),
                "reference_sign_uncertain": bool(ref_low[j] <= 0 <= ref_high[j]),
                "fires": bool(feature in REAL and abs(delta[j]) > null_max
                              and not d_low[j] <= 0 <= d_high[j]),
            })
    # Patients: the run's calibration set is the reference; the faults are in the probes.
    cohort_phi = explainer.explain(cohort, alpha=alpha, units="log").decomposition.instance
    scale = np.percentile(np.abs(cohort_phi), COHORT_PERCENTILE, axis=0)
    for cell in PATIENT_CELLS:
        shown = probes.copy()
        if cell in PATIENT_NAMED:
            shown[PATIENT_NAMED[cell]] += MISRECORD
        d = explainer.explain(shown, alpha=alpha, units="log").decomposition
        fires = np.abs(d.instance) > scale[None, :]
        for j, feature in enumerate(FEATURES):
            rows.append({
                "replicate": replicate, "kind": "patients", "cell": cell, "feature": feature,
                "abs_phi_i": float(np.mean(np.abs(d.instance[:, j]))),
                "cohort_p95": scale[j],
                "fire_share": float(fires[:, j].mean()),
                "any_real_fire_share": float(fires[:, :len(REAL)].any(axis=1).mean()),
                "delta_phi_c": float(np.max(np.abs(d.calibration[:, j] - ref_phi[j]))),
            })
    return rows


FLAGS = ("fires", "sign_uncertain")
"""Per-replicate yes/no columns: their shares get Wilson intervals."""


def summarise(raw: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    def interval(values: pd.Series) -> dict:
        # The flags' column is object-typed in the raw table (patients' rows have none).
        i = (share_interval(values.astype(bool)) if values.name in FLAGS
             else mean_interval(values.astype(float)))
        return {"estimate": i.estimate, "low": i.low, "high": i.high}

    cal = raw[raw["kind"] == "calibration"]
    out = []
    for (cell, feature), group in cal.groupby(["cell", "feature"], sort=False):
        row = {"cell": cell, "feature": feature, "named": CALIBRATION_NAMED.get(cell) == feature,
               "replicates": len(group)}
        for name in ("delta_phi_c", "fires", "interval_width", "sign_uncertain"):
            row.update({f"{name}_{k}": v for k, v in interval(group[name]).items()})
        row["width_ratio_median"] = float(np.median(group["interval_width"]
                                                    / group["reference_interval_width"]))
        out.append(row)
    calibration = pd.DataFrame(out)
    pat = raw[raw["kind"] == "patients"]
    out = []
    for (cell, feature), group in pat.groupby(["cell", "feature"], sort=False):
        row = {"cell": cell, "feature": feature, "named": PATIENT_NAMED.get(cell) == feature,
               "replicates": len(group),
               "delta_phi_c_max": float(group["delta_phi_c"].max())}
        for name in ("abs_phi_i", "fire_share", "any_real_fire_share"):
            row.update({f"{name}_{k}": v for k, v in interval(group[name]).items()})
        out.append(row)
    return calibration, pd.DataFrame(out)


def width_ratios(raw: pd.DataFrame) -> pd.Series:
    """Per replicate: median real-feature interval width at n = 30 over the reference's."""
    small = raw[(raw["cell"] == "small n_cal") & raw["feature"].isin(REAL)]
    return small.groupby("replicate").apply(
        lambda g: float(np.median(g["interval_width"]) / np.median(g["reference_interval_width"])),
        include_groups=False)


def rules(raw: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    cal = raw[raw["kind"] == "calibration"]
    pat = raw[raw["kind"] == "patients"]
    parts = []
    for cell, named in CALIBRATION_NAMED.items():
        share = float(cal[(cal["cell"] == cell) & (cal["feature"] == named)]["fires"].mean())
        parts.append(("a", f"{cell}: 'recalibrate {named}' fires", share, f"≥ {FIRES_SHARE:.0%}",
                      share >= FIRES_SHARE))
    control = cal[(cal["cell"] == "representative") & cal["feature"].isin(REAL)]
    any_fire = float(control.groupby("replicate")["fires"].any().mean())
    parts.append(("b", "representative: 'recalibrate' fires for some real feature", any_fire,
                  f"≤ {CONTROL_SHARE:.0%}", any_fire <= CONTROL_SHARE))
    ratios = width_ratios(raw)
    share = float((ratios >= WIDTH_RATIO).mean())
    parts.append(("c", f"small n_cal: interval-width ratio ≥ {WIDTH_RATIO:g} (share of "
                  "replicates)", share, f"≥ {WIDTH_SHARE:.0%}", share >= WIDTH_SHARE))
    named = pat[(pat["cell"] == "x_noise mis-recorded") & (pat["feature"] == "x_noise")]
    share = float(named["fire_share"].mean())
    parts.append(("d", "x_noise mis-recorded: 're-measure x_noise' fires (share of probes)",
                  share, f"≥ {FIRES_SHARE:.0%}", share >= FIRES_SHARE))
    clean = pat[(pat["cell"] == "clean") & (pat["feature"] == REAL[0])]
    share = float(clean["any_real_fire_share"].mean())
    parts.append(("d", "clean probes: 're-measure' fires for some real feature", share,
                  f"≤ {CONTROL_SHARE:.0%}", share <= CONTROL_SHARE))
    table = pd.DataFrame(parts, columns=["part", "what", "value", "threshold", "held"])
    held = table.groupby("part")["held"].all()
    if held.all():
        status = "reproduced"
    elif held["b"] and held["d"] and (table[table["part"].isin(["a", "c"])]["held"].any()):
        status = "partly reproduced"
    else:
        status = "not reproduced"
    return table, status


def run(config: ExperimentConfig, seed: int = 0, progress: Progress | None = None
        ) -> FaultResults:
    say = progress or (lambda message: None)
    rows: list[dict] = []
    for replicate in range(config.fault_replicates):
        say(f"calibration faults: replicate {replicate + 1} of {config.fault_replicates}")
        rows += one_replicate(replicate, seed, config.calibration_bootstrap, PRIMARY_ALPHA)
    raw = pd.DataFrame(rows)
    calibration, patients = summarise(raw)
    rule_table, status = rules(raw)
    return FaultResults(calibration, patients, raw, rule_table, status)


CLAIM = "calibration faults: recalibrate or re-measure"


def verdict(results: FaultResults) -> Verdict:
    """The pre-registered rule's outcome, with its parts as evidence."""
    evidence = [f"({p.part}) {p.what}: {p.value:.0%} (needs {p.threshold}) — "
                f"{'held' if p.held else 'failed'}" for p in results.rules.itertuples()]
    evidence.append("by construction, not a finding: a calibration fault leaves φ_I exactly "
                    "unchanged and a patient's mis-recorded value leaves φ_C exactly unchanged; "
                    "Δφ_C is read against a representative reference calibration set")
    return Verdict(CLAIM, results.status, evidence)


def _pct(value: float) -> str:
    return f"{value:.0%}"


def _with_interval(row: pd.Series, name: str, percent: bool = False) -> str:
    if percent:
        return (f"{row[f'{name}_estimate']:.0%} [{row[f'{name}_low']:.0%}, "
                f"{row[f'{name}_high']:.0%}]")
    return (f"{row[f'{name}_estimate']:+.3f} [{row[f'{name}_low']:+.3f}, "
            f"{row[f'{name}_high']:+.3f}]")


def section(results: FaultResults, config: ExperimentConfig) -> str:
    """The markdown section of this setting (summary.md, or its own file)."""
    from experiments.summary import markdown_table

    r = results.replicates
    n = r["replicate"].nunique()
    out = [f"## Calibration faults: recalibrate or re-measure? ({results.status})", "",
           f"Pre-registered in experiments/calibration_faults.py; {n} replicates, α = "
           f"{PRIMARY_ALPHA:g}, normalized family, gbm, exact Shapley, log units; intervals "
           "are 95 % over replicates (Wilson for a share of replicates, t for a mean). φ_I "
           "is exactly unchanged by a calibration fault and φ_C by a patient's mis-recorded "
           "value (by construction); Δφ_C is read "
           "against a representative reference calibration set of the same size.", "",
           "### The rule", "",
           markdown_table(["part", "what", "value", "threshold", "held"],
                          [[p.part, p.what, _pct(p.value), p.threshold, "yes" if p.held else "no"]
                           for p in results.rules.itertuples()]), "",
           "### Calibration cells (Δφ_C = φ_C(set) − φ_C(reference), log units)", "",
           markdown_table(
               ["cell", "feature", "Δφ_C", "'recalibrate' fires", "φ_C interval width",
                "width / reference (median)", "sign uncertain"],
               [[c["cell"], c["feature"] + (" (named)" if c["named"] else ""),
                 _with_interval(c, "delta_phi_c"), _with_interval(c, "fires", percent=True),
                 f"{c['interval_width_estimate']:.3f}", f"{c['width_ratio_median']:.2f}",
                 _with_interval(c, "sign_uncertain", percent=True)]
                for _, c in results.calibration.iterrows()]), "",
           "### Patient cells (probes' φ_I against the clean cohort's 95th percentile)", "",
           markdown_table(
               ["cell", "feature", "mean |φ_I|", "'re-measure' fires", "max |Δφ_C|"],
               [[p["cell"], p["feature"] + (" (named)" if p["named"] else ""),
                 f"{p['abs_phi_i_estimate']:.3f}", _with_interval(p, "fire_share", percent=True),
                 f"{p['delta_phi_c_max']:.1e}"]
                for _, p in results.patients.iterrows()]), ""]
    return "\n".join(out)


TABLES = {"calibration_faults_calibration.csv": "calibration",
          "calibration_faults_patients.csv": "patients",
          "calibration_faults_replicates.csv": "replicates",
          "calibration_faults_rule.csv": "rules"}


def tables(results: FaultResults) -> dict[str, pd.DataFrame]:
    return {name: getattr(results, field) for name, field in TABLES.items()}


def main(argv: list[str] | None = None) -> int:
    """Run this setting alone and write its tables and section (docs/results/)."""
    from experiments.reproduce import write_csv

    parser = argparse.ArgumentParser(prog="python -m experiments.calibration_faults",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    results = run(config, args.seed, lambda m: print(m, file=sys.stderr, flush=True))
    args.out.mkdir(parents=True, exist_ok=True)
    for name, table in tables(results).items():
        write_csv(table, args.out / name)
    (args.out / "calibration_faults.md").write_text(section(results, config), encoding="utf-8")
    print(f"calibration faults: {results.status}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
