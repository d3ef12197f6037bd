#!/usr/bin/env bash
# CI's container step: builds the hospital image from the repository's Dockerfile the way a
# hospital without internet would, for tests/test_container.py to run. The base is made from
# Debian's packages (mmdebstrap; no registry image can be pulled here), the Python packages are
# wheels built on this machine, and the build itself runs with no network at all.
#
# Called by .ci/run after its virtual environment exists; also runs alone (as root, with podman,
# runc and mmdebstrap installed): `bash .ci/container.sh`, then
#   CPDECOMP_TEST_IMAGE=localhost/cpdecomp:ci CONTAINERS_CONF=$PWD/.ci/containers.conf \
#     python -m pytest tests/test_container.py
# The base and the wheels are kept in $CPDECOMP_CI_CACHE between runs (the machine may be
# reused); the project's own code is always built afresh.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${CPDECOMP_TEST_IMAGE:-localhost/cpdecomp:ci}
CACHE=${CPDECOMP_CI_CACHE:-/var/cache/cpdecomp-ci}
PYTHON=${PYTHON:-python}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/.ci/containers.conf}

SUITE=bookworm
# What the air-gapped base needs beyond Debian's minimal system: Python with venv, and the
# OpenMP runtime for numba's thread-safe layer (see the Dockerfile).
BASE_PACKAGES=python3,python3-venv,libgomp1
MIRRORS=("deb http://deb.debian.org/debian $SUITE main"
         "deb http://deb.debian.org/debian $SUITE-updates main"
         "deb http://deb.debian.org/debian-security $SUITE-security main")
# A base older than this is made again, so security updates reach the image.
BASE_MAX_AGE_DAYS=7

step_started=$SECONDS
step() {
    echo "container step: $1 ($((SECONDS - step_started)) s since the last step)"
    step_started=$SECONDS
}

# The cache is a fixed path outside the checkout, so refuse anything another user could have
# planted there: a symbolic link, or a folder that is not ours alone. Wheels or a base from
# someone else would run as code inside the image.
private_folder() {
    local folder=$1
    if [ -L "$folder" ]; then echo "$folder is a symbolic link" >&2; return 1; fi
    mkdir -p -m 700 "$folder"
    if [ "$(stat -c %u "$folder")" != "$(id -u)" ] \
        || [ -n "$(find "$folder" -maxdepth 0 -perm /022)" ]; then
        echo "$folder must belong to $(id -un) and be writable by no one else" >&2
        return 1
    fi
}
no_link() {
    if [ -L "$1" ]; then echo "$1 is a symbolic link" >&2; exit 1; fi
}
key_of() { sha256sum | cut -c 1-16; }

private_folder "$CACHE"

# The base: Debian's minimal system with Python, as a tar, imported as an image. ------------
base_key=$(printf '%s\n' "$SUITE" "$BASE_PACKAGES" "${MIRRORS[@]}" | key_of)
base_tar=$CACHE/base-$base_key.tar
base_image=localhost/cpdecomp-ci-base:$base_key
no_link "$base_tar"
if [ ! -s "$base_tar" ] || [ -n "$(find "$base_tar" -mtime +"$BASE_MAX_AGE_DAYS")" ]; then
    no_link "$CACHE/base-$base_key.partial.tar"
    rm -f "$CACHE/base-$base_key.partial.tar"
    mmdebstrap --quiet --variant=minbase --include="$BASE_PACKAGES" "$SUITE" \
        "$CACHE/base-$base_key.partial.tar" "${MIRRORS[@]}"
    mv "$CACHE/base-$base_key.partial.tar" "$base_tar"
    # The old base may still carry the last image: untag it, and remove it after the build.
    old_base=$(podman image inspect --format '{{.Id}}' "$base_image" 2>/dev/null || true)
    if [ -n "$old_base" ]; then podman untag "$base_image"; fi
    step "made the Debian base $base_tar"
fi
if ! podman image exists "$base_image"; then
    podman import --quiet --change 'CMD ["/bin/bash"]' "$base_tar" "$base_image" >/dev/null
    step "imported it as $base_image"
fi

# The wheels: every package the image installs, for this machine's Python 3.11. ------------
extras=$(sed -n 's/^ARG CPDECOMP_EXTRAS=//p' Dockerfile)
build_requires=$("$PYTHON" -c 'import tomllib; print(" ".join(tomllib.load(open(
    "pyproject.toml", "rb"))["build-system"]["requires"]))')
read -r -a build_requires <<<"$build_requires"
python_tag=$("$PYTHON" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
if [ "$python_tag" != cp311 ]; then
    echo "the wheels must be built with Python 3.11 (the image's), not $python_tag" >&2
    exit 1
fi
wheels_key=$( (cat pyproject.toml; printf '%s\n' "$extras" "$python_tag") | key_of)
wheels=$CACHE/wheels-$wheels_key
no_link "$wheels"
if [ ! -d "$wheels" ]; then
    no_link "$wheels.partial"
    rm -rf "$wheels.partial"
    # Only the project's metadata, in a folder of its own, so `pip wheel` builds nothing in the
    # checkout; its own wheel is left out (the image builds the project from source).
    project=$(mktemp -d)
    cp pyproject.toml README.md "$project/"
    if ! "$PYTHON" -m pip wheel --wheel-dir "$wheels.partial" "$project[$extras]" \
        "${build_requires[@]}" >"$project/pip.log" 2>&1; then
        tail -n 30 "$project/pip.log" >&2
        exit 1
    fi
    rm -rf "$project"
    rm -f "$wheels.partial"/cpdecomp-*.whl
    mv "$wheels.partial" "$wheels"
    step "built the wheels in $wheels"
fi

# The image, from the checkout, with the wheels in wheelhouse/ for the build only. ----------
if compgen -G "wheelhouse/*.whl" >/dev/null; then
    echo "wheelhouse/ already holds wheels; this step fills it itself: empty it first" >&2
    exit 1
fi
trap 'rm -f wheelhouse/*.whl' EXIT
cp --link "$wheels"/*.whl wheelhouse/ 2>/dev/null || cp "$wheels"/*.whl wheelhouse/
previous=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
# --network none: the build reaches nothing, as in a hospital; --format docker: OCI images
# cannot carry the HEALTHCHECK; --layers=false: nothing of the build piles up between runs.
podman build --quiet --format docker --network none --pull=never --layers=false \
    --build-arg BASE_IMAGE="$base_image" --tag "$IMAGE" . >/dev/null
rm -f wheelhouse/*.whl
built=$(podman image inspect --format '{{.Id}}' "$IMAGE")
if [ -n "$previous" ] && [ "$previous" != "$built" ]; then
    podman rmi "$previous" >/dev/null 2>&1 || true  # still used by a container: left alone
fi
if [ -n "${old_base:-}" ]; then podman rmi "$old_base" >/dev/null 2>&1 || true; fi
# What older runs left for other package lists or pyproject.toml versions.
find "$CACHE" -mindepth 1 -maxdepth 1 \( -name 'base-*' ! -name "base-$base_key.tar" \
    -o -name 'wheels-*' ! -name "wheels-$wheels_key" \) -exec rm -rf -- {} +
step "built $IMAGE ($(podman image inspect --format '{{.Size}}' "$IMAGE") bytes)"
