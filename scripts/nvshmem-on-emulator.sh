#!/usr/bin/env bash
# NVSHMEM's IBGDA transport brought up on the emulated ConnectX, its command stream logged,
# ibgda's control plane run for the same configuration with its own log, and the two
# compared field by field (issue 15, item 5; emu/nvshmem-command-diff.md classifies what
# the comparison shows).
#
#   here:  bash scripts/nvshmem-on-emulator.sh build   # into .gpu/nvshmem (ignored by git)
#          bash scripts/nvshmem-on-emulator.sh check   # shellcheck; the NVSHMEM program
#                                                      # compiled where nvcc and headers are
#   there: bash scripts/nvshmem-on-emulator.sh run     # carry [".gpu/nvshmem"]
#
# The GPU machine has no cargo (build here, carry the folder); it has nvcc 13.0 and a
# Python environment with nvidia-nvshmem-cu13 3.4.5 (NVSHMEM_HOME overrides where its
# include/ and lib/ are looked for), libibverbs, no RDMA device.
#
# run: each step bounded by timeout and announced before it starts; every file lands in
# $OUT (default gpu-out) as soon as its step ends, at most 8 files:
#   summary.txt     each step's command, exit status (124: timed out) and time; the last
#                   command NVSHMEM sent, decoded
#   nvshmem.tgz     nvshmem_init's output with NVSHMEM's INFO log and the emulator's
#                   messages, its command log (nvshmem.log) and that log listed; the same for
#                   a second run forcing the GPU doorbell (NVSHMEM_IBGDA_NIC_HANDLER=gpu)
#   ibgda.tgz       nvshmem_config (ibgda's control plane, the same configuration) with GPU
#                   queue memory over the emulator's GPU build, and with host memory over the
#                   CPU build: outputs and command logs
#   diff.txt        prm_log_diff nvshmem.log ibgda.log (object numbers hidden)
#   diff-all.txt    the same with object numbers
#
# One process is one PE: NVSHMEM creates its DC initiator, DC targets and their CQs, but no
# RC queue pair (it never connects a PE to itself), and one PE posts no WQE through the NIC
# (a PE reaches itself directly). The emulator's fabric lives in one process, so two PEs
# cannot meet on it.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 2
ev=.gpu/nvshmem

build() {
    set -e
    grep -qx '/.gpu/' "$(git rev-parse --git-path info/exclude)" 2>/dev/null ||
        echo '/.gpu/' >> "$(git rev-parse --git-path info/exclude)"
    local target=${CARGO_TARGET_DIR:-$root/target} emu emu_cuda
    rm -rf "$ev" && mkdir -p "$ev/lib" "$ev/emu" "$ev/emu-cuda"
    cargo build --release -p ibgda-kernels --features mlx5 --example nvshmem_config
    cargo build --release -p ibgda --example prm_log_diff
    cp "$target/release/examples/nvshmem_config" "$target/release/examples/prm_log_diff" "$ev/"
    emu="$(bash scripts/build-emulated-nic)"
    emu_cuda="$(IBGDA_EMU_FEATURES=cuda bash scripts/build-emulated-nic)"
    cp "$emu/libibverbs.so.1" "$ev/emu/"
    cp "$emu_cuda/libibverbs.so.1" "$ev/emu-cuda/"
    # The UAR type is only in a log of an emulator that records it.
    for lib in "$ev/emu/libibverbs.so.1" "$ev/emu-cuda/libibverbs.so.1"; do
        if ! grep -qa uar_type "$lib"; then
            echo "nvshmem-on-emulator: $lib does not log UAR types: an older emulator" >&2
            exit 1
        fi
    done
    cp emu/nvshmem/nvshmem_init.cpp "$ev/"
    for l in libnl-3.so.200 libnl-route-3.so.200; do
        if [[ -e /usr/lib/x86_64-linux-gnu/$l ]]; then cp "/usr/lib/x86_64-linux-gnu/$l" "$ev/lib/"; fi
    done
    strip "$ev/nvshmem_config" "$ev/prm_log_diff" "$ev/emu/libibverbs.so.1" \
        "$ev/emu-cuda/libibverbs.so.1"
    du -sh "$ev"
}

# Where the nvidia-nvshmem-cu13 wheel put include/ and lib/ (NVSHMEM_HOME overrides).
nvshmem_home() {
    if [[ -n ${NVSHMEM_HOME:-} ]]; then
        echo "$NVSHMEM_HOME"
        return
    fi
    "${PYTHON:-python3}" - <<'PY' 2>/dev/null
import importlib.util
spec = importlib.util.find_spec("nvidia.nvshmem")
print(list(spec.submodule_search_locations)[0])
PY
}

# The nvcc to use: PATH, the CUDA toolkit, or the wheels of scripts/peer-headers.sh --nvcc.
find_nvcc() {
    local target=${CARGO_TARGET_DIR:-$root/target} c
    for c in "$(command -v nvcc 2>/dev/null)" /usr/local/cuda/bin/nvcc \
        "$target/peers/nvcc/nvidia/cu13/bin/nvcc"; do
        if [[ -n $c && -x $c ]]; then
            echo "$c"
            return
        fi
    done
}

check() {
    local status=0 nvcc home include
    if command -v shellcheck > /dev/null; then
        shellcheck "$root/scripts/nvshmem-on-emulator.sh" && echo "check: shellcheck clean" ||
            status=1
    else
        echo "check: shellcheck is not installed (apt-get install shellcheck): not checked"
    fi
    nvcc=$(find_nvcc)
    home=$(nvshmem_home)
    include=""
    if [[ -n $home && -f $home/include/nvshmem_host.h ]]; then
        include=$home/include
    elif [[ -f ${CARGO_TARGET_DIR:-$root/target}/peers/include/nvshmem_host.h ]]; then
        # The headers scripts/peer-headers.sh installs (those of the pinned 3.8.0 wheel).
        include=${CARGO_TARGET_DIR:-$root/target}/peers/include
    fi
    if [[ -z $nvcc || -z $include ]]; then
        echo "check: cannot compile emu/nvshmem/nvshmem_init.cpp here:" \
            "${nvcc:-no nvcc}, ${include:-no NVSHMEM headers}" \
            "(bash scripts/peer-headers.sh --nvcc installs both); not checked"
        return "$status"
    fi
    local obj
    obj=$(mktemp --suffix=.o)
    if "$nvcc" -c -o "$obj" "$root/emu/nvshmem/nvshmem_init.cpp" -I"$include"; then
        echo "check: nvshmem_init.cpp compiles ($nvcc, $include)"
    else
        echo "check: nvshmem_init.cpp does not compile ($nvcc, $include)"
        status=1
    fi
    rm -f "$obj"
    return "$status"
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
    local out=${OUT:-gpu-out} work summary home nvcc emu emu_cuda
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    work=$(mktemp -d)
    summary="$out/summary.txt"
    if ! ldconfig -p | grep -q 'libnl-route-3.so.200'; then
        export LD_LIBRARY_PATH=$PWD/$ev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
    step() { # name seconds command...: announced, run, logged to $work/<name>.txt, status kept
        local name=$1 limit=$2 start=$SECONDS e
        shift 2
        echo "== $name: $*" | tee -a "$work/$name.txt" "$summary"
        timeout "$limit" "$@" >> "$work/$name.txt" 2>&1
        e=$?
        echo "== $name: exit $e after $((SECONDS - start)) s (124: timed out at $limit s)" |
            tee -a "$work/$name.txt" "$summary"
        return "$e"
    }
    last_command() { # log: the commands it holds, listed; the last one into the summary
        local log=$1 list=$2
        if [[ ! -s $work/$log ]]; then
            echo "   $log: no command logged" | tee -a "$summary"
            return
        fi
        "$ev/prm_log_diff" --list "$work/$log" > "$work/$list" 2>&1
        echo "   $log: $(grep -c . "$work/$list") commands; the last: $(tail -1 "$work/$list")" |
            tee -a "$summary"
    }
    {
        date -u
        nvidia-smi --query-gpu=name,driver_version --format=csv
    } >> "$summary" 2>&1

    home=$(nvshmem_home)
    nvcc=$(find_nvcc)
    local libs=()
    [[ -n $home ]] && libs=("$home"/lib/libnvshmem_host.so*)
    echo "NVSHMEM: ${home:-not found} (${libs[*]:-no libnvshmem_host})" | tee -a "$summary"
    echo "nvcc: ${nvcc:-not found}" | tee -a "$summary"
    if [[ -n $nvcc && -n $home ]]; then
        # nvcc takes no shared library as an input file, and the wheel ships only the
        # versioned name: a link of the usual name in a directory of our own, for -l.
        mkdir -p "$work/link"
        ln -sf "$home/lib/libnvshmem_host.so.3" "$work/link/libnvshmem_host.so"
        step compile 180 "$nvcc" -O1 -o "$work/nvshmem_init" "$ev/nvshmem_init.cpp" \
            -I"$home/include" -L"$work/link" -lnvshmem_host -Xlinker -rpath="$home/lib"
    else
        echo "== compile: skipped (no nvcc or no NVSHMEM)" | tee -a "$summary"
    fi

    emu=$(emulator_dir emu)
    emu_cuda=$(emulator_dir emu-cuda)
    # NVSHMEM 3.4.5: IBGDA is enabled by NVSHMEM_IB_ENABLE_IBGDA; NVSHMEM_REMOTE_TRANSPORT
    # takes ibrc, ucx, libfabric, ibdevx or none (none: no proxy transport besides it).
    # shellcheck disable=SC2054 # NVSHMEM_DEBUG_SUBSYS's value is a comma-separated list
    local -a nvshmem_env=(
        NVSHMEM_REMOTE_TRANSPORT=none
        NVSHMEM_IB_ENABLE_IBGDA=1
        NVSHMEM_HCA_LIST=mlx5_0:1
        NVSHMEM_DISABLE_P2P="${NVSHMEM_DISABLE_P2P:-1}"
        NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=lo
        NVSHMEM_SYMMETRIC_SIZE=256M
        NVSHMEM_DEBUG=INFO
        NVSHMEM_DEBUG_SUBSYS=INIT,TRANSPORT,BOOTSTRAP,MEM
        LD_LIBRARY_PATH="$emu_cuda:$home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    )
    if [[ -x $work/nvshmem_init ]]; then
        # The handler NVSHMEM picks itself (auto), then the GPU doorbell forced: the
        # emulator's UAR page is ordinary memory, which cudaHostRegister with
        # cudaHostRegisterIoMemory may refuse, and NVSHMEM then falls back to a CPU proxy.
        step nvshmem 150 env "${nvshmem_env[@]}" IBGDA_EMU_LOG="$work/nvshmem.log" \
            "$work/nvshmem_init"
        last_command nvshmem.log nvshmem-commands.txt
        step nvshmem-gpu-handler 150 env "${nvshmem_env[@]}" NVSHMEM_IBGDA_NIC_HANDLER=gpu \
            IBGDA_EMU_LOG="$work/nvshmem-gpu-handler.log" "$work/nvshmem_init"
        last_command nvshmem-gpu-handler.log nvshmem-gpu-handler-commands.txt
    fi
    (cd "$work" && tar -czf "$out/nvshmem.tgz" ./*nvshmem* ./compile.txt 2>/dev/null)

    step ibgda 150 env IBGDA_NIC=mlx5_0 IBGDA_EMU_LOG="$work/ibgda.log" \
        LD_LIBRARY_PATH="$emu_cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$ev/nvshmem_config" --placement gpu
    last_command ibgda.log ibgda-commands.txt
    step ibgda-host 60 env IBGDA_NIC=mlx5_0 IBGDA_EMU_LOG="$work/ibgda-host.log" \
        LD_LIBRARY_PATH="$emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$ev/nvshmem_config" --placement host
    last_command ibgda-host.log ibgda-host-commands.txt
    (cd "$work" && tar -czf "$out/ibgda.tgz" ./ibgda* 2>/dev/null)

    local ours=ibgda.log
    [[ -s $work/$ours ]] || ours=ibgda-host.log
    if [[ -s $work/nvshmem.log && -s $work/$ours ]]; then
        step diff 30 "$ev/prm_log_diff" "$work/nvshmem.log" "$work/$ours"
        cp "$work/diff.txt" "$out/diff.txt"
        "$ev/prm_log_diff" --all "$work/nvshmem.log" "$work/$ours" > "$out/diff-all.txt" 2>&1
    else
        echo "== diff: skipped (nvshmem.log or $ours empty)" | tee -a "$summary"
    fi
    local files=("$out"/*)
    echo "files in $out: ${files[*]##*/}"
}

case "${1:-}" in
    build) build ;;
    check) check ;;
    run) run ;;
    *)
        echo "usage: bash scripts/nvshmem-on-emulator.sh build|check|run" >&2
        exit 2
        ;;
esac
