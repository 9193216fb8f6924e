/* ibgda_layout.h: GENERATED from the Rust types of the ibgda crate by
 * ibgda_kernels::layout::layout_header(). Do not edit: a test fails on any
 * difference. Regenerate with
 *   IBGDA_BLESS=1 cargo test -p ibgda-kernels --test layout_header
 * All multi-byte WQE and CQE fields are big-endian on the wire. */
#pragma once

/* offsetof in a constant expression: NVRTC (EDG) has no __builtin_offsetof but
 * takes __INTADDR__; nvcc and host compilers have the builtin. */
#if defined(__CUDACC_RTC__)
#define IBGDA_OFFSETOF(type, member) ((unsigned long long)__INTADDR__(&(((type*)0)->member)))
#else
#define IBGDA_OFFSETOF(type, member) __builtin_offsetof(type, member)
#endif

namespace ibgda {
namespace layout {

/* Geometry of send rings. */
constexpr unsigned OCTOWORD_BYTES = 0x10u;
constexpr unsigned WQEBB_BYTES = 0x40u;
constexpr unsigned MAX_DS = 0x3fu;
constexpr unsigned MAX_WQEBBS = 0x10u;
constexpr unsigned INLINE_SEGMENT_FLAG = 0x80000000u;
constexpr unsigned EXTENDED_AV_FLAG = 0x80000000u;
constexpr unsigned QPN_MAX = 0xffffffu;
constexpr unsigned SEND_DBREC_OFFSET = 0x4u;
constexpr unsigned CQE_INIT_OP_OWN = 0xf1u;

/* mlx5_wqe_ctrl_seg */
constexpr unsigned CTRL_BYTES = 16;
constexpr unsigned CTRL_OPMOD_IDX_OPCODE = 0;
constexpr unsigned CTRL_QPN_DS = 4;
constexpr unsigned CTRL_SIGNATURE = 8;
constexpr unsigned CTRL_DCI_STREAM_CHANNEL_ID = 9;
constexpr unsigned CTRL_FM_CE_SE = 11;
constexpr unsigned CTRL_IMM = 12;

/* mlx5_wqe_raddr_seg */
constexpr unsigned RADDR_BYTES = 16;
constexpr unsigned RADDR_RADDR = 0;
constexpr unsigned RADDR_RKEY = 8;
constexpr unsigned RADDR_RESERVED = 12;

/* mlx5_wqe_data_seg */
constexpr unsigned DATA_BYTES = 16;
constexpr unsigned DATA_BYTE_COUNT = 0;
constexpr unsigned DATA_LKEY = 4;
constexpr unsigned DATA_ADDR = 8;

/* mlx5_wqe_inl_data_seg (payload follows) */
constexpr unsigned INLINE_HEADER_BYTES = 4;
constexpr unsigned INLINE_HEADER_BYTE_COUNT = 0;

/* mlx5_wqe_atomic_seg */
constexpr unsigned ATOMIC_BYTES = 16;
constexpr unsigned ATOMIC_SWAP_ADD = 0;
constexpr unsigned ATOMIC_COMPARE = 8;

/* masked fetch-add, 4 bytes */
constexpr unsigned MASKED_FA4_BYTES = 16;
constexpr unsigned MASKED_FA4_ADD = 0;
constexpr unsigned MASKED_FA4_FIELD_BOUNDARY = 4;
constexpr unsigned MASKED_FA4_RESERVED = 8;

/* masked compare-swap, 4 bytes */
constexpr unsigned MASKED_CS4_BYTES = 16;
constexpr unsigned MASKED_CS4_SWAP = 0;
constexpr unsigned MASKED_CS4_COMPARE = 4;
constexpr unsigned MASKED_CS4_SWAP_MASK = 8;
constexpr unsigned MASKED_CS4_COMPARE_MASK = 12;

/* masked fetch-add, 8 bytes */
constexpr unsigned MASKED_FA8_BYTES = 16;
constexpr unsigned MASKED_FA8_ADD = 0;
constexpr unsigned MASKED_FA8_FIELD_BOUNDARY = 8;

/* masked compare-swap, 8 bytes (two octowords) */
constexpr unsigned MASKED_CS8_BYTES = 32;
constexpr unsigned MASKED_CS8_SWAP = 0;
constexpr unsigned MASKED_CS8_COMPARE = 8;
constexpr unsigned MASKED_CS8_SWAP_MASK = 16;
constexpr unsigned MASKED_CS8_COMPARE_MASK = 24;

/* compact DC address vector */
constexpr unsigned AV_COMPACT_BYTES = 16;
constexpr unsigned AV_COMPACT_DC_KEY = 0;
constexpr unsigned AV_COMPACT_DQP_DCT = 8;
constexpr unsigned AV_COMPACT_STAT_RATE_SL = 12;
constexpr unsigned AV_COMPACT_FL_MLID = 13;
constexpr unsigned AV_COMPACT_RLID = 14;

/* mlx5_wqe_av (full DC address vector) */
constexpr unsigned AV_FULL_BYTES = 48;
constexpr unsigned AV_FULL_DC_KEY = 0;
constexpr unsigned AV_FULL_DQP_DCT = 8;
constexpr unsigned AV_FULL_STAT_RATE_SL = 12;
constexpr unsigned AV_FULL_FL_MLID = 13;
constexpr unsigned AV_FULL_RLID = 14;
constexpr unsigned AV_FULL_RMAC = 20;
constexpr unsigned AV_FULL_TCLASS = 26;
constexpr unsigned AV_FULL_HOP_LIMIT = 27;
constexpr unsigned AV_FULL_GRH_GID_FL = 28;
constexpr unsigned AV_FULL_RGID = 32;

/* Send opcodes (the control segment's low byte). */
constexpr unsigned OPCODE_NOP = 0x0u;
constexpr unsigned OPCODE_RDMA_WRITE = 0x8u;
constexpr unsigned OPCODE_RDMA_WRITE_IMM = 0x9u;
constexpr unsigned OPCODE_RDMA_READ = 0x10u;
constexpr unsigned OPCODE_ATOMIC_CS = 0x11u;
constexpr unsigned OPCODE_ATOMIC_FA = 0x12u;
constexpr unsigned OPCODE_ATOMIC_MASKED_CS = 0x14u;
constexpr unsigned OPCODE_ATOMIC_MASKED_FA = 0x15u;
constexpr unsigned OPCODE_DUMP = 0x23u;
/* Opcode modifiers of masked atomics. */
constexpr unsigned OPMOD_ATOMIC_4 = 0x8u;
constexpr unsigned OPMOD_ATOMIC_8 = 0x9u;
/* The fm_ce_se byte. */
constexpr unsigned FM_CE_SE_CQ_UPDATE = 0x8u;
constexpr unsigned FM_CE_SE_CE_MASK = 0xcu;
constexpr unsigned FM_CE_SE_SOLICITED = 0x2u;
constexpr unsigned FM_CE_SE_FENCE_SHIFT = 0x5u;
constexpr unsigned FM_CE_SE_FENCE_NONE = 0x0u;
constexpr unsigned FM_CE_SE_FENCE_INITIATOR_SMALL = 0x20u;
constexpr unsigned FM_CE_SE_FENCE_FENCE = 0x40u;
constexpr unsigned FM_CE_SE_FENCE_STRONG_ORDERING = 0x60u;
constexpr unsigned FM_CE_SE_FENCE_SMALL_AND_FENCE = 0x80u;
constexpr unsigned FM_CE_SE_RESERVED_BITS = 0x11u;

/* DS (octowords) of the fixed shapes, from the builders' FixedShape::DS. */
constexpr unsigned DS_RC_WRITE_SGE = 0x3u;
constexpr unsigned DS_DCC_WRITE_SGE = 0x4u;
constexpr unsigned DS_DCF_WRITE_SGE = 0x6u;
constexpr unsigned DS_RC_READ_SGE = 0x3u;
constexpr unsigned DS_DCC_READ_SGE = 0x4u;
constexpr unsigned DS_DCF_READ_SGE = 0x6u;
constexpr unsigned DS_RC_ATOMIC_1 = 0x4u;
constexpr unsigned DS_DCC_ATOMIC_1 = 0x5u;
constexpr unsigned DS_DCF_ATOMIC_1 = 0x7u;
constexpr unsigned DS_RC_ATOMIC_2 = 0x5u;
constexpr unsigned DS_DCC_ATOMIC_2 = 0x6u;
constexpr unsigned DS_DCF_ATOMIC_2 = 0x8u;
constexpr unsigned DS_NOP = 0x1u;
constexpr unsigned DS_DUMP = 0x2u;

/* mlx5_cqe64 */
constexpr unsigned CQE_BYTES = 64;
constexpr unsigned CQE_WQE_ID = 2;
constexpr unsigned CQE_SRQN_UIDX = 32;
constexpr unsigned CQE_IMM_INVAL_PKEY = 36;
constexpr unsigned CQE_BYTE_CNT = 44;
constexpr unsigned CQE_TIMESTAMP = 48;
constexpr unsigned CQE_SOP_DROP_QPN = 56;
constexpr unsigned CQE_WQE_COUNTER = 60;
constexpr unsigned CQE_SIGNATURE = 62;
constexpr unsigned CQE_OP_OWN = 63;

/* mlx5_err_cqe */
constexpr unsigned ERR_CQE_BYTES = 64;
constexpr unsigned ERR_CQE_SRQN = 32;
constexpr unsigned ERR_CQE_HW_ERR_SYND = 52;
constexpr unsigned ERR_CQE_HW_SYND_TYPE = 53;
constexpr unsigned ERR_CQE_VENDOR_ERR_SYND = 54;
constexpr unsigned ERR_CQE_SYNDROME = 55;
constexpr unsigned ERR_CQE_S_WQE_OPCODE_QPN = 56;
constexpr unsigned ERR_CQE_WQE_COUNTER = 60;
constexpr unsigned ERR_CQE_OP_OWN = 63;

/* CQE opcodes (op_own >> 4). */
constexpr unsigned CQE_OPCODE_REQ = 0x0u;
constexpr unsigned CQE_OPCODE_RESP_WR_IMM = 0x1u;
constexpr unsigned CQE_OPCODE_RESP_SEND = 0x2u;
constexpr unsigned CQE_OPCODE_RESP_SEND_IMM = 0x3u;
constexpr unsigned CQE_OPCODE_RESP_SEND_INV = 0x4u;
constexpr unsigned CQE_OPCODE_RESIZE_CQ = 0x5u;
constexpr unsigned CQE_OPCODE_NO_PACKET = 0x6u;
constexpr unsigned CQE_OPCODE_SIG_ERR = 0xcu;
constexpr unsigned CQE_OPCODE_REQ_ERR = 0xdu;
constexpr unsigned CQE_OPCODE_RESP_ERR = 0xeu;
constexpr unsigned CQE_OPCODE_INVALID = 0xfu;
/* Error CQE syndromes. */
constexpr unsigned SYNDROME_LOCAL_LENGTH = 0x1u;
constexpr unsigned SYNDROME_LOCAL_QP_OPERATION = 0x2u;
constexpr unsigned SYNDROME_LOCAL_PROTECTION = 0x4u;
constexpr unsigned SYNDROME_WORK_REQUEST_FLUSHED = 0x5u;
constexpr unsigned SYNDROME_MEMORY_WINDOW_BIND = 0x6u;
constexpr unsigned SYNDROME_BAD_RESPONSE = 0x10u;
constexpr unsigned SYNDROME_LOCAL_ACCESS = 0x11u;
constexpr unsigned SYNDROME_REMOTE_INVALID_REQUEST = 0x12u;
constexpr unsigned SYNDROME_REMOTE_ACCESS = 0x13u;
constexpr unsigned SYNDROME_REMOTE_OPERATION = 0x14u;
constexpr unsigned SYNDROME_TRANSPORT_RETRY_EXCEEDED = 0x15u;
constexpr unsigned SYNDROME_RNR_RETRY_EXCEEDED = 0x16u;
constexpr unsigned SYNDROME_REMOTE_ABORTED = 0x22u;

/* Ordering scopes (ibgda::order::ScopeKind) and the PTX each must become. */
constexpr unsigned SCOPE_UNORDERED = 0u; /* dbrec: st.relaxed.sys.global.b32; db: st.mmio.relaxed.sys.global.b64; cq: ld.volatile.global.b64 */
constexpr unsigned SCOPE_GPU_FENCE = 1u; /* dbrec: st.relaxed.sys.global.b32; fence.release.gpu; db: st.mmio.relaxed.sys.global.b64; cq: ld.relaxed.sys.global.b64; fence.acquire.gpu */
constexpr unsigned SCOPE_GPU_FENCED_DBREC = 2u; /* fence.release.gpu; dbrec: st.relaxed.sys.global.b32; fence.release.gpu; db: st.mmio.relaxed.sys.global.b64; cq: ld.relaxed.sys.global.b64; fence.acquire.gpu */
constexpr unsigned SCOPE_GPU_RELEASE_STORE = 3u; /* dbrec: st.release.gpu.global.b32; db: st.release.gpu.global.b64; cq: ld.acquire.gpu.global.b64 */
constexpr unsigned SCOPE_THREAD_FENCE = 4u; /* membar.gl; dbrec: st.volatile.global.b32; membar.gl; db: st.mmio.relaxed.sys.global.b64; cq: ld.volatile.global.b64; membar.gl */
constexpr unsigned SCOPE_SYSTEM_RELEASE_STORE = 5u; /* dbrec: st.release.sys.global.b32; db: st.release.sys.global.b64; cq: ld.acquire.sys.global.b64 */
constexpr unsigned SCOPE_SYSTEM_FENCE = 6u; /* membar.sys; dbrec: st.volatile.global.b32; membar.sys; db: st.mmio.relaxed.sys.global.b64; cq: ld.volatile.global.b64; membar.sys */
constexpr unsigned SCOPE_HOST_BARRIER = 7u; /* host only */

/* WQE shapes and transport forms of WqeRequest (ibgda_kernels::request). */
constexpr unsigned SHAPE_WRITE = 0u;
constexpr unsigned SHAPE_WRITE_IMM = 1u;
constexpr unsigned SHAPE_WRITE_INLINE = 2u;
constexpr unsigned SHAPE_READ = 3u;
constexpr unsigned SHAPE_COMPARE_SWAP = 4u;
constexpr unsigned SHAPE_FETCH_ADD = 5u;
constexpr unsigned SHAPE_MASKED_COMPARE_SWAP_4 = 6u;
constexpr unsigned SHAPE_MASKED_COMPARE_SWAP_8 = 7u;
constexpr unsigned SHAPE_MASKED_FETCH_ADD_4 = 8u;
constexpr unsigned SHAPE_MASKED_FETCH_ADD_8 = 9u;
constexpr unsigned SHAPE_NOP = 10u;
constexpr unsigned SHAPE_DUMP = 11u;
constexpr unsigned TRANSPORT_RC = 0u;
constexpr unsigned TRANSPORT_DC_COMPACT = 1u;
constexpr unsigned TRANSPORT_DC_FULL = 2u;
constexpr unsigned REQUEST_INLINE_MAX = 0x80u;

} /* namespace layout */

/* ibgda::queue::DeviceQueueDescriptor: a queue pair as a kernel sees it (by value) */
struct alignas(8) DeviceQueueDescriptor {
    unsigned long long sq_ring;
    unsigned long long sq_dbrec;
    unsigned long long doorbell;
    unsigned long long cq_ring;
    unsigned long long cq_dbrec;
    unsigned long long state;
    unsigned int qpn;
    unsigned int log_sq_wqebbs;
    unsigned int log_cq_entries;
    unsigned int max_inline;
    unsigned int cq_mode;
    unsigned int transport;
    unsigned int scope;
    unsigned int signal_interval;
};
static_assert(sizeof(DeviceQueueDescriptor) == 80, "DeviceQueueDescriptor: size");
static_assert(alignof(DeviceQueueDescriptor) == 8, "DeviceQueueDescriptor: alignment");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, sq_ring) == 0, "DeviceQueueDescriptor.sq_ring: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->sq_ring) == 8, "DeviceQueueDescriptor.sq_ring: size");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, sq_dbrec) == 8, "DeviceQueueDescriptor.sq_dbrec: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->sq_dbrec) == 8, "DeviceQueueDescriptor.sq_dbrec: size");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, doorbell) == 16, "DeviceQueueDescriptor.doorbell: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->doorbell) == 8, "DeviceQueueDescriptor.doorbell: size");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, cq_ring) == 24, "DeviceQueueDescriptor.cq_ring: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->cq_ring) == 8, "DeviceQueueDescriptor.cq_ring: size");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, cq_dbrec) == 32, "DeviceQueueDescriptor.cq_dbrec: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->cq_dbrec) == 8, "DeviceQueueDescriptor.cq_dbrec: size");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, state) == 40, "DeviceQueueDescriptor.state: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->state) == 8, "DeviceQueueDescriptor.state: size");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, qpn) == 48, "DeviceQueueDescriptor.qpn: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->qpn) == 4, "DeviceQueueDescriptor.qpn: size");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, log_sq_wqebbs) == 52, "DeviceQueueDescriptor.log_sq_wqebbs: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->log_sq_wqebbs) == 4, "DeviceQueueDescriptor.log_sq_wqebbs: size");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, log_cq_entries) == 56, "DeviceQueueDescriptor.log_cq_entries: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->log_cq_entries) == 4, "DeviceQueueDescriptor.log_cq_entries: size");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, max_inline) == 60, "DeviceQueueDescriptor.max_inline: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->max_inline) == 4, "DeviceQueueDescriptor.max_inline: size");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, cq_mode) == 64, "DeviceQueueDescriptor.cq_mode: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->cq_mode) == 4, "DeviceQueueDescriptor.cq_mode: size");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, transport) == 68, "DeviceQueueDescriptor.transport: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->transport) == 4, "DeviceQueueDescriptor.transport: size");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, scope) == 72, "DeviceQueueDescriptor.scope: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->scope) == 4, "DeviceQueueDescriptor.scope: size");
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, signal_interval) == 76, "DeviceQueueDescriptor.signal_interval: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->signal_interval) == 4, "DeviceQueueDescriptor.signal_interval: size");

/* ibgda::queue::DeviceProducerState: free-running WQEBB and CQE counters */
struct alignas(64) DeviceProducerState {
    unsigned long long reserved;
    unsigned long long ready;
    unsigned long long posted;
    unsigned long long retired;
    unsigned long long cq_consumer;
    unsigned int doorbell_lock;
    unsigned int poll_lock;
    unsigned int collapsed_seen;
    unsigned int reserved_word;
    unsigned char _pad0[8];
};
static_assert(sizeof(DeviceProducerState) == 64, "DeviceProducerState: size");
static_assert(alignof(DeviceProducerState) == 64, "DeviceProducerState: alignment");
static_assert(IBGDA_OFFSETOF(DeviceProducerState, reserved) == 0, "DeviceProducerState.reserved: offset");
static_assert(sizeof(((DeviceProducerState*)0)->reserved) == 8, "DeviceProducerState.reserved: size");
static_assert(IBGDA_OFFSETOF(DeviceProducerState, ready) == 8, "DeviceProducerState.ready: offset");
static_assert(sizeof(((DeviceProducerState*)0)->ready) == 8, "DeviceProducerState.ready: size");
static_assert(IBGDA_OFFSETOF(DeviceProducerState, posted) == 16, "DeviceProducerState.posted: offset");
static_assert(sizeof(((DeviceProducerState*)0)->posted) == 8, "DeviceProducerState.posted: size");
static_assert(IBGDA_OFFSETOF(DeviceProducerState, retired) == 24, "DeviceProducerState.retired: offset");
static_assert(sizeof(((DeviceProducerState*)0)->retired) == 8, "DeviceProducerState.retired: size");
static_assert(IBGDA_OFFSETOF(DeviceProducerState, cq_consumer) == 32, "DeviceProducerState.cq_consumer: offset");
static_assert(sizeof(((DeviceProducerState*)0)->cq_consumer) == 8, "DeviceProducerState.cq_consumer: size");
static_assert(IBGDA_OFFSETOF(DeviceProducerState, doorbell_lock) == 40, "DeviceProducerState.doorbell_lock: offset");
static_assert(sizeof(((DeviceProducerState*)0)->doorbell_lock) == 4, "DeviceProducerState.doorbell_lock: size");
static_assert(IBGDA_OFFSETOF(DeviceProducerState, poll_lock) == 44, "DeviceProducerState.poll_lock: offset");
static_assert(sizeof(((DeviceProducerState*)0)->poll_lock) == 4, "DeviceProducerState.poll_lock: size");
static_assert(IBGDA_OFFSETOF(DeviceProducerState, collapsed_seen) == 48, "DeviceProducerState.collapsed_seen: offset");
static_assert(sizeof(((DeviceProducerState*)0)->collapsed_seen) == 4, "DeviceProducerState.collapsed_seen: size");
static_assert(IBGDA_OFFSETOF(DeviceProducerState, reserved_word) == 52, "DeviceProducerState.reserved_word: offset");
static_assert(sizeof(((DeviceProducerState*)0)->reserved_word) == 4, "DeviceProducerState.reserved_word: size");

/* ibgda_kernels::request::WqeRequest: one WQE for the device to build */
struct alignas(8) WqeRequest {
    unsigned int shape;
    unsigned int transport;
    unsigned int index;
    unsigned int qpn;
    unsigned int fm_ce_se;
    unsigned int imm;
    unsigned int rkey;
    unsigned int lkey;
    unsigned long long raddr;
    unsigned long long laddr;
    unsigned int len;
    unsigned int stream_id;
    unsigned long long op0;
    unsigned long long op1;
    unsigned long long op2;
    unsigned long long op3;
    unsigned char av[48];
    unsigned char inline_data[128];
};
static_assert(sizeof(WqeRequest) == 264, "WqeRequest: size");
static_assert(alignof(WqeRequest) == 8, "WqeRequest: alignment");
static_assert(IBGDA_OFFSETOF(WqeRequest, shape) == 0, "WqeRequest.shape: offset");
static_assert(sizeof(((WqeRequest*)0)->shape) == 4, "WqeRequest.shape: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, transport) == 4, "WqeRequest.transport: offset");
static_assert(sizeof(((WqeRequest*)0)->transport) == 4, "WqeRequest.transport: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, index) == 8, "WqeRequest.index: offset");
static_assert(sizeof(((WqeRequest*)0)->index) == 4, "WqeRequest.index: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, qpn) == 12, "WqeRequest.qpn: offset");
static_assert(sizeof(((WqeRequest*)0)->qpn) == 4, "WqeRequest.qpn: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, fm_ce_se) == 16, "WqeRequest.fm_ce_se: offset");
static_assert(sizeof(((WqeRequest*)0)->fm_ce_se) == 4, "WqeRequest.fm_ce_se: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, imm) == 20, "WqeRequest.imm: offset");
static_assert(sizeof(((WqeRequest*)0)->imm) == 4, "WqeRequest.imm: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, rkey) == 24, "WqeRequest.rkey: offset");
static_assert(sizeof(((WqeRequest*)0)->rkey) == 4, "WqeRequest.rkey: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, lkey) == 28, "WqeRequest.lkey: offset");
static_assert(sizeof(((WqeRequest*)0)->lkey) == 4, "WqeRequest.lkey: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, raddr) == 32, "WqeRequest.raddr: offset");
static_assert(sizeof(((WqeRequest*)0)->raddr) == 8, "WqeRequest.raddr: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, laddr) == 40, "WqeRequest.laddr: offset");
static_assert(sizeof(((WqeRequest*)0)->laddr) == 8, "WqeRequest.laddr: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, len) == 48, "WqeRequest.len: offset");
static_assert(sizeof(((WqeRequest*)0)->len) == 4, "WqeRequest.len: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, stream_id) == 52, "WqeRequest.stream_id: offset");
static_assert(sizeof(((WqeRequest*)0)->stream_id) == 4, "WqeRequest.stream_id: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, op0) == 56, "WqeRequest.op0: offset");
static_assert(sizeof(((WqeRequest*)0)->op0) == 8, "WqeRequest.op0: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, op1) == 64, "WqeRequest.op1: offset");
static_assert(sizeof(((WqeRequest*)0)->op1) == 8, "WqeRequest.op1: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, op2) == 72, "WqeRequest.op2: offset");
static_assert(sizeof(((WqeRequest*)0)->op2) == 8, "WqeRequest.op2: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, op3) == 80, "WqeRequest.op3: offset");
static_assert(sizeof(((WqeRequest*)0)->op3) == 8, "WqeRequest.op3: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, av) == 88, "WqeRequest.av: offset");
static_assert(sizeof(((WqeRequest*)0)->av) == 48, "WqeRequest.av: size");
static_assert(IBGDA_OFFSETOF(WqeRequest, inline_data) == 136, "WqeRequest.inline_data: offset");
static_assert(sizeof(((WqeRequest*)0)->inline_data) == 128, "WqeRequest.inline_data: size");

/* ibgda_kernels::request::SinkStats: what the doorbell sink counts */
struct alignas(8) SinkStats {
    unsigned long long doorbells;
    unsigned long long wqes;
    unsigned long long cqes;
    unsigned long long bad_wqes;
    unsigned long long bad_payloads;
    unsigned long long bad_doorbells;
    unsigned int stop;
    unsigned int queues;
    unsigned long long reserved[1];
};
static_assert(sizeof(SinkStats) == 64, "SinkStats: size");
static_assert(alignof(SinkStats) == 8, "SinkStats: alignment");
static_assert(IBGDA_OFFSETOF(SinkStats, doorbells) == 0, "SinkStats.doorbells: offset");
static_assert(sizeof(((SinkStats*)0)->doorbells) == 8, "SinkStats.doorbells: size");
static_assert(IBGDA_OFFSETOF(SinkStats, wqes) == 8, "SinkStats.wqes: offset");
static_assert(sizeof(((SinkStats*)0)->wqes) == 8, "SinkStats.wqes: size");
static_assert(IBGDA_OFFSETOF(SinkStats, cqes) == 16, "SinkStats.cqes: offset");
static_assert(sizeof(((SinkStats*)0)->cqes) == 8, "SinkStats.cqes: size");
static_assert(IBGDA_OFFSETOF(SinkStats, bad_wqes) == 24, "SinkStats.bad_wqes: offset");
static_assert(sizeof(((SinkStats*)0)->bad_wqes) == 8, "SinkStats.bad_wqes: size");
static_assert(IBGDA_OFFSETOF(SinkStats, bad_payloads) == 32, "SinkStats.bad_payloads: offset");
static_assert(sizeof(((SinkStats*)0)->bad_payloads) == 8, "SinkStats.bad_payloads: size");
static_assert(IBGDA_OFFSETOF(SinkStats, bad_doorbells) == 40, "SinkStats.bad_doorbells: offset");
static_assert(sizeof(((SinkStats*)0)->bad_doorbells) == 8, "SinkStats.bad_doorbells: size");
static_assert(IBGDA_OFFSETOF(SinkStats, stop) == 48, "SinkStats.stop: offset");
static_assert(sizeof(((SinkStats*)0)->stop) == 4, "SinkStats.stop: size");
static_assert(IBGDA_OFFSETOF(SinkStats, queues) == 52, "SinkStats.queues: offset");
static_assert(sizeof(((SinkStats*)0)->queues) == 4, "SinkStats.queues: size");
static_assert(IBGDA_OFFSETOF(SinkStats, reserved) == 56, "SinkStats.reserved: offset");
static_assert(sizeof(((SinkStats*)0)->reserved) == 8, "SinkStats.reserved: size");

} /* namespace ibgda */
