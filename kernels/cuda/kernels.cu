/* kernels.cu: the test and benchmark kernels of ibgda-kernels, on the device library.
 *
 * Per scope S (a tag of ibgda::scope), extern "C" kernels named <kernel>_<S>:
 *   ibgda_doorbell_path_S  one exclusive post of an 8-byte inline RC WRITE and its doorbell
 *                          (the PTX test checks its ordering instructions exactly)
 *   ibgda_poll_path_S      one exclusive CQ poll (ring mode) and its retirement
 *   ibgda_issue_bench_S    one thread, `iters` inline writes, each timed from reserve to
 *                          doorbell (%globaltimer and clock64), then waited for
 *   ibgda_post_batch_S     one thread, `batch` WQEs per doorbell, exclusive producer
 *   ibgda_issue_shape_GpuFence  issue_bench for the shapes of Table 3 and Figure 3 (inline
 *                          of any length, pointer WRITE, DC compact and full)
 *   ibgda_post_thread_S    every thread posts through the shared protocol (per thread)
 *   ibgda_post_warp_S      every warp posts cooperatively (one reservation per warp)
 *   ibgda_post_warp_ahead_S  the same, each reservation made one round ahead
 *   ibgda_post_thread_grouped_S  per thread, the lanes calling together grouped
 *   ibgda_occasional_send_S  the warp-entered occasional send (warp_send_write_inline8),
 *                          thread 0 asking, the block's threads calling together
 * and, scope-free:
 *   ibgda_build_requests   builds WqeRequests into rings (the byte-equality test)
 *   ibgda_sink             a persistent stand-in for the NIC: consumes doorbells, checks
 *                          WQEs and payloads, writes CQEs
 *   ibgda_softnic          the CUDA software NIC (softnic.cuh): one engine per block,
 *                          persistent until a stop flag, or run until idle
 *   ibgda_nic_requests_S   one thread per queue posts a list of WqeRequests (every shape,
 *                          RC and DC) through the exclusive producer and records the
 *                          status of every completion (for the CUDA software NIC)
 */
#include "ibgda.cuh"
#include "softnic.cuh"

using namespace ibgda;

/* Program::SoftNic compiles this file with IBGDA_SOFTNIC_ONLY: the CUDA software NIC's kernel
 * alone, for a process that runs nothing else of this file (the emulated ConnectX), in a
 * third of the whole file's NVRTC time. */
#ifndef IBGDA_SOFTNIC_ONLY

/* ---------------------------------------------------------------------------------------
 * Building requests (host-built vs device-built bytes).
 * ------------------------------------------------------------------------------------- */

template <class T> __device__ u32 build_request(const WqeSlots& s, const Ctrl& c, const Target& t, const WqeRequest& r) {
    switch (r.shape) {
    case layout::SHAPE_WRITE: return build_write<T>(s, c, t, r.raddr, r.rkey, r.laddr, r.len, r.lkey, false);
    case layout::SHAPE_WRITE_IMM: return build_write<T>(s, c, t, r.raddr, r.rkey, r.laddr, r.len, r.lkey, true);
    case layout::SHAPE_WRITE_INLINE:
        return build_write_inline<T>(s, c, t, r.raddr, r.rkey, r.inline_data, r.len, false);
    case layout::SHAPE_READ: return build_read<T>(s, c, t, r.raddr, r.rkey, r.laddr, r.len, r.lkey);
    case layout::SHAPE_COMPARE_SWAP:
        return build_atomic<T>(s, c, t, AtomicKind::CompareSwap, r.raddr, r.rkey, r.laddr, r.lkey, r.op0, r.op1, r.op2, r.op3);
    case layout::SHAPE_FETCH_ADD:
        return build_atomic<T>(s, c, t, AtomicKind::FetchAdd, r.raddr, r.rkey, r.laddr, r.lkey, r.op0, r.op1, r.op2, r.op3);
    case layout::SHAPE_MASKED_COMPARE_SWAP_4:
        return build_atomic<T>(s, c, t, AtomicKind::MaskedCompareSwap4, r.raddr, r.rkey, r.laddr, r.lkey, r.op0, r.op1, r.op2, r.op3);
    case layout::SHAPE_MASKED_COMPARE_SWAP_8:
        return build_atomic<T>(s, c, t, AtomicKind::MaskedCompareSwap8, r.raddr, r.rkey, r.laddr, r.lkey, r.op0, r.op1, r.op2, r.op3);
    case layout::SHAPE_MASKED_FETCH_ADD_4:
        return build_atomic<T>(s, c, t, AtomicKind::MaskedFetchAdd4, r.raddr, r.rkey, r.laddr, r.lkey, r.op0, r.op1, r.op2, r.op3);
    case layout::SHAPE_MASKED_FETCH_ADD_8:
        return build_atomic<T>(s, c, t, AtomicKind::MaskedFetchAdd8, r.raddr, r.rkey, r.laddr, r.lkey, r.op0, r.op1, r.op2, r.op3);
    case layout::SHAPE_NOP: return build_nop(s, c);
    case layout::SHAPE_DUMP: return build_dump(s, c, r.laddr, r.len, r.lkey);
    default: return 0;
    }
}

/* Request i is built into ring i (2^log_ring WQEBBs each) at its index; ds[i] gets its DS. */
extern "C" __global__ void ibgda_build_requests(const WqeRequest* reqs, u32 n, u8* rings, u32 log_ring, u32* ds) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const WqeRequest& r = reqs[i];
    const WqeSlots s{rings + ((u64)i << (log_ring + 6)), (1u << log_ring) - 1, r.index};
    const Ctrl c{r.qpn, r.fm_ce_se, r.stream_id, r.imm};
    /* The address vector sits 8-byte aligned in the request: copy it to an aligned array. */
    Oct av[3];
    const u32* w = (const u32*)r.av;
#pragma unroll
    for (u32 k = 0; k < 3; k++) av[k] = Oct{{w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]}};
    const Target t{av};
    u32 d;
    switch (r.transport) {
    case layout::TRANSPORT_DC_COMPACT: d = build_request<transport::DcCompact>(s, c, t, r); break;
    case layout::TRANSPORT_DC_FULL: d = build_request<transport::DcFull>(s, c, t, r); break;
    default: d = build_request<transport::Rc>(s, c, t, r); break;
    }
    ds[i] = d;
}

/* ---------------------------------------------------------------------------------------
 * Per-scope kernels.
 * ------------------------------------------------------------------------------------- */

template <class S> __device__ __forceinline__ void doorbell_path(const DeviceQueueDescriptor& d, u64 raddr, u32 rkey, u64 value) {
    Exclusive<S> e = Exclusive<S>::load(d);
    WqeSlots s;
    if (!e.reserve(1, s)) return;
    build_write_inline8<transport::Rc>(s, ctrl(d.qpn, layout::FM_CE_SE_CQ_UPDATE), Target{nullptr}, raddr, rkey, value);
    e.commit(1);
    e.ring();
    e.store();
}

template <class S> __device__ __forceinline__ void poll_path(const DeviceQueueDescriptor& d, int* out) {
    Exclusive<S> e = Exclusive<S>::load(d);
    const Polled p = e.poll();
    out[0] = p.status;
    e.store();
}

/* One thread; iteration i: t0, reserve, build, commit, ring, t1; then wait for its CQE.
 * Records issue ns and cycles of the `iters` iterations after `warmup`, and the
 * put+completion ns. clocks[0..2] = clock64 and %globaltimer over the timed iterations. */
template <class S>
__device__ __forceinline__ void issue_bench(const DeviceQueueDescriptor& d, u32 warmup, u32 iters, u64 raddr, u32 rkey,
                                            u64* issue_ns, u64* issue_cycles, u64* total_ns, u64* clocks, int* status) {
    Exclusive<S> e = Exclusive<S>::load(d);
    int err = 0;
    u64 g_start = 0, c_start = 0;
    for (u32 i = 0; i < warmup + iters; i++) {
        if (i == warmup) {
            g_start = ptx::globaltimer();
            c_start = clock64();
        }
        const u64 t0 = ptx::globaltimer();
        const long long c0 = clock64();
        WqeSlots s;
        if (!e.reserve(1, s)) { /* never: one WQE outstanding at a time */
            err = -0x200;
            break;
        }
        build_write_inline8<transport::Rc>(s, ctrl(d.qpn, layout::FM_CE_SE_CQ_UPDATE), Target{nullptr}, raddr, rkey,
                                           0x0123456789abcdefull ^ i);
        const u64 ticket = e.commit(1);
        e.ring();
        const long long c1 = clock64();
        const u64 t1 = ptx::globaltimer();
        const int w = e.wait(ticket);
        if (w < 0) {
            err = w; /* a failed (bounded) wait ends the run: later waits would fail too */
            break;
        }
        const u64 t2 = ptx::globaltimer();
        if (i >= warmup) {
            issue_ns[i - warmup] = t1 - t0;
            issue_cycles[i - warmup] = (u64)(c1 - c0);
            total_ns[i - warmup] = t2 - t0;
        }
    }
    clocks[0] = clock64() - c_start;
    clocks[1] = ptx::globaltimer() - g_start;
    e.store();
    *status = err;
}

/* One thread, exclusive producer: `rounds` rounds of `batch` inline writes, one doorbell
 * per round; waits for everything at the end. clocks[0] = %globaltimer ns of the run. */
template <class S>
__device__ __forceinline__ void post_batch(const DeviceQueueDescriptor& d, u32 rounds, u32 batch, u64 raddr, u32 rkey,
                                           u64* clocks, int* status) {
    Exclusive<S> e = Exclusive<S>::load(d);
    int err = 0;
    const u64 t0 = ptx::globaltimer();
    u64 ticket = e.next;
    for (u32 r = 0; r < rounds; r++) {
        for (u32 k = 0; k < batch; k++) {
            WqeSlots s;
            while (!e.reserve(1, s)) {
                const Polled p = e.poll();
                if (p.status < 0) err = p.status;
            }
            const u32 flags = (k == batch - 1 || e.q.must_signal(e.next, 1)) ? layout::FM_CE_SE_CQ_UPDATE : 0u;
            build_write_inline8<transport::Rc>(s, ctrl(d.qpn, flags), Target{nullptr}, raddr, rkey, ((u64)r << 32) | k);
            ticket = e.commit(1);
        }
        e.ring();
    }
    const int w = e.wait(ticket);
    if (w < 0) err = w;
    clocks[0] = ptx::globaltimer() - t0;
    e.store();
    *status = err;
}

/* Table 3 and Figure 3's shapes of one operation, issued as issue_bench does (one thread,
 * exclusive producer, every WQE signaled and waited for): */
constexpr u32 ISSUE_SHAPE_INLINE = 0;     /* RC WRITE of `len` inline bytes (1..256) read from `payload` (4-byte aligned) */
constexpr u32 ISSUE_SHAPE_POINTER = 1;    /* RC WRITE of `len` bytes from one gather entry (laddr, lkey) */
constexpr u32 ISSUE_SHAPE_DC_COMPACT = 2; /* DC WRITE of 8 inline bytes, compact address vector `av` */
constexpr u32 ISSUE_SHAPE_DC_FULL = 3;    /* DC WRITE of 8 inline bytes, full address vector `av` */

/* The WQEBBs of one WQE of `shape`, the inline shape's from its octoword count `octs`
 * (inline_octowords(len), the count the builder's payload loop runs to). */
__device__ __forceinline__ u32 issue_shape_wqebbs(u32 shape, u32 octs) {
    switch (shape) {
    case ISSUE_SHAPE_INLINE: return wqebbs_for_ds(1 + 1 + octs);
    case ISSUE_SHAPE_POINTER: return wqebbs_for_ds(layout::DS_RC_WRITE_SGE);
    case ISSUE_SHAPE_DC_COMPACT: return wqebbs_for_ds(1 + transport::DcCompact::AV_DS + 2);
    default: return wqebbs_for_ds(1 + transport::DcFull::AV_DS + 2);
    }
}

/* One shape's loop: the shape is a template argument, as it is at a user's call site
 * (one operation per site), so nothing of the other shapes is decided inside the timed
 * section; the hand-written baseline (raw_baseline.cu) is specialized the same way. */
template <class S, u32 SHAPE>
__device__ __forceinline__ void issue_shape_loop(const DeviceQueueDescriptor& d, u32 len, u32 warmup, u32 iters,
                                                 u64 raddr, u32 rkey, u64 laddr, u32 lkey, const u32* payload,
                                                 const Oct* av, u64* issue_ns, u64* issue_cycles, u64* total_ns,
                                                 u64* clocks, int* status) {
    Exclusive<S> e = Exclusive<S>::load(d);
    /* From the octoword count, as the raw baseline (raw_shape) derives it: that value is
     * the payload loop's bound, live in a register, and ptxas recomputes w from it after
     * the loop in two instructions (n * 16 + 95 >> 6). Computed from `len` alone (the
     * count having no other use there), the compiler folded it to
     * ((len + 51) & ~15) + 63 >> 6 under a select on len == 0, and ptxas recomputed that
     * from the kernel parameter after the payload loop: a constant load and five dependent
     * instructions ahead of next += w, the doorbell record and the fence (typed/raw 1.034
     * at 8 B, a constant ~38 cycles at every inline length). Same value either way. */
    const u32 w = issue_shape_wqebbs(SHAPE, inline_octowords(len));
    int err = 0;
    u64 g_start = 0, c_start = 0;
    for (u32 i = 0; i < warmup + iters; i++) {
        if (i == warmup) {
            g_start = ptx::globaltimer();
            c_start = clock64();
        }
        const u64 t0 = ptx::globaltimer();
        const long long c0 = clock64();
        WqeSlots s;
        if (!e.reserve(w, s)) { /* never: one WQE outstanding at a time */
            err = -0x200;
            break;
        }
        const Ctrl c = ctrl(d.qpn, layout::FM_CE_SE_CQ_UPDATE);
        const u64 value = 0x0123456789abcdefull ^ i;
        if constexpr (SHAPE == ISSUE_SHAPE_INLINE) {
            build_write_inline_words<transport::Rc>(s, c, Target{nullptr}, raddr, rkey, payload, len, false);
        } else if constexpr (SHAPE == ISSUE_SHAPE_POINTER) {
            build_write<transport::Rc>(s, c, Target{nullptr}, raddr, rkey, laddr, len, lkey, false);
        } else if constexpr (SHAPE == ISSUE_SHAPE_DC_COMPACT) {
            build_write_inline8<transport::DcCompact>(s, c, Target{av}, raddr, rkey, value);
        } else {
            build_write_inline8<transport::DcFull>(s, c, Target{av}, raddr, rkey, value);
        }
        const u64 ticket = e.commit(w);
        e.ring();
        const long long c1 = clock64();
        const u64 t1 = ptx::globaltimer();
        const int r = e.wait(ticket);
        if (r < 0) {
            err = r;
            break;
        }
        const u64 t2 = ptx::globaltimer();
        if (i >= warmup) {
            issue_ns[i - warmup] = t1 - t0;
            issue_cycles[i - warmup] = (u64)(c1 - c0);
            total_ns[i - warmup] = t2 - t0;
        }
    }
    clocks[0] = (u64)(clock64() - c_start);
    clocks[1] = ptx::globaltimer() - g_start;
    e.store();
    *status = err;
}

extern "C" __global__ void ibgda_issue_shape_GpuFence(DeviceQueueDescriptor d, u32 shape, u32 len, u32 warmup, u32 iters,
                                                      u64 raddr, u32 rkey, u64 laddr, u32 lkey, const u32* payload,
                                                      const Oct* av, u64* issue_ns, u64* issue_cycles, u64* total_ns,
                                                      u64* clocks, int* status) {
#define IBGDA_ISSUE_SHAPE_ARGS d, len, warmup, iters, raddr, rkey, laddr, lkey, payload, av, issue_ns, issue_cycles, total_ns, clocks, status
    switch (shape) {
    case ISSUE_SHAPE_INLINE: issue_shape_loop<scope::GpuFence, ISSUE_SHAPE_INLINE>(IBGDA_ISSUE_SHAPE_ARGS); break;
    case ISSUE_SHAPE_POINTER: issue_shape_loop<scope::GpuFence, ISSUE_SHAPE_POINTER>(IBGDA_ISSUE_SHAPE_ARGS); break;
    case ISSUE_SHAPE_DC_COMPACT: issue_shape_loop<scope::GpuFence, ISSUE_SHAPE_DC_COMPACT>(IBGDA_ISSUE_SHAPE_ARGS); break;
    default: issue_shape_loop<scope::GpuFence, ISSUE_SHAPE_DC_FULL>(IBGDA_ISSUE_SHAPE_ARGS); break;
    }
#undef IBGDA_ISSUE_SHAPE_ARGS
}

/* Every thread posts `per_thread` inline writes (payload: thread id << 32 | sequence) to
 * queue blockIdx.x % nq through the per-thread shared protocol (GROUPED: its grouped
 * form), then waits for its last. */
template <class S, bool GROUPED = false>
__device__ __forceinline__ void post_thread(const DeviceQueueDescriptor* qs, u32 nq, u32 per_thread, u32 batch, u64 raddr,
                                            u32 rkey, int* status) {
    const Queue q{qs[blockIdx.x % nq]};
    const u32 tid = blockIdx.x * blockDim.x + threadIdx.x;
    int err = 0;
    u64 ticket = 0;
    for (u32 k = 0; k < per_thread; k++) {
        const u64 value = ((u64)tid << 32) | k;
        if constexpr (GROUPED) {
            ticket = post_write_inline8_thread_grouped<S>(q, raddr + 8ull * tid, rkey, value, batch, &err);
        } else {
            ticket = post_write_inline8_thread<S>(q, raddr + 8ull * tid, rkey, value, batch, &err);
        }
    }
    const int w = wait_ticket<S>(q, ticket, batch);
    if (w < 0) err = w;
    if (err < 0) atomicMin(status, err);
}

/* Every warp posts `iters` rounds of 32 inline writes (one per lane; payload: thread id <<
 * 32 | round) to queue blockIdx.x % nq cooperatively (AHEAD: each reservation made one
 * round ahead), then lane 0 waits for the warp's last ticket. */
template <class S, bool AHEAD = false>
__device__ __forceinline__ void post_warp(const DeviceQueueDescriptor* qs, u32 nq, u32 iters, u32 batch, u64 raddr, u32 rkey,
                                          int* status) {
    const Queue q{qs[blockIdx.x % nq]};
    const u32 tid = blockIdx.x * blockDim.x + threadIdx.x;
    int err = 0;
    u64 ticket = 0, ahead = ~0ull;
    for (u32 k = 0; k < iters; k++) {
        const u64 value = ((u64)tid << 32) | k;
        if constexpr (AHEAD) {
            ticket = post_write_inline8_warp_ahead<S>(q, raddr + 8ull * tid, rkey, value, batch, k + 1 < iters, ahead, &err);
        } else {
            ticket = post_write_inline8_warp<S>(q, raddr + 8ull * tid, rkey, value, batch, &err);
        }
    }
    if ((threadIdx.x & 31u) == 0) {
        const int w = wait_ticket<S>(q, ticket, batch);
        if (w < 0) err = w;
    }
    if (err < 0) atomicMin(status, err);
}

/* Every thread of the block calls the warp-entered occasional send `n` times together;
 * thread 0 asks each time (payload: 0 << 32 | sequence, so the sink's producer 0 sees its
 * sequence in order), waiting for the completion every `wait_every` sends (0: never), so
 * the ring and the CQ fill and the send waits for room. */
template <class S>
__device__ __forceinline__ void occasional_send(const DeviceQueueDescriptor* d, u32 n, u32 wait_every, u64 raddr,
                                                u32 rkey, int* status) {
    int err = 0;
    for (u32 k = 0; k < n; k++) {
        const bool wait = wait_every != 0 && (k + 1) % wait_every == 0;
        const int s = warp_send_write_inline8<S>(threadIdx.x == 0, d, raddr, rkey, (u64)k, wait);
        if (s < 0 && err == 0) err = s;
    }
    if (threadIdx.x == 0) *status = err;
}

#define IBGDA_SCOPE_KERNELS(S)                                                                                         \
    extern "C" __global__ void ibgda_doorbell_path_##S(DeviceQueueDescriptor d, u64 raddr, u32 rkey, u64 value) {     \
        doorbell_path<scope::S>(d, raddr, rkey, value);                                                                \
    }                                                                                                                  \
    extern "C" __global__ void ibgda_poll_path_##S(DeviceQueueDescriptor d, int* out) { poll_path<scope::S>(d, out); } \
    extern "C" __global__ void ibgda_issue_bench_##S(DeviceQueueDescriptor d, u32 warmup, u32 iters, u64 raddr,        \
                                                     u32 rkey, u64* issue_ns, u64* issue_cycles, u64* total_ns,        \
                                                     u64* clocks, int* status) {                                       \
        issue_bench<scope::S>(d, warmup, iters, raddr, rkey, issue_ns, issue_cycles, total_ns, clocks, status);        \
    }                                                                                                                  \
    extern "C" __global__ void ibgda_post_batch_##S(DeviceQueueDescriptor d, u32 rounds, u32 batch, u64 raddr,         \
                                                    u32 rkey, u64* clocks, int* status) {                              \
        post_batch<scope::S>(d, rounds, batch, raddr, rkey, clocks, status);                                           \
    }                                                                                                                  \
    extern "C" __global__ void ibgda_post_thread_##S(const DeviceQueueDescriptor* qs, u32 nq, u32 per_thread,          \
                                                     u32 batch, u64 raddr, u32 rkey, int* status) {                    \
        post_thread<scope::S>(qs, nq, per_thread, batch, raddr, rkey, status);                                         \
    }                                                                                                                  \
    extern "C" __global__ void ibgda_post_warp_##S(const DeviceQueueDescriptor* qs, u32 nq, u32 iters, u32 batch,      \
                                                   u64 raddr, u32 rkey, int* status) {                                 \
        post_warp<scope::S>(qs, nq, iters, batch, raddr, rkey, status);                                                \
    }                                                                                                                  \
    extern "C" __global__ void ibgda_post_thread_grouped_##S(const DeviceQueueDescriptor* qs, u32 nq, u32 per_thread, \
                                                             u32 batch, u64 raddr, u32 rkey, int* status) {            \
        post_thread<scope::S, true>(qs, nq, per_thread, batch, raddr, rkey, status);                                   \
    }                                                                                                                  \
    extern "C" __global__ void ibgda_post_warp_ahead_##S(const DeviceQueueDescriptor* qs, u32 nq, u32 iters,          \
                                                         u32 batch, u64 raddr, u32 rkey, int* status) {                \
        post_warp<scope::S, true>(qs, nq, iters, batch, raddr, rkey, status);                                          \
    }                                                                                                                  \
    extern "C" __global__ void ibgda_occasional_send_##S(const DeviceQueueDescriptor* d, u32 n, u32 wait_every,        \
                                                         u64 raddr, u32 rkey, int* status) {                           \
        occasional_send<scope::S>(d, n, wait_every, raddr, rkey, status);                                              \
    }

IBGDA_SCOPE_KERNELS(Unordered)
IBGDA_SCOPE_KERNELS(GpuFence)
IBGDA_SCOPE_KERNELS(GpuFencedDbrec)
IBGDA_SCOPE_KERNELS(GpuReleaseStore)
IBGDA_SCOPE_KERNELS(ThreadFence)
IBGDA_SCOPE_KERNELS(SystemReleaseStore)
IBGDA_SCOPE_KERNELS(SystemFence)

/* ---------------------------------------------------------------------------------------
 * The sink: a persistent stand-in for the NIC on GPU-placed (or host-mapped) queues.
 * Doorbell-driven, as a NIC is: a changed doorbell value makes it read the doorbell record
 * and consume the WQEs up to it. Mode 0 checks every WQE's control segment and, for 8-byte
 * inline WRITEs whose payload is (producer << 32 | sequence), that each producer's
 * sequence arrives complete and in order; it writes a CQE for every signaled WQE. The
 * retire modes (for rate runs of one-WQEBB WQEs) read one control segment per doorbell and
 * write one CQE for the last signaled WQE announced.
 *
 * A control segment whose index is not the one expected was fetched stale (the record,
 * which the scopes weaker than a release order before the WQE bytes, ran ahead of them:
 * possible under GpuFence and Unordered, a finding there): it is counted once, nothing is
 * consumed past it, and it is read again on the next pass, so a stale fetch never drops
 * the CQE a producer waits for (it once did: rate rows timed out behind the sink).
 *
 * Retire modes:
 *   1 (RETIRE, what every rate row runs against): state reloaded every pass, the doorbell
 *     polled with an acquire load, the doorbell's loads one after another, CQEs released
 *     at system scope;
 *   2 (RETIRE_TIGHT): the doorbell polled relaxed and acquired with a fence only when it
 *     changed, a one-queue thread's descriptor and state in registers, the doorbell's
 *     independent loads (both control segments it may need, the CQ's consumer index) in
 *     flight together, CQEs released at GPU scope (their readers are the GPU's producers,
 *     the CQ is device memory). Its own capacity is higher (the capacity row), yet on the
 *     H200 with 64 queues the producers beside it ran 4x slower than beside mode 1, the
 *     rows with no ring reuse too (so not through its CQEs): an A/B row, not the default;
 *   3, 4, 5: mode 2 with one of its idle-pass properties undone, to find which one slows
 *     the producers: 3 pauses SINK_IDLE_PAUSE_NS between idle polls (the idle poll rate
 *     of mode 1), 4 polls with an acquire load (an L1 invalidation every pass, as mode 1),
 *     5 reads the host-mapped stop flag every SINK_STOP_EVERY_NS of %globaltimer instead
 *     of every 256 passes (as many PCIe reads per second as mode 1 makes).
 * ------------------------------------------------------------------------------------- */

constexpr u32 SINK_MODE_CHECK = 0;
constexpr u32 SINK_MODE_RETIRE = 1;
constexpr u32 SINK_MODE_RETIRE_TIGHT = 2;
constexpr u32 SINK_MODE_TIGHT_PAUSED = 3;
constexpr u32 SINK_MODE_TIGHT_ACQUIRE = 4;
constexpr u32 SINK_MODE_TIGHT_TIMED_STOP = 5;
constexpr u32 SINK_IDLE_PAUSE_NS = 512;
constexpr u64 SINK_STOP_EVERY_NS = 100000;

/* The retire mode 1: the sink as the rate rows run it. */
__device__ __forceinline__ bool sink_reloading(u32 mode) { return mode == SINK_MODE_RETIRE; }

struct SinkQueue {
    u64 consumed;
    u64 last_doorbell;
    u64 cq_produced;
    /* Bit 0: the last doorbell announced more than the doorbell record held (DOCA rings
     * the doorbell, then writes the record, then rings the SAME value again, which this
     * value-sampling sink cannot tell from no ring): the record is re-read on every pass
     * until it reaches the doorbell's index. Bit 1: a control segment was read stale; it
     * is read again on every pass until it is current. */
    u64 record_behind;
};

constexpr u64 SINK_RECORD_BEHIND = 1;
constexpr u64 SINK_STALE_PENDING = 2;

__device__ __forceinline__ void fence_acquire_sys() { asm volatile("fence.acquire.sys;" ::: "memory"); }

/* Writes the CQE for WQE `counter` (`opcode`); `ci` is the CQ's consumer index as loaded
 * (ring mode; the loop reloads it while the CQ is full). */
__device__ void sink_write_cqe(const Queue& q, SinkQueue& sq, u32 counter, u32 opcode, u32 ci, bool sys_release) {
    const u32 n = 1u << q.d.log_cq_entries;
    const u64 p = sq.cq_produced;
    if (!q.d.cq_mode) {
        /* Never overrun: wait for the consumer index (CQ doorbell record) to free a slot. */
        Spin spin;
        while ((((u32)p - ci) & 0xffffffu) >= n) {
            if (spin.expired()) return; /* the CQE is dropped; the test sees a missing completion */
            ci = bswap32((u32)ptx::ld_relaxed_sys_b64((const void*)q.d.cq_dbrec)) & 0xffffffu;
        }
    }
    const u32 slot = q.d.cq_mode ? 0u : (u32)p & (n - 1);
    u64* cqe = (u64*)(q.d.cq_ring + (u64)slot * layout::CQE_BYTES);
#pragma unroll
    for (u32 k = 0; k < layout::CQE_SOP_DROP_QPN / 8; k++) *(volatile u64*)&cqe[k] = 0ull;
    const u32 owner = (u32)(p >> q.d.log_cq_entries) & 1u;
    const u64 sop = bswap32((opcode << 24) | q.d.qpn);
    const u64 ctr = bswap16((u16)counter);
    const u64 last = sop | (ctr << 32) | ((u64)((layout::CQE_OPCODE_REQ << 4) | owner) << 56);
    if (sys_release) {
        ptx::st_release_sys_b64(&cqe[layout::CQE_SOP_DROP_QPN / 8], last);
    } else {
        ptx::st_release_gpu_b64(&cqe[layout::CQE_SOP_DROP_QPN / 8], last);
    }
    sq.cq_produced = p + 1;
}

__device__ __forceinline__ u32 sink_cq_consumer(const Queue& q) {
    return q.d.cq_mode ? 0u : bswap32((u32)ptx::ld_relaxed_sys_b64((const void*)q.d.cq_dbrec)) & 0xffffffu;
}

/* Whether control-segment word 0 (as loaded) names WQE `at`. */
__device__ __forceinline__ bool sink_index_is(u64 w0, u64 at) {
    return ((bswap32((u32)w0) >> 8) & 0xffffu) == ((u32)at & 0xffffu);
}

/* A control segment read stale: counted the first time, read again on the next pass. */
__device__ __forceinline__ void sink_stale(SinkQueue& sq, SinkStats& acc) {
    if ((sq.record_behind & SINK_STALE_PENDING) == 0) acc.bad_wqes++;
    sq.record_behind |= SINK_STALE_PENDING;
}

/* One pass over one queue; returns whether the doorbell (or a pending re-read) made it
 * look at the queue's WQEs. */
__device__ bool sink_queue(const Queue& q, SinkQueue& sq, u32 mode, u32* expect_seq, u32 max_producers, SinkStats& acc) {
    const bool reloading = sink_reloading(mode);
    const bool acquire_poll = reloading || mode == SINK_MODE_TIGHT_ACQUIRE;
    const u64 db = acquire_poll ? ptx::ld_acquire_sys_b64((const void*)q.d.doorbell)
                                : ptx::ld_relaxed_sys_b64((const void*)q.d.doorbell);
    const bool rung = db != sq.last_doorbell;
    if (!rung && sq.record_behind == 0) return false;
    /* What the doorbell (or, behind it, the record) announces is read after this. */
    if (!acquire_poll) fence_acquire_sys();
    sq.last_doorbell = db;
    if (rung) acc.doorbells++;
    const u32 db_qpn = bswap32((u32)(db >> 32)) >> 8;
    const u32 db_idx = (bswap32((u32)db) >> 8) & 0xffffu;
    const u64 record = ptx::ld_relaxed_sys_b64((const void*)(q.d.sq_dbrec - layout::SEND_DBREC_OFFSET));
    if (!reloading && sq.record_behind != 0) fence_acquire_sys(); /* the record itself announces */
    const u32 rec = bswap32((u32)(record >> 32)) & 0xffffu;
    const u32 cap = q.capacity();
    /* The doorbell at or behind the record (rdma-core and ibgda: the last WQE's index;
     * NVSHMEM and DOCA: the next free one), or ahead of it by at most a ring (DOCA's early
     * ring, before its record store): then the record is re-read until it catches up. */
    const bool behind_record = (u16)(rec - db_idx) <= cap;
    const bool ahead_of_record = !behind_record && (u16)(db_idx - rec) <= cap;
    sq.record_behind = (sq.record_behind & SINK_STALE_PENDING) | (ahead_of_record ? SINK_RECORD_BEHIND : 0ull);
    if (rung && (db_qpn != q.d.qpn || (!behind_record && !ahead_of_record))) acc.bad_doorbells++;
    const u64 target = sq.consumed + (u16)(rec - (u16)sq.consumed);
    if (target - sq.consumed > cap) {
        acc.bad_doorbells++;
        return true;
    }
    if (mode != SINK_MODE_CHECK && target > sq.consumed) {
        /* Only retire: the last WQE if signaled, else the last one crossing a multiple of
         * the signal interval (one-WQEBB WQEs). */
        const u64 m = round_down(target, q.d.signal_interval);
        const bool crossing = m > sq.consumed && m >= 1;
        const u64 last = target - 1;
        u64 at = last;
        u64 w0, w1;
        u32 ci;
        if (reloading) {
            const u64* c = (const u64*)q.slots(at).octo(0);
            w0 = *(const volatile u64*)&c[0];
            w1 = *(const volatile u64*)&c[1];
            if (sink_index_is(w0, at) && (((u32)(w1 >> 24)) & layout::FM_CE_SE_CQ_UPDATE) == 0) {
                if (crossing) {
                    at = m - 1;
                    c = (const u64*)q.slots(at).octo(0);
                    w0 = *(const volatile u64*)&c[0];
                    w1 = *(const volatile u64*)&c[1];
                } else {
                    at = ~0ull;
                }
            }
            ci = at != ~0ull ? sink_cq_consumer(q) : 0u;
        } else {
            /* Both candidates and the consumer index in flight together. */
            const u64* c = (const u64*)q.slots(at).octo(0);
            const u64* cm = (const u64*)q.slots(crossing ? m - 1 : at).octo(0);
            const u64 a0 = *(const volatile u64*)&c[0], a1 = *(const volatile u64*)&c[1];
            const u64 b0 = *(const volatile u64*)&cm[0], b1 = *(const volatile u64*)&cm[1];
            ci = sink_cq_consumer(q);
            if (!sink_index_is(a0, at) || (((u32)(a1 >> 24)) & layout::FM_CE_SE_CQ_UPDATE) != 0) {
                w0 = a0;
                w1 = a1;
            } else if (crossing) {
                at = m - 1;
                w0 = b0;
                w1 = b1;
            } else {
                at = ~0ull;
                w0 = w1 = 0ull;
            }
        }
        if (at != ~0ull) {
            if (!sink_index_is(w0, at)) {
                /* Stale: the WQE's bytes are not visible yet. Consume nothing of it. */
                sink_stale(sq, acc);
                return true;
            }
            if ((((u32)(w1 >> 24)) & layout::FM_CE_SE_CQ_UPDATE) == 0) acc.bad_wqes++;
            sink_write_cqe(q, sq, (u32)at & 0xffffu, bswap32((u32)w0) & 0xffu, ci, reloading);
            acc.cqes++;
        }
        sq.record_behind &= ~SINK_STALE_PENDING;
        acc.wqes += target - sq.consumed;
        sq.consumed = target;
        return true;
    }
    while (sq.consumed < target) {
        const u64 at = sq.consumed;
        const u64* c = (const u64*)q.slots(at).octo(0);
        const u64 w0 = *(const volatile u64*)&c[0];
        const u64 w1 = *(const volatile u64*)&c[1];
        const u32 word0 = bswap32((u32)w0);
        const u32 word1 = bswap32((u32)(w0 >> 32));
        const u32 ds = word1 & layout::MAX_DS;
        const u32 opcode = word0 & 0xffu;
        if (!sink_index_is(w0, at)) {
            /* Stale (or never written): read again on the next pass. */
            sink_stale(sq, acc);
            return true;
        }
        if ((word1 >> 8) != q.d.qpn || ds == 0) {
            acc.bad_wqes++;
            sq.consumed = target; /* give up on this queue's stream */
            return true;
        }
        sq.record_behind &= ~SINK_STALE_PENDING;
        const u32 wqebbs = wqebbs_for_ds(ds);
        if (opcode == layout::OPCODE_RDMA_WRITE && ds == layout::DS_RC_WRITE_SGE && expect_seq != nullptr) {
            const u64* pl = (const u64*)q.slots(at).octo(2);
            const u64 h = *(const volatile u64*)&pl[0];
            const u64 v = (h >> 32) | (*(const volatile u64*)&pl[1] << 32);
            if (bswap32((u32)h) == (8u | layout::INLINE_SEGMENT_FLAG)) {
                const u32 producer = (u32)(v >> 32), seq = (u32)v;
                if (producer >= max_producers || expect_seq[producer] != seq) {
                    acc.bad_payloads++;
                } else {
                    expect_seq[producer] = seq + 1;
                }
            }
        }
        if ((((u32)(w1 >> 24)) & layout::FM_CE_SE_CQ_UPDATE) != 0) {
            sink_write_cqe(q, sq, (u32)at & 0xffffu, opcode, sink_cq_consumer(q), false);
            acc.cqes++;
        }
        acc.wqes++;
        sq.consumed = at + wqebbs;
    }
    return true;
}

__device__ void sink_add_stats(SinkStats* stats, const SinkStats& acc) {
    atomicAdd(&stats->doorbells, acc.doorbells);
    atomicAdd(&stats->wqes, acc.wqes);
    atomicAdd(&stats->cqes, acc.cqes);
    atomicAdd(&stats->bad_wqes, acc.bad_wqes);
    atomicAdd(&stats->bad_payloads, acc.bad_payloads);
    atomicAdd(&stats->bad_doorbells, acc.bad_doorbells);
}

/* Whether the sink should read the host-mapped stop flag after this pass: every 256
 * passes, or (mode 5) every SINK_STOP_EVERY_NS. */
__device__ __forceinline__ bool sink_stop_due(u32 mode, u32& spins, u64& last_check) {
    if (mode == SINK_MODE_TIGHT_TIMED_STOP) {
        const u64 t = ptx::globaltimer();
        if (t - last_check < SINK_STOP_EVERY_NS) return false;
        last_check = t;
        return true;
    }
    return (++spins & 255u) == 0;
}

/* Thread t serves queues t, t + threads, ...; runs until *stop (host-mapped) is set, then
 * adds its counts to *stats. A thread with one queue (mode 0 and the tight modes) keeps
 * its descriptor and state in registers across passes. */
extern "C" __global__ void ibgda_sink(const DeviceQueueDescriptor* qs, u32 nq, SinkQueue* sqs, u32 mode, u32* expect_seq,
                                      u32 max_producers, const volatile u32* stop, SinkStats* stats) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 threads = gridDim.x * blockDim.x;
    SinkStats acc = {};
    u32 spins = 0;
    u64 last_check = 0;
    if (nq <= threads && !sink_reloading(mode)) {
        if (t < nq) {
            const Queue q{qs[t]};
            SinkQueue sq = sqs[t];
            for (;;) {
                const bool busy = sink_queue(q, sq, mode, expect_seq, max_producers, acc);
                if (!busy && mode == SINK_MODE_TIGHT_PAUSED) __nanosleep(SINK_IDLE_PAUSE_NS);
                if (sink_stop_due(mode, spins, last_check) && *stop) break;
            }
            /* A last pass, so nothing rung before the stop is missed. */
            sink_queue(q, sq, mode, expect_seq, max_producers, acc);
            sqs[t] = sq;
        }
        sink_add_stats(stats, acc);
        return;
    }
    for (;;) {
        for (u32 i = t; i < nq; i += threads) {
            const Queue q{qs[i]};
            SinkQueue sq = sqs[i];
            sink_queue(q, sq, mode, expect_seq, max_producers, acc);
            sqs[i] = sq;
        }
        if (sink_stop_due(mode, spins, last_check) && *stop) break;
    }
    /* A last pass, so nothing rung before the stop is missed. */
    for (u32 i = t; i < nq; i += threads) {
        const Queue q{qs[i]};
        SinkQueue sq = sqs[i];
        sink_queue(q, sq, mode, expect_seq, max_producers, acc);
        sqs[i] = sq;
    }
    sink_add_stats(stats, acc);
}

/* The sink's own capacity, no producer: thread t owns queue t (nq <= threads) and, for
 * each of `doorbells` rounds, plays the producer's last stores of a doorbell of `batch`
 * one-WQEBB WQEs (the control segment of the batch's last WQE, signaled; the doorbell
 * record; the doorbell) and the consumer's (the CQ doorbell record, freeing every CQE),
 * then runs one sink pass in `mode` (1 or 2) over it. clocks[t] = ns over its rounds;
 * stats gets the sink's counts (doorbells must equal rounds). The ring holds the host's
 * zeros elsewhere: mode 1 reads only the last WQE (signaled) of each doorbell. */
extern "C" __global__ void ibgda_sink_capacity(const DeviceQueueDescriptor* qs, u32 nq, SinkQueue* sqs, u32 mode,
                                               u32 batch, u32 doorbells, u64* clocks, SinkStats* stats) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nq) return;
    const Queue q{qs[t]};
    SinkQueue sq = sqs[t];
    SinkStats acc = {};
    u64 next = sq.consumed;
    const u64 t0 = ptx::globaltimer();
    for (u32 r = 0; r < doorbells; r++) {
        next += batch;
        build_nop(q.slots(next - 1), ctrl(q.d.qpn, layout::FM_CE_SE_CQ_UPDATE));
        /* The record, then the doorbell: this thread's own stores, which its loads after
         * them see (no fence: the time is the sink's, not a producer's ordering). */
        ptx::st_relaxed_sys_b32((void*)q.d.sq_dbrec, q.dbrec_value(next));
        ptx::st_relaxed_gpu_b64((void*)q.d.doorbell, q.doorbell_value(next));
        if (!q.d.cq_mode) ptx::st_relaxed_sys_b32((void*)q.d.cq_dbrec, bswap32((u32)sq.cq_produced & 0xffffffu));
        sink_queue(q, sq, mode, nullptr, 0, acc);
    }
    clocks[t] = ptx::globaltimer() - t0;
    sqs[t] = sq;
    sink_add_stats(stats, acc);
}

/* ---------------------------------------------------------------------------------------
 * One launch holding both sides, for tools that serialize kernels (compute-sanitizer):
 * the last block is the sink (mode 0, payloads checked), the others post cooperatively
 * (one warp each... every warp of every other block) to qs[0], then count themselves done.
 * ------------------------------------------------------------------------------------- */
template <class S>
__device__ __forceinline__ void selftest(const DeviceQueueDescriptor* qs, SinkQueue* sqs, u32* expect_seq, u32 max_producers,
                                         u32 iters, SinkStats* stats, u32* done, int* status) {
    const u32 producers = gridDim.x - 1;
    if (blockIdx.x == producers) {
        if (threadIdx.x != 0) return;
        SinkStats acc = {};
        const Queue q{qs[0]};
        SinkQueue sq = sqs[0];
        Spin spin;
        while (*(volatile u32*)done < producers && !spin.expired()) sink_queue(q, sq, 0, expect_seq, max_producers, acc);
        ptx::fence_acq_rel_gpu();
        sink_queue(q, sq, 0, expect_seq, max_producers, acc);
        sqs[0] = sq;
        *stats = acc;
        return;
    }
    post_warp<S>(qs, 1, iters, 32, 0x70000000ull, 0x99u, status);
    __syncthreads();
    if (threadIdx.x == 0) {
        ptx::fence_acq_rel_gpu();
        atomicAdd(done, 1u);
    }
}

#define IBGDA_SELFTEST(S)                                                                                              \
    extern "C" __global__ void ibgda_selftest_##S(const DeviceQueueDescriptor* qs, SinkQueue* sqs, u32* expect_seq,    \
                                                  u32 max_producers, u32 iters, SinkStats* stats, u32* done,          \
                                                  int* status) {                                                       \
        selftest<scope::S>(qs, sqs, expect_seq, max_producers, iters, stats, done, status);                            \
    }
IBGDA_SELFTEST(GpuFence)
IBGDA_SELFTEST(GpuReleaseStore)
IBGDA_SELFTEST(ThreadFence)

/* Block 0 stores `value` to cells[0] with st.mmio.relaxed.sys; block 1 waits (acquire, at
 * most 1 s) to see it and records what it saw in cells[1] and how long it took in cells[2]. */
extern "C" __global__ void ibgda_mmio_probe(u64* cells, u64 value) {
    if (blockIdx.x == 0) {
        ptx::st_mmio_b64(&cells[0], value);
        return;
    }
    const u64 t0 = ptx::globaltimer();
    u64 seen = 0, t = t0;
    while (t - t0 < 1000000000ull) {
        seen = ptx::ld_acquire_sys_b64(&cells[0]);
        t = ptx::globaltimer();
        if (seen == value) break;
    }
    cells[1] = seen;
    cells[2] = t - t0;
}

#endif /* IBGDA_SOFTNIC_ONLY */

/* ---------------------------------------------------------------------------------------
 * The CUDA software NIC: thread 0 of block b runs engine b (softnic.cuh). Persistent
 * (exit_when_idle = 0): steps until *stop (host-mapped) is set, then drains and exits; an
 * engine idle for longer than IBGDA_SPIN_LIMIT_NS (when set) exits with SPIN_TIMEOUT in
 * its status. Run until idle (exit_when_idle = 1): steps until a step does nothing (the
 * CPU NIC's run_until_idle), for at most NIC_MAX_STEPS steps.
 * ------------------------------------------------------------------------------------- */
constexpr u64 NIC_MAX_STEPS = 1000000ull;
constexpr int NIC_LIVELOCK = -0x401;

extern "C" __global__ void ibgda_softnic(NicEngine* engines, u32 n_engines, const volatile u32* stop, u32 exit_when_idle) {
    if (threadIdx.x != 0 || blockIdx.x >= n_engines) return;
    NicEngine* e = &engines[blockIdx.x];
    const long long c0 = clock64();
    const u64 t0 = ptx::globaltimer();
    Spin idle;
    u64 busy = 0;
    int status = 0;
    bool stopped = false;
    for (;;) {
        if (nic::step(e) != 0) {
            idle = Spin{};
            if (++busy > NIC_MAX_STEPS && exit_when_idle) {
                status = NIC_LIVELOCK;
                break;
            }
            if ((busy & 1023u) == 0 && !exit_when_idle && *stop) {
                stopped = true;
                break;
            }
            continue;
        }
        if (exit_when_idle) break;
        if (*stop) {
            stopped = true;
            break;
        }
        if (idle.expired()) {
            status = SPIN_TIMEOUT;
            break;
        }
    }
    if (stopped) {
        /* A last run to idle, so nothing rung before the stop is missed. */
        u64 k = 0;
        while (nic::step(e) != 0) {
            if (++k > NIC_MAX_STEPS) {
                status = NIC_LIVELOCK;
                break;
            }
        }
    }
    e->cycles = (u64)(clock64() - c0);
    e->ns = ptx::globaltimer() - t0;
    if (status != 0) e->status = status;
}

#ifndef IBGDA_SOFTNIC_ONLY

/* WQEBBs of a request's WQE (the shapes of build_request). */
__device__ __forceinline__ u32 request_wqebbs(const WqeRequest& r) {
    const u32 av = r.transport == layout::TRANSPORT_DC_FULL      ? transport::DcFull::AV_DS
                   : r.transport == layout::TRANSPORT_DC_COMPACT ? transport::DcCompact::AV_DS
                                                                 : 0u;
    u32 ds;
    switch (r.shape) {
    case layout::SHAPE_WRITE_INLINE: ds = 1 + av + 1 + inline_octowords(r.len); break;
    case layout::SHAPE_WRITE:
    case layout::SHAPE_WRITE_IMM:
    case layout::SHAPE_READ: ds = 1 + av + 2; break;
    case layout::SHAPE_MASKED_COMPARE_SWAP_8: ds = 1 + av + 1 + 2 + 1; break;
    case layout::SHAPE_NOP: ds = layout::DS_NOP; break;
    case layout::SHAPE_DUMP: ds = layout::DS_DUMP; break;
    default: ds = 1 + av + 1 + 1 + 1; break;
    }
    return wqebbs_for_ds(ds);
}

/* Thread t owns queue qs[t] and posts reqs[t * per .. (t + 1) * per) in order (every
 * request signaled by the host), ringing every `batch` WQEs; then it polls until every
 * WQE completed. statuses[t * per + k] = status of the k-th completion (0, or -syndrome
 * of an error CQE, flushes included); *status = first protocol error (WAIT_DEADLINE, a
 * stray CQE). */
template <class S>
__device__ __forceinline__ void nic_requests(const DeviceQueueDescriptor* qs, u32 nq, const WqeRequest* reqs, u32 per,
                                             u32 batch, int* statuses, int* status) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nq) return;
    Exclusive<S> e = Exclusive<S>::load(qs[t]);
    int* out = statuses + (u64)t * per;
    u32 polled = 0;
    int err = 0;
    Deadline dl;
    auto poll_one = [&]() {
        const Polled p = e.poll();
        if (p.status == POLL_STRAY) {
            err = POLL_STRAY;
        } else if (p.status != 0 && polled < per) {
            out[polled++] = p.status == 1 ? 0 : p.status;
        }
    };
    for (u32 k = 0; k < per && err == 0; k++) {
        const WqeRequest& r = reqs[(u64)t * per + k];
        const u32 w = request_wqebbs(r);
        WqeSlots s;
        while (!e.reserve(w, s)) {
            e.ring(); /* everything written so far must be announced before waiting on it */
            poll_one();
            if (dl.expired(e.q.d.wait_ns)) {
                err = WAIT_DEADLINE;
                break;
            }
        }
        if (err != 0) break;
        Oct av[3];
        const u32* aw = (const u32*)r.av;
#pragma unroll
        for (u32 j = 0; j < 3; j++) av[j] = Oct{{aw[4 * j], aw[4 * j + 1], aw[4 * j + 2], aw[4 * j + 3]}};
        const Ctrl c{e.q.d.qpn, r.fm_ce_se, r.stream_id, r.imm};
        switch (r.transport) {
        case layout::TRANSPORT_DC_COMPACT: build_request<transport::DcCompact>(s, c, Target{av}, r); break;
        case layout::TRANSPORT_DC_FULL: build_request<transport::DcFull>(s, c, Target{av}, r); break;
        default: build_request<transport::Rc>(s, c, Target{av}, r); break;
        }
        e.commit(w);
        if ((k + 1) % batch == 0) e.ring();
    }
    e.ring();
    dl = Deadline{};
    while (err == 0 && polled < per) {
        poll_one();
        if (dl.expired(e.q.d.wait_ns)) err = WAIT_DEADLINE;
    }
    e.store();
    if (err < 0) atomicMin(status, err);
}

#define IBGDA_NIC_REQUESTS(S)                                                                                         \
    extern "C" __global__ void ibgda_nic_requests_##S(const DeviceQueueDescriptor* qs, u32 nq, const WqeRequest* reqs, \
                                                      u32 per, u32 batch, int* statuses, int* status) {                \
        nic_requests<scope::S>(qs, nq, reqs, per, batch, statuses, status);                                           \
    }
IBGDA_NIC_REQUESTS(GpuFence)
IBGDA_NIC_REQUESTS(GpuReleaseStore)
IBGDA_NIC_REQUESTS(ThreadFence)

#endif /* IBGDA_SOFTNIC_ONLY */
