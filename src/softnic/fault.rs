//! Faults of the data path: why a WQE failed, and the syndromes its error CQE reports.

use core::fmt;

use crate::cq::Syndrome;
use crate::wqe::ParseError;

use super::region::Access;

/// The vendor syndrome of a flush CQE (syndrome WR_FLUSH_ERR).
pub const FLUSH_VENDOR_SYNDROME: u8 = 0x00;

/// Why the software NIC failed a WQE. Each fault maps to the syndrome hardware reports for
/// it and to a vendor syndrome of this NIC's own (see the table in [`crate::softnic`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// The parser rejected the WQE's bytes.
    MalformedWqe(ParseError),
    /// The control segment names another queue.
    ForeignQpn {
        /// The QPN in the control segment.
        found: u32,
    },
    /// A WQE was published on a queue pair that is not ready to send (RESET, INIT or
    /// RTR): the send queue of a QP made by command runs only in RTS.
    NotReadyToSend {
        /// The queue's state when the WQE was seen.
        state: super::fabric::QpState,
    },
    /// The WQE's DS extends past the WQEBBs the doorbell record publishes.
    Unpublished {
        /// WQEBBs the WQE claims.
        wqebbs: u32,
        /// WQEBBs published from its start.
        published: u16,
    },
    /// The message is longer than the queue's `max_message_bytes`.
    MessageTooLong {
        /// Message length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// No region on the local node has this lkey.
    LocalKey {
        /// The key.
        lkey: u32,
    },
    /// The local range is not inside the region the lkey names.
    LocalBounds {
        /// The key.
        lkey: u32,
        /// Start of the range.
        addr: u64,
        /// Length of the range.
        len: u64,
    },
    /// The operation writes local memory of a region without local write access.
    LocalWriteDenied {
        /// The key.
        lkey: u32,
    },
    /// DC: no node on the fabric has the address vector's LID.
    UnknownLid {
        /// The LID.
        lid: u16,
    },
    /// DC: the target node has no DCT with this number.
    UnknownDct {
        /// The DCT number.
        dct: u32,
    },
    /// DC: the address vector's DC key is not the DCT's.
    WrongDcKey {
        /// The DCT number.
        dct: u32,
    },
    /// RoCE: no node of the fabric has the path's destination GID (the RC path's
    /// `rgid_rip`, the DC address vector's `rgid`): the packets go nowhere.
    UnknownGid {
        /// The GID.
        gid: [u8; 16],
    },
    /// RoCE: the next-hop MAC is not the MAC of the node that has the destination GID:
    /// the frames reach no one that answers.
    WrongMac {
        /// The MAC the path carries.
        mac: [u8; 6],
    },
    /// The responder (the connected RC queue pair or the DCT) no longer exists or is in
    /// the error state: nobody answers.
    ResponderUnavailable {
        /// The responder's queue number.
        responder: u32,
    },
    /// The remote address of an atomic is not aligned to its operand size.
    MisalignedAtomic {
        /// The remote address.
        addr: u64,
        /// The operand size.
        align: u32,
    },
    /// No region on the responder's node has this rkey.
    RemoteKey {
        /// The key.
        rkey: u32,
    },
    /// The remote range is not inside the region the rkey names.
    RemoteBounds {
        /// The key.
        rkey: u32,
        /// Start of the range.
        addr: u64,
        /// Length of the range.
        len: u64,
    },
    /// The region the rkey names lacks the right the operation needs.
    RemoteAccessDenied {
        /// The key.
        rkey: u32,
        /// The right needed.
        needed: Access,
    },
    /// A WRITE_WITH_IMM found no receive credit at the responder.
    ReceiverNotReady {
        /// The responder's queue number.
        responder: u32,
    },
    /// The responding queue does not accept the operation (its context's remote read,
    /// write or atomic enable is clear).
    ResponderAccessDisabled {
        /// The responder's queue number.
        responder: u32,
        /// The right the operation needs.
        needed: Access,
    },
    /// The responder's receive CQ overran: the responder could not complete the message.
    ResponderCqOverrun {
        /// The responder's queue number.
        responder: u32,
    },
    /// A fault injected on this WQE ([`Fabric::inject_fault`](super::Fabric::inject_fault)):
    /// how a test device reproduces failures seen on silicon (a first WQE rejected with
    /// a local QP operation error, a transport retry exceeded arriving later).
    Injected {
        /// The syndrome of the error CQE.
        syndrome: Syndrome,
        /// Its vendor syndrome.
        vendor_syndrome: u8,
    },
}

impl Fault {
    /// The syndrome of the error CQE.
    pub const fn syndrome(&self) -> Syndrome {
        match self {
            Self::MalformedWqe(_)
            | Self::ForeignQpn { .. }
            | Self::Unpublished { .. }
            | Self::NotReadyToSend { .. } => Syndrome::LocalQpOperation,
            Self::MessageTooLong { .. } => Syndrome::LocalLength,
            Self::LocalKey { .. } | Self::LocalBounds { .. } | Self::LocalWriteDenied { .. } => {
                Syndrome::LocalProtection
            }
            Self::UnknownLid { .. }
            | Self::UnknownDct { .. }
            | Self::WrongDcKey { .. }
            | Self::UnknownGid { .. }
            | Self::WrongMac { .. }
            | Self::ResponderUnavailable { .. } => Syndrome::TransportRetryExceeded,
            Self::MisalignedAtomic { .. } => Syndrome::RemoteInvalidRequest,
            Self::RemoteKey { .. }
            | Self::RemoteBounds { .. }
            | Self::RemoteAccessDenied { .. }
            | Self::ResponderAccessDisabled { .. } => Syndrome::RemoteAccess,
            Self::ReceiverNotReady { .. } => Syndrome::RnrRetryExceeded,
            Self::ResponderCqOverrun { .. } => Syndrome::RemoteOperation,
            Self::Injected { syndrome, .. } => *syndrome,
        }
    }

    /// The vendor syndrome of the error CQE: this NIC's own code for the exact cause.
    pub const fn vendor_syndrome(&self) -> u8 {
        match self {
            Self::MalformedWqe(_) => 0x01,
            Self::ForeignQpn { .. } => 0x02,
            Self::Unpublished { .. } => 0x03,
            Self::NotReadyToSend { .. } => 0x04,
            Self::MessageTooLong { .. } => 0x10,
            Self::LocalKey { .. } => 0x20,
            Self::LocalBounds { .. } => 0x21,
            Self::LocalWriteDenied { .. } => 0x22,
            Self::MisalignedAtomic { .. } => 0x30,
            Self::RemoteKey { .. } => 0x40,
            Self::RemoteBounds { .. } => 0x41,
            Self::RemoteAccessDenied { .. } => 0x42,
            Self::ResponderAccessDisabled { .. } => 0x43,
            Self::UnknownLid { .. } => 0x50,
            Self::UnknownDct { .. } => 0x51,
            Self::WrongDcKey { .. } => 0x52,
            Self::ResponderUnavailable { .. } => 0x53,
            Self::UnknownGid { .. } => 0x54,
            Self::WrongMac { .. } => 0x55,
            Self::ReceiverNotReady { .. } => 0x60,
            Self::ResponderCqOverrun { .. } => 0x70,
            Self::Injected {
                vendor_syndrome, ..
            } => *vendor_syndrome,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MalformedWqe(e) => write!(f, "malformed WQE: {e}")?,
            Self::ForeignQpn { found } => write!(f, "WQE names queue {found:#08x}")?,
            Self::NotReadyToSend { state } => {
                write!(f, "WQE on a queue pair in {state:?}, not ready to send")?
            }
            Self::Unpublished { wqebbs, published } => write!(
                f,
                "WQE of {wqebbs} WQEBBs but only {published} are published"
            )?,
            Self::MessageTooLong { len, max } => write!(f, "message of {len} bytes exceeds {max}")?,
            Self::LocalKey { lkey } => write!(f, "unknown lkey {lkey:#010x}")?,
            Self::LocalBounds { lkey, addr, len } => write!(
                f,
                "{len} bytes at {addr:#x} outside the region of lkey {lkey:#010x}"
            )?,
            Self::LocalWriteDenied { lkey } => {
                write!(f, "region of lkey {lkey:#010x} is not locally writable")?
            }
            Self::UnknownLid { lid } => write!(f, "no node with LID {lid:#06x}")?,
            Self::UnknownDct { dct } => write!(f, "no DCT {dct:#08x} at the target")?,
            Self::WrongDcKey { dct } => write!(f, "wrong DC key for DCT {dct:#08x}")?,
            Self::UnknownGid { gid } => write!(f, "no node has GID {:?}", crate::nic::Gid(*gid))?,
            Self::WrongMac { mac } => write!(f, "MAC {mac:02x?} is not the destination's")?,
            Self::ResponderUnavailable { responder } => {
                write!(f, "responder {responder:#08x} does not answer")?
            }
            Self::MisalignedAtomic { addr, align } => {
                write!(f, "atomic at {addr:#x} is not {align}-byte aligned")?
            }
            Self::RemoteKey { rkey } => write!(f, "unknown rkey {rkey:#010x}")?,
            Self::RemoteBounds { rkey, addr, len } => write!(
                f,
                "{len} bytes at {addr:#x} outside the region of rkey {rkey:#010x}"
            )?,
            Self::RemoteAccessDenied { rkey, needed } => {
                write!(f, "region of rkey {rkey:#010x} lacks {needed:?}")?
            }
            Self::ResponderAccessDisabled { responder, needed } => {
                write!(f, "queue {responder:#08x} does not accept {needed:?}")?
            }
            Self::ReceiverNotReady { responder } => {
                write!(f, "no receive credit at {responder:#08x}")?
            }
            Self::ResponderCqOverrun { responder } => {
                write!(f, "receive CQ of {responder:#08x} overran")?
            }
            Self::Injected { .. } => f.write_str("injected fault")?,
        }
        write!(
            f,
            " ({}, vendor syndrome {:#04x})",
            self.syndrome(),
            self.vendor_syndrome()
        )
    }
}
