"""The conformal system that the child-process tests fit, as source code: a child process runs
these lines, and a test can run the same lines to get the identical (deterministic) system."""

SYSTEM_CODE = """
from cpdecomp import Explainer, fit_system, load_table, split_rows, target_values
table = load_table("sample_data/diabetes.csv")
y = target_values(table, "progression")
features = [c for c in table.columns if c not in ("patient_id", "progression")]
train, calibration, test = split_rows(len(table), (0.5, 0.25, 0.25), seed=0)
system = fit_system(table.iloc[train], y[train], features, family="normalized", model="gbm")
system = system.conformalize(table.iloc[calibration], y[calibration])
patients = table.iloc[test]
"""
