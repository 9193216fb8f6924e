/* raw_baseline.cu: the benchmark reference. The same one-thread issue loop as
 * ibgda_issue_bench_<S> (kernels.cu), written by hand: no device library, raw pointer
 * arithmetic, the 8-byte inline RC WRITE's three octowords as literal words, and the
 * scope's fences as literal inline PTX. It must produce the same bytes (the host test
 * checks the ring after a run) and the same ordering instructions (the PTX test checks).
 * Only the generated header is included, for the descriptor passed as the argument. */
#include "ibgda_layout.h"

/* The bound on the completion wait, as the device library's (0: unbounded). */
#ifndef IBGDA_SPIN_LIMIT_NS
#define IBGDA_SPIN_LIMIT_NS 0ull
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

/* A host build (raw_host.cpp) defines its own byte swap. */
#ifndef RAW_BSWAP32
#define RAW_BSWAP32(x) __byte_perm((x), 0, 0x0123)
#endif

/* The shapes of Table 3 and Figure 3 (kernels.cu's ibgda_issue_shape_GpuFence), by hand:
 * 0 an RC WRITE of `len` inline bytes from a 4-byte aligned `payload`, 1 an RC WRITE of
 * `len` bytes from one gather entry, 2 and 3 a DC WRITE of 8 inline bytes with the compact
 * (16 B) or full (48 B) address vector `av`. */
struct RawShape {
    u32 shape, len, inline_octs, avn, ds, wqebbs;
};

__device__ __forceinline__ RawShape raw_shape(u32 shape, u32 len) {
    RawShape s;
    s.shape = shape;
    s.len = len;
    s.inline_octs = len == 0 ? 0u : (4u + len + 15u) / 16u;
    s.avn = shape == 2 ? 1u : (shape == 3 ? 3u : 0u);
    s.ds = shape == 0 ? 2u + s.inline_octs : (shape == 1 ? 3u : 3u + s.avn);
    s.wqebbs = (s.ds * 16u + 63u) / 64u;
    return s;
}

/* Octoword k of the WQE at WQEBB `start` (the counter's low 32 bits) of a ring of
 * `mask` + 1 WQEBBs: each octoword is addressed through its own WQEBB (a WQE may wrap).
 * A function, so that `k` is read once per octoword (a macro naming it twice, called with
 * `k++`, once put the inline segment over the control segment). Each writer below names
 * its octowords with literal numbers. */
__device__ __forceinline__ uint4* raw_oct(unsigned char* ring, u32 mask, u32 start, u32 k) {
    return (uint4*)(ring + ((u64)((start + (k >> 2)) & mask) << 6) + ((k & 3u) << 4));
}

/* ctrl: opmod 0 | idx | RDMA_WRITE (8); qpn | ds; sig 0, stream 0, CQ_UPDATE; imm 0 */
__device__ __forceinline__ uint4 raw_ctrl_write(u32 start, u32 qpn, u32 ds) {
    return make_uint4(RAW_BSWAP32(((start & 0xffffu) << 8) | 0x08u), RAW_BSWAP32((qpn << 8) | ds), 0x08u << 24, 0u);
}

/* raddr: big-endian address, rkey, 0 */
__device__ __forceinline__ uint4 raw_raddr(u64 raddr, u32 rkey) {
    return make_uint4(RAW_BSWAP32((u32)(raddr >> 32)), RAW_BSWAP32((u32)raddr), RAW_BSWAP32(rkey), 0u);
}

/* Shape 0: RC WRITE of `len` inline bytes (1..256) from a 4-byte aligned `payload` in
 * `octs` octowords (raw_shape's): ctrl, raddr, then header 0x80000000 | len, the payload
 * and zero padding from octoword 2. */
__device__ __forceinline__ void raw_rc_write_inline(unsigned char* ring, u32 mask, u32 start, u32 qpn, u32 len, u32 octs,
                                                    u64 raddr, u32 rkey, const unsigned char* payload) {
    *raw_oct(ring, mask, start, 0) = raw_ctrl_write(start, qpn, 2u + octs);
    *raw_oct(ring, mask, start, 1) = raw_raddr(raddr, rkey);
    const u32* words = (const u32*)payload;
    const u32 whole = len / 4;
    /* Four octowords per batch, the batch's loads before its stores (a store between two
     * loads would keep them in order: one load round trip per octoword). */
    for (u32 o0 = 0; o0 < octs; o0 += 4) {
        u32 v[4][4];
#pragma unroll
        for (u32 q = 0; q < 4; q++) {
#pragma unroll
            for (u32 j = 0; j < 4; j++) {
                const int w = (int)(4 * (o0 + q) + j) - 1;
                u32 x = 0u;
                if (w < 0) {
                    x = RAW_BSWAP32(0x80000000u | len);
                } else if ((u32)w < whole) {
                    x = words[w];
                } else if ((u32)w == whole) {
                    for (u32 b = 0; b < (len & 3u); b++) x |= (u32)payload[4 * whole + b] << (8 * b);
                }
                v[q][j] = x;
            }
        }
#pragma unroll
        for (u32 q = 0; q < 4; q++) {
            if (o0 + q < octs) *raw_oct(ring, mask, start, 2u + o0 + q) = make_uint4(v[q][0], v[q][1], v[q][2], v[q][3]);
        }
    }
}

/* Shape 1: RC WRITE of `len` bytes from one gather entry: ctrl, raddr, data segment. */
__device__ __forceinline__ void raw_rc_write_sge(unsigned char* ring, u32 mask, u32 start, u32 qpn, u32 len, u64 raddr,
                                                 u32 rkey, u64 laddr, u32 lkey) {
    *raw_oct(ring, mask, start, 0) = raw_ctrl_write(start, qpn, 3u);
    *raw_oct(ring, mask, start, 1) = raw_raddr(raddr, rkey);
    *raw_oct(ring, mask, start, 2) =
        make_uint4(RAW_BSWAP32(len), RAW_BSWAP32(lkey), RAW_BSWAP32((u32)(laddr >> 32)), RAW_BSWAP32((u32)laddr));
}

/* Shapes 2 and 3: DC WRITE of 8 inline bytes `value` behind an address vector of AVN
 * octowords (1 compact, 3 full), loaded whole before any of it is stored. The control
 * segment is stored before those loads: its store then issues ahead of the load round trip
 * (stored after the loads, it waited for them: the full vector measured 0.968 typed/raw
 * cycles; the library stores in this order). */
template <u32 AVN>
__device__ __forceinline__ void raw_dc_write_inline8(unsigned char* ring, u32 mask, u32 start, u32 qpn, u64 raddr,
                                                     u32 rkey, const uint4* av, u64 value) {
    *raw_oct(ring, mask, start, 0) = raw_ctrl_write(start, qpn, 3u + AVN);
    uint4 vec[AVN];
#pragma unroll
    for (u32 a = 0; a < AVN; a++) vec[a] = av[a];
#pragma unroll
    for (u32 a = 0; a < AVN; a++) *raw_oct(ring, mask, start, 1u + a) = vec[a];
    *raw_oct(ring, mask, start, 1u + AVN) = raw_raddr(raddr, rkey);
    *raw_oct(ring, mask, start, 2u + AVN) = make_uint4(RAW_BSWAP32(0x80000008u), (u32)value, (u32)(value >> 32), 0u);
}

/* Writes one WQE of shape `s` at WQEBB counter `next` of a ring of `cap` WQEBBs (signaled,
 * CQ_UPDATE only), the 8 inline bytes of the DC shapes being `value`: one writer per
 * shape, as a hand-written library has. */
__device__ __forceinline__ void raw_shape_wqe(unsigned char* ring, u32 cap, u64 next, u32 qpn, const RawShape& s, u64 raddr,
                                              u32 rkey, u64 laddr, u32 lkey, const unsigned char* payload, const uint4* av,
                                              u64 value) {
    const u32 mask = cap - 1u;
    const u32 start = (u32)next;
    switch (s.shape) {
    case 0: raw_rc_write_inline(ring, mask, start, qpn, s.len, s.inline_octs, raddr, rkey, payload); break;
    case 1: raw_rc_write_sge(ring, mask, start, qpn, s.len, raddr, rkey, laddr, lkey); break;
    case 2: raw_dc_write_inline8<1>(ring, mask, start, qpn, raddr, rkey, av, value); break;
    default: raw_dc_write_inline8<3>(ring, mask, start, qpn, raddr, rkey, av, value); break;
    }
}

/* Everything below is device-only (inline PTX, clocks, kernels). */
#ifndef IBGDA_RAW_HOST_BUILD

__device__ __forceinline__ u64 raw_gt() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}

/* Polls the CQ ring (owner bit) until everything before `next` is retired, WQEs of
 * `wqebbs` WQEBBs each, with scope K's loads and acquire; sets err to -0x300 (the CQE never
 * came, bounded waits only) or to the error syndrome. */
template <int K>
__device__ __forceinline__ void raw_wait(const ibgda::DeviceQueueDescriptor& d, u64 next, u32 wqebbs, u64 t1, u64& retired,
                                         u64& consumer, int& err) {
    const u32 ncqe = 1u << d.log_cq_entries;
    while (retired < next) {
        if constexpr (IBGDA_SPIN_LIMIT_NS != 0) {
            if (raw_gt() - t1 > IBGDA_SPIN_LIMIT_NS) {
                err = -0x300; /* the CQE never came */
                break;
            }
        }
        const u32 slot = (u32)consumer & (ncqe - 1);
        const u64 tail_addr = __cvta_generic_to_global((void*)(d.cq_ring + slot * 64u + 56u));
        u64 tail;
        if constexpr (K == 0 || K == 4 || K == 6) {
            asm volatile("ld.volatile.global.b64 %0, [%1];" : "=l"(tail) : "l"(tail_addr) : "memory");
        } else if constexpr (K == 1 || K == 2) {
            asm volatile("ld.relaxed.sys.global.b64 %0, [%1];" : "=l"(tail) : "l"(tail_addr) : "memory");
        } else if constexpr (K == 3) {
            asm volatile("ld.acquire.gpu.global.b64 %0, [%1];" : "=l"(tail) : "l"(tail_addr) : "memory");
        } else {
            asm volatile("ld.acquire.sys.global.b64 %0, [%1];" : "=l"(tail) : "l"(tail_addr) : "memory");
        }
        const u32 op_own = (u32)(tail >> 56);
        if ((op_own >> 4) == 0xfu || (op_own & 1u) != ((u32)(consumer / ncqe) & 1u)) continue;
        if constexpr (K == 1 || K == 2) asm volatile("fence.acquire.gpu;" ::: "memory");
        if constexpr (K == 4) asm volatile("membar.gl;" ::: "memory");
        if constexpr (K == 6) asm volatile("membar.sys;" ::: "memory");
        consumer += 1;
        const u64 cidb = __cvta_generic_to_global((void*)d.cq_dbrec);
        asm volatile("st.relaxed.sys.global.b32 [%0], %1;" ::"l"(cidb), "r"(RAW_BSWAP32((u32)consumer & 0xffffffu)) : "memory");
        const u32 counter = ((u32)(tail >> 32) & 0xffu) << 8 | ((u32)(tail >> 40) & 0xffu);
        retired = retired + (unsigned short)(counter - (unsigned short)retired) + wqebbs;
        if ((op_own >> 4) == 13u) err = -(int)((const unsigned char*)(d.cq_ring + slot * 64u))[55];
    }
}

/* K: the scope's number (ibgda::layout::SCOPE_*). */
template <int K>
__device__ __forceinline__ void raw_issue(const ibgda::DeviceQueueDescriptor& d, u32 warmup, u32 iters, u64 raddr, u32 rkey,
                                          u64* issue_ns, u64* issue_cycles, u64* total_ns, u64* clocks, int* status) {
    u64* st = (u64*)d.state;
    u64 next = st[0], retired = st[3], consumer = st[4];
    const u32 cap = 1u << d.log_sq_wqebbs;
    int err = 0;
    u64 g_start = 0, c_start = 0;
    for (u32 i = 0; i < warmup + iters; i++) {
        if (i == warmup) {
            g_start = raw_gt();
            c_start = clock64();
        }
        const u64 t0 = raw_gt();
        const long long c0 = clock64();
        if (next - retired >= cap) { err = -0x200; break; } /* never: one outstanding at a time */
        u32* w = (u32*)(d.sq_ring + ((next & (cap - 1)) << 6));
        const u64 value = 0x0123456789abcdefull ^ i;
        /* ctrl: opmod 0 | idx | RDMA_WRITE (8); qpn | ds 3; sig 0, stream 0, CQ_UPDATE; imm 0 */
        *(uint4*)&w[0] = make_uint4(RAW_BSWAP32((((u32)next & 0xffffu) << 8) | 0x08u), RAW_BSWAP32((d.qpn << 8) | 3u),
                                    0x08u << 24, 0u);
        /* raddr: big-endian address, rkey, 0 */
        *(uint4*)&w[4] = make_uint4(RAW_BSWAP32((u32)(raddr >> 32)), RAW_BSWAP32((u32)raddr), RAW_BSWAP32(rkey), 0u);
        /* inline: header 8 | 0x80000000, payload bytes, zero pad */
        *(uint4*)&w[8] = make_uint4(RAW_BSWAP32(0x80000008u), (u32)value, (u32)(value >> 32), 0u);
        next += 1;
        const u32 rec = RAW_BSWAP32((u32)next & 0xffffu);
        const u64 db = (u64)RAW_BSWAP32(((u32)next & 0xffffu) << 8) | ((u64)RAW_BSWAP32(d.qpn << 8) << 32);
        const u64 dbrec = __cvta_generic_to_global((void*)d.sq_dbrec);
        const u64 bell = __cvta_generic_to_global((void*)d.doorbell);
        if constexpr (K == 0) { /* Unordered */
            asm volatile("st.relaxed.sys.global.b32 [%0], %1;" ::"l"(dbrec), "r"(rec) : "memory");
            asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(bell), "l"(db) : "memory");
        } else if constexpr (K == 1) { /* GpuFence */
            asm volatile("st.relaxed.sys.global.b32 [%0], %1;" ::"l"(dbrec), "r"(rec) : "memory");
            asm volatile("fence.release.gpu;" ::: "memory");
            asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(bell), "l"(db) : "memory");
        } else if constexpr (K == 2) { /* GpuFencedDbrec */
            asm volatile("fence.release.gpu;" ::: "memory");
            asm volatile("st.relaxed.sys.global.b32 [%0], %1;" ::"l"(dbrec), "r"(rec) : "memory");
            asm volatile("fence.release.gpu;" ::: "memory");
            asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(bell), "l"(db) : "memory");
        } else if constexpr (K == 3) { /* GpuReleaseStore */
            asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(dbrec), "r"(rec) : "memory");
            asm volatile("st.release.gpu.global.b64 [%0], %1;" ::"l"(bell), "l"(db) : "memory");
        } else if constexpr (K == 4) { /* ThreadFence */
            asm volatile("membar.gl;" ::: "memory");
            asm volatile("st.volatile.global.b32 [%0], %1;" ::"l"(dbrec), "r"(rec) : "memory");
            asm volatile("membar.gl;" ::: "memory");
            asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(bell), "l"(db) : "memory");
        } else if constexpr (K == 5) { /* SystemReleaseStore */
            asm volatile("st.release.sys.global.b32 [%0], %1;" ::"l"(dbrec), "r"(rec) : "memory");
            asm volatile("st.release.sys.global.b64 [%0], %1;" ::"l"(bell), "l"(db) : "memory");
        } else { /* SystemFence */
            asm volatile("membar.sys;" ::: "memory");
            asm volatile("st.volatile.global.b32 [%0], %1;" ::"l"(dbrec), "r"(rec) : "memory");
            asm volatile("membar.sys;" ::: "memory");
            asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(bell), "l"(db) : "memory");
        }
        const long long c1 = clock64();
        const u64 t1 = raw_gt();
        /* wait: poll the CQ ring (owner bit) until the CQE for this WQE */
        raw_wait<K>(d, next, 1, t1, retired, consumer, err);
        if (err == -0x300) break;
        const u64 t2 = raw_gt();
        if (i >= warmup) {
            issue_ns[i - warmup] = t1 - t0;
            issue_cycles[i - warmup] = (u64)(c1 - c0);
            total_ns[i - warmup] = t2 - t0;
        }
    }
    clocks[0] = clock64() - c_start;
    clocks[1] = raw_gt() - g_start;
    st[0] = next;
    st[1] = next;
    st[2] = next;
    st[3] = retired;
    st[4] = consumer;
    *status = err;
}

#define RAW_KERNEL(NAME, K)                                                                                            \
    extern "C" __global__ void ibgda_raw_issue_##NAME(ibgda::DeviceQueueDescriptor d, u32 warmup, u32 iters, u64 raddr, \
                                                      u32 rkey, u64* issue_ns, u64* issue_cycles, u64* total_ns,       \
                                                      u64* clocks, int* status) {                                      \
        raw_issue<K>(d, warmup, iters, raddr, rkey, issue_ns, issue_cycles, total_ns, clocks, status);                 \
    }

RAW_KERNEL(Unordered, 0)
RAW_KERNEL(GpuFence, 1)
RAW_KERNEL(GpuFencedDbrec, 2)
RAW_KERNEL(GpuReleaseStore, 3)
RAW_KERNEL(ThreadFence, 4)
RAW_KERNEL(SystemReleaseStore, 5)
RAW_KERNEL(SystemFence, 6)

/* One shape's loop (raw_shape_wqe with the shape fixed at compile time, as at a call
 * site that posts one operation), GpuFence's ordering, every WQE signaled and waited
 * for; the typed kernel (kernels.cu's issue_shape_loop) is specialized the same way. */
template <u32 SHAPE>
__device__ __forceinline__ void raw_issue_shape_loop(const ibgda::DeviceQueueDescriptor& d, u32 len, u32 warmup, u32 iters,
                                                     u64 raddr, u32 rkey, u64 laddr, u32 lkey,
                                                     const unsigned char* payload, const uint4* av, u64* issue_ns,
                                                     u64* issue_cycles, u64* total_ns, u64* clocks, int* status) {
    u64* st = (u64*)d.state;
    u64 next = st[0], retired = st[3], consumer = st[4];
    const u32 cap = 1u << d.log_sq_wqebbs;
    const RawShape s = raw_shape(SHAPE, len);
    const u32 wqebbs = s.wqebbs;
    int err = 0;
    u64 g_start = 0, c_start = 0;
    for (u32 i = 0; i < warmup + iters; i++) {
        if (i == warmup) {
            g_start = raw_gt();
            c_start = clock64();
        }
        const u64 t0 = raw_gt();
        const long long c0 = clock64();
        /* Never: one outstanding at a time. A 32-bit test of the room (as a library's reserve
         * tests it): the 64-bit `next + wqebbs - retired > cap` kept next + wqebbs live
         * through the writer, and ptxas then built the pointer WQE in uniform registers (13
         * more instructions) and reloaded the ring base after each inline batch's first
         * store (a constant load and an address per store behind the payload loads). */
        if (wqebbs > cap - (u32)(next - retired)) { err = -0x200; break; }
        raw_shape_wqe((unsigned char*)d.sq_ring, cap, next, d.qpn, s, raddr, rkey, laddr, lkey, payload, av,
                      0x0123456789abcdefull ^ i);
        next += wqebbs;
        const u32 rec = RAW_BSWAP32((u32)next & 0xffffu);
        const u64 db = (u64)RAW_BSWAP32(((u32)next & 0xffffu) << 8) | ((u64)RAW_BSWAP32(d.qpn << 8) << 32);
        const u64 dbrec = __cvta_generic_to_global((void*)d.sq_dbrec);
        const u64 bell = __cvta_generic_to_global((void*)d.doorbell);
        asm volatile("st.relaxed.sys.global.b32 [%0], %1;" ::"l"(dbrec), "r"(rec) : "memory");
        asm volatile("fence.release.gpu;" ::: "memory");
        asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(bell), "l"(db) : "memory");
        const long long c1 = clock64();
        const u64 t1 = raw_gt();
        raw_wait<1>(d, next, wqebbs, t1, retired, consumer, err);
        if (err == -0x300) break;
        const u64 t2 = raw_gt();
        if (i >= warmup) {
            issue_ns[i - warmup] = t1 - t0;
            issue_cycles[i - warmup] = (u64)(c1 - c0);
            total_ns[i - warmup] = t2 - t0;
        }
    }
    clocks[0] = clock64() - c_start;
    clocks[1] = raw_gt() - g_start;
    st[0] = next;
    st[1] = next;
    st[2] = next;
    st[3] = retired;
    st[4] = consumer;
    *status = err;
}

extern "C" __global__ void ibgda_raw_issue_shape_GpuFence(ibgda::DeviceQueueDescriptor d, u32 shape, u32 len, u32 warmup,
                                                          u32 iters, u64 raddr, u32 rkey, u64 laddr, u32 lkey,
                                                          const unsigned char* payload, const uint4* av, u64* issue_ns,
                                                          u64* issue_cycles, u64* total_ns, u64* clocks, int* status) {
#define RAW_ISSUE_SHAPE_ARGS d, len, warmup, iters, raddr, rkey, laddr, lkey, payload, av, issue_ns, issue_cycles, total_ns, clocks, status
    switch (shape) {
    case 0: raw_issue_shape_loop<0>(RAW_ISSUE_SHAPE_ARGS); break;
    case 1: raw_issue_shape_loop<1>(RAW_ISSUE_SHAPE_ARGS); break;
    case 2: raw_issue_shape_loop<2>(RAW_ISSUE_SHAPE_ARGS); break;
    default: raw_issue_shape_loop<3>(RAW_ISSUE_SHAPE_ARGS); break;
    }
#undef RAW_ISSUE_SHAPE_ARGS
}

#endif /* IBGDA_RAW_HOST_BUILD */
