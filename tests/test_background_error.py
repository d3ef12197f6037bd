"""The background's Monte Carlo error (issue 34, item 5): on brute-force paths a run reports, by
default, each part's standard error from batches of its own background; it equals a direct
computation on those batches, follows the units, and reaches the JSON and CSV output."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from cli_helpers import run_ok

from cpdecomp import Explainer, system_from_functions
from cpdecomp.core.attribution import build_design
from cpdecomp.core.explainer import BACKGROUND_BATCHES
from cpdecomp.core.games import CalibrationGame, MaskedEvaluator, instance_values
from cpdecomp.core.system import fit_system

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "diabetes.csv"


def normalized_system(n_train: int = 600, n_calibration: int = 200):
    """y = x0 + σ(x)ε with σ = exp(0.4·x1 + 0.3·x2²) (oracle functions: brute force)."""
    rng = np.random.default_rng(5)

    def table(n: int) -> pd.DataFrame:
        return pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                             "c": rng.normal(size=n)})

    def sigma(z: np.ndarray) -> np.ndarray:
        return np.exp(0.4 * z[:, 1] + 0.3 * z[:, 2] ** 2)

    train, cal = table(n_train), table(n_calibration)
    z = cal.to_numpy()
    y = z[:, 0] + sigma(z) * rng.normal(size=n_calibration)
    fitted = system_from_functions("normalized", {"f": lambda x: x[:, 0], "sigma": sigma}, train)
    return fitted.conformalize(cal, y), table(5)


def direct_standard_errors(system, background: np.ndarray, patients: np.ndarray, alpha: float):
    """φ_C, φ_I, φ_T on each interleaved batch of the background, by hand: sd / √K."""
    design = build_design("exact", 3, None, 0)
    components = {name: system.fitted.components[name] for name in system.family.components}
    phi_c, phi_i = [], []
    for k in range(BACKGROUND_BATCHES):
        evaluator = MaskedEvaluator(components, background[k::BACKGROUND_BATCHES])
        game = CalibrationGame.compute(system.family, evaluator, system.calibration_rows,
                                       system.calibration_targets, design.coalitions)
        phi_c.append(design.apply(game.values(alpha)))
        phi_i.append(design.apply(instance_values(system.family, evaluator, patients,
                                                  design.coalitions)))
    c, i = np.array(phi_c), np.array(phi_i)
    t = c[:, None, :] + i
    root = np.sqrt(BACKGROUND_BATCHES)
    return (c.std(axis=0, ddof=1) / root, i.std(axis=0, ddof=1) / root,
            t.std(axis=0, ddof=1) / root)


def test_brute_force_runs_report_the_backgrounds_error_equal_to_a_direct_computation():
    system, patients = normalized_system()
    explainer = Explainer(system, background_size=64, seed=3)
    assert explainer.evaluator.path_of("sigma") == "brute" and explainer.background_error_on()
    rows = system.fitted.encode(patients)
    e = explainer.explain_rows(rows, method="exact", alpha=0.1, units="log")
    d = e.decomposition
    assert e.background_batches == BACKGROUND_BATCHES
    se_c, se_i, se_t = direct_standard_errors(system, explainer.background, rows, 0.1)
    np.testing.assert_allclose(d.calibration_background_se, np.tile(se_c, (len(rows), 1)),
                               rtol=1e-10)
    np.testing.assert_allclose(d.instance_background_se, se_i, rtol=1e-10)
    np.testing.assert_allclose(d.total_background_se, se_t, rtol=1e-10)
    # A background of 64 rows moves these parts visibly: the errors are not zero...
    assert (se_c > 0).all() and (se_i[:, 1:] > 0).all()
    # ...except φ_I of a feature σ ignores (a enters f only): it is 0 on every batch.
    np.testing.assert_array_equal(se_i[:, 0], 0.0)
    # Width units: every error scaled by the patient's own factor, like the parts.
    w = explainer.explain_rows(rows, method="exact", alpha=0.1, units="width").decomposition
    factor = w.instance[:, 1:] / d.instance[:, 1:]
    np.testing.assert_allclose(w.instance_background_se[:, 1:] / d.instance_background_se[:, 1:],
                               factor, rtol=1e-9)


def test_the_error_is_off_where_every_component_has_a_fast_path_unless_asked_for():
    rng = np.random.default_rng(2)
    train = pd.DataFrame({"a": rng.normal(size=300), "b": rng.normal(size=300)})
    cal = pd.DataFrame({"a": rng.normal(size=100), "b": rng.normal(size=100)})
    fitted = fit_system(train, train["a"].to_numpy() + rng.normal(size=300), ["a", "b"],
                        family="absolute", model="linear")
    system = fitted.conformalize(cal, cal["a"].to_numpy() + rng.normal(size=100))
    rows = fitted.encode(cal.iloc[:3])
    off = Explainer(system, background_size=64).explain_rows(rows)
    assert off.background_batches == 0 and off.decomposition.calibration_background_se is None
    on = Explainer(system, background_size=64, background_error=True).explain_rows(rows)
    assert on.background_batches == BACKGROUND_BATCHES
    assert on.decomposition.calibration_background_se is not None


def test_the_errors_reach_the_json_and_csv_output(capsys, tmp_path):
    import jsonschema

    from cpdecomp.core.output import SCHEMA_PATH

    common = ("explain", SAMPLE, "--target", "progression", "--id-column", "patient_id",
              "--model", "linear", "--family", "normalized", "--background", "16",
              "--features", "bmi,bp,s5 ltg", "--masking", "brute")
    out = tmp_path / "explained.json"
    run_ok(capsys, *common, "--out", out)
    document = json.loads(out.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(
        json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    assert list(validator.iter_errors(document)) == []
    assert document["meta"]["background_batches"] == BACKGROUND_BATCHES
    for patient in document["patients"]:
        for f in patient["features"]:
            for part in ("calibration", "instance", "total"):
                assert f[f"{part}_background_se"] >= 0
    csv_out = tmp_path / "explained.csv"
    run_ok(capsys, *common, "--out", csv_out)
    header = csv_out.read_text(encoding="utf-8").splitlines()[0].split(",")
    assert header[-3:] == ["calibration_background_se", "instance_background_se",
                           "total_background_se"]
