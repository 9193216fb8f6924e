//! The memory of a host-placed queue pair and the conventions a NIC (hardware or the
//! software NIC) and the host share about it.
//!
//! | object | size | content |
//! |---|---|---|
//! | send ring | WQEBBs × 64 B, page aligned | WQEs, written by the producer |
//! | send doorbell record | 8 B | bytes 0..4 receive counter (unused, 0); bytes 4..8 the send counter: big-endian `next free WQEBB & 0xffff`, stored by the producer as one 64-bit release store |
//! | doorbell | 8 B | the last doorbell value: bytes 0..8 of a control segment, stored with release (a UAR register on hardware; memory the software NIC watches otherwise) |
//! | CQ ring | entries × 64 B, page aligned | CQEs, written by the NIC: bytes 0..56 first, then bytes 56..64 (with the owner bit) as one 64-bit release store; initialised to `op_own = 0xf1` (invalid, owner 1) |
//! | CQ doorbell record | 8 B | bytes 0..4 big-endian consumer index `& 0xffffff`, stored by the consumer with release after it has read a CQE; bytes 4..8 arm word (unused) |

use std::sync::Arc;

use core::sync::atomic::Ordering;

use super::placement::{Host, Placement};
use crate::memory::{DmaBuffer, DmaError};
use crate::order::HostBarrier;
use crate::wqe::{RingSize, WqeIndex, WQEBB_BYTES};

/// Alignment of rings: a page, as NIC queue memory is.
pub const RING_ALIGN: usize = 4096;
/// Byte offset of the send counter in a queue pair's doorbell record.
pub const SEND_DBREC_OFFSET: usize = 4;
/// `op_own` of a CQE nobody has written: opcode 15 (invalid), owner 1.
pub const CQE_INIT_OP_OWN: u8 = 0xf1;

/// The memory of one send queue, placed in `P`.
#[derive(Clone, Debug)]
pub struct SendQueueMemory<P: Placement = Host> {
    /// The ring.
    pub ring: P::Buffer,
    /// Its size.
    pub size: RingSize,
    /// The doorbell record (8 bytes).
    pub dbrec: P::Buffer,
    /// The doorbell (8 bytes): a NIC register, or memory a software NIC watches.
    pub doorbell: P::Buffer,
}

impl SendQueueMemory<Host> {
    /// Copies an encoded WQE (whole WQEBBs) into the ring at the slot of `index`,
    /// continuing at the ring's start where it passes the end.
    pub(crate) fn write_wqe(&self, index: WqeIndex, wqe: &[u8]) -> Result<(), DmaError> {
        let offset = self.size.slot(index) * WQEBB_BYTES;
        let first = wqe.len().min(self.ring.len() - offset);
        self.ring.write(offset, &wqe[..first])?;
        if first < wqe.len() {
            self.ring.write(0, &wqe[first..])?;
        }
        Ok(())
    }

    /// Announces every WQEBB before `next_free` as a CPU producer does: the host barrier,
    /// the doorbell record (big-endian `next_free & 0xffff`), a write flush, the 8-byte
    /// `doorbell` value, and a write flush.
    pub(crate) fn announce(&self, next_free: u64, doorbell: [u8; 8]) {
        let barrier = HostBarrier;
        barrier.to_device();
        let mut record = [0u8; 8];
        record[SEND_DBREC_OFFSET..].copy_from_slice(&(next_free as u32 & 0xffff).to_be_bytes());
        self.dbrec.words()[0].store(u64::from_ne_bytes(record), Ordering::Release);
        barrier.flush_writes();
        self.doorbell.words()[0].store(u64::from_ne_bytes(doorbell), Ordering::Release);
        barrier.flush_writes();
    }

    /// Zeroed memory for a send queue of `size`.
    pub fn allocate(size: RingSize) -> Result<Self, DmaError> {
        Ok(Self {
            ring: Arc::new(DmaBuffer::zeroed(
                size.wqebbs() as usize * WQEBB_BYTES,
                RING_ALIGN,
            )?),
            size,
            dbrec: Arc::new(DmaBuffer::zeroed(8, 64)?),
            doorbell: Arc::new(DmaBuffer::zeroed(8, 64)?),
        })
    }
}

/// The memory of one completion queue, placed in `P`.
#[derive(Clone, Debug)]
pub struct CompletionQueueMemory<P: Placement = Host> {
    /// The ring of 64-byte CQEs.
    pub ring: P::Buffer,
    /// Entries in the ring (a power of two).
    pub entries: u32,
    /// The CQ doorbell record (8 bytes).
    pub dbrec: P::Buffer,
}

impl CompletionQueueMemory<Host> {
    /// Memory for a CQ of `entries` (a power of two, at least 1) CQEs, each initialised
    /// invalid and hardware-owned.
    pub fn allocate(entries: u32) -> Result<Self, DmaError> {
        if entries == 0 || !entries.is_power_of_two() {
            return Err(DmaError::BadLength {
                len: entries as usize * 64,
            });
        }
        let ring = DmaBuffer::zeroed(entries as usize * 64, RING_ALIGN)?;
        for i in 0..entries as usize {
            ring.write(i * 64 + 63, &[CQE_INIT_OP_OWN])?;
        }
        Ok(Self {
            ring: Arc::new(ring),
            entries,
            dbrec: Arc::new(DmaBuffer::zeroed(8, 64)?),
        })
    }
}
