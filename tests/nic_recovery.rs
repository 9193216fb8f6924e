//! Recovery of queue pairs made by the control plane, on the software NIC stepped by hand
//! so that every outcome is exact.
//!
//! - Every fault of the software NIC's fault matrix (`tests/softnic_faults.rs`, the table in
//!   `ibgda::softnic`) that a control-plane queue pair can meet: the failing WQE and two
//!   after it (one unsignaled), then recovery of both sides, the list it returns (the
//!   failed request with its syndrome and vendor syndrome, the two flushed, each with its
//!   ticket and WQE index), memory unchanged by all three, then a clean round of every
//!   operation. RC and DCI, InfiniBand and RoCE v2.
//!   Not here: the faults a control-plane queue pair cannot meet from safe code: a
//!   malformed WQE, one naming another queue, one reaching past the record (only the
//!   builders write its ring) and a WQE before RTS (a `PendingRc` has no post); the unit
//!   tests of `src/queue/recovery.rs` make each from inside the crate (the ring rewritten,
//!   the queue pair moved to INIT behind the control plane's back), then recover. A
//!   misaligned atomic cannot be built at all.
//! - A fault injected on a WQE (`Fabric::inject_fault`, the matrix's `Fault::Injected`
//!   row) as the emulated ConnectX arms its configured ones: the first WQE failing with
//!   LOCAL_QP_OP and vendor syndrome 0x68, the third with transport retry exceeded and
//!   0x81; then recovery, its list, and a clean round (in which the spent injection does
//!   not strike the new WQE 0). RC and DCI.
//! - A completion the NIC loses (`Fabric::drop_completion`): recovery cannot tell the
//!   request from one that ran unsignaled and counts it completed (it ran; its WRITE
//!   landed), lists nothing for it and does not wait for its CQE (`recovery`'s module
//!   documentation). As the last request, before an unsignaled one, before a fault; RC
//!   and DCI.
//! - A CQ that overran: its queue pair's recovery ends in a typed timeout, every time.
//! - A queue pair stuck behind a peer in RESET: only 2ERR_QP gets its WQEs back.
//! - A property test of random posts, faults (unknown rkey, injected), lost completions,
//!   polls, NIC steps and recoveries: every request completes exactly once or is reported
//!   (by a poll or by a recovery), never both and never neither, and a request reported
//!   did not touch memory.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibgda::cq::Syndrome;
use ibgda::memory::DmaBuffer;
use ibgda::nic::prm::{Command, Qp2Rst};
use ibgda::nic::{
    roce, DcEndpoint, Device, DeviceCaps, MemoryAccess, MemoryRegion, ProtectionDomain, QueueSpec,
    Receives, SoftNic, SoftObject, SOFT_NIC_CAPS,
};
use ibgda::queue::{
    CompletionQueueMemory, PollError, Polled, QpConfig, QueuePair, Recovery, RecoveryError,
    SendQueueMemory, Ticket, UnfinishedOutcome,
};
use ibgda::softnic::Fabric;
use ibgda::wqe::{
    Atomic, CompactAddressVector, Dc, DcTarget, Full, LKey, Nop, Qpn, RKey, Rc, RdmaRead,
    RdmaWrite, RemoteAddress, RingSize, Sge,
};
use proptest::prelude::*;

const WAIT: Duration = Duration::from_secs(5);

const LOCAL_LENGTH: u8 = 0x01;
const LOCAL_PROT: u8 = 0x04;
const REMOTE_ACCESS: u8 = 0x13;
const REMOTE_OP: u8 = 0x14;
const RETRY_EXCEEDED: u8 = 0x15;
const RNR_RETRY_EXCEEDED: u8 = 0x16;

const ALL: MemoryAccess = MemoryAccess::LOCAL_WRITE
    .union(MemoryAccess::REMOTE_WRITE)
    .union(MemoryAccess::REMOTE_READ)
    .union(MemoryAccess::REMOTE_ATOMIC);

/// A registered buffer.
struct Area {
    buffer: Arc<DmaBuffer>,
    region: MemoryRegion<SoftNic>,
}

impl Area {
    fn new(pd: &ProtectionDomain<SoftNic>, fill: u8, access: MemoryAccess) -> Self {
        let buffer = Arc::new(DmaBuffer::zeroed(256, 4096).unwrap());
        buffer.fill(0, 256, fill).unwrap();
        let region = pd.register(buffer.clone(), 0, 256, access).unwrap();
        Self { buffer, region }
    }
    fn bytes(&self, at: usize, len: usize) -> Vec<u8> {
        self.buffer.to_vec()[at..at + len].to_vec()
    }
    fn u64_at(&self, at: usize) -> u64 {
        u64::from_be_bytes(self.bytes(at, 8).try_into().unwrap())
    }
}

/// Two hosts on one fabric, no engine: the NIC moves only when a test steps it.
struct World {
    fabric: Fabric,
    a: Device<SoftNic>,
    b: Device<SoftNic>,
}

impl World {
    /// InfiniBand hosts; host B reports `b_caps`.
    fn infiniband(b_caps: DeviceCaps) -> Self {
        let fabric = Fabric::new();
        let a = Device::open(SoftNic::open(&fabric, 1).unwrap()).unwrap();
        let b = Device::open(SoftNic::open(&fabric, 2).unwrap().with_caps(b_caps)).unwrap();
        Self { fabric, a, b }
    }

    /// RoCE v2 hosts with the kernel's GID tables.
    fn roce() -> Self {
        let fabric = Fabric::new();
        let open = |host: u8| {
            let mac = [0x02, 0, 0, 0, 0, host];
            let gids = roce::kernel_gid_table(mac, &[[10, 0, 0, host]]);
            Device::open(SoftNic::open_roce(&fabric, mac, gids).unwrap()).unwrap()
        };
        let (a, b) = (open(1), open(2));
        Self { fabric, a, b }
    }

    fn step(&self) -> impl FnMut() + '_ {
        move || {
            self.fabric.step();
        }
    }
}

fn spec() -> QueueSpec {
    QueueSpec::new(RingSize::new(64).unwrap())
}

/// Posts an inline WRITE of eight `byte`s.
fn post_write<T: ibgda::wqe::Transport>(
    qp: &mut QueuePair<T>,
    wqe: Result<ibgda::wqe::Wqe<RdmaWrite<'_, T, ibgda::wqe::Inline<'_>>>, ibgda::wqe::WqeError>,
) -> Ticket {
    qp.post(&wqe.unwrap(), &[]).unwrap()
}

fn inline_write(
    remote: RemoteAddress,
    payload: &[u8; 8],
    signaled: bool,
) -> Result<ibgda::wqe::Wqe<RdmaWrite<'_, Rc, ibgda::wqe::Inline<'_>>>, ibgda::wqe::WqeError> {
    let w = RdmaWrite::new(remote).inline(payload);
    if signaled {
        w.signaled().build()
    } else {
        w.build()
    }
}

/// The first basic block of the WQE a ticket ends, for a WQE of `wqebbs` blocks.
fn first_block(ticket: Ticket, wqebbs: u64) -> u16 {
    (ticket.end() - wqebbs) as u16
}

/// A recovery's list as (ticket, WQE index, failed?, syndrome, vendor syndrome).
fn listed(recovery: &Recovery) -> Vec<(Ticket, u16, bool, u8, u8)> {
    recovery
        .unfinished
        .iter()
        .map(|u| {
            let (failed, e) = match u.outcome {
                UnfinishedOutcome::Failed(e) => (true, e),
                UnfinishedOutcome::Flushed(e) => (false, e),
            };
            assert_eq!(e.wqe_index, u.wqe_index);
            (
                u.ticket,
                u.wqe_index,
                failed,
                e.syndrome_byte,
                e.vendor_syndrome,
            )
        })
        .collect()
}

/// An RC pair A -> B and the memory the faults and the clean round use.
struct RcPair<'w> {
    world: &'w World,
    pd_b: ProtectionDomain<SoftNic>,
    a: QueuePair<Rc>,
    b: Option<QueuePair<Rc>>,
    local: Area,
    local_read_only: Area,
    remote: Area,
    remote_read_only: Area,
}

impl<'w> RcPair<'w> {
    fn new(world: &'w World, b_spec: QueueSpec) -> Self {
        let (pd_a, pd_b) = (world.a.alloc_pd().unwrap(), world.b.alloc_pd().unwrap());
        let (pa, pb) = (
            pd_a.create_rc(spec()).unwrap(),
            // B receives (WRITE_WITH_IMM) through its protection domain's SRQ.
            pd_b.create_rc(b_spec.with_receives(Receives::SharedQueue))
                .unwrap(),
        );
        let (ea, eb) = (pa.endpoint(), pb.endpoint());
        let (a, b) = (pa.connect(&eb).unwrap(), pb.connect(&ea).unwrap());
        Self {
            local: Area::new(&pd_a, 0x1a, ALL),
            local_read_only: Area::new(&pd_a, 0x1b, MemoryAccess::REMOTE_READ),
            remote: Area::new(&pd_b, 0x2a, ALL),
            remote_read_only: Area::new(
                &pd_b,
                0x2b,
                MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_READ,
            ),
            world,
            pd_b,
            a,
            b: Some(b),
        }
    }

    fn images(&self) -> [Vec<u8>; 4] {
        [
            self.local.buffer.to_vec(),
            self.local_read_only.buffer.to_vec(),
            self.remote.buffer.to_vec(),
            self.remote_read_only.buffer.to_vec(),
        ]
    }

    /// Recovers A, and B (or, if the fault took B away, a new queue pair in its place).
    fn recover_both(&mut self) -> (Recovery, Option<Recovery>) {
        let next_a = self.a.endpoint().unwrap();
        let mut step = self.world.step();
        match self.b.as_mut() {
            Some(b) => {
                let next_b = b.endpoint().unwrap();
                let ra = self.a.recover_driving(&next_b, WAIT, &mut step).unwrap();
                let rb = b.recover_driving(&next_a, WAIT, &mut step).unwrap();
                (ra, Some(rb))
            }
            None => {
                let pb = self
                    .pd_b
                    .create_rc(spec().with_receives(Receives::SharedQueue))
                    .unwrap();
                let eb = pb.endpoint();
                self.b = Some(pb.connect(&next_a).unwrap());
                (self.a.recover_driving(&eb, WAIT, &mut step).unwrap(), None)
            }
        }
    }

    /// Every operation through A once, memory and completions checked exactly (atomics
    /// only where B's device has them).
    fn clean_round(&mut self, atomics: bool) {
        let (l, r) = (&self.local, &self.remote);
        r.buffer.write(64, &100u64.to_be_bytes()).unwrap();
        r.buffer.write(72, &7u64.to_be_bytes()).unwrap();
        r.buffer
            .write(80, &0xffff_0001_7fff_0000u64.to_be_bytes())
            .unwrap();
        r.buffer.write(96, &0x1234_5678u32.to_be_bytes()).unwrap();
        r.buffer.write(128, b"sixteen bytes!!!").unwrap();
        l.buffer
            .write(40, &0x0102_0304_0506_0708u64.to_be_bytes())
            .unwrap();
        let regs = [l.region.registered()];
        let (lr, rr) = (&l.region, &r.region);
        let payload = [0xa5; 8];
        let mut tickets = vec![
            self.a
                .post(&inline_write(rr.remote(0), &payload, true).unwrap(), &[])
                .unwrap(),
            self.a
                .post(
                    &RdmaWrite::new(rr.remote(8))
                        .sge(lr.sge(40, 8).unwrap())
                        .signaled()
                        .build()
                        .unwrap(),
                    &regs,
                )
                .unwrap(),
            self.a
                .post(
                    &RdmaRead::new(rr.remote(128))
                        .sge(lr.sge(0, 16).unwrap())
                        .signaled()
                        .build()
                        .unwrap(),
                    &regs,
                )
                .unwrap(),
        ];
        if atomics {
            let ops = [
                Atomic::fetch_add(rr.remote(64), lr.local(64), 5)
                    .signaled()
                    .build()
                    .unwrap(),
                Atomic::compare_swap(rr.remote(72), lr.local(72), 7, 9)
                    .signaled()
                    .build()
                    .unwrap(),
            ];
            for op in &ops {
                tickets.push(self.a.post(op, &regs).unwrap());
            }
            let mfa = Atomic::masked_fetch_add_64(
                rr.remote(80),
                lr.local(80),
                0x0001_0001_0001_0001,
                0x8000_8000_8000_8000,
            );
            tickets.push(
                self.a
                    .post(&mfa.signaled().build().unwrap(), &regs)
                    .unwrap(),
            );
            let mcs = Atomic::masked_compare_swap_32(
                rr.remote(96),
                lr.local(96),
                0xabcd_0000,
                0x0000_5678,
                0xffff_0000,
                0x0000_ffff,
            );
            tickets.push(
                self.a
                    .post(&mcs.signaled().build().unwrap(), &regs)
                    .unwrap(),
            );
        }
        self.pd_b
            .shared_receive_queue()
            .unwrap()
            .post_receives(1)
            .unwrap();
        let imm = RdmaWrite::new(rr.remote(160))
            .inline(&[3; 4])
            .immediate(0xfeed)
            .signaled()
            .build()
            .unwrap();
        tickets.push(self.a.post(&imm, &[]).unwrap());
        let last = *tickets.last().unwrap();
        self.a
            .wait_driving(last, WAIT, &mut self.world.step())
            .unwrap();
        assert!(tickets.iter().all(|t| self.a.sq().is_complete(*t)));
        assert_eq!(r.bytes(0, 8), vec![0xa5; 8], "inline WRITE");
        assert_eq!(r.u64_at(8), 0x0102_0304_0506_0708, "gathered WRITE");
        assert_eq!(l.bytes(0, 16), b"sixteen bytes!!!".to_vec(), "READ");
        if atomics {
            assert_eq!((l.u64_at(64), r.u64_at(64)), (100, 105), "fetch-add");
            assert_eq!((l.u64_at(72), r.u64_at(72)), (7, 9), "compare-swap");
            assert_eq!(
                (l.u64_at(80), r.u64_at(80)),
                (0xffff_0001_7fff_0000, 0x0000_0002_8000_0001),
                "masked fetch-add"
            );
            assert_eq!(l.bytes(96, 4), 0x1234_5678u32.to_be_bytes().to_vec());
            assert_eq!(
                r.bytes(96, 4),
                0xabcd_5678u32.to_be_bytes().to_vec(),
                "masked CS"
            );
        }
        assert_eq!(r.bytes(160, 4), vec![3; 4], "WRITE_WITH_IMM");
        let b = self.b.as_mut().unwrap();
        let start = Instant::now();
        let received = loop {
            self.world.fabric.step();
            if let Some(polled) = b.poll().unwrap() {
                break polled;
            }
            assert!(start.elapsed() < WAIT, "no receive completion");
        };
        match received {
            Polled::Received(r) => assert_eq!((r.imm, r.byte_count), (0xfeed, 4)),
            other => panic!("expected the receive completion, got {other:?}"),
        }
    }
}

/// Runs one RC fault: `fault` posts the failing WQE (a one-block WQE) and may take B
/// away; two WRITEs follow. Expects the recovery list exactly, memory untouched, and a
/// clean round after.
fn rc_fault(
    world: &World,
    b_spec: QueueSpec,
    fault: impl FnOnce(&mut RcPair<'_>) -> Ticket,
    syndrome: u8,
    vendor: u8,
) -> RcPair<'_> {
    let mut pair = RcPair::new(world, b_spec);
    let payload = [0x11; 8];
    let done = post_write(
        &mut pair.a,
        inline_write(pair.remote.region.remote(200), &payload, true),
    );
    pair.a.wait_driving(done, WAIT, &mut world.step()).unwrap();
    let before = pair.images();
    let failed = fault(&mut pair);
    let f1 = post_write(
        &mut pair.a,
        inline_write(pair.remote.region.remote(208), &[0x22; 8], false),
    );
    let f2 = post_write(
        &mut pair.a,
        inline_write(pair.remote.region.remote(216), &[0x33; 8], true),
    );
    world.fabric.run_until_idle();
    let after = pair.images();
    let (recovery, _) = pair.recover_both();
    assert_eq!(
        listed(&recovery),
        vec![
            (failed, first_block(failed, 1), true, syndrome, vendor),
            (
                f1,
                first_block(f1, 1),
                false,
                Syndrome::WorkRequestFlushed as u8,
                0
            ),
            (
                f2,
                first_block(f2, 1),
                false,
                Syndrome::WorkRequestFlushed as u8,
                0
            ),
        ]
    );
    assert_eq!(
        after, before,
        "the failed and the flushed WQEs changed no memory"
    );
    for t in [done, failed, f1, f2] {
        assert!(pair.a.sq().is_complete(t), "{t:?} resolved");
    }
    // The ring starts over at WQE index 0.
    let nop = pair
        .a
        .post(&Nop::<Rc>::new().signaled().build().unwrap(), &[])
        .unwrap();
    assert_eq!(first_block(nop, 1), 0);
    pair.a.wait_driving(nop, WAIT, &mut world.step()).unwrap();
    pair
}

/// Posts a failing WQE on a pair's A side and returns its ticket.
type PostFault = dyn Fn(&mut RcPair<'_>) -> Ticket;

#[test]
fn every_rc_fault_then_recovery_then_a_clean_round() {
    let world = World::infiniband(SOFT_NIC_CAPS);
    // The local faults, checked before anything reaches the peer.
    // SAFETY (every `post_unchecked` below): the WQE names a key or range the NIC refuses
    // before it touches any memory; nothing is read or written through it.
    let cases: Vec<(&str, Box<PostFault>, u8, u8)> = vec![
        (
            "unknown lkey",
            Box::new(|p| {
                let sge = Sge::new(p.local.region.addr(), 8, LKey(0xbad)).unwrap();
                let w = RdmaWrite::new(p.remote.region.remote(0))
                    .sge(sge)
                    .signaled()
                    .build()
                    .unwrap();
                unsafe { p.a.sq_mut().post_unchecked(&w) }.unwrap()
            }),
            LOCAL_PROT,
            0x20,
        ),
        (
            "local range outside the region",
            Box::new(|p| {
                let sge = p.local.region.sge(250, 16).unwrap();
                let w = RdmaWrite::new(p.remote.region.remote(0))
                    .sge(sge)
                    .signaled()
                    .build()
                    .unwrap();
                unsafe { p.a.sq_mut().post_unchecked(&w) }.unwrap()
            }),
            LOCAL_PROT,
            0x21,
        ),
        (
            "READ into memory the NIC may not write",
            Box::new(|p| {
                let regs = [p.local_read_only.region.registered()];
                let sge = p.local_read_only.region.sge(0, 8).unwrap();
                let r = RdmaRead::new(p.remote.region.remote(0))
                    .sge(sge)
                    .signaled()
                    .build()
                    .unwrap();
                p.a.post(&r, &regs).unwrap()
            }),
            LOCAL_PROT,
            0x22,
        ),
        (
            "message over the limit",
            Box::new(|p| {
                let sge =
                    Sge::new(p.local.region.addr(), (1 << 30) + 1, p.local.region.lkey()).unwrap();
                let w = RdmaWrite::new(p.remote.region.remote(0))
                    .sge(sge)
                    .signaled()
                    .build()
                    .unwrap();
                unsafe { p.a.sq_mut().post_unchecked(&w) }.unwrap()
            }),
            LOCAL_LENGTH,
            0x10,
        ),
        (
            "unknown rkey",
            Box::new(|p| {
                let remote = RemoteAddress::new(p.remote.region.addr(), RKey(0xbad));
                post_write(&mut p.a, inline_write(remote, &[1; 8], true))
            }),
            REMOTE_ACCESS,
            0x40,
        ),
        (
            "remote range outside the region",
            Box::new(|p| {
                post_write(
                    &mut p.a,
                    inline_write(p.remote.region.remote(252), &[1; 8], true),
                )
            }),
            REMOTE_ACCESS,
            0x41,
        ),
        (
            "WRITE to read-only memory",
            Box::new(|p| {
                post_write(
                    &mut p.a,
                    inline_write(p.remote_read_only.region.remote(0), &[1; 8], true),
                )
            }),
            REMOTE_ACCESS,
            0x42,
        ),
        (
            "WRITE_WITH_IMM without a receive credit",
            Box::new(|p| {
                let w = RdmaWrite::new(p.remote.region.remote(0))
                    .inline(&[1; 4])
                    .immediate(1)
                    .signaled()
                    .build()
                    .unwrap();
                p.a.post(&w, &[]).unwrap()
            }),
            RNR_RETRY_EXCEEDED,
            0x60,
        ),
        (
            "the responder gone",
            Box::new(|p| {
                p.b = None;
                post_write(
                    &mut p.a,
                    inline_write(p.remote.region.remote(0), &[1; 8], true),
                )
            }),
            RETRY_EXCEEDED,
            0x53,
        ),
    ];
    for (name, fault, syndrome, vendor) in cases {
        eprintln!("fault: {name}");
        let mut pair = rc_fault(&world, spec(), fault, syndrome, vendor);
        pair.clean_round(true);
    }
}

#[test]
fn an_atomic_to_a_responder_without_atomics_then_recovery() {
    let caps = DeviceCaps {
        atomic: false,
        masked_atomics: false,
        ..SOFT_NIC_CAPS
    };
    let world = World::infiniband(caps);
    let mut pair = rc_fault(
        &world,
        spec(),
        |p| {
            let regs = [p.local.region.registered()];
            let fa = Atomic::fetch_add(p.remote.region.remote(64), p.local.region.local(0), 1);
            p.a.post(&fa.signaled().build().unwrap(), &regs).unwrap()
        },
        REMOTE_ACCESS,
        0x43,
    );
    pair.clean_round(false);
}

#[test]
fn a_responder_cq_overrun_then_recovery_to_a_new_responder() {
    let world = World::infiniband(SOFT_NIC_CAPS);
    let small = QueueSpec {
        cq_entries: 2,
        ..spec()
    };
    let mut kept_b = None;
    let mut pair = rc_fault(
        &world,
        small,
        |p| {
            p.pd_b
                .shared_receive_queue()
                .unwrap()
                .post_receives(3)
                .unwrap();
            let imm = |v| {
                RdmaWrite::new(p.remote.region.remote(0))
                    .inline(&[9; 4])
                    .immediate(v)
                    .signaled()
                    .build()
                    .unwrap()
            };
            // Two fill B's CQ (B does not poll); the third overruns it.
            p.a.post(&imm(1), &[]).unwrap();
            p.a.post(&imm(2), &[]).unwrap();
            p.world.fabric.run_until_idle();
            let (a_done, _) = (p.a.poll().unwrap(), p.a.poll().unwrap());
            assert!(matches!(a_done, Some(Polled::Sent { .. })));
            // `rc_fault` compares memory from before this closure: undo the two WRITEs.
            p.remote.buffer.fill(0, 4, 0x2a).unwrap();
            let failed = p.a.post(&imm(3), &[]).unwrap();
            kept_b = p.b.take();
            failed
        },
        REMOTE_OP,
        0x70,
    );
    // The old B's CQ is in the error state: its recovery drains the two receives, and the
    // queue pair is useless still (make it again).
    let mut b = kept_b.unwrap();
    let next = pair.a.endpoint().unwrap();
    let recovery = b.recover_driving(&next, WAIT, &mut world.step()).unwrap();
    assert_eq!(
        recovery.received.iter().map(|r| r.imm).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert!(recovery.unfinished.is_empty());
    pair.clean_round(true);
}

/// A DC fault: `target` is a bad target for a WRITE; then recovery and a clean round
/// through the good target.
fn dc_fault<Av: ibgda::wqe::AvForm>(
    world: &World,
    good: DcTarget<Av>,
    bad: DcTarget<Av>,
    remote: &Area,
    local: &Area,
    pd_a: &ProtectionDomain<SoftNic>,
    vendor: u8,
) where
    Dc<Av>: ibgda::wqe::TypedTransport,
{
    let mut dci = pd_a.create_dci::<Av>(spec()).unwrap().activate().unwrap();
    let wqebbs = if Av::DS == 1 { 1 } else { 2 };
    let write = |t: &DcTarget<Av>, at: u64, signaled: bool| {
        let w = RdmaWrite::new(t.at(remote.region.remote(at))).inline(&[0x44; 8]);
        if signaled {
            w.signaled().build().unwrap()
        } else {
            w.build().unwrap()
        }
    };
    let before = remote.buffer.to_vec();
    let failed = dci.post(&write(&bad, 0, true), &[]).unwrap();
    let f1 = dci.post(&write(&good, 8, false), &[]).unwrap();
    let f2 = dci.post(&write(&good, 16, true), &[]).unwrap();
    world.fabric.run_until_idle();
    let recovery = dci.recover_dci_driving(WAIT, &mut world.step()).unwrap();
    assert_eq!(
        listed(&recovery),
        vec![
            (
                failed,
                first_block(failed, wqebbs),
                true,
                RETRY_EXCEEDED,
                vendor
            ),
            (
                f1,
                first_block(f1, wqebbs),
                false,
                Syndrome::WorkRequestFlushed as u8,
                0
            ),
            (
                f2,
                first_block(f2, wqebbs),
                false,
                Syndrome::WorkRequestFlushed as u8,
                0
            ),
        ]
    );
    assert_eq!(remote.buffer.to_vec(), before);
    dc_clean_round(world, &mut dci, &good, remote, local);
}

/// WRITE, fetch-add and READ through `good` on a DCI just recovered (its ring starts over
/// at WQE index 0), memory checked exactly.
fn dc_clean_round<Av: ibgda::wqe::AvForm>(
    world: &World,
    dci: &mut QueuePair<Dc<Av>>,
    good: &DcTarget<Av>,
    remote: &Area,
    local: &Area,
) where
    Dc<Av>: ibgda::wqe::TypedTransport,
{
    let wqebbs = if Av::DS == 1 { 1 } else { 2 };
    let regs = [local.region.registered()];
    remote.buffer.write(40, &41u64.to_be_bytes()).unwrap();
    remote.buffer.write(48, b"through the DCT!").unwrap();
    let write = RdmaWrite::new(good.at(remote.region.remote(0)))
        .inline(&[0x44; 8])
        .signaled()
        .build()
        .unwrap();
    let w = dci.post(&write, &[]).unwrap();
    assert_eq!(first_block(w, wqebbs), 0);
    let fa = Atomic::fetch_add(good.at(remote.region.remote(40)), local.region.local(0), 1);
    dci.post(&fa.signaled().build().unwrap(), &regs).unwrap();
    let r = RdmaRead::new(good.at(remote.region.remote(48)))
        .sge(local.region.sge(16, 16).unwrap())
        .signaled()
        .build()
        .unwrap();
    let last = dci.post(&r, &regs).unwrap();
    dci.wait_driving(last, WAIT, &mut world.step()).unwrap();
    assert_eq!(remote.bytes(0, 8), vec![0x44; 8]);
    assert_eq!((local.u64_at(0), remote.u64_at(40)), (41, 42));
    assert_eq!(local.bytes(16, 16), b"through the DCT!".to_vec());
}

/// The DCT's endpoint with its address vector changed by `change`.
fn forged(
    endpoint: DcEndpoint,
    change: impl FnOnce(&mut ibgda::wqe::segment::AddressVectorSegment),
) -> DcTarget<Full> {
    let mut e = endpoint;
    change(&mut e.address_vector);
    e.full_target().unwrap()
}

#[test]
fn every_dc_fault_then_recovery_then_a_clean_round() {
    let world = World::infiniband(SOFT_NIC_CAPS);
    let (pd_a, pd_b) = (world.a.alloc_pd().unwrap(), world.b.alloc_pd().unwrap());
    let (local, remote) = (Area::new(&pd_a, 0, ALL), Area::new(&pd_b, 0, ALL));
    let dct = pd_b.create_dct(0x5623_ceaf, 16).unwrap();
    let e = dct.endpoint();
    let compact = |dct: u32, key: u64, lid: u16| {
        CompactAddressVector {
            dct,
            dc_key: key,
            lid,
            ..Default::default()
        }
        .encode()
        .unwrap()
    };
    let good = compact(e.dct, e.access_key, e.lid);
    dc_fault(
        &world,
        good,
        compact(e.dct, e.access_key, 0x77),
        &remote,
        &local,
        &pd_a,
        0x50,
    );
    dc_fault(
        &world,
        good,
        compact(e.dct + 1, e.access_key, e.lid),
        &remote,
        &local,
        &pd_a,
        0x51,
    );
    dc_fault(
        &world,
        good,
        compact(e.dct, e.access_key ^ 1, e.lid),
        &remote,
        &local,
        &pd_a,
        0x52,
    );
    let good = e.full_target().unwrap();
    let bad =
        DcTarget::from_hardware_av(e.address_vector, Qpn::new(e.dct + 1).unwrap(), e.access_key);
    dc_fault(&world, good, bad, &remote, &local, &pd_a, 0x51);
}

#[test]
fn roce_faults_then_recovery_then_a_clean_round() {
    let world = World::roce();
    let (pd_a, pd_b) = (world.a.alloc_pd().unwrap(), world.b.alloc_pd().unwrap());
    let (local, remote) = (Area::new(&pd_a, 0, ALL), Area::new(&pd_b, 0, ALL));
    let dct = pd_b.create_dct(0x5623_ceaf, 16).unwrap();
    let good = dct.endpoint().full_target().unwrap();
    let unknown_gid = forged(dct.endpoint(), |av| av.rgid[15] ^= 0x40);
    dc_fault(&world, good, unknown_gid, &remote, &local, &pd_a, 0x54);
    let wrong_mac = forged(dct.endpoint(), |av| av.rmac[5] ^= 0x01);
    dc_fault(&world, good, wrong_mac, &remote, &local, &pd_a, 0x55);
    // RC over RoCE: a remote access error, recovery, every operation.
    let mut pair = rc_fault(
        &world,
        spec(),
        |p| {
            post_write(
                &mut p.a,
                inline_write(p.remote_read_only.region.remote(0), &[1; 8], true),
            )
        },
        REMOTE_ACCESS,
        0x42,
    );
    pair.clean_round(true);
}

/// The emulated ConnectX's configured data-path faults (emu/README.md), armed as its
/// `inject_faults` arms them on every new queue pair: `fault.first_wqe = 0x68` fails the
/// first WQE with LOCAL_QP_OP (0x02) and vendor syndrome 0x68; `fault.
/// transport_retry_exceeded_at = 2` fails the third with TRANSPORT_RETRY_EXC (0x15) and
/// vendor syndrome 0x81 (the emulator's `RETRY_EXCEEDED_VENDOR_SYNDROME`).
const INJECTED: [(&str, u64, Syndrome, u8); 2] = [
    (
        "first WQE: LOCAL_QP_OP, 0x68",
        0,
        Syndrome::LocalQpOperation,
        0x68,
    ),
    (
        "third WQE: transport retry exceeded, 0x81",
        2,
        Syndrome::TransportRetryExceeded,
        0x81,
    ),
];

/// The RC side of an injected fault: `at` WRITEs that complete, the WRITE the fault hits,
/// an unsignaled and a signaled WRITE the NIC flushes; recovery of both sides lists
/// exactly the last three (the first with the injected syndrome and vendor syndrome),
/// memory shows the first `at` and nothing of the others, the ring starts over at WQE 0
/// (WQE number 0 again for the NIC, where the spent injection does not strike twice), and
/// every operation works.
#[test]
fn an_injected_fault_then_recovery_then_a_clean_round() {
    let world = World::infiniband(SOFT_NIC_CAPS);
    for (name, at, syndrome, vendor) in INJECTED {
        eprintln!("injected: {name}");
        let mut pair = RcPair::new(&world, spec());
        world
            .fabric
            .inject_fault(pair.a.qpn().get(), at, syndrome, vendor)
            .unwrap();
        let done: Vec<Ticket> = (0..at)
            .map(|i| {
                let remote = pair.remote.region.remote(224 + 8 * i);
                post_write(&mut pair.a, inline_write(remote, &[0x11; 8], true))
            })
            .collect();
        if let Some(&last) = done.last() {
            pair.a.wait_driving(last, WAIT, &mut world.step()).unwrap();
        }
        for i in 0..at as usize {
            assert_eq!(pair.remote.bytes(224 + 8 * i, 8), vec![0x11; 8]);
        }
        let before = pair.images();
        let r = &pair.remote.region;
        let (w0, w1, w2) = (r.remote(0), r.remote(8), r.remote(16));
        let failed = post_write(&mut pair.a, inline_write(w0, &[0x22; 8], true));
        let f1 = post_write(&mut pair.a, inline_write(w1, &[0x33; 8], false));
        let f2 = post_write(&mut pair.a, inline_write(w2, &[0x44; 8], true));
        world.fabric.run_until_idle();
        assert_eq!(
            pair.images(),
            before,
            "the failed and flushed WRITEs landed"
        );
        let (ra, rb) = pair.recover_both();
        let flushed = Syndrome::WorkRequestFlushed as u8;
        assert_eq!(
            listed(&ra),
            vec![
                (failed, first_block(failed, 1), true, syndrome as u8, vendor),
                (f1, first_block(f1, 1), false, flushed, 0),
                (f2, first_block(f2, 1), false, flushed, 0),
            ]
        );
        assert_eq!(
            rb.map(|r| r.unfinished),
            Some(Vec::new()),
            "B posted nothing"
        );
        for t in done.iter().chain([&failed, &f1, &f2]) {
            assert!(pair.a.sq().is_complete(*t), "{t:?} resolved");
        }
        let nop = pair
            .a
            .post(&Nop::<Rc>::new().signaled().build().unwrap(), &[])
            .unwrap();
        assert_eq!(first_block(nop, 1), 0);
        pair.a.wait_driving(nop, WAIT, &mut world.step()).unwrap();
        pair.clean_round(true);
    }
}

/// The DCI side of an injected fault: as for RC, through a DC target (full address
/// vectors: two WQEBBs a WRITE).
#[test]
fn an_injected_fault_on_a_dci_then_recovery_then_a_clean_round() {
    let world = World::infiniband(SOFT_NIC_CAPS);
    let (pd_a, pd_b) = (world.a.alloc_pd().unwrap(), world.b.alloc_pd().unwrap());
    let (local, remote) = (Area::new(&pd_a, 0, ALL), Area::new(&pd_b, 0, ALL));
    let dct = pd_b.create_dct(0x5623_ceaf, 16).unwrap();
    let good = dct.endpoint().full_target().unwrap();
    let payloads: [[u8; 8]; 4] = [[0x11; 8], [0x22; 8], [0x33; 8], [0x44; 8]];
    let write = |at: u64, payload: usize, signaled: bool| {
        let w = RdmaWrite::new(good.at(remote.region.remote(at))).inline(&payloads[payload]);
        if signaled {
            w.signaled().build().unwrap()
        } else {
            w.build().unwrap()
        }
    };
    for (name, at, syndrome, vendor) in INJECTED {
        eprintln!("injected: {name}");
        remote.buffer.fill(0, 256, 0).unwrap();
        let mut dci = pd_a.create_dci::<Full>(spec()).unwrap().activate().unwrap();
        world
            .fabric
            .inject_fault(dci.qpn().get(), at, syndrome, vendor)
            .unwrap();
        // `at` WRITEs that complete (the first unsignaled), then the one the fault hits.
        let done: Vec<Ticket> = (0..at)
            .map(|i| dci.post(&write(200 + 8 * i, 0, i + 1 == at), &[]).unwrap())
            .collect();
        let failed = dci.post(&write(0, 1, true), &[]).unwrap();
        let f1 = dci.post(&write(8, 2, false), &[]).unwrap();
        let f2 = dci.post(&write(16, 3, true), &[]).unwrap();
        world.fabric.run_until_idle();
        let recovery = dci.recover_dci_driving(WAIT, &mut world.step()).unwrap();
        let flushed = Syndrome::WorkRequestFlushed as u8;
        assert_eq!(
            listed(&recovery),
            vec![
                (failed, first_block(failed, 2), true, syndrome as u8, vendor),
                (f1, first_block(f1, 2), false, flushed, 0),
                (f2, first_block(f2, 2), false, flushed, 0),
            ]
        );
        for t in done.iter().chain([&failed, &f1, &f2]) {
            assert!(dci.sq().is_complete(*t), "{t:?} resolved");
        }
        assert_eq!(
            remote.bytes(200, 8 * at as usize),
            vec![0x11; 8 * at as usize]
        );
        assert_eq!(
            remote.bytes(0, 24),
            vec![0; 24],
            "failed and flushed WRITEs landed"
        );
        dc_clean_round(&world, &mut dci, &good, &remote, &local);
    }
}

/// A completion the NIC loses (`Fabric::drop_completion`) cannot be told apart by
/// recovery from a request that ran unsignaled, and is not one that failed: recovery
/// counts it completed (it ran: a NIC in error gives every WQE it does not run a CQE of
/// its own), reports it nowhere, and does not wait for its CQE. Three places: the last
/// request out, the request before an unsignaled one, the request before a fault.
#[test]
fn a_lost_completion_then_recovery_counts_the_request_completed() {
    let world = World::infiniband(SOFT_NIC_CAPS);
    for case in ["last", "before an unsignaled request", "before a fault"] {
        eprintln!("lost completion: {case}");
        let mut pair = RcPair::new(&world, spec());
        let qpn = pair.a.qpn();
        let r = &pair.remote.region;
        let (w0, w1, w2) = (r.remote(0), r.remote(8), r.remote(16));
        let first = post_write(&mut pair.a, inline_write(w0, &[0x11; 8], true));
        // The second WQE's completion is lost.
        world.fabric.drop_completion(qpn.get(), 1).unwrap();
        let lost = post_write(&mut pair.a, inline_write(w1, &[0x22; 8], true));
        let after = match case {
            "last" => None,
            "before an unsignaled request" => Some((
                post_write(&mut pair.a, inline_write(w2, &[0x33; 8], false)),
                false,
            )),
            _ => {
                let bad = RemoteAddress::new(pair.remote.region.addr(), RKey(0xbad));
                Some((
                    post_write(&mut pair.a, inline_write(bad, &[0x33; 8], true)),
                    true,
                ))
            }
        };
        world.fabric.run_until_idle();
        assert_eq!(
            pair.remote.bytes(8, 8),
            vec![0x22; 8],
            "the WRITE itself landed"
        );
        // Its CQE never comes: a wait for it ends at its deadline.
        let waited = pair
            .a
            .wait_driving(lost, Duration::from_millis(20), &mut world.step());
        match (case, waited) {
            ("before a fault", Err(ibgda::queue::WaitError::Poll(PollError::Completion(e)))) => {
                // The fault's error CQE retires the lost one with it (it ran before).
                assert_eq!(e.syndrome, Some(Syndrome::RemoteAccess));
                assert!(pair.a.sq().is_complete(lost));
            }
            (_, Err(ibgda::queue::WaitError::Timeout { .. })) => {
                assert!(pair.a.sq().is_complete(first) && !pair.a.sq().is_complete(lost));
            }
            (_, other) => panic!("{case}: the wait for the lost completion gave {other:?}"),
        }
        let (ra, _) = pair.recover_both();
        // Nothing is listed: the lost request and the one before it completed, an
        // unsignaled one after them ran, and the fault's error CQE was returned by the
        // wait above (a poll), so it is not reported twice.
        assert_eq!(listed(&ra), vec![]);
        for t in [first, lost].into_iter().chain(after.map(|a| a.0)) {
            assert!(pair.a.sq().is_complete(t), "{t:?} resolved");
        }
        if let Some((unsignaled, false)) = after {
            assert_eq!(
                pair.remote.bytes(16, 8),
                vec![0x33; 8],
                "{unsignaled:?} ran"
            );
        }
        pair.clean_round(true);
    }
}

/// As above on a DCI: the last request's completion lost, then recovery.
#[test]
fn a_lost_completion_on_a_dci_then_recovery_counts_the_request_completed() {
    let world = World::infiniband(SOFT_NIC_CAPS);
    let (pd_a, pd_b) = (world.a.alloc_pd().unwrap(), world.b.alloc_pd().unwrap());
    let (local, remote) = (Area::new(&pd_a, 0, ALL), Area::new(&pd_b, 0, ALL));
    let dct = pd_b.create_dct(0x5623_ceaf, 16).unwrap();
    let good = dct.endpoint().full_target().unwrap();
    let mut dci = pd_a.create_dci::<Full>(spec()).unwrap().activate().unwrap();
    world.fabric.drop_completion(dci.qpn().get(), 0).unwrap();
    let write = RdmaWrite::new(good.at(remote.region.remote(200)))
        .inline(&[0x5c; 8])
        .signaled()
        .build()
        .unwrap();
    let lost = dci.post(&write, &[]).unwrap();
    world.fabric.run_until_idle();
    assert_eq!(remote.bytes(200, 8), vec![0x5c; 8]);
    assert!(matches!(
        dci.wait_driving(lost, Duration::from_millis(20), &mut world.step()),
        Err(ibgda::queue::WaitError::Timeout { .. })
    ));
    let recovery = dci.recover_dci_driving(WAIT, &mut world.step()).unwrap();
    assert_eq!(recovery, Recovery::default(), "nothing to report");
    assert!(dci.sq().is_complete(lost));
    dc_clean_round(&world, &mut dci, &good, &remote, &local);
}

#[test]
fn a_send_cq_that_overran_makes_recovery_time_out_every_time() {
    let world = World::infiniband(SOFT_NIC_CAPS);
    let pd = world.a.alloc_pd().unwrap();
    let remote = Area::new(&pd, 0, ALL);
    let pending = pd
        .create_rc(QueueSpec {
            cq_entries: 2,
            ..spec()
        })
        .unwrap();
    let endpoint = pending.endpoint();
    let mut qp = pending.connect(&endpoint).unwrap();
    let tickets: Vec<Ticket> = (0..4)
        .map(|i| {
            post_write(
                &mut qp,
                inline_write(remote.region.remote(i * 8), &[7; 8], true),
            )
        })
        .collect();
    world.fabric.run_until_idle();
    let cq = world.fabric.send_cq(qp.qpn()).unwrap();
    assert_eq!(world.fabric.cq_in_error(cq), Some(true));
    for _ in 0..2 {
        let next = qp.endpoint().unwrap();
        let start = Instant::now();
        let e = qp
            .recover_driving(&next, Duration::from_millis(100), &mut world.step())
            .unwrap_err();
        assert!(start.elapsed() < WAIT, "the timeout holds");
        // The two CQEs the CQ held were successes; two WQEBBs never complete.
        assert!(
            matches!(
                e,
                RecoveryError::Timeout {
                    outstanding_wqebbs: 2,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(qp.sq().is_complete(tickets[1]) && !qp.sq().is_complete(tickets[2]));
    }
}

#[test]
fn only_2err_gets_back_wqes_stuck_behind_a_peer_in_reset() {
    let world = World::infiniband(SOFT_NIC_CAPS);
    let (pd_a, pd_b) = (world.a.alloc_pd().unwrap(), world.b.alloc_pd().unwrap());
    let remote = Area::new(&pd_b, 0, ALL);
    let (pa, pb) = (
        pd_a.create_rc(spec()).unwrap(),
        pd_b.create_rc(spec()).unwrap(),
    );
    let (ea, eb) = (pa.endpoint(), pb.endpoint());
    let (mut a, mut b) = (pa.connect(&eb).unwrap(), pb.connect(&ea).unwrap());
    // B goes to RESET behind the control plane's back (2RST_QP through the backend).
    let reset = Qp2Rst {
        uid: 0,
        qpn: b.qpn().get(),
    }
    .encode()
    .unwrap();
    world
        .b
        .backend()
        .modify_object(&SoftObject::Qp(b.qpn().get()), &reset, &mut [0u8; 64])
        .unwrap();
    let tickets: Vec<Ticket> = (0..3)
        .map(|i| {
            post_write(
                &mut a,
                inline_write(remote.region.remote(i * 8), &[7; 8], i != 1),
            )
        })
        .collect();
    let report = world.fabric.run_until_idle();
    assert_eq!(
        report.wqes_executed + report.wqes_failed + report.wqes_flushed,
        0,
        "stuck"
    );
    let (next_a, next_b) = (a.endpoint().unwrap(), b.endpoint().unwrap());
    let recovery = a.recover_driving(&next_b, WAIT, &mut world.step()).unwrap();
    assert_eq!(
        listed(&recovery),
        tickets
            .iter()
            .map(|&t| (
                t,
                first_block(t, 1),
                false,
                Syndrome::WorkRequestFlushed as u8,
                0
            ))
            .collect::<Vec<_>>()
    );
    assert_eq!(remote.bytes(0, 24), vec![0; 24]);
    b.recover_driving(&next_a, WAIT, &mut world.step()).unwrap();
    let t = post_write(&mut a, inline_write(remote.region.remote(0), &[8; 8], true));
    a.wait_driving(t, WAIT, &mut world.step()).unwrap();
    assert_eq!(remote.bytes(0, 8), vec![8; 8]);
}

#[test]
fn a_queue_pair_not_made_by_the_control_plane_cannot_be_recovered() {
    let size = RingSize::new(8).unwrap();
    let mut qp: QueuePair<Rc> = QueuePair::new(
        Qpn::new(1).unwrap(),
        SendQueueMemory::allocate(size).unwrap(),
        CompletionQueueMemory::allocate(8).unwrap(),
        QpConfig::default(),
    )
    .unwrap();
    assert!(qp.endpoint().is_none());
    let any = ibgda::nic::RcEndpoint {
        qpn: 2,
        psn: 0,
        lid: 1,
        mtu: ibgda::nic::Mtu::Mtu4096,
        link_layer: ibgda::nic::LinkLayer::InfiniBand,
        gid: Default::default(),
    };
    assert_eq!(qp.recover(&any, WAIT), Err(RecoveryError::NotControlPlane));
}

/// One step of the property test.
#[derive(Clone, Debug)]
enum Op {
    /// An inline WRITE of a unique value into a slot of its own.
    Write { signaled: bool },
    /// A WRITE with an unknown rkey.
    Fault,
    /// A fault injected on the WQE this many after the next one the NIC consumes: the
    /// emulated ConnectX's retry exceeded (0x15, vendor 0x81), or its first-WQE failure
    /// (LOCAL_QP_OP 0x02, vendor 0x68).
    Inject { ahead: u8, retry: bool },
    /// The completion of the WQE this many after the next one the NIC consumes is lost.
    LoseCompletion { ahead: u8 },
    /// The NIC executes at most this many WQEs.
    Step(u8),
    /// One poll of the queue pair.
    Poll,
    /// A recovery.
    Recover,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<bool>().prop_map(|signaled| Op::Write { signaled }),
        1 => Just(Op::Fault),
        1 => (0u8..6, any::<bool>()).prop_map(|(ahead, retry)| Op::Inject { ahead, retry }),
        1 => (0u8..6).prop_map(|ahead| Op::LoseCompletion { ahead }),
        3 => (0u8..6).prop_map(Op::Step),
        3 => Just(Op::Poll),
        1 => Just(Op::Recover),
    ]
}

/// The error CQEs a request of the property test may end with: (syndrome, vendor
/// syndrome) of the unknown rkey, the two injected faults, and a flush.
const INJECTED_RETRY: (Syndrome, u8) = (Syndrome::TransportRetryExceeded, 0x81);
const INJECTED_FIRST_WQE: (Syndrome, u8) = (Syndrome::LocalQpOperation, 0x68);

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random WRITEs (signaled or not), WRITEs to an unknown rkey, faults injected on
    /// coming WQEs, lost completions, NIC steps, polls and recoveries, then a last
    /// recovery. Every request completes exactly once or is reported (by a poll's error CQE
    /// or a recovery's list), never both, never neither: a reported WRITE did not land, a
    /// completed one did (one whose completion was lost included), a WRITE to the unknown
    /// rkey is always reported, a valid WRITE is reported only as flushed or with an
    /// injected fault's syndrome, and the queue pair works afterwards.
    #[test]
    fn every_request_completes_exactly_once_or_is_reported(ops in proptest::collection::vec(op(), 1..80)) {
        let world = World::infiniband(SOFT_NIC_CAPS);
        let pd = world.a.alloc_pd().unwrap();
        let memory = Arc::new(DmaBuffer::zeroed(8 * 128, 4096).unwrap());
        let region = pd.register(memory.clone(), 0, 8 * 128, ALL).unwrap();
        let pending = pd.create_rc(QueueSpec::new(RingSize::new(16).unwrap())).unwrap();
        let endpoint = pending.endpoint();
        let mut qp = pending.connect(&endpoint).unwrap();
        let qpn = qp.qpn();
        // Every ticket: its WRITE's slot and value (None: the unknown rkey).
        let mut posted: Vec<(Ticket, Option<(usize, u64)>)> = Vec::new();
        // How each report ended: (syndrome, vendor syndrome).
        let mut reported: HashMap<Ticket, Vec<(Option<Syndrome>, u8)>> = HashMap::new();
        let mut slot = 0usize;
        let recover = |qp: &mut QueuePair<Rc>, reported: &mut HashMap<Ticket, Vec<(Option<Syndrome>, u8)>>| {
            let next = qp.endpoint().unwrap();
            let recovery = qp.recover_driving(&next, WAIT, &mut world.step()).unwrap();
            for u in &recovery.unfinished {
                let e = u.outcome.completion();
                reported.entry(u.ticket).or_default().push((e.syndrome, e.vendor_syndrome));
            }
        };
        // The sequence number of the next WQE the NIC consumes.
        let next_seq = || world.fabric.qp_status(qpn).unwrap().wqes;
        for op in ops {
            match op {
                Op::Write { signaled } => {
                    if slot == 128 || qp.sq().free_wqebbs() == 0 {
                        continue;
                    }
                    let value = 0x1000 + slot as u64;
                    let payload = value.to_be_bytes();
                    let t = post_write(&mut qp, inline_write(region.remote(slot as u64 * 8), &payload, signaled));
                    posted.push((t, Some((slot, value))));
                    slot += 1;
                }
                Op::Fault => {
                    if qp.sq().free_wqebbs() == 0 {
                        continue;
                    }
                    let remote = RemoteAddress::new(region.addr(), RKey(0xbad));
                    let t = post_write(&mut qp, inline_write(remote, &[1; 8], true));
                    posted.push((t, None));
                }
                Op::Inject { ahead, retry } => {
                    let (syndrome, vendor) = if retry { INJECTED_RETRY } else { INJECTED_FIRST_WQE };
                    world.fabric.inject_fault(qpn.get(), next_seq() + u64::from(ahead), syndrome, vendor).unwrap();
                }
                Op::LoseCompletion { ahead } => {
                    world.fabric.drop_completion(qpn.get(), next_seq() + u64::from(ahead)).unwrap();
                }
                Op::Step(n) => {
                    world.fabric.step_limited(n.into());
                }
                Op::Poll => {
                    let before = qp.sq().retired();
                    match qp.poll() {
                        Ok(_) => {}
                        Err(PollError::Completion(e)) => {
                            // The erroring WQE's ticket (retired now: look it up by its
                            // index among those unretired before).
                            let t = posted.iter().map(|(t, _)| *t)
                                .find(|t| (t.end() - 1) as u16 == e.wqe_index && t.end() > before)
                                .expect("an error CQE names a posted WQE");
                            reported.entry(t).or_default().push((e.syndrome, e.vendor_syndrome));
                            // An error CQE retires the WQEs before it without a CQE of their
                            // own as completed (they ran, in order); a flush CQE retires
                            // exactly its own WQE.
                        }
                        Err(other) => prop_assert!(false, "{other:?}"),
                    }
                }
                Op::Recover => recover(&mut qp, &mut reported),
            }
        }
        // Everything posted resolves: one last recovery flushes what is left.
        recover(&mut qp, &mut reported);
        let flushed = (Some(Syndrome::WorkRequestFlushed), 0);
        let injected = [INJECTED_RETRY, INJECTED_FIRST_WQE].map(|(s, v)| (Some(s), v));
        for (t, write) in &posted {
            prop_assert!(qp.sq().is_complete(*t), "{t:?} unresolved");
            let reports = reported.get(t).cloned().unwrap_or_default();
            prop_assert!(reports.len() <= 1, "{t:?} reported {} times", reports.len());
            let how = reports.first().copied();
            match write {
                None => {
                    let how = how.expect("a WRITE to the unknown rkey is always reported");
                    prop_assert!(
                        how == flushed || how == (Some(Syndrome::RemoteAccess), 0x40) || injected.contains(&how),
                        "{t:?} ended {how:?}"
                    );
                }
                Some((slot, value)) => {
                    let found = u64::from_be_bytes(memory.to_vec()[slot * 8..slot * 8 + 8].try_into().unwrap());
                    match how {
                        Some(how) => {
                            prop_assert!(how == flushed || injected.contains(&how), "{t:?} ended {how:?}");
                            prop_assert_eq!(found, 0, "a reported WRITE ({:?}) landed", t);
                        }
                        None => prop_assert_eq!(found, *value, "a completed WRITE ({:?}) did not land", t),
                    }
                }
            }
        }
        prop_assert!(reported.keys().all(|t| posted.iter().any(|(p, _)| p == t)));
        // After all that, the queue pair works: a fault or loss armed on a WQE not yet
        // reached is replaced by one on a WQE never reached.
        world.fabric.inject_fault(qpn.get(), u64::MAX, INJECTED_RETRY.0, INJECTED_RETRY.1).unwrap();
        world.fabric.drop_completion(qpn.get(), u64::MAX).unwrap();
        let t = post_write(&mut qp, inline_write(region.remote(0), &[0xee; 8], true));
        qp.wait_driving(t, WAIT, &mut world.step()).unwrap();
        prop_assert_eq!(&memory.to_vec()[..8], &[0xee; 8]);
    }
}
