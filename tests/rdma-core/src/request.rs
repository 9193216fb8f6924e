//! Plain-data inputs and outputs of the oracle. These types compile with or
//! without the rdma-core build, so proptest strategies over them do too.

/// Which kind of send queue the fake QP is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable connected (`IBV_QPT_RC`): no address segment.
    Rc,
    /// DC initiator (`IBV_QPT_DRIVER` + `MLX5DV_DCTYPE_DCI`): every WQE carries a
    /// 48-byte address vector. Only [`PostPath::Extended`] can post on it.
    Dci,
}

/// How CQEs name their QP (the context's `cqe_version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CqeVersion {
    /// By QPN (`sop_drop_qpn` bits 23..0); a nonzero `srqn_uidx` on a responder
    /// CQE means "SRQ completion".
    V0,
    /// By user index (`srqn_uidx` bits 23..0); see `OracleQp::user_index`.
    V1,
}

/// The fake QP (and its CQ and context).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QpConfig {
    /// RC or DCI.
    pub transport: Transport,
    /// QP number, < 2^24.
    pub qpn: u32,
    /// Send ring size in 64-byte WQEBBs: a power of two, at most 65536. Also the
    /// provider's `sq.max_post` (how many WQEs one post may add).
    pub sq_wqebbs: u32,
    /// `qp->max_inline_data`: inline payloads longer than this fail with ENOMEM.
    pub max_inline_data: u32,
    /// `sq.max_gs`: most SGEs (or inline chunks) per WR, at most 64.
    pub max_sge: u32,
    /// `sq_sig_all`: every WQE gets `MLX5_WQE_CTRL_CQ_UPDATE`.
    pub sq_sig_all: bool,
    /// Receive queue size (only used to resolve responder CQEs), power of two.
    pub rq_wqes: u32,
    /// CQ size in 64-byte CQEs, a power of two in 2..=65536.
    pub cqes: u32,
    /// How CQEs name their QP.
    pub cqe_version: CqeVersion,
    /// BlueFlame half-register size in bytes (0 or a multiple of 64, at most 2048).
    /// 0 models a register without BlueFlame (bfreg 0, or NC UARs): always an 8-byte
    /// doorbell. rdma-core's usual value is 256.
    pub bf_buf_size: u32,
    /// The context's `prefer_bf` (env `MLX5_POST_SEND_PREFER_BF`): BlueFlame for
    /// non-inline single WQEs too.
    pub prefer_bf: bool,
    /// The context's `shut_up_bf` (env `MLX5_SHUT_UP_BF`): never BlueFlame.
    pub shut_up_bf: bool,
}

impl QpConfig {
    /// An RC QP: 64 WQEBBs, 256 B max inline, 16 SGEs, 64 CQEs, CQE version 0,
    /// 256-byte BlueFlame halves, no `sq_sig_all`.
    pub fn rc(qpn: u32) -> Self {
        QpConfig {
            transport: Transport::Rc,
            qpn,
            sq_wqebbs: 64,
            max_inline_data: 256,
            max_sge: 16,
            sq_sig_all: false,
            rq_wqes: 64,
            cqes: 64,
            cqe_version: CqeVersion::V0,
            bf_buf_size: 256,
            prefer_bf: false,
            shut_up_bf: false,
        }
    }

    /// A DCI with the same defaults as [`QpConfig::rc`].
    pub fn dci(qpn: u32) -> Self {
        QpConfig {
            transport: Transport::Dci,
            ..QpConfig::rc(qpn)
        }
    }
}

/// One scatter/gather element (`struct ibv_sge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sge {
    /// Local address (any value: the provider only encodes it).
    pub addr: u64,
    /// Length in bytes. Zero-length SGEs are skipped by both paths (no data segment).
    pub len: u32,
    /// Local key.
    pub lkey: u32,
}

/// The operation of a work request, with its remote operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `IBV_WR_RDMA_WRITE`.
    Write {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`.
    WriteImm {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// The immediate as a number: verbs gets `htobe32(imm)`, so the WQE's bytes
        /// 12..16 hold it big-endian.
        imm: u32,
    },
    /// `IBV_WR_RDMA_READ`.
    Read {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `IBV_WR_ATOMIC_CMP_AND_SWP` (8 bytes).
    CompareSwap {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Compare operand.
        compare: u64,
        /// Swap operand.
        swap: u64,
    },
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD` (8 bytes).
    FetchAdd {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Addend.
        add: u64,
    },
}

/// Where the data of a work request comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Payload {
    /// Data segments. Classic path: one `ibv_sge` each. Extended path:
    /// `ibv_wr_set_sge` for exactly one, `ibv_wr_set_sge_list` otherwise (also for none).
    Sges(Vec<Sge>),
    /// Inline data (`IBV_SEND_INLINE`), as chunks that are concatenated. Classic
    /// path: one SGE per chunk pointing at the bytes. Extended path:
    /// `ibv_wr_set_inline_data` for exactly one chunk, `ibv_wr_set_inline_data_list`
    /// otherwise.
    Inline(Vec<Vec<u8>>),
}

/// `IBV_SEND_*` flags (inline is chosen by [`Payload::Inline`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SendFlags {
    /// `IBV_SEND_SIGNALED`: `fm_ce_se |= MLX5_WQE_CTRL_CQ_UPDATE` (0x08).
    pub signaled: bool,
    /// `IBV_SEND_FENCE`: `fm_ce_se |= MLX5_WQE_CTRL_FENCE` (0x80).
    pub fence: bool,
    /// `IBV_SEND_SOLICITED`: `fm_ce_se |= MLX5_WQE_CTRL_SOLICITED` (0x02).
    pub solicited: bool,
}

impl SendFlags {
    /// Only `IBV_SEND_SIGNALED`.
    pub const SIGNALED: SendFlags = SendFlags {
        signaled: true,
        fence: false,
        solicited: false,
    };
}

/// GRH fields of an InfiniBand address handle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Grh {
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Flow label (20 bits are used).
    pub flow_label: u32,
    /// Source GID index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr` on port 1 of an InfiniBand link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IbAddress {
    /// Destination LID.
    pub dlid: u16,
    /// Service level (4 bits are used).
    pub sl: u8,
    /// Source path bits (7 bits are used).
    pub src_path_bits: u8,
    /// `enum ibv_rate` value; the provider maps it to the mlx5 rate code in
    /// `stat_rate_sl` bits 7..4 through its own table (0 = unlimited).
    pub static_rate: u8,
    /// `is_global` and the GRH.
    pub grh: Option<Grh>,
}

/// Where a DC work request's 48-byte address vector comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddressVector {
    /// Built by the provider's real `mlx5_create_ah` for an InfiniBand port.
    Ib(IbAddress),
    /// These bytes, stored as the AH's `av` (what a RoCE AH would hold: the real RoCE
    /// `mlx5_create_ah` needs sysfs and a kernel call). `dqp_dct` (bytes 8..12) is
    /// OR-ed with, and `dc_key` (bytes 0..8) replaced by, the target's values.
    Raw([u8; 48]),
}

/// The DC target of a work request (`mlx5dv_wr_set_dc_addr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DcAddress {
    /// Remote DCT number (24 bits).
    pub dctn: u32,
    /// DC access key.
    pub dc_key: u64,
    /// The address vector.
    pub av: AddressVector,
}

/// One work request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SendWr {
    /// `wr_id` (lands in `sq.wrid[slot]`, not in the WQE).
    pub wr_id: u64,
    /// Operation and remote operands.
    pub op: Op,
    /// Signaled / fence / solicited.
    pub flags: SendFlags,
    /// Data segments or inline data.
    pub payload: Payload,
    /// Required on a DCI, forbidden on RC.
    pub dc: Option<DcAddress>,
}

impl SendWr {
    /// A work request with one SGE, no flags, no DC target.
    pub fn new(wr_id: u64, op: Op, sge: Sge) -> Self {
        SendWr {
            wr_id,
            op,
            flags: SendFlags::default(),
            payload: Payload::Sges(vec![sge]),
            dc: None,
        }
    }
}

/// Which of the provider's two posting interfaces to drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PostPath {
    /// `ibv_post_send` (the provider's `mlx5_post_send`), one chain of `ibv_send_wr`.
    Classic,
    /// `ibv_wr_start`, one builder + setters per WR (`ibv_wr_rdma_write`, ...,
    /// `mlx5dv_wr_set_dc_addr`, `ibv_wr_set_sge(_list)`/`ibv_wr_set_inline_data(_list)`),
    /// `ibv_wr_complete`.
    Extended,
}

/// The provider refused (part of) a post.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PostFailure {
    /// The errno it returned (ENOMEM for "too many SGEs", "inline too long", "queue
    /// full"; EINVAL for a bad opcode).
    pub errno: i32,
    /// Classic path: the index of the WR in `*bad_wr`. The WRs before it were posted
    /// and rung. Extended path: `None`, and nothing was posted (rolled back).
    pub bad_wr: Option<usize>,
}

/// What one post left in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Posted {
    /// The whole send ring after the post, on a ring filled with the chosen prefill
    /// byte beforehand.
    pub ring: Vec<u8>,
    /// For each ring byte, whether the provider stored to it (found by posting twice,
    /// on rings filled with complementary bytes).
    pub written: Vec<bool>,
    /// `sq.cur_post` before the post (the producer counter in WQEBBs).
    pub cur_post_before: u32,
    /// `sq.cur_post` after the post.
    pub cur_post: u32,
    /// How many WQEs the doorbell covered (`sq.head` after, from 0).
    pub wqes_rung: u32,
    /// The send doorbell record (`dbrec[MLX5_SND_DBR]`, bytes 4..8 of the QP's
    /// doorbell record) as a number, read big-endian; `None` if not written.
    pub dbrec: Option<u32>,
    /// Whether the receive counter (`dbrec[MLX5_RCV_DBR]`) was written (it never is).
    pub rcv_dbrec_written: bool,
    /// The 8 bytes stored at the start of the BlueFlame register (the doorbell: bytes
    /// 0..8 of the control segment `post_send_db` was handed, normally the last
    /// posted WQE's); `None` if nothing was rung.
    pub doorbell: Option<[u8; 8]>,
    /// Some doorbell bytes are copies of ring bytes the provider never wrote. Happens
    /// when a classic post fails at WR k > 0: the provider rings for WRs 0..k but with
    /// the *failing* WR's control segment, whose bytes 0..8 are not written yet.
    pub stale_doorbell: bool,
    /// When the provider copied the whole WQE to the BlueFlame register instead of the
    /// 8-byte doorbell: the bytes copied (whole 64-byte blocks, following the ring
    /// wrap; ring bytes the provider never wrote are included as they were).
    pub bf_copy: Option<Vec<u8>>,
    /// `bf->offset` after the post: toggles between 0 and `bf_buf_size` per doorbell.
    pub bf_offset: u32,
    /// The provider's error, if any.
    pub failure: Option<PostFailure>,
}

impl Posted {
    /// Number of 64-byte WQEBBs in the ring.
    pub fn ring_wqebbs(&self) -> u32 {
        (self.ring.len() / 64) as u32
    }

    /// Ring offset of free-running WQEBB counter value `counter`.
    pub fn offset_of(&self, counter: u32) -> usize {
        (counter & (self.ring_wqebbs() - 1)) as usize * 64
    }

    /// The bytes of `wqebbs` WQEBBs starting at counter value `counter`, following the
    /// ring's wrap.
    pub fn wqebbs(&self, counter: u32, wqebbs: u32) -> Vec<u8> {
        (0..wqebbs)
            .flat_map(|i| &self.ring[self.offset_of(counter.wrapping_add(i))..][..64])
            .copied()
            .collect()
    }

    /// The written-byte mask of the same WQEBBs as [`Posted::wqebbs`].
    pub fn written_wqebbs(&self, counter: u32, wqebbs: u32) -> Vec<bool> {
        (0..wqebbs)
            .flat_map(|i| &self.written[self.offset_of(counter.wrapping_add(i))..][..64])
            .copied()
            .collect()
    }

    /// The ring as `Some(byte)` where the provider wrote and `None` where it did not:
    /// the form to compare an encoder's output with.
    pub fn ring_masked(&self) -> Vec<Option<u8>> {
        self.ring
            .iter()
            .zip(&self.written)
            .map(|(&b, &w)| w.then_some(b))
            .collect()
    }

    /// The WQEBBs the post advanced over: from `cur_post_before` to `cur_post`.
    pub fn posted_wqebbs(&self) -> u32 {
        self.cur_post.wrapping_sub(self.cur_post_before)
    }
}

/// One `struct ibv_wc` as `mlx5_poll_cq` left it. A field is `None` when the provider
/// did not store it (found by polling twice into arrays filled with complementary
/// bytes): e.g. `byte_len` of an RDMA WRITE completion, or `opcode` of an error
/// completion, is whatever the caller's array held before.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WorkCompletion {
    /// `wr_id`.
    pub wr_id: Option<u64>,
    /// `status` (`enum ibv_wc_status`, see [`crate::verbs`]).
    pub status: Option<u32>,
    /// `opcode` (`enum ibv_wc_opcode`, see [`crate::verbs`]).
    pub opcode: Option<u32>,
    /// `vendor_err` (the error CQE's `vendor_err_synd`).
    pub vendor_err: Option<u32>,
    /// `byte_len`.
    pub byte_len: Option<u32>,
    /// The `imm_data`/`invalidated_rkey` union read as a native `u32`: with
    /// `IBV_WC_WITH_IMM` it holds the CQE's big-endian bytes as stored (use
    /// [`WorkCompletion::immediate`]); with `IBV_WC_WITH_INV` a host-order rkey.
    pub imm_data: Option<u32>,
    /// `qp_num`.
    pub qp_num: Option<u32>,
    /// `src_qp`.
    pub src_qp: Option<u32>,
    /// `wc_flags` (`IBV_WC_*` flags, see [`crate::verbs`]).
    pub wc_flags: Option<u32>,
    /// `pkey_index`.
    pub pkey_index: Option<u16>,
    /// `slid`.
    pub slid: Option<u16>,
    /// `sl`.
    pub sl: Option<u8>,
    /// `dlid_path_bits`.
    pub dlid_path_bits: Option<u8>,
}

impl WorkCompletion {
    /// The immediate as the number the CQE's bytes 36..40 hold big-endian, when
    /// `wc_flags` has `IBV_WC_WITH_IMM`.
    pub fn immediate(&self) -> Option<u32> {
        let flags = self.wc_flags?;
        (flags & crate::verbs::WC_WITH_IMM != 0).then(|| u32::from_be(self.imm_data.unwrap_or(0)))
    }
}

/// What one `mlx5_poll_cq` call returned and left behind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Polled {
    /// Completions returned (`ret` entries), or on `poll_error` the entries the
    /// provider filled before the failing CQE (which it does not report).
    pub completions: Vec<WorkCompletion>,
    /// `mlx5_poll_cq` returned `CQ_POLL_ERR` (-2): a CQE named an unknown QP or SRQ,
    /// or another lookup failed. The failing CQE was consumed (`cons_index` counts it).
    pub poll_error: bool,
    /// The CQ's consumer index after the call.
    pub cons_index: u32,
    /// The CQ doorbell record's consumer-index word (`dbrec[MLX5_CQ_SET_CI]`) as a
    /// number read big-endian, if written (always: `htobe32(cons_index & 0xffffff)`).
    pub ci_dbrec: Option<u32>,
    /// Whether the arm word (`dbrec[MLX5_CQ_ARM_DB]`) was written (never by polling).
    pub arm_dbrec_written: bool,
    /// `sq.tail` after: `wqe_head[slot] + 1` of the last requester CQE (the table is
    /// `wqe_head[i] = i`), else 0.
    pub sq_tail: u32,
    /// `rq.tail` after: how many responder CQEs consumed a receive WQE.
    pub rq_tail: u32,
}

/// Why the oracle could not run a request (as opposed to the provider refusing it,
/// which is a [`PostFailure`] or [`Polled::poll_error`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OracleError {
    /// The QP configuration is out of range.
    Config(String),
    /// The classic `mlx5_post_send` has no DC case (it would emit neither the address
    /// vector nor the remote-address segment): post DC through [`PostPath::Extended`].
    ClassicDc,
    /// A WR on a DCI has no DC target, or one on RC has one.
    DcMismatch {
        /// Index of the offending WR.
        wr: usize,
    },
    /// More SGEs or inline chunks than the shim allows (64), or more WRs than 4096.
    TooLarge(String),
    /// More CQEs than the CQ holds.
    TooManyCqes,
    /// A CQE the provider would scatter into memory (opcode 0..=4 with inline-scatter
    /// bits 0x4/0x8 in `op_own`): it would `memcpy` to the addresses in WQEs.
    ScatterCqe {
        /// Index of the offending CQE.
        index: usize,
    },
    /// The shim refused the call (an errno); should not happen after the checks above.
    Shim(i32),
    /// The provider refused a post of `OracleQp::post_loop` (its errno,
    /// e.g. ENOMEM for a full ring).
    Provider(i32),
}

impl std::fmt::Display for OracleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OracleError::Config(why) => write!(f, "bad oracle QP config: {why}"),
            OracleError::ClassicDc => {
                write!(f, "the classic mlx5_post_send cannot post DC work requests")
            }
            OracleError::DcMismatch { wr } => write!(
                f,
                "WR {wr}: a DC target is required on a DCI and forbidden on RC"
            ),
            OracleError::TooLarge(why) => write!(f, "request too large for the oracle: {why}"),
            OracleError::TooManyCqes => write!(f, "more CQEs than the CQ holds"),
            OracleError::ScatterCqe { index } => {
                write!(
                    f,
                    "CQE {index} has inline-scatter bits the oracle cannot serve"
                )
            }
            OracleError::Shim(errno) => write!(f, "oracle shim refused the call: errno {errno}"),
            OracleError::Provider(errno) => {
                write!(f, "the provider refused the post: errno {errno}")
            }
        }
    }
}

impl std::error::Error for OracleError {}
