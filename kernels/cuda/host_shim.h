/* host_shim.h: the few CUDA names the device library and the device API use, for a host
 * build of their WQE builders and planning (kernels/cuda/api_host.cpp, the tests' byte
 * comparison without a GPU). Only code that builds WQEs into memory may be used from a
 * host build: the posting paths (fences, MMIO stores, atomics of other threads) are
 * templates that a host build never instantiates. */
#pragma once

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))

struct ibgda_host_dim3 {
    unsigned x, y, z;
};
/* One thread of one block. */
static const ibgda_host_dim3 threadIdx = {0, 0, 0};
static const ibgda_host_dim3 blockIdx = {0, 0, 0};
static const ibgda_host_dim3 blockDim = {1, 1, 1};

/* PTX prmt with the selector modes the library uses (byte i of the result is byte
 * s[4i..4i+2] of y:x). */
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
inline void __syncwarp(unsigned = 0xffffffffu) {}
inline unsigned __ballot_sync(unsigned, bool p) { return p ? 1u : 0u; }
inline bool __all_sync(unsigned, bool p) { return p; }
inline bool __any_sync(unsigned, bool p) { return p; }
inline unsigned __activemask() { return 1u; }
/* One lane: it matches only itself. */
template <class T> inline unsigned __match_any_sync(unsigned, T) { return 1u; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline void __nanosleep(unsigned) {}
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
template <class T> inline T __shfl_sync(unsigned, T v, int) { return v; }
template <class T> inline T __shfl_up_sync(unsigned, T v, unsigned) { return v; }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline int atomicMin(int* p, int v) {
    int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return old;
}
