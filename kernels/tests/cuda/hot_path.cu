/* hot_path.cu: the exclusive producer's posting path, for tests/hot_path_ptx.rs, which
 * compares its PTX with tests/ptx/hot_path.golden (recorded from the device library as it
 * was before its waits took run-time deadlines): a post that does not wait must compile
 * to the same instructions whatever the waits around it do. Per scope S:
 *   exclusive_post_S  one 8-byte inline RC WRITE and its doorbell, no wait (the whole
 *                     kernel is compared, registers included);
 *   issue_loop_S      the issue loop of the benchmark's Table 4 row: reserve, build,
 *                     commit and ring between two clock reads, then a wait for the
 *                     completion (what lies between the clock reads is compared, register
 *                     numbers left out). */
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
