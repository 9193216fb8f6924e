#!/usr/bin/env bash
# Runs the whole benchmark set on the GPU machine from the prebuilt ibgda-bench (no cargo
# there), in two processes with their own time limits:
#   1. `ibgda-bench all`: the CPU experiments (host post vs rdma-core, software NIC), the
#      proxy with GPU producers on software NICs (enqueue per handoff, T x R x B rate,
#      private vs shared probe, CPU-assisted doorbell) and the GPU ones of
#      ibgda_kernels::experiments against the doorbell sink (Table 4 issue per scope typed
#      and raw, completion scope, Table 5 rates and sweeps, dormant cost);
#   2. `ibgda-bench peers --peer doca`, then `--peer nvshmem` (into $OUT/bench/nvshmem):
#      DOCA GPUNetIO's and NVSHMEM's issue loops beside ibgda's, each in a process of its
#      own (the peers' waits are unbounded).
# Writes results.json, gpu-raw.json and proxy-raw.json (raw samples), peers.json,
# peers-raw.json, the PNG and SVG plots and the logs under $OUT/bench (or
# ./gpu-out/bench). About 3 minutes.
#   bash bench/gpu-run.sh proxy   runs only `ibgda-bench proxy` (GPU producers) into
#                                 $OUT/bench-proxy (results.json, proxy-raw.json, plots).
#   bash bench/gpu-run.sh peers   runs only `ibgda-bench peers` into $OUT/bench.
#   bash bench/gpu-run.sh moe     runs only `ibgda-bench moe` (the MoE dispatch and combine,
#                                 device API against builders, BF16 and FP8, over the CUDA
#                                 software NIC) into $OUT/bench-moe (results.json,
#                                 moe-raw.json, moe.png/svg).
#   bash bench/gpu-run.sh one     the GPU path's run in ONE device call (under 7 minutes:
#                                 at most 180 + 210 s): four GPU tests of the sink's checking
#                                 mode (.gpu/gpu-tests: shared and per-warp publication with
#                                 every payload sequence checked; producers and sink in one
#                                 launch; warp-exclusive and block-exclusive queues), then `ibgda-bench gpu`
#                                 (no plots): six files straight in $OUT (nvidia-smi.txt,
#                                 gpu-tests.log, ibgda-bench.log, targets.txt with
#                                 "reached"/"missed" for every target of the GPU path,
#                                 results.json, gpu-raw.json.gz); plots later, here, with
#                                 `ibgda-bench plot`. Build with `bash bench/gpu-build.sh`
#                                 (.gpu/ about 8 MiB), carry [".gpu"].
#
# Build here first (README.md, "Benchmarks"):
#   cargo build --release -p ibgda-bench
#   rm -rf .gpu && mkdir -p .gpu/lib .gpu/peers
#   cp target/release/ibgda-bench .gpu/ && strip .gpu/ibgda-bench
#   cp /usr/lib/x86_64-linux-gnu/libnl-3.so.200 /usr/lib/x86_64-linux-gnu/libnl-route-3.so.200 .gpu/lib/
#   bash scripts/peer-headers.sh && cp -r target/peers/include .gpu/peers/
#   cp -r target/cuda-wheels/13.0/cu13/include/cccl .gpu/cccl
#   cp -rL target/rdma-core/56.1/build/include .gpu/rdma-core-include   (NVSHMEM's mlx5dv.h)
# then, through the device tool with carry [".gpu"]:
#   bash bench/gpu-run.sh
set -uo pipefail
what=${1:-all}
out=${OUT:-gpu-out}/bench
[[ $what == proxy ]] && out=${OUT:-gpu-out}/bench-proxy
[[ $what == moe ]] && out=${OUT:-gpu-out}/bench-moe
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
# CCCL headers for the peer program, where the machine's CUDA has none.
if [[ ! -e /usr/local/cuda/include/cccl/cuda/std/cstdint && -d .gpu/cccl ]]; then
    export IBGDA_CCCL_INCLUDE=$PWD/.gpu/cccl
fi
# rdma-core's headers for NVSHMEM's device path (compiled there with the toolkit's nvcc).
if [[ -d .gpu/rdma-core-include ]]; then
    export IBGDA_RDMA_CORE_INCLUDE=$PWD/.gpu/rdma-core-include
fi
# Producer and sink kernels wait on each other: load kernels eagerly (Gpu::open also sets it).
export CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader \
    | tee "$out/nvidia-smi.txt"
rc=0
if [[ $what == one ]]; then
    # Everything in $OUT itself (the device tool brings back at most 8 files).
    out=${OUT:-gpu-out}
    work=$(mktemp -d)
    mv "${OUT:-gpu-out}/bench/nvidia-smi.txt" "$out/" && rmdir "${OUT:-gpu-out}/bench"
    if [[ -x .gpu/gpu-tests ]]; then
        timeout 180 .gpu/gpu-tests --ignored --test-threads 1 --exact \
            cooperative_and_per_thread_publication_deliver_every_payload \
            producers_and_sink_in_one_launch \
            warp_exclusive_queues_deliver_every_wqe_in_order \
            block_exclusive_queues_deliver_every_wqe_in_order 2>&1 | tee "$out/gpu-tests.log"
        e=${PIPESTATUS[0]}; [[ $e == 0 ]] || rc=1
        echo "== gpu tests: exit $e (124: timed out)"
    else
        echo "== gpu tests skipped: no .gpu/gpu-tests (bash bench/gpu-build.sh)"
        rc=1
    fi
    timeout 210 .gpu/ibgda-bench --no-progress --no-plots --out "$work" gpu 2>&1 | tee "$out/ibgda-bench.log"
    e=${PIPESTATUS[0]}; [[ $e == 0 ]] || rc=1
    echo "== ibgda-bench gpu: exit $e (2: an experiment failed, 124: timed out)"
    grep -E ' goal .* (reached|missed)$' "$out/ibgda-bench.log" > "$out/targets.txt" || true
    echo "== targets: $(grep -c ' reached$' "$out/targets.txt") reached, $(grep -c ' missed$' "$out/targets.txt") missed (in $out/targets.txt)"
    [[ -f $work/results.json ]] && cp "$work/results.json" "$out/"
    [[ -f $work/gpu-raw.json ]] && gzip -c "$work/gpu-raw.json" > "$out/gpu-raw.json.gz"
    rm -rf "$work"
    ls -l "$out"
    exit "$rc"
fi
if [[ $what == proxy ]]; then
    timeout 240 .gpu/ibgda-bench --no-progress --out "$out" proxy 2>&1 | tee "$out/ibgda-bench-proxy.log"
    e=${PIPESTATUS[0]}
    echo "== ibgda-bench proxy: exit $e (2: a row failed or no GPU, 124: timed out)"
    ls -l "$out"
    [[ $e == 0 ]] || exit 1
    exit 0
fi
if [[ $what == moe ]]; then
    timeout 300 .gpu/ibgda-bench --no-progress --out "$out" moe 2>&1 | tee "$out/ibgda-bench-moe.log"
    e=${PIPESTATUS[0]}
    echo "== ibgda-bench moe: exit $e (2: a check failed or the ratio missed its target, 124: timed out)"
    ls -l "$out"
    [[ $e == 0 ]] || exit 1
    exit 0
fi
if [[ $what != peers ]]; then
    timeout 300 .gpu/ibgda-bench --no-progress --out "$out" all 2>&1 | tee "$out/ibgda-bench.log"
    e=${PIPESTATUS[0]}; [[ $e == 0 ]] || rc=1
    echo "== ibgda-bench all: exit $e (2: an experiment failed, 124: timed out)"
fi
if [[ -d .gpu/peers/include ]]; then
    # DOCA, then NVSHMEM in a process of its own: its first launch can block inside the
    # driver, which no wait of ours bounds, and DOCA's figures are written either way.
    IBGDA_PEER_INCLUDE=$PWD/.gpu/peers/include timeout 90 .gpu/ibgda-bench --no-progress --out "$out" peers --peer doca 2>&1 \
        | tee "$out/peers.log"
    e=${PIPESTATUS[0]}; [[ $e == 0 ]] || rc=1
    echo "== ibgda-bench peers --peer doca: exit $e (124: timed out)"
    IBGDA_PEER_INCLUDE=$PWD/.gpu/peers/include timeout 90 .gpu/ibgda-bench --no-progress --out "$out/nvshmem" peers --peer nvshmem 2>&1 \
        | tee "$out/peers-nvshmem.log"
    e=${PIPESTATUS[0]}; [[ $e == 0 ]] || rc=1
    echo "== ibgda-bench peers --peer nvshmem: exit $e (124: timed out)"
else
    echo "== peers skipped: no .gpu/peers/include (bash scripts/peer-headers.sh, then copy target/peers/include)"
    rc=1
fi
ls -l "$out"
exit "$rc"
