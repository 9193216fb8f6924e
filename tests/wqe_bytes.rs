//! Hand-derived byte fixtures: every expected byte below was written out from the layout
//! tables of the mlx5 facts sheet (shared/reference/mlx5-facts.md sections 1.1 to 1.10),
//! not copied from the encoder's output.
//!
//! Each fixture writes a WQE into a ring pre-filled with a marker byte and checks the whole
//! ring: the WQE's bytes where the tables put them (wrapping at the ring's end) and the
//! marker everywhere else. Each fixture is then parsed back from the hand-written bytes
//! alone, so the parser is checked against the tables too.

use ibgda::wqe::*;

const FILL: u8 = 0xee;

/// Bytes from whitespace-separated hex pairs; `|` and newlines are ignored (they mark
/// fields and octowords for the reader).
fn hex(s: &str) -> Vec<u8> {
    s.split(|c: char| c.is_whitespace() || c == '|')
        .filter(|t| !t.is_empty())
        .map(|t| u8::from_str_radix(t, 16).unwrap_or_else(|_| panic!("bad hex byte {t:?}")))
        .collect()
}

/// A ring of `wqebbs` blocks holding the marker byte, with `pieces` placed at their offsets.
fn ring_with(wqebbs: usize, pieces: &[(usize, &[u8])]) -> Vec<u8> {
    let mut ring = vec![FILL; wqebbs * 64];
    for (offset, bytes) in pieces {
        ring[*offset..*offset + bytes.len()].copy_from_slice(bytes);
    }
    ring
}

/// Writes `wqe` at `index` into a fresh ring and returns the ring.
fn write<S: WqeSpec>(wqebbs: usize, index: u16, qpn: u32, wqe: &Wqe<S>) -> Vec<u8> {
    let mut memory = vec![FILL; wqebbs * 64];
    let mut ring = SendRing::new(&mut memory, WqeLimits::default()).unwrap();
    ring.write(WqeIndex(index), Qpn::new(qpn).unwrap(), wqe)
        .unwrap();
    memory
}

/// Asserts two rings are equal, naming the first differing offset.
fn assert_ring_eq(actual: &[u8], expected: &[u8]) {
    assert_eq!(actual.len(), expected.len());
    if let Some(i) = (0..actual.len()).find(|&i| actual[i] != expected[i]) {
        panic!(
            "ring differs first at byte {i} (block {}, octoword {}): got {:#04x}, expected {:#04x}\n\
             got      {:02x?}\nexpected {:02x?}",
            i / 64,
            (i % 64) / 16,
            actual[i],
            expected[i],
            &actual[i - i % 16..(i - i % 16 + 16).min(actual.len())],
            &expected[i - i % 16..(i - i % 16 + 16).min(expected.len())],
        );
    }
}

// ---------------------------------------------------------------------------------------

/// RC RDMA WRITE, one gather entry, at index 0x1234 on QP 0xabcdef, signaled: the 48 bytes
/// of facts sheet table 1.10 row 1 (ctrl, raddr, data), in slot 0x1234 & 7 = 4.
#[test]
fn rc_write_one_sge() {
    let expected = hex("
        00 12 34 08 | ab cd ef 03 | 00 | 00 00 | 08 | 00 00 00 00
        00 00 7f 00 12 34 56 78 | 11 22 33 44 | 00 00 00 00
        00 00 10 00 | aa bb cc dd | 00 00 55 55 66 66 77 70
    ");
    assert_eq!(expected.len(), 48);
    let wqe = RdmaWrite::new(RemoteAddress::new(0x7f00_1234_5678, RKey(0x1122_3344)))
        .sge(Sge::new(0x5555_6666_7770, 0x1000, LKey(0xaabb_ccdd)).unwrap())
        .signaled()
        .build()
        .unwrap();
    assert_eq!(wqe.ds(), 3);
    let ring = write(8, 0x1234, 0xab_cdef, &wqe);
    assert_ring_eq(&ring, &ring_with(8, &[(4 * 64, &expected)]));

    let parsed = parse_wqe(&ring, WqeIndex(0x1234), TransportKind::Rc).unwrap();
    assert_eq!(parsed.opcode, Opcode::RdmaWrite);
    assert_eq!((parsed.qpn, parsed.ds, parsed.imm), (0xab_cdef, 3, 0));
    assert_eq!(parsed.flags.completion, CompletionMode::Always);
    let ParsedOp::Write {
        remote,
        data: ParsedData::Pointers(segs),
    } = parsed.op
    else {
        panic!("{parsed:?}")
    };
    assert_eq!(
        remote,
        RemoteAddress::new(0x7f00_1234_5678, RKey(0x1122_3344))
    );
    let seg = segs.iter().next().unwrap();
    assert_eq!(
        (seg.byte_count.get(), seg.lkey.get(), seg.addr.get()),
        (0x1000, 0xaabb_ccdd, 0x5555_6666_7770)
    );
}

/// RC WRITE_WITH_IMM of 13 inline bytes (DS = 1 + 1 + ceil((4 + 13) / 16) = 4) in the
/// last slot at index 0xffff, then a NOP at the next index, 0x0000, in slot 0: the
/// producer index wraps past 0xffff. The inline payload starts 4 bytes into its octoword;
/// its 14th..16th bytes are the zero padding to the octoword.
#[test]
fn rc_inline_13_bytes_in_the_last_slot_then_index_wraps() {
    let payload = b"hello, world!";
    assert_eq!(payload.len(), 13);
    let expected = hex("
        00 ff ff 09 | 00 00 42 04 | 00 | 00 00 | 00 | 01 02 03 04
        00 00 00 00 00 00 10 00 | 00 00 00 05 | 00 00 00 00
        80 00 00 0d | 68 65 6c 6c 6f 2c 20 77 6f 72 6c 64
        21 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    ");
    let nop = hex("00 00 00 00 | 00 00 42 01 | 00 | 00 00 | 08 | 00 00 00 00");
    let wqe = RdmaWrite::new(RemoteAddress::new(0x1000, RKey(5)))
        .immediate(0x0102_0304)
        .inline(payload)
        .build()
        .unwrap();
    assert_eq!((wqe.ds(), wqe.wqebbs()), (4, 1));

    let mut memory = vec![FILL; 8 * 64];
    let mut ring = SendRing::new(&mut memory, WqeLimits::default()).unwrap();
    let qpn = Qpn::new(0x42).unwrap();
    let index = WqeIndex(0xffff);
    let used = ring.write(index, qpn, &wqe).unwrap();
    let next = index.advance(used);
    assert_eq!(next, WqeIndex(0));
    ring.write(next, qpn, &Nop::<Rc>::new().signaled().build().unwrap())
        .unwrap();
    assert_ring_eq(&memory, &ring_with(8, &[(7 * 64, &expected), (0, &nop)]));

    let parsed = parse_wqe(&memory, WqeIndex(0xffff), TransportKind::Rc).unwrap();
    assert_eq!(
        (parsed.opcode, parsed.imm, parsed.ds),
        (Opcode::RdmaWriteImm, 0x0102_0304, 4)
    );
    let ParsedOp::Write {
        data: ParsedData::Inline(p),
        ..
    } = parsed.op
    else {
        panic!("{parsed:?}")
    };
    assert!(p.eq_bytes(payload));
    let parsed = parse_wqe(&memory, WqeIndex(0), TransportKind::Rc).unwrap();
    assert_eq!(
        (parsed.opcode, parsed.ds, parsed.index),
        (Opcode::Nop, 1, WqeIndex(0))
    );
}

/// RC WRITE of 45 inline bytes: DS = 2 + ceil(49 / 16) = 6, two blocks, in the last slot
/// of a 4-block ring. The payload's first 28 bytes end the ring; the other 17 and the
/// padding start it (rdma-core splits its copy at `qend` the same way).
#[test]
fn rc_inline_payload_split_at_the_ring_end() {
    let payload: Vec<u8> = (0u8..45).collect();
    let head = hex("
        00 00 03 08 | 00 00 07 06 | 00 | 00 00 | 00 | 00 00 00 00
        00 00 00 00 00 00 20 00 | 00 00 00 09 | 00 00 00 00
        80 00 00 2d | 00 01 02 03 04 05 06 07 08 09 0a 0b
        0c 0d 0e 0f 10 11 12 13 14 15 16 17 18 19 1a 1b
    ");
    let tail = hex("
        1c 1d 1e 1f 20 21 22 23 24 25 26 27 28 29 2a 2b
        2c 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    ");
    let wqe = RdmaWrite::new(RemoteAddress::new(0x2000, RKey(9)))
        .inline(&payload)
        .build()
        .unwrap();
    assert_eq!((wqe.ds(), wqe.wqebbs()), (6, 2));
    let ring = write(4, 3, 7, &wqe);
    assert_ring_eq(&ring, &ring_with(4, &[(3 * 64, &head), (0, &tail)]));

    let parsed = parse_wqe(&ring, WqeIndex(3), TransportKind::Rc).unwrap();
    let ParsedOp::Write {
        data: ParsedData::Inline(p),
        ..
    } = parsed.op
    else {
        panic!("{parsed:?}")
    };
    assert_eq!(p.parts().0.len(), 28);
    assert_eq!(p.parts().1.len(), 17);
    assert_eq!(p.to_vec(), payload);
}

/// DC WRITE with the full 48-byte InfiniBand address vector and a GRH (facts sheet 1.8):
/// DS 6, two blocks, at index 7 of a 4-block ring: ctrl and the AV fill slot 3, the remote
/// address and data pointer start slot 0. Signaled with FM "small and fence" (0x80 | 0x08)
/// and DCI stream 0x0102.
#[test]
fn dc_full_av_write_wraps() {
    let block3 = hex("
        00 00 07 08 | 00 12 34 06 | 00 | 01 02 | 88 | 00 00 00 00
        00 00 00 00 56 23 ce af | 80 00 0a bc | 23 | 05 | 00 17
        00 00 00 00 | 00 00 00 00 00 00 | 10 | 40 | 40 11 23 45
        fe 80 00 00 00 00 00 00 00 00 00 00 00 00 00 01
    ");
    let block0 = hex("
        00 00 20 00 00 00 00 00 | de ad be ef | 00 00 00 00
        00 00 00 40 | 00 00 00 77 | 00 00 00 00 00 00 90 00
    ");
    let mut dgid = [0u8; 16];
    dgid[0] = 0xfe;
    dgid[1] = 0x80;
    dgid[15] = 0x01;
    let target = FullAddressVector {
        dct: 0xabc,
        dc_key: 0x5623_ceaf,
        link: LinkAddress::InfiniBand {
            lid: 0x17,
            sl: 3,
            static_rate: 2,
            source_path_bits: 5,
            force_loopback: false,
            grh: Some(Grh {
                sgid_index: 1,
                flow_label: 0x1_2345,
                traffic_class: 0x10,
                hop_limit: 0x40,
                dgid,
            }),
        },
    }
    .encode()
    .unwrap();
    let remote = RemoteAddress::new(0x2000_0000_0000, RKey(0xdead_beef));
    let wqe = RdmaWrite::new(target.at(remote))
        .sge(Sge::new(0x9000, 0x40, LKey(0x77)).unwrap())
        .signaled()
        .fence(FenceMode::SmallAndFence)
        .dci_stream(0x0102)
        .build()
        .unwrap();
    assert_eq!((wqe.ds(), wqe.wqebbs()), (6, 2));
    let ring = write(4, 7, 0x1234, &wqe);
    assert_ring_eq(&ring, &ring_with(4, &[(3 * 64, &block3), (0, &block0)]));

    let parsed = parse_wqe(&ring, WqeIndex(7), TransportKind::Dc).unwrap();
    assert_eq!(parsed.stream_id, 0x0102);
    assert_eq!(parsed.flags.fence, FenceMode::SmallAndFence);
    let Some(AnyDcTarget::Full(av)) = parsed.target else {
        panic!("{parsed:?}")
    };
    assert_eq!((av.dqp_dct.get(), av.rlid.get()), (0x8000_0abc, 0x17));
    let ParsedOp::Write { remote: r, .. } = parsed.op else {
        panic!("{parsed:?}")
    };
    assert_eq!(r, remote);
}

/// DC READ with a RoCE v2 full address vector (facts sheet 1.8): SL sits in bits 3:1 of
/// `stat_rate_sl`, `fl_mlid` is 0, the LID field holds the UDP source port, the MAC is at
/// offset 20 and the GRH-present bit 30 stays clear.
#[test]
fn dc_full_av_roce_read() {
    let expected = hex("
        00 00 00 10 | 00 00 99 06 | 00 | 00 00 | 00 | 00 00 00 00
        01 02 03 04 05 06 07 08 | 80 00 00 01 | 5a | 00 | c0 01
        00 00 00 00 | 0a 0b 0c 0d 0e 0f | 22 | 08 | 00 3f ff ff
        00 00 00 00 00 00 00 00 00 00 ff ff c0 a8 00 01
        00 00 00 00 00 00 40 00 | 00 00 00 02 | 00 00 00 00
        00 00 01 00 | 00 00 00 03 | 00 00 00 00 00 00 50 00
    ");
    let mut dgid = [0u8; 16];
    dgid[10] = 0xff;
    dgid[11] = 0xff;
    dgid[12..].copy_from_slice(&[192, 168, 0, 1]);
    let target = FullAddressVector {
        dct: 1,
        dc_key: 0x0102_0304_0506_0708,
        link: LinkAddress::Roce {
            udp_source_port: 0xc001,
            sl: 5,
            static_rate: 5,
            mac: [0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f],
            grh: Grh {
                sgid_index: 3,
                flow_label: 0xf_ffff,
                traffic_class: 0x22,
                hop_limit: 8,
                dgid,
            },
        },
    }
    .encode()
    .unwrap();
    let wqe = RdmaRead::new(target.at(RemoteAddress::new(0x4000, RKey(2))))
        .sge(Sge::new(0x5000, 0x100, LKey(3)).unwrap())
        .build()
        .unwrap();
    let ring = write(2, 0, 0x99, &wqe);
    assert_ring_eq(&ring, &ring_with(2, &[(0, &expected)]));
    let parsed = parse_wqe(&ring, WqeIndex(0), TransportKind::Dc).unwrap();
    assert_eq!(parsed.opcode, Opcode::RdmaRead);
}

/// 8-byte masked compare-swap on DC with the compact AV: DS 6 (ctrl, AV16, raddr, two
/// atomic octowords, data). At slot 1 of a 2-block ring the swap/compare octoword ends
/// the ring and the masks octoword starts it. Opcode 0x14 with opmod 0x09.
#[test]
fn dc_compact_masked_compare_swap_8_straddles_the_ring_end() {
    let block1 = hex("
        09 00 01 14 | 00 07 77 06 | 00 | 00 00 | 08 | 00 00 00 00
        00 00 00 00 56 23 ce af | 00 00 03 21 | 00 | 80 | 00 04
        00 00 00 00 00 10 00 00 | 00 00 00 42 | 00 00 00 00
        11 11 22 22 33 33 44 44 | 55 55 66 66 77 77 88 88
    ");
    let block0 = hex("
        ff ff 00 00 ff ff 00 00 | 00 00 00 00 ff ff ff ff
        00 00 00 08 | 00 00 00 99 | 00 00 00 00 00 00 30 00
    ");
    let target = CompactAddressVector {
        dct: 0x321,
        dc_key: 0x5623_ceaf,
        lid: 4,
        force_loopback: true,
        ..Default::default()
    }
    .encode()
    .unwrap();
    let wqe = Atomic::masked_compare_swap_64(
        target.at(RemoteAddress::new(0x10_0000, RKey(0x42))),
        LocalBuffer::new(0x3000, LKey(0x99)),
        0x1111_2222_3333_4444,
        0x5555_6666_7777_8888,
        0xffff_0000_ffff_0000,
        0x0000_0000_ffff_ffff,
    )
    .signaled()
    .build()
    .unwrap();
    assert_eq!((wqe.ds(), wqe.wqebbs()), (6, 2));
    let ring = write(2, 1, 0x777, &wqe);
    assert_ring_eq(&ring, &ring_with(2, &[(64, &block1), (0, &block0)]));

    let parsed = parse_wqe(&ring, WqeIndex(1), TransportKind::Dc).unwrap();
    assert_eq!(
        parsed.op,
        ParsedOp::Atomic {
            remote: RemoteAddress::new(0x10_0000, RKey(0x42)),
            op: AtomicOp::MaskedCompareSwap {
                width: AtomicWidth::Eight,
                swap: 0x1111_2222_3333_4444,
                compare: 0x5555_6666_7777_8888,
                swap_mask: 0xffff_0000_ffff_0000,
                compare_mask: 0x0000_0000_ffff_ffff,
            },
            result: match parsed.op {
                ParsedOp::Atomic { result, .. } => result,
                _ => unreachable!(),
            },
        }
    );
}

/// NOP: the control segment alone, DS 1. FM "fence" (2 << 5) and CE "always" (2 << 2):
/// `fm_ce_se` = 0x48. QPN 0xffffff (the largest).
#[test]
fn nop() {
    let expected = hex("00 00 05 00 | ff ff ff 01 | 00 | 00 00 | 48 | 00 00 00 00");
    let wqe = Nop::<Rc>::new()
        .fence(FenceMode::Fence)
        .signaled()
        .build()
        .unwrap();
    let ring = write(4, 5, 0xff_ffff, &wqe);
    assert_ring_eq(&ring, &ring_with(4, &[(64, &expected)]));
    let parsed = parse_wqe(&ring, WqeIndex(5), TransportKind::Rc).unwrap();
    assert_eq!(
        (parsed.opcode, parsed.qpn, parsed.ds),
        (Opcode::Nop, 0xff_ffff, 1)
    );
}

/// A NOP on a DC queue carries no address vector: still DS 1, on either AV form.
#[test]
fn nop_on_dc_has_no_address_vector() {
    let expected = hex("00 00 02 00 | 00 00 01 01 | 00 | 00 00 | 02 | 00 00 00 00");
    let wqe = Nop::<Dc<Full>>::new().solicited().build().unwrap();
    let ring = write(1, 2, 1, &wqe);
    assert_ring_eq(&ring, &ring_with(1, &[(0, &expected)]));
    let parsed = parse_wqe(&ring, WqeIndex(2), TransportKind::Dc).unwrap();
    assert_eq!((parsed.target, parsed.ds), (None, 1));
}

/// DUMP (opcode 0x23): ctrl and one data pointer, DS 2, with the fence NVSHMEM uses for its
/// consistency DUMP. Index 0x8000 in a one-block ring.
#[test]
fn dump() {
    let expected = hex("
        00 80 00 23 | 00 00 10 02 | 00 | 00 00 | 48 | 00 00 00 00
        00 00 00 01 | 00 00 10 00 | 00 00 00 00 00 00 70 00
    ");
    let wqe = Dump::<Rc>::new(Sge::new(0x7000, 1, LKey(0x1000)).unwrap())
        .fence(FenceMode::Fence)
        .signaled()
        .build()
        .unwrap();
    let ring = write(1, 0x8000, 0x10, &wqe);
    assert_ring_eq(&ring, &ring_with(1, &[(0, &expected)]));
    let parsed = parse_wqe(&ring, WqeIndex(0x8000), TransportKind::Rc).unwrap();
    assert_eq!(parsed.opcode, Opcode::Dump);
}

/// The RC atomics of table 1.7 (DS 4): compare-swap puts swap first and compare second;
/// fetch-add leaves the compare word zero; the 4-byte masked forms carry opmod 0x08 and a
/// 4-byte result pointer; the 8-byte masked fetch-add opmod 0x09.
#[test]
fn rc_atomics() {
    let remote = RemoteAddress::new(0x8000, RKey(0x0102_0304));
    let result = LocalBuffer::new(0xa000, LKey(0x0506_0708));
    let raddr = "00 00 00 00 00 00 80 00 | 01 02 03 04 | 00 00 00 00";
    let result8 = "00 00 00 08 | 05 06 07 08 | 00 00 00 00 00 00 a0 00";
    let result4 = "00 00 00 04 | 05 06 07 08 | 00 00 00 00 00 00 a0 00";
    let cases: Vec<(Result<Vec<u8>, WqeError>, String)> = vec![
        (
            Atomic::compare_swap(remote, result, 0xaaaa, 0xbbbb)
                .build()
                .map(|w| write(1, 0, 0x33, &w)),
            format!(
                "00 00 00 11 | 00 00 33 04 | 00 00 00 00 | 00 00 00 00 {raddr}
                 00 00 00 00 00 00 bb bb | 00 00 00 00 00 00 aa aa {result8}"
            ),
        ),
        (
            Atomic::fetch_add(remote, result, 0x0123_4567_89ab_cdef)
                .build()
                .map(|w| write(1, 0, 0x33, &w)),
            format!(
                "00 00 00 12 | 00 00 33 04 | 00 00 00 00 | 00 00 00 00 {raddr}
                 01 23 45 67 89 ab cd ef | 00 00 00 00 00 00 00 00 {result8}"
            ),
        ),
        (
            Atomic::masked_fetch_add_32(remote, result, 0x1122_3344, 0x8000_0000)
                .build()
                .map(|w| write(1, 0, 0x33, &w)),
            format!(
                "08 00 00 15 | 00 00 33 04 | 00 00 00 00 | 00 00 00 00 {raddr}
                 11 22 33 44 | 80 00 00 00 | 00 00 00 00 00 00 00 00 {result4}"
            ),
        ),
        (
            Atomic::masked_compare_swap_32(remote, result, 1, 2, 3, 4)
                .build()
                .map(|w| write(1, 0, 0x33, &w)),
            format!(
                "08 00 00 14 | 00 00 33 04 | 00 00 00 00 | 00 00 00 00 {raddr}
                 00 00 00 01 | 00 00 00 02 | 00 00 00 03 | 00 00 00 04 {result4}"
            ),
        ),
        (
            Atomic::masked_fetch_add_64(remote, result, 0x10, 0xff00)
                .build()
                .map(|w| write(1, 0, 0x33, &w)),
            format!(
                "09 00 00 15 | 00 00 33 04 | 00 00 00 00 | 00 00 00 00 {raddr}
                 00 00 00 00 00 00 00 10 | 00 00 00 00 00 00 ff 00 {result8}"
            ),
        ),
    ];
    for (i, (ring, expected)) in cases.into_iter().enumerate() {
        let ring = ring.unwrap_or_else(|e| panic!("atomic {i}: {e}"));
        let expected = hex(&expected);
        assert_eq!(expected.len(), 64, "fixture {i}");
        assert_ring_eq(&ring, &ring_with(1, &[(0, &expected)]));
        parse_wqe(&ring, WqeIndex(0), TransportKind::Rc)
            .unwrap_or_else(|e| panic!("atomic {i}: {e}"));
    }
}

/// RC READ into two scatter entries totalling exactly 2 GiB (the per-WQE limit; DS 4)
/// and a WRITE without data (DS 2).
#[test]
fn rc_read_two_sges_and_empty_write() {
    let read = hex("
        00 00 01 10 | 00 00 05 04 | 00 | 00 00 | 0c | 00 00 00 00
        00 00 00 00 00 01 00 00 | 00 00 00 0a | 00 00 00 00
        00 00 00 10 | 00 00 00 0b | 00 00 00 00 00 00 11 00
        7f ff ff f0 | 00 00 00 0c | 00 00 00 00 00 00 22 00
    ");
    let empty = hex("
        00 00 02 08 | 00 00 05 02 | 00 | 00 00 | 00 | 00 00 00 00
        00 00 00 00 00 02 00 00 | 00 00 00 0d | 00 00 00 00
    ");
    let wqe = RdmaRead::new(RemoteAddress::new(0x1_0000, RKey(0xa)))
        .gather([
            Sge::new(0x1100, 0x10, LKey(0xb)).unwrap(),
            Sge::new(0x2200, 0x7fff_fff0, LKey(0xc)).unwrap(),
        ])
        .completion(CompletionMode::AlwaysWithEvent)
        .build()
        .unwrap();
    let mut memory = vec![FILL; 4 * 64];
    let mut ring = SendRing::new(&mut memory, WqeLimits::default()).unwrap();
    let qpn = Qpn::new(5).unwrap();
    ring.write(WqeIndex(1), qpn, &wqe).unwrap();
    let write = RdmaWrite::new(RemoteAddress::new(0x2_0000, RKey(0xd)))
        .without_data()
        .build()
        .unwrap();
    ring.write(WqeIndex(2), qpn, &write).unwrap();
    assert_ring_eq(&memory, &ring_with(4, &[(64, &read), (128, &empty)]));
    let parsed = parse_wqe(&memory, WqeIndex(2), TransportKind::Rc).unwrap();
    assert!(matches!(
        parsed.op,
        ParsedOp::Write {
            data: ParsedData::Empty,
            ..
        }
    ));
}

/// Hand-written bytes parse to exactly what they say, with no encoder involved: a DC
/// compact-AV 4-byte masked fetch-add (DS 5, two blocks) wrapping in a 2-block ring.
#[test]
fn hand_written_bytes_parse() {
    let block1 = hex("
        08 00 03 15 | 00 00 0a 05 | 00 | 00 07 | 20 | 00 00 00 00
        00 00 00 00 00 00 00 2a | 00 00 00 05 | 31 | 7f | ff fe
        00 00 00 00 00 00 01 04 | 00 00 00 0b | 00 00 00 00
        00 00 00 01 | ff ff 00 00 | 00 00 00 00 00 00 00 00
    ");
    let block0 = hex("00 00 00 04 | 00 00 00 0c | 00 00 00 00 00 00 02 00");
    let ring = ring_with(2, &[(64, &block1), (0, &block0)]);
    let parsed = parse_wqe(&ring, WqeIndex(3), TransportKind::Dc).unwrap();
    assert_eq!(parsed.opcode, Opcode::AtomicMaskedFetchAdd);
    assert_eq!((parsed.opmod, parsed.qpn, parsed.ds), (8, 0xa, 5));
    assert_eq!(parsed.stream_id, 7);
    assert_eq!(parsed.flags.fence, FenceMode::InitiatorSmall);
    let Some(AnyDcTarget::Compact(av)) = parsed.target else {
        panic!("{parsed:?}")
    };
    assert_eq!(
        (
            av.dc_key.get(),
            av.dqp_dct.get(),
            av.stat_rate_sl,
            av.fl_mlid,
            av.rlid.get()
        ),
        (0x2a, 5, 0x31, 0x7f, 0xfffe)
    );
    let ParsedOp::Atomic { remote, op, result } = parsed.op else {
        panic!("{parsed:?}")
    };
    assert_eq!(remote, RemoteAddress::new(0x104, RKey(0xb)));
    assert_eq!(
        op,
        AtomicOp::MaskedFetchAdd {
            width: AtomicWidth::Four,
            add: 1,
            field_boundary: 0xffff_0000,
        }
    );
    assert_eq!(
        (
            result.byte_count.get(),
            result.lkey.get(),
            result.addr.get()
        ),
        (4, 0xc, 0x200)
    );
    // And building the same WQE writes the same bytes (the marker remains elsewhere).
    let target = CompactAddressVector {
        dct: 5,
        dc_key: 0x2a,
        lid: 0xfffe,
        sl: 1,
        static_rate: 3,
        source_path_bits: 0x7f,
        force_loopback: false,
    }
    .encode()
    .unwrap();
    let wqe = Atomic::masked_fetch_add_32(
        target.at(RemoteAddress::new(0x104, RKey(0xb))),
        LocalBuffer::new(0x200, LKey(0xc)),
        1,
        0xffff_0000,
    )
    .fence(FenceMode::InitiatorSmall)
    .dci_stream(7)
    .build()
    .unwrap();
    assert_ring_eq(&write(2, 3, 0xa, &wqe), &ring);
}
