"""Why a pure-noise column gets φ_C > 0 from fitted models (issue 34, item 2's diagnosis).

Same setting as experiments/refit_noise.py (y = x₀ + exp(0.5·x₁)·ε, pure-noise x₂; normalized
family, gbm; training samples seeded (2034, run)), but one large calibration set (2,000 rows,
seed 999), so that what moves φ_C is the training fit and not the calibration sample.

    python experiments/noise_phi_c_bias.py draws N_TRAIN RUNS   # fitted φ_C per training draw
    python experiments/noise_phi_c_bias.py parts RUNS           # x₂'s φ_C: f̂ or σ̂ replaced
    python experiments/noise_phi_c_bias.py population           # true components' φ_C
"""
import sys

import numpy as np
import pandas as pd

from cpdecomp import Explainer, system_from_functions
from cpdecomp.core.system import fit_system

FEATURES = ["mean", "noise_driver", "pure_noise"]


def data(rng, n):
    x = rng.normal(size=(n, 3))
    y = x[:, 0] + np.exp(0.5 * x[:, 1]) * rng.normal(size=n)
    return pd.DataFrame(x, columns=FEATURES), y


def phi_c(system, seed, background_size=64):
    explainer = Explainer(system, background_size=background_size, seed=seed,
                          background_error=False)
    return explainer.design("exact").apply(explainer.calibration_game("exact").values(0.1))


def true_f(z):
    return z[:, 0]


def true_sigma(z):
    return np.exp(0.5 * z[:, 1]) * np.sqrt(2 / np.pi)  # E|y − x₀| given x


def draws(n_train, runs, cal, y_cal):
    out = []
    for run in range(runs):
        train, y_train = data(np.random.default_rng((2034, run)), n_train)
        fitted = fit_system(train, y_train, family="normalized", model="gbm", seed=run)
        out.append(phi_c(fitted.conformalize(cal, y_cal), run))
        print(run, np.round(out[-1], 4), flush=True)
    out = np.array(out)
    print("mean", out.mean(0), "sd", out.std(0), "share > 0", (out > 0).mean(0))


def parts(runs, cal, y_cal):
    for run in range(runs):
        train, y_train = data(np.random.default_rng((2034, run)), 300)
        fitted = fit_system(train, y_train, family="normalized", model="gbm", seed=run)
        f_hat = fitted.components["f"].predictor.predict
        s_hat = fitted.components["sigma"].predictor.predict
        found = {}
        for name, f, s in [("fitted", f_hat, s_hat), ("true f, fitted sigma", true_f, s_hat),
                           ("fitted f, true sigma", f_hat, true_sigma),
                           ("true", true_f, true_sigma)]:
            system = system_from_functions("normalized", {"f": f, "sigma": s}, train)
            found[name] = round(float(phi_c(system.conformalize(cal, y_cal), run)[2]), 4)
        print(run, found, flush=True)


def population():
    found = []
    for seed in range(3):
        cal, y_cal = data(np.random.default_rng((5, seed)), 20000)
        train, _ = data(np.random.default_rng((6, seed)), 4000)
        system = system_from_functions("normalized", {"f": true_f, "sigma": true_sigma}, train)
        found.append(phi_c(system.conformalize(cal, y_cal), seed, background_size=1000))
        print(found[-1], flush=True)
    print("mean", np.mean(found, 0))


if __name__ == "__main__":
    calibration, calibration_targets = data(np.random.default_rng(999), 2000)
    if sys.argv[1] == "draws":
        draws(int(sys.argv[2]), int(sys.argv[3]), calibration, calibration_targets)
    elif sys.argv[1] == "parts":
        parts(int(sys.argv[2]), calibration, calibration_targets)
    else:
        population()
