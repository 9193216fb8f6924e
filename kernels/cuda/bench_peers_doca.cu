/* bench_peers_doca.cu: the one-thread issue loop of ibgda_issue_bench_<S> through DOCA
 * GPUNetIO's device verbs (the path NCCL GIN's GDAKI uses), compiled at run time with
 * NVRTC from the headers of the pinned nvidia-nvshmem-cu13 wheel (never vendored: the
 * include directory is passed with -I), with the small C library shim of this project.
 * DOCA's queue-pair struct is filled on the device from ibgda's DeviceQueueDescriptor, so
 * DOCA writes its WQEs into ibgda's GPU-resident ring, its doorbell record and doorbell
 * into ibgda's, and polls ibgda's CQ, which the doorbell sink serves.
 *
 *   ibgda_peer_doca_setup   fills the struct (and poisons the ring with 0xa5, so bytes
 *                           DOCA leaves unwritten show), reports its size
 *   ibgda_peer_doca_issue   warmup + iters of doca_gpu_dev_verbs_p_thread<uint64_t> (one
 *                           signaled 8-byte inline RDMA WRITE, exclusive mode, regular
 *                           doorbell from the SM) and doca_gpu_dev_verbs_poll_cq_at on its
 *                           ticket; issue ns/cycles and put+completion ns per iteration.
 * DOCA's own waits are unbounded: the issue kernel runs a watchdog in its second warp,
 * which, when the loop makes no progress for IBGDA_SPIN_LIMIT_NS (5 s if unset), writes
 * an error CQE (owner bit right, opcode REQ_ERR) into the slot DOCA polls, so DOCA's poll
 * returns -EIO, and the loop stops with PEER_WATCHDOG in its status and the iteration in
 * status[1]. */
#include "libc_shim.h"
/* DOCA's wire structs (control segment, remote address, data, CQE) are packed with a
 * trailing `} __attribute__((__packed__))`, which NVRTC ignores (warning 1866, "attribute
 * does not apply to any entity"; nvcc, in its host compiler's GNU mode, honours it).
 * Unpacked, DOCA's control segment is 20 bytes: fm_ce_se lands in byte 12 (the immediate)
 * instead of 11, and the inline data segment starts at byte 36 instead of 32, so a NIC sees
 * no completion request. Packing the header that defines them (and nothing else) restores
 * the layout its authors meant, which the static assertions below check field by field
 * against ibgda's. */
#pragma pack(push, 1)
#include "gpunetio/common/doca_gpunetio_verbs_def.h"
#pragma pack(pop)
#include "gpunetio/device/doca_gpunetio_dev_verbs_onesided.cuh"
#include "ibgda_layout.h"

/* DOCA's wire structs as compiled, against ibgda's layout (generated from its Rust types). */
#define PEER_LAYOUT(type, member, want) \
    static_assert(IBGDA_OFFSETOF(type, member) == ibgda::layout::want, #type "." #member " is not at " #want)
static_assert(sizeof(doca_gpunetio_ib_mlx5_wqe_ctrl_seg) == ibgda::layout::CTRL_BYTES, "DOCA's control segment size");
PEER_LAYOUT(doca_gpunetio_ib_mlx5_wqe_ctrl_seg, opmod_idx_opcode, CTRL_OPMOD_IDX_OPCODE);
PEER_LAYOUT(doca_gpunetio_ib_mlx5_wqe_ctrl_seg, qpn_ds, CTRL_QPN_DS);
PEER_LAYOUT(doca_gpunetio_ib_mlx5_wqe_ctrl_seg, signature, CTRL_SIGNATURE);
PEER_LAYOUT(doca_gpunetio_ib_mlx5_wqe_ctrl_seg, dci_stream_channel_id, CTRL_DCI_STREAM_CHANNEL_ID);
PEER_LAYOUT(doca_gpunetio_ib_mlx5_wqe_ctrl_seg, fm_ce_se, CTRL_FM_CE_SE);
PEER_LAYOUT(doca_gpunetio_ib_mlx5_wqe_ctrl_seg, imm, CTRL_IMM);
static_assert(sizeof(doca_gpunetio_ib_mlx5_wqe_raddr_seg) == ibgda::layout::RADDR_BYTES, "DOCA's raddr segment size");
PEER_LAYOUT(doca_gpunetio_ib_mlx5_wqe_raddr_seg, rkey, RADDR_RKEY);
static_assert(sizeof(doca_gpunetio_ib_mlx5_wqe_data_seg) == ibgda::layout::DATA_BYTES, "DOCA's data segment size");
PEER_LAYOUT(doca_gpunetio_ib_mlx5_wqe_data_seg, lkey, DATA_LKEY);
PEER_LAYOUT(doca_gpunetio_ib_mlx5_wqe_data_seg, addr, DATA_ADDR);
static_assert(sizeof(doca_gpunetio_ib_mlx5_wqe_inl_data_seg) == ibgda::layout::INLINE_HEADER_BYTES, "DOCA's inline header size");
static_assert(sizeof(doca_gpunetio_ib_mlx5_cqe64) == ibgda::layout::CQE_BYTES, "DOCA's CQE size");
PEER_LAYOUT(doca_gpunetio_ib_mlx5_cqe64, sop_drop_qpn, CQE_SOP_DROP_QPN);
PEER_LAYOUT(doca_gpunetio_ib_mlx5_cqe64, wqe_counter, CQE_WQE_COUNTER);
PEER_LAYOUT(doca_gpunetio_ib_mlx5_cqe64, op_own, CQE_OP_OWN);
static_assert(sizeof(doca_gpu_dev_verbs_wqe) == ibgda::layout::WQEBB_BYTES, "DOCA's WQE basic block size");

#include "peer_loop.h"

__device__ __forceinline__ u32 peer_bswap32(u32 x) { return __byte_perm(x, 0, 0x0123); }

extern "C" __global__ void ibgda_peer_doca_setup(ibgda::DeviceQueueDescriptor d, doca_gpu_dev_verbs_qp* qp, u32* size) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned char* raw = (unsigned char*)qp;
    for (u32 i = 0; i < sizeof(doca_gpu_dev_verbs_qp); i++) raw[i] = 0;
    const u32 wqebbs = 1u << d.log_sq_wqebbs;
    unsigned char* ring = (unsigned char*)d.sq_ring;
    for (u32 i = 0; i < wqebbs * 64u; i++) ring[i] = 0xa5;
    qp->sq_num = d.qpn;
    qp->sq_num_shift8 = d.qpn << 8;
    qp->sq_num_shift8_be = peer_bswap32(d.qpn << 8);
    qp->sq_num_shift8_be_1ds = peer_bswap32((d.qpn << 8) | 1u);
    qp->sq_num_shift8_be_2ds = peer_bswap32((d.qpn << 8) | 2u);
    qp->sq_num_shift8_be_3ds = peer_bswap32((d.qpn << 8) | 3u);
    qp->sq_num_shift8_be_4ds = peer_bswap32((d.qpn << 8) | 4u);
    qp->sq_num_shift8_be_5ds = peer_bswap32((d.qpn << 8) | 5u);
    qp->sq_wqe_num = (uint16_t)wqebbs;
    qp->sq_wqe_mask = (uint16_t)(wqebbs - 1);
    qp->sq_wqe_daddr = ring;
    qp->sq_dbrec = (__be32*)d.sq_dbrec;
    qp->sq_db = (uint64_t*)d.doorbell;
    qp->cq_sq.cqe_daddr = (uint8_t*)d.cq_ring;
    qp->cq_sq.cq_num = d.qpn;
    qp->cq_sq.cqe_num = 1u << d.log_cq_entries;
    qp->cq_sq.cqe_mask = (1u << d.log_cq_entries) - 1;
    qp->cq_sq.dbrec = (__be32*)d.cq_dbrec;
    qp->cq_sq.cqe_size = 64;
    qp->cq_sq.cq_type = DOCA_GPUNETIO_VERBS_CQ_64B;
    qp->cq_sq.mem_type = DOCA_GPUNETIO_VERBS_MEM_TYPE_GPU;
    qp->nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB;
    qp->mem_type = DOCA_GPUNETIO_VERBS_MEM_TYPE_GPU;
    *size = sizeof(doca_gpu_dev_verbs_qp);
}

/* The watchdog's completion of a wait DOCA never saw end: REQ_ERR (0xd) in the opcode
 * nibble of the CQE at the awaited ticket, with that pass's owner bit. */
__device__ __forceinline__ void peer_doca_fire(doca_gpu_dev_verbs_qp* qp, u64 ticket) {
    const u32 n = qp->cq_sq.cqe_num;
    unsigned char* cqe = (unsigned char*)qp->cq_sq.cqe_daddr + (u64)(ticket & (n - 1)) * 64u;
    const u32 owner = (u32)((ticket / n) & 1u);
    asm volatile("st.relaxed.sys.global.b8 [%0], %1;" ::"l"(cqe + 63), "h"((unsigned short)((0xdu << 4) | owner))
                 : "memory");
}

/* One thread (warp 0) and the watchdog (warp 1). The CQ doorbell record (consumer index), which DOCA's GPU CQ mode does not
 * write (its CQs ignore overrun), is written by this harness after each timed wait, so the
 * sink, which models a NIC that checks for overrun, keeps producing CQEs. Phase steps
 * (peer_phase): 4 waiting for the completion, 5 done. */
extern "C" __global__ void ibgda_peer_doca_issue(doca_gpu_dev_verbs_qp* qp, u32 warmup, u32 iters, u64 raddr, u32 rkey,
                                                 u64* issue_ns, u64* issue_cycles, u64* total_ns, u64* clocks,
                                                 int* status, volatile u64* phase) {
    __shared__ PeerWatch watch_state;
    volatile PeerWatch* watch = &watch_state;
    if (!peer_watch_start(watch, [qp](u64 ticket) { peer_doca_fire(qp, ticket); })) return;
    int err = 0;
    u32 stopped_at = 0;
    u64 g_start = 0;
    long long c_start = 0;
    /* DOCA's device verbs take memory keys as its host side keeps them, big-endian
     * (DOCA_GPUNETIO_VERBS_MKEY_SWAPPED == 1: the raddr segment copies the key as is). */
    const doca_gpu_dev_verbs_addr remote{raddr, peer_bswap32(rkey)};
    for (u32 i = 0; i < warmup + iters; i++) {
        if (i == warmup) {
            g_start = peer_globaltimer();
            c_start = clock64();
        }
        const u64 t0 = peer_globaltimer();
        const long long c0 = clock64();
        doca_gpu_dev_verbs_ticket_t ticket;
        doca_gpu_dev_verbs_p_thread<uint64_t, DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE,
                                    DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB, DOCA_GPUNETIO_VERBS_CQ_64B>(
            qp, remote, 0x0123456789abcdefull ^ i, &ticket);
        const long long c1 = clock64();
        const u64 t1 = peer_globaltimer();
        watch->awaited = ticket;
        watch->iteration = i + 1;
        peer_phase(phase, i, 4);
        const int w = doca_gpu_dev_verbs_poll_cq_at<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE,
                                                    DOCA_GPUNETIO_VERBS_QP_SQ, DOCA_GPUNETIO_VERBS_CQ_64B>(qp, ticket);
        const u64 t2 = peer_globaltimer();
        if (w != 0 && err == 0) err = w < 0 ? w : -w;
        asm volatile("st.relaxed.sys.global.b32 [%0], %1;" ::"l"(qp->cq_sq.dbrec),
                     "r"(peer_bswap32((u32)(ticket + 1) & 0xffffffu))
                     : "memory");
        if (i >= warmup) {
            issue_ns[i - warmup] = t1 - t0;
            issue_cycles[i - warmup] = (u64)(c1 - c0);
            total_ns[i - warmup] = t2 - t0;
        }
        if (watch->fired) {
            err = PEER_WATCHDOG;
            stopped_at = i;
            break;
        }
    }
    peer_finish(watch, phase, c_start, g_start, clocks, status, err, stopped_at);
}
