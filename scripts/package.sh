#!/usr/bin/env bash
# The two library crates as the registry would get them: both package and verify
# (`cargo publish --dry-run`, ibgda-kernels built against the packaged ibgda), ship no
# benchmark results, logs or scripts, and document with every feature and
# `RUSTDOCFLAGS=-D warnings` (as docs.rs builds them: no CUDA, NIC or installed rdma-core
# needed; the mlx5 feature's verbs shim builds from vendored sources with cmake and
# libclang).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

echo "==> package contents: no results, logs, JSON or scripts"
for crate in ibgda ibgda-kernels; do
    list="$(cargo package --list --allow-dirty -p "$crate" 2>/dev/null)"
    bad="$(grep -E '(^|/)results/|\.log$|\.json$|\.sh$|^scripts/|^\.ci/|^bench/|^fuzz/' <<<"$list" | grep -v '^\.cargo_vcs_info\.json$' || true)"
    if [[ -n "$bad" ]]; then
        echo "$crate would ship:" >&2
        echo "$bad" >&2
        exit 1
    fi
    echo "$crate: $(wc -l <<<"$list") files"
done

echo "==> cargo publish --dry-run -p ibgda -p ibgda-kernels"
# The dry run verifies ibgda-kernels against the packaged ibgda, served by a local registry
# and unpacked into registry/src/-<hash>/. Cargo takes a registry crate of a version it
# has unpacked or built before as unchanged, so an earlier run's copy and build of
# ibgda 0.1.0 would stand in for this checkout's: the verification builds in a target
# directory of its own, whose ibgda artifacts are removed first with the unpacked copies.
verify="$root/target/package-verify"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
rm -rf "$root/target/package" "$cargo_home"/registry/src/-*/ibgda-[0-9]* \
    "$cargo_home"/registry/src/-*/ibgda-kernels-[0-9]* \
    "$verify"/debug/.fingerprint/ibgda-* "$verify"/debug/deps/libibgda-* "$verify"/debug/deps/ibgda-*
# The packaged crates have no tests: the test requirements of scripts/test do not apply.
env -u IBGDA_REQUIRE_NVRTC -u IBGDA_REQUIRE_PEERS -u IBGDA_REQUIRE_ORACLE \
    CARGO_TARGET_DIR="$verify" cargo publish --dry-run --allow-dirty -p ibgda -p ibgda-kernels

echo "==> documentation, every feature, warnings denied"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p ibgda -p ibgda-kernels --all-features
