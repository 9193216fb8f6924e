/* ptx_host.h: ibgda.cuh's memory operations (namespace ptx) as C++ atomics, for a host
 * build that runs kernels on threads (IBGDA_HOST_THREADS; cuda/moe_host.cpp through
 * cuda/host_threads.h). Included by ibgda.cuh in place of the inline PTX; the device
 * builds never see it. Each operation has the ordering its PTX names (a weak or volatile
 * access is relaxed here, so that the threads' accesses are not C++ data races); the clock
 * yields the thread, so that the waits that read it let the others run. */
#pragma once
/* Inside namespace ibgda: the standard headers come from host_threads.h. */

namespace ptx {
inline void st_relaxed_sys_b32(void* p, u32 v) { __atomic_store_n((u32*)p, v, __ATOMIC_RELAXED); }
inline void st_volatile_b32(void* p, u32 v) { __atomic_store_n((u32*)p, v, __ATOMIC_RELAXED); }
inline void st_release_gpu_b32(void* p, u32 v) { __atomic_store_n((u32*)p, v, __ATOMIC_RELEASE); }
inline void st_release_sys_b32(void* p, u32 v) { __atomic_store_n((u32*)p, v, __ATOMIC_RELEASE); }
inline void st_release_gpu_b64(void* p, u64 v) { __atomic_store_n((u64*)p, v, __ATOMIC_RELEASE); }
inline void st_release_sys_b64(void* p, u64 v) { __atomic_store_n((u64*)p, v, __ATOMIC_RELEASE); }
inline void st_mmio_b64(void* p, u64 v) { __atomic_store_n((u64*)p, v, __ATOMIC_RELAXED); }
inline void st_relaxed_gpu_b64(void* p, u64 v) { __atomic_store_n((u64*)p, v, __ATOMIC_RELAXED); }
inline u64 ld_volatile_b64(const void* p) { return __atomic_load_n((const u64*)p, __ATOMIC_RELAXED); }
inline u64 ld_relaxed_sys_b64(const void* p) { return __atomic_load_n((const u64*)p, __ATOMIC_RELAXED); }
inline u64 ld_relaxed_gpu_b64(const void* p) { return __atomic_load_n((const u64*)p, __ATOMIC_RELAXED); }
inline u64 ld_acquire_gpu_b64(const void* p) { return __atomic_load_n((const u64*)p, __ATOMIC_ACQUIRE); }
inline u64 ld_acquire_sys_b64(const void* p) { return __atomic_load_n((const u64*)p, __ATOMIC_ACQUIRE); }
inline u32 atom_cas_acquire_gpu_b32(u32* p, u32 expected, u32 desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE);
    return expected;
}
inline void fence_release_gpu() { __atomic_thread_fence(__ATOMIC_RELEASE); }
inline void fence_acquire_gpu() { __atomic_thread_fence(__ATOMIC_ACQUIRE); }
inline void fence_acq_rel_gpu() { __atomic_thread_fence(__ATOMIC_ACQ_REL); }
/* ns since an arbitrary origin, never 0 (Deadline takes 0 for "not read yet"). */
inline u64 globaltimer() {
    ::std::this_thread::yield();
    const auto t = ::std::chrono::steady_clock::now().time_since_epoch();
    return (u64)::std::chrono::duration_cast<::std::chrono::nanoseconds>(t).count() + 1;
}
} // namespace ptx
