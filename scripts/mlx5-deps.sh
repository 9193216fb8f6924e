#!/usr/bin/env bash
# What the mlx5 hardware backend (cargo feature `mlx5` of the root crate) needs on a
# Debian machine:
#   build time: cmake and libclang (rdma-mummy-sys builds its loader shim with cmake and
#               generates its bindings with bindgen);
#   run time:   libibverbs1 and ibverbs-providers (libibverbs.so.1 and libmlx5.so.1, loaded
#               with dlopen; the tests check that both load and that a machine without an
#               RDMA device gets the typed "no device" error);
#   tests:      ibverbs-utils (rdma-core's ibv_devinfo, run on the emulated ConnectX).
# Idempotent: installs only what is missing.
set -euo pipefail

PACKAGES=(cmake libclang-dev libibverbs1 ibverbs-providers ibverbs-utils)

die() {
    echo "mlx5-deps.sh: error: $*" >&2
    exit 1
}

if [ "$(id -u)" -eq 0 ]; then
    as_root() { "$@"; }
elif command -v sudo >/dev/null 2>&1; then
    as_root() { sudo "$@"; }
else
    as_root() { die "need root (or sudo) to run: $*"; }
fi

command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script supports Debian only"
missing=()
for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$p")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "mlx5-deps.sh: installing ${missing[*]}" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq || die "apt-get update failed"
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
        die "apt-get install ${missing[*]} failed"
fi
