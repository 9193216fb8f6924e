#!/usr/bin/env bash
# Runs the library's unit tests and the host-queue and software-NIC integration tests
# (none of which needs FFI) under Miri, which checks every memory access, alignment,
# provenance and data race of the code they reach, including the unsafe of `DmaBuffer`,
# `RegisterPage` and the queue memory.
#
#   scripts/miri.sh
#
# Installs the nightly toolchain's miri and rust-src components if missing. Proptest case
# counts are small (PROPTEST_CASES, and `cfg(miri)` in the two heaviest unit tests); the
# inline `sfence`/`dmb` assembly of the host barrier has a `cfg(miri)` path without it.
# Isolation is off because proptest reads the working directory for its regression files.
# Builds go to target/miri so they do not disturb the main build.
#
# Measured on a 2-core machine shared with other builds (load average 5): 144 s with
# target/miri warm (tests 134 s: unit 25, queue_host 14, softnic_completion 8, softnic_dc
# 16, softnic_fence 25, softnic_rdma 47); a cold first run adds the Miri sysroot and the
# dependencies' builds, about 4 minutes there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
    rustup component add --toolchain nightly miri rust-src
fi

export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation}"
export PROPTEST_CASES="${PROPTEST_CASES:-4}"
export CARGO_TARGET_DIR="$root/target/miri"

start=$(date +%s)
cargo +nightly miri setup
# The unit tests of the memory, queue, CQ, ordering, WQE and software-NIC modules.
cargo +nightly miri test -p ibgda --lib -- memory:: queue:: cq:: order:: wqe:: softnic::
# The host queues and the software NIC end to end.
cargo +nightly miri test -p ibgda \
    --test queue_host \
    --test softnic_completion \
    --test softnic_fence \
    --test softnic_dc \
    --test softnic_rdma
echo "miri: done in $(( $(date +%s) - start )) s" >&2
