//! Random WQE streams for the differential test of the CUDA software NIC against the CPU
//! software NIC.
//!
//! A [`Scenario`] (from a seed) describes a fabric symbolically: nodes and LIDs, data
//! buffers with random contents, memory regions over them (overlapping, with random
//! rights), completion queues (ring or collapsed, some small enough to overrun, some
//! shared), RC queue pairs (connected to a peer, to themselves, or not at all) and DC
//! initiators, DC targets, receive sides with credits, and a number of doorbell points.
//!
//! [`run_on_fabric`] builds it on a [`Fabric`] and, at each doorbell point, lets a
//! producer write random WQEs (every operation, RC and DC, compact and full address
//! vectors, in and out of bounds, wrong keys, missing rights, misaligned atomics, random
//! signaling and fences, corrupted bytes, foreign QPNs, WQEs published only in part) into
//! each ring, publish them (doorbell record, doorbell: own, foreign or none), move the CQ
//! consumer indices (all, some or none of what it polled), then runs the CPU NIC until
//! idle. Every byte the producer writes is recorded in a trace, and the CPU NIC's state
//! after each point in a [`Snapshot`]. [`FabricRun::tables`] and [`FabricRun::arena`] are
//! the same setup for an engine over one arena of memory: replaying the trace on the
//! CUDA NIC's engine (host build: [`replay_on_host`]; GPU: `device::replay_on_device`)
//! must give identical snapshots.

use std::sync::Arc;

use ibgda::cq::{CqMode, Syndrome};
use ibgda::memory::DmaBuffer;
use ibgda::queue::{CompletionQueueMemory, RawCompletionQueue, RawSendQueue, SendQueueMemory};
use ibgda::softnic::{
    Access, Counters, DctConfig, DoorbellWatch, ErrorCause, Fabric, MemoryRegion, NodeId, QpConfig,
    QpState, QueueId, ReceiveConfig,
};
use ibgda::wqe::{
    AnyData, AnyDcTarget, AnyOperation, AnyWqe, AtomicOp, AtomicWidth, CompactAddressVector,
    CompletionMode, ControlFlags, FenceMode, FullAddressVector, LKey, LinkAddress, LocalBuffer,
    Qpn, RKey, RemoteAddress, RingSize, SendRing, Sge, Solicited, TransportKind, WqeIndex,
    WqeLimits,
};

use super::host::HostNic;
use super::tables::{
    cq_mode, error_kind, state, transport, watch, NicCq, NicNode, NicQueue, NicRegion,
    NicResponder, NicStats, NicTables, TableError, NIC_NONE,
};

/// A small deterministic generator (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x5851_f42d_4c95_7f2d)
    }
    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A value in `0..n` (0 when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
    /// A value in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    /// An index into a slice of `n` (0 when empty).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}

/// A memory region of a scenario.
#[derive(Clone, Debug)]
pub struct RegionSpec {
    /// Its node.
    pub node: usize,
    /// The data buffer it lies in.
    pub buffer: usize,
    /// Its offset in the buffer.
    pub offset: usize,
    /// Its length.
    pub len: usize,
    /// Its rights.
    pub access: Access,
}

/// A completion queue of a scenario.
#[derive(Clone, Debug)]
pub struct CqSpec {
    /// Entries (a power of two).
    pub entries: u32,
    /// Collapsed mode (else ring).
    pub collapsed: bool,
}

/// A queue pair of a scenario.
#[derive(Clone, Debug)]
pub struct QpSpec {
    /// Its node.
    pub node: usize,
    /// A DC initiator (else RC).
    pub dc: bool,
    /// Send ring WQEBBs.
    pub ring_wqebbs: usize,
    /// Its send CQ.
    pub cq: usize,
    /// Its receive CQ (RC only).
    pub receive_cq: Option<usize>,
    /// Receive credits posted (with a receive CQ).
    pub credits: u32,
    /// Longest message.
    pub max_message_bytes: u64,
    /// The doorbell record is read only at a doorbell.
    pub doorbell_only: bool,
}

/// A DC target of a scenario.
#[derive(Clone, Debug)]
pub struct DctSpec {
    /// Its node.
    pub node: usize,
    /// Its DC key.
    pub dc_key: u64,
    /// Its receive CQ.
    pub receive_cq: Option<usize>,
    /// Receive credits posted (with a receive CQ).
    pub credits: u32,
}

/// A fabric and its WQE streams, symbolically (keys, QPNs and addresses are the CPU NIC's
/// once built).
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The seed it came from (the streams are drawn from it too).
    pub seed: u64,
    /// One LID per node.
    pub lids: Vec<u16>,
    /// Data buffers' initial contents (lengths multiples of 8).
    pub buffers: Vec<Vec<u8>>,
    /// Memory regions.
    pub regions: Vec<RegionSpec>,
    /// Completion queues.
    pub cqs: Vec<CqSpec>,
    /// Queue pairs, in creation (QPN) order.
    pub qps: Vec<QpSpec>,
    /// RC connections (`a == b`: loopback).
    pub connections: Vec<(usize, usize)>,
    /// DC targets.
    pub dcts: Vec<DctSpec>,
    /// Doorbell points.
    pub points: u32,
    /// WRITE_WITH_IMM-heavy (one scenario in eight): small receive CQs, many credits.
    pub receive_heavy: bool,
    /// Clean (one scenario in four): no deliberate fault (wrong keys, bounds, targets,
    /// corruption, partial publication, CQ consumer lagging), so long streams execute.
    pub clean: bool,
    /// Faults injected (never drawn by [`Scenario::generate`]; a test sets them): queue
    /// (an index of `qps`), the WQE's sequence number, syndrome and vendor syndrome.
    pub injected: Vec<(usize, u64, Syndrome, u8)>,
    /// Completions dropped (never drawn; a test sets them): queue (an index of `qps`) and
    /// the WQE's sequence number, which executes without its CQE.
    pub dropped: Vec<(usize, u64)>,
}

/// Largest message a scenario's queue accepts (and the device engine's scratch need).
pub const SCENARIO_MAX_MESSAGE: u64 = 65536;

impl Scenario {
    /// The scenario of `seed`.
    pub fn generate(seed: u64) -> Self {
        let mut r = Rng::new(seed);
        let receive_heavy = seed % 8 == 7;
        let clean = seed % 4 == 1;
        let nodes = r.range(1, 3) as usize;
        // Regions per node: at least two, so that local and remote ranges can differ.
        let mut lids: Vec<u16> = Vec::new();
        while lids.len() < nodes {
            let lid = r.range(1, 0xbfff) as u16;
            if !lids.contains(&lid) {
                lids.push(lid);
            }
        }
        let buffers: Vec<Vec<u8>> = (0..r.range(1, 4))
            .map(|_| {
                let len = 8 * r.range(8, 1024) as usize;
                (0..len).map(|_| r.next_u64() as u8).collect()
            })
            .collect();
        let mut regions = Vec::new();
        for node in 0..nodes {
            for _ in 0..r.range(2, 5) {
                let buffer = r.index(buffers.len());
                let blen = buffers[buffer].len();
                let mut offset = r.index(blen);
                if r.chance(60) {
                    offset &= !7;
                }
                let rest = (blen - offset) as u64;
                let len = match r.below(10) {
                    0..=3 => rest,
                    4 => r.range(1, rest.min(16)),
                    _ => r.range(rest.min(64), rest),
                } as usize;
                let mut access = Access::empty();
                for (right, p) in [
                    (Access::LOCAL_WRITE, 85),
                    (Access::REMOTE_WRITE, 75),
                    (Access::REMOTE_READ, 75),
                    (Access::REMOTE_ATOMIC, 70),
                ] {
                    if r.chance(p) {
                        access |= right;
                    }
                }
                if access.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
                    && !access.contains(Access::LOCAL_WRITE)
                {
                    if r.chance(80) {
                        access |= Access::LOCAL_WRITE;
                    } else {
                        access.remove(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC);
                    }
                }
                regions.push(RegionSpec {
                    node,
                    buffer,
                    offset,
                    len,
                    access,
                });
            }
        }
        let n_qps = r.range(1, 4) as usize;
        let cqs: Vec<CqSpec> = (0..r.range(1, n_qps as u64 + 1))
            .map(|_| CqSpec {
                entries: if receive_heavy {
                    1 << r.below(3)
                } else {
                    1 << [0, 1, 2, 3, 4, 5, 5, 6, 6, 7, 7, 8][r.index(12)]
                },
                collapsed: r.chance(15),
            })
            .collect();
        let qps: Vec<QpSpec> = (0..n_qps)
            .map(|_| {
                let dc = r.chance(if receive_heavy { 10 } else { 40 });
                let receive_cq = (!dc && r.chance(if receive_heavy { 90 } else { 45 }))
                    .then(|| r.index(cqs.len()));
                QpSpec {
                    node: r.index(nodes),
                    dc,
                    ring_wqebbs: 1 << [2, 3, 4, 4, 5, 5, 6][r.index(7)],
                    cq: r.index(cqs.len()),
                    receive_cq,
                    credits: if receive_cq.is_some() {
                        r.range(0, 8) as u32
                    } else {
                        0
                    },
                    max_message_bytes: if clean {
                        SCENARIO_MAX_MESSAGE
                    } else {
                        [64, 1024, 8192, SCENARIO_MAX_MESSAGE][r.index(4).max(r.index(4))]
                    },
                    doorbell_only: r.chance(20),
                }
            })
            .collect();
        let mut connections = Vec::new();
        let mut free: Vec<usize> = (0..n_qps).filter(|&i| !qps[i].dc).collect();
        while let Some(&a) = free.first() {
            free.remove(0);
            if r.chance(12) {
                continue; // stays unconnected (INIT)
            }
            if !free.is_empty() && r.chance(60) {
                let b = free.remove(r.index(free.len()));
                connections.push((a, b));
            } else {
                connections.push((a, a));
            }
        }
        let min_dcts = u64::from(clean && qps.iter().any(|q| q.dc));
        let dcts: Vec<DctSpec> = (0..r.range(min_dcts, 3))
            .map(|_| {
                let receive_cq = r.chance(40).then(|| r.index(cqs.len()));
                DctSpec {
                    node: r.index(nodes),
                    dc_key: r.next_u64(),
                    receive_cq,
                    credits: if receive_cq.is_some() {
                        r.range(0, 8) as u32
                    } else {
                        0
                    },
                }
            })
            .collect();
        Self {
            seed,
            lids,
            buffers,
            regions,
            cqs,
            qps,
            connections,
            dcts,
            points: r.range(2, 6) as u32,
            receive_heavy,
            clean,
            injected: Vec::new(),
            dropped: Vec::new(),
        }
    }
}

/// Where each object of a scenario lies in the engine's arena.
#[derive(Clone, Debug, Default)]
pub struct ArenaLayout {
    /// Data buffers: (offset, length).
    pub buffers: Vec<(usize, usize)>,
    /// CQ rings: (offset, length).
    pub cq_rings: Vec<(usize, usize)>,
    /// CQ doorbell records.
    pub cq_dbrecs: Vec<usize>,
    /// Send rings: (offset, length).
    pub sq_rings: Vec<(usize, usize)>,
    /// Send doorbell records.
    pub sq_dbrecs: Vec<usize>,
    /// Doorbells.
    pub doorbells: Vec<usize>,
    /// Arena length.
    pub len: usize,
}

impl ArenaLayout {
    fn place(&mut self, len: usize) -> usize {
        let at = self.len.next_multiple_of(64);
        self.len = at + len;
        at
    }
}

/// A queue's state as both NICs report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueView {
    /// QPN.
    pub qpn: u32,
    /// A `tables::state` value.
    pub state: u32,
    /// WQEBBs consumed.
    pub consumer: u64,
    /// WQEs consumed.
    pub executed: u64,
    /// (kind, syndrome, vendor syndrome, WQE index or CQ index) of its error.
    pub error: (u32, u32, u32, u32),
}

/// What a NIC left after a doorbell point: every registered buffer, every CQ ring, every
/// queue's state and error cause, every responder's credits, every CQ's error state, and
/// the totals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Data buffers.
    pub buffers: Vec<Vec<u8>>,
    /// CQ rings.
    pub cq_rings: Vec<Vec<u8>>,
    /// Queues, in scenario order.
    pub queues: Vec<QueueView>,
    /// Receive credits per responder (in [`FabricRun::responders`] order).
    pub credits: Vec<u64>,
    /// Whether each CQ is in error.
    pub cq_errors: Vec<bool>,
    /// Totals.
    pub stats: NicStats,
}

impl Snapshot {
    /// The first difference from `other`, described; `None` when identical.
    pub fn diff(&self, other: &Self) -> Option<String> {
        for (i, (a, b)) in self.buffers.iter().zip(&other.buffers).enumerate() {
            if let Some(k) = (0..a.len().min(b.len())).find(|&k| a[k] != b[k]) {
                return Some(format!(
                    "buffer {i} byte {k}: {:#04x} vs {:#04x}",
                    a[k], b[k]
                ));
            }
        }
        for (i, (a, b)) in self.cq_rings.iter().zip(&other.cq_rings).enumerate() {
            if let Some(k) = (0..a.len().min(b.len())).find(|&k| a[k] != b[k]) {
                let e = k / 64 * 64;
                return Some(format!(
                    "CQ {i} entry {} byte {}:\n  {:02x?}\n  {:02x?}",
                    k / 64,
                    k % 64,
                    &a[e..e + 64],
                    &b[e..e + 64]
                ));
            }
        }
        if self.queues != other.queues {
            return Some(format!("queues: {:?} vs {:?}", self.queues, other.queues));
        }
        if self.credits != other.credits {
            return Some(format!(
                "credits: {:?} vs {:?}",
                self.credits, other.credits
            ));
        }
        if self.cq_errors != other.cq_errors {
            return Some(format!(
                "CQ errors: {:?} vs {:?}",
                self.cq_errors, other.cq_errors
            ));
        }
        if self.stats != other.stats {
            return Some(format!("totals: {:?} vs {:?}", self.stats, other.stats));
        }
        (self != other).then(|| "sizes differ".into())
    }
}

/// One host-side write of the trace: bytes at an arena offset.
pub type TraceWrite = (usize, Vec<u8>);

/// A scenario run on the CPU NIC: the engine setup, the trace, and the CPU NIC's
/// snapshots after each doorbell point.
#[derive(Clone, Debug)]
pub struct FabricRun {
    /// The engine's tables, addresses relative to the arena.
    pub tables: NicTables,
    /// The arena's initial bytes.
    pub arena: Vec<u8>,
    /// Where things lie in it.
    pub layout: ArenaLayout,
    /// Per doorbell point, the producer's writes.
    pub trace: Vec<Vec<TraceWrite>>,
    /// The CPU NIC's state after each point.
    pub snapshots: Vec<Snapshot>,
    /// Responder numbers (RC QPs, then DCTs), the order of [`Snapshot::credits`].
    pub responders: Vec<u32>,
    /// WQEs the producer wrote.
    pub wqes_posted: u64,
}

/// What the stream generator may address.
struct Env {
    regions: Vec<(RegionSpec, MemoryRegion)>,
    /// Per QP: qpn, node, DC, the node its RC peer is on.
    qps: Vec<(u32, usize, bool, Option<usize>)>,
    /// Per DCT: number, node, key.
    dcts: Vec<(u32, usize, u64)>,
    lids: Vec<u16>,
    imm_percent: u64,
    clean: bool,
}

impl Env {
    /// A deliberate fault, with probability `per_mille`/1000 (never in a clean scenario).
    fn fault(&self, r: &mut Rng, per_mille: u64) -> bool {
        let hit = r.below(1000) < per_mille;
        hit && !self.clean
    }

    fn region_on(
        &self,
        r: &mut Rng,
        node: Option<usize>,
        need: Access,
        len: u64,
    ) -> Option<&MemoryRegion> {
        let fitting: Vec<&(RegionSpec, MemoryRegion)> = self
            .regions
            .iter()
            .filter(|(s, _)| {
                node.is_none_or(|n| s.node == n) && s.access.contains(need) && s.len as u64 >= len
            })
            .collect();
        let on_node: Vec<&(RegionSpec, MemoryRegion)> = self
            .regions
            .iter()
            .filter(|(s, _)| node.is_none_or(|n| s.node == n))
            .collect();
        let pool: Vec<&(RegionSpec, MemoryRegion)> = if !self.fault(r, 20) {
            [fitting, on_node]
                .into_iter()
                .find(|p| !p.is_empty())
                .unwrap_or_else(|| self.regions.iter().collect())
        } else {
            self.regions.iter().collect()
        };
        pool.get(r.index(pool.len())).map(|(_, m)| m)
    }

    fn wrong_key(&self, r: &mut Rng, other: u32) -> u32 {
        match r.below(3) {
            0 => r.next_u64() as u32,
            1 => other,
            _ => {
                let (_, m) = &self.regions[r.index(self.regions.len())];
                // Some region's key of the other kind (or this one's, when it is `right`'s
                // own region: then the other kind of key).
                if r.chance(50) {
                    m.lkey().0
                } else {
                    m.rkey().0
                }
            }
        }
    }

    /// An address of `len` bytes in `m` (mostly in bounds, `align`ed when asked).
    fn addr_in(&self, r: &mut Rng, m: &MemoryRegion, len: u64, align: u64) -> u64 {
        let start = m.addr();
        let rlen = m.len() as u64;
        if !self.fault(r, 40) && len <= rlen {
            let first = start.next_multiple_of(align);
            let room = (start + rlen).saturating_sub(len);
            if first <= room {
                let slots = (room - first) / align + 1;
                return first + align * r.below(slots);
            }
        }
        match r.below(3) {
            0 => start.wrapping_sub(r.range(1, 16)),
            1 => start + rlen - len.min(rlen) + r.range(1, 16),
            _ => start + r.below(rlen + 32),
        }
    }

    fn local_sge(&self, r: &mut Rng, node: usize, len: u32, write: bool) -> Sge {
        let need = if write {
            Access::LOCAL_WRITE
        } else {
            Access::empty()
        };
        let read_only: Vec<&MemoryRegion> = self
            .regions
            .iter()
            .filter(|(s, _)| s.node == node && !s.access.contains(Access::LOCAL_WRITE))
            .map(|(_, m)| m)
            .collect();
        let denied = write && !read_only.is_empty() && self.fault(r, 30);
        let chosen = if denied {
            Some(read_only[r.index(read_only.len())])
        } else {
            self.region_on(r, Some(node), need, len.into())
        };
        let Some(m) = chosen else {
            return Sge::new(r.next_u64(), len, LKey(r.next_u64() as u32)).expect("len > 0");
        };
        let lkey = if !self.fault(r, 30) {
            m.lkey().0
        } else {
            self.wrong_key(r, m.rkey().0)
        };
        let addr = self.addr_in(r, m, len.into(), 1);
        Sge::new(addr, len, LKey(lkey)).expect("len > 0")
    }

    fn remote(
        &self,
        r: &mut Rng,
        node: usize,
        len: u64,
        need: Access,
        align: u64,
    ) -> RemoteAddress {
        let Some(m) = self.region_on(r, Some(node), need, len) else {
            return RemoteAddress::new(r.next_u64(), RKey(r.next_u64() as u32));
        };
        let rkey = if !self.fault(r, 30) {
            m.rkey().0
        } else {
            self.wrong_key(r, m.lkey().0)
        };
        let mut addr = self.addr_in(r, m, len, align);
        addr -= addr % align;
        if align > 1 && self.fault(r, 30) {
            // Builders refuse a misaligned atomic; post_one misaligns some in the ring.
            addr = addr.wrapping_add(align);
        }
        RemoteAddress::new(addr, RKey(rkey))
    }

    /// The current value of the big-endian operand at `addr` (if it is in a region).
    fn operand(&self, addr: u64, size: usize) -> Option<u64> {
        let (_, m) = self
            .regions
            .iter()
            .find(|(_, m)| addr >= m.addr() && addr + size as u64 <= m.addr() + m.len() as u64)?;
        let mut bytes = [0u8; 8];
        let off = m.buffer_offset() + (addr - m.addr()) as usize;
        m.buffer().read(off, &mut bytes[..size]).ok()?;
        Some(
            bytes[..size]
                .iter()
                .fold(0u64, |a, &b| a << 8 | u64::from(b)),
        )
    }
}

fn msg_len(r: &mut Rng) -> u32 {
    match r.below(20) {
        0..=13 => r.range(1, 64) as u32,
        14..=18 => r.range(65, 600) as u32,
        _ => r.range(601, 6000) as u32,
    }
}

fn split(r: &mut Rng, len: u32) -> Vec<u32> {
    let n = (r.range(1, 4) as u32).min(len);
    let mut parts = vec![1u32; n as usize];
    for _ in 0..len - n {
        let i = r.index(parts.len());
        parts[i] += 1;
    }
    parts
}

/// Writes one random WQE at `index` of `ring` for queue `me`; returns its WQEBBs.
fn post_one(r: &mut Rng, env: &Env, me: usize, ring: &mut [u8], index: u16) -> u32 {
    let (qpn, node, dc, peer_node) = env.qps[me];
    // The responder node the addresses aim at, and the DC target.
    let mut target = None;
    let mut responder_node = peer_node.unwrap_or(node);
    if dc {
        let valid = !env.dcts.is_empty() && !env.fault(r, 60);
        let (dct, key, lid) = if valid {
            let (number, n, key) = env.dcts[r.index(env.dcts.len())];
            responder_node = n;
            (number, key, env.lids[n])
        } else {
            let (number, n, key) = if env.dcts.is_empty() {
                (env.qps[r.index(env.qps.len())].0, 0, r.next_u64())
            } else {
                env.dcts[r.index(env.dcts.len())]
            };
            responder_node = n;
            match r.below(3) {
                0 => (number, key ^ (1 << r.below(64)), env.lids[n]),
                1 => (
                    number,
                    key,
                    loop {
                        let lid = r.range(1, 0xffff) as u16;
                        if !env.lids.contains(&lid) {
                            break lid;
                        }
                    },
                ),
                _ => (
                    env.qps[r.index(env.qps.len())].0,
                    key,
                    env.lids[r.index(env.lids.len())],
                ),
            }
        };
        target = Some(if r.chance(50) {
            AnyDcTarget::Compact(
                *CompactAddressVector {
                    dct,
                    dc_key: key,
                    lid,
                    sl: r.below(16) as u8,
                    ..Default::default()
                }
                .encode()
                .expect("valid compact AV")
                .segment(),
            )
        } else {
            AnyDcTarget::Full(
                *FullAddressVector {
                    dct,
                    dc_key: key,
                    link: LinkAddress::InfiniBand {
                        lid,
                        sl: r.below(16) as u8,
                        static_rate: 0,
                        source_path_bits: 0,
                        force_loopback: false,
                        grh: None,
                    },
                }
                .encode()
                .expect("valid full AV")
                .segment(),
            )
        });
    }
    let flags = ControlFlags {
        fence: [
            FenceMode::None,
            FenceMode::InitiatorSmall,
            FenceMode::Fence,
            FenceMode::StrongOrdering,
            FenceMode::SmallAndFence,
        ][r.index(5)],
        completion: [
            CompletionMode::OnError,
            CompletionMode::OnFirstError,
            CompletionMode::Always,
            CompletionMode::AlwaysWithEvent,
        ][r.index(4)],
        solicited: if r.chance(20) {
            Solicited::Yes
        } else {
            Solicited::No
        },
    };
    let mut sges: Vec<Sge> = Vec::new();
    let mut payload: Vec<u8> = Vec::new();
    let kind = r.below(100);
    let op_data = |r: &mut Rng, sges: &mut Vec<Sge>, payload: &mut Vec<u8>, write: bool| -> u8 {
        // 0: empty, 1: pointers, 2: inline
        let c = r.below(100);
        if c < 12 {
            0
        } else if write && c < 50 {
            payload.extend((0..r.range(1, 256)).map(|_| r.next_u64() as u8));
            2
        } else {
            let len = msg_len(r);
            for part in split(r, len) {
                sges.push(env.local_sge(r, node, part, !write));
            }
            1
        }
    };
    let data_of = |k: u8, sges: &'_ [Sge], payload: &'_ [u8]| -> (u64, u8) {
        match k {
            0 => (0, 0),
            1 => (sges.iter().map(|s| u64::from(s.len())).sum(), 1),
            _ => (payload.len() as u64, 2),
        }
    };
    let op: AnyOperation<'_>;
    let mut misalign = 0u64;
    if kind < 7 {
        op = AnyOperation::Nop;
    } else if kind < 14 {
        let len = msg_len(r);
        let sge = env.local_sge(r, node, len, false);
        op = AnyOperation::Dump(sge);
    } else if kind < 44 {
        let write_kind = op_data(r, &mut sges, &mut payload, true);
        let (len, _) = data_of(write_kind, &sges, &payload);
        let remote = env.remote(r, responder_node, len, Access::REMOTE_WRITE, 1);
        let imm = r.chance(env.imm_percent).then(|| r.next_u64() as u32);
        op = AnyOperation::Write {
            remote,
            imm,
            data: match write_kind {
                0 => AnyData::Empty,
                1 => AnyData::Sges(&sges),
                _ => AnyData::Inline(&payload),
            },
        };
    } else if kind < 64 {
        let k = op_data(r, &mut sges, &mut payload, false);
        let (len, _) = data_of(k, &sges, &payload);
        let remote = env.remote(r, responder_node, len, Access::REMOTE_READ, 1);
        op = AnyOperation::Read {
            remote,
            data: if k == 0 {
                AnyData::Empty
            } else {
                AnyData::Sges(&sges)
            },
        };
    } else {
        let which = r.below(6);
        let width = if which >= 2 && r.chance(50) {
            AtomicWidth::Four
        } else {
            AtomicWidth::Eight
        };
        let size = width.bytes();
        let remote = env.remote(
            r,
            responder_node,
            size.into(),
            Access::REMOTE_ATOMIC,
            size.into(),
        );
        let current = env
            .operand(remote.addr, size as usize)
            .unwrap_or_else(|| r.next_u64());
        let mask = if size == 4 { 0xffff_ffff } else { u64::MAX };
        let v: [u64; 4] = core::array::from_fn(|_| r.next_u64() & mask);
        let compare = if r.chance(50) { current } else { v[3] };
        let atomic = match which {
            0 => AtomicOp::CompareSwap {
                compare,
                swap: v[0],
            },
            1 => AtomicOp::FetchAdd { add: v[0] },
            2 | 3 => AtomicOp::MaskedCompareSwap {
                width,
                swap: v[0],
                compare,
                swap_mask: v[1],
                compare_mask: if r.chance(20) { 0 } else { v[2] },
            },
            _ => AtomicOp::MaskedFetchAdd {
                width,
                add: v[0],
                field_boundary: [0, mask, v[1]][r.index(3)],
            },
        };
        if env.fault(r, 40) {
            misalign = r.range(1, u64::from(size) - 1);
        }
        let sge = env.local_sge(r, node, size, true);
        let result = LocalBuffer::new(sge.addr(), sge.lkey());
        op = AnyOperation::Atomic {
            remote,
            result,
            op: atomic,
        };
    }
    let addressed = !matches!(op, AnyOperation::Nop | AnyOperation::Dump(_));
    let wqe = AnyWqe {
        target: if addressed { target } else { None },
        flags,
        stream_id: 0,
        op,
    };
    let post_qpn = if env.fault(r, 8) {
        let other = env.qps[r.index(env.qps.len())].0;
        if other == qpn {
            (r.next_u64() as u32 & Qpn::MAX).max(1)
        } else {
            other
        }
    } else {
        qpn
    };
    let written = match (wqe.build(), Qpn::new(post_qpn)) {
        (Ok(built), Ok(q)) => SendRing::new(&mut *ring, WqeLimits::FORMAT)
            .and_then(|mut sr| sr.write(WqeIndex(index), q, &built))
            .ok(),
        _ => None,
    };
    let wqebbs = match written {
        Some(w) => w,
        None => {
            // Not encodable here (too large for the ring): a NOP instead.
            let nop = AnyWqe {
                target: None,
                flags,
                stream_id: 0,
                op: AnyOperation::Nop,
            }
            .build()
            .expect("NOP builds");
            SendRing::new(&mut *ring, WqeLimits::FORMAT)
                .expect("ring")
                .write(WqeIndex(index), Qpn::new(qpn).expect("qpn"), &nop)
                .expect("NOP fits")
        }
    };
    let len = ring.len();
    let at = usize::from(index) % (len / 64) * 64;
    if misalign != 0 && written.is_some() {
        // The remote address's low byte (the raddr segment follows the control segment
        // and the address vector).
        let av = target.map_or(0, |t| t.ds());
        let k = (at + (1 + av) * 16 + 7) % len;
        ring[k] = ring[k].wrapping_add(misalign as u8);
    }
    // Corruption: a random byte, the DS, or the opcode.
    match if env.clean { 1000 } else { r.below(1000) } {
        0..=9 => {
            let k = (at + r.index(wqebbs as usize * 64)) % len;
            ring[k] = r.next_u64() as u8;
        }
        10..=12 => ring[(at + 7) % len] = r.next_u64() as u8,
        13..=15 => {
            ring[(at + 3) % len] = [
                0x00, 0x01, 0x08, 0x09, 0x0a, 0x10, 0x11, 0x12, 0x14, 0x15, 0x23, 0xff,
            ][r.index(12)]
        }
        _ => {}
    }
    wqebbs
}

fn counters_to_stats(c: &Counters) -> NicStats {
    NicStats {
        doorbells: c.doorbells,
        foreign_doorbells: c.foreign_doorbells,
        wqes_executed: c.wqes_executed,
        wqes_failed: c.wqes_failed,
        wqes_flushed: c.wqes_flushed,
        bytes_written: c.bytes_written,
        bytes_read: c.bytes_read,
        atomics: c.atomics,
        cqes_written: c.cqes_written,
        responder_cqes: c.responder_cqes,
        cqes_dropped: c.cqes_dropped,
        async_events: c.async_events,
    }
}

/// The 8 bytes of a send doorbell record announcing `producer`.
pub fn send_record(producer: u64) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[4..].copy_from_slice(&(producer as u32 & 0xffff).to_be_bytes());
    b
}

/// The 8-byte doorbell announcing `producer` on `qpn`: a control segment's first 8 bytes.
pub fn doorbell_value(producer: u64, qpn: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&((producer as u32 & 0xffff) << 8).to_be_bytes());
    b[4..].copy_from_slice(&(qpn << 8).to_be_bytes());
    b
}

/// Builds `s` on a CPU NIC, runs its streams, and returns the engine setup, the trace and
/// the CPU NIC's snapshots.
pub fn run_on_fabric(s: &Scenario) -> Result<FabricRun, String> {
    let e = |x: &dyn core::fmt::Display| x.to_string();
    let fabric = Fabric::new();
    let mut layout = ArenaLayout::default();
    let nodes: Vec<NodeId> = s
        .lids
        .iter()
        .map(|&lid| fabric.add_node(lid))
        .collect::<Result<_, _>>()
        .map_err(|x| e(&x))?;
    let buffers: Vec<Arc<DmaBuffer>> = s
        .buffers
        .iter()
        .map(|init| {
            let b = DmaBuffer::zeroed(init.len(), 64).map_err(|x| e(&x))?;
            b.write(0, init).map_err(|x| e(&x))?;
            let at = layout.place(init.len());
            layout.buffers.push((at, init.len()));
            Ok(Arc::new(b))
        })
        .collect::<Result<_, String>>()?;
    let mut regions = Vec::new();
    for spec in &s.regions {
        let m = fabric
            .register(
                nodes[spec.node],
                buffers[spec.buffer].clone(),
                spec.offset,
                spec.len,
                spec.access,
            )
            .map_err(|x| e(&x))?;
        regions.push((spec.clone(), m));
    }
    let cq_mem: Vec<CompletionQueueMemory> = s
        .cqs
        .iter()
        .map(|c| {
            let at = layout.place(c.entries as usize * 64);
            layout.cq_rings.push((at, c.entries as usize * 64));
            let rec = layout.place(8);
            layout.cq_dbrecs.push(rec);
            CompletionQueueMemory::allocate(c.entries).map_err(|x| e(&x))
        })
        .collect::<Result<_, _>>()?;
    let mode = |c: usize| {
        if s.cqs[c].collapsed {
            CqMode::Collapsed
        } else {
            CqMode::Ring
        }
    };
    let mut sq_mem = Vec::new();
    let mut qpns = Vec::new();
    for q in &s.qps {
        let size = RingSize::new(q.ring_wqebbs).map_err(|x| e(&x))?;
        let sq = SendQueueMemory::allocate(size).map_err(|x| e(&x))?;
        let at = layout.place(size.bytes());
        layout.sq_rings.push((at, size.bytes()));
        let rec = layout.place(8);
        layout.sq_dbrecs.push(rec);
        let db = layout.place(8);
        layout.doorbells.push(db);
        let mut config = QpConfig::new(
            if q.dc {
                TransportKind::Dc
            } else {
                TransportKind::Rc
            },
            &sq,
            &cq_mem[q.cq],
        );
        config.cq_mode = mode(q.cq);
        config.receive = q.receive_cq.map(|c| ReceiveConfig {
            cq: &cq_mem[c],
            cq_mode: mode(c),
        });
        config.max_message_bytes = q.max_message_bytes;
        config.doorbell_watch = if q.doorbell_only {
            DoorbellWatch::DoorbellOnly
        } else {
            DoorbellWatch::PollRecord
        };
        let qpn = fabric.create_qp(nodes[q.node], config).map_err(|x| e(&x))?;
        qpns.push(qpn);
        for &(_, at, syndrome, vendor) in s.injected.iter().filter(|f| f.0 == qpns.len() - 1) {
            fabric
                .inject_fault(qpn.get(), at, syndrome, vendor)
                .map_err(|x| e(&x))?;
        }
        for &(_, at) in s.dropped.iter().filter(|f| f.0 == qpns.len() - 1) {
            fabric.drop_completion(qpn.get(), at).map_err(|x| e(&x))?;
        }
        sq_mem.push(RawSendQueue::new(sq));
    }
    let mut peers: Vec<Option<usize>> = vec![None; s.qps.len()];
    for &(a, b) in &s.connections {
        fabric.connect(qpns[a], qpns[b]).map_err(|x| e(&x))?;
        peers[a] = Some(b);
        peers[b] = Some(a);
    }
    let mut dcts = Vec::new();
    for d in &s.dcts {
        let number = fabric
            .create_dct(
                nodes[d.node],
                DctConfig {
                    dc_key: d.dc_key,
                    receive: d.receive_cq.map(|c| ReceiveConfig {
                        cq: &cq_mem[c],
                        cq_mode: mode(c),
                    }),
                },
            )
            .map_err(|x| e(&x))?;
        if d.receive_cq.is_some() && d.credits > 0 {
            fabric.post_receives(number, d.credits).map_err(|x| e(&x))?;
        }
        dcts.push(number);
    }
    let cq_mem: Vec<RawCompletionQueue> = cq_mem.into_iter().map(RawCompletionQueue::new).collect();
    for (i, q) in s.qps.iter().enumerate() {
        if q.receive_cq.is_some() && q.credits > 0 {
            fabric
                .post_receives(qpns[i], q.credits)
                .map_err(|x| e(&x))?;
        }
    }

    // The engine's tables, over the arena.
    let mut tables = NicTables {
        nodes: s
            .lids
            .iter()
            .map(|&lid| NicNode {
                lid: lid.into(),
                reserved: 0,
            })
            .collect(),
        ..Default::default()
    };
    for (spec, m) in &regions {
        tables.regions.push(NicRegion {
            start: m.addr(),
            base: (layout.buffers[spec.buffer].0 + spec.offset) as u64,
            len: spec.len as u64,
            node: spec.node as u32,
            lkey: m.lkey().0,
            rkey: m.rkey().0,
            access: spec.access.bits(),
        });
    }
    for (i, c) in s.cqs.iter().enumerate() {
        tables.cqs.push(NicCq {
            ring: layout.cq_rings[i].0 as u64,
            dbrec: layout.cq_dbrecs[i] as u64,
            entries: c.entries,
            log2_entries: c.entries.trailing_zeros(),
            mode: if c.collapsed {
                cq_mode::COLLAPSED
            } else {
                cq_mode::RING
            },
            ..Default::default()
        });
    }
    let mut responders = Vec::new();
    for (i, q) in s.qps.iter().enumerate() {
        if q.dc {
            continue;
        }
        tables.responders.push(NicResponder {
            number: qpns[i].get(),
            node: q.node as u32,
            credits: if q.receive_cq.is_some() {
                q.credits.into()
            } else {
                0
            },
            cq: q.receive_cq.map_or(NIC_NONE, |c| c as u32),
            ..Default::default()
        });
        responders.push(qpns[i].get());
    }
    for (i, d) in s.dcts.iter().enumerate() {
        tables.responders.push(NicResponder {
            dc_key: d.dc_key,
            credits: if d.receive_cq.is_some() {
                d.credits.into()
            } else {
                0
            },
            number: dcts[i].get(),
            node: d.node as u32,
            is_dct: 1,
            cq: d.receive_cq.map_or(NIC_NONE, |c| c as u32),
            ..Default::default()
        });
        responders.push(dcts[i].get());
    }
    for (i, q) in s.qps.iter().enumerate() {
        tables.queues.push(NicQueue {
            ring: layout.sq_rings[i].0 as u64,
            dbrec: layout.sq_dbrecs[i] as u64,
            doorbell: layout.doorbells[i] as u64,
            max_message_bytes: q.max_message_bytes,
            qpn: qpns[i].get(),
            node: q.node as u32,
            transport: if q.dc { transport::DC } else { transport::RC },
            log_wqebbs: q.ring_wqebbs.trailing_zeros(),
            cq: q.cq as u32,
            peer: peers[i].map_or(NIC_NONE, |p| qpns[p].get()),
            state: if q.dc || peers[i].is_some() {
                state::READY
            } else {
                state::INIT
            },
            watch: if q.doorbell_only {
                watch::DOORBELL_ONLY
            } else {
                watch::POLL_RECORD
            },
            ..Default::default()
        });
        // One injection per queue pair on either NIC: the last one given stands.
        if let Some(&(_, at, syndrome, vendor)) = s.injected.iter().rfind(|f| f.0 == i) {
            let q = tables.queues.last_mut().expect("just pushed");
            q.inject_at = at;
            q.inject_syndrome = syndrome as u32;
            q.inject_vendor = vendor.into();
        }
        if let Some(&(_, at)) = s.dropped.iter().rfind(|f| f.0 == i) {
            let q = tables.queues.last_mut().expect("just pushed");
            q.drop_cqe_at = at;
            q.drop_cqe = 1;
        }
    }
    let mut arena = vec![0u8; layout.len];
    for (i, init) in s.buffers.iter().enumerate() {
        let (at, len) = layout.buffers[i];
        arena[at..at + len].copy_from_slice(init);
    }
    for (i, c) in cq_mem.iter().enumerate() {
        let (at, len) = layout.cq_rings[i];
        arena[at..at + len].copy_from_slice(&c.memory().ring_bytes());
    }

    let env = Env {
        regions,
        qps: s
            .qps
            .iter()
            .enumerate()
            .map(|(i, q)| (qpns[i].get(), q.node, q.dc, peers[i].map(|p| s.qps[p].node)))
            .collect(),
        dcts: s
            .dcts
            .iter()
            .enumerate()
            .map(|(i, d)| (dcts[i].get(), d.node, d.dc_key))
            .collect(),
        lids: s.lids.clone(),
        imm_percent: if s.receive_heavy { 60 } else { 12 },
        clean: s.clean,
    };
    // Map the CPU NIC's CQ numbers to scenario CQ indices.
    let mut cqn_index = std::collections::HashMap::new();
    for (i, q) in s.qps.iter().enumerate() {
        if let Some(c) = fabric.send_cq(qpns[i]) {
            cqn_index.insert(c, q.cq as u32);
        }
        if let (Some(c), Some(rc)) = (fabric.receive_cq(qpns[i]), q.receive_cq) {
            cqn_index.insert(c, rc as u32);
        }
    }
    for (i, d) in s.dcts.iter().enumerate() {
        if let (Some(c), Some(rc)) = (fabric.receive_cq(dcts[i]), d.receive_cq) {
            cqn_index.insert(c, rc as u32);
        }
    }

    let mut r = Rng::new(s.seed.rotate_left(17) ^ 0xd1b5_4a32_d192_ed03);
    let mut rings: Vec<Vec<u8>> = sq_mem.iter().map(|m| m.memory().ring_bytes()).collect();
    let mut producers = vec![0u64; s.qps.len()];
    let mut polled = vec![0u32; s.cqs.len()];
    let mut consumers = vec![0u32; s.cqs.len()];
    let mut trace = Vec::new();
    let mut snapshots = Vec::new();
    let mut wqes_posted = 0u64;
    for _ in 0..s.points {
        let mut writes: Vec<TraceWrite> = Vec::new();
        // The consumer polls each ring-mode CQ and publishes all, some or none of it.
        for (c, spec) in s.cqs.iter().enumerate() {
            if spec.collapsed {
                continue;
            }
            let ring = cq_mem[c].memory().ring_bytes();
            let n = spec.entries;
            for _ in 0..n {
                let slot = (polled[c] & (n - 1)) as usize * 64;
                let op_own = ring[slot + 63];
                let parity = (polled[c] / n) & 1;
                if op_own >> 4 == 0xf || u32::from(op_own & 1) != parity {
                    break;
                }
                polled[c] = polled[c].wrapping_add(1);
            }
            let value = match if s.clean { 0 } else { r.below(100) } {
                0..=69 => polled[c],
                70..=84 => consumers[c],
                _ => consumers[c] + r.below(u64::from(polled[c] - consumers[c]) + 1) as u32,
            };
            if value != consumers[c] || r.chance(10) {
                consumers[c] = value;
                let mut rec = [0u8; 8];
                rec[..4].copy_from_slice(&(value & 0xff_ffff).to_be_bytes());
                cq_mem[c].store_dbrec(rec);
                writes.push((layout.cq_dbrecs[c], rec.to_vec()));
            }
        }
        // Each queue's producer writes and publishes a batch.
        for (i, q) in s.qps.iter().enumerate() {
            let count = r.below(13);
            let mut used = 0u64;
            let mut last = 1u32;
            for _ in 0..count {
                if s.clean && used + 16 > q.ring_wqebbs as u64 && used > 0 {
                    break; // a clean batch never overwrites its own WQEs
                }
                let w = post_one(&mut r, &env, i, &mut rings[i], producers[i] as u16);
                producers[i] += u64::from(w);
                used += u64::from(w);
                last = w;
                wqes_posted += 1;
                if used >= q.ring_wqebbs as u64 {
                    break;
                }
            }
            // SAFETY: only the software NICs execute these rings, and they touch only
            // registered `DmaBuffer`s (atomically) or their own arena, whatever the WQEs say.
            unsafe { sq_mem[i].write_ring(0, &rings[i]) }.map_err(|x| e(&x))?;
            writes.push((layout.sq_rings[i].0, rings[i].clone()));
            let published = match if s.clean { 99 } else { r.below(100) } {
                0..=3 if last > 1 => Some(producers[i] - 1),
                4..=6 => None,
                _ => Some(producers[i]),
            };
            if let Some(p) = published {
                let rec = send_record(p);
                sq_mem[i].store_dbrec(rec);
                writes.push((layout.sq_dbrecs[i], rec.to_vec()));
            }
            let named = match r.below(100) {
                0..=4 => Some(env.qps[r.index(env.qps.len())].0 ^ 1),
                5..=12 => None,
                _ => Some(qpns[i].get()),
            };
            if let Some(n) = named {
                let db = doorbell_value(producers[i], n);
                sq_mem[i].store_doorbell(db);
                writes.push((layout.doorbells[i], db.to_vec()));
            }
        }
        fabric.run_until_idle();
        trace.push(writes);
        // The CPU NIC's state.
        let counters = fabric.counters();
        if counters.responses_dropped != 0 {
            return Err("responses dropped".into());
        }
        let mut queues = Vec::new();
        for (i, qpn) in qpns.iter().enumerate() {
            let st = fabric
                .qp_status(*qpn)
                .ok_or_else(|| format!("queue {i} gone"))?;
            let error = match st.error {
                None => (error_kind::NONE, 0, 0, 0),
                Some(ErrorCause::Wqe { fault, wqe_counter }) => (
                    error_kind::WQE,
                    fault.syndrome() as u32,
                    fault.vendor_syndrome().into(),
                    wqe_counter.into(),
                ),
                Some(ErrorCause::CompletionQueue { cq }) => (
                    error_kind::CQ,
                    0,
                    0,
                    *cqn_index.get(&cq).ok_or("unknown CQ")?,
                ),
                // Scenarios send no commands: a queue they drive never meets 2ERR_QP.
                Some(ErrorCause::Command) => {
                    return Err(format!("queue {i} moved to error by a command"))
                }
            };
            queues.push(QueueView {
                qpn: qpn.get(),
                state: match st.state {
                    // Neither executes WQEs, like a queue pair in INIT.
                    QpState::Reset | QpState::Init | QpState::ReadyToReceive => state::INIT,
                    QpState::ReadyToSend => state::READY,
                    QpState::Error => state::ERROR,
                },
                consumer: st.consumer,
                executed: st.wqes,
                error,
            });
        }
        let mut credits = Vec::new();
        for (i, q) in s.qps.iter().enumerate() {
            if !q.dc {
                credits.push(fabric.receive_credits(qpns[i]).unwrap_or(0));
            }
        }
        for d in &dcts {
            credits.push(fabric.receive_credits(QueueId::Dct(*d)).unwrap_or(0));
        }
        let mut cq_errors = vec![false; s.cqs.len()];
        for (cqn, &i) in &cqn_index {
            cq_errors[i as usize] = fabric.cq_in_error(*cqn).unwrap_or(false);
        }
        snapshots.push(Snapshot {
            buffers: buffers.iter().map(|b| b.to_vec()).collect(),
            cq_rings: cq_mem.iter().map(|c| c.memory().ring_bytes()).collect(),
            queues,
            credits,
            cq_errors,
            stats: counters_to_stats(&counters),
        });
    }
    Ok(FabricRun {
        tables,
        arena,
        layout,
        trace,
        snapshots,
        responders,
        wqes_posted,
    })
}

/// The snapshot of an engine: its arena and its tables (any addresses; state fields are
/// read), in the order of `run`.
pub fn engine_snapshot(
    run: &FabricRun,
    arena: &[u8],
    tables: &NicTables,
    stats: NicStats,
) -> Snapshot {
    let l = &run.layout;
    let cut = |(at, len): (usize, usize)| arena.get(at..at + len).unwrap_or_default().to_vec();
    let queues = run
        .tables
        .queues
        .iter()
        .map(|want| {
            let q = tables
                .queues
                .iter()
                .find(|q| q.qpn == want.qpn)
                .copied()
                .unwrap_or_default();
            QueueView {
                qpn: want.qpn,
                state: q.state,
                consumer: q.consumer,
                executed: q.executed,
                error: (
                    q.error_kind,
                    q.error_syndrome,
                    q.error_vendor,
                    q.error_detail,
                ),
            }
        })
        .collect();
    let credits = run
        .responders
        .iter()
        .map(|&n| {
            tables
                .responders
                .iter()
                .find(|r| r.number == n)
                .map_or(0, |r| r.credits)
        })
        .collect();
    Snapshot {
        buffers: l.buffers.iter().map(|&b| cut(b)).collect(),
        cq_rings: l.cq_rings.iter().map(|&c| cut(c)).collect(),
        queues,
        credits,
        cq_errors: tables.cqs.iter().map(|c| c.error != 0).collect(),
        stats,
    }
}

/// Replays a run's trace on the host build of the CUDA NIC's engine; returns its snapshot
/// after each doorbell point.
pub fn replay_on_host(run: &FabricRun) -> Result<Vec<Snapshot>, TableError> {
    let mut nic = HostNic::new(&run.tables, &run.arena)?;
    let mut out = Vec::new();
    for writes in &run.trace {
        for (at, bytes) in writes {
            nic.write(*at, bytes)?;
        }
        nic.run_until_idle()?;
        out.push(engine_snapshot(
            run,
            nic.arena(),
            &nic.tables(),
            nic.stats(),
        ));
    }
    Ok(out)
}

/// Compares a replay with the CPU NIC's snapshots: `Err` names the first point and
/// difference.
pub fn compare(run: &FabricRun, replay: &[Snapshot]) -> Result<(), String> {
    if replay.len() != run.snapshots.len() {
        return Err(format!(
            "{} snapshots vs {}",
            run.snapshots.len(),
            replay.len()
        ));
    }
    for (p, (cpu, engine)) in run.snapshots.iter().zip(replay).enumerate() {
        if let Some(d) = cpu.diff(engine) {
            return Err(format!("doorbell point {p}: CPU NIC vs engine: {d}"));
        }
    }
    Ok(())
}
