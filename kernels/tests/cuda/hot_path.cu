/* hot_path.cu: the posting paths, for tests/hot_path_ptx.rs, which compares their PTX with
 * tests/ptx/hot_path.golden (the exclusive ones recorded from the device library as it was
 * before its waits took run-time deadlines: a post that does not wait must compile to the
 * same instructions whatever the waits around it do; the shared ones recorded later, to
 * pin them). Per scope S:
 *   exclusive_post_S  one 8-byte inline RC WRITE and its doorbell, no wait (the whole
 *                     kernel is compared, registers included);
 *   issue_loop_S      the issue loop of the benchmark's Table 4 row: reserve, build,
 *                     commit and ring between two clock reads, then a wait for the
 *                     completion (what lies between the clock reads is compared, register
 *                     numbers left out);
 *   thread_post_S, grouped_post_S, warp_post_S
 *                     the shared protocol's posts (per thread, per thread grouped, per
 *                     warp), with their waits for room and for the publication frontier
 *                     (the whole kernel is compared, registers included). */
#include "ibgda.cuh"
using namespace ibgda;

template <class S>
__device__ __forceinline__ void exclusive_post(const DeviceQueueDescriptor& d, u64 raddr, u32 rkey, u64 value) {
    Exclusive<S> e = Exclusive<S>::load(d);
    WqeSlots s;
    if (!e.reserve(1, s)) return;
    build_write_inline8<transport::Rc>(s, ctrl(d.qpn, layout::FM_CE_SE_CQ_UPDATE), Target{nullptr}, raddr, rkey, value);
    e.commit(1);
    e.ring();
    e.store();
}

template <class S>
__device__ __forceinline__ void issue_loop(const DeviceQueueDescriptor& d, u32 iters, u64 raddr, u32 rkey, u64* cycles,
                                           int* status) {
    Exclusive<S> e = Exclusive<S>::load(d);
    int err = 0;
    for (u32 i = 0; i < iters; i++) {
        const long long c0 = clock64();
        WqeSlots s;
        if (!e.reserve(1, s)) {
            err = -0x200;
            break;
        }
        build_write_inline8<transport::Rc>(s, ctrl(d.qpn, layout::FM_CE_SE_CQ_UPDATE), Target{nullptr}, raddr, rkey,
                                           0x0123456789abcdefull ^ i);
        const u64 ticket = e.commit(1);
        e.ring();
        const long long c1 = clock64();
        cycles[i] = (u64)(c1 - c0);
        const int w = e.wait(ticket);
        if (w < 0) {
            err = w;
            break;
        }
    }
    e.store();
    *status = err;
}

/* The shared protocol's posting paths, one 8-byte inline RC WRITE each: per thread, per
 * thread with the lanes calling together grouped, per warp. Each reserves, waits for room
 * only when short of it, builds, and waits for the publication frontier before handing it
 * on (and ringing); the kernel stores the ticket and any error status. */
template <class S>
__device__ __forceinline__ void thread_post(const DeviceQueueDescriptor& d, u64 raddr, u32 rkey, u64 value, u32 batch,
                                            u64* tickets, int* status) {
    const Queue q{d};
    int err = 0;
    tickets[threadIdx.x] = post_write_inline8_thread<S>(q, raddr, rkey, value, batch, &err);
    if (err < 0) *status = err;
}

template <class S>
__device__ __forceinline__ void grouped_post(const DeviceQueueDescriptor& d, u64 raddr, u32 rkey, u64 value, u32 batch,
                                             u64* tickets, int* status) {
    const Queue q{d};
    int err = 0;
    tickets[threadIdx.x] = post_write_inline8_thread_grouped<S>(q, raddr, rkey, value, batch, &err);
    if (err < 0) *status = err;
}

template <class S>
__device__ __forceinline__ void warp_post(const DeviceQueueDescriptor& d, u64 raddr, u32 rkey, u64 value, u32 batch,
                                          u64* tickets, int* status) {
    const Queue q{d};
    int err = 0;
    tickets[threadIdx.x] = post_write_inline8_warp<S>(q, raddr, rkey, value, batch, &err);
    if (err < 0) *status = err;
}

#define HOT_PATH(S)                                                                                                  \
    extern "C" __global__ void exclusive_post_##S(DeviceQueueDescriptor d, u64 raddr, u32 rkey, u64 value) {         \
        exclusive_post<scope::S>(d, raddr, rkey, value);                                                             \
    }                                                                                                                \
    extern "C" __global__ void issue_loop_##S(DeviceQueueDescriptor d, u32 iters, u64 raddr, u32 rkey, u64* cycles, \
                                              int* status) {                                                         \
        issue_loop<scope::S>(d, iters, raddr, rkey, cycles, status);                                                 \
    }
HOT_PATH(Unordered)
HOT_PATH(GpuFence)
HOT_PATH(GpuFencedDbrec)
HOT_PATH(GpuReleaseStore)
HOT_PATH(ThreadFence)
HOT_PATH(SystemReleaseStore)
HOT_PATH(SystemFence)

/* After every HOT_PATH instance: PTX numbers labels by the function's place in the module,
 * so the kernels above keep the labels they were recorded with. */
#define SHARED_PATH(S)                                                                                               \
    extern "C" __global__ void thread_post_##S(DeviceQueueDescriptor d, u64 raddr, u32 rkey, u64 value, u32 batch,  \
                                               u64* tickets, int* status) {                                         \
        thread_post<scope::S>(d, raddr, rkey, value, batch, tickets, status);                                        \
    }                                                                                                                \
    extern "C" __global__ void grouped_post_##S(DeviceQueueDescriptor d, u64 raddr, u32 rkey, u64 value, u32 batch, \
                                                u64* tickets, int* status) {                                        \
        grouped_post<scope::S>(d, raddr, rkey, value, batch, tickets, status);                                       \
    }                                                                                                                \
    extern "C" __global__ void warp_post_##S(DeviceQueueDescriptor d, u64 raddr, u32 rkey, u64 value, u32 batch,    \
                                             u64* tickets, int* status) {                                           \
        warp_post<scope::S>(d, raddr, rkey, value, batch, tickets, status);                                          \
    }
SHARED_PATH(Unordered)
SHARED_PATH(GpuFence)
SHARED_PATH(GpuFencedDbrec)
SHARED_PATH(GpuReleaseStore)
SHARED_PATH(ThreadFence)
SHARED_PATH(SystemReleaseStore)
SHARED_PATH(SystemFence)
