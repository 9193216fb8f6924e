//! Every way a WQE can be refused, with the exact typed error: building (values out of
//! range, lengths, alignment, combinations the erased form allows to be said), writing
//! (queue limits, ring sizes; a failed write touches nothing), and parsing crafted bytes.

use ibgda::wqe::*;

const FILL: u8 = 0x5a;

fn remote() -> RemoteAddress {
    RemoteAddress::new(0x10_0000, RKey(0x42))
}

fn result() -> LocalBuffer {
    LocalBuffer::new(0x2000, LKey(7))
}

fn sge(len: u32) -> Sge {
    Sge::new(0x1000, len, LKey(3)).unwrap()
}

fn rc() -> AnyAddress {
    AnyAddress {
        target: None,
        remote: remote(),
    }
}

fn compact() -> DcTarget<Compact> {
    CompactAddressVector {
        dct: 0x99,
        dc_key: 1,
        ..Default::default()
    }
    .encode()
    .unwrap()
}

fn full_ib() -> DcTarget<Full> {
    FullAddressVector {
        dct: 0x99,
        dc_key: 1,
        link: LinkAddress::InfiniBand {
            lid: 1,
            sl: 0,
            static_rate: 0,
            source_path_bits: 0,
            force_loopback: false,
            grh: None,
        },
    }
    .encode()
    .unwrap()
}

// ---------------------------------------------------------------------------------------
// Values.

#[test]
fn queue_numbers_over_24_bits() {
    assert_eq!(Qpn::new(0xff_ffff).map(Qpn::get), Ok(0xff_ffff));
    for value in [0x100_0000, 0x8000_0000, u32::MAX] {
        let expected = WqeError::QpnOutOfRange {
            value,
            max: 0xff_ffff,
        };
        assert_eq!(Qpn::new(value), Err(expected));
        let c = CompactAddressVector {
            dct: value,
            ..Default::default()
        };
        assert_eq!(c.encode(), Err(expected));
        let f = FullAddressVector {
            dct: value,
            dc_key: 0,
            link: LinkAddress::InfiniBand {
                lid: 0,
                sl: 0,
                static_rate: 0,
                source_path_bits: 0,
                force_loopback: false,
                grh: None,
            },
        };
        assert_eq!(f.encode(), Err(expected));
    }
}

#[test]
fn scatter_gather_entries() {
    assert_eq!(
        Sge::new(0x1000, 0, LKey(1)),
        Err(WqeError::ZeroLength {
            what: "scatter/gather entry"
        })
    );
    assert!(Sge::new(0x1000, 0x7fff_ffff, LKey(1)).is_ok());
    for len in [0x8000_0000, 0x8000_0001, u32::MAX] {
        assert_eq!(
            Sge::new(0x1000, len, LKey(1)),
            Err(WqeError::TransferTooLong {
                len: len.into(),
                max: 0x7fff_ffff
            })
        );
    }
}

#[test]
fn total_transfer_over_2_gib() {
    // Exactly 2 GiB is allowed...
    let ok = RdmaWrite::new(remote())
        .gather([sge(0x7fff_ffff), sge(1)])
        .build();
    assert!(ok.is_ok(), "{ok:?}");
    // ... one byte more is not, on WRITE and READ, typed and erased.
    let expected = WqeError::TransferTooLong {
        len: 0x8000_0001,
        max: 0x8000_0000,
    };
    let sges = [sge(0x7fff_ffff), sge(2)];
    assert_eq!(
        RdmaWrite::new(remote()).gather(sges).build().unwrap_err(),
        expected
    );
    assert_eq!(
        RdmaRead::new(remote()).gather(sges).build().unwrap_err(),
        expected
    );
    assert_eq!(
        RdmaRead::new(rc())
            .any_data(AnyData::Sges(&sges))
            .build()
            .unwrap_err(),
        expected
    );
    let many = [sge(0x7fff_ffff); MAX_GATHER];
    assert_eq!(
        RdmaWrite::new(remote()).gather(many).build().unwrap_err(),
        WqeError::TransferTooLong {
            len: 0x7fff_ffff * MAX_GATHER as u64,
            max: 0x8000_0000
        }
    );
}

#[test]
fn erased_entry_lists_out_of_range() {
    let too_many = [sge(1); MAX_GATHER + 1];
    assert_eq!(
        RdmaWrite::new(rc())
            .any_data(AnyData::Sges(&too_many))
            .build()
            .unwrap_err(),
        WqeError::FieldOutOfRange {
            field: "scatter/gather entries",
            value: MAX_GATHER as u64 + 1,
            max: MAX_GATHER as u64,
        }
    );
    assert!(matches!(
        RdmaRead::new(rc()).any_data(AnyData::Sges(&[])).build(),
        Err(WqeError::InvalidCombination { .. })
    ));
}

#[test]
fn inline_over_the_format_maximum() {
    // 63 octowords hold 1008 bytes, less the 4-byte inline header: 1004.
    let payload = vec![0u8; 1005];
    assert_eq!(
        RdmaWrite::new(remote())
            .inline(&payload)
            .build()
            .unwrap_err(),
        WqeError::InlineTooLong {
            len: 1005,
            max: 1004
        }
    );
    // Under the inline ceiling but over DS once ctrl and raddr count: 61 * 16 - 4 = 972
    // is the largest RC inline WRITE.
    assert_eq!(
        RdmaWrite::new(remote())
            .inline(&payload[..972])
            .build()
            .map(|w| w.ds()),
        Ok(63)
    );
    assert_eq!(
        RdmaWrite::new(remote())
            .inline(&payload[..973])
            .build()
            .unwrap_err(),
        WqeError::TooManyOctowords { ds: 64, max: 63 }
    );
    // With the full AV three octowords fewer: 58 * 16 - 4 = 924.
    let to = full_ib().at(remote());
    assert_eq!(
        RdmaWrite::new(to)
            .inline(&payload[..924])
            .build()
            .map(|w| w.ds()),
        Ok(63)
    );
    assert_eq!(
        RdmaWrite::new(to)
            .inline(&payload[..925])
            .build()
            .unwrap_err(),
        WqeError::TooManyOctowords { ds: 64, max: 63 }
    );
}

#[test]
fn misaligned_atomics() {
    for addr in [0x1001u64, 0x1002, 0x1004, 0x1007] {
        let to = RemoteAddress::new(addr, RKey(1));
        assert_eq!(
            Atomic::compare_swap(to, result(), 0, 1)
                .build()
                .unwrap_err(),
            WqeError::MisalignedAtomic {
                opcode: Opcode::AtomicCompareSwap,
                addr,
                align: 8
            }
        );
        assert_eq!(
            Atomic::fetch_add(to, result(), 1).build().unwrap_err(),
            WqeError::MisalignedAtomic {
                opcode: Opcode::AtomicFetchAdd,
                addr,
                align: 8
            }
        );
        assert_eq!(
            Atomic::masked_compare_swap_64(to, result(), 0, 0, 0, 0)
                .build()
                .unwrap_err(),
            WqeError::MisalignedAtomic {
                opcode: Opcode::AtomicMaskedCompareSwap,
                addr,
                align: 8
            }
        );
        assert_eq!(
            Atomic::masked_fetch_add_64(to, result(), 0, 0)
                .build()
                .unwrap_err(),
            WqeError::MisalignedAtomic {
                opcode: Opcode::AtomicMaskedFetchAdd,
                addr,
                align: 8
            }
        );
        // 4-byte operands need 4-byte alignment only.
        let four = Atomic::masked_fetch_add_32(to, result(), 1, 0).build();
        if addr % 4 == 0 {
            assert!(four.is_ok());
        } else {
            assert_eq!(
                four.unwrap_err(),
                WqeError::MisalignedAtomic {
                    opcode: Opcode::AtomicMaskedFetchAdd,
                    addr,
                    align: 4
                }
            );
        }
        let four = Atomic::masked_compare_swap_32(to, result(), 1, 0, 0, 0).build();
        assert_eq!(four.is_ok(), addr % 4 == 0);
    }
}

#[test]
fn four_byte_operands_too_wide_in_the_erased_form() {
    let wide = 1u64 << 32;
    let cases = [
        (
            AtomicOp::MaskedCompareSwap {
                width: AtomicWidth::Four,
                swap: wide,
                compare: 0,
                swap_mask: 0,
                compare_mask: 0,
            },
            "swap",
        ),
        (
            AtomicOp::MaskedCompareSwap {
                width: AtomicWidth::Four,
                swap: 0,
                compare: u64::MAX,
                swap_mask: 0,
                compare_mask: 0,
            },
            "compare",
        ),
        (
            AtomicOp::MaskedCompareSwap {
                width: AtomicWidth::Four,
                swap: 0,
                compare: 0,
                swap_mask: wide,
                compare_mask: 0,
            },
            "swap_mask",
        ),
        (
            AtomicOp::MaskedCompareSwap {
                width: AtomicWidth::Four,
                swap: 0,
                compare: 0,
                swap_mask: 0,
                compare_mask: wide,
            },
            "compare_mask",
        ),
        (
            AtomicOp::MaskedFetchAdd {
                width: AtomicWidth::Four,
                add: wide,
                field_boundary: 0,
            },
            "add",
        ),
        (
            AtomicOp::MaskedFetchAdd {
                width: AtomicWidth::Four,
                add: 0,
                field_boundary: wide,
            },
            "field_boundary",
        ),
    ];
    for (op, what) in cases {
        let value = match op {
            AtomicOp::MaskedCompareSwap {
                swap,
                compare,
                swap_mask,
                compare_mask,
                ..
            } => swap | compare | swap_mask | compare_mask,
            AtomicOp::MaskedFetchAdd {
                add,
                field_boundary,
                ..
            } => add | field_boundary,
            _ => unreachable!(),
        };
        let expected = WqeError::OperandTooWide {
            what,
            value,
            max: u32::MAX.into(),
        };
        assert_eq!(
            Atomic::any(rc(), result(), op).build().unwrap_err(),
            expected
        );
        let erased = AnyWqe {
            target: None,
            flags: ControlFlags::default(),
            stream_id: 0,
            op: AnyOperation::Atomic {
                remote: remote(),
                result: result(),
                op,
            },
        };
        assert_eq!(erased.build().unwrap_err(), expected);
    }
    // The same values are fine at 8 bytes.
    let eight = AtomicOp::MaskedFetchAdd {
        width: AtomicWidth::Eight,
        add: wide,
        field_boundary: wide,
    };
    assert!(Atomic::any(rc(), result(), eight).build().is_ok());
}

#[test]
fn address_vector_fields_out_of_range() {
    let field =
        |field: &'static str, value: u64, max: u64| WqeError::FieldOutOfRange { field, value, max };
    let c = CompactAddressVector::default();
    assert_eq!(
        CompactAddressVector { sl: 16, ..c }.encode(),
        Err(field("sl", 16, 15))
    );
    assert_eq!(
        CompactAddressVector {
            static_rate: 0xff,
            ..c
        }
        .encode(),
        Err(field("static_rate", 0xff, 15))
    );
    assert_eq!(
        CompactAddressVector {
            source_path_bits: 0x80,
            ..c
        }
        .encode(),
        Err(field("source_path_bits", 0x80, 0x7f))
    );

    let ib = |sl, static_rate, source_path_bits, flow_label| FullAddressVector {
        dct: 1,
        dc_key: 0,
        link: LinkAddress::InfiniBand {
            lid: 1,
            sl,
            static_rate,
            source_path_bits,
            force_loopback: false,
            grh: Some(Grh {
                flow_label,
                ..Default::default()
            }),
        },
    };
    assert!(ib(15, 15, 0x7f, 0xf_ffff).encode().is_ok());
    assert_eq!(ib(16, 0, 0, 0).encode(), Err(field("sl", 16, 15)));
    assert_eq!(ib(0, 16, 0, 0).encode(), Err(field("static_rate", 16, 15)));
    assert_eq!(
        ib(0, 0, 0x80, 0).encode(),
        Err(field("source_path_bits", 0x80, 0x7f))
    );
    assert_eq!(
        ib(0, 0, 0, 0x10_0000).encode(),
        Err(field("flow_label", 0x10_0000, 0xf_ffff))
    );

    let roce = |sl, static_rate, flow_label| FullAddressVector {
        dct: 1,
        dc_key: 0,
        link: LinkAddress::Roce {
            udp_source_port: 0xc000,
            sl,
            static_rate,
            mac: [0; 6],
            grh: Grh {
                flow_label,
                ..Default::default()
            },
        },
    };
    assert!(roce(7, 15, 0xf_ffff).encode().is_ok());
    // SL has 3 bits on RoCE.
    assert_eq!(roce(8, 0, 0).encode(), Err(field("sl", 8, 7)));
    assert_eq!(roce(0, 16, 0).encode(), Err(field("static_rate", 16, 15)));
    assert_eq!(
        roce(0, 0, u32::MAX).encode(),
        Err(field("flow_label", u32::MAX.into(), 0xf_ffff))
    );
}

#[test]
fn erased_combinations_the_typed_builders_rule_out() {
    // READ with inline data, even empty.
    for payload in [&[1u8, 2, 3][..], &[]] {
        assert!(matches!(
            RdmaRead::new(rc())
                .any_data(AnyData::Inline(payload))
                .build(),
            Err(WqeError::InvalidCombination { .. })
        ));
        let erased = AnyWqe {
            target: None,
            flags: ControlFlags::default(),
            stream_id: 0,
            op: AnyOperation::Read {
                remote: remote(),
                data: AnyData::Inline(payload),
            },
        };
        assert!(matches!(
            erased.build(),
            Err(WqeError::InvalidCombination { .. })
        ));
    }
    // A DCI stream id without a DC target, or on a WQE that addresses nothing.
    let nop = AnyWqe {
        target: Some(compact().into()),
        flags: ControlFlags::default(),
        stream_id: 1,
        op: AnyOperation::Nop,
    };
    assert!(matches!(
        nop.build(),
        Err(WqeError::InvalidCombination { .. })
    ));
    let write = AnyWqe {
        target: None,
        flags: ControlFlags::default(),
        stream_id: 1,
        op: AnyOperation::Write {
            remote: remote(),
            imm: None,
            data: AnyData::Empty,
        },
    };
    assert!(matches!(
        write.build(),
        Err(WqeError::InvalidCombination { .. })
    ));
    assert!(AnyWqe {
        target: Some(compact().into()),
        ..write
    }
    .build()
    .is_ok());
}

// ---------------------------------------------------------------------------------------
// Rings and limits.

#[test]
fn ring_sizes() {
    let mut memory = vec![0u8; 3 * 64];
    assert_eq!(
        SendRing::new(&mut memory, WqeLimits::default()).err(),
        Some(WqeError::RingSizeNotPowerOfTwo { wqebbs: 3 })
    );
    assert_eq!(
        RingSize::new(96),
        Err(WqeError::RingSizeNotPowerOfTwo { wqebbs: 96 })
    );
    let out_of_range = |wqebbs| WqeError::RingSizeOutOfRange {
        wqebbs,
        min: 1,
        max: 1 << 15,
    };
    assert_eq!(
        SendRing::new(&mut [], WqeLimits::default()).err(),
        Some(out_of_range(0))
    );
    assert_eq!(RingSize::new(0), Err(out_of_range(0)));
    assert_eq!(RingSize::new(1 << 16), Err(out_of_range(1 << 16)));
    assert_eq!(RingSize::new(usize::MAX), Err(out_of_range(usize::MAX)));
    assert_eq!(RingSize::new(1 << 15).map(RingSize::wqebbs), Ok(1 << 15));
    let mut huge = vec![0u8; (1 << 16) * 64];
    assert_eq!(
        SendRing::new(&mut huge, WqeLimits::default()).err(),
        Some(out_of_range(1 << 16))
    );
    for len in [1usize, 63, 65, 100, 127, 4097] {
        let mut memory = vec![0u8; len];
        assert_eq!(
            SendRing::new(&mut memory, WqeLimits::default()).err(),
            Some(WqeError::RingBytesMismatch {
                len,
                expected: len.div_ceil(64) * 64
            }),
            "{len} bytes"
        );
    }
}

/// `RingSize::for_bytes` is a public constructor: it refuses any length with a typed error,
/// including lengths whose next multiple of 64 does not exist.
#[test]
fn ring_size_for_any_length_is_a_typed_error_not_a_panic() {
    for len in [
        usize::MAX,
        usize::MAX - 1,
        usize::MAX - 62,
        isize::MAX as usize,
    ] {
        assert!(
            matches!(
                RingSize::for_bytes(len),
                Err(WqeError::RingBytesMismatch { len: l, .. }) if l == len
            ),
            "{len:#x}"
        );
    }
    assert!(matches!(
        RingSize::for_bytes(usize::MAX - 63),
        Err(WqeError::RingSizeOutOfRange { .. })
    ));
}

/// Writes `wqe` into a ring that already holds a NOP at index 0 and returns the error,
/// asserting the ring is byte-for-byte what it was before.
fn failed_write<S: WqeSpec>(
    ring_wqebbs: usize,
    limits: WqeLimits,
    index: u16,
    wqe: &Wqe<S>,
) -> WqeError {
    let mut memory = vec![FILL; ring_wqebbs * 64];
    let mut ring = SendRing::new(&mut memory, limits).unwrap();
    let qpn = Qpn::new(0x10).unwrap();
    ring.write(WqeIndex(0), qpn, &Nop::<Rc>::new().build().unwrap())
        .unwrap();
    let before = ring.as_bytes().to_vec();
    let err = ring
        .write(WqeIndex(index), qpn, wqe)
        .expect_err("the write must fail");
    assert_eq!(memory, before, "a failed write changed the ring");
    err
}

#[test]
fn inline_over_the_queue_maximum() {
    let limits = WqeLimits {
        max_inline: 12,
        max_wqebbs: 16,
    };
    let payload = [7u8; 13];
    let wqe = RdmaWrite::new(remote()).inline(&payload).build().unwrap();
    assert_eq!(
        failed_write(4, limits, 1, &wqe),
        WqeError::InlineTooLong { len: 13, max: 12 }
    );
    // 12 bytes fit.
    let mut memory = vec![0u8; 4 * 64];
    let mut ring = SendRing::new(&mut memory, limits).unwrap();
    let wqe = RdmaWrite::new(remote())
        .inline(&payload[..12])
        .build()
        .unwrap();
    assert_eq!(ring.write(WqeIndex(1), Qpn::new(1).unwrap(), &wqe), Ok(1));
    // The erased form is checked the same way.
    let erased = RdmaWrite::new(rc())
        .any_data(AnyData::Inline(&payload))
        .build()
        .unwrap();
    assert_eq!(
        failed_write(4, limits, 1, &erased),
        WqeError::InlineTooLong { len: 13, max: 12 }
    );
}

#[test]
fn wqe_over_the_queue_maximum_size() {
    let limits = WqeLimits {
        max_inline: usize::MAX,
        max_wqebbs: 1,
    };
    let wqe = RdmaWrite::new(full_ib().at(remote()))
        .sge(sge(8))
        .build()
        .unwrap();
    assert_eq!(wqe.wqebbs(), 2);
    assert_eq!(
        failed_write(4, limits, 1, &wqe),
        WqeError::WqeTooLarge { wqebbs: 2, max: 1 }
    );
    // 16 WQEBBs (DS 61..=63) pass the format's limit; a queue may allow fewer.
    let payload = [0u8; 972];
    let big = RdmaWrite::new(remote()).inline(&payload).build().unwrap();
    assert_eq!(big.wqebbs(), 16);
    assert_eq!(
        failed_write(
            32,
            WqeLimits {
                max_inline: usize::MAX,
                max_wqebbs: 15
            },
            3,
            &big
        ),
        WqeError::WqeTooLarge {
            wqebbs: 16,
            max: 15
        }
    );
}

#[test]
fn ring_too_small_for_the_wqe() {
    let wqe = Atomic::masked_compare_swap_64(compact().at(remote()), result(), 1, 2, 3, 4)
        .build()
        .unwrap();
    assert_eq!(wqe.wqebbs(), 2);
    assert_eq!(
        failed_write(1, WqeLimits::default(), 0, &wqe),
        WqeError::RingTooSmall {
            ring_wqebbs: 1,
            wqe_wqebbs: 2
        }
    );
    let payload = [0u8; 972];
    let big = RdmaWrite::new(remote()).inline(&payload).build().unwrap();
    assert_eq!(
        failed_write(8, WqeLimits::default(), 5, &big),
        WqeError::RingTooSmall {
            ring_wqebbs: 8,
            wqe_wqebbs: 16
        }
    );
}

// ---------------------------------------------------------------------------------------
// The parser on crafted bytes.

/// A ring of `wqebbs` blocks holding an RC WRITE of one entry (DS 3) at `index`, signaled.
fn rc_write_ring(wqebbs: usize, index: u16) -> Vec<u8> {
    let mut memory = vec![FILL; wqebbs * 64];
    let mut ring = SendRing::new(&mut memory, WqeLimits::default()).unwrap();
    let wqe = RdmaWrite::new(remote())
        .sge(sge(64))
        .signaled()
        .build()
        .unwrap();
    ring.write(WqeIndex(index), Qpn::new(0x123).unwrap(), &wqe)
        .unwrap();
    memory
}

/// Writes `wqe` at index 0 of a fresh `wqebbs`-block ring.
fn ring_of<S: WqeSpec>(wqebbs: usize, wqe: &Wqe<S>) -> Vec<u8> {
    let mut memory = vec![FILL; wqebbs * 64];
    SendRing::new(&mut memory, WqeLimits::default())
        .unwrap()
        .write(WqeIndex(0), Qpn::new(0x123).unwrap(), wqe)
        .unwrap();
    memory
}

/// Overwrites the control segment's opcode byte, opmod byte or DS at index 0.
fn set_opcode(ring: &mut [u8], opcode: u8) {
    ring[3] = opcode;
}
fn set_opmod(ring: &mut [u8], opmod: u8) {
    ring[0] = opmod;
}
fn set_ds(ring: &mut [u8], ds: u8) {
    ring[7] = (ring[7] & 0xc0) | ds;
}

fn parse(ring: &[u8], index: u16, transport: TransportKind) -> ParseError {
    parse_wqe(ring, WqeIndex(index), transport).expect_err("crafted bytes must be refused")
}

#[test]
fn invalid_rings() {
    for len in [0usize, 16, 63, 96, 3 * 64, 100] {
        let ring = vec![0u8; len];
        assert_eq!(
            parse(&ring, 0, TransportKind::Rc),
            ParseError::InvalidRing { len }
        );
    }
}

#[test]
fn unknown_and_unsupported_opcodes() {
    // Table 1.3: what mlx5 defines, and what of it this crate executes.
    let built_here = [0x00, 0x08, 0x09, 0x10, 0x11, 0x12, 0x14, 0x15, 0x23];
    let defined_elsewhere = [
        0x01, 0x0a, 0x0b, 0x0e, 0x0f, 0x19, 0x1b, 0x1f, 0x20, 0x25, 0x28, 0x2c, 0x2f,
    ];
    for byte in 0..=u8::MAX {
        let mut ring = rc_write_ring(1, 0);
        set_opcode(&mut ring, byte);
        let got = parse_wqe(&ring, WqeIndex(0), TransportKind::Rc);
        if built_here.contains(&byte) {
            assert!(
                !matches!(
                    got,
                    Err(ParseError::UnknownOpcode { .. } | ParseError::UnsupportedOpcode { .. })
                ),
                "{byte:#x}: {got:?}"
            );
        } else if defined_elsewhere.contains(&byte) {
            assert_eq!(
                got,
                Err(ParseError::UnsupportedOpcode {
                    opcode: Opcode::from_byte(byte).unwrap()
                }),
                "{byte:#x}"
            );
        } else {
            assert_eq!(
                got,
                Err(ParseError::UnknownOpcode { opcode: byte }),
                "{byte:#x}"
            );
        }
    }
    let mut ring = rc_write_ring(1, 0);
    set_opcode(&mut ring, 0x0a);
    assert_eq!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::UnsupportedOpcode {
            opcode: Opcode::Send
        }
    );
}

#[test]
fn index_mismatch() {
    // A WQE written at index 5 sits in slot 5 of an 8-block ring; reading slot 5 as index
    // 13 (the next pass) or 0x10005 & 0xffff = 5 + 0x8000 finds a stale WQE.
    let ring = rc_write_ring(8, 5);
    assert!(parse_wqe(&ring, WqeIndex(5), TransportKind::Rc).is_ok());
    for asked in [13u16, 0x8005, 0xfffd] {
        assert_eq!(
            parse(&ring, asked, TransportKind::Rc),
            ParseError::IndexMismatch {
                expected: asked,
                found: 5
            }
        );
    }
}

#[test]
fn ds_zero_and_larger_than_the_ring() {
    let mut ring = rc_write_ring(1, 0);
    set_ds(&mut ring, 0);
    assert_eq!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::TooShort {
            opcode: Opcode::RdmaWrite,
            ds: 0,
            min: 1
        }
    );
    // One block holds 4 octowords.
    set_ds(&mut ring, 5);
    assert_eq!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::LargerThanRing {
            ds: 5,
            ring_octowords: 4
        }
    );
    let mut ring = rc_write_ring(2, 0);
    set_ds(&mut ring, 9);
    assert_eq!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::LargerThanRing {
            ds: 9,
            ring_octowords: 8
        }
    );
    set_ds(&mut ring, 63);
    assert_eq!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::LargerThanRing {
            ds: 63,
            ring_octowords: 8
        }
    );
}

#[test]
fn reserved_bits_of_the_control_segment() {
    // fm_ce_se bits 4 and 0, and fence modes 5..=7.
    for byte in [0x01u8, 0x10, 0x11, 0x09, 0xa0, 0xc0, 0xe0, 0xe8] {
        let mut ring = rc_write_ring(1, 0);
        ring[11] = byte;
        assert!(
            matches!(
                parse(&ring, 0, TransportKind::Rc),
                ParseError::ReservedBits { value, .. } if value == u32::from(byte)
            ),
            "fm_ce_se {byte:#x}"
        );
    }
    // qpn_ds bits 7:6.
    for bits in [0x40u8, 0x80, 0xc0] {
        let mut ring = rc_write_ring(1, 0);
        ring[7] |= bits;
        assert!(
            matches!(
                parse(&ring, 0, TransportKind::Rc),
                ParseError::ReservedBits { value, .. } if value == u32::from(bits)
            ),
            "qpn_ds {bits:#x}"
        );
    }
}

#[test]
fn bad_opcode_modifiers() {
    for opmod in [0x01u8, 0x08, 0x09, 0xff] {
        let mut ring = rc_write_ring(1, 0);
        set_opmod(&mut ring, opmod);
        assert_eq!(
            parse(&ring, 0, TransportKind::Rc),
            ParseError::BadOpmod {
                opcode: Opcode::RdmaWrite,
                opmod
            }
        );
    }
    // Standard atomics take no modifier; masked atomics need 0x08 or 0x09.
    let cas = Atomic::compare_swap(remote(), result(), 0, 1)
        .build()
        .unwrap();
    let mut ring = ring_of(1, &cas);
    set_opmod(&mut ring, 0x09);
    assert_eq!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::BadOpmod {
            opcode: Opcode::AtomicCompareSwap,
            opmod: 0x09
        }
    );
    let masked = Atomic::masked_fetch_add_64(remote(), result(), 1, 0)
        .build()
        .unwrap();
    for opmod in [0x00u8, 0x07, 0x0a, 0x88] {
        let mut ring = ring_of(1, &masked);
        set_opmod(&mut ring, opmod);
        assert_eq!(
            parse(&ring, 0, TransportKind::Rc),
            ParseError::BadOpmod {
                opcode: Opcode::AtomicMaskedFetchAdd,
                opmod
            }
        );
    }
}

#[test]
fn inline_length_not_matching_ds() {
    let payload = [1u8; 13];
    let wqe = RdmaWrite::new(remote()).inline(&payload).build().unwrap();
    assert_eq!(wqe.ds(), 4);
    let ring = ring_of(2, &wqe);
    // The header claims 30 bytes: 4 + 30 needs 3 octowords, DS 5.
    let mut bad = ring.clone();
    bad[32..36].copy_from_slice(&(0x8000_0000u32 | 30).to_be_bytes());
    assert_eq!(
        parse(&bad, 0, TransportKind::Rc),
        ParseError::SizeMismatch {
            opcode: Opcode::RdmaWrite,
            ds: 4,
            expected: 5
        }
    );
    // 12 bytes would fit in one octoword: DS 3.
    bad[32..36].copy_from_slice(&(0x8000_0000u32 | 12).to_be_bytes());
    assert_eq!(
        parse(&bad, 0, TransportKind::Rc),
        ParseError::SizeMismatch {
            opcode: Opcode::RdmaWrite,
            ds: 4,
            expected: 3
        }
    );
    // A hostile length: the expected DS saturates instead of wrapping.
    bad[32..36].copy_from_slice(&0xffff_ffffu32.to_be_bytes());
    assert!(matches!(
        parse(&bad, 0, TransportKind::Rc),
        ParseError::SizeMismatch {
            ds: 4,
            expected: 255,
            ..
        }
    ));
    // Zero bytes.
    bad[32..36].copy_from_slice(&0x8000_0000u32.to_be_bytes());
    assert!(matches!(
        parse(&bad, 0, TransportKind::Rc),
        ParseError::MalformedSegment { octoword: 2, .. }
    ));
}

#[test]
fn remote_address_reserved_word_not_zero() {
    let mut ring = rc_write_ring(1, 0);
    ring[16 + 15] = 1;
    assert!(matches!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::MalformedSegment { octoword: 1, .. }
    ));
}

#[test]
fn atomic_result_length_wrong() {
    let cas = Atomic::compare_swap(remote(), result(), 0, 1)
        .build()
        .unwrap();
    let ring = ring_of(1, &cas);
    // The result pointer is octoword 3; its byte count must be the operand size, 8.
    for len in [0u32, 4, 16] {
        let mut bad = ring.clone();
        bad[48..52].copy_from_slice(&len.to_be_bytes());
        assert!(
            matches!(
                parse(&bad, 0, TransportKind::Rc),
                ParseError::MalformedSegment { octoword: 3, .. }
            ),
            "{len}"
        );
    }
    let masked = Atomic::masked_compare_swap_32(remote(), result(), 1, 2, 3, 4)
        .build()
        .unwrap();
    let mut bad = ring_of(1, &masked);
    bad[48..52].copy_from_slice(&8u32.to_be_bytes());
    assert!(matches!(
        parse(&bad, 0, TransportKind::Rc),
        ParseError::MalformedSegment { octoword: 3, .. }
    ));
}

#[test]
fn atomic_sizes() {
    let cas = Atomic::compare_swap(remote(), result(), 0, 1)
        .build()
        .unwrap();
    let mut ring = ring_of(2, &cas);
    set_ds(&mut ring, 3);
    assert_eq!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::TooShort {
            opcode: Opcode::AtomicCompareSwap,
            ds: 3,
            min: 4
        }
    );
    set_ds(&mut ring, 5);
    assert_eq!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::SizeMismatch {
            opcode: Opcode::AtomicCompareSwap,
            ds: 5,
            expected: 4
        }
    );
    // The 4-byte masked fetch-add's reserved 8 bytes must be zero.
    let mfa = Atomic::masked_fetch_add_32(remote(), result(), 1, 2)
        .build()
        .unwrap();
    let mut ring = ring_of(1, &mfa);
    ring[32 + 15] = 1;
    assert!(matches!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::MalformedSegment { octoword: 2, .. }
    ));
}

#[test]
fn inline_on_read() {
    let wqe = RdmaRead::new(remote()).sge(sge(8)).build().unwrap();
    let mut ring = ring_of(1, &wqe);
    ring[32..36].copy_from_slice(&(0x8000_0000u32 | 8).to_be_bytes());
    assert!(matches!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::MalformedSegment { octoword: 2, .. }
    ));
}

#[test]
fn inline_header_where_a_pointer_belongs() {
    // A second entry flagged inline after a pointer.
    let wqe = RdmaWrite::new(remote())
        .gather([sge(8), sge(8)])
        .build()
        .unwrap();
    let mut ring = ring_of(1, &wqe);
    ring[48] |= 0x80;
    assert!(matches!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::MalformedSegment { octoword: 3, .. }
    ));
    // DUMP's pointer and an atomic's result pointer.
    let dump = Dump::<Rc>::new(sge(8)).build().unwrap();
    let mut ring = ring_of(1, &dump);
    ring[16] |= 0x80;
    assert!(matches!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::MalformedSegment { octoword: 1, .. }
    ));
    let fa = Atomic::fetch_add(remote(), result(), 1).build().unwrap();
    let mut ring = ring_of(1, &fa);
    ring[48] |= 0x80;
    assert!(matches!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::MalformedSegment { octoword: 3, .. }
    ));
}

#[test]
fn dump_size() {
    let dump = Dump::<Rc>::new(sge(8)).build().unwrap();
    let mut ring = ring_of(1, &dump);
    set_ds(&mut ring, 3);
    assert_eq!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::SizeMismatch {
            opcode: Opcode::Dump,
            ds: 3,
            expected: 2
        }
    );
    set_ds(&mut ring, 1);
    assert_eq!(
        parse(&ring, 0, TransportKind::Rc),
        ParseError::TooShort {
            opcode: Opcode::Dump,
            ds: 1,
            min: 2
        }
    );
}

#[test]
fn dc_address_vectors() {
    // A DC WRITE read as DC: fine. Its compact AV's reserved bits 30:24 set: refused.
    let wqe = RdmaWrite::new(compact().at(remote()))
        .sge(sge(8))
        .build()
        .unwrap();
    let ring = ring_of(1, &wqe);
    assert!(parse_wqe(&ring, WqeIndex(0), TransportKind::Dc).is_ok());
    let mut bad = ring.clone();
    bad[16 + 8] = 0x01;
    assert!(matches!(
        parse(&bad, 0, TransportKind::Dc),
        ParseError::ReservedBits {
            value: 0x0100_0000,
            ..
        }
    ));
    // The extended flag set on a DS-4 WQE: a full AV does not fit.
    let mut bad = ring.clone();
    bad[16 + 8] = 0x80;
    assert_eq!(
        parse(&bad, 0, TransportKind::Dc),
        ParseError::TooShort {
            opcode: Opcode::RdmaWrite,
            ds: 4,
            min: 5
        }
    );
    // A DC WRITE with DS 1 has no room for its address vector.
    let mut bad = ring;
    set_ds(&mut bad, 1);
    assert_eq!(
        parse(&bad, 0, TransportKind::Dc),
        ParseError::TooShort {
            opcode: Opcode::RdmaWrite,
            ds: 1,
            min: 2
        }
    );
    // A full-AV WQE's reserved dqp_dct bits.
    let wqe = RdmaRead::new(full_ib().at(remote()))
        .sge(sge(8))
        .build()
        .unwrap();
    let mut ring = ring_of(2, &wqe);
    assert!(parse_wqe(&ring, WqeIndex(0), TransportKind::Dc).is_ok());
    ring[16 + 8] = 0x81;
    assert!(matches!(
        parse(&ring, 0, TransportKind::Dc),
        ParseError::ReservedBits {
            value: 0x0100_0000,
            ..
        }
    ));
}

#[test]
fn rc_bytes_read_as_dc_are_refused() {
    // An RC WRITE (ctrl, raddr, data) read on a DC queue: the remote address octoword is
    // taken for a compact AV and the rest no longer adds up.
    let ring = rc_write_ring(1, 0);
    assert!(parse_wqe(&ring, WqeIndex(0), TransportKind::Dc).is_err());
}

/// Regression (found by the `roundtrip` fuzzer): an erased target holds raw segment bytes,
/// and `build()` accepted a compact segment with the extended flag set (or a full one
/// without it), writing a WQE the NIC and the parser read with a different address-vector
/// size. `build()` now refuses a segment that is not the form its variant names.
#[test]
fn erased_targets_must_be_the_form_they_claim() {
    use ibgda::wqe::segment::{AddressVectorSegment, CompactAddressVectorSegment};
    use zerocopy::byteorder::big_endian::U32;
    use zerocopy::FromBytes;

    let write = |target: AnyDcTarget| AnyWqe {
        target: Some(target),
        flags: ControlFlags::default(),
        stream_id: 0,
        op: AnyOperation::Write {
            remote: remote(),
            imm: None,
            data: AnyData::Empty,
        },
    };
    let wrong_form = |r: Result<Wqe<AnyWqe<'_>>, WqeError>| {
        matches!(r, Err(WqeError::InvalidCombination { .. }))
    };

    // The fuzzer's input: a "compact" segment whose dqp_dct is 0xb500_0000.
    let raw = [254, 255, 255, 255, 0, 0, 61, 0, 181, 0, 0, 0, 0, 113, 0, 0];
    let seg = CompactAddressVectorSegment::read_from_bytes(&raw).unwrap();
    assert!(wrong_form(write(AnyDcTarget::Compact(seg)).build()));

    let AnyDcTarget::Compact(good_compact) = compact().into() else {
        unreachable!()
    };
    let AnyDcTarget::Full(good_full) = full_ib().into() else {
        unreachable!()
    };
    // Compact with the flag; full without it.
    let mut c = good_compact;
    c.dqp_dct = U32::new(c.dqp_dct.get() | 0x8000_0000);
    assert!(wrong_form(write(AnyDcTarget::Compact(c)).build()));
    let mut f = good_full;
    f.dqp_dct = U32::new(f.dqp_dct.get() & 0x00ff_ffff);
    assert!(wrong_form(write(AnyDcTarget::Full(f)).build()));
    // The typed builders with an erased destination check the same.
    let to = AnyAddress {
        target: Some(AnyDcTarget::Full(f)),
        remote: remote(),
    };
    assert!(matches!(
        RdmaRead::new(to).sge(sge(8)).build(),
        Err(WqeError::InvalidCombination { .. })
    ));
    assert!(matches!(
        Atomic::fetch_add(to, result(), 1).build(),
        Err(WqeError::InvalidCombination { .. })
    ));

    // Reserved bits 30:24 of dqp_dct, on either form.
    let reserved = WqeError::FieldOutOfRange {
        field: "dqp_dct bits 30:24",
        value: 0x0100_0000,
        max: 0,
    };
    let mut c = good_compact;
    c.dqp_dct = U32::new(c.dqp_dct.get() | 0x0100_0000);
    assert_eq!(
        write(AnyDcTarget::Compact(c)).build().unwrap_err(),
        reserved
    );
    let mut f = good_full;
    f.dqp_dct = U32::new(f.dqp_dct.get() | 0x0100_0000);
    assert_eq!(write(AnyDcTarget::Full(f)).build().unwrap_err(), reserved);
    // A hardware AV patched as rdma-core does (OR-ing the DCT and the flag) keeps stray
    // bits 30:24; the typed build refuses it rather than write what the parser refuses.
    let mut hw = AddressVectorSegment::read_from_bytes(&[0u8; 48]).unwrap();
    hw.dqp_dct = U32::new(0x4000_0000);
    let target = DcTarget::from_hardware_av(hw, Qpn::new(5).unwrap(), 1);
    assert_eq!(
        RdmaWrite::new(target.at(remote()))
            .sge(sge(1))
            .build()
            .unwrap_err(),
        WqeError::FieldOutOfRange {
            field: "dqp_dct bits 30:24",
            value: 0x4000_0000,
            max: 0
        }
    );

    // What the WQE does not address is not checked: a NOP on a DC queue carries no AV.
    let nop = AnyWqe {
        op: AnyOperation::Nop,
        ..write(AnyDcTarget::Compact(c))
    };
    assert!(nop.build().is_ok());

    // A well-formed raw segment builds and reads back as itself.
    let raw_compact = CompactAddressVectorSegment::from_full(&good_full);
    let built = write(AnyDcTarget::Compact(raw_compact));
    let wqe = built.build().unwrap();
    let ring = ring_of(1, &wqe);
    let parsed = parse_wqe(&ring, WqeIndex(0), TransportKind::Dc).unwrap();
    assert_eq!(parsed.differs_from(&built), None);
}
