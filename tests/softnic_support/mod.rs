//! Shared fixtures of the software-NIC tests: a host-side producer that encodes WQEs with
//! the crate's builders and publishes them by the queue memory conventions, a CQ consumer
//! that follows the owner-bit protocol, and CQE images built by hand from the field table
//! of the mlx5 facts sheet (section 5), independently of the crate's CQE types.
#![allow(dead_code)]

pub mod recipe;

use std::sync::Arc;

use ibgda::memory::DmaBuffer;
use ibgda::queue::{CompletionQueueMemory, RawCompletionQueue, RawSendQueue, SendQueueMemory};
use ibgda::softnic::{
    Access, CqMode, DoorbellWatch, Fabric, MemoryRegion, NodeId, QpConfig, ReceiveConfig,
};
use ibgda::wqe::{Qpn, RingSize, SendRing, TransportKind, Wqe, WqeIndex, WqeLimits, WqeSpec};

/// The byte guard areas around registered regions hold.
pub const GUARD: u8 = 0xa5;
/// Bytes of guard before and after each region.
pub const GUARD_LEN: usize = 64;

/// The byte a fresh region holds at offset `i` (a pattern, so misplaced copies show).
pub fn pattern(seed: u8, i: usize) -> u8 {
    (i as u8).wrapping_mul(31).wrapping_add(seed)
}

// ---------------------------------------------------------------------------------------
// Producer: the host side of a send queue.

/// Posts WQEs to one send queue: encodes each into a shadow ring with [`SendRing`], copies
/// its blocks into the DMA ring, then publishes through the doorbell record and rings the
/// doorbell as the memory conventions say.
pub struct Producer {
    pub memory: RawSendQueue,
    pub qpn: Qpn,
    shadow: Vec<u8>,
    /// Free-running producer counter in WQEBBs.
    pub counter: u64,
}

impl Producer {
    pub fn new(memory: SendQueueMemory, qpn: Qpn) -> Self {
        let shadow = vec![0; memory.ring().len];
        Self {
            memory: RawSendQueue::new(memory),
            qpn,
            shadow,
            counter: 0,
        }
    }

    pub fn wqebbs(&self) -> u64 {
        self.memory.memory().size().wqebbs().into()
    }

    /// Encodes `wqe` at the producer counter; returns its index.
    pub fn post<S: WqeSpec>(&mut self, wqe: &Wqe<S>) -> u16 {
        self.post_for(self.qpn, wqe)
    }

    /// Encodes `wqe` at the producer counter with `qpn` in its control segment.
    pub fn post_for<S: WqeSpec>(&mut self, qpn: Qpn, wqe: &Wqe<S>) -> u16 {
        let index = WqeIndex(self.counter as u16);
        let blocks = {
            let mut ring = SendRing::new(&mut self.shadow, WqeLimits::default()).unwrap();
            ring.write(index, qpn, wqe).unwrap()
        };
        self.copy_blocks(blocks.into());
        index.0
    }

    /// Writes `bytes` (whole WQEBBs) at the producer counter as they are; returns the
    /// index of the first block.
    pub fn post_raw(&mut self, bytes: &[u8]) -> u16 {
        assert_eq!(bytes.len() % 64, 0);
        let index = self.counter as u16;
        let slots = self.wqebbs();
        for (k, block) in bytes.chunks(64).enumerate() {
            let slot = ((self.counter + k as u64) % slots) as usize;
            self.shadow[slot * 64..slot * 64 + 64].copy_from_slice(block);
        }
        self.copy_blocks((bytes.len() / 64) as u64);
        index
    }

    fn copy_blocks(&mut self, blocks: u64) {
        let slots = self.wqebbs();
        for k in 0..blocks {
            let slot = ((self.counter + k) % slots) as usize;
            // SAFETY: only the software NIC executes these rings, and it touches only its
            // registered `DmaBuffer`s, atomically, whatever the WQEs say.
            unsafe {
                self.memory
                    .write_ring(slot * 64, &self.shadow[slot * 64..slot * 64 + 64])
                    .unwrap();
            }
        }
        self.counter += blocks;
    }

    /// Flips the bits of `mask` in ring byte `at` (a corruption after encoding).
    pub fn xor_ring_byte(&mut self, at: usize, mask: u8) {
        let old = self.memory.memory().ring_bytes()[at];
        // SAFETY: as in `copy_blocks`: only the software NIC executes this ring.
        unsafe { self.memory.write_ring(at, &[old ^ mask]).unwrap() };
    }

    /// Encodes `wqe` into a scratch ring at the producer counter's index and returns its
    /// blocks without posting them (to patch bytes before [`Producer::post_raw`]).
    pub fn encode<S: WqeSpec>(&self, wqe: &Wqe<S>) -> Vec<u8> {
        let index = WqeIndex(self.counter as u16);
        let blocks = wqe.wqebbs() as usize;
        let mut scratch = vec![0u8; 64 * 16];
        let mut ring = SendRing::new(&mut scratch, WqeLimits::default()).unwrap();
        ring.write(index, self.qpn, wqe).unwrap();
        let offset = usize::from(index.0 % 16);
        let mut out = Vec::with_capacity(blocks * 64);
        for k in 0..blocks {
            let slot = (offset + k) % 16;
            out.extend_from_slice(&scratch[slot * 64..slot * 64 + 64]);
        }
        out
    }

    /// The 64 bytes of the shadow ring's block holding index `index`.
    pub fn block(&self, index: u16) -> [u8; 64] {
        let slot = (u64::from(index) % self.wqebbs()) as usize;
        self.shadow[slot * 64..slot * 64 + 64].try_into().unwrap()
    }

    /// Stores the doorbell record: bytes 0..4 zero, bytes 4..8 the big-endian counter,
    /// one 64-bit release store.
    pub fn publish_value(&self, counter: u16) {
        let mut bytes = [0u8; 8];
        bytes[4..].copy_from_slice(&u32::from(counter).to_be_bytes());
        self.memory.store_dbrec(bytes);
    }

    pub fn publish(&self) {
        self.publish_value(self.counter as u16);
    }

    /// Rings the doorbell as the GPU libraries do: a control segment's first 8 bytes with
    /// `opmod_idx_opcode = counter << 8` and `qpn_ds = qpn << 8`, one release store.
    pub fn ring_for(&self, qpn: u32) {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&(u32::from(self.counter as u16) << 8).to_be_bytes());
        bytes[4..].copy_from_slice(&(qpn << 8).to_be_bytes());
        self.memory.store_doorbell(bytes);
    }

    pub fn ring(&self) {
        self.ring_for(self.qpn.get());
    }

    /// Publishes everything posted and rings the doorbell.
    pub fn submit(&self) {
        self.publish();
        self.ring();
    }
}

// ---------------------------------------------------------------------------------------
// Consumer: the host side of a CQ.

pub struct Consumer {
    pub memory: RawCompletionQueue,
    /// Free-running consumer index.
    pub index: u32,
}

impl Consumer {
    pub fn new(memory: CompletionQueueMemory) -> Self {
        Self {
            memory: RawCompletionQueue::new(memory),
            index: 0,
        }
    }

    pub fn entry(&self, slot: u32) -> [u8; 64] {
        self.memory.entry(slot)
    }

    /// The owner bit software expects of entry `index`.
    pub fn expected_owner(&self, index: u32) -> u8 {
        ((index / self.memory.entries()) & 1) as u8
    }

    /// The next CQE if software owns it (opcode not invalid, owner bit = pass parity);
    /// consumes it and stores the consumer index into the CQ doorbell record (release).
    pub fn poll(&mut self) -> Option<[u8; 64]> {
        let slot = self.index & (self.memory.entries() - 1);
        let last = self.memory.load_owner_word(slot);
        let op_own = last[7];
        if op_own >> 4 == 0xf || op_own & 1 != self.expected_owner(self.index) {
            return None;
        }
        let cqe = self.entry(slot);
        self.index += 1;
        self.publish();
        Some(cqe)
    }

    pub fn publish(&self) {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&(self.index & 0xff_ffff).to_be_bytes());
        self.memory.store_dbrec(bytes);
    }

    /// Every CQE software owns now.
    pub fn drain(&mut self) -> Vec<[u8; 64]> {
        std::iter::from_fn(|| self.poll()).collect()
    }
}

// ---------------------------------------------------------------------------------------
// CQE images, from the facts sheet's tables (5.1 and 5.2).

/// A requester CQE: byte_cnt at 44, `opcode << 24 | qpn` at 56, wqe_counter at 60,
/// `op_own` at 63 (opcode 0).
pub fn req_cqe(qpn: u32, opcode: u8, counter: u16, byte_cnt: u32, owner: u8) -> [u8; 64] {
    let mut c = [0u8; 64];
    c[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
    c[56..60].copy_from_slice(&(u32::from(opcode) << 24 | qpn).to_be_bytes());
    c[60..62].copy_from_slice(&counter.to_be_bytes());
    c[63] = owner;
    c
}

/// A requester error CQE: vendor syndrome at 54, syndrome at 55, `opcode << 24 | qpn` at
/// 56, wqe_counter at 60, `op_own = 13 << 4 | owner`.
pub fn err_cqe(
    qpn: u32,
    opcode: u8,
    counter: u16,
    syndrome: u8,
    vendor: u8,
    owner: u8,
) -> [u8; 64] {
    let mut c = [0u8; 64];
    c[54] = vendor;
    c[55] = syndrome;
    c[56..60].copy_from_slice(&(u32::from(opcode) << 24 | qpn).to_be_bytes());
    c[60..62].copy_from_slice(&counter.to_be_bytes());
    c[63] = 0xd0 | owner;
    c
}

/// A flush CQE: syndrome 0x05, vendor syndrome 0.
pub fn flush_cqe(qpn: u32, opcode: u8, counter: u16, owner: u8) -> [u8; 64] {
    err_cqe(qpn, opcode, counter, 0x05, 0x00, owner)
}

/// A responder WRITE_WITH_IMM CQE: slid at 22, flags_rqpn at 24, immediate at 36,
/// byte_cnt at 44, QPN at 56, wqe_counter at 60, `op_own = 1 << 4 | se << 1 | owner`.
#[allow(clippy::too_many_arguments)]
pub fn resp_imm_cqe(
    responder: u32,
    source_qpn: u32,
    slid: u16,
    imm: u32,
    byte_cnt: u32,
    counter: u16,
    solicited: bool,
    owner: u8,
) -> [u8; 64] {
    let mut c = [0u8; 64];
    c[22..24].copy_from_slice(&slid.to_be_bytes());
    c[24..28].copy_from_slice(&source_qpn.to_be_bytes());
    c[36..40].copy_from_slice(&imm.to_be_bytes());
    c[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
    c[56..60].copy_from_slice(&responder.to_be_bytes());
    c[60..62].copy_from_slice(&counter.to_be_bytes());
    c[63] = 0x10 | u8::from(solicited) << 1 | owner;
    c
}

// ---------------------------------------------------------------------------------------
// Fixtures.

/// Memory with one registered region in the middle of a larger buffer: `GUARD_LEN` guard
/// bytes on each side, the region filled with `pattern(seed, i)`.
pub struct Area {
    pub buffer: Arc<DmaBuffer>,
    pub region: MemoryRegion,
    pub seed: u8,
}

impl Area {
    pub fn new(fabric: &Fabric, node: NodeId, len: usize, access: Access, seed: u8) -> Self {
        let total = (len + 2 * GUARD_LEN).next_multiple_of(8);
        let buffer = Arc::new(DmaBuffer::zeroed(total, 64).unwrap());
        buffer.fill(0, total, GUARD).unwrap();
        let image: Vec<u8> = (0..len).map(|i| pattern(seed, i)).collect();
        buffer.write(GUARD_LEN, &image).unwrap();
        let region = fabric
            .register(node, buffer.clone(), GUARD_LEN, len, access)
            .unwrap();
        Self {
            buffer,
            region,
            seed,
        }
    }

    /// What the whole buffer held when the area was made.
    pub fn initial_image(&self) -> Vec<u8> {
        let total = self.buffer.len();
        let len = self.region.len();
        (0..total)
            .map(|i| {
                if (GUARD_LEN..GUARD_LEN + len).contains(&i) {
                    pattern(self.seed, i - GUARD_LEN)
                } else {
                    GUARD
                }
            })
            .collect()
    }

    /// The region's bytes now.
    pub fn bytes(&self, offset: usize, len: usize) -> Vec<u8> {
        let mut out = vec![0; len];
        self.buffer.read(GUARD_LEN + offset, &mut out).unwrap();
        out
    }

    /// Overwrites region bytes directly (as a host would).
    pub fn set(&self, offset: usize, bytes: &[u8]) {
        self.buffer.write(GUARD_LEN + offset, bytes).unwrap();
    }

    /// The whole buffer now.
    pub fn image(&self) -> Vec<u8> {
        self.buffer.to_vec()
    }
}

pub const ALL_ACCESS: Access = Access::all();

/// How to make a test queue pair.
#[derive(Clone, Debug)]
pub struct Setup {
    pub ring_wqebbs: usize,
    pub cq_entries: u32,
    pub cq_mode: CqMode,
    pub region_len: usize,
    pub access: Access,
    pub response_delay: u32,
    pub max_message_bytes: u64,
    pub receive: bool,
    pub receive_cq_entries: u32,
    pub watch: DoorbellWatch,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            ring_wqebbs: 64,
            cq_entries: 64,
            cq_mode: CqMode::Ring,
            region_len: 512,
            access: ALL_ACCESS,
            response_delay: 0,
            max_message_bytes: 1 << 30,
            receive: false,
            receive_cq_entries: 64,
            watch: DoorbellWatch::PollRecord,
        }
    }
}

/// One side of a connection: a node, its memory area, a queue pair, its producer, its
/// send-CQ consumer and (with `receive`) its receive-CQ consumer.
pub struct Side {
    pub node: NodeId,
    pub lid: u16,
    pub area: Area,
    pub qpn: Qpn,
    pub sq: Producer,
    pub cq: Consumer,
    pub rcq: Option<Consumer>,
}

pub fn queue_pair(
    fabric: &Fabric,
    node: NodeId,
    transport: TransportKind,
    setup: &Setup,
) -> (Qpn, Producer, Consumer, Option<Consumer>) {
    let sq = SendQueueMemory::allocate(RingSize::new(setup.ring_wqebbs).unwrap()).unwrap();
    let cq = CompletionQueueMemory::allocate(setup.cq_entries).unwrap();
    let rcq = setup
        .receive
        .then(|| CompletionQueueMemory::allocate(setup.receive_cq_entries).unwrap());
    let config = QpConfig {
        cq_mode: setup.cq_mode,
        receive: rcq.as_ref().map(|cq| ReceiveConfig {
            cq,
            cq_mode: setup.cq_mode,
        }),
        max_message_bytes: setup.max_message_bytes,
        response_delay: setup.response_delay,
        doorbell_watch: setup.watch,
        ..QpConfig::new(transport, &sq, &cq)
    };
    let qpn = fabric.create_qp(node, config).unwrap();
    (
        qpn,
        Producer::new(sq, qpn),
        Consumer::new(cq),
        rcq.map(Consumer::new),
    )
}

pub fn side(fabric: &Fabric, lid: u16, seed: u8, transport: TransportKind, setup: &Setup) -> Side {
    let node = fabric.add_node(lid).unwrap();
    let area = Area::new(fabric, node, setup.region_len, setup.access, seed);
    let (qpn, sq, cq, rcq) = queue_pair(fabric, node, transport, setup);
    Side {
        node,
        lid,
        area,
        qpn,
        sq,
        cq,
        rcq,
    }
}

/// Two nodes (LIDs 1 and 2) with RC queue pairs connected to each other.
pub struct RcPair {
    pub fabric: Fabric,
    pub a: Side,
    pub b: Side,
}

impl RcPair {
    pub fn new(setup: &Setup) -> Self {
        let fabric = Fabric::new();
        let a = side(&fabric, 1, 0x11, TransportKind::Rc, setup);
        let b = side(&fabric, 2, 0x77, TransportKind::Rc, setup);
        fabric.connect(a.qpn, b.qpn).unwrap();
        Self { fabric, a, b }
    }
}

/// Asserts that `image` equals `initial` except at `changed`, which holds `expected`.
#[track_caller]
pub fn assert_only_changed(initial: &[u8], image: &[u8], at: usize, expected: &[u8]) {
    assert_eq!(initial.len(), image.len());
    assert_eq!(
        &image[at..at + expected.len()],
        expected,
        "the written bytes"
    );
    assert_eq!(
        &image[..at],
        &initial[..at],
        "bytes before the write changed"
    );
    assert_eq!(
        &image[at + expected.len()..],
        &initial[at + expected.len()..],
        "bytes after the write changed"
    );
}
