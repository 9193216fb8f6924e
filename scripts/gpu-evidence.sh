#!/usr/bin/env bash
# The GPU machine's runs of the bring-up, device-API and emulator work in ONE device call
# (the GPU machine has no cargo: build here, carry the binaries, run there).
#
#   here:  bash scripts/gpu-evidence.sh build   # into .gpu/ev (ignored by git), about 40 MiB
#   there: bash scripts/gpu-evidence.sh run     # carry [".gpu/ev"]; at most 8 files in $OUT
#
# Steps, most needed first, each bounded by its own limit (sized from what it does, and cut
# to what is left of the call's 560 s), each packed into $OUT as soon as its group ends (so
# a call cut short still returns what ran). Every binary says its steps with the seconds
# since it started; a step still running at its bound gets its processes' threads, their
# states and kernel wait channels recorded in its log before it is ended:
#   api.tgz      the device API's GPU tests (api_gpu, --ignored --nocapture), and the proxy
#                test that a ring with a second producer is not handed to the GPU
#   emu.tgz      GPU-placed queues through the control plane on the mlx5 backend over the
#                emulated ConnectX's GPU build: nic_suite_gpu and examples/control_plane_gpu
#   moe.tgz      examples/put_signal, examples/moe (the dispatch/combine example, every
#                byte checked), ibgda-bench moe (DeepEP's low-latency shape)
#   moe-mp.tgz   examples/moe with a process per rank, 2 and 8 processes on this one GPU
#                (CUDA IPC between the processes; every rank's bytes checked, rank 0's
#                verdict and JSON)
#   doctor.tgz   ibgda-doctor on this host as it is, then over the emulated ConnectX
#   waits.tgz    the device waits' deadline tests (kernels/waits-gpu.sh), when built
#   summary.txt  the GPU, its SM clock, each step's exit status and time
#
# IBGDA_EVIDENCE_ONLY="name ..." runs only the steps of those names (e.g. "moe-mp2 moe-mp8"
# for the multi-process run alone), each archive packed with what ran.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
ev=.gpu/ev

executable() { # the test executable cargo reports for the given cargo arguments
    cargo test --release "$@" --no-run 2>&1 | tee /dev/stderr |
        sed -n 's/^ *Executable .*(\(.*\))$/\1/p' | tail -1
}

build() {
    set -e
    grep -qx '/.gpu/' "$(git rev-parse --git-path info/exclude)" 2>/dev/null ||
        echo '/.gpu/' >> "$(git rev-parse --git-path info/exclude)"
    rm -rf "$ev" && mkdir -p "$ev/lib" "$ev/emu" "$ev/emu-cuda"
    cp "$(executable -p ibgda-kernels --test api_gpu)" "$ev/api-gpu-tests"
    cp "$(executable -p ibgda-kernels --features mlx5 --test nic_suite_gpu)" "$ev/nic-suite-gpu"
    cp "$(executable -p ibgda-kernels --test proxy_gpu)" "$ev/proxy-gpu-tests"
    if [[ -f kernels/tests/waits_gpu.rs ]]; then
        cp "$(executable -p ibgda-kernels --test waits_gpu)" "$ev/waits-gpu-tests"
    fi
    cargo build --release -p ibgda-kernels --example put_signal
    cargo build --release -p ibgda-kernels --features test-support --example moe
    cargo build --release -p ibgda-kernels --features mlx5 --example control_plane_gpu
    cargo build --release -p ibgda-bench -p ibgda-doctor
    cp target/release/examples/put_signal target/release/examples/moe \
        target/release/examples/control_plane_gpu \
        target/release/ibgda-bench target/release/ibgda-doctor "$ev/"
    local emu emu_cuda
    emu="$(bash scripts/build-emulated-nic)"
    emu_cuda="$(IBGDA_EMU_FEATURES=cuda bash scripts/build-emulated-nic)"
    cp "$emu/libibverbs.so.1" "$ev/emu/"
    cp "$emu_cuda/libibverbs.so.1" "$ev/emu-cuda/"
    cp /usr/lib/x86_64-linux-gnu/libnl-3.so.200 /usr/lib/x86_64-linux-gnu/libnl-route-3.so.200 "$ev/lib/"
    strip "$ev"/*-tests "$ev"/nic-suite-gpu "$ev"/put_signal "$ev"/moe "$ev"/control_plane_gpu \
        "$ev"/ibgda-bench "$ev"/ibgda-doctor "$ev"/emu/libibverbs.so.1 "$ev"/emu-cuda/libibverbs.so.1
    du -sh "$ev"
}

# An emulator directory of our own: libmlx5.so.1 a link to the emulator's libibverbs.so.1
# (one library, one state), whatever the carry did to links.
emulator_dir() {
    local d
    d=$(mktemp -d)
    cp "$ev/$1/libibverbs.so.1" "$d/"
    ln -s libibverbs.so.1 "$d/libmlx5.so.1"
    echo "$d"
}

run() {
    local out=${OUT:-gpu-out} work summary
    mkdir -p "$out"
    work=$(mktemp -d)
    summary="$out/summary.txt"
    # The device call's 10 minutes: every step's bound is cut to what is left of this, so
    # that the call always ends with its archives packed.
    local deadline=$((SECONDS + ${IBGDA_EVIDENCE_BUDGET_S:-560}))
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
        if [[ -e $d/libnvrtc.so.13 ]]; then export IBGDA_NVRTC_DIR=$d; break; fi
    done
    if ! ldconfig -p | grep -q 'libnl-route-3.so.200'; then
        export LD_LIBRARY_PATH=$PWD/$ev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
    # NVLink multicast off in every process (the multi-process example sets it for its
    # children too).
    export CUDA_MODULE_LOADING=EAGER RUST_BACKTRACE=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
    {
        date -u
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
        nvidia-smi -q -d CLOCK | sed -n '/Clocks$/,/^$/p'
    } > "$summary" 2>&1
    snapshot() { # pgid: every process of the step, its threads' states and wait channels
        echo "== still running at the bound: processes of group $1 (state, kernel wait channel, CPU time)"
        ps -eo pid=,pgid= | awk -v g="$1" '$2 == g { print $1 }' | while read -r p; do
            ps -o pid=,etimes=,args= -p "$p" 2>/dev/null
            ps -L -o tid=,stat=,wchan:32=,time=,comm= -p "$p" 2>/dev/null | sed 's/^/    /'
        done
        nvidia-smi --query-compute-apps=pid,used_memory --format=csv 2>&1
    }
    selected() { # name: whether IBGDA_EVIDENCE_ONLY (step names) leaves it in
        [[ -z ${IBGDA_EVIDENCE_ONLY:-} || " $IBGDA_EVIDENCE_ONLY " == *" $1 "* ]]
    }
    step() { # name seconds command...: runs it in a process group of its own, logs to
        # $work/<name>.log; at its bound, what runs is recorded, then the group ends
        local name=$1 limit=$2 start=$SECONDS e pid left
        shift 2
        selected "$name" || return 0
        left=$((deadline - SECONDS))
        if ((left < 10)); then
            echo "== $name: skipped ($left s left of the call's budget)" |
                tee -a "$work/$name.log" "$summary"
            return
        fi
        ((limit > left)) && limit=$left
        echo "== $name: $* (bound $limit s)" | tee -a "$work/$name.log"
        # A background child of this (non-interactive) shell is in the shell's process
        # group, never its leader, so setsid makes the new group in place (no fork): $! is
        # the command itself and the leader of its group.
        setsid "$@" >> "$work/$name.log" 2>&1 < /dev/null &
        pid=$!
        while kill -0 "$pid" 2>/dev/null && ((SECONDS - start < limit)); do sleep 1; done
        if kill -0 "$pid" 2>/dev/null; then
            snapshot "$pid" >> "$work/$name.log" 2>&1
            kill -TERM -- "-$pid" 2>/dev/null
            sleep 5
            kill -KILL -- "-$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            e=124
        else
            wait "$pid"
            e=$?
        fi
        echo "== $name: exit $e after $((SECONDS - start)) s (124: stopped at its bound, $limit s)" |
            tee -a "$work/$name.log" "$summary"
        nvidia-smi --query-gpu=clocks.sm --format=csv,noheader >> "$summary" 2>&1
    }
    pack() { # archive.tgz files...: packs what a group of steps wrote into $OUT (those
        # that exist: a step left out or skipped wrote nothing)
        local archive=$1 f
        local files=()
        shift
        for f in "$@"; do [[ -e $work/$f ]] && files+=("$f"); done
        ((${#files[@]})) || return 0
        tar -C "$work" -czf "$out/$archive" "${files[@]}" 2>> "$summary"
    }

    # Bounds from what each step does, in the H200 machine's times of 2026-12-02: opening
    # a Gpu with the crate's programs is an NVRTC compile of about 20 s, the device API's
    # test kernels about 3 s per scope, the emulator's CUDA software NIC about 7 s (its
    # kernel alone). Each binary says its steps with the seconds since it started.

    # The device API's GPU tests: one GPU open, 7 scopes compiled once each, then the
    # tests (about 60 s).
    step api 130 "$ev/api-gpu-tests" --ignored --test-threads=1 --nocapture
    # A baseline ring whose producer has a clone is not handed to GPU producers.
    step proxy-owner 40 "$ev/proxy-gpu-tests" --ignored --test-threads=1 --nocapture \
        a_ring_with_another_producer_is_not_handed_to_the_gpu
    pack api.tgz api.log proxy-owner.log

    # GPU-placed queues over the emulated ConnectX's GPU build: each case a process that
    # opens a Gpu (about 20 s; none for the thousand queue pairs) and the emulator's NIC
    # (about 7 s), each under its own 50 s bound, the suite under the sum; the example
    # compiles only its own kernel (about 10 s in all). IBGDA_EMU_TRACE=1: emulator calls
    # that take a second or more are reported, and while they run.
    local emu emu_cuda
    emu_cuda=$(emulator_dir emu-cuda)
    IBGDA_NIC=mlx5_0 IBGDA_REQUIRE_GPU=1 IBGDA_NIC_SUITE_GPU_CASE_TIMEOUT_S=50 IBGDA_EMU_TRACE=1 \
        LD_LIBRARY_PATH="$emu_cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        step nic-suite-gpu 160 "$ev/nic-suite-gpu"
    IBGDA_NIC=mlx5_0 IBGDA_EMU_LOG="$work/control-plane-gpu.commands" IBGDA_EMU_TRACE=1 \
        LD_LIBRARY_PATH="$emu_cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        step control-plane-gpu 45 "$ev/control_plane_gpu"
    pack emu.tgz nic-suite-gpu.log control-plane-gpu.log \
        control-plane-gpu.commands

    # put_signal: a Gpu open and its program (24 s on 2026-12-02); the MoE example and
    # benchmark: a Gpu open, moe.cu, the checked and timed iterations (the benchmark's
    # raw variant ended at its 10 s device deadline after 52 s).
    step put_signal 45 "$ev/put_signal"
    # The example checks the builders' variant first, the benchmark the device API's: a
    # variant that fails in both orders is its own fault, one that fails only second is
    # the restarted NIC's.
    # A full-shape step moves every rank's tokens through the software NIC: the example
    # runs 1 + 3 iterations of each variant, the benchmark 5 + 10 of each, BF16 and FP8
    # (2026-12-03: both variants checked in both orders, then the default 5 + 50 and
    # 5 + 20 ran past 60 and 70 s).
    IBGDA_MOE_RAW_FIRST=1 step moe-example 90 "$ev/moe" --iterations 3 --warmup 1
    selected moe && mkdir -p "$work/moe"
    step moe 250 "$ev/ibgda-bench" --no-progress --no-plots --out "$work/moe" moe --iterations 10
    pack moe.tgz put_signal.log moe-example.log moe.log moe

    # The dispatch/combine with a process per rank, every process on this GPU (CUDA IPC
    # between processes of one GPU; their contexts time-sliced): examples/moe as a parent
    # of 2, then 8, processes of itself over a TCP bootstrap on loopback, NVLink multicast
    # off in each. Each process opens the GPU with the CUDA software NIC's program alone
    # (about 7 s of NVRTC) and compiles moe.cu for a small shape (16 tokens per rank,
    # hidden 512, top-4 of 8 or 32 experts), one checked iteration per variant, 3 timed.
    # The parent kills its children 5 s before the step's bound, so that its verdict is
    # logged.
    local mp_shape=(--tokens 16 --hidden 512 --topk 4 --blocks 2 --iterations 3 --warmup 1
        --timeout-s 40)
    step moe-mp2 60 "$ev/moe" --processes 2 --experts 8 --engines 2 "${mp_shape[@]}" \
        --deadline-s 55 --out "$work/moe-mp2.json"
    step moe-mp8 90 "$ev/moe" --processes 8 --experts 32 --engines 8 "${mp_shape[@]}" \
        --deadline-s 85 --out "$work/moe-mp8.json"
    pack moe-mp.tgz moe-mp2.log moe-mp8.log moe-mp2.json moe-mp8.json

    # ibgda-doctor (about 1 s each).
    emu=$(emulator_dir emu)
    step doctor 10 "$ev/ibgda-doctor"
    if selected doctor; then
        timeout 10 "$ev/ibgda-doctor" --json > "$work/doctor.json" 2>> "$work/doctor.log"
    fi
    IBGDA_EMU_QUIET=1 LD_LIBRARY_PATH="$emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        step doctor-emulated 10 "$ev/ibgda-doctor"
    if selected doctor-emulated; then
        IBGDA_EMU_QUIET=1 LD_LIBRARY_PATH="$emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            timeout 10 "$ev/ibgda-doctor" --json > "$work/doctor-emulated.json" 2>> "$work/doctor-emulated.log"
    fi
    pack doctor.tgz doctor.log doctor.json doctor-emulated.log doctor-emulated.json

    # The device waits (32 s on 2026-12-02).
    if [[ -x $ev/waits-gpu-tests ]]; then
        step waits 60 "$ev/waits-gpu-tests" --ignored --test-threads=1 --nocapture
        pack waits.tgz waits.log
    else
        echo "== waits: not built (no kernels/tests/waits_gpu.rs)" >> "$summary"
    fi
    ls -l "$out" >> "$summary"
}

case "${1:-}" in
build) build ;;
run) run ;;
*)
    echo "usage: bash scripts/gpu-evidence.sh build|run" >&2
    exit 2
    ;;
esac
