"""cpdecomp.core: split-conformal families, the two games, and their attributions.

The public names are re-exported by the package's front door, `cpdecomp` (cpdecomp/__init__.py);
this module only sets the process-wide switches every computation needs, before the libraries
that read them are loaded.
"""

import os

# Gradient boosting's OpenMP threads spin while they wait for work. When other processes share
# the cores (dashboard sessions, a test runner, a nightly batch) the spinning makes a fit 5-20x
# slower; passive waiting costs nothing measurable when the cores are free. Set before
# scikit-learn loads its OpenMP runtime; an explicit setting by the user wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The tree-table kernels are compiled once and cached beside their source; an installed package
# on a read-only filesystem (a hospital container) cannot write there, and numba then refuses to
# compile at all. Point its cache at the temporary directory in that case.
if "NUMBA_CACHE_DIR" not in os.environ and not os.access(
    os.path.join(os.path.dirname(__file__), "games"), os.W_OK
):
    import tempfile

    os.environ["NUMBA_CACHE_DIR"] = os.path.join(tempfile.gettempdir(),
                                                 f"cpdecomp-numba-{os.getuid()}")
