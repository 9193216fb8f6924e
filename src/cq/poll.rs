//! Polling a completion queue in host memory.
//!
//! The NIC writes a CQE's body first and its last word (with the owner bit) last, with
//! release; the poller loads that word with acquire, checks the opcode and owner bit (or,
//! on a collapsed CQ, the WQE counter), and only then reads the body. After consuming an
//! entry it stores the consumer index into the CQ doorbell record so the NIC knows the
//! entry is free again.

use core::sync::atomic::Ordering;

use zerocopy::transmute;

use super::cqe::{Completion, Cqe64, CqeError, CQE_BYTES};
use crate::memory::copy_out;
use crate::queue::{CompletionQueueMemory, Host, Placement};

/// How the NIC fills the CQ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CqMode {
    /// A ring of entries with owner bits; the consumer index is reported to the NIC.
    #[default]
    Ring,
    /// Collapsed (`cqc.cc = 1`): every CQE overwrites entry 0; the consumer compares WQE
    /// counters and never reports an index (the NIC ignores overruns).
    Collapsed,
}

const LAST_WORD: usize = CQE_BYTES - 8;
const CI_MASK: u32 = 0xff_ffff;

/// A completion queue placed in `P`; the host polls those in host memory.
#[derive(Debug)]
pub struct CompletionQueue<P: Placement = Host> {
    memory: CompletionQueueMemory<P>,
    mode: CqMode,
    consumer: u32,
    last_collapsed: Option<u16>,
}

impl<P: Placement> CompletionQueue<P> {
    /// A CQ over `memory`, filled in `mode`.
    pub fn new(memory: CompletionQueueMemory<P>, mode: CqMode) -> Self {
        Self {
            memory,
            mode,
            consumer: 0,
            last_collapsed: None,
        }
    }

    /// The CQ's memory.
    pub fn memory(&self) -> &CompletionQueueMemory<P> {
        &self.memory
    }
    /// The fill mode.
    pub fn mode(&self) -> CqMode {
        self.mode
    }
    /// Entries consumed so far (free-running).
    pub fn consumer_index(&self) -> u32 {
        self.consumer
    }
}

impl CompletionQueue<Host> {
    /// Reads entry `slot` if its last word shows a CQE software owns; `None` otherwise.
    fn read_entry(
        &self,
        slot: usize,
        expect: impl Fn(&[u8; 8]) -> bool,
    ) -> Option<[u8; CQE_BYTES]> {
        let words = self.memory.ring_buffer().words();
        let base = slot * CQE_BYTES / 8;
        let last = &words[base + LAST_WORD / 8];
        loop {
            let tail = last.load(Ordering::Acquire).to_ne_bytes();
            if !expect(&tail) {
                return None;
            }
            let mut cqe = [0u8; CQE_BYTES];
            copy_out(&words[base..], 0, &mut cqe[..LAST_WORD], Ordering::Relaxed);
            cqe[LAST_WORD..].copy_from_slice(&tail);
            // A collapsed CQ's only entry can be overwritten while it is read: read again
            // until the last word is unchanged around the body (a ring entry is stable once
            // owned, so this passes at once there).
            if last.load(Ordering::Acquire).to_ne_bytes() == tail {
                return Some(cqe);
            }
        }
    }

    /// Starts a collapsed CQ over after its queue pair was reset (its WQE counters restart
    /// at 0, so a new CQE may repeat the counter of the last one seen): entry 0 becomes a
    /// CQE nobody has written, and no counter is taken as seen. Only while the NIC writes no
    /// CQE to it (the queue pair drained and in RESET). A ring CQ needs nothing: its owner
    /// bits follow the NIC's producer count, which a queue pair's reset does not change.
    pub(crate) fn restart(&mut self) {
        if self.mode == CqMode::Collapsed {
            let words = self.memory.ring_buffer().words();
            // The last word of entry 0: `op_own` invalid and hardware-owned, the rest 0.
            let mut last = [0u8; 8];
            last[7] = crate::queue::CQE_INIT_OP_OWN;
            words[LAST_WORD / 8].store(u64::from_ne_bytes(last), Ordering::Release);
            self.last_collapsed = None;
        }
    }

    /// Consumes the next CQE, if the NIC has written one: `None` when the queue is empty,
    /// otherwise the parsed completion (or why the entry is not one this crate accepts).
    pub fn poll(&mut self) -> Option<Result<Completion, CqeError>> {
        let bytes = match self.mode {
            CqMode::Ring => {
                let entries = self.memory.entries();
                let slot = (self.consumer & (entries - 1)) as usize;
                let parity = self.consumer & entries != 0;
                let bytes = self.read_entry(slot, |tail| {
                    let op_own = tail[7];
                    op_own >> 4 != 0xf && (op_own & 1 != 0) == parity
                })?;
                self.consumer = self.consumer.wrapping_add(1);
                let ci = (self.consumer & CI_MASK).to_be_bytes();
                let record = u64::from_ne_bytes([ci[0], ci[1], ci[2], ci[3], 0, 0, 0, 0]);
                self.memory.dbrec_buffer().words()[0].store(record, Ordering::Release);
                bytes
            }
            CqMode::Collapsed => {
                let last = self.last_collapsed;
                let bytes = self.read_entry(0, |tail| {
                    let counter = u16::from_be_bytes([tail[4], tail[5]]);
                    tail[7] >> 4 != 0xf && last != Some(counter)
                })?;
                self.last_collapsed = Some(u16::from_be_bytes([bytes[60], bytes[61]]));
                self.consumer = self.consumer.wrapping_add(1);
                bytes
            }
        };
        let cqe: Cqe64 = transmute!(bytes);
        Some(cqe.parse())
    }
}
