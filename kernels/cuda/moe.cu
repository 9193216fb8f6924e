/* moe.cu: a DeepEP-style low-latency MoE dispatch and combine on the device API, and the
 * same kernels written directly on the builders (the benchmark's baseline).
 *
 * R ranks (moe_layout.h, generated from ibgda_kernels::experiments::moe) run in launches
 * of n * MOE_BLOCKS blocks, each for n of them: all R in one launch when the ranks are
 * threads of one process, one per launch when each rank is a process of its own. Block b
 * serves the rank of slot b / MOE_BLOCKS of the launch's tables (its communicator says
 * which rank that is), and reaches other ranks' memory only through its own
 * communicator's queue pairs and its own windows. Per slot, windows (index
 * slot * MOE_WINDOWS + w):
 *   MOE_W_SEND     x (BF16 [T][H]), the FP8 staging ([T] messages), top-k experts and
 *                  weights, the combined output, the phase stamps (local use; the NIC reads
 *                  x and the staging as gather sources)
 *   MOE_W_RECV     dispatch slots [local expert][source rank][T] of MOE_MSG_BYTES, then one
 *                  8-byte meta word per slot (token | k << 16)
 *   MOE_W_COMBINE  [T][K] BF16 expert outputs sent back to this rank
 *   MOE_W_SIGNAL   a count word per (local expert, source rank), the combine count, then
 *                  local bookkeeping (last values seen, this iteration's counts)
 *   MOE_W_EXPERT   FP8: the BF16 expert outputs (dequantized), [local expert][source][T]
 *
 * Dispatch: one warp per global expert e sends, to e's rank, every local token routed to
 * e (a slot per token in token order: payload put from x or the staging, then an 8-byte
 * meta put_value), then adds count + 1 to that rank's count word of (e, this rank) on the
 * same queue pair, so the count is seen only after the payloads. Then one warp per
 * (local expert, source) waits for its count. Combine: one warp per (local expert,
 * source) sends each received token's expert output (the identity on BF16; the
 * dequantized BF16 on FP8) back to [token][k] of its source rank, then adds the number
 * sent to that rank's combine count; every block waits for its rank's count to reach
 * T * K for this iteration and reduces: out[t] = BF16(sum over k of weight * output),
 * fused multiply-adds in k order. */
#include "ibgda_api.cuh"
#include "moe_layout.h"

using namespace ibgda;

namespace moe {

/* --- numerics, as the Rust reference computes them --------------------------------- */

__device__ __forceinline__ float bf16_to_f32(unsigned short b) { return __uint_as_float((u32)b << 16); }

/* Round to nearest even (inputs are finite). */
__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
    const u32 bits = __float_as_uint(f);
    return (unsigned short)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/* FP8 E4M3 (bias 7, 3 mantissa bits, no infinities, 448 the largest), round to nearest
 * even, saturating. */
__device__ __forceinline__ u8 f32_to_e4m3(float f) {
    const u32 sign = __float_as_uint(f) >> 31 << 7;
    const float a = fabsf(f);
    if (a == 0.0f) return (u8)sign;
    const int e = (int)((__float_as_uint(a) >> 23) & 0xffu) - 127;
    if (e < -6) {
        const float m = rintf(ldexpf(a, 9)); /* units of 2^-9 */
        return (u8)(sign | (u32)m);         /* 8 is the smallest normal: 0x08 */
    }
    float m = rintf(ldexpf(a, 3 - e)); /* 8 .. 16 */
    int ex = e;
    if (m >= 16.0f) {
        m = 8.0f;
        ex += 1;
    }
    if (ex > 8 || (ex == 8 && m > 14.0f)) return (u8)(sign | 0x7eu);
    return (u8)(sign | ((u32)(ex + 7) << 3) | ((u32)m - 8u));
}

__device__ __forceinline__ float e4m3_to_f32(u8 q) {
    const float s = (q & 0x80u) ? -1.0f : 1.0f;
    const u32 ex = (q >> 3) & 0xfu, m = q & 7u;
    if (ex == 0) return s * ldexpf((float)m, -9);
    return s * ldexpf((float)(8u + m), (int)ex - 10);
}

/* --- layout ----------------------------------------------------------------------- */

struct Rank {
    u32 rank; /* the rank (its communicator's) */
    u32 slot; /* its index in this launch's tables */
    const DeviceComm* comm;
    const DeviceWindow* w; /* MOE_WINDOWS windows */
    __device__ __forceinline__ u8* local(u32 win, u64 off) const { return (u8*)w[win].local_base + off; }
};

__device__ __forceinline__ Rank rank_of(const DeviceComm* comms, const DeviceWindow* windows) {
    Rank r;
    r.slot = blockIdx.x / MOE_BLOCKS;
    r.comm = comms + r.slot;
    r.rank = r.comm->rank;
    r.w = windows + (u64)r.slot * MOE_WINDOWS;
    return r;
}

__device__ __forceinline__ u64 slot_off(u32 e_local, u32 src, u32 slot) {
    return (((u64)e_local * MOE_RANKS + src) * MOE_TOKENS + slot) * MOE_MSG_BYTES;
}
__device__ __forceinline__ u64 meta_off(u32 e_local, u32 src, u32 slot) {
    return MOE_META_OFF + (((u64)e_local * MOE_RANKS + src) * MOE_TOKENS + slot) * 8;
}
__device__ __forceinline__ u64 count_off(u32 e_local, u32 src) { return ((u64)e_local * MOE_RANKS + src) * 8; }
__device__ __forceinline__ u64 expert_off(u32 e_local, u32 src, u32 slot) {
    return (((u64)e_local * MOE_RANKS + src) * MOE_TOKENS + slot) * MOE_OUT_BYTES;
}

/* Phase stamps: [iteration][rank][MOE_STAMPS] u64 (ns of %globaltimer). */
__device__ __forceinline__ void stamp(const Rank& r, u32 iter, u32 which, bool first) {
    unsigned long long* s = (unsigned long long*)r.local(MOE_W_SEND, MOE_STAMPS_OFF) +
                            ((u64)iter % MOE_MAX_ITERS) * MOE_STAMPS;
    const unsigned long long t = ptx::globaltimer();
    if (first) {
        atomicMin(&s[which], t);
    } else {
        atomicMax(&s[which], t);
    }
}

/* --- posting: through the device API, or directly on the builders ------------------ */

/* The device API: windows, peers and offsets. */
template <class S> struct Typed {
    const Rank& r;
    __device__ __forceinline__ int put_warp(u32 peer, u32 dst_w, u64 dst_off, u32 src_w, u64 src_off, u32 len,
                                            bool active) const {
        return api::put_warp<S>(*r.comm, peer, r.w[dst_w], dst_off, r.w[src_w], src_off, len, active);
    }
    __device__ __forceinline__ int put_value_warp(u32 peer, u32 dst_w, u64 dst_off, u64 value, bool active) const {
        return api::put_value_warp<S>(*r.comm, peer, r.w[dst_w], dst_off, value, active);
    }
    __device__ __forceinline__ int signal(u32 peer, u32 sig_w, u64 off, u64 add) const {
        return api::signal<S>(*r.comm, peer, r.w[sig_w], off, add);
    }
};

/* The builders, with the addresses and keys each peer's registration has (a table the
 * host filled from the same registrations), and the device library's shared protocol. */
struct RawTables {
    const u64* remote; /* [slot][peer][window] (base, rkey) */
    const u64* local;  /* [slot][window] (base, lkey), then the slot's (scratch, lkey) */
};

template <class S> struct Raw {
    const Rank& r;
    RawTables t;
    __device__ __forceinline__ Queue queue(u32 peer) const {
        return Queue{((const DeviceQueueDescriptor*)r.comm->queues)[peer]};
    }
    __device__ __forceinline__ const u64* remote(u32 peer, u32 w) const {
        return t.remote + (((u64)r.slot * MOE_RANKS + peer) * MOE_WINDOWS + w) * 2;
    }
    /* Window w's (base, lkey), or with w = MOE_WINDOWS the scratch word's. */
    __device__ __forceinline__ const u64* local(u32 w) const {
        return t.local + ((u64)r.slot * (MOE_WINDOWS + 1) + w) * 2;
    }
    /* One WQEBB per active lane, one reservation and publication by the first. */
    template <class Build> __device__ __forceinline__ int post_warp(const Queue& q, bool active, Build build) const {
        const u32 lane = threadIdx.x & 31u;
        const u32 mask = __ballot_sync(0xffffffffu, active);
        if (mask == 0) return 0;
        const u32 leader = __ffs(mask) - 1;
        const u32 n = __popc(mask);
        const u32 idx = __popc(mask & ((1u << lane) - 1u));
        DeviceProducerState* st = q.state();
        u64 start = 0, ready_seen = 0;
        int s = 0;
        if (lane == leader) {
            start = atomicAdd((unsigned long long*)&st->reserved, (u64)n);
            ready_seen = frontier_load<S>(st);
            s = wait_for_room<S>(q, start + n);
        }
        start = __shfl_sync(0xffffffffu, start, leader);
        s = __shfl_sync(0xffffffffu, s, leader);
        if (s != 0) return s;
        /* The leader's acquire of `retired` before every lane's stores into the slots (a
         * shuffle orders no memory; the warp barrier does). */
        __syncwarp();
        if (active) {
            const u64 at = start + idx;
            build(q.slots(at), ctrl(q.d.qpn, q.must_signal(at, 1) ? layout::FM_CE_SE_CQ_UPDATE : 0u));
        }
        __syncwarp();
        if (lane == leader) s = shared_publish_seen<S>(q, start, start + n, r.comm->doorbell_batch, ready_seen);
        return __shfl_sync(0xffffffffu, s, leader);
    }
    __device__ __forceinline__ int put_warp(u32 peer, u32 dst_w, u64 dst_off, u32 src_w, u64 src_off, u32 len,
                                            bool active) const {
        const u64* rem = remote(peer, dst_w);
        const u64* loc = local(src_w);
        const u64 raddr = rem[0] + dst_off, laddr = loc[0] + src_off;
        const u32 rkey = (u32)rem[1], lkey = (u32)loc[1];
        return post_warp(queue(peer), active, [&](const WqeSlots& s, const Ctrl& c) {
            build_write<transport::Rc>(s, c, Target{nullptr}, raddr, rkey, laddr, len, lkey, false);
        });
    }
    __device__ __forceinline__ int put_value_warp(u32 peer, u32 dst_w, u64 dst_off, u64 value, bool active) const {
        const u64* rem = remote(peer, dst_w);
        const u64 raddr = rem[0] + dst_off;
        const u32 rkey = (u32)rem[1];
        return post_warp(queue(peer), active, [&](const WqeSlots& s, const Ctrl& c) {
            build_write_inline8<transport::Rc>(s, c, Target{nullptr}, raddr, rkey, value);
        });
    }
    __device__ __forceinline__ int signal(u32 peer, u32 sig_w, u64 off, u64 add) const {
        const u64* rem = remote(peer, sig_w);
        const u64* scratch = local(MOE_WINDOWS);
        const Queue q = queue(peer);
        DeviceProducerState* st = q.state();
        const u64 start = atomicAdd((unsigned long long*)&st->reserved, 1ull);
        const u64 ready_seen = frontier_load<S>(st);
        int s = wait_for_room<S>(q, start + 1);
        if (s != 0) return s;
        build_atomic<transport::Rc>(q.slots(start),
                                    ctrl(q.d.qpn, q.must_signal(start, 1) ? layout::FM_CE_SE_CQ_UPDATE : 0u),
                                    Target{nullptr}, AtomicKind::FetchAdd, rem[0] + off, (u32)rem[1], scratch[0],
                                    (u32)scratch[1], add, 0, 0, 0);
        return shared_publish_seen<S>(q, start, start + 1, r.comm->doorbell_batch, ready_seen);
    }
};

/* --- the phases ------------------------------------------------------------------- */

__device__ __forceinline__ void fail(int* status, int s) {
    if (s != 0) atomicMin(status, s);
}

/* FP8: every local token's message (E4M3 payload, then one float scale per block of
 * MOE_BLOCK), one warp per token. */
__device__ void quantize(const Rank& r) {
    const u32 warps = MOE_BLOCKS * (blockDim.x / 32);
    const u32 warp = (blockIdx.x % MOE_BLOCKS) * (blockDim.x / 32) + threadIdx.x / 32;
    const u32 lane = threadIdx.x & 31u;
    const unsigned short* x = (const unsigned short*)r.local(MOE_W_SEND, MOE_X_OFF);
    for (u32 t = warp; t < MOE_TOKENS; t += warps) {
        u8* msg = r.local(MOE_W_SEND, MOE_STAGING_OFF + (u64)t * MOE_MSG_BYTES);
        float* scales = (float*)(msg + MOE_HIDDEN);
        for (u32 b = 0; b < MOE_SCALES; b++) {
            float v[MOE_BLOCK / 32];
            float amax = 0.0f;
#pragma unroll
            for (u32 i = 0; i < MOE_BLOCK / 32; i++) {
                v[i] = bf16_to_f32(x[(u64)t * MOE_HIDDEN + b * MOE_BLOCK + i * 32 + lane]);
                amax = fmaxf(amax, fabsf(v[i]));
            }
#pragma unroll
            for (u32 d = 16; d > 0; d >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, d));
            const float scale = amax == 0.0f ? 1.0f : amax / 448.0f;
#pragma unroll
            for (u32 i = 0; i < MOE_BLOCK / 32; i++) msg[b * MOE_BLOCK + i * 32 + lane] = f32_to_e4m3(v[i] / scale);
            if (lane == 0) scales[b] = scale;
        }
    }
}

template <class P>
__device__ void dispatch(const Rank& r, const P& post, u32 iter, int* status) {
    const u32 warps = MOE_BLOCKS * (blockDim.x / 32);
    const u32 warp = (blockIdx.x % MOE_BLOCKS) * (blockDim.x / 32) + threadIdx.x / 32;
    const u32 lane = threadIdx.x & 31u;
    if (threadIdx.x == 0 && blockIdx.x % MOE_BLOCKS == 0) stamp(r, iter, MOE_STAMP_DISPATCH_START, true);
    const int* topk = (const int*)r.local(MOE_W_SEND, MOE_TOPK_OFF);
    /* Send: one warp per global expert. */
    for (u32 e = warp; e < MOE_EXPERTS; e += warps) {
        const u32 dst = e / MOE_LOCAL_EXPERTS, e_local = e % MOE_LOCAL_EXPERTS;
        u32 count = 0;
        for (u32 base = 0; base < MOE_TOKENS; base += 32) {
            const u32 t = base + lane;
            int k = -1;
            if (t < MOE_TOKENS) {
                for (u32 j = 0; j < MOE_TOPK; j++) {
                    if (topk[t * MOE_TOPK + j] == (int)e) k = (int)j;
                }
            }
            const bool routed = k >= 0;
            const u32 mask = __ballot_sync(0xffffffffu, routed);
            const u32 slot = count + __popc(mask & ((1u << lane) - 1u));
            const u64 src = MOE_FP8 ? MOE_STAGING_OFF + (u64)t * MOE_MSG_BYTES : MOE_X_OFF + (u64)t * MOE_OUT_BYTES;
            fail(status, post.put_warp(dst, MOE_W_RECV, slot_off(e_local, r.rank, slot), MOE_W_SEND, src,
                                       MOE_MSG_BYTES, routed));
            fail(status, post.put_value_warp(dst, MOE_W_RECV, meta_off(e_local, r.rank, slot),
                                             (u64)t | ((u64)(routed ? k : 0) << 16), routed));
            count += __popc(mask);
        }
        /* After the payloads, on the same queue pair: the count (+ 1: zero tokens is a
         * signal too). */
        if (lane == 0) fail(status, post.signal(dst, MOE_W_SIGNAL, count_off(e_local, r.rank), count + 1));
        __syncwarp();
    }
    if (lane == 0) stamp(r, iter, MOE_STAMP_DISPATCH_SENT, false);
    /* Receive: one warp per (local expert, source rank), until its count arrived. */
    u64* last = (u64*)r.local(MOE_W_SIGNAL, MOE_LAST_OFF);
    u32* counts = (u32*)r.local(MOE_W_SIGNAL, MOE_COUNTS_OFF);
    for (u32 p = warp; p < MOE_LOCAL_EXPERTS * MOE_RANKS; p += warps) {
        if (lane == 0) {
            const u32 e_local = p / MOE_RANKS, src = p % MOE_RANKS;
            u64 seen = 0;
            const int s = api::wait_signal<scope::MOE_SCOPE>(*r.comm, r.w[MOE_W_SIGNAL], count_off(e_local, src),
                                                             layout::SIGNAL_CMP_GT, last[p], &seen);
            fail(status, s);
            counts[p] = s == 0 ? (u32)(seen - last[p] - 1) : 0u;
            last[p] = seen;
        }
    }
    __syncwarp();
    if (lane == 0) stamp(r, iter, MOE_STAMP_DISPATCH_RECEIVED, false);
}

template <class P>
__device__ void combine(const Rank& r, const P& post, u32 iter, int* status) {
    const u32 warps = MOE_BLOCKS * (blockDim.x / 32);
    const u32 warp = (blockIdx.x % MOE_BLOCKS) * (blockDim.x / 32) + threadIdx.x / 32;
    const u32 lane = threadIdx.x & 31u;
    if (threadIdx.x == 0 && blockIdx.x % MOE_BLOCKS == 0) stamp(r, iter, MOE_STAMP_COMBINE_START, true);
    const u32* counts = (const u32*)r.local(MOE_W_SIGNAL, MOE_COUNTS_OFF);
    for (u32 p = warp; p < MOE_LOCAL_EXPERTS * MOE_RANKS; p += warps) {
        const u32 e_local = p / MOE_RANKS, src = p % MOE_RANKS;
        const u32 count = counts[p];
        for (u32 base = 0; base < count; base += 32) {
            if (MOE_FP8) {
                /* The expert's output: each received message dequantized to BF16. */
                for (u32 j = base; j < base + 32 && j < count; j++) {
                    const u8* msg = r.local(MOE_W_RECV, slot_off(e_local, src, j));
                    const float* scales = (const float*)(msg + MOE_HIDDEN);
                    unsigned short* out = (unsigned short*)r.local(MOE_W_EXPERT, expert_off(e_local, src, j));
                    for (u32 h = lane; h < MOE_HIDDEN; h += 32) {
                        out[h] = f32_to_bf16(e4m3_to_f32(msg[h]) * scales[h / MOE_BLOCK]);
                    }
                }
                __syncwarp();
                __threadfence(); /* the NIC gathers what the lanes wrote */
            }
            const u32 slot = base + lane;
            const bool active = slot < count;
            const u64 meta = active ? *(const u64*)r.local(MOE_W_RECV, meta_off(e_local, src, slot)) : 0ull;
            const u32 t = (u32)(meta & 0xffffu), k = (u32)(meta >> 16) & 0xffffu;
            const u32 src_w = MOE_FP8 ? MOE_W_EXPERT : MOE_W_RECV;
            const u64 src_off = MOE_FP8 ? expert_off(e_local, src, slot) : slot_off(e_local, src, slot);
            fail(status, post.put_warp(src, MOE_W_COMBINE, ((u64)t * MOE_TOPK + k) * MOE_OUT_BYTES, src_w, src_off,
                                       MOE_OUT_BYTES, active));
        }
        if (lane == 0 && count > 0) fail(status, post.signal(src, MOE_W_SIGNAL, MOE_COMBINE_COUNT_OFF, count));
        __syncwarp();
    }
    if (lane == 0) stamp(r, iter, MOE_STAMP_COMBINE_SENT, false);
    /* Every block: until this rank's outputs all came back, then its share of the tokens. */
    __shared__ int ready;
    if (threadIdx.x == 0) {
        const int s = api::wait_signal<scope::MOE_SCOPE>(*r.comm, r.w[MOE_W_SIGNAL], MOE_COMBINE_COUNT_OFF,
                                                         layout::SIGNAL_CMP_GE,
                                                         (u64)(iter + 1) * MOE_TOKENS * MOE_TOPK);
        fail(status, s);
        ready = s == 0;
    }
    __syncthreads();
    if (!ready) return;
    const unsigned short* y = (const unsigned short*)r.local(MOE_W_COMBINE, 0);
    const float* w = (const float*)r.local(MOE_W_SEND, MOE_WEIGHTS_OFF);
    unsigned short* out = (unsigned short*)r.local(MOE_W_SEND, MOE_OUT_OFF);
    for (u32 t = blockIdx.x % MOE_BLOCKS; t < MOE_TOKENS; t += MOE_BLOCKS) {
        for (u32 h = threadIdx.x; h < MOE_HIDDEN; h += blockDim.x) {
            float acc = 0.0f;
            for (u32 k = 0; k < MOE_TOPK; k++) {
                acc = __fmaf_rn(w[t * MOE_TOPK + k], bf16_to_f32(y[((u64)t * MOE_TOPK + k) * MOE_HIDDEN + h]), acc);
            }
            out[(u64)t * MOE_HIDDEN + h] = f32_to_bf16(acc);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) stamp(r, iter, MOE_STAMP_COMBINE_DONE, false);
}

} // namespace moe

using S = scope::MOE_SCOPE;

extern "C" __global__ void moe_quantize(const DeviceComm* comms, const DeviceWindow* windows) {
    moe::quantize(moe::rank_of(comms, windows));
}

extern "C" __global__ void moe_dispatch_typed(const DeviceComm* comms, const DeviceWindow* windows, u32 iter,
                                              int* status) {
    const moe::Rank r = moe::rank_of(comms, windows);
    moe::dispatch(r, moe::Typed<S>{r}, iter, status);
}

extern "C" __global__ void moe_combine_typed(const DeviceComm* comms, const DeviceWindow* windows, u32 iter,
                                             int* status) {
    const moe::Rank r = moe::rank_of(comms, windows);
    moe::combine(r, moe::Typed<S>{r}, iter, status);
}

extern "C" __global__ void moe_dispatch_raw(const DeviceComm* comms, const DeviceWindow* windows, const u64* remote,
                                            const u64* local, u32 iter, int* status) {
    const moe::Rank r = moe::rank_of(comms, windows);
    moe::dispatch(r, moe::Raw<S>{r, moe::RawTables{remote, local}}, iter, status);
}

extern "C" __global__ void moe_combine_raw(const DeviceComm* comms, const DeviceWindow* windows, const u64* remote,
                                           const u64* local, u32 iter, int* status) {
    const moe::Rank r = moe::rank_of(comms, windows);
    moe::combine(r, moe::Raw<S>{r, moe::RawTables{remote, local}}, iter, status);
}
