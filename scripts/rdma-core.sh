#!/usr/bin/env bash
# Fetch, verify and build rdma-core for the mlx5 differential-test oracle
# (crate tests/rdma-core, see its README section in src/lib.rs).
#
# Result: target/rdma-core/<version>/ containing
#   src/     the unpacked upstream source (private provider headers live here)
#   build/   the cmake/ninja build tree (its include/ is what the shim compiles against)
#   lib/     the static, position-independent archives under names of our own, so the
#            system's libmlx5/libibverbs can never be picked by the linker:
#              libibgda_oracle_mlx5.a libibgda_oracle_ibverbs.a
#              libibgda_oracle_rdma_util.a libibgda_oracle_ccan.a
#   .stamp   written last; its presence means the tree above is complete
# The last line printed on success is the absolute path of that directory.
#
# Idempotent: with a complete cache it only checks the stamp and prints the path.
# Environment:
#   IBGDA_RDMA_CORE_DIR  where to put the result (default <repo>/target/rdma-core/56.1)
#   CARGO_TARGET_DIR     honoured for the default location
#   IBGDA_RDMA_CORE_JOBS parallel build jobs (default: number of CPUs)
#
# The source comes from the Debian archive the machine is already configured for: a
# trixie deb-src entry is derived at run time from the existing apt sources (no host name
# is written in this repository), apt verifies the tarball against the signed index, and
# this script additionally pins its SHA-256.
set -euo pipefail

RDMA_CORE_VERSION=56.1
DEBIAN_VERSION=56.1-1
DEBIAN_SUITE=trixie
TARBALL="rdma-core_${RDMA_CORE_VERSION}.orig.tar.gz"
TARBALL_SHA256=63ce7f2baa7242c2dbc76375dac957c420187dd27f8c5e148efc07971ee522a8
BUILD_TARGETS=(lib/statics/libmlx5.a lib/statics/libibverbs.a util/librdma_util.a ccan/libccan.a)
# (archive in the build tree, unique name we copy it to)
ARCHIVES=(
    "lib/statics/libmlx5.a:libibgda_oracle_mlx5.a"
    "lib/statics/libibverbs.a:libibgda_oracle_ibverbs.a"
    "util/librdma_util.a:libibgda_oracle_rdma_util.a"
    "ccan/libccan.a:libibgda_oracle_ccan.a"
)
DEB_PACKAGES=(cmake ninja-build pkg-config python3 libnl-3-dev libnl-route-3-dev libudev-dev gcc)
STAMP_CONTENT="rdma-core ${RDMA_CORE_VERSION} sha256 ${TARBALL_SHA256} targets ${BUILD_TARGETS[*]} pic release static"

die() {
    echo "rdma-core.sh: error: $*" >&2
    exit 1
}
log() {
    echo "rdma-core.sh: $*" >&2
}

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$repo_root/target}
case "$target_dir" in
    /*) ;;
    *) target_dir="$repo_root/$target_dir" ;;
esac
out_dir=${IBGDA_RDMA_CORE_DIR:-$target_dir/rdma-core/$RDMA_CORE_VERSION}
stamp="$out_dir/.stamp"

# ---- fast path: the cache is complete ---------------------------------------------------
cache_complete() {
    [ -f "$stamp" ] || return 1
    [ "$(cat "$stamp")" = "$STAMP_CONTENT" ] || return 1
    local pair
    for pair in "${ARCHIVES[@]}"; do
        [ -s "$out_dir/lib/${pair#*:}" ] || return 1
    done
    [ -f "$out_dir/src/providers/mlx5/mlx5.h" ] || return 1
    [ -f "$out_dir/build/include/infiniband/verbs.h" ] || return 1
    return 0
}
if cache_complete; then
    log "cached build found"
    echo "$out_dir"
    exit 0
fi

# ---- privileges ---------------------------------------------------------------------------
if [ "$(id -u)" -eq 0 ]; then
    as_root() { "$@"; }
elif command -v sudo >/dev/null 2>&1; then
    as_root() { sudo "$@"; }
else
    as_root() { die "need root (or sudo) to run: $*"; }
fi

apt_updated=0
apt_update_once() {
    if [ "$apt_updated" -eq 0 ]; then
        log "apt-get update"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq ||
            die "apt-get update failed"
        apt_updated=1
    fi
}

# ---- 1. build dependencies ------------------------------------------------------------------
command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script supports Debian only"
missing=()
for p in "${DEB_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$p")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing build packages: ${missing[*]}"
    apt_update_once
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
        die "apt-get install ${missing[*]} failed"
fi
for tool in cmake ninja cc; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found after installing build packages"
done

# ---- 2. a trixie deb-src entry derived from the configured Debian archive ----------------
sources_file=/etc/apt/sources.list.d/ibgda-rdma-core-src.sources
find_debian_uri() {
    # The URIs of the first deb822 stanza that serves the main Debian archive, i.e. not
    # the security archive and not a disabled/third-party file. Read at run time only.
    local f uri
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        [ "$f" = "$sources_file" ] && continue
        # Only stanzas whose Suites mention a Debian release name or stable/testing/sid.
        uri=$(awk '
            BEGIN { RS = ""; FS = "\n" }
            {
                uris = ""; suites = ""
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^URIs:/)   { uris = $i;   sub(/^URIs:[ \t]*/, "", uris) }
                    if ($i ~ /^Suites:/) { suites = $i; sub(/^Suites:[ \t]*/, "", suites) }
                }
                if (uris == "" || suites ~ /-security/) next
                if (suites ~ /(^| )(bookworm|trixie|forky|sid|stable|testing|unstable)( |$|-updates)/) {
                    split(uris, u, /[ \t]+/); print u[1]; exit
                }
            }' "$f")
        if [ -n "$uri" ]; then
            echo "$uri"
            return 0
        fi
    done
    return 1
}
ensure_deb_src() {
    local uri keyring
    if [ -f "$sources_file" ]; then
        return 0
    fi
    uri=$(find_debian_uri) ||
        die "no Debian archive found in /etc/apt/sources.list.d/*.sources to derive a $DEBIAN_SUITE deb-src entry from"
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    [ -f "$keyring" ] || die "$keyring missing (package debian-archive-keyring)"
    log "adding a $DEBIAN_SUITE deb-src entry (derived from the configured Debian archive) as $sources_file"
    printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
        "$uri" "$DEBIAN_SUITE" "$keyring" | as_root tee "$sources_file" >/dev/null
    # The index we need is new: force an update even if one already ran.
    apt_updated=0
}

# ---- 3. download and verify the upstream tarball ------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/ibgda-rdma-core.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
# apt downloads as the unprivileged _apt user when it can write the target directory.
if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then
    chown _apt "$work"
fi

ensure_deb_src
index_has_source() {
    # grep -c reads all input (no SIGPIPE under pipefail); exits 1 when nothing matched.
    apt-cache showsrc rdma-core 2>/dev/null | grep -c "^Version: $DEBIAN_VERSION\$" >/dev/null
}
if ! index_has_source; then
    apt_update_once
fi
index_has_source ||
    die "source package rdma-core=$DEBIAN_VERSION not found in the apt index (is the $DEBIAN_SUITE deb-src entry in $sources_file reachable?)"

log "downloading $TARBALL"
(cd "$work" && apt-get source -qq --download-only --tar-only "rdma-core=$DEBIAN_VERSION" >&2) ||
    die "apt-get source --download-only --tar-only rdma-core=$DEBIAN_VERSION failed"
[ -f "$work/$TARBALL" ] || die "apt-get source did not produce $TARBALL"
actual=$(sha256sum "$work/$TARBALL" | awk '{print $1}')
[ "$actual" = "$TARBALL_SHA256" ] ||
    die "SHA-256 mismatch for $TARBALL: expected $TARBALL_SHA256, got $actual"
log "sha256 ok"

# ---- 4. extract, configure, build ---------------------------------------------------------
rm -rf "$out_dir"
mkdir -p "$out_dir"
tar -xzf "$work/$TARBALL" -C "$work"
src_top="$work/rdma-core-$RDMA_CORE_VERSION"
[ -d "$src_top" ] || die "unexpected tarball layout: no rdma-core-$RDMA_CORE_VERSION/ inside"
mv "$src_top" "$out_dir/src"

jobs=${IBGDA_RDMA_CORE_JOBS:-$(nproc 2>/dev/null || echo 2)}
start=$(date +%s)
log "configuring (cmake, Release, static, PIC)"
cmake -S "$out_dir/src" -B "$out_dir/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DENABLE_STATIC=1 \
    -DNO_PYVERBS=1 \
    -DNO_MAN_PAGES=1 \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    >"$out_dir/cmake.log" 2>&1 ||
    { tail -n 40 "$out_dir/cmake.log" >&2; die "cmake configure failed (log: $out_dir/cmake.log)"; }
log "building ${BUILD_TARGETS[*]} with $jobs jobs"
ninja -C "$out_dir/build" -j "$jobs" "${BUILD_TARGETS[@]}" >"$out_dir/ninja.log" 2>&1 ||
    { tail -n 40 "$out_dir/ninja.log" >&2; die "ninja build failed (log: $out_dir/ninja.log)"; }

mkdir -p "$out_dir/lib"
for pair in "${ARCHIVES[@]}"; do
    from="$out_dir/build/${pair%%:*}"
    [ -s "$from" ] || die "expected archive $from was not built"
    cp "$from" "$out_dir/lib/${pair#*:}"
done
[ -f "$out_dir/build/include/infiniband/verbs.h" ] || die "build/include/infiniband/verbs.h missing after build"
printf '%s\n' "$STAMP_CONTENT" >"$stamp"
log "built in $(($(date +%s) - start)) s"
echo "$out_dir"
