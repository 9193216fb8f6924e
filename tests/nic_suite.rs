//! The control-plane integration suite, generic over the NIC backend: RC loopback and RC
//! pairs (one connected through a TCP exchange of endpoints between two threads), DC
//! initiators and targets, every operation with memory and completions checked exactly,
//! a remote-access error and its flush, and teardown in any drop order.
//!
//! Recovery: an RC queue pair (alone and with a peer) and a DCI brought back from the error
//! state, every unfinished request returned with its ticket, then a clean round.
//!
//! Backend: `IBGDA_NIC` unset or `soft` runs the software NIC with InfiniBand ports,
//! `IBGDA_NIC=soft-roce` with RoCE v2 ports; `IBGDA_NIC=<device>` runs the same cases on
//! that ConnectX (build with `--features mlx5`); a case the backend cannot run is reported
//! ignored with the reason, never as passed. With `IBGDA_REQUIRE_EMU=1` (CI) a case may be
//! ignored only for the reason `nic_support::ALLOWED_IGNORES` gives it; any other ignore
//! (no device, an unsupported operation) fails the run.

mod case_report;
mod nic_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;

use ibgda::cq::{CompletionStatus, Syndrome};
use ibgda::nic::{
    connection, roce, Backend, Device, DeviceCaps, LinkLayer, MemoryAccess, ProtectionDomain,
    QueueSpec, Receives, UdpSourcePort,
};
use ibgda::queue::{
    PollError, Polled, QueuePair, Recovery, Ticket, Unfinished, UnfinishedOutcome, WaitError,
};
use ibgda::wqe::{
    Atomic, AvForm, Compact, Dc, DcTarget, Full, Nop, Rc, RdmaRead, RdmaWrite, RemoteAddress,
    RingSize,
};
use nic_support::*;

/// Send opcodes in `sop_drop_qpn` (PRM values, as rdma-core's `MLX5_OPCODE_*`).
const OP_WRITE: u8 = 0x08;
const OP_WRITE_IMM: u8 = 0x09;
const OP_READ: u8 = 0x10;
const OP_CS: u8 = 0x11;
const OP_FA: u8 = 0x12;
const OP_MASKED_CS: u8 = 0x14;
const OP_MASKED_FA: u8 = 0x15;

fn spec() -> QueueSpec {
    QueueSpec::new(RingSize::new(64).expect("64 WQEBBs"))
}

/// The send opcodes of a run of successful send completions.
fn sent_opcodes(polled: &[Result<Polled, PollError>]) -> Result<Vec<u8>, CaseError> {
    polled
        .iter()
        .map(|p| match p {
            Ok(Polled::Sent { send_opcode, .. }) => Ok(*send_opcode),
            other => Err(CaseError::Failed(format!(
                "expected a send completion, got {other:?}"
            ))),
        })
        .collect()
}

fn rc_loopback_every_operation<H: Harness>(h: &H) -> CaseResult {
    let device = h.open(0)?;
    let caps = *device.caps();
    let pd = device.alloc_pd()?;
    let pending = device.alloc_pd()?.create_rc(spec())?;
    let endpoint = pending.endpoint();
    let mut qp = pending.connect(&endpoint)?;
    every_operation(caps, &pd, &mut qp)
}

/// WRITE (inline and gathered), READ and every atomic the device has, through `qp` (an RC
/// queue pair connected to itself) on memory registered in `pd`, memory and CQEs checked.
fn every_operation<B: Backend>(
    caps: DeviceCaps,
    pd: &ProtectionDomain<B>,
    qp: &mut QueuePair<Rc>,
) -> CaseResult {
    let local = Area::new(pd, 256, 0, ALL)?;
    let remote = Area::new(pd, 256, 0, ALL)?;
    remote.buffer.write(0, b"sixteen bytes!!!")?;
    remote.buffer.write(64, &100u64.to_be_bytes())?;
    remote.buffer.write(72, &7u64.to_be_bytes())?;
    remote
        .buffer
        .write(80, &0xffff_0001_7fff_0000u64.to_be_bytes())?;
    remote.buffer.write(96, &0x1234_5678u32.to_be_bytes())?;
    local
        .buffer
        .write(40, &0x0102_0304_0506_0708u64.to_be_bytes())?;

    let regs = [local.region.registered()];
    let inline = 0xa1a2_a3a4_a5a6_a7a8u64.to_be_bytes();
    let r = &remote.region;
    let l = &local.region;
    qp.post(
        &RdmaWrite::new(r.remote(16))
            .inline(&inline)
            .signaled()
            .build()?,
        &[],
    )?;
    qp.post(
        &RdmaWrite::new(r.remote(24))
            .sge(l.sge(40, 8)?)
            .signaled()
            .build()?,
        &regs,
    )?;
    qp.post(
        &RdmaRead::new(r.remote(0))
            .sge(l.sge(0, 16)?)
            .signaled()
            .build()?,
        &regs,
    )?;
    let mut expected_ops = vec![OP_WRITE, OP_WRITE, OP_READ];
    if caps.atomic {
        let fa = Atomic::fetch_add(r.remote(64), l.local(32), 5);
        qp.post(&fa.signaled().build()?, &regs)?;
        let cs = Atomic::compare_swap(r.remote(72), l.local(48), 7, 9);
        qp.post(&cs.signaled().build()?, &regs)?;
        expected_ops.extend([OP_FA, OP_CS]);
    }
    if caps.atomic && caps.masked_atomics {
        // Four 16-bit lanes, each plus one, carries stopped at each lane's top bit:
        // ffff+1 -> 0000, 0001+1 -> 0002, 7fff+1 -> 8000, 0000+1 -> 0001.
        let mfa = Atomic::masked_fetch_add_64(
            r.remote(80),
            l.local(56),
            0x0001_0001_0001_0001,
            0x8000_8000_8000_8000,
        );
        qp.post(&mfa.signaled().build()?, &regs)?;
        // Compare the low half only; swap the high half only.
        let mcs = Atomic::masked_compare_swap_32(
            r.remote(96),
            l.local(64),
            0xabcd_0000,
            0x0000_5678,
            0xffff_0000,
            0x0000_ffff,
        );
        qp.post(&mcs.signaled().build()?, &regs)?;
        expected_ops.extend([OP_MASKED_FA, OP_MASKED_CS]);
    }
    let polled = poll_n(qp, expected_ops.len())?;
    check_eq(
        sent_opcodes(&polled)?,
        expected_ops,
        "send opcodes of the CQEs",
    )?;
    match polled[2] {
        Ok(Polled::Sent { byte_count, .. }) => check_eq(byte_count, 16, "READ byte count")?,
        ref other => return Err(CaseError::Failed(format!("READ completion {other:?}"))),
    }
    check_eq(remote.bytes(16, 8), inline.to_vec(), "inline WRITE")?;
    check_eq(remote.u64_at(24), 0x0102_0304_0506_0708, "gathered WRITE")?;
    check_eq(local.bytes(0, 16), b"sixteen bytes!!!".to_vec(), "READ")?;
    if caps.atomic {
        check_eq(local.u64_at(32), 100, "fetch-add returns the old value")?;
        check_eq(remote.u64_at(64), 105, "fetch-add adds")?;
        check_eq(local.u64_at(48), 7, "compare-swap returns the old value")?;
        check_eq(remote.u64_at(72), 9, "a matching compare-swap swaps")?;
    }
    if caps.atomic && caps.masked_atomics {
        check_eq(
            local.u64_at(56),
            0xffff_0001_7fff_0000,
            "masked fetch-add returns the old value",
        )?;
        check_eq(
            remote.u64_at(80),
            0x0000_0002_8000_0001,
            "masked fetch-add adds lane by lane",
        )?;
        check_eq(
            local.u32_at(64),
            0x1234_5678,
            "masked compare-swap returns the old value",
        )?;
        check_eq(
            remote.u32_at(96),
            0xabcd_5678,
            "masked compare-swap swaps under the mask",
        )?;
    }
    check_eq(local.u64_at(72), 0, "nothing else changed locally")?;
    Ok(())
}

/// Sends `value` and receives the peer's (for the memory a peer may access).
fn swap_remote(stream: &mut TcpStream, mine: RemoteAddress) -> Result<RemoteAddress, CaseError> {
    let mut bytes = [0u8; 12];
    bytes[..8].copy_from_slice(&mine.addr.to_be_bytes());
    bytes[8..].copy_from_slice(&mine.rkey.0.to_be_bytes());
    stream.write_all(&bytes)?;
    let mut peer = [0u8; 12];
    stream.read_exact(&mut peer)?;
    Ok(RemoteAddress::new(
        u64::from_be_bytes(peer[..8].try_into().expect("8 bytes")),
        ibgda::wqe::RKey(u32::from_be_bytes(peer[8..].try_into().expect("4 bytes"))),
    ))
}

/// One host of the TCP case: connect to the peer through `stream`, write `pattern` into
/// its buffer, and return what the peer wrote into ours.
fn tcp_host<H: Harness>(
    h: &H,
    host: u8,
    mut stream: TcpStream,
    pattern: u8,
) -> Result<Vec<u8>, CaseError> {
    let device = h.open(host)?;
    let pd = device.alloc_pd()?;
    let area = Area::new(&pd, 64, 0, ALL)?;
    let pending = pd.create_rc(spec())?;
    let peer = connection::exchange(&mut stream, &pending.endpoint())?;
    let peer_memory = swap_remote(&mut stream, area.region.remote(0))?;
    let mut qp = pending.connect(&peer)?;
    let payload = [pattern; 32];
    let ticket = qp.post(
        &RdmaWrite::new(peer_memory)
            .inline(&payload)
            .signaled()
            .build()?,
        &[],
    )?;
    qp.wait(ticket, WAIT)?;
    // Both writes are complete once both sides say so.
    stream.write_all(&[1])?;
    let mut done = [0u8; 1];
    stream.read_exact(&mut done)?;
    Ok(area.bytes(0, 64))
}

fn rc_pair_connected_through_tcp_exchange<H: Harness>(h: &H) -> CaseResult {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| -> Result<Vec<u8>, CaseError> {
            let (stream, _) = listener.accept()?;
            tcp_host(h, 0, stream, 0xaa)
        });
        let b = s.spawn(|| -> Result<Vec<u8>, CaseError> {
            tcp_host(h, 1, TcpStream::connect(addr)?, 0xbb)
        });
        (a.join(), b.join())
    });
    let a = a.map_err(|_| CaseError::Failed("host A panicked".into()))??;
    let b = b.map_err(|_| CaseError::Failed("host B panicked".into()))??;
    let mut expect_a = vec![0xbb; 32];
    expect_a.extend([0; 32]);
    let mut expect_b = vec![0xaa; 32];
    expect_b.extend([0; 32]);
    check_eq(a, expect_a, "host A's buffer")?;
    check_eq(b, expect_b, "host B's buffer")
}

fn write_with_immediate_completes_at_the_responder<H: Harness>(h: &H) -> CaseResult {
    let (dev_a, dev_b) = (h.open(0)?, h.open(1)?);
    let (pd_a, pd_b) = (dev_a.alloc_pd()?, dev_b.alloc_pd()?);
    let area = Area::new(&pd_b, 64, 0, ALL)?;
    // B receives through its protection domain's SRQ (rq_type 1), which holds one
    // receive WQE for the one WRITE_WITH_IMM.
    let pa = pd_a.create_rc(spec())?;
    let pb = pd_b.create_rc(spec().with_receives(Receives::SharedQueue))?;
    let (ea, eb) = (pa.endpoint(), pb.endpoint());
    let (mut a, mut b) = (pa.connect(&eb)?, pb.connect(&ea)?);
    let srq = pd_b.shared_receive_queue()?;
    srq.post_receives(1)?;
    let wqe = RdmaWrite::new(area.region.remote(8))
        .inline(&[1, 2, 3, 4, 5])
        .immediate(0xdead_beef)
        .signaled()
        .build()?;
    a.post(&wqe, &[])?;
    check_eq(
        sent_opcodes(&poll_n(&mut a, 1)?)?,
        vec![OP_WRITE_IMM],
        "requester CQE",
    )?;
    let received = poll_n(&mut b, 1)?;
    match &received[0] {
        Ok(Polled::Received(r)) => {
            check_eq(r.imm, 0xdead_beef, "immediate")?;
            check_eq(r.byte_count, 5, "byte count")?;
            check_eq(r.source_qpn, a.qpn().get(), "source QPN")?;
            check_eq(r.qpn, b.qpn().get(), "responder QPN")?;
        }
        other => return Err(CaseError::Failed(format!("responder completion {other:?}"))),
    }
    check_eq(area.bytes(8, 5), vec![1, 2, 3, 4, 5], "payload")
}

fn dci_to_dct<H: Harness, Av: AvForm>(
    h: &H,
    target: impl Fn(&ibgda::nic::DcEndpoint) -> Result<DcTarget<Av>, ibgda::wqe::WqeError>,
) -> CaseResult
where
    Dc<Av>: ibgda::wqe::TypedTransport,
{
    let (dev_a, dev_b) = (h.open(0)?, h.open(1)?);
    if Av::DS == 1 && !dev_a.caps().compact_address_vector {
        return Err(CaseError::Ignored(
            "the device has no compact address vectors".into(),
        ));
    }
    if Av::DS == 1 && dev_a.port().link_layer != LinkLayer::InfiniBand {
        return Err(CaseError::NotApplicable(
            NotApplicable::RocePort,
            "compact address vectors are LID-routed InfiniBand only (RoCE needs the GRH of the full one)".into(),
        ));
    }
    let (pd_a, pd_b) = (dev_a.alloc_pd()?, dev_b.alloc_pd()?);
    let local = Area::new(&pd_a, 64, 0, ALL)?;
    let remote = Area::new(&pd_b, 64, 0, ALL)?;
    remote.buffer.write(32, &41u64.to_be_bytes())?;
    remote.buffer.write(48, b"from the target!")?;
    let dct = pd_b.create_dct(0x1122_3344_5566_7788, 16)?;
    let target = target(&dct.endpoint())?;
    let mut dci = pd_a.create_dci::<Av>(spec())?.activate()?;
    let regs = [local.region.registered()];
    dci.post(
        &RdmaWrite::new(target.at(remote.region.remote(0)))
            .inline(&[7; 8])
            .signaled()
            .build()?,
        &[],
    )?;
    let atomic = dev_a.caps().atomic;
    if atomic {
        let fa = Atomic::fetch_add(
            target.at(remote.region.remote(32)),
            local.region.local(0),
            1,
        );
        dci.post(&fa.signaled().build()?, &regs)?;
    }
    dci.post(
        &RdmaRead::new(target.at(remote.region.remote(48)))
            .sge(local.region.sge(16, 16)?)
            .signaled()
            .build()?,
        &regs,
    )?;
    let expected = if atomic {
        vec![OP_WRITE, OP_FA, OP_READ]
    } else {
        vec![OP_WRITE, OP_READ]
    };
    check_eq(
        sent_opcodes(&poll_n(&mut dci, expected.len())?)?,
        expected,
        "DCI CQEs",
    )?;
    check_eq(remote.bytes(0, 8), vec![7; 8], "WRITE through the DCT")?;
    if atomic {
        check_eq(remote.u64_at(32), 42, "fetch-add through the DCT")?;
        check_eq(local.u64_at(0), 41, "fetch-add result")?;
    }
    check_eq(
        local.bytes(16, 16),
        b"from the target!".to_vec(),
        "READ through the DCT",
    )
}

fn dci_full_av_reaches_dct<H: Harness>(h: &H) -> CaseResult {
    dci_to_dct::<H, Full>(h, |e| e.full_target())
}

fn dci_compact_av_reaches_dct<H: Harness>(h: &H) -> CaseResult {
    dci_to_dct::<H, Compact>(h, |e| e.compact_target())
}

fn remote_access_error_then_flush<H: Harness>(h: &H) -> CaseResult {
    let (dev_a, dev_b) = (h.open(0)?, h.open(1)?);
    let (pd_a, pd_b) = (dev_a.alloc_pd()?, dev_b.alloc_pd()?);
    let read_only = Area::new(
        &pd_b,
        64,
        0x5a,
        MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_READ,
    )?;
    let writable = Area::new(&pd_b, 64, 0x5a, ALL)?;
    let (pa, pb) = (pd_a.create_rc(spec())?, pd_b.create_rc(spec())?);
    let (ea, eb) = (pa.endpoint(), pb.endpoint());
    let (mut a, _b) = (pa.connect(&eb)?, pb.connect(&ea)?);
    a.post(
        &RdmaWrite::new(read_only.region.remote(0))
            .inline(&[1; 8])
            .signaled()
            .build()?,
        &[],
    )?;
    a.post(
        &RdmaWrite::new(writable.region.remote(0))
            .inline(&[2; 8])
            .signaled()
            .build()?,
        &[],
    )?;
    a.post(
        &RdmaWrite::new(writable.region.remote(8))
            .inline(&[3; 8])
            .signaled()
            .build()?,
        &[],
    )?;
    let polled = poll_n(&mut a, 3)?;
    let errors: Vec<(u16, Option<Syndrome>, CompletionStatus)> = polled
        .iter()
        .map(|p| match p {
            Err(PollError::Completion(e)) => Ok((e.wqe_index, e.syndrome, e.status)),
            other => Err(CaseError::Failed(format!(
                "expected an error CQE, got {other:?}"
            ))),
        })
        .collect::<Result<_, _>>()?;
    check_eq(
        errors,
        vec![
            (
                0,
                Some(Syndrome::RemoteAccess),
                CompletionStatus::RemoteAccessError,
            ),
            (
                1,
                Some(Syndrome::WorkRequestFlushed),
                CompletionStatus::WorkRequestFlushError,
            ),
            (
                2,
                Some(Syndrome::WorkRequestFlushed),
                CompletionStatus::WorkRequestFlushError,
            ),
        ],
        "error CQE, then flushes",
    )?;
    check_eq(
        read_only.bytes(0, 64),
        vec![0x5a; 64],
        "the refused WRITE changed nothing",
    )?;
    check_eq(
        writable.bytes(0, 64),
        vec![0x5a; 64],
        "flushed WRITEs changed nothing",
    )
}

fn teardown_in_any_drop_order<H: Harness>(h: &H) -> CaseResult {
    let device = h.open(0)?;
    let pd = device.alloc_pd()?;
    let area = Area::new(&pd, 64, 0, ALL)?;
    let pending = pd.create_rc(spec())?;
    let endpoint = pending.endpoint();
    let mut qp = pending.connect(&endpoint)?;
    let dct = pd.create_dct(9, 16)?;
    // The protection domain's handle goes first: the queue pair and the region keep it.
    drop(pd);
    let ticket = qp.post(
        &RdmaWrite::new(area.region.remote(0))
            .inline(&[9; 8])
            .signaled()
            .build()?,
        &[],
    )?;
    qp.wait(ticket, WAIT)?;
    check_eq(
        area.bytes(0, 8),
        vec![9; 8],
        "a queue pair outlives its PD handle",
    )?;
    drop(area);
    drop(dct);
    drop(qp);
    check_eq(
        device.teardown_failures().0,
        0,
        "DESTROY commands that failed",
    )?;
    if let Some(left) = h.outstanding(&device) {
        return Err(CaseError::Failed(format!(
            "left allocated after teardown: {left}"
        )));
    }
    Ok(())
}

/// The WQE index of the WQE a ticket ends (one-WQEBB WQEs only).
fn index_of(ticket: Ticket) -> u16 {
    (ticket.end() - 1) as u16
}

/// Checks a recovery's list: `flushed` exactly, each flushed (WR_FLUSH_ERR) with its own
/// ticket and WQE index; nothing received.
fn expect_flushed(recovery: &Recovery, flushed: &[Ticket]) -> CaseResult {
    let found: Vec<(Ticket, u16, bool)> = recovery
        .unfinished
        .iter()
        .map(|u: &Unfinished| {
            let flush = matches!(u.outcome, UnfinishedOutcome::Flushed(e)
                if e.syndrome == Some(Syndrome::WorkRequestFlushed)
                    && e.status == CompletionStatus::WorkRequestFlushError
                    && e.wqe_index == u.wqe_index);
            (u.ticket, u.wqe_index, flush)
        })
        .collect();
    let expected: Vec<(Ticket, u16, bool)> =
        flushed.iter().map(|t| (*t, index_of(*t), true)).collect();
    check_eq(found, expected, "requests the recovery returned")?;
    check_eq(recovery.received.len(), 0, "receives consumed")
}

/// Waits for `ticket` and expects the error CQE of WQE `failed_index` instead.
fn expect_error<T: ibgda::wqe::Transport>(
    qp: &mut QueuePair<T>,
    ticket: Ticket,
    failed_index: u16,
    syndrome: Syndrome,
) -> CaseResult {
    match qp.wait(ticket, WAIT) {
        Err(WaitError::Poll(PollError::Completion(e))) => check_eq(
            (e.wqe_index, e.syndrome),
            (failed_index, Some(syndrome)),
            "the error CQE",
        ),
        other => Err(CaseError::Failed(format!(
            "expected the error CQE of WQE {failed_index}, got {other:?}"
        ))),
    }
}

/// Posts an inline WRITE of eight `byte`s to `remote`.
fn post_write(
    qp: &mut QueuePair<Rc>,
    remote: RemoteAddress,
    byte: u8,
    signaled: bool,
) -> Result<Ticket, CaseError> {
    let payload = [byte; 8];
    let wqe = RdmaWrite::new(remote).inline(&payload);
    let wqe = if signaled {
        wqe.signaled().build()?
    } else {
        wqe.build()?
    };
    Ok(qp.post(&wqe, &[])?)
}

fn rc_recovers_from_a_remote_access_error<H: Harness>(h: &H) -> CaseResult {
    let device = h.open(0)?;
    let caps = *device.caps();
    let pd = device.alloc_pd()?;
    let read_only = Area::new(
        &pd,
        64,
        0x5a,
        MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_READ,
    )?;
    let writable = Area::new(&pd, 64, 0x5a, ALL)?;
    let pending = pd.create_rc(spec())?;
    let endpoint = pending.endpoint();
    let mut qp = pending.connect(&endpoint)?;
    let done = post_write(&mut qp, writable.region.remote(0), 0x11, true)?;
    qp.wait(done, WAIT)?;
    let failed = post_write(&mut qp, read_only.region.remote(0), 0x22, true)?;
    let flushed_unsignaled = post_write(&mut qp, writable.region.remote(8), 0x33, false)?;
    let flushed = post_write(&mut qp, writable.region.remote(16), 0x44, true)?;
    // The error CQE reaches whoever polls first: here the wait.
    expect_error(&mut qp, flushed, index_of(failed), Syndrome::RemoteAccess)?;
    let next = qp
        .endpoint()
        .ok_or(CaseError::Failed("no endpoint".into()))?;
    check(next.psn != endpoint.psn, || {
        "a new connection sends from a new PSN".into()
    })?;
    let recovery = qp.recover(&next, WAIT)?;
    expect_flushed(&recovery, &[flushed_unsignaled, flushed])?;
    for ticket in [done, failed, flushed_unsignaled, flushed] {
        check(qp.sq().is_complete(ticket), || {
            format!("{ticket:?} is resolved")
        })?;
    }
    let mut image = vec![0x11; 8];
    image.extend([0x5a; 56]);
    check_eq(
        writable.bytes(0, 64),
        image,
        "only the WRITE before the error landed",
    )?;
    check_eq(
        read_only.bytes(0, 64),
        vec![0x5a; 64],
        "the refused WRITE changed nothing",
    )?;
    // The ring starts over at WQE index 0, and every operation works again.
    let nop = qp.post(&Nop::<Rc>::new().signaled().build()?, &[])?;
    check_eq(index_of(nop), 0, "the first WQE index after recovery")?;
    check(nop > flushed, || {
        "tickets keep growing across a recovery".into()
    })?;
    qp.wait(nop, WAIT)?;
    every_operation(caps, &pd, &mut qp)
}

fn rc_pair_recovers_on_both_sides<H: Harness>(h: &H) -> CaseResult {
    let (dev_a, dev_b) = (h.open(0)?, h.open(1)?);
    let (pd_a, pd_b) = (dev_a.alloc_pd()?, dev_b.alloc_pd()?);
    let read_only = Area::new(
        &pd_b,
        64,
        0,
        MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_READ,
    )?;
    let area_a = Area::new(&pd_a, 64, 0, ALL)?;
    let area_b = Area::new(&pd_b, 64, 0, ALL)?;
    let (pa, pb) = (pd_a.create_rc(spec())?, pd_b.create_rc(spec())?);
    let (ea, eb) = (pa.endpoint(), pb.endpoint());
    let (mut a, mut b) = (pa.connect(&eb)?, pb.connect(&ea)?);
    let failed = a.post(
        &RdmaWrite::new(read_only.region.remote(0))
            .inline(&[1; 8])
            .signaled()
            .build()?,
        &[],
    )?;
    expect_error(&mut a, failed, index_of(failed), Syndrome::RemoteAccess)?;
    // Both sides start a new connection (on hardware the responder is in error too): each
    // takes the other's next endpoint first.
    let missing = || CaseError::Failed("no endpoint".into());
    let (next_a, next_b) = (
        a.endpoint().ok_or_else(missing)?,
        b.endpoint().ok_or_else(missing)?,
    );
    expect_flushed(&a.recover(&next_b, WAIT)?, &[])?;
    expect_flushed(&b.recover(&next_a, WAIT)?, &[])?;
    let to_b = a.post(
        &RdmaWrite::new(area_b.region.remote(0))
            .inline(&[0xab; 8])
            .signaled()
            .build()?,
        &[],
    )?;
    let to_a = b.post(
        &RdmaWrite::new(area_a.region.remote(0))
            .inline(&[0xba; 8])
            .signaled()
            .build()?,
        &[],
    )?;
    a.wait(to_b, WAIT)?;
    b.wait(to_a, WAIT)?;
    check_eq(area_b.bytes(0, 8), vec![0xab; 8], "A to B after recovery")?;
    check_eq(area_a.bytes(0, 8), vec![0xba; 8], "B to A after recovery")?;
    check_eq(
        read_only.bytes(0, 8),
        vec![0; 8],
        "the refused WRITE changed nothing",
    )
}

fn dci_recovers_from_a_local_error<H: Harness>(h: &H) -> CaseResult {
    let (dev_a, dev_b) = (h.open(0)?, h.open(1)?);
    let (pd_a, pd_b) = (dev_a.alloc_pd()?, dev_b.alloc_pd()?);
    // A READ's destination the NIC may not write: a local protection error.
    let not_writable = Area::new(&pd_a, 64, 0x77, MemoryAccess::REMOTE_READ)?;
    let local = Area::new(&pd_a, 64, 0, ALL)?;
    let remote = Area::new(&pd_b, 64, 0, ALL)?;
    remote.buffer.write(0, b"after recovery!!")?;
    let dct = pd_b.create_dct(0x1122_3344_5566_7788, 16)?;
    let target = dct.endpoint().full_target()?;
    let mut dci = pd_a.create_dci::<Full>(spec())?.activate()?;
    let bad_regs = [not_writable.region.registered()];
    let failed = dci.post(
        &RdmaRead::new(target.at(remote.region.remote(0)))
            .sge(not_writable.region.sge(0, 16)?)
            .signaled()
            .build()?,
        &bad_regs,
    )?;
    let flushed = dci.post(
        &RdmaWrite::new(target.at(remote.region.remote(32)))
            .inline(&[9; 8])
            .signaled()
            .build()?,
        &[],
    )?;
    // A DC WQE with the full address vector is two basic blocks: its index is its first.
    let first_block = |t: Ticket| (t.end() - 2) as u16;
    expect_error(
        &mut dci,
        flushed,
        first_block(failed),
        Syndrome::LocalProtection,
    )?;
    let recovery = dci.recover_dci(WAIT)?;
    check_eq(
        recovery
            .unfinished
            .iter()
            .map(|u| {
                (
                    u.ticket,
                    u.wqe_index,
                    matches!(u.outcome, UnfinishedOutcome::Flushed(_)),
                )
            })
            .collect::<Vec<_>>(),
        vec![(flushed, first_block(flushed), true)],
        "requests the recovery returned",
    )?;
    check_eq(
        not_writable.bytes(0, 64),
        vec![0x77; 64],
        "the failed READ moved nothing",
    )?;
    check_eq(
        remote.bytes(32, 8),
        vec![0; 8],
        "the flushed WRITE moved nothing",
    )?;
    let regs = [local.region.registered()];
    let read = dci.post(
        &RdmaRead::new(target.at(remote.region.remote(0)))
            .sge(local.region.sge(0, 16)?)
            .signaled()
            .build()?,
        &regs,
    )?;
    check_eq(first_block(read), 0, "the first WQE index after recovery")?;
    let write = dci.post(
        &RdmaWrite::new(target.at(remote.region.remote(48)))
            .inline(&[5; 8])
            .signaled()
            .build()?,
        &[],
    )?;
    dci.wait(write, WAIT)?;
    check_eq(
        local.bytes(0, 16),
        b"after recovery!!".to_vec(),
        "READ after recovery",
    )?;
    check_eq(remote.bytes(48, 8), vec![5; 8], "WRITE after recovery")
}

fn roce_rc_queue_pairs_get_their_own_udp_source_ports<H: Harness>(h: &H) -> CaseResult {
    let (dev_a, dev_b) = (h.open(0)?, h.open(1)?);
    if dev_a.port().link_layer != LinkLayer::Ethernet {
        return Err(CaseError::NotApplicable(
            NotApplicable::InfiniBandPort,
            "InfiniBand ports send no UDP (run with IBGDA_NIC=soft-roce, or the emulator with link_layer = ethernet)".into(),
        ));
    }
    let (index, gid) = dev_a.source_gid()?;
    check(
        dev_a.port().gids[usize::from(index)].kind == ibgda::nic::GidType::RoceV2,
        || format!("GID index {index} ({gid:?}) is not RoCE v2"),
    )?;
    let (pd_a, pd_b) = (dev_a.alloc_pd()?, dev_b.alloc_pd()?);
    let mut ports = Vec::new();
    let mut pairs = Vec::new();
    for _ in 0..8 {
        let (pa, pb) = (pd_a.create_rc(spec())?, pd_b.create_rc(spec())?);
        let (ea, eb) = (pa.endpoint(), pb.endpoint());
        check_eq(ea.gid, gid, "the GID an endpoint advertises")?;
        let (a, b) = (pa.connect(&eb)?, pb.connect(&ea)?);
        let port = h
            .udp_source_port(&dev_a, a.qpn())
            .map_err(CaseError::Ignored)?;
        check_eq(
            port,
            roce::udp_source_port(roce::flow_label(a.qpn().get(), b.qpn().get())),
            "the spread port (Linux's hash of the two QPNs)",
        )?;
        ports.push(port);
        pairs.push((a, b));
    }
    let mut distinct = ports.clone();
    distinct.sort_unstable();
    distinct.dedup();
    check_eq(
        distinct.len(),
        ports.len(),
        "distinct ports of the 8 queue pairs",
    )?;
    // NVSHMEM's fixed port, kept across a recovery.
    let (mut pa, pb) = (pd_a.create_rc(spec())?, pd_b.create_rc(spec())?);
    pa.set_udp_source_port(UdpSourcePort::Fixed(49152))?;
    let (ea, eb) = (pa.endpoint(), pb.endpoint());
    let (mut a, mut b) = (pa.connect(&eb)?, pb.connect(&ea)?);
    check_eq(
        h.udp_source_port(&dev_a, a.qpn())
            .map_err(CaseError::Ignored)?,
        49152,
        "fixed port",
    )?;
    let missing = || CaseError::Failed("no endpoint".into());
    let (na, nb) = (
        a.endpoint().ok_or_else(missing)?,
        b.endpoint().ok_or_else(missing)?,
    );
    a.recover(&nb, WAIT)?;
    b.recover(&na, WAIT)?;
    check_eq(
        h.udp_source_port(&dev_a, a.qpn())
            .map_err(CaseError::Ignored)?,
        49152,
        "fixed port after recovery",
    )
}

fn gpu_placed_queues<H: Harness>(h: &H) -> CaseResult {
    Err(CaseError::NotApplicable(
        NotApplicable::NoGpu,
        h.gpu_unavailable(),
    ))
}

fn cases<H: Harness>() -> Vec<Case<H>> {
    vec![
        Case {
            name: "rc_loopback_every_operation",
            run: rc_loopback_every_operation::<H>,
        },
        Case {
            name: "rc_pair_connected_through_tcp_exchange",
            run: rc_pair_connected_through_tcp_exchange::<H>,
        },
        Case {
            name: "write_with_immediate_completes_at_the_responder",
            run: write_with_immediate_completes_at_the_responder::<H>,
        },
        Case {
            name: "dci_full_av_reaches_dct",
            run: dci_full_av_reaches_dct::<H>,
        },
        Case {
            name: "dci_compact_av_reaches_dct",
            run: dci_compact_av_reaches_dct::<H>,
        },
        Case {
            name: "remote_access_error_then_flush",
            run: remote_access_error_then_flush::<H>,
        },
        Case {
            name: "teardown_in_any_drop_order",
            run: teardown_in_any_drop_order::<H>,
        },
        Case {
            name: "rc_recovers_from_a_remote_access_error",
            run: rc_recovers_from_a_remote_access_error::<H>,
        },
        Case {
            name: "rc_pair_recovers_on_both_sides",
            run: rc_pair_recovers_on_both_sides::<H>,
        },
        Case {
            name: "dci_recovers_from_a_local_error",
            run: dci_recovers_from_a_local_error::<H>,
        },
        Case {
            name: "roce_rc_queue_pairs_get_their_own_udp_source_ports",
            run: roce_rc_queue_pairs_get_their_own_udp_source_ports::<H>,
        },
        Case {
            name: "gpu_placed_queues",
            run: gpu_placed_queues::<H>,
        },
    ]
}

fn main() -> ExitCode {
    match Selection::from_env() {
        Selection::Soft => {
            println!("nic_suite: backend = software NIC, InfiniBand");
            run_suite(&cases::<SoftHarness>(), || Ok(SoftHarness::new()))
        }
        Selection::SoftRoce => {
            println!("nic_suite: backend = software NIC, RoCE v2");
            run_suite(&cases::<SoftRoceHarness>(), || Ok(SoftRoceHarness::new()))
        }
        Selection::Hardware(name) => hardware::run(&name),
    }
}

/// Keeps `Backend` and `Device` in scope for readers of the generic cases.
#[allow(dead_code)]
fn _generic<B: Backend>(_: &Device<B>) {}
