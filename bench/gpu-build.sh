#!/usr/bin/env bash
# Builds, on this machine (the GPU machine has no cargo), everything `bash bench/gpu-run.sh
# one` needs and puts it under .gpu/ (carried to the device call with carry [".gpu"]):
#   .gpu/ibgda-bench   the benchmark program (stripped)
#   .gpu/gpu-tests     kernels/tests/gpu.rs (stripped): the posting paths' GPU tests
#   .gpu/lib/          libnl, which the rdma-core oracle of `ibgda-bench host-post` links
# With --peers also what `bash bench/gpu-run.sh` (the default, with the peers) needs:
#   .gpu/peers/include, .gpu/cccl, .gpu/rdma-core-include
# Prints the size of .gpu (the device tool carries at most 64 MiB).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
peers=0
[[ ${1:-} == --peers ]] && peers=1
cargo build --release -p ibgda-bench
cargo test --release -p ibgda-kernels --test gpu --no-run
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> "$(git rev-parse --git-path info/exclude)"
rm -rf .gpu && mkdir -p .gpu/lib
cp target/release/ibgda-bench .gpu/
cp "$(ls -t target/release/deps/gpu-* | grep -v '\.d$' | head -1)" .gpu/gpu-tests
strip .gpu/ibgda-bench .gpu/gpu-tests
cp /usr/lib/x86_64-linux-gnu/libnl-3.so.200 /usr/lib/x86_64-linux-gnu/libnl-route-3.so.200 .gpu/lib/
if [[ $peers == 1 ]]; then
    bash scripts/peer-headers.sh
    mkdir -p .gpu/peers
    cp -r target/peers/include .gpu/peers/
    cp -r target/cuda-wheels/13.0/cu13/include/cccl .gpu/cccl
    cp -rL target/rdma-core/56.1/build/include .gpu/rdma-core-include
fi
du -sh .gpu
