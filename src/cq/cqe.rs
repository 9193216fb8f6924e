//! 64-byte completion queue entries: the zerocopy layouts of `mlx5_cqe64` and
//! `mlx5_err_cqe`, their opcodes and syndromes, and a checked parse into a typed completion.
//!
//! CQEs are written by the NIC (or the software NIC): nothing in them is trusted. Parsing
//! goes through zerocopy's checked conversions and every field is validated before use.

use core::fmt;
use core::mem::{offset_of, size_of};

use static_assertions::const_assert_eq;
use zerocopy::byteorder::big_endian::{U16, U32, U64};
use zerocopy::{transmute_ref, FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::wqe::Opcode;

/// Bytes in a CQE (this crate uses 64-byte CQEs only).
pub const CQE_BYTES: usize = 64;

/// A 64-byte CQE (`mlx5_cqe64`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
#[repr(C)]
pub struct Cqe64 {
    /// Reserved (or tag-matching fields).
    pub rsvd0: [u8; 2],
    /// Striding receive queue WQE id.
    pub wqe_id: U16,
    /// Reserved.
    pub rsvd4: [u8; 13],
    /// Multi-path information.
    pub ml_path: u8,
    /// Reserved.
    pub rsvd20: [u8; 4],
    /// Source LID (responder).
    pub slid: U16,
    /// Flags and remote QPN (responder).
    pub flags_rqpn: U32,
    /// Header/IP extension flags.
    pub hds_ip_ext: u8,
    /// L4 header type and more.
    pub l4_hdr_type_etc: u8,
    /// VLAN information.
    pub vlan_info: U16,
    /// SRQ number or user index (bits 23:0).
    pub srqn_uidx: U32,
    /// Immediate, invalidated rkey or pkey (responder).
    pub imm_inval_pkey: U32,
    /// Application id.
    pub app: u8,
    /// Application opcode.
    pub app_op: u8,
    /// Application information.
    pub app_info: U16,
    /// Byte count (READ completions, receives).
    pub byte_cnt: U32,
    /// Timestamp.
    pub timestamp: U64,
    /// Send opcode (bits 31:24, requester) and QPN (bits 23:0).
    pub sop_drop_qpn: U32,
    /// Index of the completed WQE's first basic block (requester).
    pub wqe_counter: U16,
    /// Signature.
    pub signature: u8,
    /// CQE opcode (bits 7:4), format (3:2), solicited (1), owner (0).
    pub op_own: u8,
}

/// An error CQE (`mlx5_err_cqe`, with the hardware syndrome bytes of its extended form).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
#[repr(C)]
pub struct ErrorCqe64 {
    /// Reserved.
    pub rsvd0: [u8; 32],
    /// SRQ number or user index.
    pub srqn: U32,
    /// Reserved.
    pub rsvd1: [u8; 16],
    /// Hardware error syndrome.
    pub hw_err_synd: u8,
    /// Hardware syndrome type.
    pub hw_synd_type: u8,
    /// Vendor error syndrome.
    pub vendor_err_synd: u8,
    /// Error syndrome.
    pub syndrome: u8,
    /// Send opcode (bits 31:24) and QPN (bits 23:0).
    pub s_wqe_opcode_qpn: U32,
    /// Index of the failed WQE's first basic block.
    pub wqe_counter: U16,
    /// Signature.
    pub signature: u8,
    /// CQE opcode (bits 7:4) and owner (bit 0).
    pub op_own: u8,
}

const_assert_eq!(size_of::<Cqe64>(), CQE_BYTES);
const_assert_eq!(size_of::<ErrorCqe64>(), CQE_BYTES);
const_assert_eq!(offset_of!(Cqe64, wqe_id), 2);
const_assert_eq!(offset_of!(Cqe64, ml_path), 17);
const_assert_eq!(offset_of!(Cqe64, slid), 22);
const_assert_eq!(offset_of!(Cqe64, flags_rqpn), 24);
const_assert_eq!(offset_of!(Cqe64, hds_ip_ext), 28);
const_assert_eq!(offset_of!(Cqe64, l4_hdr_type_etc), 29);
const_assert_eq!(offset_of!(Cqe64, vlan_info), 30);
const_assert_eq!(offset_of!(Cqe64, srqn_uidx), 32);
const_assert_eq!(offset_of!(Cqe64, imm_inval_pkey), 36);
const_assert_eq!(offset_of!(Cqe64, app), 40);
const_assert_eq!(offset_of!(Cqe64, app_op), 41);
const_assert_eq!(offset_of!(Cqe64, app_info), 42);
const_assert_eq!(offset_of!(Cqe64, byte_cnt), 44);
const_assert_eq!(offset_of!(Cqe64, timestamp), 48);
const_assert_eq!(offset_of!(Cqe64, sop_drop_qpn), 56);
const_assert_eq!(offset_of!(Cqe64, wqe_counter), 60);
const_assert_eq!(offset_of!(Cqe64, signature), 62);
const_assert_eq!(offset_of!(Cqe64, op_own), 63);
const_assert_eq!(offset_of!(ErrorCqe64, srqn), 32);
const_assert_eq!(offset_of!(ErrorCqe64, hw_err_synd), 52);
const_assert_eq!(offset_of!(ErrorCqe64, hw_synd_type), 53);
const_assert_eq!(offset_of!(ErrorCqe64, vendor_err_synd), 54);
const_assert_eq!(offset_of!(ErrorCqe64, syndrome), 55);
const_assert_eq!(offset_of!(ErrorCqe64, s_wqe_opcode_qpn), 56);
const_assert_eq!(offset_of!(ErrorCqe64, wqe_counter), 60);
const_assert_eq!(offset_of!(ErrorCqe64, op_own), 63);

/// The opcode of a CQE (bits 7:4 of `op_own`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CqeOpcode {
    /// Requester: a send WQE completed.
    Requester = 0,
    /// Responder: RDMA WRITE with immediate received.
    ResponderWriteImm = 1,
    /// Responder: SEND received.
    ResponderSend = 2,
    /// Responder: SEND with immediate received.
    ResponderSendImm = 3,
    /// Responder: SEND with invalidate received.
    ResponderSendInvalidate = 4,
    /// CQ resize marker.
    ResizeCq = 5,
    /// No packet (tag matching).
    NoPacket = 6,
    /// Signature error.
    SignatureError = 12,
    /// Requester error.
    RequesterError = 13,
    /// Responder error.
    ResponderError = 14,
    /// Invalid: the entry holds no completion (its initial state, owned by hardware).
    Invalid = 15,
}

impl CqeOpcode {
    /// The opcode for a 4-bit value, or `None` for the undefined values 7 to 11.
    pub const fn from_bits(bits: u8) -> Option<Self> {
        Some(match bits {
            0 => Self::Requester,
            1 => Self::ResponderWriteImm,
            2 => Self::ResponderSend,
            3 => Self::ResponderSendImm,
            4 => Self::ResponderSendInvalidate,
            5 => Self::ResizeCq,
            6 => Self::NoPacket,
            12 => Self::SignatureError,
            13 => Self::RequesterError,
            14 => Self::ResponderError,
            15 => Self::Invalid,
            _ => return None,
        })
    }
}

/// The error syndrome of an error CQE, with its meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Syndrome {
    /// A local length error: a gather/scatter list too short or long for the message, or
    /// a message over the QP's limit.
    LocalLength = 0x01,
    /// A local QP operation error: the WQE was malformed or invalid for the QP.
    LocalQpOperation = 0x02,
    /// A local protection error: an lkey that does not name a region covering the buffer
    /// with the needed access right.
    LocalProtection = 0x04,
    /// Flushed: the QP was in the error state when this WQE was processed.
    WorkRequestFlushed = 0x05,
    /// A memory window bind error.
    MemoryWindowBind = 0x06,
    /// A bad response from the responder (unexpected transport opcode).
    BadResponse = 0x10,
    /// A local access error on the responder side (e.g. a receive buffer too small).
    LocalAccess = 0x11,
    /// The responder found the request invalid (e.g. unsupported opcode, bad length).
    RemoteInvalidRequest = 0x12,
    /// Remote access error: bad rkey, out-of-bounds access or a missing remote access
    /// right at the responder.
    RemoteAccess = 0x13,
    /// The responder could not complete the operation.
    RemoteOperation = 0x14,
    /// Transport retries exhausted: the responder did not answer.
    TransportRetryExceeded = 0x15,
    /// Receiver-not-ready retries exhausted.
    RnrRetryExceeded = 0x16,
    /// The remote side aborted the operation.
    RemoteAborted = 0x22,
}

impl Syndrome {
    /// The syndrome for a byte, or `None` if mlx5 defines none with that value.
    pub const fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            0x01 => Self::LocalLength,
            0x02 => Self::LocalQpOperation,
            0x04 => Self::LocalProtection,
            0x05 => Self::WorkRequestFlushed,
            0x06 => Self::MemoryWindowBind,
            0x10 => Self::BadResponse,
            0x11 => Self::LocalAccess,
            0x12 => Self::RemoteInvalidRequest,
            0x13 => Self::RemoteAccess,
            0x14 => Self::RemoteOperation,
            0x15 => Self::TransportRetryExceeded,
            0x16 => Self::RnrRetryExceeded,
            0x22 => Self::RemoteAborted,
            _ => return None,
        })
    }

    /// The verbs status this syndrome reports (rdma-core's mapping).
    pub const fn status(self) -> CompletionStatus {
        match self {
            Self::LocalLength => CompletionStatus::LocalLengthError,
            Self::LocalQpOperation => CompletionStatus::LocalQpOperationError,
            Self::LocalProtection => CompletionStatus::LocalProtectionError,
            Self::WorkRequestFlushed => CompletionStatus::WorkRequestFlushError,
            Self::MemoryWindowBind => CompletionStatus::MemoryWindowBindError,
            Self::BadResponse => CompletionStatus::BadResponseError,
            Self::LocalAccess => CompletionStatus::LocalAccessError,
            Self::RemoteInvalidRequest => CompletionStatus::RemoteInvalidRequestError,
            Self::RemoteAccess => CompletionStatus::RemoteAccessError,
            Self::RemoteOperation => CompletionStatus::RemoteOperationError,
            Self::TransportRetryExceeded => CompletionStatus::RetryExceededError,
            Self::RnrRetryExceeded => CompletionStatus::RnrRetryExceededError,
            Self::RemoteAborted => CompletionStatus::RemoteAbortError,
        }
    }
}

impl fmt::Display for Syndrome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::LocalLength => "local length error",
            Self::LocalQpOperation => "local QP operation error",
            Self::LocalProtection => "local protection error",
            Self::WorkRequestFlushed => "work request flushed",
            Self::MemoryWindowBind => "memory window bind error",
            Self::BadResponse => "bad response",
            Self::LocalAccess => "local access error",
            Self::RemoteInvalidRequest => "remote invalid request",
            Self::RemoteAccess => "remote access error",
            Self::RemoteOperation => "remote operation error",
            Self::TransportRetryExceeded => "transport retry counter exceeded",
            Self::RnrRetryExceeded => "RNR retry counter exceeded",
            Self::RemoteAborted => "remote aborted",
        };
        write!(f, "{text} ({:#04x})", *self as u8)
    }
}

/// A completion status with the values of verbs' `ibv_wc_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
#[allow(missing_docs)]
pub enum CompletionStatus {
    Success = 0,
    LocalLengthError = 1,
    LocalQpOperationError = 2,
    LocalEecOperationError = 3,
    LocalProtectionError = 4,
    WorkRequestFlushError = 5,
    MemoryWindowBindError = 6,
    BadResponseError = 7,
    LocalAccessError = 8,
    RemoteInvalidRequestError = 9,
    RemoteAccessError = 10,
    RemoteOperationError = 11,
    RetryExceededError = 12,
    RnrRetryExceededError = 13,
    LocalRddViolationError = 14,
    RemoteInvalidRdRequest = 15,
    RemoteAbortError = 16,
    InvalidEecnError = 17,
    InvalidEecStateError = 18,
    FatalError = 19,
    ResponseTimeoutError = 20,
    GeneralError = 21,
}

/// A work-completion opcode with the values of verbs' `ibv_wc_opcode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
#[allow(missing_docs)]
pub enum WcOpcode {
    Send = 0,
    RdmaWrite = 1,
    RdmaRead = 2,
    CompareSwap = 3,
    FetchAdd = 4,
    BindMemoryWindow = 5,
    LocalInvalidate = 6,
    Tso = 7,
    Receive = 128,
    ReceiveRdmaWithImm = 129,
}

/// Why 64 bytes are not a completion this crate accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CqeError {
    /// The entry is invalid (opcode 15): it holds no completion.
    Empty,
    /// The CQE opcode is one mlx5 does not define.
    UnknownOpcode {
        /// The 4-bit value.
        opcode: u8,
    },
    /// A CQE kind this crate does not consume (resize, no-packet, signature error).
    Unsupported {
        /// The opcode.
        opcode: CqeOpcode,
    },
    /// The NIC scattered READ or atomic data into the CQE; queues are created with
    /// scatter-to-CQE disabled, so this is never expected.
    ScatterToCqe {
        /// The format bits.
        format: u8,
    },
    /// A compressed (mini-CQE) block; queues are created without CQE compression.
    Compressed,
}

impl fmt::Display for CqeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("the CQE is invalid (empty)"),
            Self::UnknownOpcode { opcode } => write!(f, "unknown CQE opcode {opcode}"),
            Self::Unsupported { opcode } => write!(f, "CQE kind {opcode:?} is not supported"),
            Self::ScatterToCqe { format } => {
                write!(f, "data scattered into the CQE (format {format})")
            }
            Self::Compressed => f.write_str("compressed CQE"),
        }
    }
}

impl std::error::Error for CqeError {}

/// A successful requester completion: a signaled send WQE (and every earlier one on its
/// queue) completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequesterCompletion {
    /// The queue pair.
    pub qpn: u32,
    /// The WQE index of the completed WQE's first basic block.
    pub wqe_counter: u16,
    /// The send opcode byte of the completed WQE.
    pub send_opcode: u8,
    /// Byte count (for READ: bytes read).
    pub byte_count: u32,
    /// User index (bits 23:0 of `srqn_uidx`).
    pub user_index: u32,
    /// Timestamp.
    pub timestamp: u64,
}

/// A successful responder completion (a receive consumed by SEND or WRITE_WITH_IMM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponderCompletion {
    /// Which kind.
    pub opcode: CqeOpcode,
    /// The queue pair.
    pub qpn: u32,
    /// The receive WQE counter.
    pub wqe_counter: u16,
    /// Bytes received.
    pub byte_count: u32,
    /// Immediate or invalidated rkey, as it is on the wire (big-endian decoded).
    pub imm: u32,
    /// Remote QPN (bits 23:0 of `flags_rqpn`).
    pub source_qpn: u32,
    /// Source LID.
    pub slid: u16,
    /// SRQ number or user index.
    pub srqn_uidx: u32,
    /// The packet carried a GRH (bits 29:28 of `flags_rqpn` nonzero).
    pub grh: bool,
}

/// A completion with error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorCompletion {
    /// Requester (13) or responder (14) error.
    pub requester: bool,
    /// The queue pair.
    pub qpn: u32,
    /// The WQE index of the failed WQE's first basic block.
    pub wqe_counter: u16,
    /// The syndrome byte.
    pub syndrome_byte: u8,
    /// The syndrome, if mlx5 defines the byte.
    pub syndrome: Option<Syndrome>,
    /// Vendor syndrome (0x93: an on-demand-paging fault).
    pub vendor_syndrome: u8,
    /// Hardware syndrome.
    pub hw_syndrome: u8,
    /// Hardware syndrome type.
    pub hw_syndrome_type: u8,
    /// The send opcode byte of the failed WQE (requester errors).
    pub send_opcode: u8,
}

impl ErrorCompletion {
    /// The verbs status: an unknown syndrome is a general error, as in rdma-core.
    pub fn status(&self) -> CompletionStatus {
        self.syndrome
            .map_or(CompletionStatus::GeneralError, Syndrome::status)
    }
}

impl fmt::Display for ErrorCompletion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.syndrome {
            Some(s) => write!(f, "{s}")?,
            None => write!(f, "unknown syndrome {:#04x}", self.syndrome_byte)?,
        }
        write!(
            f,
            " on QP {:#08x} at WQE {:#06x} (vendor syndrome {:#04x})",
            self.qpn, self.wqe_counter, self.vendor_syndrome
        )
    }
}

/// A parsed CQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// A send WQE completed.
    Requester(RequesterCompletion),
    /// A receive completed.
    Responder(ResponderCompletion),
    /// An operation failed.
    Error(ErrorCompletion),
}

/// The fields of a completion as verbs reports them in `ibv_wc` (`wr_id` aside, which is
/// the caller's bookkeeping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    /// Status.
    pub status: CompletionStatus,
    /// Opcode, where rdma-core derives it from the CQE alone.
    pub opcode: Option<WcOpcode>,
    /// Vendor error syndrome (error completions).
    pub vendor_err: u8,
    /// Byte length.
    pub byte_len: u32,
    /// Immediate data, in verbs' network byte order as a raw `u32`.
    pub imm_data: u32,
    /// Queue pair number.
    pub qp_num: u32,
    /// Source queue pair (responder).
    pub src_qp: u32,
    /// `IBV_WC_WITH_IMM` (2) and friends.
    pub wc_flags: u32,
}

/// `IBV_WC_GRH`.
pub const WC_GRH: u32 = 1 << 0;
/// `IBV_WC_WITH_IMM`.
pub const WC_WITH_IMM: u32 = 1 << 1;
/// `IBV_WC_WITH_INV`.
pub const WC_WITH_INV: u32 = 1 << 3;

impl Completion {
    /// The queue pair.
    pub fn qpn(&self) -> u32 {
        match self {
            Self::Requester(c) => c.qpn,
            Self::Responder(c) => c.qpn,
            Self::Error(c) => c.qpn,
        }
    }
    /// The WQE counter.
    pub fn wqe_counter(&self) -> u16 {
        match self {
            Self::Requester(c) => c.wqe_counter,
            Self::Responder(c) => c.wqe_counter,
            Self::Error(c) => c.wqe_counter,
        }
    }
    /// The verbs status.
    pub fn status(&self) -> CompletionStatus {
        match self {
            Self::Error(e) => e.status(),
            _ => CompletionStatus::Success,
        }
    }

    /// The verbs view of this completion, field for field as rdma-core's `mlx5_poll_cq`
    /// fills `ibv_wc` (for fields it leaves untouched, zero).
    pub fn work_completion(&self) -> WorkCompletion {
        let mut wc = WorkCompletion {
            status: self.status(),
            opcode: None,
            vendor_err: 0,
            byte_len: 0,
            imm_data: 0,
            qp_num: self.qpn(),
            src_qp: 0,
            wc_flags: 0,
        };
        match self {
            Self::Requester(c) => match Opcode::from_byte(c.send_opcode) {
                Some(Opcode::RdmaWriteImm) => {
                    wc.wc_flags = WC_WITH_IMM;
                    wc.opcode = Some(WcOpcode::RdmaWrite);
                }
                Some(Opcode::RdmaWrite) => wc.opcode = Some(WcOpcode::RdmaWrite),
                Some(Opcode::SendImm) => {
                    wc.wc_flags = WC_WITH_IMM;
                    wc.opcode = Some(WcOpcode::Send);
                }
                Some(Opcode::Send | Opcode::SendInvalidate) => wc.opcode = Some(WcOpcode::Send),
                Some(Opcode::RdmaRead) => {
                    wc.opcode = Some(WcOpcode::RdmaRead);
                    wc.byte_len = c.byte_count;
                }
                Some(Opcode::AtomicCompareSwap) => {
                    wc.opcode = Some(WcOpcode::CompareSwap);
                    wc.byte_len = 8;
                }
                Some(Opcode::AtomicFetchAdd) => {
                    wc.opcode = Some(WcOpcode::FetchAdd);
                    wc.byte_len = 8;
                }
                Some(Opcode::Tso) => wc.opcode = Some(WcOpcode::Tso),
                _ => {}
            },
            Self::Responder(c) => {
                wc.byte_len = c.byte_count;
                wc.src_qp = c.source_qpn;
                if c.grh {
                    wc.wc_flags |= WC_GRH;
                }
                match c.opcode {
                    CqeOpcode::ResponderWriteImm => {
                        wc.opcode = Some(WcOpcode::ReceiveRdmaWithImm);
                        wc.wc_flags |= WC_WITH_IMM;
                        wc.imm_data = c.imm.to_be();
                    }
                    CqeOpcode::ResponderSendImm => {
                        wc.opcode = Some(WcOpcode::Receive);
                        wc.wc_flags |= WC_WITH_IMM;
                        wc.imm_data = c.imm.to_be();
                    }
                    CqeOpcode::ResponderSendInvalidate => {
                        // verbs' `invalidated_rkey` shares the union, in host order
                        wc.opcode = Some(WcOpcode::Receive);
                        wc.wc_flags |= WC_WITH_INV;
                        wc.imm_data = c.imm;
                    }
                    _ => wc.opcode = Some(WcOpcode::Receive),
                }
            }
            Self::Error(e) => wc.vendor_err = e.vendor_syndrome,
        }
        wc
    }
}

impl Cqe64 {
    /// The CQE opcode bits.
    pub fn opcode_bits(&self) -> u8 {
        self.op_own >> 4
    }
    /// The owner bit.
    pub fn owner(&self) -> bool {
        self.op_own & 1 != 0
    }
    /// The format bits (3:2): 0 plain, 1 and 2 data scattered into the CQE, 3 compressed.
    pub fn format(&self) -> u8 {
        (self.op_own >> 2) & 3
    }
    /// The solicited-event bit.
    pub fn solicited(&self) -> bool {
        self.op_own & 2 != 0
    }

    /// Whether software owns this entry when it is consumed as entry number
    /// `consumer_index` (free-running) of a CQ of `entries` (a power of two) entries: its
    /// opcode is not invalid and its owner bit equals the parity of the pass over the ring.
    pub fn is_software_owned(&self, consumer_index: u32, entries: u32) -> bool {
        self.opcode_bits() != CqeOpcode::Invalid as u8
            && self.owner() == (consumer_index & entries != 0)
    }

    /// Parses the entry into a typed completion. Never panics; every byte is untrusted.
    pub fn parse(&self) -> Result<Completion, CqeError> {
        let bits = self.opcode_bits();
        let opcode = CqeOpcode::from_bits(bits).ok_or(CqeError::UnknownOpcode { opcode: bits })?;
        match opcode {
            CqeOpcode::Invalid => return Err(CqeError::Empty),
            CqeOpcode::ResizeCq | CqeOpcode::NoPacket | CqeOpcode::SignatureError => {
                return Err(CqeError::Unsupported { opcode })
            }
            _ => {}
        }
        let qpn = self.sop_drop_qpn.get() & 0xff_ffff;
        if matches!(
            opcode,
            CqeOpcode::RequesterError | CqeOpcode::ResponderError
        ) {
            let e: &ErrorCqe64 = transmute_ref!(self);
            let qpn = e.s_wqe_opcode_qpn.get() & 0xff_ffff;
            return Ok(Completion::Error(ErrorCompletion {
                requester: opcode == CqeOpcode::RequesterError,
                qpn,
                wqe_counter: e.wqe_counter.get(),
                syndrome_byte: e.syndrome,
                syndrome: Syndrome::from_byte(e.syndrome),
                vendor_syndrome: e.vendor_err_synd,
                hw_syndrome: e.hw_err_synd,
                hw_syndrome_type: e.hw_synd_type,
                send_opcode: (e.s_wqe_opcode_qpn.get() >> 24) as u8,
            }));
        }
        match self.format() {
            0 => {}
            3 => return Err(CqeError::Compressed),
            format => return Err(CqeError::ScatterToCqe { format }),
        }
        Ok(match opcode {
            CqeOpcode::Requester => Completion::Requester(RequesterCompletion {
                qpn,
                wqe_counter: self.wqe_counter.get(),
                send_opcode: (self.sop_drop_qpn.get() >> 24) as u8,
                byte_count: self.byte_cnt.get(),
                user_index: self.srqn_uidx.get() & 0xff_ffff,
                timestamp: self.timestamp.get(),
            }),
            _ => Completion::Responder(ResponderCompletion {
                opcode,
                qpn,
                wqe_counter: self.wqe_counter.get(),
                byte_count: self.byte_cnt.get(),
                imm: self.imm_inval_pkey.get(),
                source_qpn: self.flags_rqpn.get() & 0xff_ffff,
                slid: self.slid.get(),
                srqn_uidx: self.srqn_uidx.get() & 0xff_ffff,
                grh: (self.flags_rqpn.get() >> 28) & 3 != 0,
            }),
        })
    }
}

/// Parses 64 bytes of a CQ ring. Never panics.
///
/// ```
/// use ibgda::cq::{parse_cqe, Completion, CqeError};
/// let mut raw = [0u8; 64];
/// raw[56..60].copy_from_slice(&(0x08_00_01_23u32).to_be_bytes()); // RDMA_WRITE on QP 0x123
/// raw[60..62].copy_from_slice(&7u16.to_be_bytes());
/// raw[63] = 0x01; // requester, owner 1
/// let Completion::Requester(c) = parse_cqe(&raw)? else { unreachable!() };
/// assert_eq!((c.qpn, c.wqe_counter, c.send_opcode), (0x123, 7, 0x08));
/// assert_eq!(parse_cqe(&[0xff; 64]), Err(CqeError::Empty));
/// # Ok::<(), CqeError>(())
/// ```
pub fn parse_cqe(bytes: &[u8; CQE_BYTES]) -> Result<Completion, CqeError> {
    let cqe: &Cqe64 = transmute_ref!(bytes);
    cqe.parse()
}
