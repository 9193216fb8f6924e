#!/usr/bin/env bash
# Runs the whole benchmark set on the GPU machine from the prebuilt ibgda-bench (no cargo
# there): the CPU experiments (host post vs rdma-core, software NIC) and the GPU ones
# (Table 4 issue per scope typed and raw, Table 5 posting rates) against the doorbell
# sink, in one run. Writes results.json, the PNG and SVG plots and the log under
# $OUT/bench (or ./gpu-out/bench). Takes well under 5 minutes.
#
# Build here first (README.md, "Benchmarks"):
#   cargo build --release -p ibgda-bench
#   mkdir -p .gpu/lib && cp target/release/ibgda-bench .gpu/ && strip .gpu/ibgda-bench
#   cp /usr/lib/x86_64-linux-gnu/libnl-3.so.200 /usr/lib/x86_64-linux-gnu/libnl-route-3.so.200 .gpu/lib/
# then, through the device tool with carry [".gpu"]:
#   bash bench/gpu-run.sh
set -uo pipefail
out=${OUT:-gpu-out}/bench
mkdir -p "$out"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    if [[ -e $d/libnvrtc.so.13 ]]; then export IBGDA_NVRTC_DIR=$d; break; fi
done
echo "NVRTC from: ${IBGDA_NVRTC_DIR:-loader path}"
# The rdma-core oracle links libnl; use the carried copies only where the system has none.
if ! ldconfig -p | grep -q 'libnl-route-3.so.200'; then
    export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "libnl from .gpu/lib"
fi
# Producer and sink kernels wait on each other: load kernels eagerly (Gpu::open also sets it).
export CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader \
    | tee "$out/nvidia-smi.txt"
timeout 280 .gpu/ibgda-bench --no-progress --out "$out" all 2>&1 | tee "$out/ibgda-bench.log"
rc=${PIPESTATUS[0]}
ls -l "$out"
exit "$rc"
