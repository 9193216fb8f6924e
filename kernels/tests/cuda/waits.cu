/* waits.cu: the device library's waits on a queue pair other than the exclusive one, for
 * tests/waits_gpu.rs (one thread or one warp; *status gets the first negative status):
 *   shared_ticket_S   one 8-byte inline WRITE through the per-thread shared protocol,
 *                     then wait_ticket for it (the wait for a ticket)
 *   quiet_S           the same post, then quiet_all over the queue (wait_qp)
 *   held_frontier_S   a reservation taken and never published, then the same post: its
 *                     publication waits on the frontier behind the held reservation
 *   full_ring_S       `n` posts with no wait between them: past the ring's capacity the
 *                     post waits for room (the NIC retires nothing when not running)
 *   occasional_S      the warp-entered occasional send with its wait (one warp), through
 *                     `dp`, a copy of the descriptor in global memory (the occasional path
 *                     reads its fields from memory) */
#include "ibgda.cuh"
using namespace ibgda;

template <class S> __device__ __forceinline__ void shared_ticket(DeviceQueueDescriptor d, u64 raddr, u32 rkey, int* status) {
    const Queue q{d};
    int err = 0;
    const u64 ticket = post_write_inline8_thread<S>(q, raddr, rkey, 0x0123456789abcdefull, 1, &err);
    const int w = wait_ticket<S>(q, ticket, 1);
    *status = err < 0 ? err : w;
}

template <class S> __device__ __forceinline__ void quiet(DeviceQueueDescriptor d, u64 raddr, u32 rkey, int* status) {
    const Queue q{d};
    int err = 0;
    post_write_inline8_thread<S>(q, raddr, rkey, 0x0123456789abcdefull, 1, &err);
    const int w = quiet_all<S>(&d, 1, 1);
    *status = err < 0 ? err : w;
}

template <class S> __device__ __forceinline__ void held_frontier(DeviceQueueDescriptor d, u64 raddr, u32 rkey, int* status) {
    const Queue q{d};
    atomicAdd(&q.state()->reserved, 1ull); /* held: never published */
    int err = 0;
    post_write_inline8_thread<S>(q, raddr, rkey, 0x0123456789abcdefull, 1, &err);
    *status = err;
}

template <class S> __device__ __forceinline__ void full_ring(DeviceQueueDescriptor d, u32 n, u64 raddr, u32 rkey, int* status) {
    const Queue q{d};
    int err = 0;
    for (u32 k = 0; k < n && err == 0; k++) post_write_inline8_thread<S>(q, raddr, rkey, k, 1, &err);
    *status = err;
}

template <class S>
__device__ __forceinline__ void occasional_once(const DeviceQueueDescriptor* dp, u64 raddr, u32 rkey, int* status) {
    const int s = warp_send_write_inline8<S>(threadIdx.x == 0, dp, raddr, rkey, 0x0123456789abcdefull, true);
    if (threadIdx.x == 0) *status = s;
}

#define WAITS(S)                                                                                                     \
    extern "C" __global__ void shared_ticket_##S(DeviceQueueDescriptor d, u64 raddr, u32 rkey, int* status) {        \
        shared_ticket<scope::S>(d, raddr, rkey, status);                                                             \
    }                                                                                                                \
    extern "C" __global__ void quiet_##S(DeviceQueueDescriptor d, u64 raddr, u32 rkey, int* status) {                \
        quiet<scope::S>(d, raddr, rkey, status);                                                                     \
    }                                                                                                                \
    extern "C" __global__ void held_frontier_##S(DeviceQueueDescriptor d, u64 raddr, u32 rkey, int* status) {        \
        held_frontier<scope::S>(d, raddr, rkey, status);                                                             \
    }                                                                                                                \
    extern "C" __global__ void full_ring_##S(DeviceQueueDescriptor d, u32 n, u64 raddr, u32 rkey, int* status) {     \
        full_ring<scope::S>(d, n, raddr, rkey, status);                                                              \
    }                                                                                                                \
    extern "C" __global__ void occasional_##S(DeviceQueueDescriptor d, const DeviceQueueDescriptor* dp, u64 raddr,   \
                                              u32 rkey, int* status) {                                               \
        if (dp->qpn != d.qpn) __trap();                                                                              \
        occasional_once<scope::S>(dp, raddr, rkey, status);                                                               \
    }
WAITS(GpuReleaseStore)
