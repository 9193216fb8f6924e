//! Memory regions: registration, keys, access rights and address translation.

use core::fmt;
use core::hash::{BuildHasherDefault, Hasher};
use core::sync::atomic::{AtomicBool, Ordering};
use std::collections::HashMap;
use std::sync::{Arc, Weak};

use crate::memory::DmaBuffer;
use crate::wqe::{LKey, LocalBuffer, RKey, RemoteAddress, Sge, WqeError};

use super::fabric::{FabricShared, NodeId};

/// A node's key table (lkey or rkey to region). Every WQE looks a key up here, so the
/// hash is one multiplication instead of SipHash: the keys are the fabric's own (it hands
/// them out), so a WQE's key can only miss or hit, never steer where entries are stored.
pub(crate) type KeyTable = HashMap<u32, Arc<Region>, BuildHasherDefault<KeyHasher>>;

/// Multiplicative (Fibonacci) hashing of a 32-bit key (see [`KeyTable`]).
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `u32` keys are hashed; any other input still hashes deterministically.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, key: u32) {
        // The high half of the product folded down, so keys that differ only in their
        // high bits still spread over the table's low-bit bucket index.
        let product = u64::from(key).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = product ^ (product >> 32);
    }
}

bitflags::bitflags! {
    /// The access rights of a memory region, with the values of verbs' `IBV_ACCESS_*`.
    /// The NIC may always read a region locally (the gather of a WRITE, a DUMP).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Access: u32 {
        /// The NIC may write the region for local operations: READ destinations and
        /// atomic results.
        const LOCAL_WRITE = 1;
        /// Remote WRITEs may target the region.
        const REMOTE_WRITE = 1 << 1;
        /// Remote READs may read the region.
        const REMOTE_READ = 1 << 2;
        /// Remote atomics may operate on the region.
        const REMOTE_ATOMIC = 1 << 3;
        /// The NIC may write the region out of order (`IBV_ACCESS_RELAXED_ORDERING`, the
        /// first of verbs' optional flags): PCIe relaxed ordering, which NVSHMEM and NCCL
        /// ask for on GPU memory, where it raises write bandwidth through PCIe switches. A
        /// hint: a device without it ignores it, and so do the software NICs.
        const RELAXED_ORDERING = 1 << 20;
    }
}

/// A registered region as the NIC's tables hold it. The buffer is kept alive by the `Arc`,
/// so the NIC can never touch freed memory.
pub(crate) struct Region {
    pub(crate) node: NodeId,
    pub(crate) buffer: Arc<DmaBuffer>,
    /// First byte of the region in the buffer.
    pub(crate) offset: usize,
    pub(crate) len: usize,
    /// The virtual address of the region's first byte.
    pub(crate) start: u64,
    pub(crate) access: Access,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    /// Cleared when the region is deregistered; responses still in flight to it are then
    /// dropped.
    pub(crate) live: AtomicBool,
}

impl Region {
    /// The buffer offset of the `len` bytes at virtual address `addr`, if they lie inside
    /// the region.
    pub(crate) fn translate(&self, addr: u64, len: u64) -> Option<usize> {
        let delta = addr.checked_sub(self.start)?;
        let end = delta.checked_add(len)?;
        if end > self.len as u64 {
            return None;
        }
        self.offset.checked_add(usize::try_from(delta).ok()?)
    }

    pub(crate) fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }
}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("node", &self.node)
            .field("start", &format_args!("{:#x}", self.start))
            .field("len", &self.len)
            .field("access", &self.access)
            .field("lkey", &format_args!("{:#010x}", self.lkey))
            .field("rkey", &format_args!("{:#010x}", self.rkey))
            .finish()
    }
}

/// Removes the region from its node's tables when the last handle goes.
struct Registration {
    region: Arc<Region>,
    fabric: Weak<FabricShared>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(shared) = self.fabric.upgrade() {
            shared.deregister(&self.region);
        }
        self.region.live.store(false, Ordering::Release);
    }
}

/// A registered memory region: `len` bytes of a [`DmaBuffer`] that the NIC may access
/// under its keys and rights. Cloning shares the registration; when the last handle is
/// dropped the region is deregistered and its keys stop resolving.
#[derive(Clone)]
pub struct MemoryRegion {
    registration: Arc<Registration>,
}

impl MemoryRegion {
    pub(crate) fn new(region: Arc<Region>, fabric: Weak<FabricShared>) -> Self {
        Self {
            registration: Arc::new(Registration { region, fabric }),
        }
    }

    fn region(&self) -> &Region {
        &self.registration.region
    }

    /// The key local operations (data segments) name the region by.
    pub fn lkey(&self) -> LKey {
        LKey(self.region().lkey)
    }
    /// The key remote operations (remote address segments) name the region by.
    pub fn rkey(&self) -> RKey {
        RKey(self.region().rkey)
    }
    /// The virtual address of the region's first byte.
    pub fn addr(&self) -> u64 {
        self.region().start
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.region().len
    }
    /// Whether the region is empty (never: regions have at least one byte).
    pub fn is_empty(&self) -> bool {
        self.region().len == 0
    }
    /// The access rights.
    pub fn access(&self) -> Access {
        self.region().access
    }
    /// The node the region belongs to.
    pub fn node(&self) -> NodeId {
        self.region().node
    }
    /// The buffer the region lies in.
    pub fn buffer(&self) -> &Arc<DmaBuffer> {
        &self.region().buffer
    }
    /// The offset of the region's first byte in its buffer.
    pub fn buffer_offset(&self) -> usize {
        self.region().offset
    }

    /// The virtual address `offset` bytes into the region (not checked against its length,
    /// so that tests can name addresses outside it).
    pub fn addr_at(&self, offset: u64) -> u64 {
        self.region().start.wrapping_add(offset)
    }
    /// A gather/scatter entry of `len` bytes starting `offset` bytes into the region.
    pub fn sge(&self, offset: u64, len: u32) -> Result<Sge, WqeError> {
        Sge::new(self.addr_at(offset), len, self.lkey())
    }
    /// The remote address `offset` bytes into the region.
    pub fn remote(&self, offset: u64) -> RemoteAddress {
        RemoteAddress::new(self.addr_at(offset), self.rkey())
    }
    /// The local buffer `offset` bytes into the region (for an atomic's result).
    pub fn local(&self, offset: u64) -> LocalBuffer {
        LocalBuffer::new(self.addr_at(offset), self.lkey())
    }
}

impl fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.region().fmt(f)
    }
}

/// A bijection of `u32` (the "lowbias32" integer hash): distinct inputs give distinct
/// keys, which look unrelated to each other.
const fn scramble(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// Key values the NIC never hands out: 0, and rdma-core's scatter-list terminator 0x100.
const RESERVED_KEYS: [u32; 2] = [0, 0x100];

/// A node's key generator: deterministic, never repeats a key (keys of deregistered
/// regions are never reused), and an lkey never equals an rkey.
#[derive(Debug)]
pub(crate) struct KeySpace {
    salt: u32,
    next: u32,
}

impl KeySpace {
    /// The key space of `node` on the fabric whose salt is `fabric_salt`.
    pub(crate) fn new(node: NodeId, fabric_salt: u32) -> Self {
        Self {
            salt: scramble(node.0 ^ 0x9e37_79b9) ^ fabric_salt,
            next: 0,
        }
    }

    /// The next (lkey, rkey) pair, or `None` when the space is used up.
    pub(crate) fn next_pair(&mut self) -> Option<(u32, u32)> {
        loop {
            let seq = self.next;
            // Inputs 2·seq and 2·seq + 1 must stay below 2^32 to remain distinct.
            if seq >= 1 << 31 {
                return None;
            }
            self.next = seq + 1;
            let lkey = scramble((seq << 1).wrapping_add(self.salt));
            let rkey = scramble(((seq << 1) | 1).wrapping_add(self.salt));
            if !RESERVED_KEYS.contains(&lkey) && !RESERVED_KEYS.contains(&rkey) {
                return Some((lkey, rkey));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn keys_are_distinct_and_deterministic() {
        let mut a = KeySpace::new(NodeId(0), 0);
        let mut again = KeySpace::new(NodeId(0), 0);
        let mut seen = HashSet::new();
        // Fewer rounds under Miri, which interprets every step.
        let rounds = if cfg!(miri) { 300 } else { 10_000 };
        for _ in 0..rounds {
            let (l, r) = a.next_pair().unwrap();
            assert_eq!(again.next_pair(), Some((l, r)));
            assert!(seen.insert(l) && seen.insert(r));
            assert!(!RESERVED_KEYS.contains(&l) && !RESERVED_KEYS.contains(&r));
        }
        let mut b = KeySpace::new(NodeId(1), 0);
        assert_ne!(b.next_pair(), KeySpace::new(NodeId(0), 0).next_pair());
        let mut other_fabric = KeySpace::new(NodeId(0), 0x5a5a_0001);
        assert_ne!(
            other_fabric.next_pair(),
            KeySpace::new(NodeId(0), 0).next_pair()
        );
    }

    #[test]
    fn translation_is_checked() {
        let buffer = Arc::new(DmaBuffer::zeroed(64, 8).unwrap());
        let region = Region {
            node: NodeId(0),
            start: buffer.addr() + 16,
            buffer,
            offset: 16,
            len: 32,
            access: Access::empty(),
            lkey: 1,
            rkey: 2,
            live: AtomicBool::new(true),
        };
        let s = region.start;
        assert_eq!(region.translate(s, 32), Some(16));
        assert_eq!(region.translate(s + 31, 1), Some(47));
        assert_eq!(region.translate(s + 31, 2), None);
        assert_eq!(region.translate(s - 1, 1), None);
        assert_eq!(region.translate(s + 8, u64::MAX), None);
        assert_eq!(region.translate(u64::MAX, 1), None);
        assert_eq!(region.translate(s + 32, 0), Some(48));
    }
}
