//! Queues whose producer (or consumer) is the caller's own code: raw WQE bytes, doorbell
//! records and doorbells written as they are, CQEs read as they are. For tests of a NIC
//! and for code that encodes its own WQEs. They consume their memory, so no typed queue
//! shares it.

use core::sync::atomic::Ordering;

use super::memory::{CompletionQueueMemory, SendQueueMemory};
use crate::cq::CQE_BYTES;
use crate::memory::{copy_out, DmaError};

/// The producer side of a send queue that no typed queue owns.
#[derive(Debug)]
pub struct RawSendQueue {
    memory: SendQueueMemory,
}

impl RawSendQueue {
    /// Takes ownership of `memory`.
    pub fn new(memory: SendQueueMemory) -> Self {
        Self { memory }
    }

    /// The memory (to read, or to create the queue on a NIC).
    pub fn memory(&self) -> &SendQueueMemory {
        &self.memory
    }

    /// Copies `bytes` into the ring at `offset`.
    ///
    /// # Safety
    ///
    /// The bytes become WQEs once the doorbell record covers them, and a NIC executes
    /// them unchecked: as [`SendQueue::post_unchecked`](super::SendQueue::post_unchecked),
    /// every local buffer they name must stay registered, allocated and otherwise unused by
    /// this process (for buffers the NIC writes) until a completion covers them. (The
    /// software NIC accesses only its registered [`DmaBuffer`](crate::memory::DmaBuffer)s,
    /// atomically, which meets this for any bytes.)
    pub unsafe fn write_ring(&self, offset: usize, bytes: &[u8]) -> Result<(), DmaError> {
        self.memory.ring_buffer().write(offset, bytes)
    }

    /// Stores the doorbell record word (one release store).
    pub fn store_dbrec(&self, record: [u8; 8]) {
        self.memory.store_dbrec(record);
    }

    /// Stores the doorbell word (one release store).
    pub fn store_doorbell(&self, value: [u8; 8]) {
        self.memory.store_doorbell(value);
    }
}

/// The consumer side of a completion queue that no typed queue owns.
#[derive(Debug)]
pub struct RawCompletionQueue {
    memory: CompletionQueueMemory,
}

impl RawCompletionQueue {
    /// Takes ownership of `memory`.
    pub fn new(memory: CompletionQueueMemory) -> Self {
        Self { memory }
    }

    /// The memory (to read, or to create the queue on a NIC).
    pub fn memory(&self) -> &CompletionQueueMemory {
        &self.memory
    }

    /// Entries in the ring.
    pub fn entries(&self) -> u32 {
        self.memory.entries()
    }

    /// The last 8 bytes of entry `slot` (modulo the ring), loaded with acquire: the word
    /// the NIC stores last, holding `op_own`.
    pub fn load_owner_word(&self, slot: u32) -> [u8; 8] {
        let index = (slot & (self.entries() - 1)) as usize * CQE_BYTES / 8 + 7;
        self.memory.ring_buffer().words()[index]
            .load(Ordering::Acquire)
            .to_ne_bytes()
    }

    /// A copy of entry `slot` (modulo the ring).
    pub fn entry(&self, slot: u32) -> [u8; CQE_BYTES] {
        let mut cqe = [0u8; CQE_BYTES];
        let offset = (slot & (self.entries() - 1)) as usize * CQE_BYTES;
        copy_out(
            self.memory.ring_buffer().words(),
            offset,
            &mut cqe,
            Ordering::Relaxed,
        );
        cqe
    }

    /// Stores the CQ doorbell record word (one release store): the consumer index the NIC
    /// checks for overruns.
    pub fn store_dbrec(&self, record: [u8; 8]) {
        self.memory.dbrec_buffer().words()[0].store(u64::from_ne_bytes(record), Ordering::Release);
    }
}
