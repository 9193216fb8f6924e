//! DC initiators reach DC targets by the address vector in each WQE: the LID picks the
//! node, `dqp_dct` the target, and the DC key must match. An unreachable or unwilling
//! target does not answer: TRANSPORT_RETRY_EXC.

mod softnic_support;

use std::sync::atomic::{AtomicU16, Ordering};

use ibgda::softnic::{Access, DctNumber, ErrorCause, Fabric, Fault, NodeId, QpState};
use ibgda::wqe::*;
use softnic_support::*;

const WRITE: u8 = 0x08;
const READ: u8 = 0x10;
const FETCH_ADD: u8 = 0x12;
const RETRY_EXCEEDED: u8 = 0x15;

struct Target {
    node: NodeId,
    lid: u16,
    key: u64,
    dct: DctNumber,
    area: Area,
}

fn target(fabric: &Fabric, lid: u16, key: u64) -> Target {
    let node = fabric.add_node(lid).unwrap();
    let area = Area::new(fabric, node, 256, Access::all(), lid as u8);
    let dct = fabric.create_dct(node, key).unwrap();
    Target {
        node,
        lid,
        key,
        dct,
        area,
    }
}

fn compact(lid: u16, dct: u32, key: u64) -> DcTarget<Compact> {
    CompactAddressVector {
        dct,
        dc_key: key,
        lid,
        ..Default::default()
    }
    .encode()
    .unwrap()
}

fn full(lid: u16, dct: u32, key: u64) -> DcTarget<Full> {
    FullAddressVector {
        dct,
        dc_key: key,
        link: LinkAddress::InfiniBand {
            lid,
            sl: 3,
            static_rate: 0,
            source_path_bits: 0,
            force_loopback: false,
            grh: None,
        },
    }
    .encode()
    .unwrap()
}

#[test]
fn one_initiator_reaches_many_targets_with_both_address_vector_forms() {
    let fabric = Fabric::new();
    let mut dci = side(&fabric, 1, 1, TransportKind::Dc, &Setup::default());
    let targets: Vec<Target> = (0..6u16)
        .map(|k| target(&fabric, 10 + k, 0x5623_ceaf + u64::from(k) * 0x1_0000_0001))
        .collect();
    let befores: Vec<Vec<u8>> = targets.iter().map(|t| t.area.image()).collect();
    let before_dci = dci.area.image();
    let q = dci.qpn.get();
    let mut expected = Vec::new();
    for (k, t) in targets.iter().enumerate() {
        let payload = [0x40 + k as u8; 12];
        let remote = t.area.region.remote(32);
        let fetch = t.area.region.remote(64 + 8 * k as u64);
        let local = dci.area.region.sge(16 * k as u64, 16).unwrap();
        let result = dci.area.region.local(200 + 8 * k as u64);
        let (w, r, a) = if k % 2 == 0 {
            let av = compact(t.lid, t.dct.get(), t.key);
            (
                dci.sq.post(
                    &RdmaWrite::new(av.at(remote))
                        .inline(&payload)
                        .signaled()
                        .build()
                        .unwrap(),
                ),
                dci.sq.post(
                    &RdmaRead::new(av.at(remote))
                        .sge(local)
                        .signaled()
                        .build()
                        .unwrap(),
                ),
                dci.sq.post(
                    &Atomic::fetch_add(av.at(fetch), result, 1)
                        .signaled()
                        .build()
                        .unwrap(),
                ),
            )
        } else {
            let av = full(t.lid, t.dct.get(), t.key);
            (
                dci.sq.post(
                    &RdmaWrite::new(av.at(remote))
                        .inline(&payload)
                        .signaled()
                        .build()
                        .unwrap(),
                ),
                dci.sq.post(
                    &RdmaRead::new(av.at(remote))
                        .sge(local)
                        .signaled()
                        .build()
                        .unwrap(),
                ),
                dci.sq.post(
                    &Atomic::fetch_add(av.at(fetch), result, 1)
                        .signaled()
                        .build()
                        .unwrap(),
                ),
            )
        };
        expected.push(req_cqe(q, WRITE, w, 0, 0));
        expected.push(req_cqe(q, READ, r, 16, 0));
        expected.push(req_cqe(q, FETCH_ADD, a, 8, 0));
    }
    dci.sq.submit();
    fabric.run_until_idle();
    assert_eq!(dci.cq.drain(), expected);

    let mut expected_dci = before_dci;
    for (k, t) in targets.iter().enumerate() {
        // The target: 12 bytes written at 32, the operand at 64 + 8k incremented.
        let mut image = befores[k].clone();
        let operand = GUARD_LEN + 64 + 8 * k;
        let original: [u8; 8] = image[operand..operand + 8].try_into().unwrap();
        let incremented = u64::from_be_bytes(original).wrapping_add(1).to_be_bytes();
        image[operand..operand + 8].copy_from_slice(&incremented);
        image[GUARD_LEN + 32..GUARD_LEN + 44].copy_from_slice(&[0x40 + k as u8; 12]);
        assert_eq!(t.area.image(), image, "target {k}");
        // The initiator: 16 bytes read back (12 written, then 4 of the pattern), and the
        // operand's original value.
        let read_back = &image[GUARD_LEN + 32..GUARD_LEN + 48];
        expected_dci[GUARD_LEN + 16 * k..GUARD_LEN + 16 * k + 16].copy_from_slice(read_back);
        expected_dci[GUARD_LEN + 200 + 8 * k..GUARD_LEN + 208 + 8 * k].copy_from_slice(&original);
    }
    assert_eq!(dci.area.image(), expected_dci);
}

/// Posts one WRITE to `av` (which fails) and a signaled NOP on a fresh initiator, and
/// expects the retry-exceeded error CQE and a flush.
fn expect_timeout<Av: AvForm>(
    fabric: &Fabric,
    av: DcTarget<Av>,
    remote: RemoteAddress,
    vendor: u8,
    fault: Fault,
) {
    static NEXT_LID: AtomicU16 = AtomicU16::new(1000);
    let lid = NEXT_LID.fetch_add(1, Ordering::Relaxed);
    let mut dci = side(fabric, lid, 1, TransportKind::Dc, &Setup::default());
    let w = dci.sq.post(
        &RdmaWrite::new(av.at(remote))
            .inline(&[1; 8])
            .build()
            .unwrap(),
    );
    let n = dci
        .sq
        .post(&Nop::<Dc<Av>>::new().signaled().build().unwrap());
    dci.sq.submit();
    fabric.run_until_idle();
    let q = dci.qpn.get();
    assert_eq!(
        dci.cq.drain(),
        vec![
            err_cqe(q, WRITE, w, RETRY_EXCEEDED, vendor, 0),
            flush_cqe(q, 0x00, n, 0)
        ]
    );
    let status = fabric.qp_status(dci.qpn).unwrap();
    assert_eq!(status.state, QpState::Error);
    assert_eq!(
        status.error,
        Some(ErrorCause::Wqe {
            fault,
            wqe_counter: w
        })
    );
}

#[test]
fn unreachable_or_unwilling_targets_do_not_answer() {
    let fabric = Fabric::new();
    let good = target(&fabric, 10, 0x1111);
    let other = target(&fabric, 11, 0x2222);
    let before = (good.area.image(), other.area.image());
    let remote = good.area.region.remote(0);
    let dct = good.dct.get();

    // Wrong DC key, with both AV forms.
    expect_timeout(
        &fabric,
        compact(10, dct, 0x1112),
        remote,
        0x52,
        Fault::WrongDcKey { dct },
    );
    expect_timeout(
        &fabric,
        full(10, dct, 0),
        remote,
        0x52,
        Fault::WrongDcKey { dct },
    );
    // No node with the LID.
    expect_timeout(
        &fabric,
        compact(99, dct, 0x1111),
        remote,
        0x50,
        Fault::UnknownLid { lid: 99 },
    );
    // No such DCT number.
    expect_timeout(
        &fabric,
        full(10, 0xab_cdef, 0x1111),
        remote,
        0x51,
        Fault::UnknownDct { dct: 0xab_cdef },
    );
    // The DCT exists, but on another node than the LID names.
    expect_timeout(
        &fabric,
        compact(11, dct, 0x1111),
        remote,
        0x51,
        Fault::UnknownDct { dct },
    );
    // A queue pair's number is not a DCT.
    let (rc, ..) = queue_pair(&fabric, good.node, TransportKind::Rc, &Setup::default());
    let rc = rc.get();
    expect_timeout(
        &fabric,
        compact(10, rc, 0x1111),
        remote,
        0x51,
        Fault::UnknownDct { dct: rc },
    );
    // A destroyed DCT.
    fabric.destroy_dct(other.dct).unwrap();
    expect_timeout(
        &fabric,
        compact(11, other.dct.get(), 0x2222),
        other.area.region.remote(0),
        0x51,
        Fault::UnknownDct {
            dct: other.dct.get(),
        },
    );

    assert_eq!(
        (good.area.image(), other.area.image()),
        before,
        "no target memory changed"
    );
    assert_eq!(fabric.counters().wqes_failed, 7);
}

#[test]
fn a_good_key_on_a_target_the_initiator_failed_on_still_works_for_others() {
    // A DCT does not go to error because an initiator presented a wrong key.
    let fabric = Fabric::new();
    let t = target(&fabric, 10, 7);
    expect_timeout(
        &fabric,
        compact(10, t.dct.get(), 8),
        t.area.region.remote(0),
        0x52,
        Fault::WrongDcKey { dct: t.dct.get() },
    );
    let mut dci = side(&fabric, 2, 1, TransportKind::Dc, &Setup::default());
    let w = dci.sq.post(
        &RdmaWrite::new(compact(10, t.dct.get(), 7).at(t.area.region.remote(0)))
            .inline(&[3; 4])
            .signaled()
            .build()
            .unwrap(),
    );
    dci.sq.submit();
    fabric.run_until_idle();
    assert_eq!(dci.cq.drain(), vec![req_cqe(dci.qpn.get(), WRITE, w, 0, 0)]);
    assert_eq!(t.area.bytes(0, 4), [3; 4]);
}

#[test]
fn a_dc_wqe_on_an_rc_queue_is_malformed() {
    // An RC queue parses WQEs without an address vector, so a DC WQE's AV reads as a
    // remote address with a non-zero reserved word.
    let mut pair = RcPair::new(&Setup::default());
    let av = compact(2, 0x100, 1);
    let wqe = RdmaWrite::new(av.at(pair.b.area.region.remote(0)))
        .inline(&[1; 4])
        .build()
        .unwrap();
    // Encode it as a DC WQE, then post the bytes to the RC queue.
    let bytes = pair.a.sq.encode(&wqe);
    pair.a.sq.post_raw(&bytes);
    pair.a.sq.submit();
    pair.fabric.run_until_idle();
    let cqes = pair.a.cq.drain();
    assert_eq!(cqes.len(), 1);
    assert_eq!(cqes[0][55], 0x02, "LOCAL_QP_OP");
    assert_eq!(cqes[0][54], 0x01, "rejected by the parser");
    assert!(matches!(
        pair.fabric.qp_status(pair.a.qpn).unwrap().error,
        Some(ErrorCause::Wqe {
            fault: Fault::MalformedWqe(_),
            wqe_counter: 0
        })
    ));
}
