/* proxy.cuh: the device side of ibgda::proxy (the CPU-proxy submission path) and the
 * CPU-assisted doorbell.
 *
 * Request descriptors: 16 bytes, two little-endian words, each carrying the ring lap's
 * epoch in its low byte (the format of ibgda::proxy::RequestDescriptor; every constant
 * comes from the generated ibgda_proxy_layout.h). The encoders are constexpr and
 * __host__ __device__, and the program static_asserts them against words the Rust encoder
 * produced. A request the format cannot hold (peer >= 16, zero or oversized length, an
 * operand past 56 bits, a compare-swap value past 28 bits) is encoded with opcode 15,
 * which the worker completes with DescriptorError::UnknownOpcode: never silently cut.
 *
 * Handoff protocols are template tags:
 *   proxy::Baseline  any number of producers per ring: device atomic reservation
 *                    (atom.add on a device-memory counter), a read of the host-resident
 *                    progress on every push (ld.acquire.sys), the operand word stored
 *                    relaxed and the control word with a system-scope release store.
 *   proxy::Tuned     one producer per ring: head and cached progress in registers (the
 *                    progress is re-read only when the cache says full), validity in the
 *                    descriptor, one 16-byte st.relaxed.sys.v2 store and no fence.
 *
 * Every wait on a ring (room for a push, the worker's completion counter) is bounded at
 * run time by the ring's wait_ns (set per ring by the host: DeviceRing::set_device_wait,
 * carried in DeviceProxyRing) and then returns WAIT_DEADLINE (layout::STATUS_DEADLINE),
 * as the waits on a queue pair are by their descriptor's. The clock is read only after a
 * wait's first check has failed (Deadline, ibgda.cuh): a push that finds room reads no
 * clock, and tests/proxy_ptx.rs compares its PTX with the PTX it had before the bound.
 *
 * CPU-assisted doorbell: proxy::CpuAssisted<S> is an ordering-scope tag wrapping S. It
 * keeps S's CQ polling and publication, and replaces S's doorbell (record + MMIO store)
 * with one system-scope release store of the next free WQEBB's low 16 bits to the host
 * slot the descriptor's `doorbell` field names (a host thread forwards it). Kernels
 * instantiated with it are the only ones the host hands a CPU-assisted queue. */
#pragma once
#include "ibgda.cuh"
#include "ibgda_proxy_layout.h"

namespace ibgda {
namespace proxy {

namespace ptx {
__device__ __forceinline__ void st_relaxed_sys_v2_b64(void* p, u64 a, u64 b) {
    asm volatile("st.relaxed.sys.global.v2.b64 [%0], {%1, %2};" ::"l"(gaddr(p)), "l"(a), "l"(b) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys_b64(void* p, u64 v) {
    asm volatile("st.relaxed.sys.global.b64 [%0], %1;" ::"l"(gaddr(p)), "l"(v) : "memory");
}
__device__ __forceinline__ void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
} // namespace ptx

struct Desc {
    u64 control;
    u64 operand;
};

__host__ __device__ constexpr u32 epoch_of_lap(u64 lap) { return (u32)(lap % 255u) + 1u; }

__host__ __device__ constexpr u64 control_word(u32 op, u32 peer, u32 window, u32 extra, u32 offset) {
    return ((u64)op << layout::PROXY_OPCODE_SHIFT) | ((u64)peer << layout::PROXY_PEER_SHIFT) |
           ((u64)(window & 0xffu) << layout::PROXY_WINDOW_SHIFT) | ((u64)(extra & 0xffu) << layout::PROXY_EXTRA_SHIFT) |
           ((u64)offset << layout::PROXY_OFFSET_SHIFT);
}
/* What a request the format cannot hold becomes: opcode 15, refused by the worker. */
__host__ __device__ constexpr Desc invalid_request() { return Desc{(u64)layout::PROXY_OP_INVALID << layout::PROXY_OPCODE_SHIFT, 0}; }

__host__ __device__ constexpr Desc write_inline8(u32 peer, u32 window, u32 offset, u64 value) {
    return peer >= layout::PROXY_MAX_PEERS
               ? invalid_request()
               : Desc{control_word(layout::PROXY_OP_WRITE_INLINE8, peer, window, (u32)(value >> 56), offset),
                      (value & layout::PROXY_MAX_OPERAND) << layout::PROXY_OPERAND_SHIFT};
}
__host__ __device__ constexpr Desc pointer_op(u32 op, u32 peer, u32 window, u32 offset, u32 local_window, u32 local_offset,
                                              u32 len) {
    return (peer >= layout::PROXY_MAX_PEERS || len == 0 || len > layout::PROXY_MAX_LENGTH)
               ? invalid_request()
               : Desc{control_word(op, peer, window, len >> 16, offset),
                      ((u64)(local_window & 0xffu) | ((u64)local_offset << 8) | ((u64)(len & 0xffffu) << 40))
                          << layout::PROXY_OPERAND_SHIFT};
}
/* WRITE of `len` bytes from (local_window, local_offset) to (peer, window, offset). */
__host__ __device__ constexpr Desc write(u32 peer, u32 window, u32 offset, u32 local_window, u32 local_offset, u32 len) {
    return pointer_op(layout::PROXY_OP_WRITE, peer, window, offset, local_window, local_offset, len);
}
/* READ of `len` bytes from (peer, window, offset) into (local_window, local_offset). */
__host__ __device__ constexpr Desc read(u32 peer, u32 window, u32 offset, u32 local_window, u32 local_offset, u32 len) {
    return pointer_op(layout::PROXY_OP_READ, peer, window, offset, local_window, local_offset, len);
}
__host__ __device__ constexpr Desc add_op(u32 op, u32 peer, u32 window, u32 offset, u64 add) {
    return (peer >= layout::PROXY_MAX_PEERS || add > layout::PROXY_MAX_OPERAND)
               ? invalid_request()
               : Desc{control_word(op, peer, window, 0, offset), add << layout::PROXY_OPERAND_SHIFT};
}
/* Fetch-add; the old value lands in the ring's result slot of the descriptor. */
__host__ __device__ constexpr Desc fetch_add(u32 peer, u32 window, u32 offset, u64 add) {
    return add_op(layout::PROXY_OP_FETCH_ADD, peer, window, offset, add);
}
/* Signal: fetch-add on a remote counter, result discarded. */
__host__ __device__ constexpr Desc signal(u32 peer, u32 window, u32 offset, u64 add) {
    return add_op(layout::PROXY_OP_SIGNAL, peer, window, offset, add);
}
__host__ __device__ constexpr Desc compare_swap(u32 peer, u32 window, u32 offset, u32 compare, u32 swap) {
    return (peer >= layout::PROXY_MAX_PEERS || compare > layout::PROXY_MAX_CAS_VALUE || swap > layout::PROXY_MAX_CAS_VALUE)
               ? invalid_request()
               : Desc{control_word(layout::PROXY_OP_COMPARE_SWAP, peer, window, 0, offset),
                      ((u64)compare | ((u64)swap << 28)) << layout::PROXY_OPERAND_SHIFT};
}
__host__ __device__ constexpr Desc with_epoch(Desc d, u32 epoch) { return Desc{d.control | epoch, d.operand | epoch}; }

/* A ring as a kernel sees it (the generated DeviceProxyRing). */
struct Ring {
    DeviceProxyRing d;
    __device__ __forceinline__ u64 slots() const { return 1ull << d.log_slots; }
    __device__ __forceinline__ u64* slot(u64 index) const {
        return (u64*)(d.slots + ((index & (slots() - 1)) * layout::PROXY_DESCRIPTOR_BYTES));
    }
    __device__ __forceinline__ const u64* consumed() const { return (const u64*)d.control + layout::PROXY_CONSUMED_WORD; }
    __device__ __forceinline__ const u64* completed() const { return (const u64*)d.control + layout::PROXY_COMPLETED_WORD; }
    __device__ __forceinline__ const u64* errors() const { return (const u64*)d.control + layout::PROXY_ERRORS_WORD; }
    __device__ __forceinline__ u64* producer() const { return (u64*)d.producer; }
};

/* Waits until the worker has completed `count` descriptors of the ring (host-resident
 * completion counter). Returns 0, or WAIT_DEADLINE once the ring's wait_ns have passed
 * since the first check that failed. */
__device__ __forceinline__ int wait_completed(const Ring& r, u64 count) {
    Deadline dl;
    while (::ibgda::ptx::ld_acquire_sys_b64(r.completed()) < count) {
        if (dl.expired(r.d.wait_ns)) return WAIT_DEADLINE;
    }
    return 0;
}

/* The baseline protocol: stateless per producer. */
struct Baseline {
    struct Producer {
        Ring r;
        __device__ __forceinline__ static Producer load(const DeviceProxyRing& d) { return Producer{Ring{d}}; }
        __device__ __forceinline__ void store() const {}
        /* Pushes `desc` (epoch bits zero); `index` gets its ring index. 0, or WAIT_DEADLINE
         * when the slot stayed taken for the ring's wait_ns (a reserved slot is never given
         * back: after a deadline the ring is wedged). */
        __device__ __forceinline__ int push(Desc desc, u64& index) {
            index = atomicAdd((unsigned long long*)r.producer(), 1ull);
            const u64 n = r.slots();
            Deadline dl;
            while (index - ::ibgda::ptx::ld_acquire_sys_b64(r.consumed()) >= n) {
                if (dl.expired(r.d.wait_ns)) return WAIT_DEADLINE;
            }
            const Desc e = with_epoch(desc, epoch_of_lap(index >> r.d.log_slots));
            u64* s = r.slot(index);
            ptx::st_relaxed_sys_b64(s + 1, e.operand);
            ::ibgda::ptx::st_release_sys_b64(s, e.control);
            return 0;
        }
    };
    static constexpr u32 KIND = layout::PROXY_HANDOFF_BASELINE;
};

/* The tuned protocol: one producer per ring, its state in registers between load/store. */
struct Tuned {
    struct Producer {
        Ring r;
        u64 head;
        u64 cached;
        __device__ __forceinline__ static Producer load(const DeviceProxyRing& d) {
            const u64* p = (const u64*)d.producer;
            return Producer{Ring{d}, p[0], p[1]};
        }
        /* Writes head and cached progress back (for a later kernel). */
        __device__ __forceinline__ void store() const {
            u64* p = r.producer();
            p[0] = head;
            p[1] = cached;
        }
        /* Pushes `desc` if the ring has room (re-reading the progress only when the cached
         * copy says full): true, with its index; false when full. */
        __device__ __forceinline__ bool try_push(Desc desc, u64& index) {
            const u64 n = r.slots();
            if (head - cached >= n) {
                cached = ::ibgda::ptx::ld_acquire_sys_b64(r.consumed());
                if (head - cached >= n) return false;
            }
            index = head;
            const Desc e = with_epoch(desc, epoch_of_lap(head >> r.d.log_slots));
            ptx::st_relaxed_sys_v2_b64(r.slot(head), e.control, e.operand);
            head++;
            return true;
        }
        /* Pushes `desc`, waiting for room: 0, or WAIT_DEADLINE when the ring stayed full
         * for the ring's wait_ns (nothing pushed). */
        __device__ __forceinline__ int push(Desc desc, u64& index) {
            Deadline dl;
            while (!try_push(desc, index)) {
                if (dl.expired(r.d.wait_ns)) return WAIT_DEADLINE;
            }
            return 0;
        }
    };
    static constexpr u32 KIND = layout::PROXY_HANDOFF_TUNED;
};

/* Orders payload stores (a WRITE's source in a host window) before the descriptor that
 * names them: a system-scope fence, needed by either protocol for pointer requests. */
__device__ __forceinline__ void payload_release() { ptx::fence_acq_rel_sys(); }

/* The CPU-assisted doorbell over scope S: S's CQ side, a host slot instead of the NIC's
 * doorbell. `db` is the slot (the descriptor's doorbell field); `record` is the
 * big-endian doorbell-record value, so the slot gets its byte-swapped low 16 bits. */
template <class S> struct CpuAssisted : S {
    __device__ __forceinline__ static void ring(u32* /*dbrec: written by the host*/, u32 record, u64* slot,
                                                u64 /*doorbell value: the host builds it*/) {
        ::ibgda::ptx::st_release_sys_b32((void*)slot, bswap32(record));
    }
};

} // namespace proxy
} // namespace ibgda
