"""Pure-noise column: is φ_C's sign unsettled, by the calibration bootstrap and the refitting
bootstrap, over refitted runs (fresh data, fresh fit each)?"""
import sys
import time

import numpy as np
import pandas as pd

from cpdecomp import Explainer
from cpdecomp.core.refit import refit_bootstrap
from cpdecomp.core.system import fit_system


def data(rng, n):
    x = rng.normal(size=(n, 3))
    y = x[:, 0] + np.exp(0.5 * x[:, 1]) * rng.normal(size=n)
    return pd.DataFrame(x, columns=["mean", "noise_driver", "pure_noise"]), y

runs, reps = int(sys.argv[1]), int(sys.argv[2])
model = sys.argv[3] if len(sys.argv) > 3 else "gbm"
n_train, n_cal = (int(sys.argv[4]), int(sys.argv[5])) if len(sys.argv) > 5 else (400, 200)
rows = []
t0 = time.time()
for run in range(runs):
    rng = np.random.default_rng((2034, run))
    tr, ytr = data(rng, n_train)
    ca, yca = data(rng, n_cal)
    fitted = fit_system(tr, ytr, family="normalized", model=model, seed=run)
    system = fitted.conformalize(ca, yca)
    ex = Explainer(system, background_size=64, seed=run, background_error=False)
    low, high, _ = ex.calibration_bootstrap("exact", 0.1, 200)
    piv = refit_bootstrap(system, ytr, n_replicates=reps, seed=run)
    q_lo, q_hi = np.quantile(piv.replicates, [0.05, 0.95], axis=0)
    j = 2
    rows.append(dict(run=run, phi_c=piv.estimate[j], cal_low=low[j], cal_high=high[j],
                     pivot_low=piv.low[j], pivot_high=piv.high[j], pct_low=q_lo[j],
                     pct_high=q_hi[j], refused=piv.refused))
    print(run, round(time.time() - t0), rows[-1], flush=True)
f = pd.DataFrame(rows)
for name in ("cal", "pivot", "pct"):
    u = ((f[f"{name}_low"] <= 0) & (f[f"{name}_high"] >= 0)).mean()
    print(name, "unsettled", u)
f.to_csv(sys.argv[6] if len(sys.argv) > 6 else "/tmp/science34/refit_measure.csv", index=False)
