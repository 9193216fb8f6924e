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
constexpr unsigned CQE_SLID = 22;
constexpr unsigned CQE_FLAGS_RQPN = 24;
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

/* CUDA software NIC (cuda/softnic.cuh): access rights (ibgda::softnic::Access). */
constexpr unsigned NIC_ACCESS_LOCAL_WRITE = 0x1u;
constexpr unsigned NIC_ACCESS_REMOTE_WRITE = 0x2u;
constexpr unsigned NIC_ACCESS_REMOTE_READ = 0x4u;
constexpr unsigned NIC_ACCESS_REMOTE_ATOMIC = 0x8u;
/* Faults: syndrome and vendor syndrome (ibgda::softnic::Fault). */
constexpr unsigned FAULT_MALFORMED_WQE = 0x0201u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_FOREIGN_QPN = 0x0202u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_UNPUBLISHED = 0x0203u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_MESSAGE_TOO_LONG = 0x0110u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_LOCAL_KEY = 0x0420u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_LOCAL_BOUNDS = 0x0421u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_LOCAL_WRITE_DENIED = 0x0422u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_UNKNOWN_LID = 0x1550u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_UNKNOWN_DCT = 0x1551u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_WRONG_DC_KEY = 0x1552u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_RESPONDER_UNAVAILABLE = 0x1553u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_MISALIGNED_ATOMIC = 0x1230u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_REMOTE_KEY = 0x1340u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_REMOTE_BOUNDS = 0x1341u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_REMOTE_ACCESS_DENIED = 0x1342u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_RECEIVER_NOT_READY = 0x1660u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FAULT_RESPONDER_CQ_OVERRUN = 0x1470u; /* syndrome << 8 | vendor syndrome */
constexpr unsigned FLUSH_VENDOR_SYNDROME = 0x0u;
/* Table encodings (ibgda_kernels::softnic::tables). */
constexpr unsigned NIC_NONE = 0xffffffffu;
constexpr unsigned NIC_STATE_INIT = 0x0u;
constexpr unsigned NIC_STATE_READY = 0x1u;
constexpr unsigned NIC_STATE_ERROR = 0x2u;
constexpr unsigned NIC_ERROR_NONE = 0x0u;
constexpr unsigned NIC_ERROR_WQE = 0x1u;
constexpr unsigned NIC_ERROR_CQ = 0x2u;
constexpr unsigned NIC_TRANSPORT_RC = 0x0u;
constexpr unsigned NIC_TRANSPORT_DC = 0x1u;
constexpr unsigned NIC_WATCH_POLL_RECORD = 0x0u;
constexpr unsigned NIC_WATCH_DOORBELL_ONLY = 0x1u;
constexpr unsigned NIC_CQ_RING = 0x0u;
constexpr unsigned NIC_CQ_COLLAPSED = 0x1u;
constexpr unsigned NIC_WRITE_COPY_CHUNK = 0x1000u;
constexpr unsigned NIC_CQ_INDEX_MASK = 0xffffffu;

/* Device API (cuda/ibgda_api.cuh): status codes (ibgda_kernels::api::DeviceStatus). */
constexpr int STATUS_OK = 0x0;
constexpr int STATUS_STRAY_COMPLETION = -0x100;
constexpr int STATUS_WINDOW_BOUNDS = -0x201;
constexpr int STATUS_BAD_PEER = -0x202;
constexpr int STATUS_MISALIGNED = -0x203;
constexpr int STATUS_BAD_LENGTH = -0x204;
constexpr int STATUS_BAD_COUNTER = -0x205;
constexpr int STATUS_SPIN_TIMEOUT = -0x400;
constexpr int STATUS_DEADLINE = -0x402;
/* wait_signal comparisons (ibgda_kernels::api::SignalCmp). */
constexpr unsigned SIGNAL_CMP_EQ = 0x0u;
constexpr unsigned SIGNAL_CMP_NE = 0x1u;
constexpr unsigned SIGNAL_CMP_GE = 0x2u;
constexpr unsigned SIGNAL_CMP_GT = 0x3u;
constexpr unsigned SIGNAL_CMP_LE = 0x4u;
constexpr unsigned SIGNAL_CMP_LT = 0x5u;
/* Operations of ApiCall (ibgda_kernels::api::ApiOp). */
constexpr unsigned API_OP_PUT = 0x0u;
constexpr unsigned API_OP_PUT_VALUE = 0x1u;
constexpr unsigned API_OP_GET = 0x2u;
constexpr unsigned API_OP_ATOMIC_ADD = 0x3u;
constexpr unsigned API_OP_FETCH_ADD = 0x4u;
constexpr unsigned API_OP_COMPARE_SWAP = 0x5u;
constexpr unsigned API_OP_PUT_WITH_SIGNAL = 0x6u;
constexpr unsigned API_OP_SIGNAL = 0x7u;
constexpr unsigned PUT_INLINE_MAX = 0x1cu;
constexpr unsigned NO_COUNTER = 0xffffffffu;
constexpr unsigned MAX_SEGMENT_BYTES = 0x7fffffffu;

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
    unsigned long long wait_ns;
};
static_assert(sizeof(DeviceQueueDescriptor) == 88, "DeviceQueueDescriptor: size");
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
static_assert(IBGDA_OFFSETOF(DeviceQueueDescriptor, wait_ns) == 80, "DeviceQueueDescriptor.wait_ns: offset");
static_assert(sizeof(((DeviceQueueDescriptor*)0)->wait_ns) == 8, "DeviceQueueDescriptor.wait_ns: size");

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

/* ibgda_kernels::softnic::NicNode: one node of the fabric */
struct alignas(4) NicNode {
    unsigned int lid;
    unsigned int reserved;
};
static_assert(sizeof(NicNode) == 8, "NicNode: size");
static_assert(alignof(NicNode) == 4, "NicNode: alignment");
static_assert(IBGDA_OFFSETOF(NicNode, lid) == 0, "NicNode.lid: offset");
static_assert(sizeof(((NicNode*)0)->lid) == 4, "NicNode.lid: size");
static_assert(IBGDA_OFFSETOF(NicNode, reserved) == 4, "NicNode.reserved: offset");
static_assert(sizeof(((NicNode*)0)->reserved) == 4, "NicNode.reserved: size");

/* ibgda_kernels::softnic::NicRegion: a registered memory region */
struct alignas(8) NicRegion {
    unsigned long long start;
    unsigned long long base;
    unsigned long long len;
    unsigned int node;
    unsigned int lkey;
    unsigned int rkey;
    unsigned int access;
};
static_assert(sizeof(NicRegion) == 40, "NicRegion: size");
static_assert(alignof(NicRegion) == 8, "NicRegion: alignment");
static_assert(IBGDA_OFFSETOF(NicRegion, start) == 0, "NicRegion.start: offset");
static_assert(sizeof(((NicRegion*)0)->start) == 8, "NicRegion.start: size");
static_assert(IBGDA_OFFSETOF(NicRegion, base) == 8, "NicRegion.base: offset");
static_assert(sizeof(((NicRegion*)0)->base) == 8, "NicRegion.base: size");
static_assert(IBGDA_OFFSETOF(NicRegion, len) == 16, "NicRegion.len: offset");
static_assert(sizeof(((NicRegion*)0)->len) == 8, "NicRegion.len: size");
static_assert(IBGDA_OFFSETOF(NicRegion, node) == 24, "NicRegion.node: offset");
static_assert(sizeof(((NicRegion*)0)->node) == 4, "NicRegion.node: size");
static_assert(IBGDA_OFFSETOF(NicRegion, lkey) == 28, "NicRegion.lkey: offset");
static_assert(sizeof(((NicRegion*)0)->lkey) == 4, "NicRegion.lkey: size");
static_assert(IBGDA_OFFSETOF(NicRegion, rkey) == 32, "NicRegion.rkey: offset");
static_assert(sizeof(((NicRegion*)0)->rkey) == 4, "NicRegion.rkey: size");
static_assert(IBGDA_OFFSETOF(NicRegion, access) == 36, "NicRegion.access: offset");
static_assert(sizeof(((NicRegion*)0)->access) == 4, "NicRegion.access: size");

/* ibgda_kernels::softnic::NicCq: a completion queue */
struct alignas(8) NicCq {
    unsigned long long ring;
    unsigned long long dbrec;
    unsigned int entries;
    unsigned int log2_entries;
    unsigned int mode;
    unsigned int error;
    unsigned int producer;
    unsigned int reserved;
};
static_assert(sizeof(NicCq) == 40, "NicCq: size");
static_assert(alignof(NicCq) == 8, "NicCq: alignment");
static_assert(IBGDA_OFFSETOF(NicCq, ring) == 0, "NicCq.ring: offset");
static_assert(sizeof(((NicCq*)0)->ring) == 8, "NicCq.ring: size");
static_assert(IBGDA_OFFSETOF(NicCq, dbrec) == 8, "NicCq.dbrec: offset");
static_assert(sizeof(((NicCq*)0)->dbrec) == 8, "NicCq.dbrec: size");
static_assert(IBGDA_OFFSETOF(NicCq, entries) == 16, "NicCq.entries: offset");
static_assert(sizeof(((NicCq*)0)->entries) == 4, "NicCq.entries: size");
static_assert(IBGDA_OFFSETOF(NicCq, log2_entries) == 20, "NicCq.log2_entries: offset");
static_assert(sizeof(((NicCq*)0)->log2_entries) == 4, "NicCq.log2_entries: size");
static_assert(IBGDA_OFFSETOF(NicCq, mode) == 24, "NicCq.mode: offset");
static_assert(sizeof(((NicCq*)0)->mode) == 4, "NicCq.mode: size");
static_assert(IBGDA_OFFSETOF(NicCq, error) == 28, "NicCq.error: offset");
static_assert(sizeof(((NicCq*)0)->error) == 4, "NicCq.error: size");
static_assert(IBGDA_OFFSETOF(NicCq, producer) == 32, "NicCq.producer: offset");
static_assert(sizeof(((NicCq*)0)->producer) == 4, "NicCq.producer: size");
static_assert(IBGDA_OFFSETOF(NicCq, reserved) == 36, "NicCq.reserved: offset");
static_assert(sizeof(((NicCq*)0)->reserved) == 4, "NicCq.reserved: size");

/* ibgda_kernels::softnic::NicResponder: the receive side of an RC QP or a DCT */
struct alignas(8) NicResponder {
    unsigned long long dc_key;
    unsigned long long credits;
    unsigned int number;
    unsigned int node;
    unsigned int is_dct;
    unsigned int error;
    unsigned int received;
    unsigned int cq;
};
static_assert(sizeof(NicResponder) == 40, "NicResponder: size");
static_assert(alignof(NicResponder) == 8, "NicResponder: alignment");
static_assert(IBGDA_OFFSETOF(NicResponder, dc_key) == 0, "NicResponder.dc_key: offset");
static_assert(sizeof(((NicResponder*)0)->dc_key) == 8, "NicResponder.dc_key: size");
static_assert(IBGDA_OFFSETOF(NicResponder, credits) == 8, "NicResponder.credits: offset");
static_assert(sizeof(((NicResponder*)0)->credits) == 8, "NicResponder.credits: size");
static_assert(IBGDA_OFFSETOF(NicResponder, number) == 16, "NicResponder.number: offset");
static_assert(sizeof(((NicResponder*)0)->number) == 4, "NicResponder.number: size");
static_assert(IBGDA_OFFSETOF(NicResponder, node) == 20, "NicResponder.node: offset");
static_assert(sizeof(((NicResponder*)0)->node) == 4, "NicResponder.node: size");
static_assert(IBGDA_OFFSETOF(NicResponder, is_dct) == 24, "NicResponder.is_dct: offset");
static_assert(sizeof(((NicResponder*)0)->is_dct) == 4, "NicResponder.is_dct: size");
static_assert(IBGDA_OFFSETOF(NicResponder, error) == 28, "NicResponder.error: offset");
static_assert(sizeof(((NicResponder*)0)->error) == 4, "NicResponder.error: size");
static_assert(IBGDA_OFFSETOF(NicResponder, received) == 32, "NicResponder.received: offset");
static_assert(sizeof(((NicResponder*)0)->received) == 4, "NicResponder.received: size");
static_assert(IBGDA_OFFSETOF(NicResponder, cq) == 36, "NicResponder.cq: offset");
static_assert(sizeof(((NicResponder*)0)->cq) == 4, "NicResponder.cq: size");

/* ibgda_kernels::softnic::NicQueue: a send queue and the NIC's state for it */
struct alignas(8) NicQueue {
    unsigned long long ring;
    unsigned long long dbrec;
    unsigned long long doorbell;
    unsigned long long max_message_bytes;
    unsigned long long consumer;
    unsigned long long executed;
    unsigned long long last_doorbell;
    unsigned long long inject_at;
    unsigned long long drop_cqe_at;
    unsigned int qpn;
    unsigned int node;
    unsigned int transport;
    unsigned int log_wqebbs;
    unsigned int cq;
    unsigned int peer;
    unsigned int state;
    unsigned int watch;
    unsigned int armed;
    unsigned int armed_limit;
    unsigned int error_kind;
    unsigned int error_syndrome;
    unsigned int error_vendor;
    unsigned int error_detail;
    unsigned int inject_syndrome;
    unsigned int inject_vendor;
    unsigned int drop_cqe;
    unsigned int reserved;
};
static_assert(sizeof(NicQueue) == 144, "NicQueue: size");
static_assert(alignof(NicQueue) == 8, "NicQueue: alignment");
static_assert(IBGDA_OFFSETOF(NicQueue, ring) == 0, "NicQueue.ring: offset");
static_assert(sizeof(((NicQueue*)0)->ring) == 8, "NicQueue.ring: size");
static_assert(IBGDA_OFFSETOF(NicQueue, dbrec) == 8, "NicQueue.dbrec: offset");
static_assert(sizeof(((NicQueue*)0)->dbrec) == 8, "NicQueue.dbrec: size");
static_assert(IBGDA_OFFSETOF(NicQueue, doorbell) == 16, "NicQueue.doorbell: offset");
static_assert(sizeof(((NicQueue*)0)->doorbell) == 8, "NicQueue.doorbell: size");
static_assert(IBGDA_OFFSETOF(NicQueue, max_message_bytes) == 24, "NicQueue.max_message_bytes: offset");
static_assert(sizeof(((NicQueue*)0)->max_message_bytes) == 8, "NicQueue.max_message_bytes: size");
static_assert(IBGDA_OFFSETOF(NicQueue, consumer) == 32, "NicQueue.consumer: offset");
static_assert(sizeof(((NicQueue*)0)->consumer) == 8, "NicQueue.consumer: size");
static_assert(IBGDA_OFFSETOF(NicQueue, executed) == 40, "NicQueue.executed: offset");
static_assert(sizeof(((NicQueue*)0)->executed) == 8, "NicQueue.executed: size");
static_assert(IBGDA_OFFSETOF(NicQueue, last_doorbell) == 48, "NicQueue.last_doorbell: offset");
static_assert(sizeof(((NicQueue*)0)->last_doorbell) == 8, "NicQueue.last_doorbell: size");
static_assert(IBGDA_OFFSETOF(NicQueue, inject_at) == 56, "NicQueue.inject_at: offset");
static_assert(sizeof(((NicQueue*)0)->inject_at) == 8, "NicQueue.inject_at: size");
static_assert(IBGDA_OFFSETOF(NicQueue, drop_cqe_at) == 64, "NicQueue.drop_cqe_at: offset");
static_assert(sizeof(((NicQueue*)0)->drop_cqe_at) == 8, "NicQueue.drop_cqe_at: size");
static_assert(IBGDA_OFFSETOF(NicQueue, qpn) == 72, "NicQueue.qpn: offset");
static_assert(sizeof(((NicQueue*)0)->qpn) == 4, "NicQueue.qpn: size");
static_assert(IBGDA_OFFSETOF(NicQueue, node) == 76, "NicQueue.node: offset");
static_assert(sizeof(((NicQueue*)0)->node) == 4, "NicQueue.node: size");
static_assert(IBGDA_OFFSETOF(NicQueue, transport) == 80, "NicQueue.transport: offset");
static_assert(sizeof(((NicQueue*)0)->transport) == 4, "NicQueue.transport: size");
static_assert(IBGDA_OFFSETOF(NicQueue, log_wqebbs) == 84, "NicQueue.log_wqebbs: offset");
static_assert(sizeof(((NicQueue*)0)->log_wqebbs) == 4, "NicQueue.log_wqebbs: size");
static_assert(IBGDA_OFFSETOF(NicQueue, cq) == 88, "NicQueue.cq: offset");
static_assert(sizeof(((NicQueue*)0)->cq) == 4, "NicQueue.cq: size");
static_assert(IBGDA_OFFSETOF(NicQueue, peer) == 92, "NicQueue.peer: offset");
static_assert(sizeof(((NicQueue*)0)->peer) == 4, "NicQueue.peer: size");
static_assert(IBGDA_OFFSETOF(NicQueue, state) == 96, "NicQueue.state: offset");
static_assert(sizeof(((NicQueue*)0)->state) == 4, "NicQueue.state: size");
static_assert(IBGDA_OFFSETOF(NicQueue, watch) == 100, "NicQueue.watch: offset");
static_assert(sizeof(((NicQueue*)0)->watch) == 4, "NicQueue.watch: size");
static_assert(IBGDA_OFFSETOF(NicQueue, armed) == 104, "NicQueue.armed: offset");
static_assert(sizeof(((NicQueue*)0)->armed) == 4, "NicQueue.armed: size");
static_assert(IBGDA_OFFSETOF(NicQueue, armed_limit) == 108, "NicQueue.armed_limit: offset");
static_assert(sizeof(((NicQueue*)0)->armed_limit) == 4, "NicQueue.armed_limit: size");
static_assert(IBGDA_OFFSETOF(NicQueue, error_kind) == 112, "NicQueue.error_kind: offset");
static_assert(sizeof(((NicQueue*)0)->error_kind) == 4, "NicQueue.error_kind: size");
static_assert(IBGDA_OFFSETOF(NicQueue, error_syndrome) == 116, "NicQueue.error_syndrome: offset");
static_assert(sizeof(((NicQueue*)0)->error_syndrome) == 4, "NicQueue.error_syndrome: size");
static_assert(IBGDA_OFFSETOF(NicQueue, error_vendor) == 120, "NicQueue.error_vendor: offset");
static_assert(sizeof(((NicQueue*)0)->error_vendor) == 4, "NicQueue.error_vendor: size");
static_assert(IBGDA_OFFSETOF(NicQueue, error_detail) == 124, "NicQueue.error_detail: offset");
static_assert(sizeof(((NicQueue*)0)->error_detail) == 4, "NicQueue.error_detail: size");
static_assert(IBGDA_OFFSETOF(NicQueue, inject_syndrome) == 128, "NicQueue.inject_syndrome: offset");
static_assert(sizeof(((NicQueue*)0)->inject_syndrome) == 4, "NicQueue.inject_syndrome: size");
static_assert(IBGDA_OFFSETOF(NicQueue, inject_vendor) == 132, "NicQueue.inject_vendor: offset");
static_assert(sizeof(((NicQueue*)0)->inject_vendor) == 4, "NicQueue.inject_vendor: size");
static_assert(IBGDA_OFFSETOF(NicQueue, drop_cqe) == 136, "NicQueue.drop_cqe: offset");
static_assert(sizeof(((NicQueue*)0)->drop_cqe) == 4, "NicQueue.drop_cqe: size");
static_assert(IBGDA_OFFSETOF(NicQueue, reserved) == 140, "NicQueue.reserved: offset");
static_assert(sizeof(((NicQueue*)0)->reserved) == 4, "NicQueue.reserved: size");

/* ibgda_kernels::softnic::NicStats: an engine's totals */
struct alignas(8) NicStats {
    unsigned long long doorbells;
    unsigned long long foreign_doorbells;
    unsigned long long wqes_executed;
    unsigned long long wqes_failed;
    unsigned long long wqes_flushed;
    unsigned long long bytes_written;
    unsigned long long bytes_read;
    unsigned long long atomics;
    unsigned long long cqes_written;
    unsigned long long responder_cqes;
    unsigned long long cqes_dropped;
    unsigned long long async_events;
};
static_assert(sizeof(NicStats) == 96, "NicStats: size");
static_assert(alignof(NicStats) == 8, "NicStats: alignment");
static_assert(IBGDA_OFFSETOF(NicStats, doorbells) == 0, "NicStats.doorbells: offset");
static_assert(sizeof(((NicStats*)0)->doorbells) == 8, "NicStats.doorbells: size");
static_assert(IBGDA_OFFSETOF(NicStats, foreign_doorbells) == 8, "NicStats.foreign_doorbells: offset");
static_assert(sizeof(((NicStats*)0)->foreign_doorbells) == 8, "NicStats.foreign_doorbells: size");
static_assert(IBGDA_OFFSETOF(NicStats, wqes_executed) == 16, "NicStats.wqes_executed: offset");
static_assert(sizeof(((NicStats*)0)->wqes_executed) == 8, "NicStats.wqes_executed: size");
static_assert(IBGDA_OFFSETOF(NicStats, wqes_failed) == 24, "NicStats.wqes_failed: offset");
static_assert(sizeof(((NicStats*)0)->wqes_failed) == 8, "NicStats.wqes_failed: size");
static_assert(IBGDA_OFFSETOF(NicStats, wqes_flushed) == 32, "NicStats.wqes_flushed: offset");
static_assert(sizeof(((NicStats*)0)->wqes_flushed) == 8, "NicStats.wqes_flushed: size");
static_assert(IBGDA_OFFSETOF(NicStats, bytes_written) == 40, "NicStats.bytes_written: offset");
static_assert(sizeof(((NicStats*)0)->bytes_written) == 8, "NicStats.bytes_written: size");
static_assert(IBGDA_OFFSETOF(NicStats, bytes_read) == 48, "NicStats.bytes_read: offset");
static_assert(sizeof(((NicStats*)0)->bytes_read) == 8, "NicStats.bytes_read: size");
static_assert(IBGDA_OFFSETOF(NicStats, atomics) == 56, "NicStats.atomics: offset");
static_assert(sizeof(((NicStats*)0)->atomics) == 8, "NicStats.atomics: size");
static_assert(IBGDA_OFFSETOF(NicStats, cqes_written) == 64, "NicStats.cqes_written: offset");
static_assert(sizeof(((NicStats*)0)->cqes_written) == 8, "NicStats.cqes_written: size");
static_assert(IBGDA_OFFSETOF(NicStats, responder_cqes) == 72, "NicStats.responder_cqes: offset");
static_assert(sizeof(((NicStats*)0)->responder_cqes) == 8, "NicStats.responder_cqes: size");
static_assert(IBGDA_OFFSETOF(NicStats, cqes_dropped) == 80, "NicStats.cqes_dropped: offset");
static_assert(sizeof(((NicStats*)0)->cqes_dropped) == 8, "NicStats.cqes_dropped: size");
static_assert(IBGDA_OFFSETOF(NicStats, async_events) == 88, "NicStats.async_events: offset");
static_assert(sizeof(((NicStats*)0)->async_events) == 8, "NicStats.async_events: size");

/* ibgda_kernels::softnic::NicEngine: one engine's tables, scratch and totals */
struct alignas(8) NicEngine {
    unsigned long long nodes;
    unsigned long long regions;
    unsigned long long cqs;
    unsigned long long responders;
    unsigned long long queues;
    unsigned long long scratch;
    unsigned long long scratch_len;
    unsigned int n_nodes;
    unsigned int n_regions;
    unsigned int n_cqs;
    unsigned int n_responders;
    unsigned int n_queues;
    int status;
    unsigned long long steps;
    unsigned long long cycles;
    unsigned long long ns;
    NicStats stats;
};
static_assert(sizeof(NicEngine) == 200, "NicEngine: size");
static_assert(alignof(NicEngine) == 8, "NicEngine: alignment");
static_assert(IBGDA_OFFSETOF(NicEngine, nodes) == 0, "NicEngine.nodes: offset");
static_assert(sizeof(((NicEngine*)0)->nodes) == 8, "NicEngine.nodes: size");
static_assert(IBGDA_OFFSETOF(NicEngine, regions) == 8, "NicEngine.regions: offset");
static_assert(sizeof(((NicEngine*)0)->regions) == 8, "NicEngine.regions: size");
static_assert(IBGDA_OFFSETOF(NicEngine, cqs) == 16, "NicEngine.cqs: offset");
static_assert(sizeof(((NicEngine*)0)->cqs) == 8, "NicEngine.cqs: size");
static_assert(IBGDA_OFFSETOF(NicEngine, responders) == 24, "NicEngine.responders: offset");
static_assert(sizeof(((NicEngine*)0)->responders) == 8, "NicEngine.responders: size");
static_assert(IBGDA_OFFSETOF(NicEngine, queues) == 32, "NicEngine.queues: offset");
static_assert(sizeof(((NicEngine*)0)->queues) == 8, "NicEngine.queues: size");
static_assert(IBGDA_OFFSETOF(NicEngine, scratch) == 40, "NicEngine.scratch: offset");
static_assert(sizeof(((NicEngine*)0)->scratch) == 8, "NicEngine.scratch: size");
static_assert(IBGDA_OFFSETOF(NicEngine, scratch_len) == 48, "NicEngine.scratch_len: offset");
static_assert(sizeof(((NicEngine*)0)->scratch_len) == 8, "NicEngine.scratch_len: size");
static_assert(IBGDA_OFFSETOF(NicEngine, n_nodes) == 56, "NicEngine.n_nodes: offset");
static_assert(sizeof(((NicEngine*)0)->n_nodes) == 4, "NicEngine.n_nodes: size");
static_assert(IBGDA_OFFSETOF(NicEngine, n_regions) == 60, "NicEngine.n_regions: offset");
static_assert(sizeof(((NicEngine*)0)->n_regions) == 4, "NicEngine.n_regions: size");
static_assert(IBGDA_OFFSETOF(NicEngine, n_cqs) == 64, "NicEngine.n_cqs: offset");
static_assert(sizeof(((NicEngine*)0)->n_cqs) == 4, "NicEngine.n_cqs: size");
static_assert(IBGDA_OFFSETOF(NicEngine, n_responders) == 68, "NicEngine.n_responders: offset");
static_assert(sizeof(((NicEngine*)0)->n_responders) == 4, "NicEngine.n_responders: size");
static_assert(IBGDA_OFFSETOF(NicEngine, n_queues) == 72, "NicEngine.n_queues: offset");
static_assert(sizeof(((NicEngine*)0)->n_queues) == 4, "NicEngine.n_queues: size");
static_assert(IBGDA_OFFSETOF(NicEngine, status) == 76, "NicEngine.status: offset");
static_assert(sizeof(((NicEngine*)0)->status) == 4, "NicEngine.status: size");
static_assert(IBGDA_OFFSETOF(NicEngine, steps) == 80, "NicEngine.steps: offset");
static_assert(sizeof(((NicEngine*)0)->steps) == 8, "NicEngine.steps: size");
static_assert(IBGDA_OFFSETOF(NicEngine, cycles) == 88, "NicEngine.cycles: offset");
static_assert(sizeof(((NicEngine*)0)->cycles) == 8, "NicEngine.cycles: size");
static_assert(IBGDA_OFFSETOF(NicEngine, ns) == 96, "NicEngine.ns: offset");
static_assert(sizeof(((NicEngine*)0)->ns) == 8, "NicEngine.ns: size");
static_assert(IBGDA_OFFSETOF(NicEngine, stats) == 104, "NicEngine.stats: offset");
static_assert(sizeof(((NicEngine*)0)->stats) == 96, "NicEngine.stats: size");

/* ibgda::nic::DeviceWindowPeer: one peer's side of a window */
struct alignas(8) DeviceWindowPeer {
    unsigned long long base;
    unsigned long long len;
    unsigned int rkey;
    unsigned int reserved;
};
static_assert(sizeof(DeviceWindowPeer) == 24, "DeviceWindowPeer: size");
static_assert(alignof(DeviceWindowPeer) == 8, "DeviceWindowPeer: alignment");
static_assert(IBGDA_OFFSETOF(DeviceWindowPeer, base) == 0, "DeviceWindowPeer.base: offset");
static_assert(sizeof(((DeviceWindowPeer*)0)->base) == 8, "DeviceWindowPeer.base: size");
static_assert(IBGDA_OFFSETOF(DeviceWindowPeer, len) == 8, "DeviceWindowPeer.len: offset");
static_assert(sizeof(((DeviceWindowPeer*)0)->len) == 8, "DeviceWindowPeer.len: size");
static_assert(IBGDA_OFFSETOF(DeviceWindowPeer, rkey) == 16, "DeviceWindowPeer.rkey: offset");
static_assert(sizeof(((DeviceWindowPeer*)0)->rkey) == 4, "DeviceWindowPeer.rkey: size");
static_assert(IBGDA_OFFSETOF(DeviceWindowPeer, reserved) == 20, "DeviceWindowPeer.reserved: offset");
static_assert(sizeof(((DeviceWindowPeer*)0)->reserved) == 4, "DeviceWindowPeer.reserved: size");

/* ibgda::nic::DeviceWindow: a window as a kernel sees it (by value) */
struct alignas(8) DeviceWindow {
    unsigned long long peers;
    unsigned long long local_base;
    unsigned long long local_len;
    unsigned int n_peers;
    unsigned int lkey;
    unsigned int id;
    unsigned int reserved;
};
static_assert(sizeof(DeviceWindow) == 40, "DeviceWindow: size");
static_assert(alignof(DeviceWindow) == 8, "DeviceWindow: alignment");
static_assert(IBGDA_OFFSETOF(DeviceWindow, peers) == 0, "DeviceWindow.peers: offset");
static_assert(sizeof(((DeviceWindow*)0)->peers) == 8, "DeviceWindow.peers: size");
static_assert(IBGDA_OFFSETOF(DeviceWindow, local_base) == 8, "DeviceWindow.local_base: offset");
static_assert(sizeof(((DeviceWindow*)0)->local_base) == 8, "DeviceWindow.local_base: size");
static_assert(IBGDA_OFFSETOF(DeviceWindow, local_len) == 16, "DeviceWindow.local_len: offset");
static_assert(sizeof(((DeviceWindow*)0)->local_len) == 8, "DeviceWindow.local_len: size");
static_assert(IBGDA_OFFSETOF(DeviceWindow, n_peers) == 24, "DeviceWindow.n_peers: offset");
static_assert(sizeof(((DeviceWindow*)0)->n_peers) == 4, "DeviceWindow.n_peers: size");
static_assert(IBGDA_OFFSETOF(DeviceWindow, lkey) == 28, "DeviceWindow.lkey: offset");
static_assert(sizeof(((DeviceWindow*)0)->lkey) == 4, "DeviceWindow.lkey: size");
static_assert(IBGDA_OFFSETOF(DeviceWindow, id) == 32, "DeviceWindow.id: offset");
static_assert(sizeof(((DeviceWindow*)0)->id) == 4, "DeviceWindow.id: size");
static_assert(IBGDA_OFFSETOF(DeviceWindow, reserved) == 36, "DeviceWindow.reserved: offset");
static_assert(sizeof(((DeviceWindow*)0)->reserved) == 4, "DeviceWindow.reserved: size");

/* ibgda_kernels::api::DeviceComm: a communicator as a kernel sees it (by value) */
struct alignas(8) DeviceComm {
    unsigned long long queues;
    unsigned long long counters;
    unsigned long long counter_slots;
    unsigned long long scratch;
    unsigned long long wait_ns;
    unsigned int n_peers;
    unsigned int rank;
    unsigned int scope;
    unsigned int scratch_lkey;
    unsigned int n_counters;
    unsigned int counter_capacity;
    unsigned int inline_max;
    unsigned int doorbell_batch;
};
static_assert(sizeof(DeviceComm) == 72, "DeviceComm: size");
static_assert(alignof(DeviceComm) == 8, "DeviceComm: alignment");
static_assert(IBGDA_OFFSETOF(DeviceComm, queues) == 0, "DeviceComm.queues: offset");
static_assert(sizeof(((DeviceComm*)0)->queues) == 8, "DeviceComm.queues: size");
static_assert(IBGDA_OFFSETOF(DeviceComm, counters) == 8, "DeviceComm.counters: offset");
static_assert(sizeof(((DeviceComm*)0)->counters) == 8, "DeviceComm.counters: size");
static_assert(IBGDA_OFFSETOF(DeviceComm, counter_slots) == 16, "DeviceComm.counter_slots: offset");
static_assert(sizeof(((DeviceComm*)0)->counter_slots) == 8, "DeviceComm.counter_slots: size");
static_assert(IBGDA_OFFSETOF(DeviceComm, scratch) == 24, "DeviceComm.scratch: offset");
static_assert(sizeof(((DeviceComm*)0)->scratch) == 8, "DeviceComm.scratch: size");
static_assert(IBGDA_OFFSETOF(DeviceComm, wait_ns) == 32, "DeviceComm.wait_ns: offset");
static_assert(sizeof(((DeviceComm*)0)->wait_ns) == 8, "DeviceComm.wait_ns: size");
static_assert(IBGDA_OFFSETOF(DeviceComm, n_peers) == 40, "DeviceComm.n_peers: offset");
static_assert(sizeof(((DeviceComm*)0)->n_peers) == 4, "DeviceComm.n_peers: size");
static_assert(IBGDA_OFFSETOF(DeviceComm, rank) == 44, "DeviceComm.rank: offset");
static_assert(sizeof(((DeviceComm*)0)->rank) == 4, "DeviceComm.rank: size");
static_assert(IBGDA_OFFSETOF(DeviceComm, scope) == 48, "DeviceComm.scope: offset");
static_assert(sizeof(((DeviceComm*)0)->scope) == 4, "DeviceComm.scope: size");
static_assert(IBGDA_OFFSETOF(DeviceComm, scratch_lkey) == 52, "DeviceComm.scratch_lkey: offset");
static_assert(sizeof(((DeviceComm*)0)->scratch_lkey) == 4, "DeviceComm.scratch_lkey: size");
static_assert(IBGDA_OFFSETOF(DeviceComm, n_counters) == 56, "DeviceComm.n_counters: offset");
static_assert(sizeof(((DeviceComm*)0)->n_counters) == 4, "DeviceComm.n_counters: size");
static_assert(IBGDA_OFFSETOF(DeviceComm, counter_capacity) == 60, "DeviceComm.counter_capacity: offset");
static_assert(sizeof(((DeviceComm*)0)->counter_capacity) == 4, "DeviceComm.counter_capacity: size");
static_assert(IBGDA_OFFSETOF(DeviceComm, inline_max) == 64, "DeviceComm.inline_max: offset");
static_assert(sizeof(((DeviceComm*)0)->inline_max) == 4, "DeviceComm.inline_max: size");
static_assert(IBGDA_OFFSETOF(DeviceComm, doorbell_batch) == 68, "DeviceComm.doorbell_batch: offset");
static_assert(sizeof(((DeviceComm*)0)->doorbell_batch) == 4, "DeviceComm.doorbell_batch: size");

/* ibgda_kernels::api::DeviceCounter: a local completion counter */
struct alignas(16) DeviceCounter {
    unsigned long long attached;
    unsigned long long completed;
    unsigned int lock;
    unsigned int reserved[3];
};
static_assert(sizeof(DeviceCounter) == 32, "DeviceCounter: size");
static_assert(alignof(DeviceCounter) == 16, "DeviceCounter: alignment");
static_assert(IBGDA_OFFSETOF(DeviceCounter, attached) == 0, "DeviceCounter.attached: offset");
static_assert(sizeof(((DeviceCounter*)0)->attached) == 8, "DeviceCounter.attached: size");
static_assert(IBGDA_OFFSETOF(DeviceCounter, completed) == 8, "DeviceCounter.completed: offset");
static_assert(sizeof(((DeviceCounter*)0)->completed) == 8, "DeviceCounter.completed: size");
static_assert(IBGDA_OFFSETOF(DeviceCounter, lock) == 16, "DeviceCounter.lock: offset");
static_assert(sizeof(((DeviceCounter*)0)->lock) == 4, "DeviceCounter.lock: size");
static_assert(IBGDA_OFFSETOF(DeviceCounter, reserved) == 20, "DeviceCounter.reserved: offset");
static_assert(sizeof(((DeviceCounter*)0)->reserved) == 12, "DeviceCounter.reserved: size");

/* ibgda_kernels::api::DeviceCounterSlot: one attached operation's ticket */
struct alignas(16) DeviceCounterSlot {
    unsigned long long ticket;
    unsigned int peer;
    unsigned int seq;
};
static_assert(sizeof(DeviceCounterSlot) == 16, "DeviceCounterSlot: size");
static_assert(alignof(DeviceCounterSlot) == 16, "DeviceCounterSlot: alignment");
static_assert(IBGDA_OFFSETOF(DeviceCounterSlot, ticket) == 0, "DeviceCounterSlot.ticket: offset");
static_assert(sizeof(((DeviceCounterSlot*)0)->ticket) == 8, "DeviceCounterSlot.ticket: size");
static_assert(IBGDA_OFFSETOF(DeviceCounterSlot, peer) == 8, "DeviceCounterSlot.peer: offset");
static_assert(sizeof(((DeviceCounterSlot*)0)->peer) == 4, "DeviceCounterSlot.peer: size");
static_assert(IBGDA_OFFSETOF(DeviceCounterSlot, seq) == 12, "DeviceCounterSlot.seq: offset");
static_assert(sizeof(((DeviceCounterSlot*)0)->seq) == 4, "DeviceCounterSlot.seq: size");

/* ibgda_kernels::api::ApiCall: one device API call (the tests' records) */
struct alignas(8) ApiCall {
    unsigned int op;
    unsigned int peer;
    unsigned int dst_window;
    unsigned int src_window;
    unsigned int signal_window;
    unsigned int len;
    unsigned long long dst_offset;
    unsigned long long src_offset;
    unsigned long long signal_offset;
    unsigned long long value;
    unsigned long long compare;
    unsigned int counter;
    unsigned int reserved;
};
static_assert(sizeof(ApiCall) == 72, "ApiCall: size");
static_assert(alignof(ApiCall) == 8, "ApiCall: alignment");
static_assert(IBGDA_OFFSETOF(ApiCall, op) == 0, "ApiCall.op: offset");
static_assert(sizeof(((ApiCall*)0)->op) == 4, "ApiCall.op: size");
static_assert(IBGDA_OFFSETOF(ApiCall, peer) == 4, "ApiCall.peer: offset");
static_assert(sizeof(((ApiCall*)0)->peer) == 4, "ApiCall.peer: size");
static_assert(IBGDA_OFFSETOF(ApiCall, dst_window) == 8, "ApiCall.dst_window: offset");
static_assert(sizeof(((ApiCall*)0)->dst_window) == 4, "ApiCall.dst_window: size");
static_assert(IBGDA_OFFSETOF(ApiCall, src_window) == 12, "ApiCall.src_window: offset");
static_assert(sizeof(((ApiCall*)0)->src_window) == 4, "ApiCall.src_window: size");
static_assert(IBGDA_OFFSETOF(ApiCall, signal_window) == 16, "ApiCall.signal_window: offset");
static_assert(sizeof(((ApiCall*)0)->signal_window) == 4, "ApiCall.signal_window: size");
static_assert(IBGDA_OFFSETOF(ApiCall, len) == 20, "ApiCall.len: offset");
static_assert(sizeof(((ApiCall*)0)->len) == 4, "ApiCall.len: size");
static_assert(IBGDA_OFFSETOF(ApiCall, dst_offset) == 24, "ApiCall.dst_offset: offset");
static_assert(sizeof(((ApiCall*)0)->dst_offset) == 8, "ApiCall.dst_offset: size");
static_assert(IBGDA_OFFSETOF(ApiCall, src_offset) == 32, "ApiCall.src_offset: offset");
static_assert(sizeof(((ApiCall*)0)->src_offset) == 8, "ApiCall.src_offset: size");
static_assert(IBGDA_OFFSETOF(ApiCall, signal_offset) == 40, "ApiCall.signal_offset: offset");
static_assert(sizeof(((ApiCall*)0)->signal_offset) == 8, "ApiCall.signal_offset: size");
static_assert(IBGDA_OFFSETOF(ApiCall, value) == 48, "ApiCall.value: offset");
static_assert(sizeof(((ApiCall*)0)->value) == 8, "ApiCall.value: size");
static_assert(IBGDA_OFFSETOF(ApiCall, compare) == 56, "ApiCall.compare: offset");
static_assert(sizeof(((ApiCall*)0)->compare) == 8, "ApiCall.compare: size");
static_assert(IBGDA_OFFSETOF(ApiCall, counter) == 64, "ApiCall.counter: offset");
static_assert(sizeof(((ApiCall*)0)->counter) == 4, "ApiCall.counter: size");
static_assert(IBGDA_OFFSETOF(ApiCall, reserved) == 68, "ApiCall.reserved: offset");
static_assert(sizeof(((ApiCall*)0)->reserved) == 4, "ApiCall.reserved: size");

} /* namespace ibgda */
