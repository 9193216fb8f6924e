/* bench_peers_nvshmem.cu: the one-thread issue loop of ibgda_issue_bench_<S> through
 * NVSHMEM's IBGDA device path (non_abi/device/pt-to-pt/ibgda_device.cuh), compiled with
 * nvcc at run time (NVRTC cannot compile it: it needs rdma-core's mlx5dv.h and host
 * headers) from the headers of the pinned nvidia-nvshmem-cu13 wheel and rdma-core's
 * include directory, both passed with -I (never vendored).
 *
 * NVSHMEM's queue pair, its CQ and its device state are filled on the device from ibgda's
 * DeviceQueueDescriptor, so NVSHMEM writes its WQEs into ibgda's GPU-resident ring, its
 * doorbell record and doorbell into ibgda's, and polls ibgda's CQ, which the doorbell sink
 * serves. NVSHMEM's CQs are collapsed (every CQE in slot 0; it reads only wqe_counter), so
 * the queue pair is built with a collapsed CQ.
 *
 *   ibgda_peer_nvshmem_setup  fills the QP and CQ structs and a global copy of the device
 *                             state (the host copies it into this module's __constant__
 *                             nvshmemi_ibgda_device_state_d, as nvshmemx_cumodule_init does)
 *                             and poisons the ring with 0xa5
 *   ibgda_peer_nvshmem_issue  warmup + iters of what nvshmemi_ibgda_rma_p_impl<uint64_t,
 *                             false, false, false> does for one thread on an RC QP after its
 *                             PE lookups: ibgda_reserve_wqe_slots, ibgda_write_rdma_write_inl_wqe
 *                             (CQ_UPDATE), ibgda_submit_requests<false>; then ibgda_quiet
 *                             (nvshmem_quiet's per-QP wait); issue ns/cycles and
 *                             put+completion ns per iteration, and where it is in a
 *                             host-mapped word (the warmup's steps, every quiet).
 * NVSHMEM's waits are unbounded: warp 1 is a watchdog that, when the loop makes no progress
 * for IBGDA_SPIN_LIMIT_NS (5 s if unset), writes the wqe_counter NVSHMEM waits for with an
 * error opcode into the collapsed CQE, so the wait ends and the loop stops with
 * PEER_WATCHDOG in its status and the iteration in status[1]. */
#include "nvshmem.h"
#include "non_abi/device/pt-to-pt/ibgda_device.cuh"
#include "ibgda_layout.h"
#include "peer_loop.h"

/* NVSHMEM writes through rdma-core's mlx5dv.h structs: the same layout as ibgda's. */
#define PEER_LAYOUT(type, member, want) \
    static_assert(IBGDA_OFFSETOF(type, member) == ibgda::layout::want, #type "." #member " is not at " #want)
static_assert(sizeof(struct mlx5_wqe_ctrl_seg) == ibgda::layout::CTRL_BYTES, "mlx5_wqe_ctrl_seg size");
PEER_LAYOUT(struct mlx5_wqe_ctrl_seg, fm_ce_se, CTRL_FM_CE_SE);
PEER_LAYOUT(struct mlx5_wqe_ctrl_seg, imm, CTRL_IMM);
static_assert(sizeof(struct mlx5_wqe_raddr_seg) == ibgda::layout::RADDR_BYTES, "mlx5_wqe_raddr_seg size");
PEER_LAYOUT(struct mlx5_cqe64, wqe_counter, CQE_WQE_COUNTER);
PEER_LAYOUT(struct mlx5_cqe64, op_own, CQE_OP_OWN);

/* NVSHMEM's default batch (NVSHMEM_IBGDA_NUM_REQUESTS_IN_BATCH). */
constexpr u32 PEER_NVSHMEM_REQUESTS_IN_BATCH = 32;

/* report[0..4] = sizeof(qp), sizeof(cq), sizeof(state), the state's version. */
extern "C" __global__ void ibgda_peer_nvshmem_setup(ibgda::DeviceQueueDescriptor d, nvshmemi_ibgda_device_qp_t* qp,
                                                    nvshmemi_ibgda_device_cq_t* cq,
                                                    nvshmemi_ibgda_device_state_t* state, u32* report) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    memset(qp, 0, sizeof(*qp));
    memset(cq, 0, sizeof(*cq));
    memset(state, 0, sizeof(*state));
    const u32 wqebbs = 1u << d.log_sq_wqebbs;
    unsigned char* ring = (unsigned char*)d.sq_ring;
    for (u32 i = 0; i < wqebbs * 64u; i++) ring[i] = 0xa5;
    /* NVSHMEM's host fills its CQ buffer with 0xff: its poll reads wqe_counter alone and
     * relies on 0xffff before the first completion (a 0 would complete index 1 at once). */
    unsigned char* cqes = (unsigned char*)d.cq_ring;
    for (u32 i = 0; i < (1u << d.log_cq_entries) * 64u; i++) cqes[i] = 0xff;

    qp->version = 1;
    qp->qp_type = NVSHMEMI_IBGDA_DEVICE_QP_TYPE_RC;
    qp->qpn = d.qpn;
    qp->dev_idx = 0;
    qp->tx_wq.nwqes = (uint16_t)wqebbs;
    qp->tx_wq.wqe = ring;
    qp->tx_wq.dbrec = (__be32*)d.sq_dbrec;
    qp->tx_wq.bf = (void*)d.doorbell;
    qp->tx_wq.cq = cq;
    qp->tx_wq.prod_idx = &qp->mvars.tx_wq.prod_idx;
    qp->mvars.version = 1;

    cq->version = 1;
    cq->qp_type = NVSHMEMI_IBGDA_DEVICE_QP_TYPE_RC;
    cq->dbrec = (__be32*)d.cq_dbrec;
    cq->cqe = (void*)d.cq_ring;
    cq->prod_idx = &qp->mvars.tx_wq.prod_idx;
    cq->cons_idx = &qp->mvars.tx_wq.cons_idx;
    cq->resv_head = &qp->mvars.tx_wq.resv_head;
    cq->ready_head = &qp->mvars.tx_wq.ready_head;
    cq->cqn = d.qpn;
    /* NVSHMEM sizes the CQ to the QP's depth. */
    cq->ncqes = wqebbs;
    cq->qpn = d.qpn;

    state->version = 2;
    state->num_rc_per_pe = 1;
    state->num_requests_in_batch = PEER_NVSHMEM_REQUESTS_IN_BATCH;
    state->num_devices_initialized = 1;
    /* The queue memory is GPU memory: NVSHMEM's GPU-scope fences (its nic_buf_on_gpumem). */
    state->nic_buf_on_gpumem = true;
    state->globalmem.cqs = cq;
    state->globalmem.rcs = qp;
    report[0] = sizeof(*qp);
    report[1] = sizeof(*cq);
    report[2] = sizeof(*state);
    report[3] = (u32)state->version;
}

/* The watchdog's completion of a wait NVSHMEM never saw end: wqe_counter = target - 1
 * with REQ_ERR in the collapsed CQE (be16 counter, signature 0, op_own). */
__device__ __forceinline__ void peer_nvshmem_fire(nvshmemi_ibgda_device_qp_t* qp, u64 target) {
    unsigned char* cqe = (unsigned char*)qp->tx_wq.cq->cqe;
    const u32 counter = (u32)(target - 1) & 0xffffu;
    const u32 word = ((counter & 0xffu) << 8) | (counter >> 8) | ((0xdu << 4) << 24);
    asm volatile("st.relaxed.sys.global.b32 [%0], %1;" ::"l"(cqe + 60), "r"(word) : "memory");
}

/* Phase steps (peer_phase): 1 reserve, 2 write, 3 submit, 4 quiet, 5 done. */
extern "C" __global__ void ibgda_peer_nvshmem_issue(nvshmemi_ibgda_device_qp_t* qp, u32 warmup, u32 iters, u64 raddr,
                                                    u32 rkey, u64* issue_ns, u64* issue_cycles, u64* total_ns,
                                                    u64* clocks, int* status, volatile u64* phase) {
    __shared__ PeerWatch watch_state;
    volatile PeerWatch* watch = &watch_state;
    if (!peer_watch_start(watch, [qp](u64 target) { peer_nvshmem_fire(qp, target); })) return;
    int err = 0;
    u32 stopped_at = 0;
    u64 g_start = 0;
    long long c_start = 0;
    /* NVSHMEM keeps rkeys big-endian (ibgda_get_raddr_rkey returns __be32). */
    const __be32 rkey_be = HTOBE32(rkey);
    for (u32 i = 0; i < warmup + iters; i++) {
        if (i == warmup) {
            g_start = peer_globaltimer();
            c_start = clock64();
        }
        const uint64_t value = 0x0123456789abcdefull ^ i;
        watch->iteration = i + 1;
        const u64 t0 = peer_globaltimer();
        const long long c0 = clock64();
        if (i < warmup) peer_phase(phase, i, 1);
        const uint64_t base = ibgda_reserve_wqe_slots(qp, 1, false);
        void* wqe_ptrs[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) wqe_ptrs[k] = ibgda_get_wqe_ptr(qp, base + k);
        if (i < warmup) peer_phase(phase, i, 2);
        ibgda_write_rdma_write_inl_wqe<false>(qp, 0, &value, raddr, rkey_be, sizeof(value), base,
                                              MLX5_WQE_CTRL_CQ_UPDATE, wqe_ptrs);
        if (i < warmup) peer_phase(phase, i, 3);
        ibgda_submit_requests<false>(qp, base, 1);
        const long long c1 = clock64();
        const u64 t1 = peer_globaltimer();
        watch->awaited = base + 1;
        peer_phase(phase, i, 4);
        ibgda_quiet(qp);
        const u64 t2 = peer_globaltimer();
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
