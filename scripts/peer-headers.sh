#!/usr/bin/env bash
# Install the include/ directory of the pinned nvidia-nvshmem-cu13 wheel (from PyPI, through
# pip), whose DOCA GPUNetIO device headers the kernels crate compiles with NVRTC to run the
# peers side by side with ibgda (kernels/src/experiments/peers.rs). Nothing of the wheel is
# committed; only its headers are kept (about 2 MB; the wheel is about 180 MB).
#
# Result: target/peers/include/ (nvshmem.h, gpunetio/, non_abi/, ...) and a `.stamp` written
# last. The last line printed on success is that directory. Idempotent.
#
# With --nvcc it also installs the pinned CUDA 13.0 nvcc wheels into target/peers/nvcc/ (about
# 100 MB downloaded): NVSHMEM's IBGDA device path needs nvcc (NVRTC cannot compile it), and
# kernels/src/experiments/peers.rs finds it there (the GPU machine uses its toolkit's nvcc).
# Environment: CARGO_TARGET_DIR (honoured), PYTHON (default python3).
set -euo pipefail

WHEEL="nvidia-nvshmem-cu13==3.8.0"
# Pinned to 13.0.x (the driver 580 of the GPU machine); nvvm pinned too, as the nvcc wheel
# does not pin it.
NVCC_WHEELS=(nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88
    nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85)
with_nvcc=0
for arg in "$@"; do
    case "$arg" in
        --nvcc) with_nvcc=1 ;;
        *) echo "peer-headers.sh: unknown argument $arg (only --nvcc)" >&2; exit 2 ;;
    esac
done

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$repo_root/target}
case "$target_dir" in
    /*) ;;
    *) target_dir="$repo_root/$target_dir" ;;
esac
out_dir=$target_dir/peers
python=${PYTHON:-python3}

if [[ $with_nvcc == 1 ]]; then
    nvcc_dir=$out_dir/nvcc
    if [[ ! -f "$nvcc_dir/.stamp" || "$(cat "$nvcc_dir/.stamp")" != "${NVCC_WHEELS[*]}" ]]; then
        echo "peer-headers.sh: installing ${NVCC_WHEELS[*]} into $nvcc_dir" >&2
        rm -rf "$nvcc_dir"
        "$python" -m pip install --quiet --no-deps --only-binary=:all: --target "$nvcc_dir" \
            "${NVCC_WHEELS[@]}" >&2
        "$nvcc_dir/nvidia/cu13/bin/nvcc" --version >&2
        echo "${NVCC_WHEELS[*]}" > "$nvcc_dir/.stamp"
    fi
fi

if [[ -f "$out_dir/include/.stamp" && "$(cat "$out_dir/include/.stamp")" == "$WHEEL" ]]; then
    echo "$out_dir/include"
    exit 0
fi

echo "peer-headers.sh: installing the headers of $WHEEL into $out_dir/include" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$WHEEL" >&2
wheel=$(ls "$tmp"/nvidia_nvshmem_cu13-3.8.0-*.whl)
"$python" - "$wheel" "$tmp/x" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for n in z.namelist():
        if n.startswith("nvidia/nvshmem/include/"):
            z.extract(n, sys.argv[2])
PY
rm -rf "$out_dir/include"
mkdir -p "$out_dir"
mv "$tmp/x/nvidia/nvshmem/include" "$out_dir/include"
test -f "$out_dir/include/gpunetio/device/doca_gpunetio_dev_verbs_onesided.cuh"
echo "$WHEEL" > "$out_dir/include/.stamp"
echo "$out_dir/include"
