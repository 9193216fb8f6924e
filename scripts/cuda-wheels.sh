#!/usr/bin/env bash
# Install the pinned CUDA 13.0 NVRTC and CCCL wheels (from PyPI, through pip) into a
# directory of their own, for the kernels crate's compile and PTX tests (no GPU needed).
#
# Result: target/cuda-wheels/13.0/ holding the wheels' `nvidia/cu13/` tree
#   (lib/libnvrtc.so.13, lib/libnvrtc-builtins.so.13.0, include/nvrtc.h, include/cccl/), and a
#   `.stamp` written last. The last line printed on success is that directory.
#
# Pinned to 13.0.x to match the driver 580 of the GPU machine: newer NVRTC emits a PTX ISA
# that a 13.0 driver refuses.
#
# Idempotent: with a complete install it only checks the stamp and prints the path.
# Environment:
#   IBGDA_CUDA_WHEELS_DIR  where to install (default <repo>/target/cuda-wheels/13.0)
#   CARGO_TARGET_DIR       honoured for the default location
#   PYTHON                 the interpreter whose pip is used (default python3)
set -euo pipefail

NVRTC="nvidia-cuda-nvrtc==13.0.88"
CCCL="nvidia-cuda-cccl==13.0.85"
STAMP_CONTENT="$NVRTC $CCCL"

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$repo_root/target}
case "$target_dir" in
    /*) ;;
    *) target_dir="$repo_root/$target_dir" ;;
esac
out_dir=${IBGDA_CUDA_WHEELS_DIR:-$target_dir/cuda-wheels/13.0}
python=${PYTHON:-python3}

if [[ -f "$out_dir/.stamp" && "$(cat "$out_dir/.stamp")" == "$STAMP_CONTENT" ]]; then
    echo "$out_dir"
    exit 0
fi

echo "cuda-wheels.sh: installing $NVRTC $CCCL into $out_dir" >&2
rm -rf "$out_dir"
mkdir -p "$out_dir"
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --no-compile --root-user-action=ignore --target "$out_dir/site" "$NVRTC" "$CCCL"

cu13="$out_dir/site/nvidia/cu13"
for f in lib/libnvrtc.so.13 lib/libnvrtc-builtins.so.13.0 include/nvrtc.h include/cccl/cuda/std/cstdint; do
    [[ -e "$cu13/$f" ]] || { echo "cuda-wheels.sh: error: $cu13/$f missing after install" >&2; exit 1; }
done
ln -sfn site/nvidia/cu13 "$out_dir/cu13"
echo "$STAMP_CONTENT" > "$out_dir/.stamp"
echo "$out_dir"
