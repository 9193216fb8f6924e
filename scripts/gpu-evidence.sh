#!/usr/bin/env bash
# The GPU machine's runs of the bring-up, device-API and emulator work in ONE device call
# (the GPU machine has no cargo: build here, carry the binaries, run there).
#
#   here:  bash scripts/gpu-evidence.sh build   # into .gpu/ev (ignored by git), about 40 MiB
#   there: bash scripts/gpu-evidence.sh run     # carry [".gpu/ev"]; at most 8 files in $OUT
#
# Steps, most needed first, each bounded by its own timeout, each packed into $OUT as soon
# as it ends (so a call cut short still returns what ran):
#   api.tgz      the device API's GPU tests (api_gpu, --ignored), examples/put_signal and
#                examples/moe (the dispatch/combine example, every byte checked)
#   moe.tgz      ibgda-bench moe (DeepEP's low-latency shape, device API against builders)
#   doctor.tgz   ibgda-doctor on this host as it is, then over the emulated ConnectX
#   waits.tgz    the device waits' deadline tests (kernels/waits-gpu.sh), when built
#   emu.tgz      GPU-placed queues through the control plane on the mlx5 backend over the
#                emulated ConnectX's GPU build: nic_suite_gpu and examples/control_plane_gpu
#   summary.txt  the GPU, its SM clock, each step's exit status and time
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
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
        if [[ -e $d/libnvrtc.so.13 ]]; then export IBGDA_NVRTC_DIR=$d; break; fi
    done
    if ! ldconfig -p | grep -q 'libnl-route-3.so.200'; then
        export LD_LIBRARY_PATH=$PWD/$ev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
    export CUDA_MODULE_LOADING=EAGER
    {
        date -u
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
        nvidia-smi -q -d CLOCK | sed -n '/Clocks$/,/^$/p'
    } > "$summary" 2>&1
    step() { # name seconds command...: runs it, logs to $work/<name>.log, records the status
        local name=$1 limit=$2 start=$SECONDS e
        shift 2
        echo "== $name: $*" | tee -a "$work/$name.log"
        timeout "$limit" "$@" >> "$work/$name.log" 2>&1
        e=$?
        echo "== $name: exit $e after $((SECONDS - start)) s (124: timed out at $limit s)" |
            tee -a "$work/$name.log" "$summary"
        nvidia-smi --query-gpu=clocks.sm --format=csv,noheader >> "$summary" 2>&1
    }
    pack() { # archive.tgz files...: packs what a group of steps wrote into $OUT
        local archive=$1
        shift
        tar -C "$work" -czf "$out/$archive" "$@" 2>> "$summary"
    }

    step api 75 "$ev/api-gpu-tests" --ignored --test-threads=1
    step put_signal 25 "$ev/put_signal"
    step moe-example 40 "$ev/moe"
    pack api.tgz api.log put_signal.log moe-example.log

    mkdir -p "$work/moe"
    step moe 80 "$ev/ibgda-bench" --no-progress --no-plots --out "$work/moe" moe --iterations 20
    pack moe.tgz moe.log moe

    local emu emu_cuda
    emu=$(emulator_dir emu)
    step doctor 30 "$ev/ibgda-doctor"
    timeout 30 "$ev/ibgda-doctor" --json > "$work/doctor.json" 2>> "$work/doctor.log"
    IBGDA_EMU_QUIET=1 LD_LIBRARY_PATH="$emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        step doctor-emulated 30 "$ev/ibgda-doctor"
    IBGDA_EMU_QUIET=1 LD_LIBRARY_PATH="$emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        timeout 30 "$ev/ibgda-doctor" --json > "$work/doctor-emulated.json" 2>> "$work/doctor-emulated.log"
    pack doctor.tgz doctor.log doctor.json doctor-emulated.log doctor-emulated.json

    if [[ -x $ev/waits-gpu-tests ]]; then
        step waits 60 "$ev/waits-gpu-tests" --ignored --test-threads=1 --nocapture
        pack waits.tgz waits.log
    else
        echo "== waits: not built (no kernels/tests/waits_gpu.rs)" >> "$summary"
    fi

    emu_cuda=$(emulator_dir emu-cuda)
    IBGDA_NIC=mlx5_0 IBGDA_REQUIRE_GPU=1 \
        LD_LIBRARY_PATH="$emu_cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        step nic-suite-gpu 100 "$ev/nic-suite-gpu"
    IBGDA_NIC=mlx5_0 IBGDA_EMU_LOG="$work/control-plane-gpu.commands" \
        LD_LIBRARY_PATH="$emu_cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        step control-plane-gpu 30 "$ev/control_plane_gpu"
    pack emu.tgz nic-suite-gpu.log control-plane-gpu.log \
        $(cd "$work" && ls control-plane-gpu.commands 2>/dev/null)
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
