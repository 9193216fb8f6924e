/* ibgda.cuh: the ibgda device library. GPU threads build mlx5 send WQEs, reserve and
 * publish ring slots, write the doorbell record and the 8-byte doorbell, and poll
 * completions, through the layouts of the generated ibgda_layout.h (never their own).
 *
 * Header-only and include-free apart from that header, so NVRTC compiles it without a
 * CUDA toolkit's headers.
 *
 * Ordering scopes are template tags (ibgda::scope::GpuFence, ...) that match the Rust
 * markers of ibgda::order; each scope compiles to exactly the PTX its Rust
 * OrderingScope::DEVICE_SEQUENCE documents (the kernels crate's tests parse the PTX).
 *
 * Counters: every producer counter is a free-running 64-bit count of WQEBBs; a WQE's
 * 16-bit index is its first WQEBB's count & 0xffff, its slot count & (ring - 1).
 */
#pragma once
#include "ibgda_layout.h"

namespace ibgda {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

/* -------------------------------------------------------------------------------------
 * Byte order and raw memory operations (inline PTX, so each compiles to one known
 * instruction).
 * ----------------------------------------------------------------------------------- */

__device__ __forceinline__ u32 bswap32(u32 x) { return __byte_perm(x, 0, 0x0123); }
__device__ __forceinline__ u16 bswap16(u16 x) { return (u16)((x >> 8) | (x << 8)); }

__device__ __forceinline__ u64 gaddr(const void* p) { return (u64)__cvta_generic_to_global(p); }

#ifdef IBGDA_HOST_THREADS
/* A host build that runs kernels on threads (cuda/moe_host.cpp, a test without a GPU):
 * the same operations as C++ atomics. */
#include "ptx_host.h"
#else
namespace ptx {
__device__ __forceinline__ void st_relaxed_sys_b32(void* p, u32 v) {
    asm volatile("st.relaxed.sys.global.b32 [%0], %1;" ::"l"(gaddr(p)), "r"(v) : "memory");
}
__device__ __forceinline__ void st_volatile_b32(void* p, u32 v) {
    asm volatile("st.volatile.global.b32 [%0], %1;" ::"l"(gaddr(p)), "r"(v) : "memory");
}
__device__ __forceinline__ void st_release_gpu_b32(void* p, u32 v) {
    asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(gaddr(p)), "r"(v) : "memory");
}
__device__ __forceinline__ void st_release_sys_b32(void* p, u32 v) {
    asm volatile("st.release.sys.global.b32 [%0], %1;" ::"l"(gaddr(p)), "r"(v) : "memory");
}
__device__ __forceinline__ void st_release_gpu_b64(void* p, u64 v) {
    asm volatile("st.release.gpu.global.b64 [%0], %1;" ::"l"(gaddr(p)), "l"(v) : "memory");
}
__device__ __forceinline__ void st_release_sys_b64(void* p, u64 v) {
    asm volatile("st.release.sys.global.b64 [%0], %1;" ::"l"(gaddr(p)), "l"(v) : "memory");
}
__device__ __forceinline__ void st_mmio_b64(void* p, u64 v) {
    asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(gaddr(p)), "l"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_gpu_b64(void* p, u64 v) {
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(gaddr(p)), "l"(v) : "memory");
}
__device__ __forceinline__ u64 ld_volatile_b64(const void* p) {
    u64 v;
    asm volatile("ld.volatile.global.b64 %0, [%1];" : "=l"(v) : "l"(gaddr(p)) : "memory");
    return v;
}
__device__ __forceinline__ u64 ld_relaxed_sys_b64(const void* p) {
    u64 v;
    asm volatile("ld.relaxed.sys.global.b64 %0, [%1];" : "=l"(v) : "l"(gaddr(p)) : "memory");
    return v;
}
__device__ __forceinline__ u64 ld_relaxed_gpu_b64(const void* p) {
    u64 v;
    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(gaddr(p)) : "memory");
    return v;
}
__device__ __forceinline__ u64 ld_acquire_gpu_b64(const void* p) {
    u64 v;
    asm volatile("ld.acquire.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(gaddr(p)) : "memory");
    return v;
}
__device__ __forceinline__ u64 ld_acquire_sys_b64(const void* p) {
    u64 v;
    asm volatile("ld.acquire.sys.global.b64 %0, [%1];" : "=l"(v) : "l"(gaddr(p)) : "memory");
    return v;
}
__device__ __forceinline__ u32 atom_cas_acquire_gpu_b32(u32* p, u32 expected, u32 desired) {
    u32 old;
    asm volatile("atom.acquire.gpu.global.cas.b32 %0, [%1], %2, %3;"
                 : "=r"(old)
                 : "l"(gaddr(p)), "r"(expected), "r"(desired)
                 : "memory");
    return old;
}
__device__ __forceinline__ void fence_release_gpu() { asm volatile("fence.release.gpu;" ::: "memory"); }
__device__ __forceinline__ void fence_acquire_gpu() { asm volatile("fence.acquire.gpu;" ::: "memory"); }
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
__device__ __forceinline__ u64 globaltimer() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}
} // namespace ptx
#endif

/* Every wait on a queue pair (room in the ring, a ticket, the queue pair, quiet, the
 * publication frontier) is bounded at run time by its descriptor's wait_ns (set per queue
 * pair by the host: QueuePair::set_device_wait) and then returns WAIT_DEADLINE. The
 * count starts at the wait's first failed check (the first expired() call, made only
 * inside a wait loop), so a wait that succeeds at once never reads the clock and the
 * posting path holds no clock read. An error CQE ends a wait with -(its syndrome). The
 * proxy's waits on its descriptor ring (proxy.cuh) take the same Deadline with their
 * ring's wait_ns. */
constexpr int WAIT_DEADLINE = layout::STATUS_DEADLINE;
struct Deadline {
    u64 t0 = 0; /* %globaltimer at the first expired() (0: not yet read) */
    /* A deadline counted from now, for a wait whose first check has just failed (no
     * initial 0 for the compiler to set up ahead of the wait, on the posting path). */
    __device__ __forceinline__ static Deadline from_now() {
        Deadline d;
        d.t0 = ptx::globaltimer();
        return d;
    }
    /* Whether `limit_ns` have passed since the first call (or from_now). */
    __device__ __forceinline__ bool expired(u64 limit_ns) {
        const u64 t = ptx::globaltimer();
        if (t0 == 0) t0 = t;
        return t - t0 > limit_ns;
    }
};

/* A bound on the test and benchmark harnesses' own waits (the sink's and the self-sink's
 * completers, the CUDA software NIC's idle bound): with IBGDA_SPIN_LIMIT_NS > 0 (a compile
 * option) such a wait gives up after that many ns of %globaltimer and reports
 * SPIN_TIMEOUT; with 0 (the default) it is unbounded and the bound compiles to nothing.
 * No wait of the library uses it: a queue pair's waits take its descriptor's wait_ns, the
 * proxy's ring waits (proxy.cuh) their ring's. */
#ifndef IBGDA_SPIN_LIMIT_NS
#define IBGDA_SPIN_LIMIT_NS 0ull
#endif
constexpr int SPIN_TIMEOUT = -0x400;
struct Spin {
    u64 t0 = 0;
    __device__ __forceinline__ bool expired() {
        if constexpr (IBGDA_SPIN_LIMIT_NS == 0) {
            return false;
        } else {
            const u64 t = ptx::globaltimer();
            if (t0 == 0) t0 = t;
            return t - t0 > IBGDA_SPIN_LIMIT_NS;
        }
    }
};

/* -------------------------------------------------------------------------------------
 * Ordering scopes: one tag per ibgda::order marker. Each provides
 *   ring(dbrec, record, db, value): the doorbell-record store and the doorbell store with
 *       the scope's ordering around them (its DEVICE_SEQUENCE "dbrec"/"db" part);
 *   cq_load(p), cq_acquire(): the load of a CQE's last word and what follows a valid one
 *       (the "cq" part);
 *   publish_release(): what a thread does before it marks its WQEs ready for another
 *       thread to ring (fence.acq_rel.gpu; none for Unordered). Not part of the doorbell
 *       sequence: only the shared paths (per thread, per warp) publish.
 * ----------------------------------------------------------------------------------- */
namespace scope {

/* Table 4 "None (unsafe control)". */
struct Unordered {
    static constexpr u32 KIND = layout::SCOPE_UNORDERED;
    __device__ __forceinline__ static void ring(u32* dbrec, u32 record, u64* db, u64 value) {
        ptx::st_relaxed_sys_b32(dbrec, record);
        ptx::st_mmio_b64(db, value);
    }
    __device__ __forceinline__ static u64 cq_load(const u64* p) { return ptx::ld_volatile_b64(p); }
    __device__ __forceinline__ static void cq_acquire() {}
    __device__ __forceinline__ static void publish_release() {}
};

/* Table 4 "GPU-scope fence" (DOCA GPUNetIO, NCCL GDAKI). */
struct GpuFence {
    static constexpr u32 KIND = layout::SCOPE_GPU_FENCE;
    __device__ __forceinline__ static void ring(u32* dbrec, u32 record, u64* db, u64 value) {
        ptx::st_relaxed_sys_b32(dbrec, record);
        ptx::fence_release_gpu();
        ptx::st_mmio_b64(db, value);
    }
    __device__ __forceinline__ static u64 cq_load(const u64* p) { return ptx::ld_relaxed_sys_b64(p); }
    __device__ __forceinline__ static void cq_acquire() { ptx::fence_acquire_gpu(); }
    __device__ __forceinline__ static void publish_release() { ptx::fence_acq_rel_gpu(); }
};

/* Table 4 "+ fenced doorbell record". */
struct GpuFencedDbrec {
    static constexpr u32 KIND = layout::SCOPE_GPU_FENCED_DBREC;
    __device__ __forceinline__ static void ring(u32* dbrec, u32 record, u64* db, u64 value) {
        ptx::fence_release_gpu();
        ptx::st_relaxed_sys_b32(dbrec, record);
        ptx::fence_release_gpu();
        ptx::st_mmio_b64(db, value);
    }
    __device__ __forceinline__ static u64 cq_load(const u64* p) { return ptx::ld_relaxed_sys_b64(p); }
    __device__ __forceinline__ static void cq_acquire() { ptx::fence_acquire_gpu(); }
    __device__ __forceinline__ static void publish_release() { ptx::fence_acq_rel_gpu(); }
};

/* Table 4 "GPU-scope release store" (DeepEP; NVSHMEM GPU-memory-only builds). */
struct GpuReleaseStore {
    static constexpr u32 KIND = layout::SCOPE_GPU_RELEASE_STORE;
    __device__ __forceinline__ static void ring(u32* dbrec, u32 record, u64* db, u64 value) {
        ptx::st_release_gpu_b32(dbrec, record);
        ptx::st_release_gpu_b64(db, value);
    }
    __device__ __forceinline__ static u64 cq_load(const u64* p) { return ptx::ld_acquire_gpu_b64(p); }
    __device__ __forceinline__ static void cq_acquire() {}
    __device__ __forceinline__ static void publish_release() { ptx::fence_acq_rel_gpu(); }
};

/* Table 4 "__threadfence()" (NVSHMEM's default). */
struct ThreadFence {
    static constexpr u32 KIND = layout::SCOPE_THREAD_FENCE;
    __device__ __forceinline__ static void ring(u32* dbrec, u32 record, u64* db, u64 value) {
        __threadfence();
        ptx::st_volatile_b32(dbrec, record);
        __threadfence();
        ptx::st_mmio_b64(db, value);
    }
    __device__ __forceinline__ static u64 cq_load(const u64* p) { return ptx::ld_volatile_b64(p); }
    __device__ __forceinline__ static void cq_acquire() { __threadfence(); }
    __device__ __forceinline__ static void publish_release() { ptx::fence_acq_rel_gpu(); }
};

/* Table 4 "System-scope release store". */
struct SystemReleaseStore {
    static constexpr u32 KIND = layout::SCOPE_SYSTEM_RELEASE_STORE;
    __device__ __forceinline__ static void ring(u32* dbrec, u32 record, u64* db, u64 value) {
        ptx::st_release_sys_b32(dbrec, record);
        ptx::st_release_sys_b64(db, value);
    }
    __device__ __forceinline__ static u64 cq_load(const u64* p) { return ptx::ld_acquire_sys_b64(p); }
    __device__ __forceinline__ static void cq_acquire() {}
    __device__ __forceinline__ static void publish_release() { ptx::fence_acq_rel_gpu(); }
};

/* Table 4 "System-scope fence" (NVSHMEM with queues in host memory). */
struct SystemFence {
    static constexpr u32 KIND = layout::SCOPE_SYSTEM_FENCE;
    __device__ __forceinline__ static void ring(u32* dbrec, u32 record, u64* db, u64 value) {
        __threadfence_system();
        ptx::st_volatile_b32(dbrec, record);
        __threadfence_system();
        ptx::st_mmio_b64(db, value);
    }
    __device__ __forceinline__ static u64 cq_load(const u64* p) { return ptx::ld_volatile_b64(p); }
    __device__ __forceinline__ static void cq_acquire() { __threadfence_system(); }
    __device__ __forceinline__ static void publish_release() { ptx::fence_acq_rel_gpu(); }
};

} // namespace scope

/* -------------------------------------------------------------------------------------
 * Octowords and segment encoding. A segment is assembled in registers as four 32-bit
 * words in memory order and stored with one 16-byte store. Field offsets come from the
 * generated layout; big-endian fields are byte-swapped.
 * ----------------------------------------------------------------------------------- */

struct alignas(16) Oct {
    u32 w[4];
};

__device__ __forceinline__ Oct oct_zero() { return Oct{{0u, 0u, 0u, 0u}}; }

/* Places a field at byte `off` (compile-time) of an octoword. */
template <u32 OFF> __device__ __forceinline__ void put_u8(Oct& o, u32 v) {
    static_assert(OFF < 16, "field inside the octoword");
    o.w[OFF / 4] |= (v & 0xffu) << ((OFF % 4) * 8);
}
template <u32 OFF> __device__ __forceinline__ void put_be16(Oct& o, u32 v) {
    put_u8<OFF>(o, v >> 8);
    put_u8<OFF + 1>(o, v);
}
template <u32 OFF> __device__ __forceinline__ void put_be32(Oct& o, u32 v) {
    static_assert(OFF % 4 == 0 && OFF < 16, "aligned 32-bit field");
    o.w[OFF / 4] = bswap32(v);
}
template <u32 OFF> __device__ __forceinline__ void put_be64(Oct& o, u64 v) {
    static_assert(OFF % 8 == 0 && OFF < 16, "aligned 64-bit field");
    o.w[OFF / 4] = bswap32((u32)(v >> 32));
    o.w[OFF / 4 + 1] = bswap32((u32)v);
}

/* The WQEBBs of one WQE in a ring: one pointer per WQEBB, so a WQE can run past the
 * ring's end and continue at slot 0 (mlx5-facts §2). */
struct WqeSlots {
    u8* ring;
    u32 mask;  /* ring WQEBBs - 1 */
    u32 start; /* free-running index of the first WQEBB (low 32 bits suffice) */
    __device__ __forceinline__ u8* octo(u32 i) const {
        return ring + ((u64)((start + (i >> 2)) & mask) << 6) + ((i & 3u) << 4);
    }
    __device__ __forceinline__ void put(u32 i, const Oct& o) const { *(Oct*)octo(i) = o; }
};

/* The control-segment fields a WQE (not the queue) decides. */
struct Ctrl {
    u32 qpn;
    u32 fm_ce_se;
    u32 stream_id;
    u32 imm;
};

__device__ __forceinline__ Ctrl ctrl(u32 qpn, u32 fm_ce_se) { return Ctrl{qpn, fm_ce_se, 0u, 0u}; }

__device__ __forceinline__ Oct ctrl_segment(u32 opmod, u32 index, u32 opcode, u32 ds, const Ctrl& c) {
    Oct o = oct_zero();
    put_be32<layout::CTRL_OPMOD_IDX_OPCODE>(o, (opmod << 24) | ((index & 0xffffu) << 8) | opcode);
    put_be32<layout::CTRL_QPN_DS>(o, (c.qpn << 8) | ds);
    put_be16<layout::CTRL_DCI_STREAM_CHANNEL_ID>(o, c.stream_id);
    put_u8<layout::CTRL_FM_CE_SE>(o, c.fm_ce_se);
    /* Only WRITE_WITH_IMM carries the immediate; every other opcode has 0 there (as the
     * host encoder writes it). */
    put_be32<layout::CTRL_IMM>(o, opcode == layout::OPCODE_RDMA_WRITE_IMM ? c.imm : 0u);
    return o;
}

__device__ __forceinline__ Oct raddr_segment(u64 raddr, u32 rkey) {
    Oct o = oct_zero();
    put_be64<layout::RADDR_RADDR>(o, raddr);
    put_be32<layout::RADDR_RKEY>(o, rkey);
    return o;
}

__device__ __forceinline__ Oct data_segment(u32 byte_count, u32 lkey, u64 addr) {
    Oct o = oct_zero();
    put_be32<layout::DATA_BYTE_COUNT>(o, byte_count);
    put_be32<layout::DATA_LKEY>(o, lkey);
    put_be64<layout::DATA_ADDR>(o, addr);
    return o;
}

/* Octowords an inline payload of `len` bytes takes with its header (none when empty). */
__host__ __device__ constexpr u32 inline_octowords(u32 len) {
    return len == 0 ? 0u : (layout::INLINE_HEADER_BYTES + len + layout::OCTOWORD_BYTES - 1) / layout::OCTOWORD_BYTES;
}

__host__ __device__ constexpr u32 wqebbs_for_ds(u32 ds) {
    return (ds * layout::OCTOWORD_BYTES + layout::WQEBB_BYTES - 1) / layout::WQEBB_BYTES;
}

/* -------------------------------------------------------------------------------------
 * Transports: RC (no address vector), DC with the compact or the full address vector.
 * A DC WQE copies its target's address-vector octowords (prepared by the host with the
 * Rust encoder) right after the control segment.
 * ----------------------------------------------------------------------------------- */
namespace transport {
struct Rc {
    static constexpr u32 AV_DS = 0;
};
struct DcCompact {
    static constexpr u32 AV_DS = layout::AV_COMPACT_BYTES / layout::OCTOWORD_BYTES;
};
struct DcFull {
    static constexpr u32 AV_DS = layout::AV_FULL_BYTES / layout::OCTOWORD_BYTES;
};
static_assert(1 + Rc::AV_DS + 2 == layout::DS_RC_WRITE_SGE, "RC WRITE DS");
static_assert(1 + DcCompact::AV_DS + 2 == layout::DS_DCC_WRITE_SGE, "DC compact WRITE DS");
static_assert(1 + DcFull::AV_DS + 2 == layout::DS_DCF_WRITE_SGE, "DC full WRITE DS");
static_assert(1 + Rc::AV_DS + 3 == layout::DS_RC_ATOMIC_1, "RC atomic DS");
static_assert(1 + DcFull::AV_DS + 4 == layout::DS_DCF_ATOMIC_2, "DC full masked CS8 DS");
} // namespace transport

/* The address vector of a DC WQE: AV_DS octowords. Unused for RC. */
struct Target {
    const Oct* av;
};

/* Every address-vector load before the first of its stores: a store between two loads
 * keeps them in order (the compiler cannot tell the vector from the ring), and the full
 * vector's three octowords then cost three load round trips. */
template <class T> __device__ __forceinline__ void put_target(const WqeSlots& s, const Target& t) {
    Oct av[T::AV_DS > 0 ? T::AV_DS : 1];
#pragma unroll
    for (u32 i = 0; i < T::AV_DS; i++) av[i] = t.av[i];
#pragma unroll
    for (u32 i = 0; i < T::AV_DS; i++) s.put(1 + i, av[i]);
}

/* --- the shapes of the Rust builders. Each returns its DS. ------------------------- */

/* RDMA WRITE (or WRITE_IMM when `imm_valid`) with one gather entry. */
template <class T>
__device__ __forceinline__ u32 build_write(const WqeSlots& s, const Ctrl& c, const Target& t, u64 raddr,
                                           u32 rkey, u64 laddr, u32 len, u32 lkey, bool with_imm) {
    const u32 ds = 1 + T::AV_DS + 2;
    s.put(0, ctrl_segment(0, s.start, with_imm ? layout::OPCODE_RDMA_WRITE_IMM : layout::OPCODE_RDMA_WRITE, ds, c));
    put_target<T>(s, t);
    s.put(1 + T::AV_DS, raddr_segment(raddr, rkey));
    s.put(2 + T::AV_DS, data_segment(len, lkey, laddr));
    return ds;
}

/* RDMA READ with one scatter entry. */
template <class T>
__device__ __forceinline__ u32 build_read(const WqeSlots& s, const Ctrl& c, const Target& t, u64 raddr, u32 rkey,
                                          u64 laddr, u32 len, u32 lkey) {
    const u32 ds = 1 + T::AV_DS + 2;
    s.put(0, ctrl_segment(0, s.start, layout::OPCODE_RDMA_READ, ds, c));
    put_target<T>(s, t);
    s.put(1 + T::AV_DS, raddr_segment(raddr, rkey));
    s.put(2 + T::AV_DS, data_segment(len, lkey, laddr));
    return ds;
}

/* RDMA WRITE of an 8-byte inline payload (the bytes of `value` in memory order): the
 * paper's one-operation case, in registers, one octoword for the payload. */
template <class T>
__device__ __forceinline__ u32 build_write_inline8(const WqeSlots& s, const Ctrl& c, const Target& t, u64 raddr,
                                                   u32 rkey, u64 value) {
    const u32 ds = 1 + T::AV_DS + 1 + inline_octowords(8);
    s.put(0, ctrl_segment(0, s.start, layout::OPCODE_RDMA_WRITE, ds, c));
    put_target<T>(s, t);
    s.put(1 + T::AV_DS, raddr_segment(raddr, rkey));
    Oct p = oct_zero();
    put_be32<layout::INLINE_HEADER_BYTE_COUNT>(p, 8u | layout::INLINE_SEGMENT_FLAG);
    p.w[1] = (u32)value;
    p.w[2] = (u32)(value >> 32);
    s.put(2 + T::AV_DS, p);
    return ds;
}

/* Inline octowords built per batch: every payload load of a batch is issued before the
 * batch's stores. The compiler cannot tell the payload from the ring, so a store between
 * two loads keeps them in order, and an octoword at a time cost one load round trip per
 * 16 B (108 ns on the H200, 2026-12-03); a batch costs one per 64 B. */
constexpr u32 INLINE_BATCH_OCTOWORDS = 4;

/* The control, address-vector and remote-address segments of an inline WRITE (WRITE_IMM
 * when `with_imm`) of `len` bytes; returns its DS. */
template <class T>
__device__ __forceinline__ u32 write_inline_head(const WqeSlots& s, const Ctrl& c, const Target& t, u64 raddr, u32 rkey,
                                                 u32 len, bool with_imm) {
    const u32 ds = 1 + T::AV_DS + 1 + inline_octowords(len);
    s.put(0, ctrl_segment(0, s.start, with_imm ? layout::OPCODE_RDMA_WRITE_IMM : layout::OPCODE_RDMA_WRITE, ds, c));
    put_target<T>(s, t);
    s.put(1 + T::AV_DS, raddr_segment(raddr, rkey));
    return ds;
}

/* RDMA WRITE (WRITE_IMM when `with_imm`) of an inline payload of `len` bytes read from
 * `words` (4-byte aligned by its type; it must not overlap the WQE's own slots),
 * zero-padded to the octoword: read a word at a time (the WQE's byte 4 + i is payload
 * byte i, so WQE word 1 + j is payload word j), only its last partial word byte by byte,
 * never a byte past `len`. */
template <class T>
__device__ __forceinline__ u32 build_write_inline_words(const WqeSlots& s, const Ctrl& c, const Target& t, u64 raddr,
                                                        u32 rkey, const u32* words, u32 len, bool with_imm) {
    const u32 ds = write_inline_head<T>(s, c, t, raddr, rkey, len, with_imm);
    static_assert(layout::INLINE_HEADER_BYTES == 4, "one header word");
    const u32 n = inline_octowords(len);
    const u8* bytes = (const u8*)words;
    const u32 whole = len / 4;
    for (u32 k0 = 0; k0 < n; k0 += INLINE_BATCH_OCTOWORDS) {
        Oct o[INLINE_BATCH_OCTOWORDS];
#pragma unroll
        for (u32 q = 0; q < INLINE_BATCH_OCTOWORDS; q++) {
#pragma unroll
            for (u32 j = 0; j < 4; j++) {
                const int w = (int)(4 * (k0 + q) + j) - 1;
                u32 v = 0u;
                if (w < 0) {
                    v = bswap32(len | layout::INLINE_SEGMENT_FLAG);
                } else if ((u32)w < whole) {
                    v = words[w];
                } else if ((u32)w == whole) {
                    for (u32 b = 0; b < (len & 3u); b++) v |= (u32)bytes[4 * whole + b] << (8 * b);
                }
                o[q].w[j] = v;
            }
        }
#pragma unroll
        for (u32 q = 0; q < INLINE_BATCH_OCTOWORDS; q++) {
            if (k0 + q < n) s.put(2 + T::AV_DS + k0 + q, o[q]);
        }
    }
    return ds;
}

/* RDMA WRITE (WRITE_IMM when `with_imm`) of an inline payload of `len` bytes read from
 * `payload` (any alignment; it must not overlap the WQE's own slots), zero-padded to the
 * octoword. A 4-byte aligned payload goes through build_write_inline_words (a caller
 * whose payload is aligned by its type calls that directly, with no alignment test);
 * any other is read byte by byte, never a byte past `len`. */
template <class T>
__device__ __forceinline__ u32 build_write_inline(const WqeSlots& s, const Ctrl& c, const Target& t, u64 raddr,
                                                  u32 rkey, const u8* payload, u32 len, bool with_imm) {
    if (((u64)payload & 3u) == 0)
        return build_write_inline_words<T>(s, c, t, raddr, rkey, (const u32*)payload, len, with_imm);
    const u32 ds = write_inline_head<T>(s, c, t, raddr, rkey, len, with_imm);
    const u32 n = inline_octowords(len);
    for (u32 k = 0; k < n; k++) {
        Oct o = oct_zero();
        for (u32 j = 0; j < 16; j++) {
            const int p = (int)(16 * k + j) - (int)layout::INLINE_HEADER_BYTES;
            u32 b;
            if (p < 0) {
                const u32 header = len | layout::INLINE_SEGMENT_FLAG;
                b = (header >> (8 * (3 - j))) & 0xffu; /* big-endian header, bytes 0..3 */
            } else {
                b = (u32)p < len ? payload[p] : 0u;
            }
            o.w[j / 4] |= b << ((j % 4) * 8);
        }
        s.put(2 + T::AV_DS + k, o);
    }
    return ds;
}

/* The atomic operations, with their operands as the Rust AtomicOp holds them. */
enum class AtomicKind : u32 { CompareSwap, FetchAdd, MaskedCompareSwap4, MaskedCompareSwap8, MaskedFetchAdd4, MaskedFetchAdd8 };

/* An atomic (`op0` = swap or add, `op1` = compare or field boundary, `op2` = swap mask,
 * `op3` = compare mask) returning the original value to `result`. */
template <class T>
__device__ __forceinline__ u32 build_atomic(const WqeSlots& s, const Ctrl& c, const Target& t, AtomicKind kind,
                                            u64 raddr, u32 rkey, u64 result, u32 lkey, u64 op0, u64 op1, u64 op2,
                                            u64 op3) {
    const bool two = kind == AtomicKind::MaskedCompareSwap8;
    const u32 ds = 1 + T::AV_DS + 1 + (two ? 2u : 1u) + 1;
    u32 opcode, opmod = 0, bytes = 8;
    switch (kind) {
    case AtomicKind::CompareSwap: opcode = layout::OPCODE_ATOMIC_CS; break;
    case AtomicKind::FetchAdd: opcode = layout::OPCODE_ATOMIC_FA; break;
    case AtomicKind::MaskedCompareSwap4: opcode = layout::OPCODE_ATOMIC_MASKED_CS; opmod = layout::OPMOD_ATOMIC_4; bytes = 4; break;
    case AtomicKind::MaskedCompareSwap8: opcode = layout::OPCODE_ATOMIC_MASKED_CS; opmod = layout::OPMOD_ATOMIC_8; break;
    case AtomicKind::MaskedFetchAdd4: opcode = layout::OPCODE_ATOMIC_MASKED_FA; opmod = layout::OPMOD_ATOMIC_4; bytes = 4; break;
    default: opcode = layout::OPCODE_ATOMIC_MASKED_FA; opmod = layout::OPMOD_ATOMIC_8; break;
    }
    s.put(0, ctrl_segment(opmod, s.start, opcode, ds, c));
    put_target<T>(s, t);
    s.put(1 + T::AV_DS, raddr_segment(raddr, rkey));
    Oct a = oct_zero();
    switch (kind) {
    case AtomicKind::CompareSwap:
        put_be64<layout::ATOMIC_SWAP_ADD>(a, op0);
        put_be64<layout::ATOMIC_COMPARE>(a, op1);
        break;
    case AtomicKind::FetchAdd:
        put_be64<layout::ATOMIC_SWAP_ADD>(a, op0);
        break;
    case AtomicKind::MaskedCompareSwap4:
        put_be32<layout::MASKED_CS4_SWAP>(a, (u32)op0);
        put_be32<layout::MASKED_CS4_COMPARE>(a, (u32)op1);
        put_be32<layout::MASKED_CS4_SWAP_MASK>(a, (u32)op2);
        put_be32<layout::MASKED_CS4_COMPARE_MASK>(a, (u32)op3);
        break;
    case AtomicKind::MaskedCompareSwap8: {
        static_assert(layout::MASKED_CS8_SWAP_MASK == 16 && layout::MASKED_CS8_COMPARE_MASK == 24,
                      "masks in the second octoword");
        put_be64<layout::MASKED_CS8_SWAP>(a, op0);
        put_be64<layout::MASKED_CS8_COMPARE>(a, op1);
        Oct b = oct_zero();
        put_be64<layout::MASKED_CS8_SWAP_MASK - 16>(b, op2);
        put_be64<layout::MASKED_CS8_COMPARE_MASK - 16>(b, op3);
        s.put(3 + T::AV_DS, b); /* may sit across a WQEBB boundary from the first */
        break;
    }
    case AtomicKind::MaskedFetchAdd4:
        put_be32<layout::MASKED_FA4_ADD>(a, (u32)op0);
        put_be32<layout::MASKED_FA4_FIELD_BOUNDARY>(a, (u32)op1);
        break;
    default:
        put_be64<layout::MASKED_FA8_ADD>(a, op0);
        put_be64<layout::MASKED_FA8_FIELD_BOUNDARY>(a, op1);
        break;
    }
    s.put(2 + T::AV_DS, a);
    s.put(ds - 1, data_segment(bytes, lkey, result));
    return ds;
}

/* NOP (no address vector on any transport). */
__device__ __forceinline__ u32 build_nop(const WqeSlots& s, const Ctrl& c) {
    s.put(0, ctrl_segment(0, s.start, layout::OPCODE_NOP, layout::DS_NOP, c));
    return layout::DS_NOP;
}

/* DUMP of one local buffer (no address vector on any transport). */
__device__ __forceinline__ u32 build_dump(const WqeSlots& s, const Ctrl& c, u64 laddr, u32 len, u32 lkey) {
    s.put(0, ctrl_segment(0, s.start, layout::OPCODE_DUMP, layout::DS_DUMP, c));
    s.put(1, data_segment(len, lkey, laddr));
    return layout::DS_DUMP;
}

/* -------------------------------------------------------------------------------------
 * Queue access: the descriptor the host made (by value), its memory, the doorbell value.
 * ----------------------------------------------------------------------------------- */

/* Whether [from, to) crosses a multiple of `interval` (to > from): a bit test when the
 * interval is a power of two (the host's default and every queue of the experiments), a
 * 64-bit division (a subroutine call of some 20 dependent instructions, twice) only
 * otherwise. It sits on the dependency chain of every WQE a shared-protocol lane builds. */
__device__ __forceinline__ bool crosses_multiple(u64 from, u64 to, u64 interval) {
    if ((interval & (interval - 1)) == 0) return (from ^ to) >= interval;
    return to / interval > from / interval;
}
/* The last multiple of `interval` at or below `v` (power of two: a mask). */
__device__ __forceinline__ u64 round_down(u64 v, u64 interval) {
    if ((interval & (interval - 1)) == 0) return v & ~(interval - 1);
    return v / interval * interval;
}

/* The 8-byte doorbell announcing everything before `next` on queue `qpn`, and the
 * doorbell record's send counter (Queue::doorbell_value, Queue::dbrec_value). */
__device__ __forceinline__ u64 doorbell_word(u64 next, u32 qpn) {
    const u64 lo = bswap32(((u32)next & 0xffffu) << 8);
    const u64 hi = bswap32(qpn << 8);
    return lo | (hi << 32);
}
__device__ __forceinline__ u32 dbrec_word(u64 next) { return bswap32((u32)next & 0xffffu); }

struct Queue {
    DeviceQueueDescriptor d;

    __device__ __forceinline__ DeviceProducerState* state() const { return (DeviceProducerState*)d.state; }
    __device__ __forceinline__ u32 capacity() const { return 1u << d.log_sq_wqebbs; }
    __device__ __forceinline__ WqeSlots slots(u64 start) const {
        return WqeSlots{(u8*)d.sq_ring, capacity() - 1, (u32)start};
    }
    /* The 8-byte doorbell announcing everything before `next`: bytes 0..8 of a control
     * segment with index = next free WQEBB, opcode 0, ds 0 (as NVSHMEM, DOCA and the host
     * shared queue ring). */
    __device__ __forceinline__ u64 doorbell_value(u64 next) const { return doorbell_word(next, d.qpn); }
    /* The send counter of the doorbell record: big-endian next free WQEBB & 0xffff. */
    __device__ __forceinline__ u32 dbrec_value(u64 next) const { return dbrec_word(next); }
    /* Whether a WQE occupying [at, at + wqebbs) must be signaled: it crosses a multiple of
     * the signal interval (the host queues' rule), so a full ring always holds one. */
    __device__ __forceinline__ bool must_signal(u64 at, u32 wqebbs) const {
        return crosses_multiple(at, at + wqebbs, d.signal_interval);
    }
    /* The size in WQEBBs of the WQE starting at `at`, from its control segment's DS. */
    __device__ __forceinline__ u32 wqebbs_at(u64 at) const {
        const u8* p = slots(at).octo(0) + layout::CTRL_QPN_DS + 3;
        const u32 ds = *p & layout::MAX_DS;
        return ds == 0 ? 1u : wqebbs_for_ds(ds);
    }
    template <class S> __device__ __forceinline__ void ring(u64 next) const {
        S::ring((u32*)d.sq_dbrec, dbrec_value(next), (u64*)d.doorbell, doorbell_value(next));
    }
};

/* Traps (a launch failure the host sees as an error) when code instantiated for scope S
 * is handed a descriptor made for another scope. The host's typed launchers only pass a
 * descriptor to the instance of its own scope; this catches raw launches and a user kernel
 * whose name says one scope while its body posts with another. One compare of a kernel
 * parameter, outside every issue loop: where the exclusive producer loads its queue, and
 * where the shared protocol waits for room, polls and rings. */
template <class S> __device__ __forceinline__ void check_scope(const DeviceQueueDescriptor& d) {
    if (d.scope != S::KIND) __trap();
}

/* What one CQ poll found. */
struct Polled {
    int status;     /* 1: CQEs consumed; 0: none; <0: -(syndrome) of an error CQE, or -0x100 stray */
    u64 retired_to; /* every WQEBB before it is complete (when status != 0) */
};

constexpr int POLL_STRAY = -0x100;

/* The CQ entry a poll at `consumer` reads: the ring's slot, or entry 0 in collapsed mode. */
__device__ __forceinline__ u32 cqe_slot(const Queue& q, u64 consumer) {
    return q.d.cq_mode ? 0u : (u32)consumer & ((1u << q.d.log_cq_entries) - 1u);
}

/* The last word of the CQE a poll at `consumer` reads, with the scope's load. */
template <class S> __device__ __forceinline__ u64 cqe_tail_load(const Queue& q, u64 consumer) {
    static_assert(layout::CQE_SOP_DROP_QPN + 8 == layout::CQE_BYTES, "last word of a CQE");
    const u64* last =
        (const u64*)(q.d.cq_ring + (u64)cqe_slot(q, consumer) * layout::CQE_BYTES + layout::CQE_SOP_DROP_QPN);
    return S::cq_load(last);
}

/* Whether a CQE's last word, read at `consumer`, is a new entry: a valid opcode and (ring
 * mode) the owner bit of this lap, or (collapsed mode) a WQE counter not yet seen. */
__device__ __forceinline__ bool cqe_tail_valid(const Queue& q, u64 consumer, u32 collapsed_seen, u64 tail) {
    const u32 op_own = (u32)(tail >> 56);
    if ((op_own >> 4) == layout::CQE_OPCODE_INVALID) return false;
    if (q.d.cq_mode) {
        const u32 counter = ((u32)(tail >> 32) & 0xffu) << 8 | ((u32)(tail >> 40) & 0xffu);
        return counter + 1 != collapsed_seen;
    }
    const u32 parity = ((u32)(consumer >> q.d.log_cq_entries)) & 1u;
    return (op_own & 1u) == parity;
}

/* Reads the CQE at `consumer` (ring mode: owner bit) or entry 0 (collapsed mode: a new WQE
 * counter) with the scope's load; on a valid entry, the scope's acquire. Returns whether
 * one was found, its last word in `tail`. */
template <class S>
__device__ __forceinline__ bool cqe_ready(const Queue& q, u64 consumer, u32 collapsed_seen, u64& tail, u32& slot) {
    slot = cqe_slot(q, consumer);
    tail = cqe_tail_load<S>(q, consumer);
    if (!cqe_tail_valid(q, consumer, collapsed_seen, tail)) return false;
    S::cq_acquire();
    return true;
}

/* Decodes a valid CQE's last word: the WQE counter and the error syndrome (0 if none). */
__device__ __forceinline__ u32 cqe_counter(u64 tail) {
    static_assert(layout::CQE_WQE_COUNTER == layout::CQE_SOP_DROP_QPN + 4, "counter after sop_drop_qpn");
    return ((u32)(tail >> 32) & 0xffu) << 8 | ((u32)(tail >> 40) & 0xffu);
}
__device__ __forceinline__ u32 cqe_qpn(u64 tail) { return bswap32((u32)tail) & layout::QPN_MAX; }

/* -------------------------------------------------------------------------------------
 * The exclusive producer: one thread owns the queue pair (mini-gda's model, one thread
 * per QP). Its counters live in registers between load() and store(); reserving, posting,
 * ringing and polling touch no shared counter, so the doorbell path holds only the WQE
 * stores, the doorbell record and the doorbell with the scope's ordering.
 * ----------------------------------------------------------------------------------- */
template <class S> struct Exclusive {
    Queue q;
    u64 next;     /* next WQEBB to fill */
    u64 retired;  /* every WQEBB before it is complete */
    u64 consumer; /* CQEs consumed */
    u32 collapsed_seen;

    __device__ __forceinline__ static Exclusive load(const DeviceQueueDescriptor& d) {
        check_scope<S>(d);
        Exclusive e;
        e.q = Queue{d};
        const DeviceProducerState* st = e.q.state();
        e.next = st->reserved;
        e.retired = st->retired;
        e.consumer = st->cq_consumer;
        e.collapsed_seen = st->collapsed_seen;
        return e;
    }
    /* Writes the counters back (for a later kernel, or another owner). */
    __device__ __forceinline__ void store() const {
        DeviceProducerState* st = q.state();
        st->reserved = next;
        st->ready = next;
        st->posted = next;
        st->retired = retired;
        st->cq_consumer = consumer;
        st->collapsed_seen = collapsed_seen;
    }
    __device__ __forceinline__ u32 free_wqebbs() const { return q.capacity() - (u32)(next - retired); }

    /* Slots for `wqebbs` more, or false when the ring has no room (poll first). */
    __device__ __forceinline__ bool reserve(u32 wqebbs, WqeSlots& s) {
        if (wqebbs > free_wqebbs()) return false;
        s = q.slots(next);
        return true;
    }
    /* Marks `wqebbs` written at the reservation (the caller set CQ_UPDATE in the flags it
     * built with, by q.must_signal or its own choice). Returns the ticket (end counter). */
    __device__ __forceinline__ u64 commit(u32 wqebbs) {
        next += wqebbs;
        return next;
    }
    /* Doorbell record and doorbell for everything written. */
    __device__ __forceinline__ void ring() const { q.template ring<S>(next); }

    /* One poll of the CQ: consumes at most one CQE and retires the WQEs it covers. */
    __device__ __forceinline__ Polled poll() {
        u64 tail;
        u32 slot;
        if (!cqe_ready<S>(q, consumer, collapsed_seen, tail, slot)) return Polled{0, retired};
        const u32 counter = cqe_counter(tail);
        consumer++;
        if (q.d.cq_mode) {
            collapsed_seen = counter + 1;
        } else {
            ptx::st_relaxed_sys_b32((void*)q.d.cq_dbrec, bswap32((u32)consumer & 0xffffffu));
        }
        const u64 start = retired + (u16)(counter - (u16)retired);
        if (start >= next || cqe_qpn(tail) != q.d.qpn) return Polled{POLL_STRAY, retired};
        retired = start + q.wqebbs_at(start);
        const u32 opcode = (u32)(tail >> 60);
        if (opcode == layout::CQE_OPCODE_REQ_ERR) {
            const u8* e = (const u8*)(q.d.cq_ring + (u64)slot * layout::CQE_BYTES);
            return Polled{-(int)e[layout::ERR_CQE_SYNDROME], retired};
        }
        return Polled{1, retired};
    }
    /* Polls until every WQEBB before `ticket` is complete; the first error wins. */
    __device__ __forceinline__ int wait(u64 ticket) {
        if (retired >= ticket) return 0;
        Deadline dl = Deadline::from_now();
        while (retired < ticket) {
            const Polled p = poll();
            if (p.status < 0) return p.status;
            if (dl.expired(q.d.wait_ns)) return WAIT_DEADLINE;
        }
        return 0;
    }
};

/* -------------------------------------------------------------------------------------
 * The warp-exclusive producer: one warp owns the queue pair (the exclusive producer's
 * model with a warp as the owner, as when every warp of a kernel has a QP of its own).
 * Every lane holds the same copy of the counters; each call is made by all 32 lanes
 * together with the same arguments except the lane's own WQE, so every branch below is
 * warp-uniform. A round is 32 WQEs, one per lane, built in lockstep; lane 0 alone polls
 * and rings, after a __syncwarp (which orders the other lanes' WQE stores before lane 0's
 * doorbell sequence, whose scope fence is cumulative). Against the shared protocol's warp
 * post it drops the reservation atomic, the frontier's acquire and the release store of
 * `ready`: the doorbell path is the WQE stores, the record and the doorbell with the
 * scope's ordering, as for one thread. The launch contract is Exclusive<S>'s, for the warp:
 * nothing else posts on the queue between load() and store().
 * ----------------------------------------------------------------------------------- */
template <class S> struct WarpExclusive {
    Exclusive<S> e;

    /* Every lane loads the same counters (one broadcast load per word). */
    __device__ __forceinline__ static WarpExclusive load(const DeviceQueueDescriptor& d) {
        return WarpExclusive{Exclusive<S>::load(d)};
    }
    /* Lane 0 writes the counters back. */
    __device__ __forceinline__ void store() const {
        if ((threadIdx.x & 31u) == 0) e.store();
    }
    /* Gives every lane lane 0's counters after lane 0 polled alone. */
    __device__ __forceinline__ void share_polled() {
        e.retired = __shfl_sync(0xffffffffu, e.retired, 0);
        e.consumer = __shfl_sync(0xffffffffu, e.consumer, 0);
        e.collapsed_seen = __shfl_sync(0xffffffffu, e.collapsed_seen, 0);
    }
    /* Until the ring has room for `wqebbs` more (everything before next + wqebbs -
     * capacity retired; no underflow, as the ring is short of room): lane 0 waits, the
     * warp learns what it retired. Returns 0, or the first error (error completion,
     * WAIT_DEADLINE), to every lane. */
    __device__ __forceinline__ int make_room(u32 wqebbs) {
        if (wqebbs <= e.free_wqebbs()) return 0;
        return wait(e.next + wqebbs - e.q.capacity());
    }
    /* One round: every lane's 8-byte inline RC WRITE (`signal_last`: the round's last WQE
     * signaled whatever the interval says, for a wait on the round's ticket), one WQEBB
     * each, then the doorbell when `ring_now`. Returns the round's ticket (end counter) or,
     * when the ring never made room, the error (negative) in `status`. */
    __device__ __forceinline__ u64 post_write_inline8(u64 raddr, u32 rkey, u64 value, bool signal_last, bool ring_now,
                                                      int* status) {
        constexpr u32 W = wqebbs_for_ds(layout::DS_RC_WRITE_SGE);
        static_assert(W == 1, "one WQEBB per lane");
        const int r = make_room(32u * W);
        if (r < 0) {
            *status = r;
            return e.next;
        }
        const u32 lane = threadIdx.x & 31u;
        const u64 mine = e.next + lane * W;
        const bool signaled = e.q.must_signal(mine, W) || (signal_last && lane == 31u);
        build_write_inline8<transport::Rc>(e.q.slots(mine), ctrl(e.q.d.qpn, signaled ? layout::FM_CE_SE_CQ_UPDATE : 0u),
                                           Target{nullptr}, raddr, rkey, value);
        const u64 ticket = e.commit(32u * W);
        if (ring_now) ring();
        return ticket;
    }
    /* The doorbell record and doorbell for everything posted, by lane 0 after every lane's
     * stores. */
    __device__ __forceinline__ void ring() const {
        __syncwarp();
        if ((threadIdx.x & 31u) == 0) e.ring();
        __syncwarp();
    }
    /* Lane 0 polls until every WQEBB before `ticket` is complete; every lane returns its
     * status and learns the counters. */
    __device__ __forceinline__ int wait(u64 ticket) {
        int status = 0;
        if ((threadIdx.x & 31u) == 0) status = e.wait(ticket);
        share_polled();
        /* Lane 0's CQE acquire before every lane's later stores into the slots it retired
         * (a shuffle orders no memory; the warp barrier does). */
        __syncwarp();
        return __shfl_sync(0xffffffffu, status, 0);
    }
};

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
/* -------------------------------------------------------------------------------------
 * The block-exclusive producer: one block owns the queue pair (NVSHMEM's QP-per-CTA
 * mapping), and its warps share it through counters in the block's shared memory. The
 * shared protocol's steps, with every shared word in shared memory and every hand-off at
 * CTA scope: a warp reserves 32 WQEBBs with a shared-memory atomic, its lanes build their
 * WQEs, and lane 0 publishes in reservation order (waits until the frontier `ready`
 * equals its start, rings if its WQEs cross a multiple of the batch or nobody reserved
 * after them, then moves `ready` on with a CTA-scope release). The doorbell path keeps
 * the scope's full sequence (its fence orders this warp's WQE stores, and those of every
 * earlier publisher acquired through the frontier, before the record and the doorbell:
 * the hand-off is a release/acquire pair within the CTA, and causality order carries
 * through it to the scope's fence). Doorbells are rung in counter order for the same
 * reason as in the shared protocol: each ringer's doorbell precedes the next ringer's in
 * causality order, so in coherence order. What the block saves is the hand-off: a
 * shared-memory store and load instead of a GPU-scope release and an L2 round trip.
 * The CQ is polled by one warp at a time (a shared-memory lock).
 * Launch contract (Exclusive<S>'s, for the block): nothing outside the block posts on the
 * queue between load() and store(); every thread of the block calls load() and store()
 * (they synchronize the block). A reservation whose room or frontier wait ended in an
 * error is never published: the queue stops there (later warps' frontier waits end at
 * their deadline), and store() keeps only what was published.
 * Device builds only: the host builds (host_shim.h, IBGDA_HOST_THREADS) have no shared
 * memory.
 * ----------------------------------------------------------------------------------- */
struct BlockQueueCounters {
    u64 reserved; /* next WQEBB to hand out */
    u64 ready;    /* every WQEBB before it is published */
    u64 retired;  /* every WQEBB before it is complete */
    u64 consumer; /* CQEs consumed */
    u32 collapsed_seen;
    u32 poll_lock; /* 0 free, 1 held */
};

/* CTA-scope operations on shared memory (inline PTX, each one known instruction). */
namespace cta {
__device__ __forceinline__ u32 saddr(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ u64 ld_acquire_b64(const u64* p) {
    u64 v;
    asm volatile("ld.acquire.cta.shared::cta.b64 %0, [%1];" : "=l"(v) : "r"(saddr(p)) : "memory");
    return v;
}
__device__ __forceinline__ u64 ld_relaxed_b64(const u64* p) {
    u64 v;
    asm volatile("ld.relaxed.cta.shared::cta.b64 %0, [%1];" : "=l"(v) : "r"(saddr(p)) : "memory");
    return v;
}
__device__ __forceinline__ void st_release_b64(u64* p, u64 v) {
    asm volatile("st.release.cta.shared::cta.b64 [%0], %1;" ::"r"(saddr(p)), "l"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_b64(u64* p, u64 v) {
    asm volatile("st.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(saddr(p)), "l"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_b32(u32* p, u32 v) {
    asm volatile("st.relaxed.cta.shared::cta.b32 [%0], %1;" ::"r"(saddr(p)), "r"(v) : "memory");
}
__device__ __forceinline__ u32 ld_relaxed_b32(const u32* p) {
    u32 v;
    asm volatile("ld.relaxed.cta.shared::cta.b32 %0, [%1];" : "=r"(v) : "r"(saddr(p)) : "memory");
    return v;
}
__device__ __forceinline__ void st_release_b32(u32* p, u32 v) {
    asm volatile("st.release.cta.shared::cta.b32 [%0], %1;" ::"r"(saddr(p)), "r"(v) : "memory");
}
__device__ __forceinline__ u64 fetch_add_b64(u64* p, u64 v) {
    u64 old;
    asm volatile("atom.relaxed.cta.shared::cta.add.u64 %0, [%1], %2;" : "=l"(old) : "r"(saddr(p)), "l"(v) : "memory");
    return old;
}
__device__ __forceinline__ bool try_lock(u32* p) {
    u32 old;
    asm volatile("atom.acquire.cta.shared::cta.cas.b32 %0, [%1], %2, %3;"
                 : "=r"(old)
                 : "r"(saddr(p)), "r"(0u), "r"(1u)
                 : "memory");
    return old == 0u;
}
} // namespace cta

template <class S> struct BlockExclusive {
    Queue q;               /* each thread's copy of the descriptor */
    BlockQueueCounters* c; /* the block's counters, in shared memory */

    /* Every thread of the block, with the same descriptor and the same shared counters:
     * thread 0 loads the queue's counters into them (Exclusive<S>::load), then the block
     * synchronizes. */
    __device__ __forceinline__ static BlockExclusive load(const DeviceQueueDescriptor& d, BlockQueueCounters* counters) {
        check_scope<S>(d);
        BlockExclusive b{Queue{d}, counters};
        if (threadIdx.x == 0) {
            const Exclusive<S> e = Exclusive<S>::load(d);
            counters->reserved = e.next;
            counters->ready = e.next;
            counters->retired = e.retired;
            counters->consumer = e.consumer;
            counters->collapsed_seen = e.collapsed_seen;
            counters->poll_lock = 0;
        }
        __syncthreads();
        return b;
    }
    /* The block's counters as the exclusive producer's, `next` the published frontier
     * (acquired: every WQE before it written). */
    __device__ __forceinline__ static Exclusive<S> exclusive(const Queue& q, const BlockQueueCounters* c) {
        Exclusive<S> e;
        e.q = q;
        e.next = cta::ld_acquire_b64(&c->ready);
        e.retired = cta::ld_relaxed_b64(&c->retired);
        e.consumer = cta::ld_relaxed_b64(&c->consumer);
        e.collapsed_seen = cta::ld_relaxed_b32(&c->collapsed_seen);
        return e;
    }
    /* Every thread of the block: after the block synchronizes, thread 0 writes back what
     * was published (Exclusive<S>::store; an unpublished reservation was never rung: its
     * slots are free). */
    __device__ __forceinline__ void store() const {
        __syncthreads();
        if (threadIdx.x == 0) exclusive(q, c).store();
    }
    /* The publication frontier (relaxed for Unordered, which orders nothing). */
    __device__ __forceinline__ u64 frontier() const {
        if constexpr (S::KIND == layout::SCOPE_UNORDERED) {
            return cta::ld_relaxed_b64(&c->ready);
        } else {
            return cta::ld_acquire_b64(&c->ready);
        }
    }
    /* One poll of the CQ by whichever warp holds the poll lock (others return at once):
     * Exclusive<S>::poll on the block's counters, WQEs up to the frontier announced.
     * Returns what it retired to (or, without the lock, the counter as loaded). Out of
     * line, the queue by value (a reference would put the caller's copy on its stack). */
    __device__ __noinline__ static Polled poll(const Queue q, BlockQueueCounters* c) {
        if (!cta::try_lock(&c->poll_lock)) return Polled{0, cta::ld_acquire_b64(&c->retired)};
        Exclusive<S> e = exclusive(q, c);
        const Polled p = e.poll();
        cta::st_relaxed_b64(&c->consumer, e.consumer);
        cta::st_relaxed_b32(&c->collapsed_seen, e.collapsed_seen);
        /* Whoever reads the new count next reuses the slots it frees: a release. */
        cta::st_release_b64(&c->retired, e.retired);
        cta::st_release_b32(&c->poll_lock, 0u);
        return Polled{p.status, e.retired};
    }
    /* Lane 0: polls until every WQEBB before `ticket` is complete (0), or the first
     * error (error completion, WAIT_DEADLINE). */
    __device__ __forceinline__ int wait_lane(u64 ticket) {
        u64 retired = cta::ld_acquire_b64(&c->retired);
        if (retired >= ticket) return 0;
        Deadline dl = Deadline::from_now();
        while (retired < ticket) {
            const Polled p = poll(q, c);
            if (p.status < 0) return p.status;
            retired = p.retired_to;
            if (retired < ticket && dl.expired(q.d.wait_ns)) return WAIT_DEADLINE;
        }
        return 0;
    }
    /* Lane 0: publishes [start, end) after every earlier reservation, ringing when the
     * WQEs cross a multiple of `batch` or nobody reserved after them. */
    __device__ __forceinline__ int publish_lane(u64 start, u64 end, u32 batch) {
        if (frontier() != start) {
            Deadline dl = Deadline::from_now();
            while (frontier() != start) {
                if (dl.expired(q.d.wait_ns)) return WAIT_DEADLINE;
            }
        }
        /* This lane holds the frontier until it moves `ready` on. */
        if (end / batch > start / batch || cta::ld_relaxed_b64(&c->reserved) == end) {
            q.template ring<S>(end);
        }
        /* The next publisher's doorbell (and the WQEs it announces) follow this one's. */
        if constexpr (S::KIND == layout::SCOPE_UNORDERED) {
            cta::st_relaxed_b64(&c->ready, end);
        } else {
            cta::st_release_b64(&c->ready, end);
        }
        return 0;
    }
    /* One round by the 32 lanes of a warp together: each lane's 8-byte inline RC WRITE in
     * its own WQEBB (`signal_last`: the round's last WQE signaled whatever the interval
     * says, for a wait on the round's ticket), published in reservation order. Returns
     * the round's ticket (end counter); an error (negative) goes to `status` of every
     * lane, and the round is then not published. */
    __device__ __forceinline__ u64 post_write_inline8_warp(u64 raddr, u32 rkey, u64 value, bool signal_last, u32 batch,
                                                           int* status) {
        constexpr u32 W = wqebbs_for_ds(layout::DS_RC_WRITE_SGE);
        static_assert(W == 1, "one WQEBB per lane");
        const u32 lane = threadIdx.x & 31u;
        u64 start = 0;
        int err = 0;
        if (lane == 0) {
            start = cta::fetch_add_b64(&c->reserved, 32ull * W);
            if (cta::ld_acquire_b64(&c->retired) + q.capacity() < start + 32ull * W) {
                err = wait_lane(start + 32ull * W - q.capacity());
            }
        }
        start = __shfl_sync(0xffffffffu, start, 0);
        err = __shfl_sync(0xffffffffu, err, 0);
        const u64 end = start + 32ull * W;
        if (err < 0) {
            *status = err;
            return end;
        }
        /* Lane 0's acquire of the retired count (the slots' last WQEs read by the NIC)
         * before every lane's stores into them: a shuffle orders no memory, the warp
         * barrier does. */
        __syncwarp();
        const u64 mine = start + lane * W;
        const bool signaled = q.must_signal(mine, W) || (signal_last && lane == 31u);
        build_write_inline8<transport::Rc>(q.slots(mine), ctrl(q.d.qpn, signaled ? layout::FM_CE_SE_CQ_UPDATE : 0u),
                                           Target{nullptr}, raddr, rkey, value);
        /* The lanes' WQE stores before lane 0's publication (its scope fence, or the
         * frontier's release, is cumulative over them). */
        __syncwarp();
        if (lane == 0) err = publish_lane(start, end, batch);
        err = __shfl_sync(0xffffffffu, err, 0);
        if (err < 0) *status = err;
        return end;
    }
    /* By the 32 lanes of a warp together: lane 0 polls until every WQEBB before `ticket`
     * is complete; every lane returns its status. */
    __device__ __forceinline__ int wait(u64 ticket) {
        int status = 0;
        if ((threadIdx.x & 31u) == 0) status = wait_lane(ticket);
        return __shfl_sync(0xffffffffu, status, 0);
    }
};
#endif

/* -------------------------------------------------------------------------------------
 * The occasional sender: a warp of a kernel that does other work (a compute or a
 * streaming caller) posts now and then on a queue it owns, as the exclusive producer,
 * with the queue's counters left in its producer state in memory between posts. Built
 * so that the code costs the enclosing kernel next to nothing where it does not run
 * (ptxas, sm_90: the compute caller of the dormant-cost experiment 29 -> 32 registers,
 * the streaming caller 43 -> 45, where Exclusive<S> inlined cost 56 and 64):
 *  - the whole warp enters and every branch inside is on a warp vote, so the caller's
 *    code stays convergent: a branch into the send taken by one thread makes the
 *    compiler move the caller's loop-invariant uniform registers into ordinary ones
 *    (the streaming caller: +4 registers for an empty branch);
 *  - nothing of the queue is held in registers across the caller's code: the descriptor
 *    is read where each field is used, the counters are read and written in memory, and
 *    the inputs pass through on_branch(), so the compiler cannot compute any of it ahead
 *    of the branch (into registers live across the caller's loops);
 *  - the CQ poll loop (room, completion) is out of line, in 32-bit wrap-safe counter
 *    differences (a ring holds at most 2^16 WQEBBs); only there are the counters held
 *    in registers, for the length of one wait.
 * Every lane performs the same loads and stores with the same values (the sending
 * lane's, broadcast), so a send is one WQE, one doorbell record and one doorbell value
 * whichever lanes' stores land, ordered by the scope's sequence in every lane. The
 * queue must not be held by an Exclusive<S> (its counters in registers) meanwhile.
 * ----------------------------------------------------------------------------------- */
namespace occasional {

/* `v`, computed where this is: the empty volatile asm cannot be moved, so neither can
 * what depends on its result (the compiler would otherwise compute loop-invariant
 * arguments before the caller's loop and hold them in registers throughout). */
__device__ __forceinline__ u32 on_branch(u32 v) {
    asm volatile("" : "+r"(v));
    return v;
}
__device__ __forceinline__ u64 on_branch(u64 v) {
    asm volatile("" : "+l"(v));
    return v;
}
template <class T> __device__ __forceinline__ T* on_branch(T* p) { return (T*)on_branch((u64)p); }

/* Loads and stores that the compiler keeps where they are written (not hoisted, merged
 * or kept in a register): plain (weak) global accesses, no ordering. */
__device__ __forceinline__ u32 ld32(const void* p) {
    u32 v;
    asm volatile("ld.global.b32 %0, [%1];" : "=r"(v) : "l"(gaddr(p)) : "memory");
    return v;
}
__device__ __forceinline__ u64 ld64(const void* p) {
    u64 v;
    asm volatile("ld.global.b64 %0, [%1];" : "=l"(v) : "l"(gaddr(p)) : "memory");
    return v;
}
__device__ __forceinline__ void st32(void* p, u32 v) {
    asm volatile("st.global.b32 [%0], %1;" ::"l"(gaddr(p)), "r"(v) : "memory");
}
__device__ __forceinline__ void st64(void* p, u64 v) {
    asm volatile("st.global.b64 [%0], %1;" ::"l"(gaddr(p)), "l"(v) : "memory");
}
/* A 64-bit counter in memory whose low word the caller holds, advanced by `step` to
 * `low` (the new low word): the low word is stored, and the high word is loaded and
 * incremented only when the low one wrapped, so nothing waits on a load otherwise. Every
 * lane stores the same values (not an atomic: 32 lanes would add 32 times). */
__device__ __forceinline__ void add_low32(u64* counter, u32 low, u32 step) {
    st32(counter, low);
    if (low < step) st32((u32*)counter + 1, ld32((u32*)counter + 1) + 1u);
}

/* Whether any lane of the (converged) warp has `c`: a warp-uniform branch condition. */
__device__ __forceinline__ bool any(bool c) { return __any_sync(0xffffffffu, c); }

__device__ __forceinline__ DeviceProducerState* state(const DeviceQueueDescriptor* d) {
    return (DeviceProducerState*)ld64(&d->state);
}

/* Ring mode: hands the CQ's entries up to `consumer` back to the NIC (the CQ doorbell
 * record); a collapsed CQ has none. */
__device__ __forceinline__ void release_cqes(const DeviceQueueDescriptor* d, u32 collapsed, u32 consumer) {
    if (any(collapsed == 0)) ptx::st_relaxed_sys_b32((void*)ld64(&d->cq_dbrec), bswap32(consumer & 0xffffffu));
}

/* Polls until `retired` reaches `ticket` (low 32 bits, within 2^31 of it), consuming CQEs
 * by Exclusive<S>::poll's rules (ring mode: owner bit of this lap; collapsed mode: a WQE
 * counter not yet seen; stray CQEs; error syndromes); the first error wins. Out of line:
 * the loop's registers are not the caller's (ptxas gives it only registers that nothing
 * live across the call holds: 15 in the compute caller of the dormant-cost experiment).
 * Built for the fewest dependent loads, because the caller's other warps never stall:
 * each load the waiting warp must see back before it can go on may leave it unscheduled
 * for microseconds (H200, compute caller, 16 waiting sends per block: 15 us on average
 * from a CQE seen to the wait's return). The counters are read once per wait and advance
 * in registers (the calling warp owns the queue; their 64-bit words in memory are written
 * behind, add_low32), the descriptor's fields once per CQE, and a CQE that is not there
 * yet is polled by loading its last word alone. With the CQE already written a wait is
 * seven dependent loads from entry to return (ptxas, sm_90), where the earlier poll
 * through memory took fifteen. */
template <class S> __device__ __noinline__ int wait_retired(const DeviceQueueDescriptor* d, u32 ticket) {
    DeviceProducerState* const st = state(d);
    u32 retired = ld32(&st->retired);
    u32 consumer = ld32(&st->cq_consumer);
    Deadline dl;
    while (any((int)(retired - ticket) < 0)) {
        const u32 collapsed = ld32(&d->cq_mode);
        const u32 log_cq = ld32(&d->log_cq_entries);
        const u64 cq_ring = ld64(&d->cq_ring);
        const u32 seen = ld32(&st->collapsed_seen);
        /* Ring mode: the owner bit of this lap; collapsed mode: the counter seen last. */
        const u32 expect = collapsed ? seen : (consumer >> log_cq) & 1u;
        const u64* last = (const u64*)(cq_ring + (u64)(collapsed ? 0u : consumer & ((1u << log_cq) - 1u)) * layout::CQE_BYTES +
                                       layout::CQE_SOP_DROP_QPN);
        u64 tail;
        for (;;) {
            tail = S::cq_load(last);
            const bool owned = collapsed ? cqe_counter(tail) + 1 != expect : ((u32)(tail >> 56) & 1u) == expect;
            if (any((u32)(tail >> 60) != layout::CQE_OPCODE_INVALID && owned)) break;
            if (any(dl.expired(ld64(&d->wait_ns)))) return WAIT_DEADLINE;
        }
        S::cq_acquire();
        /* Loaded together. The CQ doorbell record is written last: its address, loaded
         * here too, would hold two more registers across the WQE's load (the compute
         * caller's 32 would become 40). */
        const u32 qpn = ld32(&d->qpn);
        const u32 reserved = ld32(&st->reserved);
        const u64 sq_ring = ld64(&d->sq_ring);
        const u32 log_sq = ld32(&d->log_sq_wqebbs);
        const u32 counter = cqe_counter(tail);
        consumer++;
        add_low32(&st->cq_consumer, consumer, 1);
        if (any(collapsed != 0)) st32(&st->collapsed_seen, counter + 1);
        /* The WQE the CQE names, as an offset from `retired` (Exclusive::poll's `start`). */
        const u32 ahead = (u16)(counter - retired);
        if (any(cqe_qpn(tail) != qpn || reserved - retired <= ahead)) {
            release_cqes(d, collapsed, consumer);
            return POLL_STRAY;
        }
        const u8* ds_byte =
            (const u8*)sq_ring + (((retired + ahead) & ((1u << log_sq) - 1u)) << 6) + layout::CTRL_QPN_DS + 3;
        const u32 ds = *ds_byte & layout::MAX_DS;
        const u32 step = ahead + (ds == 0 ? 1u : wqebbs_for_ds(ds));
        retired += step;
        add_low32(&st->retired, retired, step);
        if (any((u32)(tail >> 60) == layout::CQE_OPCODE_REQ_ERR)) {
            /* The syndrome read before the doorbell record hands the slot back. */
            const int syndrome = ((const u8*)last - layout::CQE_SOP_DROP_QPN)[layout::ERR_CQE_SYNDROME];
            release_cqes(d, collapsed, consumer);
            return -syndrome;
        }
        release_cqes(d, collapsed, consumer);
    }
    return 0;
}

/* WQEBBs the ring may hold unretired: every occasional WQE is signaled, so in ring mode
 * also no more than the CQ has entries (the CQ cannot overrun). */
__device__ __forceinline__ u32 room(const DeviceQueueDescriptor* d) {
    const u32 sq = 1u << ld32(&d->log_sq_wqebbs);
    const u32 cq = 1u << ld32(&d->log_cq_entries);
    return ld32(&d->cq_mode) != 0 || sq < cq ? sq : cq;
}

/* The body of warp_send_write_inline8 for one send, every lane with the same inputs. */
template <class S>
__device__ __forceinline__ int post_write_inline8(const DeviceQueueDescriptor* d, u64 raddr, u32 rkey, u64 value,
                                                  bool wait) {
    if (any(ld32(&d->scope) != S::KIND)) __trap();
    constexpr u32 W = wqebbs_for_ds(layout::DS_RC_WRITE_SGE);
    static_assert(W == 1, "one WQEBB");
    if (any((u32)(ld32(&state(d)->reserved) + W - ld32(&state(d)->retired)) > room(d))) {
        const int s = wait_retired<S>(d, ld32(&state(d)->reserved) + W - room(d));
        if (any(s < 0)) return s;
    }
    const u32 at = ld32(&state(d)->reserved);
    const WqeSlots slots{(u8*)ld64(&d->sq_ring), (1u << ld32(&d->log_sq_wqebbs)) - 1u, at};
    build_write_inline8<transport::Rc>(slots, ctrl(ld32(&d->qpn), layout::FM_CE_SE_CQ_UPDATE), Target{nullptr}, raddr,
                                       rkey, value);
    const u64 next = ld64(&state(d)->reserved) + W;
    st64(&state(d)->reserved, next);
    st64(&state(d)->ready, next);
    st64(&state(d)->posted, next);
    S::ring((u32*)ld64(&d->sq_dbrec), dbrec_word(next), (u64*)ld64(&d->doorbell), doorbell_word(next, ld32(&d->qpn)));
    if (any(wait)) return wait_retired<S>(d, (u32)next);
    return 0;
}

} // namespace occasional

/* One signaled 8-byte inline RC WRITE on `d` (exclusively owned by the calling warp) for
 * every lane with `mine`, with that lane's arguments, one after another; with `wait`,
 * until each completes. All 32 lanes of the warp call it together (a warp without `mine`
 * returns at once, on a warp-uniform branch). Returns 0 or the first negative status
 * (error completion, WAIT_DEADLINE), to every lane. */
template <class S>
__device__ __forceinline__ int warp_send_write_inline8(bool mine, const DeviceQueueDescriptor* d, u64 raddr,
                                                       u32 rkey, u64 value, bool wait) {
    int status = 0;
    for (u32 asking = __ballot_sync(0xffffffffu, mine); asking != 0; asking &= asking - 1) {
        const int lane = __ffs(asking) - 1;
        const DeviceQueueDescriptor* q =
            occasional::on_branch((const DeviceQueueDescriptor*)__shfl_sync(0xffffffffu, (u64)d, lane));
        const u64 a = occasional::on_branch((u64)__shfl_sync(0xffffffffu, raddr, lane));
        const u32 k = occasional::on_branch((u32)__shfl_sync(0xffffffffu, rkey, lane));
        const u64 v = occasional::on_branch((u64)__shfl_sync(0xffffffffu, value, lane));
        const bool w = __shfl_sync(0xffffffffu, wait ? 1 : 0, lane) != 0;
        const int s = occasional::post_write_inline8<S>(q, a, k, v, w);
        if (s < 0 && status == 0) status = s;
    }
    return status;
}

/* -------------------------------------------------------------------------------------
 * The shared producer protocol (the device form of ibgda::queue::SharedSendQueue):
 *  1. reserve: atomicAdd on `reserved` (one per thread, or one per warp);
 *  2. wait until the ring has room (retired + capacity >= end), polling the CQ under the
 *     poll lock when nobody else does;
 *  3. build the WQEs in the owned slots;
 *  4. publish in reservation order: wait until `ready == start` (an acquire load: every
 *     earlier publisher's WQEs are then ordered before what this thread does next). From
 *     then until it moves `ready` on, this thread alone holds the publication frontier:
 *     no other thread can publish or ring;
 *  5. ring while holding the frontier, when the WQEs cross a multiple of the batch or
 *     nobody reserved after them: the scope's doorbell record and doorbell for `end`,
 *     then `ready = end` with a release store, so the next ringer's doorbell is ordered
 *     after this one. Otherwise the scope's publish_release, then `ready = end`.
 * Doorbells are therefore rung in counter order by construction, with no doorbell lock
 * (the frontier is the lock, and taking it costs nothing beyond the in-order wait that
 * publication needs anyway): one fence in the doorbell sequence and one release store
 * per ring, instead of a lock's atomic and fences around them.
 * ----------------------------------------------------------------------------------- */

/* The poll lock: an acquiring CAS takes it and a release store gives it back, so what one
 * holder wrote (the CQ consumer index, the collapsed counter) is seen by the next. A
 * full fence around a relaxed CAS and an exchange cost one more round trip each, on the
 * path of every producer that runs out of room. */
__device__ __forceinline__ bool try_lock(u32* lock) { return ptx::atom_cas_acquire_gpu_b32(lock, 0u, 1u) == 0u; }
__device__ __forceinline__ void unlock(u32* lock) { ptx::st_release_gpu_b32(lock, 0u); }

/* CQ entries a poll for room reads together (ring mode; collapsed mode has one entry). */
constexpr u32 POLL_AHEAD = 4;

/* One poll by whoever holds the poll lock; others return at once. It consumes every valid
 * CQE among the next `ahead` (1..POLL_AHEAD) entries, in order, and stops at the first
 * stray or error CQE. Their last words are loaded together. A producer short of room asks
 * for POLL_AHEAD: it finds several CQEs ready at once (one per signal interval), and each
 * poll is a chain of dependent round trips, so consuming them in one poll removes whole
 * chains (one warp on one QP: +4% WQE/s on the H200). A wait for one ticket asks for 1:
 * there the extra loads only delay the CQE it waits for (+0.6 us put+completion).
 * The queue comes by value: a reference would put the caller's descriptor on its stack
 * (the descriptor's bytes in local memory, which every posting path then read its fields from). */
template <class S> __device__ __noinline__ Polled shared_poll(const Queue q, u32 ahead) {
    check_scope<S>(q.d);
    DeviceProducerState* st = q.state();
    if (!try_lock(&st->poll_lock)) return Polled{0, ptx::ld_acquire_gpu_b64(&st->retired)};
    const u64 consumer = ptx::ld_relaxed_gpu_b64(&st->cq_consumer);
    const u64 retired_before = ptx::ld_relaxed_gpu_b64(&st->retired);
    u32 seen = *(volatile u32*)&st->collapsed_seen;
    /* Loaded with the others, not after the CQE: `ready` only grows, so an early value is
     * conservative, and it is reloaded below only when a CQE names a WQE beyond it. */
    u64 ready = ptx::ld_acquire_gpu_b64(&st->ready);
    const u32 entries = 1u << q.d.log_cq_entries;
    ahead = ahead > POLL_AHEAD ? POLL_AHEAD : (ahead == 0 ? 1u : ahead);
    ahead = q.d.cq_mode ? 1u : (entries < ahead ? entries : ahead);
    u64 tails[POLL_AHEAD];
#pragma unroll
    for (u32 k = 0; k < POLL_AHEAD; k++) tails[k] = k < ahead ? cqe_tail_load<S>(q, consumer + k) : 0ull;
    u32 found = 0;
#pragma unroll
    for (u32 k = 0; k < POLL_AHEAD; k++) {
        if (found == k && k < ahead && cqe_tail_valid(q, consumer + k, seen, tails[k])) found = k + 1;
    }
    Polled r{0, retired_before};
    if (found == 0) {
        unlock(&st->poll_lock);
        return r;
    }
    S::cq_acquire();
    u64 retired = retired_before;
    u32 consumed = 0;
#pragma unroll
    for (u32 k = 0; k < POLL_AHEAD; k++) {
        if (k < found && (k == 0 || r.status == 1)) {
            const u64 tail = tails[k];
            const u32 counter = cqe_counter(tail);
            consumed = k + 1;
            if (q.d.cq_mode) seen = counter + 1;
            const u64 start = retired + (u16)(counter - (u16)retired);
            if (start >= ready) ready = ptx::ld_acquire_gpu_b64(&st->ready);
            if (start >= ready || cqe_qpn(tail) != q.d.qpn) {
                r.status = POLL_STRAY;
            } else {
                retired = start + q.wqebbs_at(start);
                r.retired_to = retired;
                const u32 opcode = (u32)(tail >> 60);
                if (opcode == layout::CQE_OPCODE_REQ_ERR) {
                    const u8* e = (const u8*)(q.d.cq_ring + (u64)cqe_slot(q, consumer + k) * layout::CQE_BYTES);
                    r.status = -(int)e[layout::ERR_CQE_SYNDROME];
                } else {
                    r.status = 1;
                }
            }
        }
    }
    ptx::st_relaxed_gpu_b64(&st->cq_consumer, consumer + consumed);
    if (q.d.cq_mode) {
        *(volatile u32*)&st->collapsed_seen = seen;
    } else {
        ptx::st_relaxed_sys_b32((void*)q.d.cq_dbrec, bswap32((u32)(consumer + consumed) & 0xffffffu));
    }
    if (retired != retired_before) ptx::st_release_gpu_b64(&st->retired, retired);
    unlock(&st->poll_lock);
    return r;
}

/* Waits until the ring has room for everything before `end`. */
template <class S> __device__ __forceinline__ int wait_for_room(const Queue& q, u64 end) {
    check_scope<S>(q.d);
    DeviceProducerState* st = q.state();
    Deadline dl;
    /* A poll returns `retired` as it left it (or, when another thread holds the poll lock,
     * as loaded with acquire): no reload between polls. */
    u64 retired = ptx::ld_acquire_gpu_b64(&st->retired);
    while (retired + q.capacity() < end) {
        const Polled p = shared_poll<S>(q, POLL_AHEAD);
        if (p.status < 0) return p.status;
        retired = p.retired_to;
        if (dl.expired(q.d.wait_ns)) return WAIT_DEADLINE;
    }
    return 0;
}

/* The publication frontier, read with acquire (relaxed for Unordered, which orders
 * nothing). */
template <class S> __device__ __forceinline__ u64 frontier_load(const DeviceProducerState* st) {
    if constexpr (S::KIND == layout::SCOPE_UNORDERED) {
        return ptx::ld_relaxed_gpu_b64(&st->ready);
    } else {
        return ptx::ld_acquire_gpu_b64(&st->ready);
    }
}

/* A pause between two polls of the publication frontier (IBGDA_FRONTIER_BACKOFF_NS, a
 * compile option; 0, the default: none). Many threads waiting for their turn on one queue
 * all poll the same word; a pause thins that traffic at the cost of up to the pause per
 * hand-off. The benchmark measures both. */
#ifndef IBGDA_FRONTIER_BACKOFF_NS
#define IBGDA_FRONTIER_BACKOFF_NS 0u
#endif

/* Publishes [start, end) after every earlier reservation, and rings if the WQEs cross a
 * multiple of `batch` WQEBBs or nobody reserved after them. `ready_seen` is a value of
 * `ready` the caller loaded with frontier_load after its reservation (loading it early
 * overlaps the load with the WQE build; it is reloaded until it equals `start`). */
template <class S>
__device__ __forceinline__ int shared_publish_seen(const Queue& q, u64 start, u64 end, u32 batch, u64 ready_seen) {
    check_scope<S>(q.d);
    DeviceProducerState* st = q.state();
    Deadline dl;
    while (ready_seen != start) {
        if (dl.expired(q.d.wait_ns)) return WAIT_DEADLINE;
        if constexpr (IBGDA_FRONTIER_BACKOFF_NS != 0) __nanosleep(IBGDA_FRONTIER_BACKOFF_NS);
        ready_seen = frontier_load<S>(st);
    }
    /* This thread holds the frontier until it stores ready = end. */
    const bool crosses = end / batch > start / batch;
    if (crosses || ptx::ld_relaxed_gpu_b64(&st->reserved) == end) {
        /* The scope's sequence orders this thread's (and its synchronized lanes') WQE
         * stores, and those acquired through the frontier, before the doorbell. */
        q.template ring<S>(end);
        ptx::st_relaxed_gpu_b64(&st->posted, end);
        /* Hands the frontier on after the doorbell: the next ringer's doorbell follows. */
        ptx::st_release_gpu_b64(&st->ready, end);
    } else {
        S::publish_release();
        ptx::st_relaxed_gpu_b64(&st->ready, end);
    }
    return 0;
}

template <class S> __device__ __forceinline__ int shared_publish(const Queue& q, u64 start, u64 end, u32 batch) {
    return shared_publish_seen<S>(q, start, end, batch, frontier_load<S>(q.state()));
}

/* Per thread: one 8-byte inline RC WRITE through the shared protocol. Returns the ticket
 * (end counter) or 0 with *status < 0 on an error completion seen while waiting. */
template <class S>
__device__ __forceinline__ u64 post_write_inline8_thread(const Queue& q, u64 raddr, u32 rkey, u64 value, u32 batch,
                                                         int* status) {
    constexpr u32 W = wqebbs_for_ds(layout::DS_RC_WRITE_SGE);
    DeviceProducerState* st = q.state();
    /* `retired` and `ready` only grow: loaded around the reservation (their loads and the
     * atomic in flight together), they are conservative and reloaded when short. */
    const u64 retired_seen = ptx::ld_acquire_gpu_b64(&st->retired);
    const u64 start = atomicAdd(&st->reserved, (u64)W);
    const u64 ready_seen = frontier_load<S>(st);
    const u64 end = start + W;
    if (retired_seen + q.capacity() < end) {
        const int s = wait_for_room<S>(q, end);
        if (s < 0) *status = s;
    }
    const u32 flags = q.must_signal(start, W) ? layout::FM_CE_SE_CQ_UPDATE : 0u;
    build_write_inline8<transport::Rc>(q.slots(start), ctrl(q.d.qpn, flags), Target{nullptr}, raddr, rkey, value);
    const int p = shared_publish_seen<S>(q, start, end, batch, ready_seen);
    if (p < 0) *status = p;
    return end;
}

/* Per thread, with the lanes of a warp that call it together grouped: the lanes posting
 * to the same queue at the same moment (__match_any_sync on the queue) take one
 * reservation for all of them (the group's lowest lane reserves), each builds its own
 * 8-byte inline RC WRITE in its own slot, and the lowest lane publishes the group's WQEs
 * in one hand-off of the frontier, ringing a doorbell at every multiple of `batch` the
 * group crosses (with batch 1: one per WQE, in order) or, crossing none, for the group's
 * end when nobody reserved after it. Callable from any thread at any time, as
 * post_write_inline8_thread (a lane alone is a group of one); each lane gets its own
 * ticket; a status error reaches every lane of the group. */
template <class S>
__device__ __forceinline__ u64 post_write_inline8_thread_grouped(const Queue& q, u64 raddr, u32 rkey, u64 value,
                                                                 u32 batch, int* status) {
    constexpr u32 W = wqebbs_for_ds(layout::DS_RC_WRITE_SGE);
    DeviceProducerState* st = q.state();
    const u32 active = __activemask();
    const u32 group = __match_any_sync(active, (u64)st);
    const u32 lane = threadIdx.x & 31u;
    const u32 leader = (u32)__ffs(group) - 1u;
    const u32 rank = __popc(group & ((1u << lane) - 1u));
    const u32 n = __popc(group);
    u64 base = 0, ready_seen = 0;
    int err = 0;
    if (lane == leader) {
        const u64 retired_seen = ptx::ld_acquire_gpu_b64(&st->retired);
        base = atomicAdd(&st->reserved, (u64)n * W);
        ready_seen = frontier_load<S>(st);
        if (retired_seen + q.capacity() < base + (u64)n * W) {
            const int s = wait_for_room<S>(q, base + (u64)n * W);
            if (s < 0) err = s;
        }
    }
    base = __shfl_sync(group, base, leader);
    /* The leader's acquire of `retired` before the group's stores into the slots (the
     * warp barrier orders memory among the group; the shuffle does not). */
    __syncwarp(group);
    const u64 start = base + (u64)rank * W;
    const u32 flags = q.must_signal(start, W) ? layout::FM_CE_SE_CQ_UPDATE : 0u;
    build_write_inline8<transport::Rc>(q.slots(start), ctrl(q.d.qpn, flags), Target{nullptr}, raddr, rkey, value);
    __syncwarp(group);
    const u64 end = base + (u64)n * W;
    if (lane == leader) {
        check_scope<S>(q.d);
        Deadline dl;
        while (ready_seen != base) {
            if (dl.expired(q.d.wait_ns)) {
                err = WAIT_DEADLINE;
                break;
            }
            if constexpr (IBGDA_FRONTIER_BACKOFF_NS != 0) __nanosleep(IBGDA_FRONTIER_BACKOFF_NS);
            ready_seen = frontier_load<S>(st);
        }
        if (err == 0) {
            /* This lane holds the frontier until it stores ready = end. A doorbell at each
             * multiple of the batch crossed, and for the end when nobody reserved after
             * the group (so no published WQE waits for a doorbell that nobody rings). */
            u64 rung = 0;
            for (u64 m = round_down(base, batch) + batch; m <= end; m += batch) {
                q.template ring<S>(m);
                rung = m;
            }
            if (rung != end && ptx::ld_relaxed_gpu_b64(&st->reserved) == end) {
                q.template ring<S>(end);
                rung = end;
            }
            if (rung != 0) {
                ptx::st_relaxed_gpu_b64(&st->posted, rung);
                /* Hands the frontier on after the doorbells: the next ringer's follow. */
                ptx::st_release_gpu_b64(&st->ready, end);
            } else {
                S::publish_release();
                ptx::st_relaxed_gpu_b64(&st->ready, end);
            }
        }
    }
    err = __shfl_sync(group, err, leader);
    if (err < 0) *status = err;
    return start + W;
}

/* The part of a cooperative warp post after lane 0's reservation of 32 WQEBBs at `start`
 * (lane 0's; `ready_seen` its early frontier load): every lane builds its WQE in lockstep,
 * lane 0 publishes the warp's WQEs and rings. Returns the warp's ticket. */
template <class S>
__device__ __forceinline__ u64 warp_build_publish(const Queue& q, u64 start, u64 ready_seen, u64 raddr, u32 rkey,
                                                  u64 value, u32 batch, int* status) {
    constexpr u32 W = wqebbs_for_ds(layout::DS_RC_WRITE_SGE);
    static_assert(W == 1, "one WQEBB per lane");
    const u32 lane = threadIdx.x & 31u;
    start = __shfl_sync(0xffffffffu, start, 0);
    /* Lane 0's acquire of `retired` (its room check) before every lane's stores into the
     * slots: a shuffle orders no memory, the warp barrier does. */
    __syncwarp();
    const u64 mine = start + lane * W;
    const u32 flags = q.must_signal(mine, W) ? layout::FM_CE_SE_CQ_UPDATE : 0u;
    build_write_inline8<transport::Rc>(q.slots(mine), ctrl(q.d.qpn, flags), Target{nullptr}, raddr, rkey, value);
    __syncwarp();
    const u64 end = start + 32ull * W;
    if (lane == 0) {
        const int p = shared_publish_seen<S>(q, start, end, batch, ready_seen);
        if (p < 0) *status = p;
    }
    __syncwarp();
    return end;
}

/* Per warp, cooperatively: lane 0 reserves one WQEBB per active lane, every lane builds
 * its 8-byte inline RC WRITE in lockstep, lane 0 publishes the warp's WQEs and rings. All
 * 32 lanes must call it together. Returns the warp's ticket. */
template <class S>
__device__ __forceinline__ u64 post_write_inline8_warp(const Queue& q, u64 raddr, u32 rkey, u64 value, u32 batch,
                                                       int* status) {
    constexpr u32 W = wqebbs_for_ds(layout::DS_RC_WRITE_SGE);
    static_assert(W == 1, "one WQEBB per lane");
    DeviceProducerState* st = q.state();
    const u32 lane = threadIdx.x & 31u;
    u64 start = 0, ready_seen = 0;
    if (lane == 0) {
        /* As in the per-thread path: both loads and the atomic in flight together. */
        const u64 retired_seen = ptx::ld_acquire_gpu_b64(&st->retired);
        start = atomicAdd(&st->reserved, 32ull * W);
        ready_seen = frontier_load<S>(st);
        if (retired_seen + q.capacity() < start + 32ull * W) {
            const int s = wait_for_room<S>(q, start + 32ull * W);
            if (s < 0) *status = s;
        }
    }
    return warp_build_publish<S>(q, start, ready_seen, raddr, rkey, value, batch, status);
}

/* Per warp, cooperatively, as post_write_inline8_warp, with the warp's next reservation
 * made one call ahead: `ahead` (lane 0's; ~0ull before the first call) carries it from
 * call to call. With `more`, lane 0 reserves for the next call right after this call's
 * reservation, so the atomic's round trip runs under this call's WQE stores, fence and
 * doorbell instead of in front of the next call's. The warp's last call passes
 * more = false: a reservation held and never published would stop the queue (every later
 * reservation is published after it). Any number of warps may share the queue: each
 * publishes its reservations in order, and the earliest one not yet published is always
 * the one a warp is publishing now, so the queue never waits on a held reservation. */
template <class S>
__device__ __forceinline__ u64 post_write_inline8_warp_ahead(const Queue& q, u64 raddr, u32 rkey, u64 value, u32 batch,
                                                             bool more, u64& ahead, int* status) {
    constexpr u32 W = wqebbs_for_ds(layout::DS_RC_WRITE_SGE);
    static_assert(W == 1, "one WQEBB per lane");
    DeviceProducerState* st = q.state();
    const u32 lane = threadIdx.x & 31u;
    u64 start = 0, ready_seen = 0;
    if (lane == 0) {
        const u64 retired_seen = ptx::ld_acquire_gpu_b64(&st->retired);
        start = ahead != ~0ull ? ahead : atomicAdd(&st->reserved, 32ull * W);
        ahead = more ? atomicAdd(&st->reserved, 32ull * W) : ~0ull;
        ready_seen = frontier_load<S>(st);
        if (retired_seen + q.capacity() < start + 32ull * W) {
            const int s = wait_for_room<S>(q, start + 32ull * W);
            if (s < 0) *status = s;
        }
    }
    return warp_build_publish<S>(q, start, ready_seen, raddr, rkey, value, batch, status);
}

/* Posts a signaled NOP if no signaled WQE at or after `ticket` has been reserved, so that
 * a wait on `ticket` can finish (one signaled CQE retires everything before it). */
template <class S> __device__ __forceinline__ int ensure_signaled(const Queue& q, u64 ticket, u32 batch) {
    DeviceProducerState* st = q.state();
    const u64 i = q.d.signal_interval;
    const u64 boundary = round_down(ticket + i - 1, i);
    if (ptx::ld_relaxed_gpu_b64(&st->reserved) >= boundary) return 0;
    const u64 start = atomicAdd(&st->reserved, 1ull);
    const int s = wait_for_room<S>(q, start + 1);
    build_nop(q.slots(start), ctrl(q.d.qpn, layout::FM_CE_SE_CQ_UPDATE));
    const int p = shared_publish<S>(q, start, start + 1, 1);
    return s < 0 ? s : p;
}

/* Waits for one ticket: everything before it complete. */
template <class S> __device__ __forceinline__ int wait_ticket(const Queue& q, u64 ticket, u32 batch) {
    int s = ensure_signaled<S>(q, ticket, batch);
    if (s < 0) return s;
    DeviceProducerState* st = q.state();
    Deadline dl;
    while (ptx::ld_acquire_gpu_b64(&st->retired) < ticket) {
        const Polled p = shared_poll<S>(q, 1);
        if (p.status < 0) return p.status;
        if (dl.expired(q.d.wait_ns)) return WAIT_DEADLINE;
    }
    return 0;
}

/* Waits for one QP: everything reserved on it so far complete. */
template <class S> __device__ __forceinline__ int wait_qp(const Queue& q, u32 batch) {
    return wait_ticket<S>(q, ptx::ld_relaxed_gpu_b64(&q.state()->reserved), batch);
}

/* Quiet: every queue of `qs` complete up to what was reserved on it. */
template <class S> __device__ __forceinline__ int quiet_all(const DeviceQueueDescriptor* qs, u32 n, u32 batch) {
    int first = 0;
    for (u32 i = 0; i < n; i++) {
        const int s = wait_qp<S>(Queue{qs[i]}, batch);
        if (s < 0 && first == 0) first = s;
    }
    return first;
}

} // namespace ibgda
