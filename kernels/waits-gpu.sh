#!/usr/bin/env bash
# Runs the device-wait tests (kernels/tests/waits_gpu.rs) on the GPU machine, which has no
# cargo: the prebuilt binary .gpu/waits-gpu-tests, every #[ignore]d GPU test one after
# another in one process, under a timeout (a wait that hangs fails here instead of
# hanging the run).
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
# One process for every test (they share one opened GPU): each test returns within a few
# seconds (its bounds are 200 ms and 5 s); the timeout ends a run that hangs.
timeout 120 "$bin" --ignored --test-threads=1 --nocapture 2>&1 | tee -a "$out/waits-gpu.log" \
    | grep -E '^test |DEADLINE|-0x15|8 posts|panicked|result'
s=("${PIPESTATUS[@]}")
[[ ${s[0]} == 0 ]] || { echo "FAILED (status ${s[0]}; 124: timed out)"; rc=1; }
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
