//! The tables the CUDA software NIC's engine (`cuda/softnic.cuh`) runs on, as `#[repr(C)]`
//! Rust types. Their C form is generated into `ibgda_layout.h` (with `static_assert`s on
//! every offset), so the engine never defines its own layouts.
//!
//! Every address in a table is an address the engine dereferences: host memory for the
//! host build of the engine, device memory for the persistent kernel. Regions carry two
//! addresses: `start`, the virtual address WQEs name (what the CPU software NIC calls the
//! region's address), and `base`, where that byte lives for this engine. WQEs are
//! translated through `start`; bytes move through `base`. On the GPU the two are equal
//! (regions are device allocations named by their device addresses); the differential
//! test replays the CPU NIC's WQE bytes, so there `start` is the CPU NIC's address and
//! `base` the copy's.

use core::mem::size_of;

use static_assertions::const_assert_eq;

/// "No entry" in an index or queue-number field.
pub const NIC_NONE: u32 = u32::MAX;

/// Queue states (`NicQueue::state`).
pub mod state {
    /// An RC queue pair not yet connected: executes nothing.
    pub const INIT: u32 = 0;
    /// Executing WQEs.
    pub const READY: u32 = 1;
    /// In error: every WQE is flushed.
    pub const ERROR: u32 = 2;
}

/// Why a queue is in error (`NicQueue::error_kind`).
pub mod error_kind {
    /// Not in error.
    pub const NONE: u32 = 0;
    /// A WQE failed: `error_syndrome`, `error_vendor`, `error_detail` = its index.
    pub const WQE: u32 = 1;
    /// A CQ the queue uses overran: `error_detail` = the CQ's index.
    pub const CQ: u32 = 2;
}

/// Transports (`NicQueue::transport`), as `DeviceQueueDescriptor::transport`.
pub mod transport {
    /// Reliable connection.
    pub const RC: u32 = 0;
    /// Dynamically connected initiator.
    pub const DC: u32 = 1;
}

/// When the doorbell record is read (`NicQueue::watch`), as the CPU NIC's `DoorbellWatch`.
pub mod watch {
    /// Every step.
    pub const POLL_RECORD: u32 = 0;
    /// Only when a doorbell naming the queue arrives.
    pub const DOORBELL_ONLY: u32 = 1;
}

/// CQ placement (`NicCq::mode`), as `DeviceQueueDescriptor::cq_mode`.
pub mod cq_mode {
    /// One CQE per entry, in order; overrun is an error.
    pub const RING: u32 = 0;
    /// Every CQE to entry 0; no overrun.
    pub const COLLAPSED: u32 = 1;
}

/// Bytes a pointer WRITE moves per copy: the CPU NIC's copy unit (`execute.rs`), which
/// decides what a WRITE whose source overlaps its destination leaves behind. The engine
/// copies through its scratch buffer in units of this size to match.
pub const WRITE_COPY_CHUNK: u64 = 4096;

/// One node (a host port) of the fabric; its index is its `NodeId`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct NicNode {
    /// The LID DC address vectors reach it by.
    pub lid: u32,
    /// Zero.
    pub reserved: u32,
}

/// A registered memory region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct NicRegion {
    /// The virtual address of its first byte, as WQEs name it.
    pub start: u64,
    /// Where its first byte is for this engine (`base ≡ start` mod 8, so that an atomic's
    /// 64-bit word is the same word in both views).
    pub base: u64,
    /// Length in bytes (at least 1).
    pub len: u64,
    /// The node it is registered on (an index of the node table).
    pub node: u32,
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
    /// Rights: `ibgda::softnic::Access` bits.
    pub access: u32,
}

/// A completion queue: its memory and the NIC's side of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct NicCq {
    /// The ring of `entries` 64-byte CQEs.
    pub ring: u64,
    /// The CQ doorbell record (8 bytes; bytes 0..4 the consumer index, big-endian).
    pub dbrec: u64,
    /// Entries (a power of two, at most 2^22).
    pub entries: u32,
    /// log2 of `entries`.
    pub log2_entries: u32,
    /// A [`cq_mode`] value.
    pub mode: u32,
    /// Nonzero once the CQ overran: it writes nothing more.
    pub error: u32,
    /// Free-running count of CQEs written.
    pub producer: u32,
    /// Zero.
    pub reserved: u32,
}

/// The receive side of an RC queue pair or a DC target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct NicResponder {
    /// The DC access key (DC targets only).
    pub dc_key: u64,
    /// Receive credits (each WRITE_WITH_IMM consumes one).
    pub credits: u64,
    /// Its queue number (the RC queue pair's QPN or the DCT number).
    pub number: u32,
    /// Its node.
    pub node: u32,
    /// Nonzero for a DC target.
    pub is_dct: u32,
    /// Nonzero when in error (nobody answers).
    pub error: u32,
    /// Receives consumed (free-running; its low 16 bits are the responder CQE's counter).
    pub received: u32,
    /// Its receive CQ (an index of the CQ table), or [`NIC_NONE`].
    pub cq: u32,
}

/// A send queue (RC or DC initiator): its memory and the NIC's state for it. The table is
/// sorted by QPN, the order one step serves queues in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct NicQueue {
    /// The send ring (2^`log_wqebbs` WQEBBs).
    pub ring: u64,
    /// The send doorbell record (8 bytes; bytes 4..8 the send counter, big-endian).
    pub dbrec: u64,
    /// The 8-byte doorbell the NIC watches.
    pub doorbell: u64,
    /// The longest message (WRITE, READ, DUMP length) the queue accepts; at most the
    /// engine's scratch length.
    pub max_message_bytes: u64,
    /// WQEBBs consumed (free-running).
    pub consumer: u64,
    /// WQEs consumed (free-running).
    pub executed: u64,
    /// The doorbell value last seen.
    pub last_doorbell: u64,
    /// The WQE (its sequence number, as `executed` counts) that fails whatever it holds,
    /// when `inject_syndrome` is nonzero: the CPU NIC's `Fabric::inject_fault`.
    pub inject_at: u64,
    /// The WQE (its sequence number) that executes without its CQE, when `drop_cqe` is
    /// nonzero: the CPU NIC's `Fabric::drop_completion`.
    pub drop_cqe_at: u64,
    /// Queue pair number.
    pub qpn: u32,
    /// Its node.
    pub node: u32,
    /// A [`transport`] value.
    pub transport: u32,
    /// log2 of the ring's WQEBBs.
    pub log_wqebbs: u32,
    /// Its send CQ (an index of the CQ table).
    pub cq: u32,
    /// The connected RC peer's QPN, or [`NIC_NONE`].
    pub peer: u32,
    /// A [`state`] value.
    pub state: u32,
    /// A [`watch`] value.
    pub watch: u32,
    /// `DoorbellOnly`: nonzero once a doorbell armed `armed_limit`.
    pub armed: u32,
    /// `DoorbellOnly`: the record's send counter read at the last doorbell.
    pub armed_limit: u32,
    /// An [`error_kind`] value.
    pub error_kind: u32,
    /// The failed WQE's syndrome (`error_kind::WQE`).
    pub error_syndrome: u32,
    /// The failed WQE's vendor syndrome (`error_kind::WQE`).
    pub error_vendor: u32,
    /// The failed WQE's index, or the overrun CQ's index.
    pub error_detail: u32,
    /// The syndrome of the injected failure (0: none injected).
    pub inject_syndrome: u32,
    /// Its vendor syndrome.
    pub inject_vendor: u32,
    /// Nonzero: the WQE `drop_cqe_at` completes without a CQE (a completion lost).
    pub drop_cqe: u32,
    /// Zero.
    pub reserved: u32,
}

/// Totals of one engine, the CPU NIC's `Counters` (less `responses_dropped`: regions are
/// never deregistered under the CUDA NIC).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct NicStats {
    /// Doorbells naming their queue.
    pub doorbells: u64,
    /// Doorbells naming another queue.
    pub foreign_doorbells: u64,
    /// WQEs executed successfully.
    pub wqes_executed: u64,
    /// WQEs that failed.
    pub wqes_failed: u64,
    /// WQEs flushed.
    pub wqes_flushed: u64,
    /// Bytes written by WRITEs.
    pub bytes_written: u64,
    /// Bytes read by READs.
    pub bytes_read: u64,
    /// Atomics performed.
    pub atomics: u64,
    /// CQEs written.
    pub cqes_written: u64,
    /// Responder CQEs written (included in `cqes_written`).
    pub responder_cqes: u64,
    /// CQEs not written (CQ overran or in error).
    pub cqes_dropped: u64,
    /// Asynchronous events (CQ error, queue fatal).
    pub async_events: u64,
}

/// One engine: its tables (addresses and counts), its scratch buffer and its totals. The
/// persistent kernel runs one engine per block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct NicEngine {
    /// `NicNode[n_nodes]`.
    pub nodes: u64,
    /// `NicRegion[n_regions]`.
    pub regions: u64,
    /// `NicCq[n_cqs]`.
    pub cqs: u64,
    /// `NicResponder[n_responders]`.
    pub responders: u64,
    /// `NicQueue[n_queues]`, sorted by QPN.
    pub queues: u64,
    /// Scratch memory: READ data and WRITE copy chunks pass through it.
    pub scratch: u64,
    /// Its length: at least [`WRITE_COPY_CHUNK`] and every queue's `max_message_bytes`.
    pub scratch_len: u64,
    /// Entries of the node table.
    pub n_nodes: u32,
    /// Entries of the region table.
    pub n_regions: u32,
    /// Entries of the CQ table.
    pub n_cqs: u32,
    /// Entries of the responder table.
    pub n_responders: u32,
    /// Entries of the queue table.
    pub n_queues: u32,
    /// The persistent kernel's status: 0, or `SPIN_TIMEOUT` when it idled past the bound.
    pub status: i32,
    /// Steps the persistent kernel ran.
    pub steps: u64,
    /// SM cycles (`clock64`) the last launch ran for.
    pub cycles: u64,
    /// Nanoseconds (`%globaltimer`) the last launch ran for.
    pub ns: u64,
    /// Totals.
    pub stats: NicStats,
}

const_assert_eq!(size_of::<NicNode>(), 8);
const_assert_eq!(size_of::<NicRegion>(), 40);
const_assert_eq!(size_of::<NicCq>(), 40);
const_assert_eq!(size_of::<NicResponder>(), 40);
const_assert_eq!(size_of::<NicQueue>(), 144);
const_assert_eq!(size_of::<NicStats>(), 96);
const_assert_eq!(size_of::<NicEngine>(), 200);

/// Plain-data tables that can be viewed as bytes (to copy them to a device).
///
/// # Safety
///
/// Implementors must be `#[repr(C)]` structs of integer fields (and such structs) with no
/// padding bytes, so that every byte of a value is initialised.
pub unsafe trait TableRecord: Copy {}

// SAFETY: `#[repr(C)]`, two `u32`s, no padding (size 8 asserted).
unsafe impl TableRecord for NicNode {}
// SAFETY: `#[repr(C)]`, 3 `u64` then 4 `u32`: 40 bytes, no padding (asserted).
unsafe impl TableRecord for NicRegion {}
// SAFETY: `#[repr(C)]`, 2 `u64` then 6 `u32`: 40 bytes, no padding (asserted).
unsafe impl TableRecord for NicCq {}
// SAFETY: `#[repr(C)]`, 2 `u64` then 6 `u32`: 40 bytes, no padding (asserted).
unsafe impl TableRecord for NicResponder {}
// SAFETY: `#[repr(C)]`, 9 `u64` then 18 `u32`: 144 bytes, no padding (asserted).
unsafe impl TableRecord for NicQueue {}
// SAFETY: `#[repr(C)]`, 12 `u64`: 96 bytes, no padding (asserted).
unsafe impl TableRecord for NicStats {}
// SAFETY: `#[repr(C)]`, 7 `u64`, 6 32-bit integers, 3 `u64` and `NicStats`: 200 bytes, no
// padding (asserted).
unsafe impl TableRecord for NicEngine {}

/// The bytes of a slice of table records.
pub fn record_bytes<T: TableRecord>(records: &[T]) -> Vec<u8> {
    // SAFETY: `TableRecord` types have no padding, so all `size_of_val(records)` bytes
    // behind the slice are initialised; the view lives only for the copy.
    unsafe {
        core::slice::from_raw_parts(
            records.as_ptr().cast::<u8>(),
            core::mem::size_of_val(records),
        )
    }
    .to_vec()
}

/// Records read back from bytes (a device copy of a table); `None` if the length is not a
/// whole number of records.
pub fn records_from_bytes<T: TableRecord + Default>(bytes: &[u8]) -> Option<Vec<T>> {
    let n = size_of::<T>();
    if bytes.len() % n != 0 {
        return None;
    }
    let mut out = vec![T::default(); bytes.len() / n];
    // SAFETY: `out` holds `bytes.len()` bytes of `T`s; every bit pattern is a valid
    // `TableRecord` (integers only); the ranges do not overlap.
    unsafe {
        core::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), bytes.len())
    };
    Some(out)
}

/// Why engine tables cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableError(pub String);

impl core::fmt::Display for TableError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "CUDA software NIC tables: {}", self.0)
    }
}

impl std::error::Error for TableError {}

/// Every table of one engine. Addresses are absolute, or relative to an arena until
/// [`NicTables::relocated`] places them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NicTables {
    /// Nodes (index = node id).
    pub nodes: Vec<NicNode>,
    /// Memory regions.
    pub regions: Vec<NicRegion>,
    /// Completion queues.
    pub cqs: Vec<NicCq>,
    /// Responders (RC receive sides and DC targets).
    pub responders: Vec<NicResponder>,
    /// Send queues, sorted by QPN.
    pub queues: Vec<NicQueue>,
}

/// The largest scratch buffer an engine gets, hence the largest `max_message_bytes`.
pub const MAX_SCRATCH_BYTES: u64 = 64 << 20;

impl NicTables {
    /// The tables with `base` added to every address (rings, records, doorbells, CQs,
    /// regions' `base`; never a region's `start`, which is what WQEs name).
    pub fn relocated(&self, base: u64) -> Self {
        let mut t = self.clone();
        for r in &mut t.regions {
            r.base = r.base.wrapping_add(base);
        }
        for c in &mut t.cqs {
            c.ring = c.ring.wrapping_add(base);
            c.dbrec = c.dbrec.wrapping_add(base);
        }
        for q in &mut t.queues {
            q.ring = q.ring.wrapping_add(base);
            q.dbrec = q.dbrec.wrapping_add(base);
            q.doorbell = q.doorbell.wrapping_add(base);
        }
        t
    }

    /// The scratch length the engine needs: the copy unit, and every queue's longest
    /// message (a READ is read whole before it lands).
    pub fn scratch_len(&self) -> u64 {
        self.queues
            .iter()
            .map(|q| q.max_message_bytes)
            .fold(WRITE_COPY_CHUNK, u64::max)
    }

    /// Checks what the engine relies on and does not check itself: every region lies in
    /// memory `data(addr, len)` accepts and every ring, CQ, doorbell record and doorbell
    /// in memory `queue(addr, len)` accepts, 64-bit words are 8-byte aligned, a region's
    /// `base ≡ start` mod 8, rings and CQs have valid sizes (a CQ of 0 entries, or a ring
    /// of more than 2^15 WQEBBs, is refused), the queue table is sorted by QPN, and the
    /// scratch need stays within [`MAX_SCRATCH_BYTES`].
    pub fn check(
        &self,
        data: &dyn Fn(u64, u64) -> bool,
        queue: &dyn Fn(u64, u64) -> bool,
    ) -> Result<(), TableError> {
        let valid = queue;
        let err = |what: String| Err(TableError(what));
        let word = |name: &str, addr: u64| -> Result<(), TableError> {
            if addr % 8 != 0 || !valid(addr, 8) {
                return Err(TableError(format!(
                    "{name} at {addr:#x}: not an aligned 8-byte word of valid memory"
                )));
            }
            Ok(())
        };
        for (i, r) in self.regions.iter().enumerate() {
            if r.len == 0 || !data(r.base, r.len) {
                return err(format!("region {i}: {} bytes at {:#x}", r.len, r.base));
            }
            if r.base.wrapping_sub(r.start) % 8 != 0 {
                return err(format!("region {i}: base and start differ mod 8"));
            }
        }
        for (i, c) in self.cqs.iter().enumerate() {
            if c.entries == 0
                || !c.entries.is_power_of_two()
                || c.entries > 1 << 22
                || c.log2_entries != c.entries.trailing_zeros()
            {
                return err(format!("CQ {i}: {} entries", c.entries));
            }
            if c.ring % 8 != 0 || !valid(c.ring, u64::from(c.entries) * 64) {
                return err(format!("CQ {i}: ring at {:#x}", c.ring));
            }
            word(&format!("CQ {i} doorbell record"), c.dbrec)?;
            if c.mode > cq_mode::COLLAPSED {
                return err(format!("CQ {i}: mode {}", c.mode));
            }
        }
        for (i, q) in self.queues.iter().enumerate() {
            if q.log_wqebbs > 15 || !valid(q.ring, 64u64 << q.log_wqebbs) {
                return err(format!("queue {i}: ring at {:#x}", q.ring));
            }
            word(&format!("queue {i} doorbell record"), q.dbrec)?;
            word(&format!("queue {i} doorbell"), q.doorbell)?;
            if q.max_message_bytes > MAX_SCRATCH_BYTES {
                return err(format!(
                    "queue {i}: max_message_bytes {} above {MAX_SCRATCH_BYTES}",
                    q.max_message_bytes
                ));
            }
            if i > 0 && self.queues[i - 1].qpn >= q.qpn {
                return err("the queue table is not sorted by QPN".into());
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if n.lid > 0xffff {
                return err(format!("node {i}: LID {:#x}", n.lid));
            }
        }
        Ok(())
    }
}
