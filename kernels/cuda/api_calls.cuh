/* api_calls.cuh: one device API call described by an ApiCall record (the tests' form of
 * an operation and its arguments), planned (host and device) or performed (device), over
 * an array of windows. Shared by the GPU test kernels (api_kernels.cu) and the host build
 * of the planning (api_host.cpp). */
#pragma once
#include "ibgda_api.cuh"

namespace ibgda {
namespace api {

/* The plan of `a`: the WQEs the operation builds, or its status. */
__device__ __forceinline__ Plan plan_call(const DeviceComm& c, const DeviceWindow* wins, u32 n_wins, const ApiCall& a) {
    if (a.dst_window >= n_wins || a.src_window >= n_wins || a.signal_window >= n_wins) return failed(layout::STATUS_BAD_PEER);
    const DeviceWindow& dst = wins[a.dst_window];
    const DeviceWindow& src = wins[a.src_window];
    const DeviceWindow& sig = wins[a.signal_window];
    switch (a.op) {
    case layout::API_OP_PUT: return plan_put(c, a.peer, dst, a.dst_offset, src, a.src_offset, a.len);
    case layout::API_OP_PUT_VALUE: return plan_put_value(dst, a.peer, a.dst_offset, a.value);
    case layout::API_OP_GET: return plan_get(a.peer, dst, a.dst_offset, src, a.src_offset, a.len);
    case layout::API_OP_ATOMIC_ADD: return plan_add(c, dst, a.peer, a.dst_offset, a.value);
    case layout::API_OP_FETCH_ADD: return plan_fetch(Kind::FetchAdd, dst, a.peer, a.dst_offset, src, a.src_offset, a.value, 0);
    case layout::API_OP_COMPARE_SWAP:
        return plan_fetch(Kind::CompareSwap, dst, a.peer, a.dst_offset, src, a.src_offset, a.value, a.compare);
    case layout::API_OP_PUT_WITH_SIGNAL:
        return plan_put_with_signal(c, a.peer, dst, a.dst_offset, src, a.src_offset, a.len, sig, a.signal_offset, a.value);
    case layout::API_OP_SIGNAL: return plan_add(c, sig, a.peer, a.signal_offset, a.value);
    default: return failed(layout::STATUS_BAD_LENGTH);
    }
}

template <class S, bool WARP>
__device__ __forceinline__ int perform_checked(const DeviceComm& c, const DeviceWindow* wins, u32 n_wins,
                                               const ApiCall& a, bool active, u64* ticket);

/* Performs `a` through the operation's own function, per thread or (WARP) per warp. */
template <class S, bool WARP>
__device__ __forceinline__ int perform(const DeviceComm& c, const DeviceWindow* wins, u32 n_wins, const ApiCall& a,
                                       bool active, u64* ticket) {
    /* A window index out of range: this lane posts nothing (its warp still calls). */
    const bool bad = a.dst_window >= n_wins || a.src_window >= n_wins || a.signal_window >= n_wins;
    if (bad && !WARP) return layout::STATUS_BAD_PEER;
    active = active && !bad;
    const int s = perform_checked<S, WARP>(c, wins, n_wins, a, active, ticket);
    return bad ? layout::STATUS_BAD_PEER : s;
}

template <class S, bool WARP>
__device__ __forceinline__ int perform_checked(const DeviceComm& c, const DeviceWindow* wins, u32 n_wins,
                                               const ApiCall& a, bool active, u64* ticket) {
    const u32 w0 = a.dst_window < n_wins ? a.dst_window : 0u;
    const u32 w1 = a.src_window < n_wins ? a.src_window : 0u;
    const u32 w2 = a.signal_window < n_wins ? a.signal_window : 0u;
    const DeviceWindow& dst = wins[w0];
    const DeviceWindow& src = wins[w1];
    const DeviceWindow& sig = wins[w2];
    const u32 k = a.counter;
    switch (a.op) {
    case layout::API_OP_PUT:
        return WARP ? put_warp<S>(c, a.peer, dst, a.dst_offset, src, a.src_offset, a.len, active, ticket, k)
                    : put<S>(c, a.peer, dst, a.dst_offset, src, a.src_offset, a.len, ticket, k);
    case layout::API_OP_PUT_VALUE:
        return WARP ? put_value_warp<S>(c, a.peer, dst, a.dst_offset, a.value, active, ticket, k)
                    : put_value<S>(c, a.peer, dst, a.dst_offset, a.value, ticket, k);
    case layout::API_OP_GET:
        return WARP ? get_warp<S>(c, a.peer, dst, a.dst_offset, src, a.src_offset, a.len, active, ticket, k)
                    : get<S>(c, a.peer, dst, a.dst_offset, src, a.src_offset, a.len, ticket, k);
    case layout::API_OP_ATOMIC_ADD:
        return WARP ? atomic_add_warp<S>(c, a.peer, dst, a.dst_offset, a.value, active, ticket, k)
                    : atomic_add<S>(c, a.peer, dst, a.dst_offset, a.value, ticket, k);
    case layout::API_OP_FETCH_ADD:
        return WARP ? fetch_add_warp<S>(c, a.peer, dst, a.dst_offset, a.value, src, a.src_offset, active, ticket, k)
                    : fetch_add<S>(c, a.peer, dst, a.dst_offset, a.value, src, a.src_offset, ticket, k);
    case layout::API_OP_COMPARE_SWAP:
        return WARP ? compare_swap_warp<S>(c, a.peer, dst, a.dst_offset, a.compare, a.value, src, a.src_offset, active,
                                           ticket, k)
                    : compare_swap<S>(c, a.peer, dst, a.dst_offset, a.compare, a.value, src, a.src_offset, ticket, k);
    case layout::API_OP_PUT_WITH_SIGNAL:
        return WARP ? put_with_signal_warp<S>(c, a.peer, dst, a.dst_offset, src, a.src_offset, a.len, sig,
                                              a.signal_offset, a.value, active, ticket, k)
                    : put_with_signal<S>(c, a.peer, dst, a.dst_offset, src, a.src_offset, a.len, sig, a.signal_offset,
                                         a.value, ticket, k);
    case layout::API_OP_SIGNAL:
        return WARP ? signal_warp<S>(c, a.peer, sig, a.signal_offset, a.value, active, ticket, k)
                    : signal<S>(c, a.peer, sig, a.signal_offset, a.value, ticket, k);
    default: return layout::STATUS_BAD_LENGTH;
    }
}

} // namespace api
} // namespace ibgda
