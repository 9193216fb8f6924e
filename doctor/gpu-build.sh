#!/usr/bin/env bash
# Builds what doctor/gpu-run.sh runs on the GPU machine (which has no cargo) into
# target/doctor-gpu/: ibgda-doctor and the binary of its emulator test, doctor/tests/
# emulated.rs (stripped), and the emulated ConnectX's libraries in
# emu/ (stripped; libmlx5.so.1 stays a link to libibverbs.so.1, as the emulator needs).
# Then, through the device tool: bash doctor/gpu-run.sh   (carry: target/doctor-gpu)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
cargo build --release -p ibgda-doctor >&2
# The emulator test's binary, for its cases that need a GPU (`_on_a_gpu`).
tests="$(cargo test --release -p ibgda-doctor --test emulated --no-run --message-format=json |
    grep '"kind":\["test"\]' | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)"
emu="$(bash scripts/build-emulated-nic)"
out="$target/doctor-gpu"
rm -rf "$out"
mkdir -p "$out/emu"
strip -o "$out/ibgda-doctor" "$target/release/ibgda-doctor"
strip -o "$out/emulated" "$tests"
strip -o "$out/emu/libibverbs.so.1" "$emu/libibverbs.so.1"
ln -s libibverbs.so.1 "$out/emu/libmlx5.so.1"
du -sh "$out" >&2
echo "$out"
