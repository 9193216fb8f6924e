#!/usr/bin/env bash
# Runs the device-wait tests (kernels/tests/waits_gpu.rs) on the GPU machine, which has no
# cargo: the prebuilt binary .gpu/waits-gpu-tests, every #[ignore]d GPU test one at a
# time, each under a timeout (a wait that hangs fails here instead of hanging the run).
# Build it where cargo is, from the repository root:
#   cargo test --release -p ibgda-kernels --test waits_gpu --no-run
#   mkdir -p .gpu && cp "$(ls -t target/release/deps/waits_gpu-* | grep -v '\.d$' | head -1)" .gpu/waits-gpu-tests
# then, through the device tool (carry: .gpu):  bash kernels/waits-gpu.sh
# Log in $OUT/waits-gpu.log (or ./gpu-out). Exit 0 when every test passed.
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
bin=.gpu/waits-gpu-tests
if [[ ! -x $bin ]]; then
    echo "$bin missing: build it as this script's header says" >&2
    exit 1
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    if [[ -e $d/libnvrtc.so.13 ]]; then export IBGDA_NVRTC_DIR=$d; break; fi
done
echo "NVRTC from: ${IBGDA_NVRTC_DIR:-loader path}"
export CUDA_MODULE_LOADING=LAZY
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rc=0
t() {
    timeout "$1" "$bin" --ignored --exact --test-threads=1 --nocapture "$2" 2>&1 \
        | tee -a "$out/waits-gpu.log" | grep -E '^(test |a |exclusive|shared|quiet|frontier|room|occasional|8 posts|thread)|result|panicked'
    local s=("${PIPESTATUS[@]}")
    [[ ${s[0]} == 0 ]] || { echo "FAILED (status ${s[0]}; 124: timed out): $2"; rc=1; }
}
t 30 every_wait_returns_when_every_completion_comes
t 30 a_dropped_completion_ends_the_exclusive_wait_at_the_queue_pairs_deadline
t 30 a_retry_exceeded_error_ends_the_exclusive_wait_with_its_syndrome
t 40 the_shared_waits_end_at_the_deadline_or_with_the_syndrome
t 30 the_frontier_and_room_waits_end_at_the_deadline
t 30 the_occasional_send_waits_end_at_the_deadline_or_with_the_syndrome
# The device API's signal wait, which takes the communicator's bound (api_gpu.rs), when
# that binary is there too (.gpu/api-gpu-tests, as kernels/gpu-run.sh builds it).
if [[ -x .gpu/api-gpu-tests ]]; then
    timeout 30 .gpu/api-gpu-tests --ignored --exact --test-threads=1 --nocapture \
        a_wait_nothing_ends_returns_the_deadline_status 2>&1 | tee -a "$out/waits-gpu.log" | grep -E 'DEADLINE|result'
    s=("${PIPESTATUS[@]}")
    [[ ${s[0]} == 0 ]] || { echo "FAILED (status ${s[0]}): a_wait_nothing_ends_returns_the_deadline_status"; rc=1; }
fi
echo "waits-gpu: rc=$rc"
exit $rc
