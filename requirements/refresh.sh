#!/usr/bin/env bash
# Writes requirements/image.lock and requirements/tools.lock afresh from pyproject.toml and
# requirements/tools.in: every package at one version, with the sha256 of each of its files.
# Run with Python 3.11 (the image's) on a machine that reaches PyPI; review the diff, commit.
# docs/deployment.md, "Refreshing the lock file".
set -euo pipefail
cd "$(dirname "$0")/.."

# The extras the image installs: the dashboard's (tests/test_container.py checks the lock
# holds them and that the Dockerfile installs nothing else).
EXTRAS=app,postgres,shap,models
PYTHON=${PYTHON:-python3.11}

tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
"$PYTHON" -m venv "$tools"
"$tools/bin/python" -m pip install --quiet "pip-tools>=7.4,<8"
# The machine's own pip settings (a local index, constraints) must not reach the lock.
export PIP_CONFIG_FILE=/dev/null
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_CONSTRAINT
compile=("$tools/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras
         --no-emit-index-url --upgrade)
"${compile[@]}" --extra "$EXTRAS" --output-file requirements/image.lock pyproject.toml
# The tools take the runtime's versions where both need a package, so the two files can be
# given to one `pip download`.
"${compile[@]}" --constraint requirements/image.lock --output-file requirements/tools.lock \
    requirements/tools.in
echo "wrote requirements/image.lock and requirements/tools.lock"
