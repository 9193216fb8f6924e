//! The control plane's public surface on the software NIC: connection endpoints (exact
//! bytes, every bad input a typed error, a TCP exchange), capability checks when a device
//! is opened and when queues are made, and limits as typed errors.

use std::io::Write;
use std::net::{TcpListener, TcpStream};

use ibgda::nic::connection::{exchange, ConnectionError, Endpoint, MAGIC, VERSION};
use ibgda::nic::{
    DcEndpoint, Device, Gid, LinkLayer, Mtu, NicError, QueueSpec, RcEndpoint, SoftNic,
    SOFT_NIC_CAPS,
};
use ibgda::softnic::Fabric;
use ibgda::wqe::segment::AddressVectorSegment;
use ibgda::wqe::{Compact, Full, RingSize};
use zerocopy::FromZeros;

fn rc() -> RcEndpoint {
    RcEndpoint {
        qpn: 0x12_3456,
        psn: 0xab_cdef,
        lid: 0x0102,
        mtu: Mtu::Mtu2048,
        link_layer: LinkLayer::Ethernet,
        gid: Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]),
    }
}

fn dc() -> DcEndpoint {
    let mut av = AddressVectorSegment::new_zeroed();
    av.rgid = [9; 16];
    DcEndpoint {
        dct: 0x00_0777,
        access_key: 0x1122_3344_5566_7788,
        lid: 7,
        mtu: Mtu::Mtu4096,
        link_layer: LinkLayer::InfiniBand,
        gid: Gid([3; 16]),
        address_vector: av,
    }
}

#[test]
fn rc_endpoint_bytes_are_the_documented_layout() {
    // Written out field by field from the table in the module documentation.
    let mut expected = b"IBGD".to_vec();
    expected.extend([1, 1, 0, 0]); // version, kind RC, reserved
    expected.extend([0x00, 0x12, 0x34, 0x56]); // QPN
    expected.extend([0x00, 0xab, 0xcd, 0xef]); // PSN
    expected.extend([0x01, 0x02]); // LID
    expected.extend([4, 1]); // MTU 2048, Ethernet
    expected.extend([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(rc().encode().unwrap(), expected);
    assert_eq!(RcEndpoint::decode(&expected).unwrap(), rc());
}

#[test]
fn dc_endpoint_round_trips_and_has_the_documented_length() {
    let bytes = dc().encode().unwrap();
    assert_eq!(bytes.len(), 88);
    assert_eq!(&bytes[..8], &[b'I', b'B', b'G', b'D', 1, 2, 0, 0]);
    assert_eq!(&bytes[12..20], &0x1122_3344_5566_7788u64.to_be_bytes());
    assert_eq!(DcEndpoint::decode(&bytes).unwrap(), dc());
    let av = *dc().full_target().unwrap().segment();
    assert_eq!(
        av.dqp_dct.get(),
        0x8000_0777,
        "extended flag and the DCT number"
    );
    assert_eq!(av.dc_key.get(), 0x1122_3344_5566_7788);
    assert_eq!(av.rgid, [9; 16], "the carried address vector");
    assert!(
        dc().compact_target().is_ok(),
        "an InfiniBand endpoint has a compact form"
    );
}

#[test]
fn every_bad_encoding_is_a_typed_error() {
    let good = rc().encode().unwrap();
    let with = |at: usize, byte: u8| {
        let mut b = good.clone();
        b[at] = byte;
        b
    };
    assert_eq!(
        RcEndpoint::decode(&with(0, b'X')),
        Err(ConnectionError::Magic { found: *b"XBGD" })
    );
    assert_eq!(
        RcEndpoint::decode(&with(4, VERSION + 1)),
        Err(ConnectionError::Version { found: VERSION + 1 })
    );
    assert_eq!(
        RcEndpoint::decode(&with(5, 2)),
        Err(ConnectionError::Kind {
            found: 2,
            expected: 1
        })
    );
    assert_eq!(
        RcEndpoint::decode(&with(7, 1)),
        Err(ConnectionError::Field {
            field: "reserved",
            value: 1,
            max: 0
        })
    );
    assert_eq!(
        RcEndpoint::decode(&with(8, 1)),
        Err(ConnectionError::Field {
            field: "qpn",
            value: 0x0112_3456,
            max: 0xff_ffff
        })
    );
    assert_eq!(
        RcEndpoint::decode(&with(18, 6)),
        Err(ConnectionError::Field {
            field: "mtu",
            value: 6,
            max: 5
        })
    );
    assert_eq!(
        RcEndpoint::decode(&with(19, 2)),
        Err(ConnectionError::Field {
            field: "link_layer",
            value: 2,
            max: 1
        })
    );
    assert_eq!(
        RcEndpoint::decode(&good[..35]),
        Err(ConnectionError::Length {
            len: 35,
            expected: 36
        })
    );
    assert_eq!(
        RcEndpoint::decode(&good[..2]),
        Err(ConnectionError::Magic {
            found: [b'I', b'B', 0, 0]
        })
    );
    let mut long = good.clone();
    long.push(0);
    assert_eq!(
        RcEndpoint::decode(&long),
        Err(ConnectionError::Length {
            len: 37,
            expected: 36
        })
    );
    assert_eq!(
        RcEndpoint {
            psn: 1 << 24,
            ..rc()
        }
        .encode(),
        Err(ConnectionError::Field {
            field: "psn",
            value: 1 << 24,
            max: 0xff_ffff
        })
    );
    assert_eq!(
        DcEndpoint {
            dct: 1 << 24,
            ..dc()
        }
        .encode(),
        Err(ConnectionError::Field {
            field: "dct",
            value: 1 << 24,
            max: 0xff_ffff
        })
    );
    assert!(
        DcEndpoint {
            link_layer: LinkLayer::Ethernet,
            ..dc()
        }
        .compact_target()
        .is_err(),
        "a RoCE target has no compact address vector"
    );
}

#[test]
fn arbitrary_bytes_never_panic_the_decoders() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for case in 0..20_000 {
        let len = (next() % 100) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if case % 2 == 0 && len >= 6 {
            bytes[..4].copy_from_slice(&MAGIC);
            bytes[4] = VERSION;
            bytes[5] = 1 + (case % 4 == 0) as u8;
        }
        if let Ok(e) = RcEndpoint::decode(&bytes) {
            assert_eq!(
                e.encode().unwrap(),
                bytes,
                "a decoded endpoint re-encodes exactly"
            );
        }
        if let Ok(e) = DcEndpoint::decode(&bytes) {
            assert_eq!(
                e.encode().unwrap(),
                bytes,
                "a decoded endpoint re-encodes exactly"
            );
        }
    }
}

#[test]
fn exchange_over_tcp_carries_endpoints_and_refuses_garbage() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let got = exchange(&mut s, &dc()).unwrap();
        // Then a frame announcing more than any endpoint has.
        let (mut s2, _) = listener.accept().unwrap();
        s2.write_all(&[0x10, 0x00]).unwrap();
        got
    });
    let mut s = TcpStream::connect(addr).unwrap();
    let mine = DcEndpoint { dct: 0x42, ..dc() };
    assert_eq!(exchange(&mut s, &mine).unwrap(), dc());
    let mut s2 = TcpStream::connect(addr).unwrap();
    assert_eq!(peer.join().unwrap(), mine);
    assert_eq!(
        exchange(&mut s2, &dc()),
        Err(ConnectionError::Field {
            field: "frame length",
            value: 0x1000,
            max: 256
        })
    );
}

#[test]
fn a_device_with_another_cqe_version_is_refused_when_opened() {
    let fabric = Fabric::new();
    let nic = SoftNic::open(&fabric, 1)
        .unwrap()
        .with_caps(ibgda::nic::DeviceCaps {
            cqe_version: 0,
            ..SOFT_NIC_CAPS
        });
    match Device::open(nic) {
        Err(NicError::Capability { name, found, .. }) => {
            assert_eq!((name, found), ("cqe_version", 0))
        }
        other => panic!("expected a capability error, got {other:?}"),
    }
}

#[test]
fn capabilities_read_back_through_query_hca_cap() {
    let fabric = Fabric::new();
    let caps = ibgda::nic::DeviceCaps {
        compact_address_vector: false,
        masked_atomics: false,
        log_max_qp_size: 6,
        max_send_wqe_bytes: 512,
        atomic_endianness: ibgda::nic::AtomicEndianness::HostEndian,
        ..SOFT_NIC_CAPS
    };
    let device = Device::open(SoftNic::open(&fabric, 1).unwrap().with_caps(caps)).unwrap();
    assert_eq!(
        *device.caps(),
        caps,
        "every capability survives the command bytes"
    );
    assert_eq!(device.caps().max_inline(), 512 - 36);
    let pd = device.alloc_pd().unwrap();
    let spec = QueueSpec::new(RingSize::new(64).unwrap());
    match pd.create_dci::<Compact>(spec) {
        Err(NicError::Capability { name, .. }) => assert_eq!(name, "compact_address_vector"),
        other => panic!("expected a capability error, got {other:?}"),
    }
    assert!(pd.create_dci::<Full>(spec).is_ok());
    match pd.create_rc(QueueSpec::new(RingSize::new(128).unwrap())) {
        Err(NicError::OutOfRange { value, max, .. }) => assert_eq!((value, max), (128, 64)),
        other => panic!("expected the ring to be too large, got {other:?}"),
    }
}

#[test]
fn without_atomic_capability_queues_refuse_remote_atomics() {
    use ibgda::cq::Syndrome;
    use ibgda::queue::PollError;
    use std::sync::Arc;
    let fabric = Fabric::new();
    let caps = ibgda::nic::DeviceCaps {
        atomic: false,
        ..SOFT_NIC_CAPS
    };
    let device = Device::open(SoftNic::open(&fabric, 1).unwrap().with_caps(caps)).unwrap();
    assert!(!device.caps().atomic);
    let pd = device.alloc_pd().unwrap();
    let buffer = Arc::new(ibgda::memory::DmaBuffer::zeroed(64, 64).unwrap());
    let region = pd
        .register(buffer.clone(), 0, 64, ibgda::nic::MemoryAccess::all())
        .unwrap();
    let pending = pd
        .create_rc(QueueSpec::new(RingSize::new(16).unwrap()))
        .unwrap();
    let endpoint = pending.endpoint();
    let mut qp = pending.connect(&endpoint).unwrap();
    let fa = ibgda::wqe::Atomic::fetch_add(region.remote(0), region.local(8), 1)
        .signaled()
        .build()
        .unwrap();
    qp.post(&fa, &[region.registered()]).unwrap();
    fabric.run_until_idle();
    match qp.poll() {
        Err(PollError::Completion(e)) => {
            assert_eq!(
                (e.syndrome, e.vendor_syndrome),
                (Some(Syndrome::RemoteAccess), 0x43)
            )
        }
        other => panic!("expected a remote access error, got {other:?}"),
    }
    assert_eq!(buffer.to_vec(), vec![0; 64], "the atomic changed nothing");
}

#[test]
fn queue_lifecycles_send_their_commands_in_the_hardware_order() {
    use ibgda::nic::prm::opcode::*;
    let fabric = Fabric::new();
    let device = Device::open(SoftNic::open(&fabric, 1).unwrap()).unwrap();
    let log = |device: &Device<SoftNic>| device.backend().executed_commands();
    assert_eq!(
        log(&device),
        [QUERY_HCA_CAP, QUERY_HCA_CAP],
        "general and atomic caps"
    );
    let pd = device.alloc_pd().unwrap();
    let spec = QueueSpec::new(RingSize::new(16).unwrap());
    let pending = pd.create_rc(spec).unwrap();
    let endpoint = pending.endpoint();
    let rc = pending.connect(&endpoint).unwrap();
    let dci = pd.create_dci::<Full>(spec).unwrap().activate().unwrap();
    let dct = pd.create_dct(5, 16).unwrap();
    let unconnected = pd.create_rc(spec).unwrap();
    let roce_peer = RcEndpoint {
        link_layer: LinkLayer::Ethernet,
        ..unconnected.endpoint()
    };
    assert!(matches!(
        unconnected.connect(&roce_peer),
        Err(NicError::Unsupported { .. })
    ));
    drop(pd);
    drop(dct);
    drop(rc);
    drop(dci);
    let connect = [RST2INIT_QP, INIT2RTR_QP, RTR2RTS_QP];
    let mut expected = vec![QUERY_HCA_CAP, QUERY_HCA_CAP];
    expected.extend([CREATE_CQ, CREATE_QP]);
    expected.extend(connect);
    expected.extend([CREATE_CQ, CREATE_QP]);
    expected.extend(connect);
    expected.extend([CREATE_CQ, CREATE_DCT]);
    expected.extend([CREATE_CQ, CREATE_QP]);
    // A failed connection destroys its queue pair, then its CQ.
    expected.extend([DESTROY_QP, DESTROY_CQ]);
    expected.extend([DESTROY_DCT, DESTROY_CQ]);
    expected.extend([DESTROY_QP, DESTROY_CQ]);
    expected.extend([DESTROY_QP, DESTROY_CQ]);
    assert_eq!(log(&device), expected);
    assert_eq!(device.teardown_failures().0, 0);
    assert_eq!(device.backend().allocated(), Default::default());
    assert_eq!(
        fabric.census(),
        ibgda::softnic::Census {
            nodes: 1,
            ..Default::default()
        }
    );
}
