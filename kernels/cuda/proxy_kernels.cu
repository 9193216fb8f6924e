/* proxy_kernels.cu: the proxy's test and benchmark kernels, on proxy.cuh.
 *
 * Per handoff H (Baseline, Tuned):
 *   ibgda_proxy_push_H      one push of an 8-byte inline write (the PTX test checks its
 *                           ordering instructions exactly)
 *   ibgda_proxy_enqueue_H   one thread: `iters` inline writes, each timed from push start
 *                           to push end (enqueue) and to the completion counter passing
 *                           it (put + completion), %globaltimer and clock64
 *   ibgda_proxy_rate_H      thread t pushes `per_thread` inline writes to ring t % nrings
 *                           (Tuned: exactly one thread per ring), then waits for its last
 * Baseline only (a ring shared by several producers needs it):
 *   ibgda_proxy_probe       block 0 thread 0 is a probe (push, wait, timed), every other
 *                           thread pushes bulk traffic until the probe is done; the probe's
 *                           ring is its own or one of the bulk rings (configuration)
 * Per scope S valid for host-memory queues (SystemReleaseStore, SystemFence):
 *   ibgda_assisted_doorbell_path_S   one exclusive post and its CPU-assisted doorbell
 *   ibgda_assisted_post_S   block b owns queue b: `rounds` rounds of `batch` inline writes
 *                           to targets[2b] (address) under targets[2b+1] (rkey), one
 *                           CPU-assisted doorbell per round, then waits for all
 * Every kernel writes a status (0, or the first negative error). */
#include "proxy.cuh"

using namespace ibgda;

/* The device encoders give exactly the Rust encoder's words (generated examples). */
static_assert(proxy::with_epoch(proxy::write_inline8(3, 5, 0x12345678u, 0x1122334455667788ull), 7).control ==
                  layout::PROXY_EXAMPLE_INLINE_CONTROL,
              "inline write control word");
static_assert(proxy::with_epoch(proxy::write_inline8(3, 5, 0x12345678u, 0x1122334455667788ull), 7).operand ==
                  layout::PROXY_EXAMPLE_INLINE_OPERAND,
              "inline write operand word");
static_assert(proxy::with_epoch(proxy::write(15, 0xfe, 8, 2, 0xa0b0c0d0u, 0x123456u), 1).control ==
                  layout::PROXY_EXAMPLE_WRITE_CONTROL,
              "write control word");
static_assert(proxy::with_epoch(proxy::write(15, 0xfe, 8, 2, 0xa0b0c0d0u, 0x123456u), 1).operand ==
                  layout::PROXY_EXAMPLE_WRITE_OPERAND,
              "write operand word");
static_assert(proxy::with_epoch(proxy::read(1, 2, 64, 3, 128, 4096), 9).control == layout::PROXY_EXAMPLE_READ_CONTROL,
              "read control word");
static_assert(proxy::with_epoch(proxy::read(1, 2, 64, 3, 128, 4096), 9).operand == layout::PROXY_EXAMPLE_READ_OPERAND,
              "read operand word");
static_assert(proxy::with_epoch(proxy::fetch_add(2, 1, 16, 0xabcdefull), 200).control ==
                  layout::PROXY_EXAMPLE_FETCH_ADD_CONTROL,
              "fetch-add control word");
static_assert(proxy::with_epoch(proxy::fetch_add(2, 1, 16, 0xabcdefull), 200).operand ==
                  layout::PROXY_EXAMPLE_FETCH_ADD_OPERAND,
              "fetch-add operand word");
static_assert(proxy::with_epoch(proxy::signal(0, 0, 24, 1), 255).control == layout::PROXY_EXAMPLE_SIGNAL_CONTROL,
              "signal control word");
static_assert(proxy::with_epoch(proxy::signal(0, 0, 24, 1), 255).operand == layout::PROXY_EXAMPLE_SIGNAL_OPERAND,
              "signal operand word");
static_assert(proxy::with_epoch(proxy::compare_swap(4, 3, 32, 0xabcdef1u, 0x1234567u), 2).control ==
                  layout::PROXY_EXAMPLE_CAS_CONTROL,
              "compare-swap control word");
static_assert(proxy::with_epoch(proxy::compare_swap(4, 3, 32, 0xabcdef1u, 0x1234567u), 2).operand ==
                  layout::PROXY_EXAMPLE_CAS_OPERAND,
              "compare-swap operand word");
static_assert(proxy::write_inline8(16, 0, 0, 0).control == proxy::invalid_request().control, "peer 16 is refused");
static_assert(proxy::write(0, 0, 0, 0, 0, 0).control == proxy::invalid_request().control, "length 0 is refused");
static_assert(proxy::fetch_add(0, 0, 0, 1ull << 56).control == proxy::invalid_request().control,
              "a 57-bit addend is refused");

template <class H> __device__ __forceinline__ void push_one(const DeviceProxyRing& d, u32 window, u32 offset, u64 value, int* status) {
    typename H::Producer p = H::Producer::load(d);
    u64 index;
    const int err = p.push(proxy::write_inline8(0, window, offset, value), index);
    p.store();
    *status = err;
}

template <class H>
__device__ __forceinline__ void enqueue_bench(const DeviceProxyRing& d, u32 warmup, u32 iters, u32 window, u32 slots_in_window,
                                              u64* enqueue_ns, u64* total_ns, u64* clocks, int* status) {
    typename H::Producer p = H::Producer::load(d);
    const proxy::Ring r{d};
    int err = 0;
    u64 cycles = 0, ns = 0;
    for (u32 i = 0; i < warmup + iters && err == 0; i++) {
        const proxy::Desc desc = proxy::write_inline8(0, window, 8u * (i % slots_in_window), ((u64)i << 32) | 0x5eedu);
        u64 index = 0;
        const u64 t0 = ibgda::ptx::globaltimer();
        const long long c0 = clock64();
        err = p.push(desc, index);
        const long long c1 = clock64();
        const u64 t1 = ibgda::ptx::globaltimer();
        if (err == 0) err = proxy::wait_completed(r, index + 1);
        const u64 t2 = ibgda::ptx::globaltimer();
        if (i >= warmup) {
            enqueue_ns[i - warmup] = t1 - t0;
            total_ns[i - warmup] = t2 - t0;
            cycles += (u64)(c1 - c0);
            ns += t1 - t0;
        }
    }
    clocks[0] = cycles;
    clocks[1] = ns;
    p.store();
    *status = err;
}

template <class H>
__device__ __forceinline__ void rate(const DeviceProxyRing* rings, u32 nrings, u32 per_thread, u32 window, u32 slots_in_window,
                                     u64* clocks, int* status) {
    const u32 tid = blockIdx.x * blockDim.x + threadIdx.x;
    const DeviceProxyRing d = rings[tid % nrings];
    typename H::Producer p = H::Producer::load(d);
    const proxy::Ring r{d};
    int err = 0;
    const u64 t0 = ibgda::ptx::globaltimer();
    u64 last = 0;
    for (u32 k = 0; k < per_thread && err == 0; k++) {
        const u32 slot = (tid * per_thread + k) % slots_in_window;
        err = p.push(proxy::write_inline8(0, window, 8u * slot, ((u64)tid << 32) | k), last);
    }
    if (err == 0) err = proxy::wait_completed(r, last + 1);
    const u64 t1 = ibgda::ptx::globaltimer();
    p.store();
    atomicMin((unsigned long long*)&clocks[0], (unsigned long long)t0);
    atomicMax((unsigned long long*)&clocks[1], (unsigned long long)t1);
    if (err < 0) atomicMin(status, err);
}

#define IBGDA_PROXY_KERNELS(H)                                                                                      \
    extern "C" __global__ void ibgda_proxy_push_##H(DeviceProxyRing d, u32 window, u32 offset, u64 value,          \
                                                     int* status) {                                                \
        push_one<proxy::H>(d, window, offset, value, status);                                                      \
    }                                                                                                               \
    extern "C" __global__ void ibgda_proxy_enqueue_##H(DeviceProxyRing d, u32 warmup, u32 iters, u32 window,       \
                                                        u32 slots_in_window, u64* enqueue_ns, u64* total_ns,       \
                                                        u64* clocks, int* status) {                                \
        enqueue_bench<proxy::H>(d, warmup, iters, window, slots_in_window, enqueue_ns, total_ns, clocks, status);  \
    }                                                                                                               \
    extern "C" __global__ void ibgda_proxy_rate_##H(const DeviceProxyRing* rings, u32 nrings, u32 per_thread,      \
                                                     u32 window, u32 slots_in_window, u64* clocks, int* status) {  \
        rate<proxy::H>(rings, nrings, per_thread, window, slots_in_window, clocks, status);                        \
    }

IBGDA_PROXY_KERNELS(Baseline)
IBGDA_PROXY_KERNELS(Tuned)

/* Block 0 thread 0: `iters` probes on `probe` (push, wait; put+completion ns each). Every
 * other thread: inline writes to bulk[(tid - blockDim.x) % nbulk] until the probe is
 * done; bulk_pushed counts them. Baseline producers (a shared ring has several). */
extern "C" __global__ void ibgda_proxy_probe(DeviceProxyRing probe, const DeviceProxyRing* bulk, u32 nbulk, u32 iters,
                                             u32 window, u32 slots_in_window, u64* probe_ns, u64* done,
                                             unsigned long long* bulk_pushed, int* status) {
    int err = 0;
    if (blockIdx.x == 0) {
        if (threadIdx.x != 0) return;
        proxy::Baseline::Producer p = proxy::Baseline::Producer::load(probe);
        const proxy::Ring r{probe};
        for (u32 i = 0; i < iters && err == 0; i++) {
            u64 index = 0;
            const u64 t0 = ibgda::ptx::globaltimer();
            err = p.push(proxy::write_inline8(0, window, 8u * (i % 8u), i), index);
            if (err == 0) err = proxy::wait_completed(r, index + 1);
            probe_ns[i] = ibgda::ptx::globaltimer() - t0;
        }
        ibgda::ptx::st_release_gpu_b64((void*)done, 1);
    } else {
        const u32 tid = (blockIdx.x - 1) * blockDim.x + threadIdx.x;
        proxy::Baseline::Producer p = proxy::Baseline::Producer::load(bulk[tid % nbulk]);
        u64 k = 0;
        while (ibgda::ptx::ld_acquire_gpu_b64((const void*)done) == 0 && err == 0) {
            u64 index;
            err = p.push(proxy::write_inline8(0, window, 8u * (8u + (u32)((tid + k) % (slots_in_window - 8u))), k), index);
            k++;
        }
        atomicAdd(bulk_pushed, (unsigned long long)k);
    }
    if (err < 0) atomicMin(status, err);
}

template <class S>
__device__ __forceinline__ void assisted_post(const DeviceQueueDescriptor& d, u32 rounds, u32 batch, u64 raddr, u32 rkey,
                                              u64* clocks, int* status) {
    Exclusive<proxy::CpuAssisted<S>> e = Exclusive<proxy::CpuAssisted<S>>::load(d);
    int err = 0;
    const u64 t0 = ibgda::ptx::globaltimer();
    u64 ticket = e.next;
    for (u32 r = 0; r < rounds && err == 0; r++) {
        for (u32 k = 0; k < batch; k++) {
            WqeSlots s;
            Deadline dl;
            while (!e.reserve(1, s)) {
                const Polled p = e.poll();
                if (p.status < 0) err = p.status;
                if (dl.expired(d.wait_ns)) err = WAIT_DEADLINE;
                if (err) break;
            }
            if (err) break;
            const u32 flags = (k == batch - 1 || e.q.must_signal(e.next, 1)) ? layout::FM_CE_SE_CQ_UPDATE : 0u;
            build_write_inline8<transport::Rc>(s, ctrl(d.qpn, flags), Target{nullptr}, raddr + 8ull * ((r * batch + k) % 64u),
                                               rkey, ((u64)blockIdx.x << 48) | ((u64)r << 16) | k);
            ticket = e.commit(1);
        }
        e.ring();
    }
    if (err == 0) err = e.wait(ticket);
    clocks[blockIdx.x] = ibgda::ptx::globaltimer() - t0;
    e.store();
    if (err < 0) atomicMin(status, err);
}

#define IBGDA_ASSISTED_KERNELS(S)                                                                                   \
    extern "C" __global__ void ibgda_assisted_doorbell_path_##S(DeviceQueueDescriptor d, u64 raddr, u32 rkey,      \
                                                                 u64 value) {                                      \
        Exclusive<proxy::CpuAssisted<scope::S>> e = Exclusive<proxy::CpuAssisted<scope::S>>::load(d);              \
        WqeSlots s;                                                                                                 \
        if (!e.reserve(1, s)) return;                                                                               \
        build_write_inline8<transport::Rc>(s, ctrl(d.qpn, layout::FM_CE_SE_CQ_UPDATE), Target{nullptr}, raddr,     \
                                           rkey, value);                                                            \
        e.commit(1);                                                                                                \
        e.ring();                                                                                                   \
        e.store();                                                                                                  \
    }                                                                                                               \
    extern "C" __global__ void ibgda_assisted_post_##S(const DeviceQueueDescriptor* qs, const u64* targets,       \
                                                        u32 rounds, u32 batch, u64* clocks, int* status) {         \
        if (threadIdx.x == 0)                                                                                       \
            assisted_post<scope::S>(qs[blockIdx.x], rounds, batch, targets[2 * blockIdx.x],                         \
                                    (u32)targets[2 * blockIdx.x + 1], clocks, status);                              \
    }

IBGDA_ASSISTED_KERNELS(SystemReleaseStore)
IBGDA_ASSISTED_KERNELS(SystemFence)
