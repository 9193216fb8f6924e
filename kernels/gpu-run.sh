#!/usr/bin/env bash
# Runs the prebuilt GPU test and benchmark binaries on the GPU machine (no cargo there).
# Build here first (see kernels/README.md), copy into .gpu/, then through the device tool:
#   bash kernels/gpu-run.sh [tests|user|sanitize|bench|profile|softnic|proxy|api|all]   (carry: .gpu)
# user: every kernel loaded at open under lazy loading, the user-kernel example
# (examples/user_kernel) on the CUDA software NIC, and a kernel posting with another
# scope than its descriptor's trapping (in a process of its own: the trap kills the context).
# bench: every experiment of ibgda_kernels::experiments (issue per scope typed vs raw,
# completion scope, message rate, dormant cost), JSON in $OUT/gpu-bench.json, exit 1 when
# a target is missed; then the peers (DOCA) beside ibgda, $OUT/peers.json.
# profile: Nsight Compute on the one-warp cooperative rate kernel (one launch).
# softnic: the CUDA software NIC: (a) the differential streams replayed by the GPU engine,
# (b) GPU producers end to end through the persistent NIC, (c) compute-sanitizer memcheck
# on (a) (small batch; (b) needs two kernels at once, which the sanitizer serializes).
# proxy (not part of all): the CPU proxy and the CPU-assisted doorbell with GPU producers on the software NIC
# (.gpu/proxy-gpu-tests, .gpu/proxy-ptx-tests), compute-sanitizer memcheck on two of them,
# then `ibgda-bench proxy` with GPU producers through bench/gpu-run.sh (needs .gpu/ibgda-bench
# and .gpu/lib as bench/gpu-run.sh says; results.json, proxy-raw.json and plots in
# $OUT/bench-proxy).
# api (not part of all): the device API (.gpu/api-gpu-tests from target/release/deps/api_gpu-*):
# every operation's bytes per thread and per warp for every scope, every memory effect,
# counters and flush on the CUDA software NIC behind the control plane, put_with_signal's
# ordering, the deadline status, a GPU opened beside the running NIC; then the put_signal example and the MoE dispatch/combine
# example (.gpu/put_signal, .gpu/moe: BF16 and --fp8, every byte checked).
# Writes logs and raw numbers under $OUT (or ./gpu-out).
set -uo pipefail
what=${1:-all}
out=${OUT:-gpu-out}
mkdir -p "$out"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    if [[ -e $d/libnvrtc.so.13 ]]; then export IBGDA_NVRTC_DIR=$d; break; fi
done
echo "NVRTC from: ${IBGDA_NVRTC_DIR:-loader path}"
# Producer and sink kernels wait on each other. Gpu::open loads every kernel itself
# (cuFuncLoad) and never touches the environment; run under CUDA's default lazy loading,
# explicitly, so that this is what the runs show.
export CUDA_MODULE_LOADING=LAZY
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
rc=0
t() { timeout "$1" .gpu/gpu-tests --ignored --exact --test-threads=1 --nocapture "$2" 2>&1 | tee -a "$out/gpu-tests.log" | grep -v '^$' || rc=1; }
if [[ $what == tests || $what == all ]]; then
    timeout 120 .gpu/nvrtc-tests --nocapture > "$out/nvrtc-tests.log" 2>&1 || rc=1
    grep "test result" "$out/nvrtc-tests.log"
    t 30 mmio_store_to_device_memory_is_seen_by_another_sm
    t 30 device_built_wqes_equal_the_host_encoder_for_every_shape
    t 40 issue_path_end_to_end_against_the_sink_typed_and_raw
    t 40 cooperative_and_per_thread_publication_deliver_every_payload
    t 30 producers_and_sink_in_one_launch
    t 30 dropped_persistent_kernels_stop
    t 300 safe_scopes_never_let_the_sink_fetch_a_stale_wqe
fi
if [[ $what == user || $what == all ]]; then
    t 30 every_kernel_is_loaded_at_open_whatever_the_loading_mode
    timeout 60 .gpu/user_kernel 2>&1 | tee "$out/user-kernel.log" || rc=1
    grep -q "every byte as expected" "$out/user-kernel.log" || rc=1
    t 30 a_user_kernel_posting_with_another_scope_traps
    # The headers as files (include_dir(), DEP_IBGDA_INCLUDE) with the machine's nvcc.
    nvcc -std=c++17 -arch=sm_90 -I kernels/cuda -cubin -o "$out/user_kernel.cubin" \
        examples/user_kernel/user_kernel.cu > "$out/nvcc-user-kernel.log" 2>&1 \
        && echo "nvcc -I kernels/cuda: user_kernel.cu compiled" || { rc=1; cat "$out/nvcc-user-kernel.log"; }
fi
if [[ $what == bench || $what == bench2 || $what == all ]]; then
    timeout 240 .gpu/ibgda-gpu-bench "$out" 2>&1 | tee "$out/bench.log"
    e=${PIPESTATUS[0]}; [[ $e == 0 ]] || rc=1
    echo "== ibgda-gpu-bench: exit $e (1: a target missed or an experiment failed, see ERROR lines; 2: no GPU or no program)"
    # The peers (DOCA's waits are unbounded: its own process and time limit). The headers
    # come from .gpu/peers/include (the pinned wheel's include/, see kernels/README.md).
    if [[ -d .gpu/cccl ]]; then export IBGDA_CCCL_INCLUDE=$PWD/.gpu/cccl; fi
    if [[ -d .gpu/peers/include ]]; then
        IBGDA_PEER_INCLUDE=$PWD/.gpu/peers/include timeout 90 .gpu/ibgda-gpu-bench --peers "$out" 2>&1 | tee "$out/peers.log"
        e=${PIPESTATUS[0]}; [[ $e == 0 ]] || rc=1
        echo "== ibgda-gpu-bench --peers: exit $e (124: timed out)"
    else
        echo "== peers skipped: no .gpu/peers/include (bash scripts/peer-headers.sh, then copy target/peers/include)"; rc=1
    fi
fi
if [[ $what == profile ]]; then
    # One kernel launch of interest: the one-warp, one-QP cooperative rate run (GpuFence).
    timeout 280 ncu --kernel-name ibgda_bench_rate_selfsink_GpuFence --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
        --section MemoryWorkloadAnalysis --section SourceCounters \
        -o "$out/one-warp" .gpu/ibgda-gpu-bench --one-warp > "$out/profile.log" 2>&1 || rc=1
    ncu --import "$out/one-warp.ncu-rep" --page details > "$out/one-warp-details.txt" 2>&1 || true
    tail -60 "$out/one-warp-details.txt"
fi
if [[ $what == sanitize || $what == all ]]; then
    for tool in memcheck racecheck; do
        for test in device_built_wqes_equal_the_host_encoder_for_every_shape producers_and_sink_in_one_launch; do
            IBGDA_SMALL=1 timeout 70 compute-sanitizer --tool $tool --error-exitcode 9 \
                .gpu/gpu-tests --ignored --exact --test-threads=1 --nocapture $test \
                > "$out/sanitize-$tool-$test.log" 2>&1
            e=$?; [[ $e == 0 ]] || rc=1
            echo "== $tool $test: exit $e"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result|Saved host" "$out/sanitize-$tool-$test.log"
        done
    done
fi
if [[ $what == softnic || $what == all ]]; then
    timeout 120 .gpu/gpu-tests --ignored --test-threads=1 --nocapture cuda_nic_ 2>&1 \
        | tee "$out/softnic-tests.log" | grep -E "^test |test result|GPU engine|engine [0-9]|QP 0x|requests|per-|panicked|SM clock" || rc=1
    grep -q "test result: ok. 2 passed" "$out/softnic-tests.log" || rc=1
    IBGDA_SMALL=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 \
        .gpu/gpu-tests --ignored --exact --test-threads=1 --nocapture cuda_nic_replays_the_differential_streams \
        > "$out/sanitize-memcheck-softnic.log" 2>&1
    e=$?; [[ $e == 0 ]] || rc=1
    echo "== memcheck cuda_nic_replays_the_differential_streams: exit $e"
    grep -E "ERROR SUMMARY|test result|GPU engine" "$out/sanitize-memcheck-softnic.log"
fi
if [[ $what == api ]]; then
    timeout 240 .gpu/api-gpu-tests --ignored --test-threads=1 --nocapture 2>&1 \
        | tee "$out/api-gpu-tests.log" | grep -E "^test |test result|Rust builders|memory effect|never before|control|DEADLINE|beside the running NIC|panicked" || rc=1
    grep -q "test result: ok. 5 passed" "$out/api-gpu-tests.log" || rc=1
    timeout 60 .gpu/put_signal 2>&1 | tee "$out/put-signal.log" || rc=1
    grep -q "then the bytes" "$out/put-signal.log" || rc=1
    for format in "" --fp8; do
        timeout 240 .gpu/moe $format 2>&1 | tee "$out/moe${format:+-fp8}.log" || rc=1
        grep -q "device API / builders" "$out/moe${format:+-fp8}.log" || rc=1
    done
fi
if [[ $what == proxy ]]; then
    # The push golden compares only under CI's pinned NVRTC (tests/ptx/proxy_push.golden),
    # not the machine's: skipped here, run by scripts/test.
    timeout 60 .gpu/proxy-ptx-tests --nocapture --skip a_push_that_finds_room_runs_the_ptx_it_ran_before_ring_deadlines \
        > "$out/proxy-ptx-tests.log" 2>&1 || rc=1
    grep "test result" "$out/proxy-ptx-tests.log"
    timeout 180 .gpu/proxy-gpu-tests --ignored --test-threads=1 --nocapture 2>&1 \
        | tee "$out/proxy-gpu-tests.log" | grep -E "^test |test result|enqueue|probe|assisted|GPU threads|deadline|panicked" || rc=1
    grep -q "test result: ok. 6 passed" "$out/proxy-gpu-tests.log" || rc=1
    for test in tuned_gpu_producers_end_to_end cpu_assisted_doorbell_end_to_end; do
        IBGDA_SMALL=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
            .gpu/proxy-gpu-tests --ignored --exact --test-threads=1 --nocapture $test \
            > "$out/sanitize-memcheck-$test.log" 2>&1
        e=$?; [[ $e == 0 ]] || rc=1
        echo "== memcheck $test: exit $e"; grep -E "ERROR SUMMARY|test result" "$out/sanitize-memcheck-$test.log"
    done
    OUT=$out bash bench/gpu-run.sh proxy || rc=1
fi
exit $rc
