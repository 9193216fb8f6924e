/* api_kernels.cu: the device API's test kernels, one extern "C" instance per scope S.
 *
 *   ibgda_api_calls_thread_S   one thread performs calls[0..n) in order (per-thread form)
 *   ibgda_api_calls_warp_S     one warp performs calls[0..n) 32 at a time, lane i the
 *                              i-th of each round (warp-cooperative form; lanes past n
 *                              are inactive)
 *   ibgda_api_wait_signal_S    wait_signal on one word
 *   ibgda_api_flush_S          flush of one peer (all = 0) or of all (all = 1)
 *   ibgda_api_wait_counter_S   wait_counter
 *   ibgda_api_signal_order_S   block 0 sends `rounds` put_with_signal of `len` bytes
 *                              (round r's bytes are r + 1) to `peer`, each adding 1 to the
 *                              signal word; block 1 waits for each signal and counts the
 *                              data bytes not yet r + 1 (the receiver must never see the
 *                              signal before the data). split = 1 posts the data and the
 *                              signal to two peers instead (the control that can fail).
 *
 * statuses[i] and tickets[i] get each call's status and ticket. */
/* Eight operations per kernel: one copy of the posting path per scope and form. */
#define IBGDA_API_OUTLINE 1
#include "api_calls.cuh"

using namespace ibgda;

template <class S>
__device__ void calls_thread(DeviceComm c, const DeviceWindow* wins, u32 n_wins, const ApiCall* calls, u32 n,
                             int* statuses, u64* tickets) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    for (u32 i = 0; i < n; i++) {
        u64 t = 0;
        statuses[i] = api::perform<S, false>(c, wins, n_wins, calls[i], true, &t);
        tickets[i] = t;
    }
}

template <class S>
__device__ void calls_warp(DeviceComm c, const DeviceWindow* wins, u32 n_wins, const ApiCall* calls, u32 n,
                           int* statuses, u64* tickets) {
    if (threadIdx.x >= 32 || blockIdx.x != 0) return;
    const u32 lane = threadIdx.x;
    for (u32 base = 0; base < n; base += 32) {
        const u32 i = base + lane;
        const bool active = i < n;
        const ApiCall a = calls[active ? i : base];
        u64 t = 0;
        const int s = api::perform<S, true>(c, wins, n_wins, a, active, &t);
        if (active) {
            statuses[i] = s;
            tickets[i] = t;
        }
    }
}

template <class S>
__device__ void signal_order(DeviceComm c, DeviceWindow data, DeviceWindow src, DeviceWindow sig, u32 peer, u32 len,
                             u32 rounds, u32 split, int* status, unsigned long long* late_bytes) {
    if (threadIdx.x != 0) return;
    if (blockIdx.x == 0) {
        u8* bytes = (u8*)src.local_base;
        for (u32 r = 0; r < rounds; r++) {
            /* The source holds round r's bytes before the WQEs name it (the previous round
             * completed: its signal was seen by block 1 only after this wait). */
            int s = api::flush<S>(c, peer);
            for (u32 k = 0; k < len; k++) bytes[k] = (u8)(r + 1);
            __threadfence();
            if (s == 0) {
                if (split) {
                    s = api::put<S>(c, peer, data, 0, src, 0, len);
                    if (s == 0) s = api::signal<S>(c, (peer + 1) % c.n_peers, sig, 0, 1);
                } else {
                    s = api::put_with_signal<S>(c, peer, data, 0, src, 0, len, sig, 0, 1);
                }
            }
            if (s != 0) {
                atomicMin(status, s);
                return;
            }
            /* Wait for the receiver to have looked at round r before the next one. */
            const int w = api::wait_signal<S>(c, sig, 8, layout::SIGNAL_CMP_GE, r + 1);
            if (w != 0) {
                atomicMin(status, w);
                return;
            }
        }
        atomicMin(status, api::flush_all<S>(c));
    } else if (blockIdx.x == 1) {
        for (u32 r = 0; r < rounds; r++) {
            const int s = api::wait_signal<S>(c, sig, 0, layout::SIGNAL_CMP_GE, r + 1);
            if (s != 0) {
                atomicMin(status, s);
                return;
            }
            const volatile u8* got = (const volatile u8*)data.local_base;
            unsigned long long late = 0;
            for (u32 k = 0; k < len; k++) late += got[k] != (u8)(r + 1);
            atomicAdd(late_bytes, late);
            /* Tell the sender (its own word 8 of the signal window, through the NIC). */
            const int t = api::put_value<S>(c, c.rank, sig, 8, api::bswap64(r + 1));
            if (t != 0) {
                atomicMin(status, t);
                return;
            }
        }
    }
}

#define IBGDA_API_KERNELS(S)                                                                                           \
    extern "C" __global__ void ibgda_api_calls_thread_##S(DeviceComm c, const DeviceWindow* wins, u32 n_wins,          \
                                                          const ApiCall* calls, u32 n, int* statuses, u64* tickets) {  \
        calls_thread<scope::S>(c, wins, n_wins, calls, n, statuses, tickets);                                          \
    }                                                                                                                  \
    extern "C" __global__ void ibgda_api_calls_warp_##S(DeviceComm c, const DeviceWindow* wins, u32 n_wins,            \
                                                        const ApiCall* calls, u32 n, int* statuses, u64* tickets) {    \
        calls_warp<scope::S>(c, wins, n_wins, calls, n, statuses, tickets);                                            \
    }                                                                                                                  \
    extern "C" __global__ void ibgda_api_wait_signal_##S(DeviceComm c, DeviceWindow w, u64 off, u32 cmp, u64 value,    \
                                                         int* status, u64* seen) {                                     \
        *status = api::wait_signal<scope::S>(c, w, off, cmp, value, seen);                                             \
    }                                                                                                                  \
    extern "C" __global__ void ibgda_api_flush_##S(DeviceComm c, u32 all, u32 peer, int* status) {                     \
        *status = all ? api::flush_all<scope::S>(c) : api::flush<scope::S>(c, peer);                                   \
    }                                                                                                                  \
    extern "C" __global__ void ibgda_api_wait_counter_##S(DeviceComm c, u32 k, u64 value, int* status, u64* seen) {    \
        *status = api::wait_counter<scope::S>(c, k, value, seen);                                                      \
    }                                                                                                                  \
    extern "C" __global__ void ibgda_api_signal_order_##S(DeviceComm c, DeviceWindow data, DeviceWindow src,           \
                                                          DeviceWindow sig, u32 peer, u32 len, u32 rounds, u32 split,  \
                                                          int* status, unsigned long long* late_bytes) {               \
        signal_order<scope::S>(c, data, src, sig, peer, len, rounds, split, status, late_bytes);                      \
    }
/* -DIBGDA_API_SCOPE=<Scope> builds one scope's kernels (the tests compile the scopes as
 * programs of their own, in parallel); without it, every scope's. */
#ifdef IBGDA_API_SCOPE
/* One more expansion, so that the scope's name (not the macro's) is pasted. */
#define IBGDA_API_KERNELS_OF(S) IBGDA_API_KERNELS(S)
IBGDA_API_KERNELS_OF(IBGDA_API_SCOPE)
#else
IBGDA_API_KERNELS(Unordered)
IBGDA_API_KERNELS(GpuFence)
IBGDA_API_KERNELS(GpuFencedDbrec)
IBGDA_API_KERNELS(GpuReleaseStore)
IBGDA_API_KERNELS(ThreadFence)
IBGDA_API_KERNELS(SystemReleaseStore)
IBGDA_API_KERNELS(SystemFence)
#endif
