/* host_threads.h: the CUDA names a kernel of cuda/moe.cu uses, for a host build that runs
 * each launch on threads (cuda/moe_host.cpp, a test without a GPU): every CUDA thread is a
 * host thread, a warp's 32 lanes meet in its collectives (ballot, shuffles, votes,
 * __syncwarp) through a barrier, a block's threads in __syncthreads. Only converged
 * warps (all 32 lanes calling with the full mask) are supported, which is how the device
 * library's warp paths and the MoE kernels call them. Together with IBGDA_HOST_THREADS
 * (ibgda.cuh then takes its memory operations from ptx_host.h).
 *
 * __shared__ becomes a static: shared by every block of a launch, not one per block. The
 * MoE kernels have one, the combine's `ready` flag, which every block's thread 0 writes
 * with its own wait's outcome: the same value whenever the waits succeed. */
#pragma once
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __shared__ static

namespace ibgda_host {

struct Dim3 {
    unsigned x, y, z;
};

/* A reusable barrier of `n` threads. */
class Barrier {
  public:
    explicit Barrier(unsigned n) : n_(n) {}
    void wait() {
        std::unique_lock<std::mutex> l(m_);
        const unsigned long long gen = gen_;
        if (++arrived_ == n_) {
            arrived_ = 0;
            gen_++;
            cv_.notify_all();
            return;
        }
        cv_.wait(l, [&] { return gen_ != gen; });
    }

  private:
    std::mutex m_;
    std::condition_variable cv_;
    unsigned n_;
    unsigned arrived_ = 0;
    unsigned long long gen_ = 0;
};

struct Warp {
    Barrier bar{32};
    unsigned long long vals[32];
};

struct Block {
    explicit Block(unsigned threads) : bar(threads), warps(new Warp[threads / 32]) {}
    Barrier bar;
    std::unique_ptr<Warp[]> warps;
};

struct Thread {
    Dim3 tid, bid, bdim;
    Block* block;
    Warp* warp;
    unsigned lane;
};

inline thread_local Thread self{};

/* Every lane's `v` (as 64 bits), to `f(vals, lane)`; the lanes leave together. */
template <class F> inline unsigned long long exchange(unsigned long long v, F f) {
    Warp& w = *self.warp;
    w.vals[self.lane] = v;
    w.bar.wait();
    const unsigned long long r = f(w.vals, self.lane);
    w.bar.wait();
    return r;
}

template <class T> inline unsigned long long bits(T v) {
    static_assert(sizeof(T) <= 8, "at most 64 bits");
    unsigned long long b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T> inline T from_bits(unsigned long long b) {
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
}

/* Runs `kernel` on `grid` blocks of `block` threads (a multiple of 32), one host thread
 * each, and returns when all have. */
inline void launch(unsigned grid, unsigned block, const std::function<void()>& kernel) {
    std::vector<std::unique_ptr<Block>> blocks;
    for (unsigned b = 0; b < grid; b++) blocks.emplace_back(new Block(block));
    std::vector<std::thread> threads;
    threads.reserve((size_t)grid * block);
    for (unsigned b = 0; b < grid; b++) {
        for (unsigned t = 0; t < block; t++) {
            Block* bl = blocks[b].get();
            threads.emplace_back([=, &kernel] {
                self = Thread{{t, 0, 0}, {b, 0, 0}, {block, 1, 1}, bl, &bl->warps[t / 32], t % 32};
                kernel();
            });
        }
    }
    for (auto& th : threads) th.join();
}

} // namespace ibgda_host

#define threadIdx (ibgda_host::self.tid)
#define blockIdx (ibgda_host::self.bid)
#define blockDim (ibgda_host::self.bdim)

inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (unsigned i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
    return r;
}
inline unsigned long long __cvta_generic_to_global(const void* p) { return (unsigned long long)p; }
[[noreturn]] inline void __trap() { __builtin_trap(); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __nanosleep(unsigned) { std::this_thread::yield(); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline unsigned __activemask() { return 0xffffffffu; }

inline void __syncwarp(unsigned = 0xffffffffu) { ibgda_host::self.warp->bar.wait(); }
inline void __syncthreads() { ibgda_host::self.block->bar.wait(); }

inline unsigned __ballot_sync(unsigned, bool p) {
    return (unsigned)ibgda_host::exchange(p ? 1 : 0, [](const unsigned long long* v, unsigned) {
        unsigned long long m = 0;
        for (unsigned i = 0; i < 32; i++) m |= (v[i] ? 1ull : 0ull) << i;
        return m;
    });
}
inline bool __all_sync(unsigned m, bool p) { return __ballot_sync(m, p) == 0xffffffffu; }
inline bool __any_sync(unsigned m, bool p) { return __ballot_sync(m, p) != 0; }
template <class T> inline unsigned __match_any_sync(unsigned, T v) {
    return (unsigned)ibgda_host::exchange(ibgda_host::bits(v), [](const unsigned long long* x, unsigned lane) {
        unsigned long long m = 0;
        for (unsigned i = 0; i < 32; i++) m |= (x[i] == x[lane] ? 1ull : 0ull) << i;
        return m;
    });
}
template <class T> inline T __shfl_sync(unsigned, T v, int src, int = 32) {
    return ibgda_host::from_bits<T>(ibgda_host::exchange(
        ibgda_host::bits(v), [src](const unsigned long long* x, unsigned) { return x[(unsigned)src & 31u]; }));
}
template <class T> inline T __shfl_up_sync(unsigned, T v, unsigned d, int = 32) {
    return ibgda_host::from_bits<T>(ibgda_host::exchange(ibgda_host::bits(v), [d](const unsigned long long* x, unsigned lane) {
        return lane >= d ? x[lane - d] : x[lane];
    }));
}
template <class T> inline T __shfl_xor_sync(unsigned, T v, int d, int = 32) {
    return ibgda_host::from_bits<T>(ibgda_host::exchange(
        ibgda_host::bits(v), [d](const unsigned long long* x, unsigned lane) { return x[(lane ^ (unsigned)d) & 31u]; }));
}

inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline int atomicMin(int* p, int v) {
    int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return old;
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
    unsigned long long old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return old;
}
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
    unsigned long long old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v > old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return old;
}

inline float __uint_as_float(unsigned u) { return ibgda_host::from_bits<float>(u); }
inline unsigned __float_as_uint(float f) { return (unsigned)ibgda_host::bits(f); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
