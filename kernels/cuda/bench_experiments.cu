/* bench_experiments.cu: the paper's posting experiments on the device library, per scope S
 * (extern "C" <kernel>_<S>):
 *   ibgda_bench_rate_S        message rate (Table 5): every thread posts 8-byte inline RC
 *                             WRITEs in one of three publication modes (below), then waits
 *                             for its last; the grid's first start and last end are taken
 *                             from %globaltimer, the SM clock from clock64 on block 0
 *   ibgda_bench_completion_S  completion scope (section 4.1, Figure 4): one thread posts one
 *                             signaled WRITE to queue 0 and waits for it, either on that
 *                             queue alone or with a quiet over all `nq` queues; put+completion
 *                             ns per iteration
 * Every queue-pair wait is bounded by its descriptor's wait_ns; the self-sink's wait for
 * its producers, when compiled with IBGDA_SPIN_LIMIT_NS (the benchmark does).
 */
#include "ibgda.cuh"

using namespace ibgda;

/* Publication modes of ibgda_bench_rate_S. */
constexpr u32 RATE_EXCLUSIVE = 0; /* thread t owns queue t (Exclusive), `batch` WQEs per doorbell */
constexpr u32 RATE_THREAD = 1;    /* every thread posts through the per-thread shared protocol */
constexpr u32 RATE_WARP = 2;      /* every warp posts 32 WQEs per round, cooperatively */
constexpr u32 RATE_WARP_AHEAD = 3; /* as RATE_WARP, each round's reservation made one round ahead */
constexpr u32 RATE_THREAD_GROUPED = 4; /* as RATE_THREAD, the lanes calling together grouped */
constexpr u32 RATE_WARP_EXCLUSIVE = 5; /* warp w owns queue w (WarpExclusive), 32 WQEs per round */
constexpr u32 RATE_BLOCK_EXCLUSIVE = 6; /* block b owns queue b (BlockExclusive), 32 WQEs per warp round */
/* In the shared modes, global warp w posts to queue (w / share) % nq: `share` warps per
 * queue, in launch order (so a block of 8 warps with share 8 is one queue per block, and
 * share 1 gives every warp its own queue wherever the warps are placed). */

constexpr int RATE_BAD_MODE = -0x300;

/* clocks: [0] first start ns (atomicMin; the host sets it to all ones), [1] last end ns
 * (atomicMax), [2] clock64 cycles and [3] %globaltimer ns of block 0's thread 0 over its run.
 * In the warp modes `rounds` counts rounds of 32 WQEs per warp; in the others WQEs per
 * thread. In warp-exclusive mode warp w owns queue w (the host launches as many warps as
 * queues) and rings when a round crosses a multiple of `batch`; in block-exclusive mode block
 * b owns queue b (the host launches as many blocks as queues), its warps sharing it. */
template <class S>
__device__ __forceinline__ void bench_rate(const DeviceQueueDescriptor* qs, u32 nq, u32 mode, u32 share, u32 rounds,
                                           u32 batch, u64 raddr, u32 rkey, u64* clocks, int* status) {
    const u32 tid = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 warp = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const u32 shared_queue = (warp / (share == 0 ? 1u : share)) % nq;
    __syncthreads();
    const u64 t0 = ptx::globaltimer();
    const long long c0 = clock64();
    if (threadIdx.x == 0) atomicMin(&clocks[0], t0);
    int err = 0;
    if (mode == RATE_EXCLUSIVE) {
        if (tid < nq) {
            Exclusive<S> e = Exclusive<S>::load(qs[tid]);
            u64 ticket = e.next;
            Deadline dl;
            for (u32 r = 0; r < rounds && err == 0; r += batch) {
                const u32 n = rounds - r < batch ? rounds - r : batch;
                for (u32 k = 0; k < n; k++) {
                    WqeSlots s;
                    while (!e.reserve(1, s)) {
                        const Polled p = e.poll();
                        if (p.status < 0) err = p.status;
                        if (dl.expired(e.q.d.wait_ns)) err = WAIT_DEADLINE;
                        if (err != 0) break;
                    }
                    if (err != 0) break;
                    dl = Deadline{};
                    const bool last = r + k + 1 == rounds;
                    const u32 flags = (last || e.q.must_signal(e.next, 1)) ? layout::FM_CE_SE_CQ_UPDATE : 0u;
                    build_write_inline8<transport::Rc>(s, ctrl(e.q.d.qpn, flags), Target{nullptr}, raddr + 8ull * tid, rkey,
                                                       ((u64)tid << 32) | (r + k));
                    ticket = e.commit(1);
                }
                e.ring();
            }
            if (err == 0) err = e.wait(ticket);
            e.store();
        }
    } else if (mode == RATE_THREAD || mode == RATE_THREAD_GROUPED) {
        const Queue q{qs[shared_queue]};
        u64 ticket = 0;
        for (u32 k = 0; k < rounds; k++) {
            const u64 value = ((u64)tid << 32) | k;
            ticket = mode == RATE_THREAD
                         ? post_write_inline8_thread<S>(q, raddr + 8ull * tid, rkey, value, batch, &err)
                         : post_write_inline8_thread_grouped<S>(q, raddr + 8ull * tid, rkey, value, batch, &err);
        }
        const int w = wait_ticket<S>(q, ticket, batch);
        if (w < 0) err = w;
    } else if (mode == RATE_WARP || mode == RATE_WARP_AHEAD) {
        const Queue q{qs[shared_queue]};
        u64 ticket = 0;
        u64 ahead = ~0ull;
        for (u32 k = 0; k < rounds; k++) {
            const u64 value = ((u64)tid << 32) | k;
            ticket = mode == RATE_WARP
                         ? post_write_inline8_warp<S>(q, raddr + 8ull * tid, rkey, value, batch, &err)
                         : post_write_inline8_warp_ahead<S>(q, raddr + 8ull * tid, rkey, value, batch, k + 1 < rounds,
                                                            ahead, &err);
        }
        if ((threadIdx.x & 31u) == 0) {
            const int w = wait_ticket<S>(q, ticket, batch);
            if (w < 0) err = w;
        }
    } else if (mode == RATE_WARP_EXCLUSIVE) {
        if (warp < nq) {
            WarpExclusive<S> w = WarpExclusive<S>::load(qs[warp]);
            u64 ticket = w.e.next;
            for (u32 k = 0; k < rounds && err == 0; k++) {
                const bool last = k + 1 == rounds;
                const bool ring_now = last || crosses_multiple(w.e.next, w.e.next + 32u, batch);
                ticket = w.post_write_inline8(raddr + 8ull * tid, rkey, ((u64)tid << 32) | k, last, ring_now, &err);
            }
            if (err == 0) err = w.wait(ticket);
            w.store();
        }
    } else if (mode == RATE_BLOCK_EXCLUSIVE) {
        /* Block-uniform: every thread of an owning block loads and stores. */
        __shared__ BlockQueueCounters counters;
        if (blockIdx.x < nq) {
            BlockExclusive<S> b = BlockExclusive<S>::load(qs[blockIdx.x], &counters);
            u64 ticket = 0;
            for (u32 k = 0; k < rounds && err == 0; k++) {
                ticket = b.post_write_inline8_warp(raddr + 8ull * tid, rkey, ((u64)tid << 32) | k, k + 1 == rounds, batch,
                                                   &err);
            }
            if (err == 0) err = b.wait(ticket);
            b.store();
        }
    } else {
        err = RATE_BAD_MODE;
    }
    __syncthreads();
    const u64 t1 = ptx::globaltimer();
    const long long c1 = clock64();
    if (threadIdx.x == 0) atomicMax(&clocks[1], t1);
    if (tid == 0) {
        clocks[2] = (u64)(c1 - c0);
        clocks[3] = t1 - t0;
    }
    if (err < 0) atomicMin(status, err);
}

/* One thread: `warmup + iters` iterations of (post one signaled 8-byte inline WRITE to
 * qs[0] through the shared protocol; wait for it: on qs[0] alone when `quiet` is 0, or a
 * quiet over every one of the `nq` queues). put_c_ns[i] = ns from before the post to
 * after the wait; clocks[0..2] = clock64 and %globaltimer over the timed iterations. */
template <class S>
__device__ __forceinline__ void bench_completion(const DeviceQueueDescriptor* qs, u32 nq, u32 quiet, u32 warmup, u32 iters,
                                                 u64 raddr, u32 rkey, u64* put_c_ns, u64* clocks, int* status) {
    const Queue q{qs[0]};
    int err = 0;
    u64 g_start = 0;
    long long c_start = 0;
    for (u32 i = 0; i < warmup + iters && err == 0; i++) {
        if (i == warmup) {
            g_start = ptx::globaltimer();
            c_start = clock64();
        }
        const u64 t0 = ptx::globaltimer();
        const u64 ticket = post_write_inline8_thread<S>(q, raddr, rkey, 0x0123456789abcdefull ^ i, 1, &err);
        const int w = quiet ? quiet_all<S>(qs, nq, 1) : wait_ticket<S>(q, ticket, 1);
        if (w < 0) err = w;
        const u64 t1 = ptx::globaltimer();
        if (i >= warmup) put_c_ns[i - warmup] = t1 - t0;
    }
    clocks[0] = (u64)(clock64() - c_start);
    clocks[1] = ptx::globaltimer() - g_start;
    *status = err;
}

/* ---------------------------------------------------------------------------------------
 * The rate run in one launch, for a profiler (which serializes kernels, so the persistent
 * sink and a producer launch cannot run side by side under it): blocks 0..gridDim.x - 2 run
 * bench_rate; thread 0 of the last block retires as the sink's retire mode does (reading
 * each queue's doorbell record, one CQE for the last signaled WQE announced), until every
 * producer block is done. scratch: 2 words per queue (consumed, CQEs written) and a done
 * counter after them, zeroed by the host.
 * ------------------------------------------------------------------------------------- */
__device__ void selfsink_retire(const DeviceQueueDescriptor* qs, u32 nq, u64* scratch) {
    for (u32 i = 0; i < nq; i++) {
        const Queue q{qs[i]};
        u64& consumed = scratch[2 * i];
        u64& produced = scratch[2 * i + 1];
        const u64 record = ptx::ld_acquire_sys_b64((const void*)(q.d.sq_dbrec - layout::SEND_DBREC_OFFSET));
        const u64 target = consumed + (u16)((bswap32((u32)(record >> 32)) & 0xffffu) - (u16)consumed);
        if (target <= consumed || target - consumed > q.capacity()) continue;
        u64 at = target - 1;
        const u64* c = (const u64*)q.slots(at).octo(0);
        u64 w1 = *(const volatile u64*)&c[1];
        if ((((u32)(w1 >> 24)) & layout::FM_CE_SE_CQ_UPDATE) == 0) {
            const u64 m = target / q.d.signal_interval * q.d.signal_interval;
            at = m > consumed ? m - 1 : ~0ull;
        }
        if (at != ~0ull) {
            const u32 n = 1u << q.d.log_cq_entries;
            Spin spin;
            bool room = false;
            while (!room && !spin.expired()) {
                const u32 ci = bswap32((u32)ptx::ld_relaxed_sys_b64((const void*)q.d.cq_dbrec)) & 0xffffffu;
                room = (((u32)produced - ci) & 0xffffffu) < n;
            }
            if (room) {
                const u32 slot = (u32)produced & (n - 1);
                u64* cqe = (u64*)(q.d.cq_ring + (u64)slot * layout::CQE_BYTES);
                const u32 owner = (u32)(produced >> q.d.log_cq_entries) & 1u;
                const u64 sop = bswap32((layout::OPCODE_RDMA_WRITE << 24) | q.d.qpn);
                const u64 ctr = bswap16((u16)at);
                ptx::st_release_sys_b64(&cqe[layout::CQE_SOP_DROP_QPN / 8],
                                        sop | (ctr << 32) | ((u64)((layout::CQE_OPCODE_REQ << 4) | owner) << 56));
                produced++;
            }
        }
        consumed = target;
    }
}

template <class S>
__device__ __forceinline__ void bench_rate_selfsink(const DeviceQueueDescriptor* qs, u32 nq, u32 mode, u32 share, u32 rounds,
                                                    u32 batch, u64 raddr, u32 rkey, u64* clocks, u64* scratch, int* status) {
    const u32 producers = gridDim.x - 1;
    u32* done = (u32*)&scratch[2 * nq];
    if (blockIdx.x == producers) {
        if (threadIdx.x != 0) return;
        Spin spin;
        while (*(volatile u32*)done < producers) {
            selfsink_retire(qs, nq, scratch);
            if (spin.expired()) {
                atomicMin(status, SPIN_TIMEOUT);
                return;
            }
        }
        return;
    }
    bench_rate<S>(qs, nq, mode, share, rounds, batch, raddr, rkey, clocks, status);
    if (threadIdx.x == 0) {
        ptx::fence_acq_rel_gpu();
        atomicAdd(done, 1u);
    }
}

extern "C" __global__ void ibgda_bench_rate_selfsink_GpuFence(const DeviceQueueDescriptor* qs, u32 nq, u32 mode, u32 share,
                                                              u32 rounds, u32 batch, u64 raddr, u32 rkey, u64* clocks,
                                                              u64* scratch, int* status) {
    bench_rate_selfsink<scope::GpuFence>(qs, nq, mode, share, rounds, batch, raddr, rkey, clocks, scratch, status);
}

#define IBGDA_BENCH_KERNELS(S)                                                                                         \
    extern "C" __global__ void ibgda_bench_rate_##S(const DeviceQueueDescriptor* qs, u32 nq, u32 mode, u32 share,    \
                                                    u32 rounds, u32 batch, u64 raddr, u32 rkey, u64* clocks,           \
                                                    int* status) {                                                     \
        bench_rate<scope::S>(qs, nq, mode, share, rounds, batch, raddr, rkey, clocks, status);                         \
    }                                                                                                                  \
    extern "C" __global__ void ibgda_bench_completion_##S(const DeviceQueueDescriptor* qs, u32 nq, u32 quiet,          \
                                                          u32 warmup, u32 iters, u64 raddr, u32 rkey, u64* put_c_ns,   \
                                                          u64* clocks, int* status) {                                  \
        bench_completion<scope::S>(qs, nq, quiet, warmup, iters, raddr, rkey, put_c_ns, clocks, status);               \
    }

IBGDA_BENCH_KERNELS(Unordered)
IBGDA_BENCH_KERNELS(GpuFence)
IBGDA_BENCH_KERNELS(GpuFencedDbrec)
IBGDA_BENCH_KERNELS(GpuReleaseStore)
IBGDA_BENCH_KERNELS(ThreadFence)
IBGDA_BENCH_KERNELS(SystemReleaseStore)
IBGDA_BENCH_KERNELS(SystemFence)
