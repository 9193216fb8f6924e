/* ibgda_api.cuh: the device API kernel authors write at, on top of the device library
 * (ibgda.cuh): windows and offsets instead of addresses, one-sided operations, signals,
 * local completion counters, flush; every wait bounded by the communicator's run-time
 * deadline. Every layout and code comes from the generated ibgda_layout.h (the Rust types
 * of ibgda::nic::window and ibgda_kernels::api).
 *
 * A kernel receives a DeviceComm (the RC queue pair to every peer, counters, the scratch
 * word unfetched atomic results land in) and DeviceWindows (one registration per peer)
 * by value. Every operation names a window, a peer and an offset; an offset and length
 * outside the window, a peer or counter out of range, a misaligned atomic word are a
 * status (layout::STATUS_*) and no WQE is built.
 *
 *   put              WRITE: inline when len <= comm.inline_max, gathered otherwise
 *   put_value        8-byte inline WRITE of a value (its bytes in memory order)
 *   get              READ into the local side
 *   atomic_add       8-byte fetch-add whose result nobody reads
 *   fetch_add        8-byte fetch-add, the original value to the local side
 *   compare_swap     8-byte compare-and-swap, the original value to the local side
 *   put_with_signal  put, then an 8-byte add on the peer's signal word, on one queue pair
 *                    (the RC responder executes them in order: fence mode 0)
 *   signal           the add alone
 *   wait_signal      the receiver: until its signal word compares with a value (acquire)
 *   read_counter / wait_counter   local completion counters
 *   flush / flush_all             everything posted to one peer / to all, complete
 *
 * Each posting operation comes per thread (op<S>(...)) and warp-cooperatively
 * (op_warp<S>(...): all 32 lanes call together, each with its own arguments and `active`;
 * lanes posting to one peer share one reservation and one publication), for every
 * ordering scope S of ibgda::scope. Atomics and signal words hold big-endian values, as
 * the NIC's atomics write them.
 *
 * A wait for room that fails (an error completion, the deadline) returns before building:
 * the reserved slots stay unpublished and the queue pair can take no more WQEs (a queue in
 * error needs recovery). */
#pragma once
#include "ibgda.cuh"

/* The posting path (reserve, build, publish) is inlined into every operation a kernel
 * calls. A program that calls many kinds of operation can define IBGDA_API_OUTLINE to 1
 * before including this header: one copy of the path per scope, called (smaller code and
 * faster compiles; each operation then passes its plan through local memory). */
#ifndef IBGDA_API_OUTLINE
#define IBGDA_API_OUTLINE 0
#endif
#if IBGDA_API_OUTLINE
#define IBGDA_API_POST __noinline__
#else
#define IBGDA_API_POST __forceinline__
#endif

namespace ibgda {
namespace api {

static_assert(SPIN_TIMEOUT == layout::STATUS_SPIN_TIMEOUT, "one spin timeout code");
static_assert(WAIT_DEADLINE == layout::STATUS_DEADLINE, "one deadline code");
static_assert(POLL_STRAY == layout::STATUS_STRAY_COMPLETION, "one stray completion code");
static_assert(layout::DS_RC_WRITE_SGE * layout::OCTOWORD_BYTES <= layout::WQEBB_BYTES, "gathered WRITE: one WQEBB");
static_assert(layout::DS_RC_ATOMIC_1 * layout::OCTOWORD_BYTES <= layout::WQEBB_BYTES, "atomic: one WQEBB");
static_assert(2 + inline_octowords(layout::PUT_INLINE_MAX) == layout::WQEBB_BYTES / layout::OCTOWORD_BYTES,
              "the largest inline put fills one WQEBB");

constexpr u32 NO_COUNTER = layout::NO_COUNTER;

__device__ __forceinline__ u64 bswap64(u64 x) {
    return ((u64)bswap32((u32)x) << 32) | bswap32((u32)(x >> 32));
}

/* -------------------------------------------------------------------------------------
 * Planning: the WQEs one operation needs, from windows, peers and offsets. Pure
 * computation over the descriptors (the same code is compiled for the host by the tests).
 * ----------------------------------------------------------------------------------- */

enum class Kind : u32 { WriteInline, WriteGather, WriteValue, Read, FetchAdd, CompareSwap };

/* One WQE: `laddr` is the gather source, the scatter destination or the atomic's result
 * (for an inline WRITE, the address the payload is copied from). */
struct Wqe {
    Kind kind;
    u32 len;
    u32 rkey;
    u32 lkey;
    u64 raddr;
    u64 laddr;
    u64 op0; /* put_value's value; the add; compare_swap's swap */
    u64 op1; /* compare_swap's compare */
};

/* At most two WQEs (put_with_signal): their WQEBBs in total, and a status. */
struct Plan {
    Wqe w[2];
    u32 n;
    u32 wqebbs;
    int status;
};

__device__ __forceinline__ u32 wqe_wqebbs(const Wqe& w) {
    if (w.kind == Kind::WriteInline) return wqebbs_for_ds(2 + inline_octowords(w.len));
    return 1u; /* gathered WRITE, 8-byte inline WRITE, READ, atomics: 3 or 4 octowords */
}

__device__ __forceinline__ Plan failed(int status) {
    Plan p;
    p.n = 0;
    p.wqebbs = 0;
    p.status = status;
    return p;
}

__device__ __forceinline__ void add(Plan& p, const Wqe& w) {
    p.w[p.n++] = w;
    p.wqebbs += wqe_wqebbs(w);
}

/* `len` bytes at `off` of peer `peer`'s side of `w`. */
__device__ __forceinline__ int remote_span(const DeviceWindow& w, u32 peer, u64 off, u64 len, u64& addr, u32& rkey) {
    if (peer >= w.n_peers) return layout::STATUS_BAD_PEER;
    const DeviceWindowPeer* p = (const DeviceWindowPeer*)w.peers + peer;
    const u64 base = p->base, size = p->len;
    if (off > size || len > size - off) return layout::STATUS_WINDOW_BOUNDS;
    addr = base + off;
    rkey = p->rkey;
    return layout::STATUS_OK;
}

/* `len` bytes at `off` of this process's side of `w`. */
__device__ __forceinline__ int local_span(const DeviceWindow& w, u64 off, u64 len, u64& addr) {
    if (off > w.local_len || len > w.local_len - off) return layout::STATUS_WINDOW_BOUNDS;
    addr = w.local_base + off;
    return layout::STATUS_OK;
}

/* The data WQE of a put of `len` bytes. */
__device__ __forceinline__ int plan_write(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 dst_off,
                                          const DeviceWindow& src, u64 src_off, u32 len, Wqe& w) {
    if (len > layout::MAX_SEGMENT_BYTES) return layout::STATUS_BAD_LENGTH;
    int s = remote_span(dst, peer, dst_off, len, w.raddr, w.rkey);
    if (s) return s;
    s = local_span(src, src_off, len, w.laddr);
    if (s) return s;
    w.kind = len <= c.inline_max ? Kind::WriteInline : Kind::WriteGather;
    w.len = len;
    w.lkey = src.lkey;
    w.op0 = 0;
    w.op1 = 0;
    return layout::STATUS_OK;
}

/* An 8-byte atomic on the peer's word at `off`, its result to `result`/`result_lkey`. */
__device__ __forceinline__ int plan_atomic(Kind kind, const DeviceWindow& dst, u32 peer, u64 off, u64 result,
                                           u32 result_lkey, u64 op0, u64 op1, Wqe& w) {
    int s = remote_span(dst, peer, off, 8, w.raddr, w.rkey);
    if (s) return s;
    if ((w.raddr & 7u) != 0 || (result & 7u) != 0) return layout::STATUS_MISALIGNED;
    w.kind = kind;
    w.len = 8;
    w.laddr = result;
    w.lkey = result_lkey;
    w.op0 = op0;
    w.op1 = op1;
    return layout::STATUS_OK;
}

__device__ __forceinline__ Plan plan_put(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 dst_off,
                                         const DeviceWindow& src, u64 src_off, u32 len) {
    Plan p = failed(0);
    Wqe w;
    const int s = plan_write(c, peer, dst, dst_off, src, src_off, len, w);
    if (s) return failed(s);
    add(p, w);
    return p;
}

__device__ __forceinline__ Plan plan_put_value(const DeviceWindow& dst, u32 peer, u64 dst_off, u64 value) {
    Plan p = failed(0);
    Wqe w;
    const int s = remote_span(dst, peer, dst_off, 8, w.raddr, w.rkey);
    if (s) return failed(s);
    w.kind = Kind::WriteValue;
    w.len = 8;
    w.lkey = 0;
    w.laddr = 0;
    w.op0 = value;
    w.op1 = 0;
    add(p, w);
    return p;
}

__device__ __forceinline__ Plan plan_get(u32 peer, const DeviceWindow& src, u64 src_off, const DeviceWindow& dst,
                                         u64 dst_off, u32 len) {
    if (len == 0 || len > layout::MAX_SEGMENT_BYTES) return failed(layout::STATUS_BAD_LENGTH);
    Plan p = failed(0);
    Wqe w;
    int s = remote_span(src, peer, src_off, len, w.raddr, w.rkey);
    if (s) return failed(s);
    s = local_span(dst, dst_off, len, w.laddr);
    if (s) return failed(s);
    w.kind = Kind::Read;
    w.len = len;
    w.lkey = dst.lkey;
    w.op0 = 0;
    w.op1 = 0;
    add(p, w);
    return p;
}

/* atomic_add and signal: the result goes to the communicator's scratch word. */
__device__ __forceinline__ Plan plan_add(const DeviceComm& c, const DeviceWindow& dst, u32 peer, u64 off, u64 add_value) {
    Plan p = failed(0);
    Wqe w;
    const int s = plan_atomic(Kind::FetchAdd, dst, peer, off, c.scratch, c.scratch_lkey, add_value, 0, w);
    if (s) return failed(s);
    add(p, w);
    return p;
}

__device__ __forceinline__ Plan plan_fetch(Kind kind, const DeviceWindow& dst, u32 peer, u64 off,
                                           const DeviceWindow& result, u64 result_off, u64 op0, u64 op1) {
    u64 laddr = 0;
    int s = local_span(result, result_off, 8, laddr);
    if (s) return failed(s);
    Plan p = failed(0);
    Wqe w;
    s = plan_atomic(kind, dst, peer, off, laddr, result.lkey, op0, op1, w);
    if (s) return failed(s);
    add(p, w);
    return p;
}

__device__ __forceinline__ Plan plan_put_with_signal(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 dst_off,
                                                     const DeviceWindow& src, u64 src_off, u32 len,
                                                     const DeviceWindow& sig, u64 sig_off, u64 sig_add) {
    Plan p = failed(0);
    Wqe data, signal;
    int s = plan_write(c, peer, dst, dst_off, src, src_off, len, data);
    if (s) return failed(s);
    s = plan_atomic(Kind::FetchAdd, sig, peer, sig_off, c.scratch, c.scratch_lkey, sig_add, 0, signal);
    if (s) return failed(s);
    add(p, data);
    add(p, signal);
    return p;
}

/* Builds the plan's WQEs into `q`'s ring from WQEBB counter `start` on, each signaled when
 * it crosses a multiple of the queue's signal interval (the rule of the host queues and
 * the shared protocol). */
__device__ __forceinline__ void build(const Queue& q, u64 start, const Plan& p) {
    const Target rc{nullptr};
    u64 at = start;
    for (u32 i = 0; i < p.n; i++) {
        const Wqe& w = p.w[i];
        const u32 n = wqe_wqebbs(w);
        const WqeSlots here = q.slots(at);
        const Ctrl c = ctrl(q.d.qpn, q.must_signal(at, n) ? layout::FM_CE_SE_CQ_UPDATE : 0u);
        switch (w.kind) {
        case Kind::WriteInline:
            build_write_inline<transport::Rc>(here, c, rc, w.raddr, w.rkey, (const u8*)w.laddr, w.len, false);
            break;
        case Kind::WriteGather:
            build_write<transport::Rc>(here, c, rc, w.raddr, w.rkey, w.laddr, w.len, w.lkey, false);
            break;
        case Kind::WriteValue: build_write_inline8<transport::Rc>(here, c, rc, w.raddr, w.rkey, w.op0); break;
        case Kind::Read: build_read<transport::Rc>(here, c, rc, w.raddr, w.rkey, w.laddr, w.len, w.lkey); break;
        case Kind::FetchAdd:
            build_atomic<transport::Rc>(here, c, rc, AtomicKind::FetchAdd, w.raddr, w.rkey, w.laddr, w.lkey, w.op0, 0,
                                        0, 0);
            break;
        case Kind::CompareSwap:
            build_atomic<transport::Rc>(here, c, rc, AtomicKind::CompareSwap, w.raddr, w.rkey, w.laddr, w.lkey, w.op0,
                                        w.op1, 0, 0);
            break;
        }
        at += n;
    }
}

/* -------------------------------------------------------------------------------------
 * Bounded waits: the communicator's deadline, in ns of %globaltimer from the first check.
 * ----------------------------------------------------------------------------------- */
/* The library's Deadline (ibgda.cuh) with the communicator's bound, which its queue
 * pairs' descriptors carry too (the host sets both). */
struct CommDeadline {
    Deadline dl;
    u64 limit;
    __device__ __forceinline__ explicit CommDeadline(const DeviceComm& c) : limit(c.wait_ns) {}
    __device__ __forceinline__ bool expired() { return dl.expired(limit); }
};

__device__ __forceinline__ const DeviceQueueDescriptor& queue_of(const DeviceComm& c, u32 peer) {
    return ((const DeviceQueueDescriptor*)c.queues)[peer];
}

/* Until the ring has room for everything before `end` (the device library's wait for
 * room, bounded by the deadline). */
template <class S> __device__ __forceinline__ int wait_room(const DeviceComm& c, const Queue& q, u64 retired, u64 end) {
    CommDeadline dl(c);
    while (retired + q.capacity() < end) {
        const Polled p = shared_poll<S>(q, POLL_AHEAD);
        if (p.status < 0) return p.status;
        retired = p.retired_to;
        if (dl.expired()) return layout::STATUS_DEADLINE;
    }
    return layout::STATUS_OK;
}

/* Until every WQEBB before `ticket` on `q` is complete (a signaled NOP is posted first if
 * no signaled WQE at or after it was reserved). */
template <class S> __device__ __noinline__ int wait_queue(const DeviceComm& c, const Queue& q, u64 ticket) {
    DeviceProducerState* st = q.state();
    if (ptx::ld_acquire_gpu_b64(&st->retired) >= ticket) return layout::STATUS_OK;
    const int s = ensure_signaled<S>(q, ticket, 1);
    if (s < 0) return s;
    CommDeadline dl(c);
    while (ptx::ld_acquire_gpu_b64(&st->retired) < ticket) {
        const Polled p = shared_poll<S>(q, 1);
        if (p.status < 0) return p.status;
        if (dl.expired()) return layout::STATUS_DEADLINE;
    }
    return layout::STATUS_OK;
}

/* -------------------------------------------------------------------------------------
 * Local completion counters. An operation attached to counter k takes the next attach
 * index (an atomic add), waits until the counter tracks fewer than its capacity in flight,
 * posts, and records its ticket in the slot of its index (ticket first, then the index
 * with a release store). The counter's value is the number of attached operations, in
 * attach order, that have completed: whoever reads it advances it under its lock by
 * comparing each slot's ticket with its queue pair's retirement (polling once).
 * ----------------------------------------------------------------------------------- */

__device__ __forceinline__ DeviceCounter* counter_of(const DeviceComm& c, u32 k) { return (DeviceCounter*)c.counters + k; }

__device__ __forceinline__ DeviceCounterSlot* slot_of(const DeviceComm& c, u32 k, u64 index) {
    return (DeviceCounterSlot*)c.counter_slots + (u64)k * c.counter_capacity + (index & (c.counter_capacity - 1));
}

/* Records attach index `index` of counter `k`: `ticket` on `peer`'s queue (0: nothing to
 * wait for). */
__device__ __forceinline__ void record(const DeviceComm& c, u32 k, u64 index, u32 peer, u64 ticket) {
    DeviceCounterSlot* slot = slot_of(c, k, index);
    ptx::st_relaxed_gpu_b64(&slot->ticket, ticket);
    ptx::st_release_gpu_b64(&slot->peer, (u64)peer | ((u64)(u32)(index + 1) << 32));
}

/* Advances counter `k` as far as completions allow (one poll per blocking queue pair);
 * returns its value and, in *blocking, the slot it stopped at (when below `attached`). */
template <class S>
__device__ __noinline__ u64 advance(const DeviceComm& c, u32 k, u32* blocked_peer, u64* blocked_ticket) {
    DeviceCounter* ctr = counter_of(c, k);
    *blocked_ticket = 0;
    if (!try_lock(&ctr->lock)) return ptx::ld_acquire_gpu_b64(&ctr->completed);
    u64 done = ptx::ld_relaxed_gpu_b64(&ctr->completed);
    const u64 attached = ptx::ld_acquire_gpu_b64(&ctr->attached);
    while (done < attached) {
        DeviceCounterSlot* slot = slot_of(c, k, done);
        const u64 tag = ptx::ld_acquire_gpu_b64(&slot->peer);
        if ((u32)(tag >> 32) != (u32)(done + 1)) break; /* not recorded yet */
        const u32 peer = (u32)tag;
        const u64 ticket = ptx::ld_relaxed_gpu_b64(&slot->ticket);
        if (ticket != 0 && peer < c.n_peers) {
            const Queue q{queue_of(c, peer)};
            u64 retired = ptx::ld_acquire_gpu_b64(&q.state()->retired);
            if (retired < ticket) {
                const Polled p = shared_poll<S>(q, 1);
                if (p.status != 0) retired = p.retired_to;
            }
            if (retired < ticket) {
                *blocked_peer = peer;
                *blocked_ticket = ticket;
                break;
            }
        }
        done++;
    }
    ptx::st_release_gpu_b64(&ctr->completed, done);
    unlock(&ctr->lock);
    return done;
}

/* Until counter `k` reaches `value` (or the deadline). */
template <class S> __device__ __noinline__ int wait_counter(const DeviceComm& c, u32 k, u64 value, u64* seen = nullptr) {
    if (k >= c.n_counters) return layout::STATUS_BAD_COUNTER;
    CommDeadline dl(c);
    u64 nudged = 0;
    for (;;) {
        u32 peer = 0;
        u64 ticket = 0;
        const u64 v = advance<S>(c, k, &peer, &ticket);
        if (seen) *seen = v;
        if (v >= value) return layout::STATUS_OK;
        if (ticket != 0 && ticket != nudged) {
            /* Its completion needs a signaled WQE at or after it. */
            const int s = ensure_signaled<S>(Queue{queue_of(c, peer)}, ticket, 1);
            if (s < 0) return s;
            nudged = ticket;
        }
        if (dl.expired()) return layout::STATUS_DEADLINE;
    }
}

/* The counter's value now (advanced as far as completions allow). */
template <class S> __device__ __forceinline__ int read_counter(const DeviceComm& c, u32 k, u64* value) {
    if (k >= c.n_counters) return layout::STATUS_BAD_COUNTER;
    u32 peer = 0;
    u64 ticket = 0;
    *value = advance<S>(c, k, &peer, &ticket);
    return layout::STATUS_OK;
}

/* Takes the next attach index of counter `k` once the counter has room for it. */
template <class S> __device__ __noinline__ int attach(const DeviceComm& c, u32 k, u64* index) {
    DeviceCounter* ctr = counter_of(c, k);
    const u64 i = atomicAdd((unsigned long long*)&ctr->attached, 1ull);
    *index = i;
    if (i < c.counter_capacity) return layout::STATUS_OK;
    if (ptx::ld_acquire_gpu_b64(&ctr->completed) + c.counter_capacity > i) return layout::STATUS_OK;
    return wait_counter<S>(c, k, i + 1 - c.counter_capacity);
}

/* -------------------------------------------------------------------------------------
 * Posting a plan: the device library's shared protocol (atomic reservation, in-order
 * publication, the doorbell rung by whoever holds the publication frontier).
 * ----------------------------------------------------------------------------------- */

__device__ __forceinline__ int check_post(const DeviceComm& c, u32 peer, u32 counter) {
    if (peer >= c.n_peers) return layout::STATUS_BAD_PEER;
    if (counter != NO_COUNTER && counter >= c.n_counters) return layout::STATUS_BAD_COUNTER;
    return layout::STATUS_OK;
}

template <class S>
__device__ IBGDA_API_POST int post(const DeviceComm& c, u32 peer, const Plan& p, u32 counter, u64* ticket) {
    if (p.status) return p.status;
    int s = check_post(c, peer, counter);
    if (s) return s;
    u64 index = 0;
    if (counter != NO_COUNTER) {
        s = attach<S>(c, counter, &index);
        if (s) {
            record(c, counter, index, peer, 0);
            return s;
        }
    }
    const Queue q{queue_of(c, peer)};
    DeviceProducerState* st = q.state();
    const u64 retired_seen = ptx::ld_acquire_gpu_b64(&st->retired);
    const u64 start = atomicAdd((unsigned long long*)&st->reserved, (u64)p.wqebbs);
    const u64 ready_seen = frontier_load<S>(st);
    const u64 end = start + p.wqebbs;
    s = wait_room<S>(c, q, retired_seen, end);
    if (s == 0) {
        build(q, start, p);
        s = shared_publish_seen<S>(q, start, end, c.doorbell_batch, ready_seen);
    }
    if (counter != NO_COUNTER) record(c, counter, index, peer, s == 0 ? end : 0);
    if (ticket) *ticket = end;
    return s;
}

/* A lane of a warp whose lanes post to different peers: alone (not inlined: the rare
 * path of the warp form). */
template <class S>
__device__ __noinline__ int post_apart(const DeviceComm& c, u32 peer, const Plan& p, u32 counter, u64* ticket) {
    return post<S>(c, peer, p, counter, ticket);
}

/* The warp-cooperative form: lanes that post to one peer share one reservation (an
 * exclusive scan of their WQEBBs) and one publication by the first of them; a warp whose
 * posting lanes name different peers posts lane by lane. All 32 lanes call together. */
template <class S>
__device__ IBGDA_API_POST int post_warp(const DeviceComm& c, u32 peer, const Plan& p, u32 counter, u64* ticket,
                                        bool active) {
    int s = active ? (p.status ? p.status : check_post(c, peer, counter)) : layout::STATUS_OK;
    const bool posts = active && s == 0;
    const u32 lane = threadIdx.x & 31u;
    const u32 posting = __ballot_sync(0xffffffffu, posts);
    if (posting == 0) return s;
    const u32 leader = __ffs(posting) - 1;
    const u32 leader_peer = __shfl_sync(0xffffffffu, peer, leader);
    if (!__all_sync(0xffffffffu, !posts || peer == leader_peer)) {
        return posts ? post_apart<S>(c, peer, p, counter, ticket) : s;
    }
    u64 index = 0;
    if (posts && counter != NO_COUNTER) {
        s = attach<S>(c, counter, &index);
        if (s) record(c, counter, index, peer, 0);
    }
    const u32 mine = posts && s == 0 ? p.wqebbs : 0u;
    /* Exclusive scan of the lanes' WQEBBs. */
    u32 incl = mine;
#pragma unroll
    for (u32 d = 1; d < 32; d <<= 1) {
        const u32 v = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += v;
    }
    const u32 total = __shfl_sync(0xffffffffu, incl, 31);
    const u32 before = incl - mine;
    const Queue q{queue_of(c, leader_peer)};
    DeviceProducerState* st = q.state();
    u64 start = 0, ready_seen = 0;
    int room = 0;
    if (lane == leader && total != 0) {
        const u64 retired_seen = ptx::ld_acquire_gpu_b64(&st->retired);
        start = atomicAdd((unsigned long long*)&st->reserved, (u64)total);
        ready_seen = frontier_load<S>(st);
        room = wait_room<S>(c, q, retired_seen, start + total);
    }
    start = __shfl_sync(0xffffffffu, start, leader);
    room = __shfl_sync(0xffffffffu, room, leader);
    /* The leader's acquire of `retired` before every lane's stores into the slots: a
     * shuffle orders no memory, the warp barrier does. */
    __syncwarp();
    if (total != 0 && room == 0 && mine != 0) build(q, start + before, p);
    __syncwarp();
    int published = 0;
    if (lane == leader && total != 0 && room == 0) published = shared_publish_seen<S>(q, start, start + total, c.doorbell_batch, ready_seen);
    published = __shfl_sync(0xffffffffu, published, leader);
    if (mine != 0) {
        const int r = room ? room : published;
        const u64 end = start + before + mine;
        if (counter != NO_COUNTER) record(c, counter, index, peer, r == 0 ? end : 0);
        if (ticket) *ticket = end;
        s = r;
    }
    return s;
}

/* -------------------------------------------------------------------------------------
 * The operations. Per thread, then warp-cooperative (`active`: whether this lane posts).
 * `ticket` (optional) gets the operation's end counter on the peer's queue pair (a later
 * wait_ticket waits for it); `counter` (NO_COUNTER for none) counts it when complete.
 * ----------------------------------------------------------------------------------- */

/* dst[peer][dst_off .. +len) = src[local][src_off .. +len). */
template <class S>
__device__ __forceinline__ int put(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 dst_off,
                                   const DeviceWindow& src, u64 src_off, u32 len, u64* ticket = nullptr,
                                   u32 counter = NO_COUNTER) {
    return post<S>(c, peer, plan_put(c, peer, dst, dst_off, src, src_off, len), counter, ticket);
}
template <class S>
__device__ __forceinline__ int put_warp(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 dst_off,
                                        const DeviceWindow& src, u64 src_off, u32 len, bool active = true,
                                        u64* ticket = nullptr, u32 counter = NO_COUNTER) {
    return post_warp<S>(c, peer, plan_put(c, peer, dst, dst_off, src, src_off, len), counter, ticket, active);
}

/* dst[peer][dst_off .. +8) = the bytes of `value`, carried in the WQE. */
template <class S>
__device__ __forceinline__ int put_value(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 dst_off, u64 value,
                                         u64* ticket = nullptr, u32 counter = NO_COUNTER) {
    return post<S>(c, peer, plan_put_value(dst, peer, dst_off, value), counter, ticket);
}
template <class S>
__device__ __forceinline__ int put_value_warp(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 dst_off,
                                              u64 value, bool active = true, u64* ticket = nullptr,
                                              u32 counter = NO_COUNTER) {
    return post_warp<S>(c, peer, plan_put_value(dst, peer, dst_off, value), counter, ticket, active);
}

/* dst[local][dst_off .. +len) = src[peer][src_off .. +len) (complete once its ticket is). */
template <class S>
__device__ __forceinline__ int get(const DeviceComm& c, u32 peer, const DeviceWindow& src, u64 src_off,
                                   const DeviceWindow& dst, u64 dst_off, u32 len, u64* ticket = nullptr,
                                   u32 counter = NO_COUNTER) {
    return post<S>(c, peer, plan_get(peer, src, src_off, dst, dst_off, len), counter, ticket);
}
template <class S>
__device__ __forceinline__ int get_warp(const DeviceComm& c, u32 peer, const DeviceWindow& src, u64 src_off,
                                        const DeviceWindow& dst, u64 dst_off, u32 len, bool active = true,
                                        u64* ticket = nullptr, u32 counter = NO_COUNTER) {
    return post_warp<S>(c, peer, plan_get(peer, src, src_off, dst, dst_off, len), counter, ticket, active);
}

/* dst[peer] 8-byte word at off += value (big-endian), result unread. */
template <class S>
__device__ __forceinline__ int atomic_add(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 off, u64 value,
                                          u64* ticket = nullptr, u32 counter = NO_COUNTER) {
    return post<S>(c, peer, plan_add(c, dst, peer, off, value), counter, ticket);
}
template <class S>
__device__ __forceinline__ int atomic_add_warp(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 off,
                                               u64 value, bool active = true, u64* ticket = nullptr,
                                               u32 counter = NO_COUNTER) {
    return post_warp<S>(c, peer, plan_add(c, dst, peer, off, value), counter, ticket, active);
}

/* As atomic_add, the original value (big-endian) to result[local][result_off .. +8). */
template <class S>
__device__ __forceinline__ int fetch_add(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 off, u64 value,
                                         const DeviceWindow& result, u64 result_off, u64* ticket = nullptr,
                                         u32 counter = NO_COUNTER) {
    return post<S>(c, peer, plan_fetch(Kind::FetchAdd, dst, peer, off, result, result_off, value, 0), counter, ticket);
}
template <class S>
__device__ __forceinline__ int fetch_add_warp(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 off,
                                              u64 value, const DeviceWindow& result, u64 result_off,
                                              bool active = true, u64* ticket = nullptr, u32 counter = NO_COUNTER) {
    return post_warp<S>(c, peer, plan_fetch(Kind::FetchAdd, dst, peer, off, result, result_off, value, 0), counter,
                        ticket, active);
}

/* if (word == compare) word = swap; the original value to result[local][result_off]. */
template <class S>
__device__ __forceinline__ int compare_swap(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 off,
                                            u64 compare, u64 swap, const DeviceWindow& result, u64 result_off,
                                            u64* ticket = nullptr, u32 counter = NO_COUNTER) {
    return post<S>(c, peer, plan_fetch(Kind::CompareSwap, dst, peer, off, result, result_off, swap, compare), counter,
                   ticket);
}
template <class S>
__device__ __forceinline__ int compare_swap_warp(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 off,
                                                 u64 compare, u64 swap, const DeviceWindow& result, u64 result_off,
                                                 bool active = true, u64* ticket = nullptr,
                                                 u32 counter = NO_COUNTER) {
    return post_warp<S>(c, peer, plan_fetch(Kind::CompareSwap, dst, peer, off, result, result_off, swap, compare),
                        counter, ticket, active);
}

/* put, then sig[peer] word at sig_off += sig_add, on the same queue pair: the receiver
 * never sees the signal before the data. */
template <class S>
__device__ __forceinline__ int put_with_signal(const DeviceComm& c, u32 peer, const DeviceWindow& dst, u64 dst_off,
                                               const DeviceWindow& src, u64 src_off, u32 len, const DeviceWindow& sig,
                                               u64 sig_off, u64 sig_add, u64* ticket = nullptr,
                                               u32 counter = NO_COUNTER) {
    return post<S>(c, peer, plan_put_with_signal(c, peer, dst, dst_off, src, src_off, len, sig, sig_off, sig_add),
                   counter, ticket);
}
template <class S>
__device__ __forceinline__ int put_with_signal_warp(const DeviceComm& c, u32 peer, const DeviceWindow& dst,
                                                    u64 dst_off, const DeviceWindow& src, u64 src_off, u32 len,
                                                    const DeviceWindow& sig, u64 sig_off, u64 sig_add,
                                                    bool active = true, u64* ticket = nullptr,
                                                    u32 counter = NO_COUNTER) {
    return post_warp<S>(c, peer, plan_put_with_signal(c, peer, dst, dst_off, src, src_off, len, sig, sig_off, sig_add),
                        counter, ticket, active);
}

/* sig[peer] word at sig_off += sig_add. */
template <class S>
__device__ __forceinline__ int signal(const DeviceComm& c, u32 peer, const DeviceWindow& sig, u64 sig_off, u64 sig_add,
                                      u64* ticket = nullptr, u32 counter = NO_COUNTER) {
    return post<S>(c, peer, plan_add(c, sig, peer, sig_off, sig_add), counter, ticket);
}
template <class S>
__device__ __forceinline__ int signal_warp(const DeviceComm& c, u32 peer, const DeviceWindow& sig, u64 sig_off,
                                           u64 sig_add, bool active = true, u64* ticket = nullptr,
                                           u32 counter = NO_COUNTER) {
    return post_warp<S>(c, peer, plan_add(c, sig, peer, sig_off, sig_add), counter, ticket, active);
}

/* -------------------------------------------------------------------------------------
 * The receiver's side of signals: this process's own word at `off` of a window.
 * ----------------------------------------------------------------------------------- */

__device__ __forceinline__ bool compare(u32 cmp, u64 word, u64 value) {
    switch (cmp) {
    case layout::SIGNAL_CMP_EQ: return word == value;
    case layout::SIGNAL_CMP_NE: return word != value;
    case layout::SIGNAL_CMP_GE: return word >= value;
    case layout::SIGNAL_CMP_GT: return word > value;
    case layout::SIGNAL_CMP_LE: return word <= value;
    default: return word < value;
    }
}

/* The signal word (one acquire load: what the NIC placed before it is visible after). */
__device__ __forceinline__ int read_signal(const DeviceWindow& sig, u64 off, u64* value) {
    u64 addr = 0;
    const int s = local_span(sig, off, 8, addr);
    if (s) return s;
    if (addr & 7u) return layout::STATUS_MISALIGNED;
    *value = bswap64(ptx::ld_acquire_sys_b64((const void*)addr));
    return layout::STATUS_OK;
}

/* Until the signal word compares `cmp` (layout::SIGNAL_CMP_*) with `value`, or the
 * deadline; *seen gets the last value read. Acquire: the data of a put_with_signal whose
 * signal this wait observed is visible to the loads after it. */
template <class S>
__device__ __forceinline__ int wait_signal(const DeviceComm& c, const DeviceWindow& sig, u64 off, u32 cmp, u64 value,
                                           u64* seen = nullptr) {
    u64 addr = 0;
    const int s = local_span(sig, off, 8, addr);
    if (s) return s;
    if (addr & 7u) return layout::STATUS_MISALIGNED;
    CommDeadline dl(c);
    for (;;) {
        const u64 v = bswap64(ptx::ld_acquire_sys_b64((const void*)addr));
        if (seen) *seen = v;
        if (compare(cmp, v, value)) return layout::STATUS_OK;
        if (dl.expired()) return layout::STATUS_DEADLINE;
    }
}

/* Sets this process's signal word to `value` (before peers signal it again). */
__device__ __forceinline__ int reset_signal(const DeviceWindow& sig, u64 off, u64 value = 0) {
    u64 addr = 0;
    const int s = local_span(sig, off, 8, addr);
    if (s) return s;
    if (addr & 7u) return layout::STATUS_MISALIGNED;
    ptx::st_release_gpu_b64((void*)addr, bswap64(value));
    return layout::STATUS_OK;
}

/* -------------------------------------------------------------------------------------
 * Completion: of one operation, one peer's queue pair, all of them.
 * ----------------------------------------------------------------------------------- */

/* Until the operation that returned `ticket` on `peer` (and everything before it there)
 * is complete. */
template <class S> __device__ __forceinline__ int wait_ticket(const DeviceComm& c, u32 peer, u64 ticket) {
    if (peer >= c.n_peers) return layout::STATUS_BAD_PEER;
    return wait_queue<S>(c, Queue{queue_of(c, peer)}, ticket);
}

/* Until everything posted to `peer` so far is complete. */
template <class S> __device__ __forceinline__ int flush(const DeviceComm& c, u32 peer) {
    if (peer >= c.n_peers) return layout::STATUS_BAD_PEER;
    const Queue q{queue_of(c, peer)};
    return wait_queue<S>(c, q, ptx::ld_relaxed_gpu_b64(&q.state()->reserved));
}

/* Until everything posted to every peer so far is complete; the first failure wins. */
template <class S> __device__ __forceinline__ int flush_all(const DeviceComm& c) {
    int first = 0;
    for (u32 p = 0; p < c.n_peers; p++) {
        const int s = flush<S>(c, p);
        if (s < 0 && first == 0) first = s;
    }
    return first;
}

} // namespace api
} // namespace ibgda
