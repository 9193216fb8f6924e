/* bench_dormant.cu: what carrying communication code costs a kernel (section 4.3.2,
 * Figure 9). Two callers with the same launch shape and useful work:
 *   ibgda_dormant_fma     compute: 8 live floats per thread, 8 FMAs per iteration, the
 *                         coefficients a and b given at launch;
 *   ibgda_dormant_stream  streaming: 16 live floats per thread, a float4 x 4 read per
 *                         iteration from the block's own power-of-two part of the buffer
 *                         (block-strided, wrapping within the part).
 * The work is cut into msgs + 1 segments; between two segments thread 0 of the block
 * sends one 8-byte inline RC WRITE on its block's queue (qs[blockIdx.x], the device
 * library's warp-entered occasional send, scope GpuFence) and, when `wait` is set, waits
 * for its completion; the other warps keep computing. Compiled three ways (IBGDA_DORMANT_COMM):
 *   0  no communication code at all (the baseline; msgs must be 0);
 *   1  the device library's send inlined into the caller;
 *   2  the send behind a call (__noinline__), as a separately compiled library would be.
 * With msgs = 0 a variant with the code compiled in measures the dormant cost.
 * clocks: [0] first block start ns (atomicMin, host sets all ones), [1] last block end
 * ns (atomicMax), [2] clock64 and [3] %globaltimer of block 0's thread 0. */
#include "ibgda.cuh"

#ifndef IBGDA_DORMANT_COMM
#define IBGDA_DORMANT_COMM 0
#endif

using namespace ibgda;

#if IBGDA_DORMANT_COMM == 2
#define IBGDA_DORMANT_SEND __noinline__
#else
#define IBGDA_DORMANT_SEND __forceinline__
#endif

/* The call build may cap a caller's registers (launch bounds): the host passes the inlined
 * build's count where ptxas fits the call build under it with no stack and no spills
 * (experiments::dormant::compile_call). */
#if IBGDA_DORMANT_COMM == 2 && defined(IBGDA_DORMANT_FMA_MAXNREG)
#define IBGDA_DORMANT_FMA_BOUND __maxnreg__(IBGDA_DORMANT_FMA_MAXNREG)
#else
#define IBGDA_DORMANT_FMA_BOUND
#endif
#if IBGDA_DORMANT_COMM == 2 && defined(IBGDA_DORMANT_STREAM_MAXNREG)
#define IBGDA_DORMANT_STREAM_BOUND __maxnreg__(IBGDA_DORMANT_STREAM_MAXNREG)
#else
#define IBGDA_DORMANT_STREAM_BOUND
#endif

#if IBGDA_DORMANT_COMM != 0
/* One signaled 8-byte inline WRITE on the block's queue from thread 0; with `wait`, until
 * it completes. Called by every thread of the block together (the device library's
 * warp-entered send: warp 0 posts, the other warps return on a warp-uniform branch), so
 * the caller's code stays convergent. Returns 0 or a negative status (error completion,
 * SPIN_TIMEOUT). */
__device__ IBGDA_DORMANT_SEND int dormant_send(const DeviceQueueDescriptor* qs, u32 wait, u32 segment) {
    /* Computed on the send's branch, not ahead of the caller's loop. */
    const u32 block = occasional::on_branch((u32)blockIdx.x);
    return warp_send_write_inline8<scope::GpuFence>(threadIdx.x == 0, &qs[block], 0x70000000ull + 8ull * block, 0x99u,
                                                    ((u64)block << 32) | segment, wait != 0);
}
#endif

__device__ __forceinline__ void dormant_begin(u64* clocks, u64& t0, long long& c0) {
    __syncthreads();
    t0 = ptx::globaltimer();
    c0 = clock64();
    if (threadIdx.x == 0) atomicMin(&clocks[0], t0);
}

__device__ __forceinline__ void dormant_end(u64* clocks, u64 t0, long long c0, int err, int* status) {
    __syncthreads();
    const u64 t1 = ptx::globaltimer();
    const long long c1 = clock64();
    if (threadIdx.x == 0) atomicMax(&clocks[1], t1);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        clocks[2] = (u64)(c1 - c0);
        clocks[3] = t1 - t0;
    }
    if (err < 0) atomicMin(status, err);
}

/* Segment s of n over [0, iters): [iters * s / n, iters * (s + 1) / n). The host keeps
 * iters * n below 2^32 (32-bit arithmetic: no 64-bit division subroutine in the caller). */
__device__ __forceinline__ u32 segment_bound(u32 iters, u32 s, u32 n) { return iters * s / n; }

/* The loop is issue-bound (8 warps per scheduler, one FMA per cycle), so one instruction
 * more or less per pass moves a build by about 1.5 %: the loop must be the same in all
 * three builds for the difference to be the send's. Measured on the H200 (2026-12-03,
 * SM 1,980 MHz, 0 messages, inlined / call against plain): coefficients as literals,
 * ptxas re-materialized one inside the loop with an ALU MOV (stall 2) in the plain build
 * and an IMAD.MOV (stall 1) in the others: -1.4 / -1.6 %; coefficients from the launch,
 * unrolled 8 times, a VIADD in place of the plain build's IADD3 in the builds with the
 * send: +4.0 / +3.4 %. Unrolled further, the loop control is the same in the three
 * builds, and what is left is ptxas's register banks and operand reuse around it: +1.1 /
 * +1.1 % at 10 (one FMA of the builds with the send lost its operand reuse), +3.1 / +2.6 %
 * at 12, +0.8 / +0.8 % at 14 (two runs each, the same on both). 14 it is: 112 FMAs per
 * pass, so one lost cycle costs under 1 %. */
extern "C" __global__ void IBGDA_DORMANT_FMA_BOUND ibgda_dormant_fma(float* out, float a, float b, u32 iters, u32 msgs, u32 wait,
                                             const DeviceQueueDescriptor* qs, u64* clocks, int* status) {
    u64 t0;
    long long c0;
    dormant_begin(clocks, t0, c0);
    const u32 tid = blockIdx.x * blockDim.x + threadIdx.x;
    float v[8];
#pragma unroll
    for (u32 k = 0; k < 8; k++) v[k] = 1.0f + (float)((tid + k) & 7u) * 0.125f;
    int err = 0;
    const u32 segments = msgs + 1;
    for (u32 s = 0; s < segments; s++) {
        const u32 hi = segment_bound(iters, s + 1, segments);
        /* Unrolled 14 times: 112 FMAs per branch (above). At the compiler's own 4, the
         * plain build ran 3 % slower than the builds with the send compiled in: the loop's
         * own overhead, not the send, was being measured. */
#pragma unroll 14
        for (u32 i = segment_bound(iters, s, segments); i < hi; i++) {
#pragma unroll
            for (u32 k = 0; k < 8; k++) v[k] = fmaf(v[k], a, b);
        }
#if IBGDA_DORMANT_COMM != 0
        if (s + 1 < segments) {
            const int r = dormant_send(qs, wait, s);
            if (r < 0) err = r;
        }
#endif
    }
    float sum = 0.0f;
#pragma unroll
    for (u32 k = 0; k < 8; k++) sum += v[k];
    out[tid] = sum;
    dormant_end(clocks, t0, c0, err, status);
}

/* `in` holds gridDim.x parts of `mask` + 1 float4 each (a power of two); block b reads
 * only part b. Each block's reads stay its own: when the whole grid strode over one
 * buffer, a block that fell behind re-read what the leaders had just brought into L2, so
 * the time of a launch moved with how far its blocks drifted apart (1,706 to 1,966 us for
 * one point, 2026-12-03). Parts of 256 KiB from 528 blocks (132 MiB) outgrow L2 before a
 * block wraps. */
extern "C" __global__ void IBGDA_DORMANT_STREAM_BOUND ibgda_dormant_stream(const float4* in, u32 mask, float* out, u32 iters, u32 msgs, u32 wait,
                                                const DeviceQueueDescriptor* qs, u64* clocks, int* status) {
    u64 t0;
    long long c0;
    dormant_begin(clocks, t0, c0);
    const u32 tid = blockIdx.x * blockDim.x + threadIdx.x;
    const float4* part = in + (size_t)blockIdx.x * ((size_t)mask + 1u);
    float acc[16];
#pragma unroll
    for (u32 k = 0; k < 16; k++) acc[k] = 0.0f;
    const float c = 0.5f;
    int err = 0;
    const u32 segments = msgs + 1;
    for (u32 s = 0; s < segments; s++) {
        const u32 hi = segment_bound(iters, s + 1, segments);
        for (u32 i = segment_bound(iters, s, segments); i < hi; i++) {
            const u32 base = i * 4u * blockDim.x + threadIdx.x;
#pragma unroll
            for (u32 j = 0; j < 4; j++) {
                const float4 x = part[(base + j * blockDim.x) & mask];
                acc[4 * j + 0] = fmaf(x.x, c, acc[4 * j + 0]);
                acc[4 * j + 1] = fmaf(x.y, c, acc[4 * j + 1]);
                acc[4 * j + 2] = fmaf(x.z, c, acc[4 * j + 2]);
                acc[4 * j + 3] = fmaf(x.w, c, acc[4 * j + 3]);
            }
        }
#if IBGDA_DORMANT_COMM != 0
        if (s + 1 < segments) {
            const int r = dormant_send(qs, wait, s);
            if (r < 0) err = r;
        }
#endif
    }
    float sum = 0.0f;
#pragma unroll
    for (u32 k = 0; k < 16; k++) sum += acc[k];
    out[tid] = sum;
    dormant_end(clocks, t0, c0, err, status);
}
