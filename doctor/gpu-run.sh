#!/usr/bin/env bash
# Runs ibgda-doctor on the GPU machine (an H200, no RDMA device, rdma-core 50's
# libibverbs.so.1 and libmlx5.so.1 installed). Build here first with doctor/gpu-build.sh,
# then through the device tool:
#   bash doctor/gpu-run.sh   (carry: target/doctor-gpu)
# 1. The host as it is: the table, the JSON report and the exit status (1 there: no RDMA
#    device; the GPU rows run on the real GPU, the NIC side of them is predicted).
# 2. The same with the emulated ConnectX first on the loader path: the GPU probe's NIC
#    steps (a DMA-BUF UMEM of GPU memory, the peer-memory UMEM, the doorbell page mapped
#    into the GPU) then run on the real GPU against the emulator's device. What they
#    report is the emulator's answer (its UAR page is host memory, not a NIC BAR; it maps
#    no DMA-BUF), not a ConnectX's: the run shows that every step ends, bounded, with a row.
# 3. The files the doctor parses, as this host has them ($OUT/facts.txt), to check the
#    parsers' fixtures against a real host.
# 4. The emulator test's cases for the GPU machine (doctor/tests/emulated.rs, `_on_a_gpu`):
#    the GPU rows with the emulator's GPU faults configured ($OUT/gpu-faults.txt).
# Writes everything under $OUT (or ./gpu-out).
set -uo pipefail
shopt -s nullglob
out=${OUT:-gpu-out}
dir=target/doctor-gpu
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader || true
echo "== 1. this host"
timeout 300 "$dir/ibgda-doctor" > "$out/doctor.txt" 2> "$out/doctor.stderr"
echo "exit status: $?" >> "$out/doctor.txt"
cat "$out/doctor.txt"
timeout 300 "$dir/ibgda-doctor" --json > "$out/doctor.json" 2>> "$out/doctor.stderr"
echo "--json exit status: $?"
echo "== 2. with the emulated ConnectX (its answers, not a ConnectX's)"
# libmlx5.so.1 must be a link to the emulator's libibverbs.so.1 (one file, one state),
# whatever the carry did to the link: made again in a directory of our own.
emu=$(mktemp -d)
cp "$dir/emu/libibverbs.so.1" "$emu/"
ln -s libibverbs.so.1 "$emu/libmlx5.so.1"
LD_LIBRARY_PATH="$emu" IBGDA_EMU_QUIET=1 timeout 300 "$dir/ibgda-doctor" \
    > "$out/doctor-emulated.txt" 2> "$out/doctor-emulated.stderr"
echo "exit status: $?" >> "$out/doctor-emulated.txt"
cat "$out/doctor-emulated.txt"
LD_LIBRARY_PATH="$emu" IBGDA_EMU_QUIET=1 timeout 300 "$dir/ibgda-doctor" --json \
    > "$out/doctor-emulated.json" 2>> "$out/doctor-emulated.stderr"
echo "== 3. the files the doctor reads"
{
    for f in /proc/driver/nvidia/version /proc/driver/nvidia/params /proc/cmdline \
        /proc/sys/kernel/osrelease; do
        echo "--- $f"; cat "$f" 2>&1
    done
    echo "--- /proc/modules (nvidia, peer memory, verbs)"
    grep -E '^(nvidia|nv_peer_mem|ib_|mlx5)' /proc/modules 2>&1
    echo "--- ls /proc/driver/nvidia/gpus /sys/class/iommu /sys/class/infiniband /dev/infiniband"
    ls /proc/driver/nvidia/gpus /sys/class/iommu /sys/class/infiniband /dev/infiniband 2>&1
    for g in /proc/driver/nvidia/gpus/*; do
        a=$(basename "$g")
        echo "--- GPU $a: resolved path, numa_node, iommu_group/type"
        readlink -f "/sys/bus/pci/devices/$a" 2>&1
        cat "/sys/bus/pci/devices/$a/numa_node" "/sys/bus/pci/devices/$a/iommu_group/type" 2>&1
    done
    echo "--- id -u"; id -u
} > "$out/facts.txt" 2>&1
cat "$out/facts.txt"
echo "== 4. the GPU rows' faults on the emulated ConnectX (doctor/tests/emulated.rs)"
IBGDA_EMU_LIB_DIR="$emu" IBGDA_DOCTOR_BIN="$dir/ibgda-doctor" timeout 300 "$dir/emulated" _on_a_gpu \
    > "$out/gpu-faults.txt" 2>&1
echo "exit status: $?" >> "$out/gpu-faults.txt"
cat "$out/gpu-faults.txt"
