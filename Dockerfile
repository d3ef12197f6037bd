# The cpdecomp dashboard for a hospital analytics environment: no internet at run time, a
# read-only root filesystem, a tmpfs at /tmp and a volume at /data (reviews and caches).
# docs/deployment.md has the commands (online and air-gapped builds, run, compose, Kubernetes,
# Quadlet), the settings and what CI checks; tests/test_container.py follows its commands.
#
# Layers, cheapest to change last: the base and an empty venv; the locked dependencies
# (requirements/image.lock, with hashes); then the project's own wheel and its SBOM. A change
# to the code rebuilds only the last two steps.

# The online build's base, pinned by tag and by the digest of its multi-architecture index.
# The air-gapped build passes a Debian bookworm base of its own (python3, python3-venv and
# libgomp1; docs/deployment.md).
ARG BASE_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

# --- tools: pip and the build backend for the project's wheel, never in the image ----------
FROM ${BASE_IMAGE} AS tools
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
COPY requirements/tools.lock /tmp/tools.lock
# With wheels in wheelhouse/ (air-gapped) pip reads only those; with none it asks PyPI. Either
# way every file must match a hash of the lock file. The folder is mounted, never copied.
RUN --mount=type=bind,source=wheelhouse,target=/opt/wheelhouse \
    set -- /opt/wheelhouse/*.whl \
    && if [ -e "$1" ]; then set -- --no-index --find-links=/opt/wheelhouse; else set --; fi \
    && python3 -m venv /opt/tools \
    && /opt/tools/bin/python -m pip install --no-cache-dir --require-hashes --only-binary=:all: \
        "$@" -r /tmp/tools.lock

# --- wheel: the project itself, built from the checkout -------------------------------------
FROM tools AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
# cpdecomp/ holds links to the three folders beside it: the wheel stores them as the one import
# package cpdecomp (the studies in experiments/ are not part of it).
COPY cpdecomp ./cpdecomp
COPY core ./core
COPY app ./app
COPY sample_data ./sample_data
RUN /opt/tools/bin/python -m pip wheel --no-cache-dir --no-deps --no-build-isolation \
        --no-index --wheel-dir /dist .

# --- the image -------------------------------------------------------------------------------
FROM ${BASE_IMAGE}

# Every writable path is in /tmp (tmpfs) or /data (the volume): the reviews and both caches
# on the volume, so a restart keeps the compiled kernels and the calibration games (a restart's
# first Run took 9.5-13.5x a warm one with them in /tmp). Streamlit sends no usage
# statistics; Python writes no bytecode into the read-only image. The project lives in a
# virtual environment of its own, so the same steps work on the official Python image and on
# Debian's python3 (whose system site-packages pip refuses to change).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/tmp \
    CPDECOMP_REVIEW_DB=/data/reviews.sqlite3 \
    CPDECOMP_CACHE_DIR=/data/cache/calibration \
    CPDECOMP_CACHE_MAX_BYTES=1073741824 \
    NUMBA_CACHE_DIR=/data/cache/numba \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false \
    STREAMLIT_SERVER_HEADLESS=true \
    NUMBA_THREADING_LAYER=omp

# numba's thread-safe OpenMP layer needs the system's libgomp, which the slim image lacks;
# without it numba falls back to its workqueue layer, which aborts the process when two
# dashboard sessions compute at once. NUMBA_THREADING_LAYER=omp makes a missing library fail
# loudly at the first computation instead. A base that has it (the air-gapped one) needs no
# mirror. The venv has no pip: the tools stage installs into it. /data belongs to user 10001
# and group 0, writable by the group: OpenShift runs the image as an arbitrary user in group 0.
RUN if ! dpkg --status libgomp1 >/dev/null 2>&1; then \
        apt-get update \
        && apt-get install -y --no-install-recommends libgomp1=12.2.0-14+deb12u1 \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv --without-pip /opt/venv \
    && mkdir -p /data/cache/calibration /data/cache/numba /opt/cpdecomp/.streamlit \
    && chown -R 10001:0 /data \
    && chmod -R g=u /data

# What the container is and runs: before the installs, so a rebuild does not repeat these
# steps. (USER comes last: the installs run as root.)
WORKDIR /opt/cpdecomp
EXPOSE 8501
VOLUME ["/data"]

# Checks the folders the dashboard writes and runs the app's script in a session of its own
# (app/health.py): Streamlit's own /_stcore/health stayed green while every page failed.
# Python's own HTTP client: the image has no curl or wget.
HEALTHCHECK --interval=30s --timeout=30s --start-period=60s --retries=3 \
    CMD ["python", "-m", "cpdecomp.app.health"]

# The hospital defaults (app/streamlit.toml), the start-up check of the writable folders, and
# the metrics endpoint closed (app/server.py). A secrets.toml is mounted at run time, read-only,
# at /opt/cpdecomp/.streamlit/secrets.toml: never baked in.
CMD ["cpdecomp", "dashboard", "--port", "8501", "--address", "0.0.0.0"]

# pip for the two installs below, never installed: the wheel Python ships for ensurepip,
# run as it is (Debian's python3-venv keeps it in /usr/share/python-wheels, the official
# image under ensurepip/_bundled). Run by /opt/venv's own Python, it installs into the venv.
# (The tools stage is not mounted here: podman 4.3 cannot mount a stage it took from cache.)

# The dependencies, exactly as locked (versions and hashes), before any of the code.
COPY requirements/image.lock requirements/tools.lock /opt/cpdecomp/requirements/
RUN --mount=type=bind,source=wheelhouse,target=/opt/wheelhouse \
    set -- /opt/wheelhouse/*.whl \
    && if [ -e "$1" ]; then set -- --no-index --find-links=/opt/wheelhouse; else set --; fi \
    && for pip_wheel in /usr/share/python-wheels/pip-*.whl \
        /usr/local/lib/python3*/ensurepip/_bundled/pip-*.whl; do \
        if [ -e "$pip_wheel" ]; then break; fi; done \
    && /opt/venv/bin/python "$pip_wheel/pip" install --disable-pip-version-check \
        --no-cache-dir --require-hashes --only-binary=:all: --no-deps "$@" \
        -r /opt/cpdecomp/requirements/image.lock

# The project's wheel (kept: it is what was installed), then the SBOM of everything in the
# venv, made by CycloneDX's own generator (cyclonedx-bom, from requirements/tools.lock, in a
# venv of /tmp removed in the same step). Validating it against the CycloneDX schema takes
# longer than the rest of the step, so tests/test_container.py does that, with CycloneDX's
# own validator.
COPY --from=wheel /dist/ /opt/cpdecomp/dist/
RUN --mount=type=bind,source=wheelhouse,target=/opt/wheelhouse \
    set -- /opt/wheelhouse/*.whl \
    && if [ -e "$1" ]; then set -- --no-index --find-links=/opt/wheelhouse; else set --; fi \
    && for pip_wheel in /usr/share/python-wheels/pip-*.whl \
        /usr/local/lib/python3*/ensurepip/_bundled/pip-*.whl; do \
        if [ -e "$pip_wheel" ]; then break; fi; done \
    && /opt/venv/bin/python "$pip_wheel/pip" install --disable-pip-version-check \
        --no-cache-dir --no-deps --no-index /opt/cpdecomp/dist/cpdecomp-*.whl \
    && python3 -m venv --without-pip /tmp/sbom-tools \
    && /tmp/sbom-tools/bin/python "$pip_wheel/pip" install --disable-pip-version-check \
        --no-cache-dir --no-compile --require-hashes --only-binary=:all: "$@" \
        -r /opt/cpdecomp/requirements/tools.lock \
    && /tmp/sbom-tools/bin/cyclonedx-py environment --no-validate --output-reproducible \
        --of JSON --mc-type application --output-file /opt/cpdecomp/sbom.cdx.json \
        /opt/venv/bin/python \
    && rm -rf /tmp/sbom-tools

USER 10001:0

# What the image is, for the hospital's registry and scanners (the build passes these; they
# come last so a new commit rebuilds nothing above). The SBOM is at /opt/cpdecomp/sbom.cdx.json.
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="cpdecomp" \
      org.opencontainers.image.description="Why is this conformal interval wide? The cpdecomp dashboard" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}"
