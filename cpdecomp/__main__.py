"""`python -m cpdecomp`: the command line, as the `cpdecomp` console script runs it."""

import sys

from cpdecomp.core.cli import main

sys.exit(main())
