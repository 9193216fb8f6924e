//! The software NIC executes real WQE bytes: WRITEs (inline, pointer, gathered) land
//! exactly, READs return the remote bytes, every atomic returns the original value and
//! updates memory big-endian, WRITE_WITH_IMM completes at the responder, one doorbell
//! covers many WQEs, and a ring is lapped several times with WQEs of one and two blocks.
//!
//! Expected bytes and CQEs are written out here from the layout tables, never read back
//! from the NIC's own encoders.

mod softnic_support;

use ibgda::queue::CompletionQueueMemory;
use ibgda::softnic::{Access, DctConfig, Fabric, ReceiveConfig};
use ibgda::wqe::*;
use softnic_support::*;

const WRITE: u8 = 0x08;
const WRITE_IMM: u8 = 0x09;
const READ: u8 = 0x10;
const NOP: u8 = 0x00;

#[test]
fn eight_byte_inline_write_lands_exactly_and_nothing_else_changes() {
    let mut pair = RcPair::new(&Setup::default());
    let before_b = pair.b.area.image();
    let before_a = pair.a.area.image();
    let payload = 0x0123_4567_89ab_cdefu64.to_be_bytes();
    let wqe = RdmaWrite::new(pair.b.area.region.remote(40))
        .inline(&payload)
        .signaled()
        .build()
        .unwrap();
    assert_eq!(pair.a.sq.post(&wqe), 0);
    pair.a.sq.submit();

    let report = pair.fabric.step();
    assert_eq!(report.wqes_executed, 1);
    assert_eq!(report.doorbells, 1);
    assert_eq!(report.cqes_written, 1);
    assert_only_changed(&before_b, &pair.b.area.image(), GUARD_LEN + 40, &payload);
    assert_eq!(
        pair.a.area.image(),
        before_a,
        "the requester's memory is untouched"
    );
    assert_eq!(
        pair.a.cq.poll(),
        Some(req_cqe(pair.a.qpn.get(), WRITE, 0, 0, 0))
    );
    assert_eq!(pair.a.cq.poll(), None);
    assert_eq!(
        pair.b.cq.poll(),
        None,
        "a WRITE completes only at the requester"
    );
    assert!(!pair.fabric.step().made_progress());
}

#[test]
fn pointer_write_lands_exactly_at_odd_offsets() {
    let mut pair = RcPair::new(&Setup::default());
    let before_b = pair.b.area.image();
    let wqe = RdmaWrite::new(pair.b.area.region.remote(13))
        .sge(pair.a.area.region.sge(101, 37).unwrap())
        .signaled()
        .build()
        .unwrap();
    pair.a.sq.post(&wqe);
    pair.a.sq.submit();
    pair.fabric.run_until_idle();

    let expected: Vec<u8> = (101..138).map(|i| pattern(0x11, i)).collect();
    assert_only_changed(&before_b, &pair.b.area.image(), GUARD_LEN + 13, &expected);
    assert_eq!(
        pair.a.cq.drain(),
        vec![req_cqe(pair.a.qpn.get(), WRITE, 0, 0, 0)]
    );
    let counters = pair.fabric.counters();
    assert_eq!(counters.bytes_written, 37);
    assert_eq!(counters.wqes_executed, 1);
}

#[test]
fn gathered_write_concatenates_its_entries_in_order() {
    let mut pair = RcPair::new(&Setup::default());
    let before_b = pair.b.area.image();
    let region = &pair.a.area.region;
    let wqe = RdmaWrite::new(pair.b.area.region.remote(200))
        .gather([
            region.sge(300, 5).unwrap(),
            region.sge(0, 9).unwrap(),
            region.sge(511, 1).unwrap(),
        ])
        .build()
        .unwrap();
    pair.a.sq.post(&wqe);
    pair.a.sq.submit();
    pair.fabric.run_until_idle();

    let expected: Vec<u8> = (300..305)
        .chain(0..9)
        .chain(511..512)
        .map(|i| pattern(0x11, i))
        .collect();
    assert_only_changed(&before_b, &pair.b.area.image(), GUARD_LEN + 200, &expected);
    assert!(
        pair.a.cq.drain().is_empty(),
        "unsignaled success writes no CQE"
    );
}

#[test]
fn read_returns_the_remote_bytes_into_scattered_entries() {
    let mut pair = RcPair::new(&Setup::default());
    let before_a = pair.a.area.image();
    let before_b = pair.b.area.image();
    let region = &pair.a.area.region;
    let wqe = RdmaRead::new(pair.b.area.region.remote(7))
        .gather([region.sge(400, 20).unwrap(), region.sge(3, 30).unwrap()])
        .signaled()
        .build()
        .unwrap();
    pair.a.sq.post(&wqe);
    pair.a.sq.submit();
    pair.fabric.run_until_idle();

    let remote: Vec<u8> = (7..57).map(|i| pattern(0x77, i)).collect();
    let mut expected = before_a.clone();
    expected[GUARD_LEN + 400..GUARD_LEN + 420].copy_from_slice(&remote[..20]);
    expected[GUARD_LEN + 3..GUARD_LEN + 33].copy_from_slice(&remote[20..]);
    assert_eq!(pair.a.area.image(), expected);
    assert_eq!(
        pair.b.area.image(),
        before_b,
        "a READ changes nothing remotely"
    );
    assert_eq!(
        pair.a.cq.drain(),
        vec![req_cqe(pair.a.qpn.get(), READ, 0, 50, 0)]
    );
    assert_eq!(pair.fabric.counters().bytes_read, 50);
}

#[test]
fn zero_length_write_and_read_touch_nothing_and_complete() {
    let mut pair = RcPair::new(&Setup::default());
    let (before_a, before_b) = (pair.a.area.image(), pair.b.area.image());
    // A bad rkey is not validated for a zero-length transfer (InfiniBand's rule).
    let nowhere = RemoteAddress::new(0xdead_0000, RKey(0x1234_5678));
    let w = RdmaWrite::new(nowhere)
        .without_data()
        .signaled()
        .build()
        .unwrap();
    let r = RdmaRead::new(nowhere)
        .without_data()
        .signaled()
        .build()
        .unwrap();
    pair.a.sq.post(&w);
    pair.a.sq.post(&r);
    pair.a.sq.submit();
    pair.fabric.run_until_idle();
    assert_eq!(pair.a.area.image(), before_a);
    assert_eq!(pair.b.area.image(), before_b);
    let q = pair.a.qpn.get();
    assert_eq!(
        pair.a.cq.drain(),
        vec![req_cqe(q, WRITE, 0, 0, 0), req_cqe(q, READ, 1, 0, 0)]
    );
}

/// One atomic case: the operation, the operand's initial bytes, and (derived by hand) the
/// operand's bytes afterwards.
struct AtomicCase {
    name: &'static str,
    op: AtomicOp,
    remote_offset: u64,
    initial: Vec<u8>,
    after: Vec<u8>,
}

fn atomic_cases() -> Vec<AtomicCase> {
    let be64 = |v: u64| v.to_be_bytes().to_vec();
    let be32 = |v: u32| v.to_be_bytes().to_vec();
    let four = AtomicWidth::Four;
    let eight = AtomicWidth::Eight;
    vec![
        AtomicCase {
            name: "compare-swap, equal",
            op: AtomicOp::CompareSwap {
                compare: 0x1122_3344_5566_7788,
                swap: 0xaaaa_bbbb_cccc_dddd,
            },
            remote_offset: 64,
            initial: be64(0x1122_3344_5566_7788),
            after: be64(0xaaaa_bbbb_cccc_dddd),
        },
        AtomicCase {
            name: "compare-swap, different",
            op: AtomicOp::CompareSwap {
                compare: 0x1122_3344_5566_7789,
                swap: 0xaaaa_bbbb_cccc_dddd,
            },
            remote_offset: 64,
            initial: be64(0x1122_3344_5566_7788),
            after: be64(0x1122_3344_5566_7788),
        },
        AtomicCase {
            name: "fetch-add carries across the 32-bit halves",
            op: AtomicOp::FetchAdd { add: 1 },
            remote_offset: 8,
            initial: be64(0x0000_0000_ffff_ffff),
            after: be64(0x0000_0001_0000_0000),
        },
        AtomicCase {
            name: "fetch-add wraps",
            op: AtomicOp::FetchAdd { add: 2 },
            remote_offset: 16,
            initial: be64(u64::MAX),
            after: be64(1),
        },
        AtomicCase {
            name: "masked compare-swap 8, match under the mask",
            op: AtomicOp::MaskedCompareSwap {
                width: eight,
                swap: 0xffff_0000_0000_0000,
                compare: 0x0000_0000_0000_de00,
                swap_mask: 0xff00_0000_0000_000f,
                compare_mask: 0x0000_0000_0000_ff00,
            },
            remote_offset: 24,
            initial: be64(0x1234_5678_9abc_def1),
            after: be64(0xff34_5678_9abc_def0),
        },
        AtomicCase {
            name: "masked compare-swap 8, mismatch under the mask",
            op: AtomicOp::MaskedCompareSwap {
                width: eight,
                swap: 0,
                compare: 0x00,
                swap_mask: u64::MAX,
                compare_mask: 0xff,
            },
            remote_offset: 24,
            initial: be64(0x1234_5678_9abc_def1),
            after: be64(0x1234_5678_9abc_def1),
        },
        AtomicCase {
            name: "masked compare-swap 4 in the upper half of a word",
            op: AtomicOp::MaskedCompareSwap {
                width: four,
                swap: 0x0000_1234,
                compare: 0xdead_0000,
                swap_mask: 0x0000_ffff,
                compare_mask: 0xffff_0000,
            },
            remote_offset: 36,
            initial: be32(0xdead_beef),
            after: be32(0xdead_1234),
        },
        AtomicCase {
            name: "masked compare-swap 4 as NVSHMEM's SWAP (compare mask 0)",
            op: AtomicOp::MaskedCompareSwap {
                width: four,
                swap: 0x0bad_f00d,
                compare: 0,
                swap_mask: 0xffff_ffff,
                compare_mask: 0,
            },
            remote_offset: 40,
            initial: be32(0x1111_2222),
            after: be32(0x0bad_f00d),
        },
        AtomicCase {
            name: "masked fetch-add 4 with two 16-bit fields",
            op: AtomicOp::MaskedFetchAdd {
                width: four,
                add: 1,
                field_boundary: 0x0000_8000,
            },
            remote_offset: 44,
            initial: be32(0x0001_ffff),
            after: be32(0x0001_0000),
        },
        AtomicCase {
            name: "masked fetch-add 8 with eight byte lanes",
            op: AtomicOp::MaskedFetchAdd {
                width: eight,
                add: 0x0001_0001_0001_0001,
                field_boundary: 0x8080_8080_8080_8080,
            },
            remote_offset: 48,
            initial: be64(0x00ff_00ff_00ff_00ff),
            after: be64(0x0000_0000_0000_0000),
        },
        AtomicCase {
            name: "masked fetch-add 8 without boundaries is a plain add",
            op: AtomicOp::MaskedFetchAdd {
                width: eight,
                add: 0x0001_0001_0001_0001,
                field_boundary: 0,
            },
            remote_offset: 48,
            initial: be64(0x00ff_00ff_00ff_00ff),
            after: be64(0x0100_0100_0100_0100),
        },
        AtomicCase {
            name: "masked fetch-add 8 with every bit a boundary is XOR",
            op: AtomicOp::MaskedFetchAdd {
                width: eight,
                add: 0xff00_ff00_ff00_ff00,
                field_boundary: u64::MAX,
            },
            remote_offset: 56,
            initial: be64(0xf0f0_f0f0_f0f0_f0f0),
            after: be64(0x0ff0_0ff0_0ff0_0ff0),
        },
    ]
}

#[test]
fn every_atomic_returns_the_original_value_and_updates_memory_big_endian() {
    for case in atomic_cases() {
        let mut pair = RcPair::new(&Setup::default());
        pair.b.area.set(case.remote_offset as usize, &case.initial);
        let (before_a, before_b) = (pair.a.area.image(), pair.b.area.image());
        let wqe = Atomic::any(
            pair.b.area.region.remote(case.remote_offset),
            pair.a.area.region.local(128),
            case.op,
        )
        .signaled()
        .build()
        .unwrap();
        pair.a.sq.post(&wqe);
        pair.a.sq.submit();
        pair.fabric.run_until_idle();

        let width = case.initial.len();
        assert_only_changed(
            &before_b,
            &pair.b.area.image(),
            GUARD_LEN + case.remote_offset as usize,
            &case.after,
        );
        assert_only_changed(
            &before_a,
            &pair.a.area.image(),
            GUARD_LEN + 128,
            &case.initial,
        );
        assert_eq!(
            pair.a.cq.drain(),
            vec![req_cqe(
                pair.a.qpn.get(),
                case.op.opcode().byte(),
                0,
                width as u32,
                0
            )],
            "{}",
            case.name
        );
        assert_eq!(pair.fabric.counters().atomics, 1, "{}", case.name);
    }
}

#[test]
fn atomics_in_sequence_see_each_other() {
    let mut pair = RcPair::new(&Setup::default());
    pair.b.area.set(0, &[0; 8]);
    for k in 0..5u64 {
        let wqe = Atomic::fetch_add(
            pair.b.area.region.remote(0),
            pair.a.area.region.local(8 * k),
            10,
        )
        .build()
        .unwrap();
        pair.a.sq.post(&wqe);
    }
    pair.a.sq.submit();
    pair.fabric.run_until_idle();
    assert_eq!(pair.b.area.bytes(0, 8), 50u64.to_be_bytes());
    for k in 0..5u64 {
        assert_eq!(
            pair.a.area.bytes(8 * k as usize, 8),
            (10 * k).to_be_bytes(),
            "fetch-add {k} returns the sum before it"
        );
    }
}

#[test]
fn write_with_immediate_completes_at_the_responder_with_the_immediate() {
    let mut pair = RcPair::new(&Setup {
        receive: true,
        ..Setup::default()
    });
    pair.fabric.post_receives(pair.b.qpn, 2).unwrap();
    assert_eq!(pair.fabric.receive_credits(pair.b.qpn), Some(2));
    let before_b = pair.b.area.image();
    let first = RdmaWrite::new(pair.b.area.region.remote(16))
        .inline(&[1, 2, 3, 4, 5])
        .immediate(0xdead_beef)
        .solicited()
        .signaled()
        .build()
        .unwrap();
    let second = RdmaWrite::new(pair.b.area.region.remote(100))
        .sge(pair.a.area.region.sge(0, 24).unwrap())
        .immediate(0x0102_0304)
        .build()
        .unwrap();
    pair.a.sq.post(&first);
    pair.a.sq.post(&second);
    pair.a.sq.submit();
    pair.fabric.run_until_idle();

    let mut expected = before_b.clone();
    expected[GUARD_LEN + 16..GUARD_LEN + 21].copy_from_slice(&[1, 2, 3, 4, 5]);
    for i in 0..24 {
        expected[GUARD_LEN + 100 + i] = pattern(0x11, i);
    }
    assert_eq!(pair.b.area.image(), expected);
    let (a, b) = (pair.a.qpn.get(), pair.b.qpn.get());
    assert_eq!(pair.a.cq.drain(), vec![req_cqe(a, WRITE_IMM, 0, 0, 0)]);
    let rcq = pair.b.rcq.as_mut().unwrap();
    assert_eq!(
        rcq.drain(),
        vec![
            resp_imm_cqe(b, a, 1, 0xdead_beef, 5, 0, true, 0),
            resp_imm_cqe(b, a, 1, 0x0102_0304, 24, 1, false, 0),
        ]
    );
    assert_eq!(pair.fabric.receive_credits(pair.b.qpn), Some(0));
    assert_eq!(pair.fabric.counters().responder_cqes, 2);
    // The verbs view of the responder CQE carries the immediate in network order.
    let cqe: [u8; 64] = resp_imm_cqe(b, a, 1, 0xdead_beef, 5, 0, true, 0);
    let wc = ibgda::cq::parse_cqe(&cqe).unwrap().work_completion();
    assert_eq!(wc.imm_data, 0xdead_beefu32.to_be());
    assert_eq!(wc.src_qp, a);
}

#[test]
fn one_doorbell_executes_every_published_wqe() {
    let mut pair = RcPair::new(&Setup::default());
    for k in 0..10u64 {
        let payload = [k as u8; 8];
        let mut builder = RdmaWrite::new(pair.b.area.region.remote(8 * k)).inline(&payload);
        if k == 9 {
            builder = builder.signaled();
        }
        pair.a.sq.post(&builder.build().unwrap());
    }
    pair.a.sq.submit();
    let report = pair.fabric.step();
    assert_eq!(report.doorbells, 1);
    assert_eq!(report.wqes_executed, 10);
    assert_eq!(report.cqes_written, 1);
    for k in 0..10 {
        assert_eq!(pair.b.area.bytes(8 * k, 8), [k as u8; 8]);
    }
    assert_eq!(
        pair.a.cq.drain(),
        vec![req_cqe(pair.a.qpn.get(), WRITE, 9, 0, 0)]
    );
    assert_eq!(pair.fabric.counters().doorbells, 1);
}

#[test]
fn wqes_posted_but_not_published_wait_for_the_doorbell_record() {
    let mut pair = RcPair::new(&Setup::default());
    let wqe = Nop::<Rc>::new().signaled().build().unwrap();
    pair.a.sq.post(&wqe);
    pair.a.sq.post(&wqe);
    pair.a.sq.publish_value(1);
    pair.a.sq.ring();
    pair.fabric.run_until_idle();
    let q = pair.a.qpn.get();
    assert_eq!(pair.a.cq.drain(), vec![req_cqe(q, NOP, 0, 0, 0)]);
    pair.a.sq.publish();
    pair.fabric.run_until_idle();
    assert_eq!(pair.a.cq.drain(), vec![req_cqe(q, NOP, 1, 0, 0)]);
}

#[test]
fn rc_queue_pairs_execute_nothing_until_connected() {
    let fabric = Fabric::new();
    let setup = Setup::default();
    let mut a = side(&fabric, 1, 1, TransportKind::Rc, &setup);
    let b = side(&fabric, 2, 2, TransportKind::Rc, &setup);
    let wqe = RdmaWrite::new(b.area.region.remote(0))
        .inline(&[9; 4])
        .signaled()
        .build()
        .unwrap();
    a.sq.post(&wqe);
    a.sq.submit();
    let report = fabric.run_until_idle();
    assert_eq!((report.doorbells, report.wqes_consumed()), (1, 0));
    assert_eq!(
        fabric.qp_status(a.qpn).unwrap().state,
        ibgda::softnic::QpState::Init
    );
    fabric.connect(a.qpn, b.qpn).unwrap();
    fabric.run_until_idle();
    assert_eq!(b.area.bytes(0, 4), [9; 4]);
    assert_eq!(a.cq.drain(), vec![req_cqe(a.qpn.get(), WRITE, 0, 0, 0)]);
}

#[test]
fn loopback_on_one_node_and_a_queue_pair_connected_to_itself() {
    let fabric = Fabric::new();
    let setup = Setup::default();
    let mut a = side(&fabric, 1, 1, TransportKind::Rc, &setup);
    fabric.connect(a.qpn, a.qpn).unwrap();
    let wqe = RdmaWrite::new(a.area.region.remote(256))
        .sge(a.area.region.sge(0, 16).unwrap())
        .signaled()
        .build()
        .unwrap();
    a.sq.post(&wqe);
    a.sq.submit();
    fabric.run_until_idle();
    let expected: Vec<u8> = (0..16).map(|i| pattern(1, i)).collect();
    assert_eq!(a.area.bytes(256, 16), expected);
    assert_eq!(a.cq.drain(), vec![req_cqe(a.qpn.get(), WRITE, 0, 0, 0)]);
}

/// A DC initiator on node 1 and a DCT on node 2; the ring is lapped several times with
/// WQEs of two blocks (full address vector) and one block (compact address vector), some
/// of them wrapping past the ring's end, with the consumer keeping up with the CQ.
#[test]
fn ring_is_lapped_three_times_with_one_and_two_block_wqes() {
    const RING: usize = 8;
    const WQES: u64 = 40;
    let fabric = Fabric::new();
    let setup = Setup {
        ring_wqebbs: RING,
        cq_entries: 8,
        ..Setup::default()
    };
    let mut dci = side(&fabric, 1, 1, TransportKind::Dc, &setup);
    let target_node = fabric.add_node(2).unwrap();
    let target = Area::new(&fabric, target_node, 512, ALL_ACCESS, 9);
    let dct = fabric.create_dct(target_node, 0x5623_ceaf).unwrap();
    let full = FullAddressVector {
        dct: dct.get(),
        dc_key: 0x5623_ceaf,
        link: LinkAddress::InfiniBand {
            lid: 2,
            sl: 0,
            static_rate: 0,
            source_path_bits: 0,
            force_loopback: false,
            grh: None,
        },
    }
    .encode()
    .unwrap();
    let compact = CompactAddressVector {
        dct: dct.get(),
        dc_key: 0x5623_ceaf,
        lid: 2,
        ..Default::default()
    }
    .encode()
    .unwrap();

    let sizes = [2u64, 1, 2, 2, 1, 2, 2, 2, 1];
    let mut expected_cqes = Vec::new();
    let mut wrapped = 0;
    let mut completed = 0u64; // WQEBBs retired by CQEs
    let mut next = 0u64;
    let before = target.image();
    let mut rounds = 0;
    while next < WQES || dci.cq.index < WQES as u32 {
        rounds += 1;
        assert!(rounds < 1000, "no progress");
        // Post while the ring has room for the next WQE.
        while next < WQES {
            let size = sizes[next as usize % sizes.len()];
            if dci.sq.counter + size - completed > RING as u64 {
                break;
            }
            let payload = (0x5a00 + next).to_be_bytes();
            let remote = target.region.remote(8 * next);
            let index = if size == 2 {
                dci.sq.post(
                    &RdmaWrite::new(full.at(remote))
                        .inline(&payload)
                        .signaled()
                        .build()
                        .unwrap(),
                )
            } else {
                dci.sq.post(
                    &RdmaWrite::new(compact.at(remote))
                        .inline(&payload)
                        .signaled()
                        .build()
                        .unwrap(),
                )
            };
            if size == 2 && usize::from(index) % RING == RING - 1 {
                wrapped += 1;
            }
            expected_cqes.push((index, size));
            next += 1;
        }
        dci.sq.submit();
        fabric.run_until_idle();
        while let Some(cqe) = dci.cq.poll() {
            let k = dci.cq.index as usize - 1;
            let (index, size) = expected_cqes[k];
            let owner = dci.cq.expected_owner(k as u32);
            assert_eq!(
                cqe,
                req_cqe(dci.qpn.get(), WRITE, index, 0, owner),
                "CQE {k}"
            );
            completed = u64::from(index) + size;
        }
    }
    assert!(dci.sq.counter >= 3 * RING as u64, "at least three laps");
    assert!(
        wrapped > 0,
        "some two-block WQE wrapped past the ring's end"
    );
    let mut expected = before;
    for k in 0..WQES as usize {
        expected[GUARD_LEN + 8 * k..GUARD_LEN + 8 * k + 8]
            .copy_from_slice(&(0x5a00 + k as u64).to_be_bytes());
    }
    assert_eq!(target.image(), expected);
    assert!(fabric.async_events().is_empty(), "the CQ never overran");
}

#[test]
fn dct_with_a_receive_side_completes_write_with_immediate() {
    let fabric = Fabric::new();
    let setup = Setup::default();
    let mut dci = side(&fabric, 1, 1, TransportKind::Dc, &setup);
    let node = fabric.add_node(7).unwrap();
    let area = Area::new(
        &fabric,
        node,
        64,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        3,
    );
    let rcq = CompletionQueueMemory::allocate(8).unwrap();
    let dct = fabric
        .create_dct(
            node,
            DctConfig {
                dc_key: 42,
                receive: Some(ReceiveConfig {
                    cq: &rcq,
                    cq_mode: Default::default(),
                }),
            },
        )
        .unwrap();
    fabric.post_receives(dct, 1).unwrap();
    let target = CompactAddressVector {
        dct: dct.get(),
        dc_key: 42,
        lid: 7,
        ..Default::default()
    }
    .encode()
    .unwrap();
    let wqe = RdmaWrite::new(target.at(area.region.remote(8)))
        .inline(&[0xee; 3])
        .immediate(77)
        .build()
        .unwrap();
    dci.sq.post(&wqe);
    dci.sq.submit();
    fabric.run_until_idle();
    assert_eq!(area.bytes(8, 3), [0xee; 3]);
    assert!(dci.cq.drain().is_empty(), "unsignaled");
    let mut rcq = Consumer::new(rcq);
    assert_eq!(
        rcq.drain(),
        vec![resp_imm_cqe(
            dct.get(),
            dci.qpn.get(),
            1,
            77,
            3,
            0,
            false,
            0
        )]
    );
}
