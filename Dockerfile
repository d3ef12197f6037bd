# The cpdecomp dashboard for a hospital analytics environment: no internet at run time, a
# read-only root filesystem, a tmpfs at /tmp and a volume at /data for the review database.
#   docker run --read-only --tmpfs /tmp:rw,nosuid,nodev,size=2g --cap-drop ALL \
#     --security-opt no-new-privileges -v cpdecomp-reviews:/data -p 127.0.0.1:8501:8501 cpdecomp
# README.md, "Deploying in a hospital", has the settings, sign-in, the reverse proxy, and the
# two builds: online (this base, packages from PyPI) and air-gapped (a Debian base with
# python3 and libgomp1, and the packages as wheels in wheelhouse/).

# Any Debian bookworm image with python3.11 works; without libgomp1 it must reach Debian's
# mirror (below).
ARG BASE_IMAGE=python:3.11.14-slim-bookworm
FROM ${BASE_IMAGE}

# The project's extras the dashboard needs (the one line to change when pyproject.toml's extras
# change). pip warns about, and skips, an extra that pyproject.toml does not define.
ARG CPDECOMP_EXTRAS=app,postgres,shap,models

# Every writable path points into /tmp (tmpfs) or /data (the reviews volume); Streamlit sends no
# usage statistics; Python writes no bytecode into the read-only image. The project lives in a
# virtual environment of its own, so the same steps work on the official Python image and on
# Debian's python3 (whose system site-packages pip refuses to change).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LANG=C.UTF-8 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/tmp \
    CPDECOMP_CACHE_DIR=/tmp/cpdecomp-cache \
    NUMBA_CACHE_DIR=/tmp/numba-cache \
    CPDECOMP_REVIEW_DB=/data/reviews.sqlite3 \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false \
    STREAMLIT_SERVER_HEADLESS=true \
    NUMBA_THREADING_LAYER=omp

# numba's thread-safe OpenMP layer needs the system's libgomp, which the slim image lacks;
# without it numba falls back to its workqueue layer, which aborts the process when two
# dashboard sessions compute at once. NUMBA_THREADING_LAYER=omp makes a missing library fail
# loudly at the first computation instead. A base that has it (the air-gapped one) needs no
# mirror.
RUN if ! dpkg --status libgomp1 >/dev/null 2>&1; then \
        apt-get update \
        && apt-get install -y --no-install-recommends libgomp1=12.2.0-14+deb12u1 \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/venv

WORKDIR /opt/cpdecomp
COPY pyproject.toml README.md ./
# cpdecomp/ holds links to the three folders beside it: the wheel pip builds stores them as the
# one import package cpdecomp (the studies in experiments/ are not part of it).
COPY cpdecomp ./cpdecomp
COPY core ./core
COPY app ./app
COPY sample_data ./sample_data
# The hospital defaults only: secrets (sign-in) are mounted at run time, never baked in.
COPY .streamlit/config.toml ./.streamlit/config.toml

# The same installer as .ci/run (pip from pyproject.toml), without the test extras. With wheels
# in wheelhouse/ (air-gapped: `pip wheel` on a machine with the index, see README.md) pip reads
# only those; with none it asks PyPI. The wheels are mounted for this step, not copied into
# the image. (DL3013 asks for pinned packages: this is the project itself, pinned by its
# pyproject.toml.)
# hadolint ignore=DL3013
RUN --mount=type=bind,source=wheelhouse,target=/opt/wheelhouse \
    set -- /opt/wheelhouse/*.whl \
    && if [ -e "$1" ]; then set -- --no-index --find-links=/opt/wheelhouse; else set --; fi \
    && python -m pip install --no-cache-dir "$@" ".[${CPDECOMP_EXTRAS}]" \
    && rm -rf build ./*.egg-info \
    && mkdir -p /data \
    && chown 10001:10001 /data

USER 10001:10001
EXPOSE 8501
VOLUME ["/data"]

# Python's own HTTP client: the image has no curl or wget.
HEALTHCHECK --interval=30s --timeout=5s --start-period=40s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).read() == b'ok' else 1)"]

CMD ["streamlit", "run", "app/main.py", "--server.port=8501", "--server.address=0.0.0.0"]
