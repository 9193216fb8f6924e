//! The proxy's request descriptor: exact bytes derived by hand from the format table,
//! encode/decode round trips, every bad descriptor a typed error, and window resolution
//! that refuses every access outside a registered window.

use std::sync::Arc;

use ibgda::memory::DmaBuffer;
use ibgda::proxy::*;
use ibgda::softnic::{Access, Fabric, MemoryRegion};
use proptest::prelude::*;

fn le(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().unwrap())
}

#[test]
fn inline_write_bytes_match_the_format_table() {
    let request = Request::WriteInline8 {
        dst: RemoteRef {
            peer: 3,
            window: 5,
            offset: 0x1234_5678,
        },
        value: 0x1122_3344_5566_7788,
    };
    let d = RequestDescriptor::encode(&request, Epoch::of_lap(6)).unwrap();
    // control: epoch 7, opcode 1 | peer 3 << 4, window 5, extra = value >> 56, offset LE.
    // operand: epoch 7, then value bits 0..56 LE.
    let mut expected = [0u8; 16];
    expected[..8].copy_from_slice(&[7, 0x31, 5, 0x11, 0x78, 0x56, 0x34, 0x12]);
    expected[8..].copy_from_slice(&[7, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22]);
    assert_eq!(zerocopy::IntoBytes::as_bytes(&d), &expected);
    assert_eq!(d.decode(), Ok(request));
}

#[test]
fn pointer_write_and_cas_bytes_match_the_format_table() {
    let write = Request::Write {
        dst: RemoteRef {
            peer: 15,
            window: 0xfe,
            offset: 8,
        },
        src: LocalRef {
            window: 2,
            offset: 0xa0b0_c0d0,
        },
        len: 0x12_3456,
    };
    let d = RequestDescriptor::encode(&write, Epoch::of_lap(0)).unwrap();
    let b = zerocopy::IntoBytes::as_bytes(&d).to_vec();
    // extra = len >> 16 = 0x12; operand = window 2, offset, len & 0xffff.
    assert_eq!(b[..8], [1, 0xf2, 0xfe, 0x12, 8, 0, 0, 0]);
    assert_eq!(b[8..], [1, 2, 0xd0, 0xc0, 0xb0, 0xa0, 0x56, 0x34]);

    let cas = Request::CompareSwap {
        dst: RemoteRef {
            peer: 0,
            window: 1,
            offset: 16,
        },
        compare: 0x0abc_def1,
        swap: 0x0123_4567,
    };
    let d = RequestDescriptor::encode(&cas, Epoch::of_lap(254)).unwrap();
    let operand = le(&zerocopy::IntoBytes::as_bytes(&d)[8..]);
    assert_eq!(operand & 0xff, 255, "lap 254 has epoch 255");
    assert_eq!(operand >> 8, 0x0abc_def1 | 0x0123_4567 << 28);
    assert_eq!(Epoch::of_lap(255).get(), 1, "epochs cycle 1..=255, never 0");
}

#[test]
fn encode_refuses_what_does_not_fit() {
    let dst = RemoteRef {
        peer: 0,
        window: 0,
        offset: 0,
    };
    let src = LocalRef {
        window: 0,
        offset: 0,
    };
    let e = Epoch::of_lap(0);
    let enc = |r: Request| RequestDescriptor::encode(&r, e).map(|_| ());
    assert_eq!(
        enc(Request::WriteInline8 {
            dst: RemoteRef { peer: 16, ..dst },
            value: 0
        }),
        Err(DescriptorError::PeerTooLarge { peer: 16 })
    );
    assert_eq!(
        enc(Request::Write { dst, src, len: 0 }),
        Err(DescriptorError::ZeroLength)
    );
    assert_eq!(
        enc(Request::Read {
            src: dst,
            dst: src,
            len: MAX_LENGTH + 1
        }),
        Err(DescriptorError::LengthTooLarge {
            len: MAX_LENGTH + 1
        })
    );
    assert_eq!(
        enc(Request::FetchAdd {
            dst,
            add: MAX_OPERAND + 1
        }),
        Err(DescriptorError::OperandTooLarge {
            operand: MAX_OPERAND + 1
        })
    );
    assert_eq!(
        enc(Request::CompareSwap {
            dst,
            compare: 0,
            swap: MAX_CAS_VALUE + 1
        }),
        Err(DescriptorError::CasValueTooLarge {
            value: MAX_CAS_VALUE + 1
        })
    );
}

fn raw(control: u64, operand: u64) -> RequestDescriptor {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&control.to_le_bytes());
    b[8..].copy_from_slice(&operand.to_le_bytes());
    zerocopy::FromBytes::read_from_bytes(&b).unwrap()
}

#[test]
fn malformed_descriptors_are_typed_errors() {
    for op in [0u64, 7, 8, 15] {
        assert_eq!(
            raw(1 | op << 8, 1).decode(),
            Err(DescriptorError::UnknownOpcode { opcode: op as u8 })
        );
    }
    assert_eq!(
        raw(3 | 1 << 8, 4).decode(),
        Err(DescriptorError::EpochMismatch {
            control: 3,
            operand: 4
        })
    );
    assert_eq!(
        raw(1 | 2 << 8, 1).decode(),
        Err(DescriptorError::ZeroLength)
    );
    for op in [4u64, 5, 6] {
        assert_eq!(
            raw(1 | op << 8 | 0x40 << 24, 1).decode(),
            Err(DescriptorError::ReservedBits {
                opcode: op as u8,
                bits: 0x40 << 24
            })
        );
    }
}

fn remote_ref() -> impl Strategy<Value = RemoteRef> {
    (0u8..16, any::<u8>(), any::<u32>()).prop_map(|(peer, window, offset)| RemoteRef {
        peer,
        window,
        offset,
    })
}

fn local_ref() -> impl Strategy<Value = LocalRef> {
    (any::<u8>(), any::<u32>()).prop_map(|(window, offset)| LocalRef { window, offset })
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (remote_ref(), any::<u64>()).prop_map(|(dst, value)| Request::WriteInline8 { dst, value }),
        (remote_ref(), local_ref(), 1..=MAX_LENGTH).prop_map(|(dst, src, len)| Request::Write {
            dst,
            src,
            len
        }),
        (remote_ref(), local_ref(), 1..=MAX_LENGTH).prop_map(|(src, dst, len)| Request::Read {
            src,
            dst,
            len
        }),
        (remote_ref(), 0..=MAX_OPERAND).prop_map(|(dst, add)| Request::FetchAdd { dst, add }),
        (remote_ref(), 0..=MAX_OPERAND).prop_map(|(dst, add)| Request::Signal { dst, add }),
        (remote_ref(), 0..=MAX_CAS_VALUE, 0..=MAX_CAS_VALUE)
            .prop_map(|(dst, compare, swap)| Request::CompareSwap { dst, compare, swap }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_request_round_trips(r in request(), lap in any::<u64>()) {
        let epoch = Epoch::of_lap(lap);
        let d = RequestDescriptor::encode(&r, epoch).unwrap();
        prop_assert_eq!(d.control_epoch(), epoch.get());
        prop_assert_eq!(d.operand_epoch(), epoch.get());
        prop_assert!(words_valid(d.to_words(), epoch));
        prop_assert!(!words_valid(d.to_words(), Epoch::of_lap(lap.wrapping_add(1))));
        prop_assert_eq!(RequestDescriptor::from_words(d.to_words()), d);
        prop_assert_eq!(d.decode(), Ok(r));
    }

    /// Any 16 bytes decode without panicking, and whatever decodes re-encodes to the same
    /// bytes: no bit of a descriptor is silently ignored.
    #[test]
    fn decoding_is_total_and_canonical(control in any::<u64>(), operand in any::<u64>()) {
        let d = raw(control, operand);
        if let Ok(r) = d.decode() {
            let epoch = Epoch::of_lap(u64::from(d.control_epoch()).wrapping_sub(1));
            if d.control_epoch() != 0 {
                prop_assert_eq!(RequestDescriptor::encode(&r, epoch).unwrap(), d);
            }
        }
    }

    /// A slot whose halves come from different laps (a torn 16-byte store) is never
    /// taken as valid.
    #[test]
    fn torn_slots_are_not_valid(a in request(), b in request(), lap in 0u64..1000) {
        let new = RequestDescriptor::encode(&a, Epoch::of_lap(lap + 1)).unwrap().to_words();
        let old = RequestDescriptor::encode(&b, Epoch::of_lap(lap)).unwrap().to_words();
        prop_assert!(!words_valid([new[0], old[1]], Epoch::of_lap(lap + 1)));
        prop_assert!(!words_valid([old[0], new[1]], Epoch::of_lap(lap + 1)));
        prop_assert!(!words_valid([new[0], 0], Epoch::of_lap(lap + 1)));
    }
}

struct Tables {
    _fabric: Fabric,
    windows: Windows,
    results: LocalWindow,
}

fn region(fabric: &Fabric, node: ibgda::softnic::NodeId, len: usize) -> MemoryRegion {
    let buffer = Arc::new(DmaBuffer::zeroed(len, 64).unwrap());
    fabric
        .register(
            node,
            buffer,
            0,
            len,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .unwrap()
}

fn tables() -> Tables {
    let fabric = Fabric::new();
    let a = fabric.add_node(1).unwrap();
    let b = fabric.add_node(2).unwrap();
    let local = LocalWindow::new(region(&fabric, a, 64));
    let results = LocalWindow::new(region(&fabric, a, 32));
    let remote = RemoteWindow::of(&region(&fabric, b, 128));
    let windows = Windows::new(vec![local], vec![vec![remote], vec![]]).unwrap();
    Tables {
        _fabric: fabric,
        windows,
        results,
    }
}

#[test]
fn resolution_refuses_every_access_outside_a_window() {
    let t = tables();
    let at = |peer, window, offset| RemoteRef {
        peer,
        window,
        offset,
    };
    let resolve = |r: Request, slot| t.windows.resolve(&r, &t.results, slot).map(|_| ());
    let remote0 = WindowSide::Remote { peer: 0 };
    // The last 8 bytes fit; one more does not.
    assert_eq!(
        resolve(
            Request::WriteInline8 {
                dst: at(0, 0, 120),
                value: 1
            },
            0
        ),
        Ok(())
    );
    assert_eq!(
        resolve(
            Request::WriteInline8 {
                dst: at(0, 0, 121),
                value: 1
            },
            0
        ),
        Err(WindowError::OutOfWindow {
            side: remote0,
            window: 0,
            offset: 121,
            len: 8,
            window_len: 128
        })
    );
    assert_eq!(
        resolve(
            Request::WriteInline8 {
                dst: at(0, 0, u32::MAX),
                value: 1
            },
            0
        ),
        Err(WindowError::OutOfWindow {
            side: remote0,
            window: 0,
            offset: u32::MAX,
            len: 8,
            window_len: 128
        })
    );
    assert_eq!(
        resolve(
            Request::Signal {
                dst: at(2, 0, 0),
                add: 1
            },
            0
        ),
        Err(WindowError::NoSuchPeer { peer: 2, peers: 2 })
    );
    assert_eq!(
        resolve(
            Request::Signal {
                dst: at(1, 0, 0),
                add: 1
            },
            0
        ),
        Err(WindowError::NoSuchWindow {
            side: WindowSide::Remote { peer: 1 },
            window: 0,
            windows: 0
        })
    );
    assert_eq!(
        resolve(
            Request::FetchAdd {
                dst: at(0, 0, 4),
                add: 1
            },
            0
        ),
        Err(WindowError::Misaligned { offset: 4 })
    );
    // 32 bytes of results: slots 0..4.
    assert_eq!(
        resolve(
            Request::FetchAdd {
                dst: at(0, 0, 8),
                add: 1
            },
            3
        ),
        Ok(())
    );
    assert_eq!(
        resolve(
            Request::FetchAdd {
                dst: at(0, 0, 8),
                add: 1
            },
            4
        ),
        Err(WindowError::NoResultSlot { slot: 4 })
    );
    let local = |window, offset| LocalRef { window, offset };
    assert_eq!(
        resolve(
            Request::Write {
                dst: at(0, 0, 0),
                src: local(0, 60),
                len: 5
            },
            0
        ),
        Err(WindowError::OutOfWindow {
            side: WindowSide::Local,
            window: 0,
            offset: 60,
            len: 5,
            window_len: 64
        })
    );
    assert_eq!(
        resolve(
            Request::Read {
                src: at(0, 0, 0),
                dst: local(1, 0),
                len: 5
            },
            0
        ),
        Err(WindowError::NoSuchWindow {
            side: WindowSide::Local,
            window: 1,
            windows: 1
        })
    );
}

#[test]
fn window_tables_refuse_more_than_a_descriptor_names() {
    assert_eq!(
        Windows::new(vec![], vec![vec![]; MAX_PEERS + 1]).unwrap_err(),
        WindowTableError::TooManyPeers {
            peers: MAX_PEERS + 1
        }
    );
    let w = RemoteWindow::new(0x1000, 8, ibgda::wqe::RKey(1));
    assert_eq!(
        Windows::new(vec![], vec![vec![w; MAX_WINDOWS + 1]]).unwrap_err(),
        WindowTableError::TooManyWindows {
            side: WindowSide::Remote { peer: 0 },
            windows: MAX_WINDOWS + 1
        }
    );
}

#[test]
fn rings_refuse_bad_sizes_and_dirty_memory() {
    assert_eq!(
        ProxyRing::allocate::<Tuned>(3).unwrap_err(),
        RingError::BadSize { slots: 3 }
    );
    assert_eq!(
        ProxyRing::allocate::<Tuned>(1).unwrap_err(),
        RingError::BadSize { slots: 1 }
    );
    let g = RingGeometry::new(4).unwrap();
    let small = DmaBuffer::zeroed(g.bytes() - 8, 64).unwrap();
    assert_eq!(
        ProxyRing::in_buffer::<Baseline>(small, 4).unwrap_err(),
        RingError::BufferTooSmall {
            len: g.bytes() - 8,
            needed: g.bytes()
        }
    );
    let dirty = DmaBuffer::zeroed(g.bytes(), 64).unwrap();
    dirty.write(24, &[1]).unwrap();
    assert_eq!(
        ProxyRing::in_buffer::<Baseline>(dirty, 4).unwrap_err(),
        RingError::NotZeroed { word: 3 }
    );
}

#[test]
fn a_tuned_ring_refuses_to_overrun_its_consumer() {
    let (mut producer, mut consumer) = ProxyRing::allocate::<Tuned>(4).unwrap();
    let req = |i: u32| Request::WriteInline8 {
        dst: RemoteRef {
            peer: 0,
            window: 0,
            offset: i,
        },
        value: u64::from(i),
    };
    for i in 0..4 {
        assert_eq!(producer.try_push(&req(i)), Ok(u64::from(i)));
    }
    assert_eq!(
        producer.try_push(&req(4)),
        Err(PushError::Full { slots: 4 })
    );
    let (i, d) = consumer.poll().unwrap();
    assert_eq!((i, d.decode()), (0, Ok(req(0))));
    // Taken but not yet published: the slot is still the consumer's.
    assert_eq!(
        producer.try_push(&req(4)),
        Err(PushError::Full { slots: 4 })
    );
    consumer.publish_progress();
    assert_eq!(producer.try_push(&req(4)), Ok(4));
    for expect in 1..5 {
        let (i, d) = consumer.poll().unwrap();
        assert_eq!((i, d.decode()), (expect, Ok(req(expect as u32))));
    }
    assert!(consumer.poll().is_none(), "nothing is read twice");
}
