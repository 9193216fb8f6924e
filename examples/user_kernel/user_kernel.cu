/* A user's own CUDA kernel on the ibgda device library: one GPU thread owns an RC queue
 * pair placed in GPU memory and posts, signaled, an inline RDMA WRITE, a gathered RDMA
 * WRITE, an RDMA READ and a fetch-and-add, rings the doorbell once and waits for the
 * completions. Compiled at run time by NVRTC (Gpu::compile_program), which provides
 * "ibgda.cuh" and the layout header it includes; with nvcc, pass -I to
 * ibgda_kernels::include_dir() (or DEP_IBGDA_INCLUDE in a build script).
 *
 * The kernel is a template over the ordering scope, instantiated once per scope under the
 * C name put_get_add_<Scope>: UserProgram::kernel::<Rc, S>("put_get_add") picks the
 * instance of the queue's scope, and the library traps if the descriptor's scope differs. */
#include "ibgda.cuh"

using namespace ibgda;

struct Buffers {
    u64 src;        /* 256 bytes the NIC reads (lkey for local use, rkey for READ) */
    u64 dst;        /* 1024 bytes the NIC writes */
    u64 counter;    /* an 8-byte word the fetch-and-add updates (big-endian, as RDMA) */
    u32 src_lkey, src_rkey, dst_lkey, dst_rkey, counter_rkey, pad;
};

template <class S>
__device__ void put_get_add(const DeviceQueueDescriptor& d, const Buffers& b, u64 value, u64 add, int* status) {
    Exclusive<S> e = Exclusive<S>::load(d); /* traps unless d was made for scope S */
    const Target rc{nullptr};
    const Ctrl signaled = ctrl(d.qpn, layout::FM_CE_SE_CQ_UPDATE);
    WqeSlots s;
    u64 ticket = 0;
    int err = 0;
    /* Four one-WQEBB WQEs; the ring (at least 4 WQEBBs) is empty at the start. */
    if (!e.reserve(1, s)) err = -1;
    if (err == 0) {
        /* dst[0..8] = value, carried in the WQE. */
        build_write_inline8<transport::Rc>(s, signaled, rc, b.dst, b.dst_rkey, value);
        e.commit(1);
    }
    if (err == 0 && e.reserve(1, s)) {
        /* dst[64..128] = src[0..64]. */
        build_write<transport::Rc>(s, signaled, rc, b.dst + 64, b.dst_rkey, b.src, 64, b.src_lkey, false);
        e.commit(1);
    } else err = -1;
    if (err == 0 && e.reserve(1, s)) {
        /* dst[256..320] = src[128..192], read from the remote side. */
        build_read<transport::Rc>(s, signaled, rc, b.src + 128, b.src_rkey, b.dst + 256, 64, b.dst_lkey);
        e.commit(1);
    } else err = -1;
    if (err == 0 && e.reserve(1, s)) {
        /* counter += add; the old value lands in dst[512..520]. */
        build_atomic<transport::Rc>(s, signaled, rc, AtomicKind::FetchAdd, b.counter, b.counter_rkey, b.dst + 512,
                                    b.dst_lkey, add, 0, 0, 0);
        ticket = e.commit(1);
    } else err = -1;
    if (err == 0) {
        e.ring(); /* one doorbell record and doorbell for the four */
        err = e.wait(ticket);
    }
    e.store();
    *status = err;
}

/* Parameters: the descriptor by value, then src, dst, counter (device addresses), their
 * keys (src lkey and rkey, dst lkey and rkey, counter rkey), value, add, status. */
#define PUT_GET_ADD(S)                                                                                      \
    extern "C" __global__ void put_get_add_##S(DeviceQueueDescriptor d, u64 src, u64 dst, u64 counter,    \
                                               u32 src_lkey, u32 src_rkey, u32 dst_lkey, u32 dst_rkey,    \
                                               u32 counter_rkey, u64 value, u64 add, int* status) {       \
        const Buffers b{src, dst, counter, src_lkey, src_rkey, dst_lkey, dst_rkey, counter_rkey, 0};       \
        put_get_add<scope::S>(d, b, value, add, status);                                                   \
    }
PUT_GET_ADD(GpuFence)
PUT_GET_ADD(GpuReleaseStore)
