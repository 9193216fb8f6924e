//! Every fault produces exactly the error CQE hardware reports for it (syndrome, this
//! NIC's vendor syndrome, opcode, QPN, WQE index), changes no memory, and puts the queue
//! in the error state, after which every later WQE, signaled or not, is flushed. CQ
//! overruns are errors with asynchronous events, never silent loss. Doorbells for another
//! queue are ignored and counted.

mod softnic_support;

use std::sync::Arc;

use ibgda::memory::DmaBuffer;
use ibgda::softnic::{Access, AsyncEvent, DoorbellWatch, ErrorCause, Fault, QpState, QueueId};
use ibgda::wqe::*;
use softnic_support::*;

const WRITE: u8 = 0x08;
const WRITE_IMM: u8 = 0x09;
const READ: u8 = 0x10;
const NOP: u8 = 0x00;
const FETCH_ADD: u8 = 0x12;

const LOCAL_LENGTH: u8 = 0x01;
const LOCAL_QP_OP: u8 = 0x02;
const LOCAL_PROT: u8 = 0x04;
const REMOTE_OP: u8 = 0x14;
const REMOTE_INVAL_REQ: u8 = 0x12;
const REMOTE_ACCESS: u8 = 0x13;
const RETRY_EXCEEDED: u8 = 0x15;
const RNR_RETRY_EXCEEDED: u8 = 0x16;

/// Posts the failing WQE (via `post`), then a valid signaled WRITE and an unsignaled NOP,
/// all under one doorbell. Expects exactly the error CQE and two flush CQEs, no memory
/// change on either side, the queue in error with `fault`, and a later batch flushed too.
fn expect_fault(
    pair: &mut RcPair,
    post: impl FnOnce(&mut RcPair) -> u16,
    opcode: u8,
    syndrome: u8,
    vendor: u8,
    fault: Fault,
) {
    let (before_a, before_b) = (pair.a.area.image(), pair.b.area.image());
    let index = post(pair);
    let write = RdmaWrite::new(pair.b.area.region.remote(0))
        .inline(&[0xcc; 4])
        .signaled()
        .build()
        .unwrap();
    let nop = Nop::<Rc>::new().build().unwrap();
    let w = pair.a.sq.post(&write);
    let n = pair.a.sq.post(&nop);
    pair.a.sq.submit();
    let report = pair.fabric.run_until_idle();
    assert_eq!(
        (
            report.wqes_executed,
            report.wqes_failed,
            report.wqes_flushed
        ),
        (0, 1, 2)
    );
    let q = pair.a.qpn.get();
    assert_eq!(
        pair.a.cq.drain(),
        vec![
            err_cqe(q, opcode, index, syndrome, vendor, 0),
            flush_cqe(q, WRITE, w, 0),
            flush_cqe(q, NOP, n, 0),
        ]
    );
    assert_eq!(
        pair.a.area.image(),
        before_a,
        "the requester's memory changed"
    );
    assert_eq!(
        pair.b.area.image(),
        before_b,
        "the responder's memory changed"
    );
    let status = pair.fabric.qp_status(pair.a.qpn).unwrap();
    assert_eq!(status.state, QpState::Error);
    assert_eq!(
        status.error,
        Some(ErrorCause::Wqe {
            fault,
            wqe_counter: index
        })
    );
    assert_eq!(
        (fault.syndrome() as u8, fault.vendor_syndrome()),
        (syndrome, vendor)
    );

    // Later WQEs flush too, signaled or not.
    let again = pair.a.sq.post(&write);
    pair.a.sq.submit();
    pair.fabric.run_until_idle();
    assert_eq!(pair.a.cq.drain(), vec![flush_cqe(q, WRITE, again, 0)]);
    assert_eq!(pair.b.area.image(), before_b);
    assert!(pair.fabric.async_events().is_empty());
}

fn write_from(sge: Sge, remote: RemoteAddress) -> Wqe<RdmaWrite<'static, Rc, Gather<1>>> {
    RdmaWrite::new(remote).sge(sge).build().unwrap()
}

#[test]
fn unknown_lkey_is_a_local_protection_error() {
    let mut pair = RcPair::new(&Setup::default());
    let addr = pair.a.area.region.addr();
    let remote = pair.b.area.region.remote(0);
    expect_fault(
        &mut pair,
        |p| {
            p.a.sq
                .post(&write_from(Sge::new(addr, 8, LKey(0xbad)).unwrap(), remote))
        },
        WRITE,
        LOCAL_PROT,
        0x20,
        Fault::LocalKey { lkey: 0xbad },
    );
}

#[test]
fn local_range_outside_the_region_is_a_local_protection_error() {
    for (offset, len) in [(500u64, 13u32), (u64::MAX, 2), (512, 1), (0, 513)] {
        let mut pair = RcPair::new(&Setup::default());
        let sge = pair.a.area.region.sge(offset, len).unwrap();
        let lkey = pair.a.area.region.lkey().0;
        let remote = pair.b.area.region.remote(0);
        expect_fault(
            &mut pair,
            |p| p.a.sq.post(&write_from(sge, remote)),
            WRITE,
            LOCAL_PROT,
            0x21,
            Fault::LocalBounds {
                lkey,
                addr: sge.addr(),
                len: len.into(),
            },
        );
    }
}

#[test]
fn writing_local_memory_without_local_write_is_a_local_protection_error() {
    let mut pair = RcPair::new(&Setup::default());
    let read_only = Area::new(&pair.fabric, pair.a.node, 64, Access::REMOTE_READ, 5);
    let lkey = read_only.region.lkey().0;
    let read = RdmaRead::new(pair.b.area.region.remote(0))
        .sge(read_only.region.sge(0, 8).unwrap())
        .build()
        .unwrap();
    expect_fault(
        &mut pair,
        |p| p.a.sq.post(&read),
        READ,
        LOCAL_PROT,
        0x22,
        Fault::LocalWriteDenied { lkey },
    );
    assert_eq!(read_only.image(), read_only.initial_image());

    // The result buffer of an atomic too.
    let mut pair = RcPair::new(&Setup::default());
    let read_only = Area::new(&pair.fabric, pair.a.node, 64, Access::empty(), 5);
    let lkey = read_only.region.lkey().0;
    let atomic = Atomic::fetch_add(pair.b.area.region.remote(0), read_only.region.local(0), 1)
        .build()
        .unwrap();
    expect_fault(
        &mut pair,
        |p| p.a.sq.post(&atomic),
        FETCH_ADD,
        LOCAL_PROT,
        0x22,
        Fault::LocalWriteDenied { lkey },
    );
}

#[test]
fn unknown_rkeys_are_remote_access_errors() {
    // A made-up key, the requester's own rkey (another node's key space) and the
    // responder region's lkey (lkeys are not rkeys).
    let pair = RcPair::new(&Setup::default());
    let keys = [
        0x0bad_cafe,
        pair.a.area.region.rkey().0,
        pair.b.area.region.lkey().0,
    ];
    drop(pair);
    for rkey in keys {
        let mut pair = RcPair::new(&Setup::default());
        let sge = pair.a.area.region.sge(0, 8).unwrap();
        let remote = RemoteAddress::new(pair.b.area.region.addr(), RKey(rkey));
        expect_fault(
            &mut pair,
            |p| p.a.sq.post(&write_from(sge, remote)),
            WRITE,
            REMOTE_ACCESS,
            0x40,
            Fault::RemoteKey { rkey },
        );
    }
}

#[test]
fn remote_range_outside_the_region_is_a_remote_access_error() {
    for (offset, len) in [(505u64, 8u32), (u64::MAX, 1), (512, 1)] {
        let mut pair = RcPair::new(&Setup::default());
        let sge = pair.a.area.region.sge(0, len).unwrap();
        let remote = pair.b.area.region.remote(offset);
        let rkey = remote.rkey.0;
        expect_fault(
            &mut pair,
            |p| p.a.sq.post(&write_from(sge, remote)),
            WRITE,
            REMOTE_ACCESS,
            0x41,
            Fault::RemoteBounds {
                rkey,
                addr: remote.addr,
                len: len.into(),
            },
        );
    }
    // A READ past the end, and an atomic on the region's last 4 bytes (8 needed).
    let mut pair = RcPair::new(&Setup::default());
    let remote = pair.b.area.region.remote(500);
    let read = RdmaRead::new(remote)
        .sge(pair.a.area.region.sge(0, 16).unwrap())
        .build()
        .unwrap();
    expect_fault(
        &mut pair,
        |p| p.a.sq.post(&read),
        READ,
        REMOTE_ACCESS,
        0x41,
        Fault::RemoteBounds {
            rkey: remote.rkey.0,
            addr: remote.addr,
            len: 16,
        },
    );
}

#[test]
fn missing_remote_rights_are_remote_access_errors() {
    let cases: [(Access, u8, Access); 3] = [
        (
            Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
            WRITE,
            Access::REMOTE_WRITE,
        ),
        (
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
            READ,
            Access::REMOTE_READ,
        ),
        (
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            FETCH_ADD,
            Access::REMOTE_ATOMIC,
        ),
    ];
    for (access, opcode, needed) in cases {
        let mut pair = RcPair::new(&Setup::default());
        let limited = Area::new(&pair.fabric, pair.b.node, 64, access, 8);
        let remote = limited.region.remote(8);
        let local = pair.a.area.region.clone();
        let post = |p: &mut RcPair| match opcode {
            WRITE => p.a.sq.post(&write_from(local.sge(0, 8).unwrap(), remote)),
            READ => p.a.sq.post(
                &RdmaRead::new(remote)
                    .sge(local.sge(0, 8).unwrap())
                    .build()
                    .unwrap(),
            ),
            _ => p.a.sq.post(
                &Atomic::fetch_add(remote, local.local(0), 1)
                    .build()
                    .unwrap(),
            ),
        };
        expect_fault(
            &mut pair,
            post,
            opcode,
            REMOTE_ACCESS,
            0x42,
            Fault::RemoteAccessDenied {
                rkey: remote.rkey.0,
                needed,
            },
        );
        assert_eq!(limited.image(), limited.initial_image());
    }
}

#[test]
fn message_over_the_limit_is_a_local_length_error() {
    let setup = Setup {
        max_message_bytes: 16,
        ..Setup::default()
    };
    // Exactly the limit is fine.
    let mut pair = RcPair::new(&setup);
    pair.a.sq.post(
        &RdmaWrite::new(pair.b.area.region.remote(0))
            .inline(&[7; 16])
            .signaled()
            .build()
            .unwrap(),
    );
    pair.a.sq.submit();
    pair.fabric.run_until_idle();
    assert_eq!(
        pair.a.cq.drain(),
        vec![req_cqe(pair.a.qpn.get(), WRITE, 0, 0, 0)]
    );

    let mut pair = RcPair::new(&setup);
    let region = pair.a.area.region.clone();
    let write = RdmaWrite::new(pair.b.area.region.remote(0))
        .gather([region.sge(0, 9).unwrap(), region.sge(9, 8).unwrap()])
        .build()
        .unwrap();
    expect_fault(
        &mut pair,
        |p| p.a.sq.post(&write),
        WRITE,
        LOCAL_LENGTH,
        0x10,
        Fault::MessageTooLong { len: 17, max: 16 },
    );
}

#[test]
fn bytes_the_parser_rejects_are_a_local_qp_operation_error() {
    // An unknown opcode, a known opcode the NIC does not execute (SEND), and a WRITE whose
    // DS leaves no room for its remote address segment.
    let mut pair = RcPair::new(&Setup::default());
    let mut block = [0u8; 64];
    block[..4].copy_from_slice(&0x0000_00ffu32.to_be_bytes());
    block[4..8].copy_from_slice(&(pair.a.qpn.get() << 8 | 1).to_be_bytes());
    expect_fault(
        &mut pair,
        |p| p.a.sq.post_raw(&block),
        0xff,
        LOCAL_QP_OP,
        0x01,
        Fault::MalformedWqe(ParseError::UnknownOpcode { opcode: 0xff }),
    );

    let mut pair = RcPair::new(&Setup::default());
    let mut block = [0u8; 64];
    block[..4].copy_from_slice(&0x0000_000au32.to_be_bytes());
    block[4..8].copy_from_slice(&(pair.a.qpn.get() << 8 | 1).to_be_bytes());
    expect_fault(
        &mut pair,
        |p| p.a.sq.post_raw(&block),
        0x0a,
        LOCAL_QP_OP,
        0x01,
        Fault::MalformedWqe(ParseError::UnsupportedOpcode {
            opcode: Opcode::Send,
        }),
    );

    let mut pair = RcPair::new(&Setup::default());
    let wqe = write_from(
        pair.a.area.region.sge(0, 8).unwrap(),
        pair.b.area.region.remote(0),
    );
    let mut block = pair.a.sq.encode(&wqe);
    block[7] = 1; // DS 3 -> 1
    expect_fault(
        &mut pair,
        |p| p.a.sq.post_raw(&block),
        WRITE,
        LOCAL_QP_OP,
        0x01,
        Fault::MalformedWqe(ParseError::TooShort {
            opcode: Opcode::RdmaWrite,
            ds: 1,
            min: 2,
        }),
    );
}

#[test]
fn a_stale_slot_is_a_local_qp_operation_error() {
    // The slot holds a WQE written for index 5, read at index 0.
    let mut pair = RcPair::new(&Setup::default());
    let wqe = Nop::<Rc>::new().signaled().build().unwrap();
    let mut block = pair.a.sq.encode(&wqe);
    block[1..3].copy_from_slice(&5u16.to_be_bytes());
    expect_fault(
        &mut pair,
        |p| p.a.sq.post_raw(&block),
        NOP,
        LOCAL_QP_OP,
        0x01,
        Fault::MalformedWqe(ParseError::IndexMismatch {
            expected: 0,
            found: 5,
        }),
    );
}

#[test]
fn a_wqe_naming_another_queue_is_a_local_qp_operation_error() {
    let mut pair = RcPair::new(&Setup::default());
    let other = pair.b.qpn;
    let wqe = Nop::<Rc>::new().signaled().build().unwrap();
    expect_fault(
        &mut pair,
        |p| p.a.sq.post_for(other, &wqe),
        NOP,
        LOCAL_QP_OP,
        0x02,
        Fault::ForeignQpn { found: other.get() },
    );
}

#[test]
fn a_wqe_reaching_past_the_doorbell_record_is_a_local_qp_operation_error() {
    let mut pair = RcPair::new(&Setup::default());
    let before_b = pair.b.area.image();
    // 40 inline bytes: control, remote address and three octowords of data: two WQEBBs.
    let wqe = RdmaWrite::new(pair.b.area.region.remote(0))
        .inline(&[1; 40])
        .signaled()
        .build()
        .unwrap();
    assert_eq!(wqe.wqebbs(), 2);
    pair.a.sq.post(&wqe);
    pair.a.sq.publish_value(1);
    pair.a.sq.ring();
    pair.fabric.run_until_idle();
    let q = pair.a.qpn.get();
    assert_eq!(
        pair.a.cq.drain(),
        vec![err_cqe(q, WRITE, 0, LOCAL_QP_OP, 0x03, 0)]
    );
    assert_eq!(pair.b.area.image(), before_b);
    assert_eq!(
        pair.fabric.qp_status(pair.a.qpn).unwrap().error,
        Some(ErrorCause::Wqe {
            fault: Fault::Unpublished {
                wqebbs: 2,
                published: 1
            },
            wqe_counter: 0
        })
    );
}

#[test]
fn a_misaligned_atomic_is_a_remote_invalid_request() {
    // The builders refuse misaligned atomics, so the address is patched in the bytes.
    for (op, shift, align) in [
        (AtomicOp::FetchAdd { add: 1 }, 4u64, 8u32),
        (
            AtomicOp::MaskedFetchAdd {
                width: AtomicWidth::Four,
                add: 1,
                field_boundary: 0,
            },
            2,
            4,
        ),
    ] {
        let mut pair = RcPair::new(&Setup::default());
        let remote = pair.b.area.region.remote(64);
        let wqe = Atomic::any(remote, pair.a.area.region.local(0), op)
            .build()
            .unwrap();
        let mut block = pair.a.sq.encode(&wqe);
        block[16..24].copy_from_slice(&(remote.addr + shift).to_be_bytes());
        expect_fault(
            &mut pair,
            |p| p.a.sq.post_raw(&block),
            op.opcode().byte(),
            REMOTE_INVAL_REQ,
            0x30,
            Fault::MisalignedAtomic {
                addr: remote.addr + shift,
                align,
            },
        );
    }
}

#[test]
fn write_with_immediate_without_a_receive_credit_is_an_rnr_error() {
    let mut pair = RcPair::new(&Setup {
        receive: true,
        ..Setup::default()
    });
    let wqe = RdmaWrite::new(pair.b.area.region.remote(0))
        .inline(&[1, 2])
        .immediate(5)
        .build()
        .unwrap();
    let responder = pair.b.qpn.get();
    expect_fault(
        &mut pair,
        |p| p.a.sq.post(&wqe),
        WRITE_IMM,
        RNR_RETRY_EXCEEDED,
        0x60,
        Fault::ReceiverNotReady { responder },
    );
    assert!(pair.b.rcq.as_mut().unwrap().drain().is_empty());
}

#[test]
fn a_responder_in_error_or_gone_does_not_answer() {
    // The responder fails first (a bad lkey of its own), then the requester writes to it.
    let mut pair = RcPair::new(&Setup::default());
    let bad = write_from(
        Sge::new(0x1000, 8, LKey(0xbad)).unwrap(),
        pair.a.area.region.remote(0),
    );
    pair.b.sq.post(&bad);
    pair.b.sq.submit();
    pair.fabric.run_until_idle();
    assert_eq!(
        pair.fabric.qp_status(pair.b.qpn).unwrap().state,
        QpState::Error
    );
    pair.b.cq.drain();
    let wqe = write_from(
        pair.a.area.region.sge(0, 8).unwrap(),
        pair.b.area.region.remote(0),
    );
    let responder = pair.b.qpn.get();
    expect_fault(
        &mut pair,
        |p| p.a.sq.post(&wqe),
        WRITE,
        RETRY_EXCEEDED,
        0x53,
        Fault::ResponderUnavailable { responder },
    );

    let mut pair = RcPair::new(&Setup::default());
    pair.fabric.destroy_qp(pair.b.qpn).unwrap();
    let wqe = write_from(
        pair.a.area.region.sge(0, 8).unwrap(),
        pair.b.area.region.remote(0),
    );
    expect_fault(
        &mut pair,
        |p| p.a.sq.post(&wqe),
        WRITE,
        RETRY_EXCEEDED,
        0x53,
        Fault::ResponderUnavailable { responder },
    );
}

#[test]
fn keys_of_a_dropped_region_stop_resolving() {
    let mut pair = RcPair::new(&Setup::default());
    let extra = Arc::new(DmaBuffer::zeroed(64, 64).unwrap());
    let region = pair
        .fabric
        .register(pair.b.node, extra.clone(), 0, 64, Access::all())
        .unwrap();
    let clone = region.clone();
    let remote = region.remote(0);
    drop(region);
    // A clone keeps the registration alive.
    pair.a
        .sq
        .post(&write_from(pair.a.area.region.sge(0, 8).unwrap(), remote));
    pair.a.sq.submit();
    pair.fabric.run_until_idle();
    assert_eq!(extra.to_vec()[..8], pair.a.area.bytes(0, 8)[..]);
    drop(clone);
    extra.fill(0, 64, 0).unwrap();
    let wqe = write_from(pair.a.area.region.sge(0, 8).unwrap(), remote);
    expect_fault(
        &mut pair,
        |p| p.a.sq.post(&wqe),
        WRITE,
        REMOTE_ACCESS,
        0x40,
        Fault::RemoteKey {
            rkey: remote.rkey.0,
        },
    );
    assert_eq!(
        extra.to_vec(),
        vec![0; 64],
        "the buffer is never written again"
    );
}

#[test]
fn registration_refuses_bad_regions() {
    use ibgda::softnic::{Fabric, SoftNicError};
    let fabric = Fabric::new();
    let node = fabric.add_node(1).unwrap();
    assert_eq!(
        fabric.add_node(1),
        Err(SoftNicError::DuplicateLid { lid: 1 })
    );
    let buffer = Arc::new(DmaBuffer::zeroed(64, 64).unwrap());
    assert_eq!(
        fabric
            .register(node, buffer.clone(), 60, 8, Access::empty())
            .unwrap_err(),
        SoftNicError::RegionOutOfBounds {
            offset: 60,
            len: 8,
            buffer_len: 64
        }
    );
    assert_eq!(
        fabric
            .register(node, buffer.clone(), usize::MAX, 2, Access::empty())
            .unwrap_err(),
        SoftNicError::RegionOutOfBounds {
            offset: usize::MAX,
            len: 2,
            buffer_len: 64
        }
    );
    assert_eq!(
        fabric
            .register(node, buffer.clone(), 0, 0, Access::empty())
            .unwrap_err(),
        SoftNicError::EmptyRegion
    );
    assert_eq!(
        fabric
            .register(node, buffer.clone(), 0, 8, Access::REMOTE_WRITE)
            .unwrap_err(),
        SoftNicError::InvalidAccess {
            access: Access::REMOTE_WRITE
        }
    );
    let other = fabric.add_node(2).unwrap();
    let a = fabric
        .register(node, buffer.clone(), 0, 8, Access::empty())
        .unwrap();
    let b = fabric
        .register(other, buffer, 0, 8, Access::empty())
        .unwrap();
    assert_ne!(a.lkey(), b.lkey(), "key spaces are per node, and differ");
    assert_ne!(a.lkey().0, a.rkey().0);
}

// ---------------------------------------------------------------------------------------
// CQ overruns.

#[test]
fn send_cq_overrun_is_an_error_with_async_events_not_silent_loss() {
    let mut pair = RcPair::new(&Setup {
        cq_entries: 4,
        ..Setup::default()
    });
    let nop = Nop::<Rc>::new().signaled().build().unwrap();
    for _ in 0..6 {
        pair.a.sq.post(&nop);
    }
    pair.a.sq.submit();
    let report = pair.fabric.run_until_idle();
    assert_eq!(
        (
            report.wqes_executed,
            report.wqes_flushed,
            report.cqes_written
        ),
        (5, 1, 4)
    );
    let q = pair.a.qpn.get();
    let cq = pair.fabric.send_cq(pair.a.qpn).unwrap();
    // Entries 0..4 hold the first four CQEs; nothing was written over them.
    for k in 0..4u16 {
        assert_eq!(pair.a.cq.entry(k.into()), req_cqe(q, NOP, k, 0, 0));
    }
    assert_eq!(pair.fabric.cq_in_error(cq), Some(true));
    assert_eq!(
        pair.fabric.async_events(),
        vec![
            AsyncEvent::CqError { cq },
            AsyncEvent::QueueFatal {
                queue: QueueId::Qp(pair.a.qpn),
                cq
            },
        ]
    );
    let status = pair.fabric.qp_status(pair.a.qpn).unwrap();
    assert_eq!(status.state, QpState::Error);
    assert_eq!(status.error, Some(ErrorCause::CompletionQueue { cq }));
    assert_eq!(pair.fabric.counters().cqes_dropped, 2);

    // The consumer catches up, but the CQ stays in error and writes nothing more.
    assert_eq!(pair.a.cq.drain().len(), 4);
    pair.a.sq.post(&nop);
    pair.a.sq.submit();
    pair.fabric.run_until_idle();
    assert_eq!(pair.a.cq.poll(), None);
    for k in 0..4u16 {
        assert_eq!(pair.a.cq.entry(k.into()), req_cqe(q, NOP, k, 0, 0));
    }
    assert_eq!(pair.fabric.take_async_events().len(), 2);
    assert!(pair.fabric.async_events().is_empty());
}

#[test]
fn a_consumer_that_keeps_up_never_overruns() {
    let mut pair = RcPair::new(&Setup {
        cq_entries: 2,
        ..Setup::default()
    });
    let nop = Nop::<Rc>::new().signaled().build().unwrap();
    let q = pair.a.qpn.get();
    for k in 0..10u16 {
        pair.a.sq.post(&nop);
        pair.a.sq.submit();
        pair.fabric.run_until_idle();
        let owner = pair.a.cq.expected_owner(k.into());
        assert_eq!(pair.a.cq.drain(), vec![req_cqe(q, NOP, k, 0, owner)]);
    }
    assert!(pair.fabric.async_events().is_empty());
}

#[test]
fn responder_cq_overrun_fails_the_write_and_the_responder() {
    let mut pair = RcPair::new(&Setup {
        receive: true,
        receive_cq_entries: 2,
        ..Setup::default()
    });
    pair.fabric.post_receives(pair.b.qpn, 3).unwrap();
    for k in 0..3u64 {
        let payload = [0xf0 | k as u8; 8];
        let wqe = RdmaWrite::new(pair.b.area.region.remote(8 * k))
            .inline(&payload)
            .immediate(k as u32)
            .signaled()
            .build()
            .unwrap();
        pair.a.sq.post(&wqe);
    }
    pair.a.sq.submit();
    pair.fabric.run_until_idle();
    let (a, b) = (pair.a.qpn.get(), pair.b.qpn.get());
    assert_eq!(
        pair.a.cq.drain(),
        vec![
            req_cqe(a, WRITE_IMM, 0, 0, 0),
            req_cqe(a, WRITE_IMM, 1, 0, 0),
            err_cqe(a, WRITE_IMM, 2, REMOTE_OP, 0x70, 0),
        ]
    );
    assert_eq!(pair.b.area.bytes(0, 8), [0xf0; 8]);
    assert_eq!(pair.b.area.bytes(8, 8), [0xf1; 8]);
    assert_eq!(
        pair.b.area.bytes(16, 8),
        pair.b.area.initial_image()[GUARD_LEN + 16..GUARD_LEN + 24],
        "the failed message wrote nothing"
    );
    let rcq = pair.fabric.receive_cq(pair.b.qpn).unwrap();
    assert_eq!(
        pair.fabric.async_events(),
        vec![
            AsyncEvent::CqError { cq: rcq },
            AsyncEvent::QueueFatal {
                queue: QueueId::Qp(pair.b.qpn),
                cq: rcq
            },
        ]
    );
    assert_eq!(
        pair.fabric.qp_status(pair.b.qpn).unwrap().state,
        QpState::Error
    );
    assert_eq!(pair.fabric.receive_credits(pair.b.qpn), Some(1));
    let rcq = pair.b.rcq.as_mut().unwrap();
    assert_eq!(
        rcq.drain(),
        vec![
            resp_imm_cqe(b, a, 1, 0, 8, 0, false, 0),
            resp_imm_cqe(b, a, 1, 1, 8, 1, false, 0),
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Doorbells.

#[test]
fn a_doorbell_for_another_queue_is_ignored_and_counted() {
    let mut pair = RcPair::new(&Setup {
        watch: DoorbellWatch::DoorbellOnly,
        ..Setup::default()
    });
    let nop = Nop::<Rc>::new().signaled().build().unwrap();
    pair.a.sq.post(&nop);
    pair.a.sq.publish();
    pair.a.sq.ring_for(pair.b.qpn.get());
    let report = pair.fabric.run_until_idle();
    assert_eq!((report.doorbells, report.foreign_doorbells), (0, 1));
    assert_eq!(report.wqes_consumed(), 0);
    assert_eq!(pair.a.cq.poll(), None);
    pair.a.sq.ring();
    let report = pair.fabric.run_until_idle();
    assert_eq!((report.doorbells, report.wqes_executed), (1, 1));
    assert_eq!(
        pair.a.cq.drain(),
        vec![req_cqe(pair.a.qpn.get(), NOP, 0, 0, 0)]
    );
    let counters = pair.fabric.counters();
    assert_eq!((counters.doorbells, counters.foreign_doorbells), (1, 1));
}

#[test]
fn a_doorbell_rung_with_an_unchanged_value_is_caught_by_the_record() {
    for watch in [DoorbellWatch::PollRecord, DoorbellWatch::DoorbellOnly] {
        let mut pair = RcPair::new(&Setup {
            watch,
            ..Setup::default()
        });
        let nop = Nop::<Rc>::new().signaled().build().unwrap();
        pair.a.sq.post(&nop);
        pair.a.sq.submit();
        pair.fabric.run_until_idle();
        assert_eq!(pair.a.cq.drain().len(), 1);
        // rdma-core style: ring with the last WQE's control segment, here the same bytes
        // as before, so the doorbell word does not change.
        let unchanged = pair
            .a
            .sq
            .memory
            .memory()
            .doorbell_bytes()
            .expect("a memory doorbell");
        pair.a.sq.post(&nop);
        pair.a.sq.publish();
        pair.a.sq.memory.store_doorbell(unchanged);
        let report = pair.fabric.run_until_idle();
        let expected = match watch {
            DoorbellWatch::PollRecord => 1,
            DoorbellWatch::DoorbellOnly => 0,
        };
        assert_eq!(report.doorbells, 0);
        assert_eq!(report.wqes_executed, expected, "{watch:?}");
    }
}

#[test]
fn within_one_doorbell_every_wqe_resolves_its_own_keys() {
    // Two local and two remote regions named in turn by the WQEs of one doorbell, then a
    // key whose region was dropped before the doorbell: each WQE reaches the region its
    // keys name, and the dropped key is an error even right after live ones.
    let mut pair = RcPair::new(&Setup::default());
    let extra = |node, seed: u8| {
        let buffer = Arc::new(DmaBuffer::zeroed(64, 64).unwrap());
        let bytes: Vec<u8> = (0..64).map(|i| pattern(seed, i)).collect();
        buffer.write(0, &bytes).unwrap();
        let region = pair
            .fabric
            .register(node, buffer.clone(), 0, 64, Access::all())
            .unwrap();
        (buffer, region)
    };
    let (local2, l2) = extra(pair.a.node, 0x21);
    let (remote1, r1) = extra(pair.b.node, 0x31);
    let (remote2, r2) = extra(pair.b.node, 0x41);
    let (_, dropped) = extra(pair.b.node, 0x51);
    let gone = dropped.remote(0);
    drop(dropped);
    let l1 = &pair.a.area.region;
    let wqes = [
        write_from(l1.sge(0, 8).unwrap(), r1.remote(0)),
        write_from(l2.sge(8, 8).unwrap(), r2.remote(8)),
        write_from(l1.sge(16, 8).unwrap(), r2.remote(16)),
        write_from(l2.sge(24, 8).unwrap(), r1.remote(24)),
    ];
    let read = RdmaRead::new(r1.remote(40))
        .sge(l2.sge(40, 8).unwrap())
        .build()
        .unwrap();
    for wqe in &wqes {
        pair.a.sq.post(wqe);
    }
    pair.a.sq.post(&read);
    let bad = pair.a.sq.post(&write_from(l1.sge(0, 8).unwrap(), gone));
    pair.a.sq.submit();
    let report = pair.fabric.run_until_idle();
    assert_eq!((report.wqes_executed, report.wqes_failed), (5, 1));
    let q = pair.a.qpn.get();
    assert_eq!(
        pair.a.cq.drain(),
        vec![err_cqe(q, WRITE, bad, REMOTE_ACCESS, 0x40, 0)]
    );
    assert_eq!(
        pair.fabric.qp_status(pair.a.qpn).unwrap().error,
        Some(ErrorCause::Wqe {
            fault: Fault::RemoteKey { rkey: gone.rkey.0 },
            wqe_counter: bad,
        })
    );
    let image = |seed: u8, changes: &[(usize, u8)]| -> Vec<u8> {
        let mut bytes: Vec<u8> = (0..64).map(|i| pattern(seed, i)).collect();
        for &(at, from_seed) in changes {
            for (i, byte) in bytes.iter_mut().enumerate().skip(at).take(8) {
                *byte = pattern(from_seed, i);
            }
        }
        bytes
    };
    // The area's region has seed 0x11 (softnic_support::RcPair).
    assert_eq!(remote1.to_vec(), image(0x31, &[(0, 0x11), (24, 0x21)]));
    assert_eq!(remote2.to_vec(), image(0x41, &[(8, 0x21), (16, 0x11)]));
    let mut local2_expected = image(0x21, &[]);
    local2_expected[40..48].copy_from_slice(&image(0x31, &[])[40..48]);
    assert_eq!(local2.to_vec(), local2_expected);
}
