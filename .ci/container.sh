#!/usr/bin/env bash
# CI's container step: builds the hospital image by running the air-gapped build of
# docs/deployment.md word for word (tests/deployment_doc.py reads them), with podman standing in
# for docker, for tests/test_container.py to run. No registry image can be pulled here, so the
# base is the guide's mmdebstrap base, and the build itself runs with no network at all.
#
# Called by .ci/run after its virtual environment exists; also runs alone (as root, with podman,
# runc and mmdebstrap installed): `bash .ci/container.sh`, then
#   CPDECOMP_TEST_IMAGE=localhost/cpdecomp:ci CONTAINERS_CONF=$PWD/.ci/containers.conf \
#     python -m pytest tests/test_container.py
# What the guide's commands make and a later run can reuse is kept in $CPDECOMP_CI_CACHE (the
# machine may be reused): the base (made again once a week, for Debian's security updates),
# its imported image, and the downloaded wheels. podman keeps the build's layers, so a run
# whose lock files did not change rebuilds only the project's own code.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${CPDECOMP_TEST_IMAGE:-localhost/cpdecomp:ci}
CACHE=${CPDECOMP_CI_CACHE:-/var/cache/cpdecomp-ci}
PYTHON=${PYTHON:-python}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/.ci/containers.conf}
BASE_MAX_AGE_DAYS=7

step_started=$SECONDS
step() {
    echo "container step: $1 ($((SECONDS - step_started)) s)"
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
private_folder "$CACHE/wheelhouse"
python_tag=$("$PYTHON" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
if [ "$python_tag" != cp311 ]; then
    echo "the wheels must be downloaded with Python 3.11 (the image's), not $python_tag" >&2
    exit 1
fi
# The guide says python3.11; CI's venv python is that version (checked above).
python3.11() { "$PYTHON" "$@"; }
# docker is podman here. --format docker: an OCI image cannot carry the HEALTHCHECK (the guide
# says to add it with podman); --layers: unchanged steps come from the last run's layers.
docker() {
    if [ "$1" = build ]; then
        shift
        podman build --format docker --layers --pull=never "$@"
    else
        podman "$@"
    fi
}

for name in base.tar cpdecomp.cdx.json; do no_link "$name"; done
if compgen -G "wheelhouse/*.whl" >/dev/null; then
    echo "wheelhouse/ already holds wheels; this step fills it itself: empty it first" >&2
    exit 1
fi
trap 'rm -f wheelhouse/*.whl base.tar' EXIT
previous=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)

mapfile -t commands < <("$PYTHON" tests/deployment_doc.py build)
for command in "${commands[@]}"; do
    case $command in
        *"pip download"*)
            # The wheels of earlier runs first: pip checks each against the lock's hashes and
            # downloads only what is missing.
            cp --link "$CACHE"/wheelhouse/*.whl wheelhouse/ 2>/dev/null || true
            eval "$command"
            cp --link --no-clobber wheelhouse/*.whl "$CACHE/wheelhouse/" 2>/dev/null \
                || cp --no-clobber wheelhouse/*.whl "$CACHE/wheelhouse/"
            step "wheels: $(find wheelhouse -name '*.whl' | wc -l) in wheelhouse/"
            ;;
        mmdebstrap*)
            base_tar=$CACHE/base-$(printf '%s' "$command" | key_of).tar
            no_link "$base_tar"
            if [ ! -s "$base_tar" ] || [ -n "$(find "$base_tar" -maxdepth 0 -mtime +"$BASE_MAX_AGE_DAYS")" ]; then
                eval "$command"
                rm -f "$CACHE"/base-*.tar "$CACHE"/base-*.image
                mv base.tar "$base_tar"
                step "made the Debian base"
            fi
            ln "$base_tar" base.tar 2>/dev/null || cp "$base_tar" base.tar
            ;;
        "docker import"*)
            # Imported once per base: a new import is a new image, and every layer above it
            # would be built again.
            imported=${base_tar%.tar}.image
            base_name=$(read -r -a words <<<"$command"; echo "${words[3]}")
            if [ -s "$imported" ] && [ "$(podman image inspect --format '{{.Id}}' \
                    "$base_name" 2>/dev/null)" = "$(cat "$imported")" ]; then
                continue
            fi
            eval "$command" >/dev/null
            podman image inspect --format '{{.Id}}' "$base_name" >"$imported"
            step "imported the base as $base_name"
            ;;
        *)
            eval "$command"
            step "ran: ${command:0:60}..."
            ;;
    esac
done

built=$(podman image inspect --format '{{.Id}}' cpdecomp)
podman tag "$built" "$IMAGE"
# The layers of this image and their parents; those of the previous image that this one no
# longer uses (its code, or its dependencies after a lock change: 1 GB) go with it. Only this
# step's own images are touched: podman's storage may hold other work.
ancestors() {
    local id=$1
    while [ -n "$id" ]; do
        echo "$id"
        id=$(podman image inspect --format '{{.Parent}}' "$id" 2>/dev/null || true)
    done
}
if [ -n "$previous" ] && [ "$previous" != "$built" ]; then
    kept=$(ancestors "$built")
    old_layers=$(ancestors "$previous")
    podman rmi "$previous" >/dev/null 2>&1 || true  # still used by a container: left alone
    for id in $old_layers; do
        if ! grep -qx "$id" <<<"$kept"; then
            podman rmi "$id" >/dev/null 2>&1 || true  # a parent of something else: kept
        fi
    done
fi
# The SBOM the guide's last command wrote next to the image, for the container test.
mkdir -p out
mv cpdecomp.cdx.json out/cpdecomp.cdx.json
find "$CACHE/wheelhouse" -name '*.whl' -mtime +30 -delete  # wheels no lock has named for a month
echo "container step: built $IMAGE ($(podman image inspect --format '{{.Size}}' "$IMAGE") bytes)"

# Stand-ins for the official postgres and nginx images that deploy/compose.yaml names (no
# registry image can be pulled here), for the compose test: Debian's own packages
# (.ci/standins/), on a base of their own made like the image's.
standins_mirrors=("deb http://deb.debian.org/debian bookworm main"
                  "deb http://deb.debian.org/debian bookworm-updates main"
                  "deb http://deb.debian.org/debian-security bookworm-security main")
standins_tar=$CACHE/standins-$(printf '%s\n' postgresql,nginx "${standins_mirrors[@]}" | key_of).tar
no_link "$standins_tar"
# A directory left by an older version of this step (mmdebstrap reads its output's format from the
# name, and "….tar.partial" made a directory) is made again as a tarball.
if [ ! -f "$standins_tar" ] || [ ! -s "$standins_tar" ] \
        || [ -n "$(find "$standins_tar" -maxdepth 0 -mtime +"$BASE_MAX_AGE_DAYS")" ]; then
    rm -rf "$CACHE"/standins-*.tar "$CACHE"/standins-*.image "$standins_tar.partial"
    mmdebstrap --quiet --format=tar --variant=minbase --include=postgresql,nginx bookworm \
        "$standins_tar.partial" "${standins_mirrors[@]}"
    mv "$standins_tar.partial" "$standins_tar"
    step "made the stand-ins' Debian base"
fi
standins_base=localhost/cpdecomp-ci-standins
if [ ! -s "${standins_tar%.tar}.image" ] || [ "$(podman image inspect --format '{{.Id}}' \
        "$standins_base" 2>/dev/null)" != "$(cat "${standins_tar%.tar}.image")" ]; then
    podman import --quiet "$standins_tar" "$standins_base" >/dev/null
    podman image inspect --format '{{.Id}}' "$standins_base" >"${standins_tar%.tar}.image"
fi
for service in postgres nginx; do
    podman build --quiet --layers --pull=never --network none --build-arg BASE_IMAGE="$standins_base" \
        --file ".ci/standins/$service.Containerfile" --tag "localhost/cpdecomp-ci-$service" \
        .ci/standins >/dev/null
done
step "stand-ins localhost/cpdecomp-ci-postgres and localhost/cpdecomp-ci-nginx"
