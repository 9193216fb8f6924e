//! Completion queues as the NIC sees them: the producer side of a CQ ring, overrun
//! detection, and the encoding of requester, responder and error CQEs.

use std::collections::BTreeSet;

use zerocopy::byteorder::big_endian::{U16, U32};
use zerocopy::transmute;

use crate::cq::{Cqe64, CqeOpcode, ErrorCqe64, CQE_BYTES};
use crate::queue::CompletionQueueNicAccess;

use crate::cq::CqMode;

/// CQ indices are 24 bits wide (the CQ doorbell record's consumer index).
const INDEX_MASK: u32 = 0xff_ffff;
/// The largest CQ: 2^22 entries, so that 24-bit index arithmetic is unambiguous.
pub(crate) const MAX_CQ_ENTRIES: u32 = 1 << 22;

/// Why a CQE was not written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CqRefusal {
    /// The CQ was already in the error state.
    InError,
    /// Writing would overrun the consumer: the CQ has now entered the error state.
    Overrun,
}

/// The NIC's side of one completion queue.
#[derive(Debug)]
pub(crate) struct CqState {
    pub(crate) memory: CompletionQueueNicAccess,
    pub(crate) mode: CqMode,
    log2_entries: u32,
    /// Free-running count of CQEs written.
    producer: u32,
    pub(crate) error: bool,
    /// Queue numbers using the CQ (send or receive side).
    pub(crate) users: BTreeSet<u32>,
    /// Made by CREATE_CQ: it lives until DESTROY_CQ, not until its last user goes.
    pub(crate) held: bool,
    /// Overrun ignore (`cqc.oi`): a ring CQ writes every CQE at its producer slot without
    /// comparing with the consumer index, so a CQE the consumer has not read is
    /// overwritten; without it an overrun stops the CQ. Collapsed CQs always ignore it.
    pub(crate) overrun_ignore: bool,
}

impl CqState {
    /// A CQ over `memory`, which must be `entries` (a power of two) 64-byte CQEs.
    pub(crate) fn new(
        memory: CompletionQueueNicAccess,
        mode: CqMode,
    ) -> Result<Self, &'static str> {
        let entries = memory.entries();
        if entries == 0 || !entries.is_power_of_two() || entries > MAX_CQ_ENTRIES {
            return Err("CQ entries must be a power of two from 1 to 2^22");
        }
        if memory.ring().len != entries as usize * CQE_BYTES {
            return Err("CQ ring length is not entries × 64 bytes");
        }
        if memory.dbrec().len < 8 {
            return Err("CQ doorbell record is shorter than 8 bytes");
        }
        Ok(Self {
            memory,
            mode,
            log2_entries: entries.trailing_zeros(),
            producer: 0,
            error: false,
            users: BTreeSet::new(),
            held: false,
            overrun_ignore: mode == CqMode::Collapsed,
        })
    }

    /// The consumer index the consumer last published (bytes 0..4 of the CQ doorbell
    /// record, big-endian, 24 bits).
    fn consumer_index(&self) -> u32 {
        let word = self.memory.load_dbrec();
        let bytes = word.to_ne_bytes();
        u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) & INDEX_MASK
    }

    /// Whether one more CQE can be written now.
    pub(crate) fn room(&self) -> Result<(), CqRefusal> {
        if self.error {
            return Err(CqRefusal::InError);
        }
        if self.mode == CqMode::Ring && !self.overrun_ignore {
            let outstanding = self.producer.wrapping_sub(self.consumer_index()) & INDEX_MASK;
            if outstanding >= self.memory.entries() {
                return Err(CqRefusal::Overrun);
            }
        }
        Ok(())
    }

    /// Writes a CQE (its owner bit is set here), or refuses; an overrun puts the CQ in the
    /// error state.
    pub(crate) fn write(&mut self, mut cqe: [u8; CQE_BYTES]) -> Result<(), CqRefusal> {
        if let Err(refusal) = self.room() {
            if refusal == CqRefusal::Overrun {
                self.error = true;
            }
            return Err(refusal);
        }
        let slot = match self.mode {
            CqMode::Ring => self.producer & (self.memory.entries() - 1),
            CqMode::Collapsed => 0,
        };
        let owner = ((self.producer >> self.log2_entries) & 1) as u8;
        cqe[CQE_BYTES - 1] = (cqe[CQE_BYTES - 1] & !1) | owner;
        self.memory.write_cqe(slot, &cqe);
        self.producer = self.producer.wrapping_add(1);
        Ok(())
    }

    /// Puts the CQ in the error state.
    pub(crate) fn fail(&mut self) {
        self.error = true;
    }
}

/// A successful requester CQE (owner bit 0; set when written).
pub(crate) fn requester_cqe(
    qpn: u32,
    opcode: u8,
    wqe_counter: u16,
    byte_count: u32,
) -> [u8; CQE_BYTES] {
    let cqe = Cqe64 {
        byte_cnt: U32::new(byte_count),
        sop_drop_qpn: U32::new(u32::from(opcode) << 24 | qpn),
        wqe_counter: U16::new(wqe_counter),
        op_own: (CqeOpcode::Requester as u8) << 4,
        ..Default::default()
    };
    transmute!(cqe)
}

/// The fields of a responder CQE for a WRITE_WITH_IMM.
pub(crate) struct ResponderCqe {
    pub(crate) responder: u32,
    pub(crate) source_qpn: u32,
    pub(crate) source_lid: u16,
    pub(crate) imm: u32,
    pub(crate) byte_count: u32,
    pub(crate) receive_counter: u16,
    pub(crate) solicited: bool,
}

/// A responder CQE (owner bit 0; set when written).
pub(crate) fn responder_cqe(fields: &ResponderCqe) -> [u8; CQE_BYTES] {
    let cqe = Cqe64 {
        slid: U16::new(fields.source_lid),
        flags_rqpn: U32::new(fields.source_qpn),
        imm_inval_pkey: U32::new(fields.imm),
        byte_cnt: U32::new(fields.byte_count),
        sop_drop_qpn: U32::new(fields.responder),
        wqe_counter: U16::new(fields.receive_counter),
        op_own: (CqeOpcode::ResponderWriteImm as u8) << 4 | u8::from(fields.solicited) << 1,
        ..Default::default()
    };
    transmute!(cqe)
}

/// A requester error CQE (owner bit 0; set when written).
pub(crate) fn error_cqe(
    qpn: u32,
    opcode: u8,
    wqe_counter: u16,
    syndrome: u8,
    vendor_syndrome: u8,
) -> [u8; CQE_BYTES] {
    let cqe = ErrorCqe64 {
        vendor_err_synd: vendor_syndrome,
        syndrome,
        s_wqe_opcode_qpn: U32::new(u32::from(opcode) << 24 | qpn),
        wqe_counter: U16::new(wqe_counter),
        op_own: (CqeOpcode::RequesterError as u8) << 4,
        ..Default::default()
    };
    transmute!(cqe)
}
