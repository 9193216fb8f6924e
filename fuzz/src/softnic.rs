//! The `softnic` target: arbitrary send rings, doorbell records, doorbells and CQ doorbell
//! records fed to the software NIC, which must never panic and never touch memory outside
//! its registered regions and the queue memory it was given.
//!
//! # Input format
//!
//! A byte cursor (bytes past the end read as zero), so that inputs are easy to write by
//! hand and the seed corpus holds real WQE streams ([`SoftNicCase::to_bytes`]):
//!
//! | bytes | meaning |
//! |---|---|
//! | 0 | flags: bit 0 DC (else RC), bit 1 the NIC reads the record only on doorbells, bit 2 collapsed send CQ, bit 3 leave the RC queue unconnected, bit 4 store `doorbell` raw (else ring as a producer does) |
//! | 1 | send ring: `1 << (b % 5)` WQEBBs (up to 16: enough to wrap, and cheap to execute) |
//! | 2 | send CQ: `1 << (b % 5)` entries |
//! | 3 | response delay: `b % 3` |
//! | 4..6 | `i16` (little-endian) added to the producer counter to make the doorbell record, clamped to `-W..=2W` for a ring of `W` WQEBBs (and the record to at least 0): the NIC then runs at most three laps of the ring, which keeps executions fast; records far behind or ahead are the proptest suite's (`tests/softnic_fuzz.rs`) |
//! | 6..14 | the raw doorbell value (native order) |
//! | 14..18 | the CQ doorbell record's consumer index (little-endian) |
//! | 18.. | operations, each an op byte (`% 5`) and its operands |
//!
//! Operations, applied in order to a shadow of the ring that is then copied in:
//! - 0, a recipe: a WQE built with the crate's builders from `kind, flags, remote place,
//!   local count (% 4) × (place, len), payload length (% 41) and bytes, 4 × u64 words,
//!   address vector (form, LID, DCT and key picks)`, at the producer counter;
//! - 1, a raw block: 64 bytes at the producer counter;
//! - 2, a mutation: ring offset (u16), XOR mask (u8);
//! - 3, an address patch: ring offset (u16), a place: its address, big-endian, over the
//!   8 bytes at the offset (rounded down to 8), so that raw blocks name real memory;
//! - 4, a key patch: ring offset (u16), key pick (u8), remote (u8 bit 0): a real or made-up
//!   key, big-endian, over the 4 bytes at the offset (rounded down to 4).
//!
//! A place is `area (u8, % 8: six registered areas, then an unregistered buffer), offset
//! (i8), key pick (u8: 0 the area's own, else area or word `pick - 1`)`.

use std::sync::Arc;

#[path = "../../tests/softnic_support/recipe.rs"]
mod recipe;
use recipe::{recipe_operation, recipe_target};

use ibgda::cq::{parse_cqe, Completion};
use ibgda::memory::DmaBuffer;
use ibgda::queue::{
    CompletionQueueMemory, RawCompletionQueue, RawSendQueue, SendQueueMemory, CQE_INIT_OP_OWN,
};
use ibgda::softnic::{
    Access, CqMode, DctConfig, DctNumber, DoorbellWatch, Fabric, MemoryRegion, NodeId, QpConfig,
    ReceiveConfig,
};
use ibgda::wqe::*;

/// The guard byte around every registered region and in the unregistered buffer.
pub const GUARD: u8 = 0xa5;
/// Guard bytes on each side of a region.
pub const GUARD_LEN: usize = 64;
/// Bytes of the header before the operations.
pub const HEADER: usize = 18;

/// A place in memory, as an input names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Place {
    /// 0..6 an area ([`World`]'s order), else the unregistered buffer.
    pub area: u8,
    /// Offset from the area's first registered byte.
    pub offset: i8,
    /// 0: the area's own key; `k > 0`: area `k - 1`'s key, or past the areas a word.
    pub key: u8,
}

/// A WQE to build.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recipe {
    /// 0 NOP, 1 DUMP, 2 WRITE, 3 inline WRITE, 4 WRITE_WITH_IMM, 5 READ, 6 compare-swap,
    /// 7 masked compare-swap, else fetch-add / masked fetch-add.
    pub kind: u8,
    /// The control segment's `fm_ce_se` byte (reserved bits cleared).
    pub flags: u8,
    /// The remote address and key.
    pub remote: Place,
    /// Local buffers and their lengths (at most 3).
    pub local: Vec<(Place, u8)>,
    /// An inline payload (at most 40 bytes).
    pub payload: Vec<u8>,
    /// Operands and made-up keys.
    pub words: [u64; 4],
    /// Full address vector; LID, DCT and DC-key picks (0 the right one).
    pub av: [u8; 4],
}

/// One operation on the ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// A WQE from a recipe.
    Recipe(Recipe),
    /// A raw block.
    Raw([u8; 64]),
    /// XOR a ring byte.
    Mutate {
        /// Ring offset (taken modulo the ring).
        at: u16,
        /// The mask.
        mask: u8,
    },
    /// Write a place's address into the ring.
    Address {
        /// Ring offset (taken modulo the ring, rounded down to 8).
        at: u16,
        /// The place.
        place: Place,
    },
    /// Write a key into the ring.
    Key {
        /// Ring offset (taken modulo the ring, rounded down to 4).
        at: u16,
        /// The key pick (as [`Place::key`], against area `pick - 1`).
        pick: u8,
        /// An rkey (else an lkey).
        remote: bool,
    },
}

/// A whole `softnic` input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SoftNicCase {
    /// Byte 0.
    pub flags: u8,
    /// Byte 1.
    pub ring_log2: u8,
    /// Byte 2.
    pub cq_log2: u8,
    /// Byte 3.
    pub delay: u8,
    /// Bytes 4..6: an `i16` offset of the record from the producer counter.
    pub record_offset: u16,
    /// Bytes 6..14.
    pub doorbell: u64,
    /// Bytes 14..18.
    pub cq_record: u32,
    /// The operations.
    pub ops: Vec<Op>,
}

/// Flag bits of byte 0.
pub mod flag {
    /// DC initiator (else RC).
    pub const DC: u8 = 1;
    /// The NIC reads the record only on doorbells.
    pub const DOORBELL_ONLY: u8 = 2;
    /// Collapsed send CQ.
    pub const COLLAPSED: u8 = 4;
    /// Leave the RC queue unconnected.
    pub const UNCONNECTED: u8 = 8;
    /// Store the raw doorbell value instead of ringing.
    pub const RAW_DOORBELL: u8 = 16;
}

struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }
    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for b in &mut out {
            *b = self.u8();
        }
        out
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.bytes())
    }
    fn done(&self) -> bool {
        self.at >= self.data.len()
    }
    fn place(&mut self) -> Place {
        Place {
            area: self.u8(),
            offset: self.u8() as i8,
            key: self.u8(),
        }
    }
}

impl SoftNicCase {
    /// Decodes an input (never fails: missing bytes are zero).
    pub fn from_bytes(data: &[u8]) -> Self {
        let mut c = Cursor { data, at: 0 };
        let mut case = Self {
            flags: c.u8(),
            ring_log2: c.u8(),
            cq_log2: c.u8(),
            delay: c.u8(),
            record_offset: c.u16(),
            doorbell: u64::from_ne_bytes(c.bytes()),
            cq_record: u32::from_le_bytes(c.bytes()),
            ops: Vec::new(),
        };
        while !c.done() {
            let op = match c.u8() % 5 {
                0 => {
                    let kind = c.u8();
                    let flags = c.u8();
                    let remote = c.place();
                    let local = (0..c.u8() % 4).map(|_| (c.place(), c.u8())).collect();
                    let payload = (0..c.u8() % 41).map(|_| c.u8()).collect();
                    let words = [0; 4].map(|_: u64| u64::from_le_bytes(c.bytes()));
                    let av = c.bytes();
                    Op::Recipe(Recipe {
                        kind,
                        flags,
                        remote,
                        local,
                        payload,
                        words,
                        av,
                    })
                }
                1 => Op::Raw(c.bytes()),
                2 => Op::Mutate {
                    at: c.u16(),
                    mask: c.u8(),
                },
                3 => Op::Address {
                    at: c.u16(),
                    place: c.place(),
                },
                _ => Op::Key {
                    at: c.u16(),
                    pick: c.u8(),
                    remote: c.u8() & 1 == 1,
                },
            };
            case.ops.push(op);
        }
        case
    }

    /// Encodes a case so that [`SoftNicCase::from_bytes`] gives it back (for seeds).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![self.flags, self.ring_log2, self.cq_log2, self.delay];
        v.extend(self.record_offset.to_le_bytes());
        v.extend(self.doorbell.to_ne_bytes());
        v.extend(self.cq_record.to_le_bytes());
        let place = |v: &mut Vec<u8>, p: &Place| v.extend([p.area, p.offset as u8, p.key]);
        for op in &self.ops {
            match op {
                Op::Recipe(r) => {
                    v.extend([0, r.kind, r.flags]);
                    place(&mut v, &r.remote);
                    v.push(r.local.len() as u8);
                    for (p, len) in &r.local {
                        place(&mut v, p);
                        v.push(*len);
                    }
                    v.push(r.payload.len() as u8);
                    v.extend(&r.payload);
                    for w in r.words {
                        v.extend(w.to_le_bytes());
                    }
                    v.extend(r.av);
                }
                Op::Raw(block) => {
                    v.push(1);
                    v.extend(block);
                }
                Op::Mutate { at, mask } => {
                    v.push(2);
                    v.extend(at.to_le_bytes());
                    v.push(*mask);
                }
                Op::Address { at, place: p } => {
                    v.push(3);
                    v.extend(at.to_le_bytes());
                    place(&mut v, p);
                }
                Op::Key { at, pick, remote } => {
                    v.push(4);
                    v.extend(at.to_le_bytes());
                    v.extend([*pick, u8::from(*remote)]);
                }
            }
        }
        v
    }

    fn dc(&self) -> bool {
        self.flags & flag::DC != 0
    }
    /// Send ring size in WQEBBs.
    pub fn ring_wqebbs(&self) -> usize {
        1 << (self.ring_log2 % 5)
    }
}

/// The areas' sizes, rights, nodes (0 requester, 1 responder) and pattern seeds.
const AREAS: [(usize, u8, usize, u8); 6] = [
    (64, 0, 0, 3),
    (64, 0, 1, 4),
    (48, 1, 1, 5),
    (40, 2, 0, 6),
    (64, 1, 1, 7),
    (64, 1, 0, 8),
];

fn area_access(rights: u8) -> Access {
    match rights {
        0 => Access::REMOTE_READ,
        1 => Access::all(),
        _ => Access::LOCAL_WRITE,
    }
}

/// Memory reused from one execution to the next (allocating page-aligned rings and CQs
/// for every input would dominate the run): each execution resets it to what fresh memory
/// holds, and a new fabric is made over it, so executions stay independent.
pub struct Pool {
    /// Send queues by `ring_log2 % 5`.
    sqs: Vec<RawSendQueue>,
    /// Send CQs by `cq_log2 % 5`.
    cqs: Vec<RawCompletionQueue>,
    responder_sq: RawSendQueue,
    responder_cq: RawCompletionQueue,
    responder_receive_cq: RawCompletionQueue,
    dct_cq: RawCompletionQueue,
    /// The areas' whole buffers (guards included) and their initial images.
    areas: Vec<(Arc<DmaBuffer>, Vec<u8>)>,
    stranger: Arc<DmaBuffer>,
}

impl Pool {
    /// Fresh memory for every shape an input can ask for.
    pub fn new() -> Self {
        let sq = |wqebbs| {
            let size = RingSize::new(wqebbs).expect("ring size");
            RawSendQueue::new(SendQueueMemory::allocate(size).expect("ring"))
        };
        let cq = |entries| {
            RawCompletionQueue::new(CompletionQueueMemory::allocate(entries).expect("cq"))
        };
        let areas = AREAS
            .iter()
            .map(|&(len, _, _, seed)| {
                let total = (len + 2 * GUARD_LEN).next_multiple_of(8);
                let mut initial = vec![GUARD; total];
                for (i, b) in initial[GUARD_LEN..GUARD_LEN + len].iter_mut().enumerate() {
                    *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
                }
                (
                    Arc::new(DmaBuffer::zeroed(total, 64).expect("area")),
                    initial,
                )
            })
            .collect();
        Self {
            sqs: (0..5).map(|k| sq(1 << k)).collect(),
            cqs: (0..5).map(|k| cq(1 << k)).collect(),
            responder_sq: sq(1),
            responder_cq: cq(2),
            responder_receive_cq: cq(2),
            dct_cq: cq(2),
            areas,
            stranger: Arc::new(DmaBuffer::zeroed(256, 64).expect("stranger")),
        }
    }

    /// Everything back to what fresh memory holds (and the areas to their images).
    fn reset(&mut self, case: &SoftNicCase) {
        self.sqs[usize::from(case.ring_log2 % 5)].reset();
        self.cqs[usize::from(case.cq_log2 % 5)].reset();
        self.responder_sq.reset();
        self.responder_cq.reset();
        self.responder_receive_cq.reset();
        self.dct_cq.reset();
        for (buffer, initial) in &self.areas {
            buffer.write(0, initial).expect("area image");
        }
        self.stranger.fill(0, 256, GUARD).expect("guard");
    }
}

impl Default for Pool {
    fn default() -> Self {
        Self::new()
    }
}

/// A registered region in the middle of a guarded buffer, filled with a pattern.
struct Area<'p> {
    buffer: &'p DmaBuffer,
    region: MemoryRegion,
    initial: &'p [u8],
}

/// Everything the NIC may and may not touch.
pub struct World<'p> {
    fabric: Fabric,
    qpn: Qpn,
    sq: &'p RawSendQueue,
    cq: &'p RawCompletionQueue,
    receive_cqs: [&'p RawCompletionQueue; 2],
    /// 0 requester read-only, 1 responder read-only, 2 responder all rights, 3 requester
    /// local-write, 4 responder's second area (all rights), 5 requester all rights.
    areas: Vec<Area<'p>>,
    /// Registered nowhere; places past the areas name it.
    stranger: &'p DmaBuffer,
    dct: DctNumber,
    dc_key: u64,
}

const DC_KEY: u64 = 0x5623_ceaf;

impl<'p> World<'p> {
    /// A fabric, nodes, regions and queues for `case` over `pool`'s memory (reset first).
    pub fn new(case: &SoftNicCase, pool: &'p mut Pool) -> Self {
        pool.reset(case);
        let pool: &'p Pool = pool;
        let fabric = Fabric::new();
        let nodes: [NodeId; 2] = [
            fabric.add_node(1).expect("node"),
            fabric.add_node(2).expect("node"),
        ];
        let mode = |collapsed: bool| {
            if collapsed {
                CqMode::Collapsed
            } else {
                CqMode::Ring
            }
        };
        let sq = &pool.sqs[usize::from(case.ring_log2 % 5)];
        let cq = &pool.cqs[usize::from(case.cq_log2 % 5)];
        let transport = if case.dc() {
            TransportKind::Dc
        } else {
            TransportKind::Rc
        };
        let config = QpConfig {
            cq_mode: mode(case.flags & flag::COLLAPSED != 0),
            response_delay: u32::from(case.delay % 3),
            doorbell_watch: if case.flags & flag::DOORBELL_ONLY != 0 {
                DoorbellWatch::DoorbellOnly
            } else {
                DoorbellWatch::PollRecord
            },
            max_message_bytes: 1 << 12,
            ..QpConfig::new(transport, sq.memory(), cq.memory())
        };
        let qpn = fabric.create_qp(nodes[0], config).expect("qp");
        // The responder: an RC queue pair with a receive CQ, and a DC target.
        let responder_config = QpConfig {
            receive: Some(ReceiveConfig {
                cq: pool.responder_receive_cq.memory(),
                cq_mode: CqMode::Ring,
            }),
            ..QpConfig::new(
                TransportKind::Rc,
                pool.responder_sq.memory(),
                pool.responder_cq.memory(),
            )
        };
        let responder = fabric
            .create_qp(nodes[1], responder_config)
            .expect("responder");
        if !case.dc() && case.flags & flag::UNCONNECTED == 0 {
            fabric.connect(qpn, responder).expect("connect");
        }
        fabric.post_receives(responder, 3).expect("credits");
        let dct = fabric
            .create_dct(
                nodes[1],
                DctConfig {
                    dc_key: DC_KEY,
                    receive: Some(ReceiveConfig {
                        cq: pool.dct_cq.memory(),
                        cq_mode: CqMode::Ring,
                    }),
                },
            )
            .expect("dct");
        fabric.post_receives(dct, 3).expect("credits");
        let areas = AREAS
            .iter()
            .zip(&pool.areas)
            .map(|(&(len, rights, node, _), (buffer, initial))| Area {
                region: fabric
                    .register(
                        nodes[node],
                        buffer.clone(),
                        GUARD_LEN,
                        len,
                        area_access(rights),
                    )
                    .expect("register"),
                buffer,
                initial,
            })
            .collect();
        Self {
            fabric,
            qpn,
            sq,
            cq,
            receive_cqs: [&pool.responder_receive_cq, &pool.dct_cq],
            areas,
            stranger: &pool.stranger,
            dct,
            dc_key: DC_KEY,
        }
    }

    fn area(&self, index: u8) -> Option<&Area<'p>> {
        self.areas.get(usize::from(index % 8))
    }

    fn address(&self, place: Place) -> u64 {
        let offset = i64::from(place.offset) as u64;
        match self.area(place.area) {
            Some(a) => a.region.addr().wrapping_add(offset),
            None => self.stranger.addr().wrapping_add(128).wrapping_add(offset),
        }
    }

    fn key(&self, pick: u8, own: u8, remote: bool, words: &[u64; 4]) -> u32 {
        let index = if pick == 0 { own } else { pick - 1 };
        match self.area(index) {
            Some(a) if remote => a.region.rkey().0,
            Some(a) => a.region.lkey().0,
            None => words[usize::from(index) % 4] as u32,
        }
    }

    fn place_key(&self, place: Place, remote: bool, words: &[u64; 4]) -> u32 {
        self.key(place.key, place.area, remote, words)
    }

    fn target(&self, r: &Recipe) -> Option<AnyDcTarget> {
        let [full, lid, dct, key] = r.av;
        let lid = [2, 1, 99, r.words[0] as u16][usize::from(lid % 4)];
        let dct = [
            self.dct.get(),
            self.qpn.get(),
            0x42,
            r.words[1] as u32 & 0xff_ffff,
        ][usize::from(dct % 4)];
        let dc_key = [self.dc_key, self.dc_key, 0, r.words[2]][usize::from(key % 4)];
        recipe_target(full & 1 == 1, lid, dct, dc_key)
    }

    /// Builds a recipe's WQE (or `None` if the builders refuse it).
    fn build<'a>(&self, r: &'a Recipe, dc: bool, sges: &'a [Sge]) -> Option<Wqe<AnyWqe<'a>>> {
        let remote = RemoteAddress::new(
            self.address(r.remote),
            RKey(self.place_key(r.remote, true, &r.words)),
        );
        let result = match r.local.first() {
            Some(&(place, _)) => LocalBuffer::new(
                self.address(place),
                LKey(self.place_key(place, false, &r.words)),
            ),
            None => self.areas[5].region.local(0),
        };
        let op = recipe_operation(r.kind, r.words, remote, result, sges, &r.payload);
        let flags =
            ControlFlags::from_byte(r.flags & !ControlFlags::RESERVED_BITS).unwrap_or_default();
        AnyWqe {
            target: if dc { self.target(r) } else { None },
            flags,
            stream_id: 0,
            op,
        }
        .build()
        .ok()
    }
}

/// What one run did (for the corpus generator's self-check).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoftNicOutcome {
    /// WQEs the NIC consumed.
    pub wqes: u64,
    /// CQEs on the send CQ.
    pub cqes: u32,
    /// Of those, error CQEs.
    pub errors: u32,
}

/// The `softnic` target. Panics (the fuzzer's finding) if the NIC panics, touches a guard
/// byte, a read-only region, the unregistered buffer or the send queue's memory, writes a
/// CQE that does not parse or names another queue, or consumes past the doorbell record.
pub fn fuzz_softnic(data: &[u8]) -> SoftNicOutcome {
    thread_local! {
        static POOL: std::cell::RefCell<Pool> = std::cell::RefCell::new(Pool::new());
    }
    POOL.with(|pool| run(data, &mut pool.borrow_mut()))
}

/// [`fuzz_softnic`] over `pool`'s memory.
pub fn run(data: &[u8], pool: &mut Pool) -> SoftNicOutcome {
    let case = SoftNicCase::from_bytes(data);
    let world = World::new(&case, pool);
    let wqebbs = case.ring_wqebbs();
    let ring_len = wqebbs * WQEBB_BYTES;
    let mut shadow = vec![0u8; ring_len];
    let mut counter: u64 = 0;
    let dc = case.dc();
    for op in &case.ops {
        match op {
            Op::Recipe(r) => {
                let sges: Vec<Sge> = r
                    .local
                    .iter()
                    .filter_map(|&(place, len)| {
                        Sge::new(
                            world.address(place),
                            u32::from(len),
                            LKey(world.place_key(place, false, &r.words)),
                        )
                        .ok()
                    })
                    .collect();
                let Some(wqe) = world.build(r, dc, &sges) else {
                    continue;
                };
                if counter + u64::from(wqe.wqebbs()) > wqebbs as u64 {
                    continue;
                }
                let mut ring = SendRing::new(&mut shadow, WqeLimits::default()).expect("ring");
                if let Ok(used) = ring.write(WqeIndex(counter as u16), world.qpn, &wqe) {
                    counter += u64::from(used);
                }
            }
            Op::Raw(block) => {
                if counter < wqebbs as u64 {
                    let at = counter as usize * WQEBB_BYTES;
                    shadow[at..at + WQEBB_BYTES].copy_from_slice(block);
                    counter += 1;
                }
            }
            Op::Mutate { at, mask } => shadow[usize::from(*at) % ring_len] ^= mask,
            Op::Address { at, place } => {
                let at = (usize::from(*at) % ring_len) & !7;
                shadow[at..at + 8].copy_from_slice(&world.address(*place).to_be_bytes());
            }
            Op::Key { at, pick, remote } => {
                let at = (usize::from(*at) % ring_len) & !3;
                let key = world.key(*pick, 0, *remote, &[0x1234_5678, 0, 0xffff_ffff, 0x100]);
                shadow[at..at + 4].copy_from_slice(&key.to_be_bytes());
            }
        }
    }
    // SAFETY: only the software NIC executes this ring, and it accesses only its registered
    // `DmaBuffer`s, atomically, whatever the WQEs say.
    unsafe { world.sq.write_ring(0, &shadow) }.expect("ring write");
    let ring = wqebbs as i64;
    let offset = i64::from(case.record_offset as i16).clamp(-ring, 2 * ring);
    // At most 16 + 32: the record fits its 16 bits without wrapping.
    let record = (counter as i64 + offset).max(0) as u16;
    let mut record_bytes = [0u8; 8];
    record_bytes[4..].copy_from_slice(&u32::from(record).to_be_bytes());
    world.sq.store_dbrec(record_bytes);
    let mut cq_record = [0u8; 8];
    cq_record[..4].copy_from_slice(&(case.cq_record & 0xff_ffff).to_be_bytes());
    world.cq.store_dbrec(cq_record);
    if case.flags & flag::RAW_DOORBELL != 0 {
        world.sq.store_doorbell(case.doorbell.to_ne_bytes());
    } else {
        let mut bell = [0u8; 8];
        bell[..4].copy_from_slice(&(u32::from(counter as u16) << 8).to_be_bytes());
        bell[4..].copy_from_slice(&(world.qpn.get() << 8).to_be_bytes());
        world.sq.store_doorbell(bell);
    }

    let memory = world.sq.memory();
    let sq_before = (
        memory.ring_bytes(),
        memory.dbrec_bytes(),
        memory.doorbell_bytes(),
    );
    world.fabric.run_until_idle();
    check(&world, &sq_before, record)
}

fn unwritten(cqe: &[u8; 64]) -> bool {
    cqe[63] == CQE_INIT_OP_OWN && cqe[..63].iter().all(|&b| b == 0)
}

fn check(
    world: &World,
    sq_before: &(Vec<u8>, [u8; 8], Option<[u8; 8]>),
    record: u16,
) -> SoftNicOutcome {
    for (k, area) in world.areas.iter().enumerate() {
        let image = area.buffer.to_vec();
        let len = area.region.len();
        assert!(
            image[..GUARD_LEN].iter().all(|&b| b == GUARD),
            "area {k}: guard before the region changed"
        );
        assert!(
            image[GUARD_LEN + len..].iter().all(|&b| b == GUARD),
            "area {k}: guard after the region changed"
        );
        if !area.region.access().contains(Access::LOCAL_WRITE) {
            assert_eq!(image, area.initial, "read-only area {k} changed");
        }
    }
    assert!(
        world.stranger.to_vec().iter().all(|&b| b == GUARD),
        "unregistered memory changed"
    );
    let memory = world.sq.memory();
    let sq_after = (
        memory.ring_bytes(),
        memory.dbrec_bytes(),
        memory.doorbell_bytes(),
    );
    assert!(sq_before == &sq_after, "the NIC wrote the send queue");
    let mut outcome = SoftNicOutcome::default();
    for slot in 0..world.cq.entries() {
        let cqe = world.cq.entry(slot);
        if unwritten(&cqe) {
            continue;
        }
        outcome.cqes += 1;
        match parse_cqe(&cqe) {
            Ok(Completion::Requester(c)) => assert_eq!(c.qpn, world.qpn.get()),
            Ok(Completion::Error(e)) => {
                assert_eq!(e.qpn, world.qpn.get());
                outcome.errors += 1;
            }
            other => panic!("send CQ slot {slot}: {other:?}"),
        }
    }
    for cq in &world.receive_cqs {
        for slot in 0..cq.entries() {
            let cqe = cq.entry(slot);
            if unwritten(&cqe) {
                continue;
            }
            assert!(
                matches!(parse_cqe(&cqe), Ok(Completion::Responder(r)) if r.source_qpn == world.qpn.get()),
                "receive CQ slot {slot}: {:?}",
                parse_cqe(&cqe)
            );
        }
    }
    let status = world.fabric.qp_status(world.qpn).expect("status");
    assert!(
        status.consumer <= u64::from(record),
        "consumed {} past the record {record}",
        status.consumer
    );
    outcome.wqes = status.wqes;
    outcome
}
