#!/usr/bin/env bash
# The mlx5 backend on the GPU machine (libibverbs and libmlx5 from rdma-core 50, an H200,
# no RDMA device): shows that the backend loads both libraries with every entry point and
# reports the typed "no device" error, and that GPU queue memory exports as DMA-BUF.
#
#   here:  bash scripts/mlx5-gpu.sh build   # prebuilt binaries into .gpu/mlx5/ (no cargo there)
#   there: bash scripts/mlx5-gpu.sh run     # (carry: .gpu) logs under $OUT (or ./gpu-out)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
dir=.gpu/mlx5

executable() { # the test executable cargo reports for the given cargo arguments
    cargo test --release "$@" --no-run 2>&1 | tee /dev/stderr |
        sed -n 's/^ *Executable .*(\(.*\))$/\1/p' | tail -1
}

case "${1:-}" in
build)
    set -e
    git check-ignore -q .gpu/x ||
        echo "note: .gpu/ is not ignored by git; add '/.gpu/' to .git/info/exclude (kernels/README.md)" >&2
    rm -rf "$dir" && mkdir -p "$dir"
    lib=$(executable -p ibgda --features mlx5 --lib)
    nic=$(executable -p ibgda-kernels --test nic_gpu)
    suite=$(executable -p ibgda --features mlx5 --test nic_suite)
    cargo build --release -p ibgda-demo --features mlx5
    cp "$lib" "$dir/mlx5-lib-tests"
    cp "$nic" "$dir/nic-gpu-tests"
    cp "$suite" "$dir/nic-suite"
    cp target/release/ibgda-demo "$dir/ibgda-demo"
    cargo build --release -p ibgda-kernels --features mlx5,test-support --bin ibgda-gpu-bench
    cp target/release/ibgda-gpu-bench "$dir/ibgda-gpu-bench"
    strip "$dir"/*
    ls -l "$dir"
    ;;
run)
    out=${OUT:-gpu-out}
    mkdir -p "$out"
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
        if [[ -e $d/libnvrtc.so.13 ]]; then export IBGDA_NVRTC_DIR=$d; break; fi
    done
    rc=0
    {
        echo "== machine"
        ls /sys/class/infiniband /sys/class/infiniband_verbs 2>&1
        ls -l /usr/lib/x86_64-linux-gnu/libibverbs.so.1* /usr/lib/x86_64-linux-gnu/libmlx5.so.1* 2>&1
        echo "== mlx5 backend unit tests (libraries, entry points, typed no-device path)"
        timeout 60 "$dir/mlx5-lib-tests" --test-threads=1 --nocapture nic::mlx5 || rc=1
        echo "== control-plane suite on the mlx5 backend (every case ignored with the typed reason)"
        IBGDA_NIC=mlx5_0 timeout 60 "$dir/nic-suite" || rc=1
        echo "== ibgda-demo --nic mlx5_0 (expects the typed no-device error, exit 1)"
        timeout 30 "$dir/ibgda-demo" --nic mlx5_0; echo "exit $?"
        echo "== ibgda-gpu-bench --nic mlx5_0 (expects the typed no-device error, exit 2)"
        timeout 30 "$dir/ibgda-gpu-bench" --nic mlx5_0; echo "exit $?"
        echo "== GPU queue memory as DMA-BUF"
        timeout 60 "$dir/nic-gpu-tests" --ignored --nocapture --test-threads=1 || rc=1
    } 2>&1 | tee "$out/mlx5-gpu.log"
    exit $rc
    ;;
*)
    echo "usage: bash scripts/mlx5-gpu.sh build|run" >&2
    exit 2
    ;;
esac
