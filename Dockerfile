# The cpdecomp dashboard for a hospital analytics environment: no internet at run time, a
# read-only root filesystem, a tmpfs at /tmp and a volume at /data for the review database.
#   docker run --read-only --tmpfs /tmp:rw,nosuid,nodev,size=2g --cap-drop ALL \
#     --security-opt no-new-privileges -v cpdecomp-reviews:/data -p 127.0.0.1:8501:8501 cpdecomp
# README.md, "Deploying in a hospital", has the settings, sign-in and the reverse proxy.
FROM python:3.11.14-slim-bookworm

# Every writable path points into /tmp (tmpfs) or /data (the reviews volume); Streamlit sends no
# usage statistics; Python writes no bytecode into the read-only image.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
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
# loudly at the first computation instead.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1=12.2.0-14+deb12u1 \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/cpdecomp
COPY pyproject.toml README.md ./
COPY core ./core
COPY app ./app
COPY experiments ./experiments
COPY sample_data ./sample_data
# The hospital defaults only: secrets (sign-in) are mounted at run time, never baked in.
COPY .streamlit/config.toml ./.streamlit/config.toml

# The same installer as .ci/run (pip from pyproject.toml), without the test extras.
RUN python -m pip install --no-cache-dir . \
    && mkdir -p /data \
    && chown 10001:10001 /data

USER 10001:10001
EXPOSE 8501
VOLUME ["/data"]

# Python's own HTTP client: the image has no curl or wget.
HEALTHCHECK --interval=30s --timeout=5s --start-period=40s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).read() == b'ok' else 1)"]

CMD ["streamlit", "run", "app/main.py", "--server.port=8501", "--server.address=0.0.0.0"]
