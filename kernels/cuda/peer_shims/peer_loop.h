/* peer_loop.h: what the peers' issue loops share (DOCA GPUNetIO's, compiled with NVRTC,
 * and NVSHMEM's, compiled with nvcc): the clock, a host-mapped phase word saying where a
 * loop is, and a watchdog warp that completes a wait the peer never sees end, so that a
 * stuck peer ends its kernel with a status instead of hanging the context. */
#pragma once

typedef unsigned int u32;
typedef unsigned long long u64;

#ifndef IBGDA_SPIN_LIMIT_NS
#define IBGDA_SPIN_LIMIT_NS 5000000000ull
#endif
/* The loop's status when the watchdog had to complete a wait the peer never saw end. */
constexpr int PEER_WATCHDOG = -0x7d0;

__device__ __forceinline__ u64 peer_globaltimer() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}

/* Where the loop is, for a host that gave up waiting: (iteration << 8) | step in a
 * host-mapped word (each program numbers its steps; 5 is done). */
__device__ __forceinline__ void peer_phase(volatile u64* phase, u32 i, u32 step) { *phase = ((u64)i << 8) | step; }

/* Shared between the loop (thread 0) and the watchdog (thread 32) of an issue kernel. */
struct PeerWatch {
    u64 iteration; /* + 1 each time the loop starts a post or a wait */
    u64 awaited;   /* what the loop waits for, in the peer's own terms (a CQ index, a producer index) */
    u32 done;
    u32 fired;
};

/* The watchdog: sleeps in 100 us steps; when the loop's iteration has not changed for the
 * limit, marks the watch fired and calls `fire(awaited)`, which writes the error completion
 * the peer's wait ends on; again after another limit, should the loop still be stuck. */
template <class Fire> __device__ void peer_watchdog(volatile PeerWatch* w, Fire fire) {
    u64 seen = w->iteration, since = peer_globaltimer();
    while (!w->done) {
        __nanosleep(100000);
        const u64 now = peer_globaltimer(), it = w->iteration;
        if (it != seen) {
            seen = it;
            since = now;
            continue;
        }
        if (now - since < (u64)IBGDA_SPIN_LIMIT_NS) continue;
        const u64 awaited = w->awaited;
        w->fired = 1;
        __threadfence_system();
        fire(awaited);
        since = now;
    }
}

/* Clears the watch and starts the watchdog on thread 32 (`fire` as above). Returns true on
 * thread 0 alone, the one that runs the loop; every other thread returns false, the
 * watchdog's when the loop is done. */
template <class Fire> __device__ bool peer_watch_start(volatile PeerWatch* w, Fire fire) {
    if (threadIdx.x == 0) {
        w->iteration = 0;
        w->awaited = 0;
        w->done = 0;
        w->fired = 0;
    }
    __syncthreads();
    if (threadIdx.x == 32) peer_watchdog(w, fire);
    return threadIdx.x == 0;
}

/* The loop's end: clocks[0..2] = clock64 cycles and %globaltimer ns since the timed
 * iterations began, the watchdog stopped, phase 5, status[0] = err, status[1] = the
 * iteration the loop stopped at. */
__device__ __forceinline__ void peer_finish(volatile PeerWatch* w, volatile u64* phase, long long c_start, u64 g_start,
                                            u64* clocks, int* status, int err, u32 stopped_at) {
    clocks[0] = (u64)(clock64() - c_start);
    clocks[1] = peer_globaltimer() - g_start;
    w->done = 1;
    peer_phase(phase, stopped_at, 5);
    status[0] = err;
    status[1] = (int)stopped_at;
}
