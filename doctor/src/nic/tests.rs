//! The NIC rows over facts the emulated ConnectX cannot produce (sysfs GID types and
//! drivers, devices sysfs lists but verbs cannot open, a capability page it does not
//! model, a probe cut off): the emulator test (`tests/emulated.rs`) covers the rest end to
//! end.

use super::*;
use crate::bounded::Ending;
use ibgda::nic::SOFT_NIC_CAPS;
use std::time::Duration;

/// The capability pages and the control plane's reading of them for a device with `caps`:
/// the software NIC's QUERY_HCA_CAP answer, and `nic::Device::open` over it.
fn reading(caps: DeviceCaps) -> ((GeneralCaps, Option<AtomicCaps>), DeviceCaps) {
    let fabric = ibgda::softnic::Fabric::new();
    let nic = ibgda::nic::SoftNic::open(&fabric, 1)
        .unwrap()
        .with_caps(caps);
    let query = |capability| {
        let input = QueryHcaCap::current(capability).encode().unwrap();
        let mut output = vec![0u8; QueryHcaCapOutput::OUTPUT_BYTES];
        nic.general_command(&input, &mut output).unwrap();
        QueryHcaCapOutput::decode(capability, &output).unwrap()
    };
    let QueryHcaCapOutput::General(general) = query(CapabilityType::General) else {
        unreachable!()
    };
    let atomic = match general.atomic.then(|| query(CapabilityType::Atomic)) {
        Some(QueryHcaCapOutput::Atomic(a)) => Some(a),
        _ => None,
    };
    let opened = Device::open(nic).unwrap();
    ((general, atomic), *opened.caps())
}

fn port(link_layer: LinkLayer, lid: u16) -> PortInfo {
    PortInfo {
        state: 4,
        active_mtu: 5,
        lid,
        gid_table_len: 4,
        link_layer,
    }
}

/// Facts of a healthy device `mlx5_0` with port 1 as given.
fn healthy(port: PortInfo, gids: Vec<Option<[u8; 16]>>) -> NicFacts {
    NicFacts {
        libraries: Some(Ok(Vec::new())),
        emulator: None,
        reg_dmabuf_mr: Some(true),
        devices: Some(Ok(vec![DeviceInfo {
            name: "mlx5_0".into(),
            mlx5: true,
        }])),
        opened: Some(Ok("mlx5_0".into())),
        uar: Some(Ok(UarKind::NonCachedDedicated)),
        caps: Some(Ok(reading(SOFT_NIC_CAPS).0)),
        control_plane: Some(Ok(reading(SOFT_NIC_CAPS).1)),
        umem: Some(Ok(())),
        port: Some(Ok(port)),
        gids,
        ending: Some(Ending::Finished),
    }
}

fn row<'a>(rows: &'a [Row], id: &str) -> &'a Row {
    rows.iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no row {id}"))
}

/// `::ffff:10.0.0.1`, a RoCE GID of an IPv4 address.
const V4: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1];
/// `fe80::0e42:a1ff:fe00:0001`, a link-local GID.
const LINK_LOCAL: [u8; 16] = [
    0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0e, 0x42, 0xa1, 0xff, 0xfe, 0, 0, 1,
];

fn sysfs_with_types(types: &[(u32, &str)]) -> SysfsNic {
    SysfsNic {
        name: "mlx5_0".into(),
        driver: Some("mlx5_core".into()),
        gid_types: types.iter().map(|(i, t)| (*i, (*t).to_owned())).collect(),
        gid_types_listed: true,
        ..SysfsNic::default()
    }
}

#[test]
fn a_healthy_device_passes_every_needed_row() {
    let f = healthy(port(LinkLayer::InfiniBand, 1), vec![Some(LINK_LOCAL)]);
    let rows = rows(&f, &[sysfs_with_types(&[])], &HostFacts::default(), None);
    for r in &rows {
        assert_eq!(r.status, Status::Ok, "{r:?}");
    }
    assert_eq!(
        row(&rows, "rdma_devices").result,
        "mlx5_0 (mlx5, kernel driver mlx5_core); checking mlx5_0 (the first mlx5 device)"
    );
    assert_eq!(
        row(&rows, "port_address").result,
        "LID 0x0001, GID 0 fe80:0000:0000:0000:0e42:a1ff:fe00:0001"
    );
    // Every row ibgda needs is marked so; the optional ones are not.
    let needed: Vec<&str> = rows.iter().filter(|r| r.needed).map(|r| r.id).collect();
    assert_eq!(
        needed,
        [
            "libraries",
            "rdma_devices",
            "devx_context",
            "uar",
            "hca_caps",
            "cqe_version",
            "send_queue",
            "inline",
            "umem",
            "port",
            "port_address"
        ]
    );
}

#[test]
fn roce_gid_types_come_from_sysfs() {
    let eth = port(LinkLayer::Ethernet, 0);
    let gids = vec![Some(LINK_LOCAL), Some(LINK_LOCAL), Some(V4), Some(V4)];
    let f = healthy(eth, gids);
    let host = HostFacts::default();
    // The kernel's table: each address once as RoCE v1, once as RoCE v2.
    let typed = sysfs_with_types(&[
        (0, "IB/RoCE v1"),
        (1, "RoCE v2"),
        (2, "IB/RoCE v1"),
        (3, "RoCE v2"),
    ]);
    let r = row(&rows(&f, &[typed], &host, None), "port_address").clone();
    assert_eq!(r.status, Status::Ok);
    assert_eq!(
        r.result,
        "2 RoCE v2 GIDs (first: index 1 fe80:0000:0000:0000:0e42:a1ff:fe00:0001)"
    );
    // RoCE v1 only.
    let v1 = sysfs_with_types(&[
        (0, "IB/RoCE v1"),
        (1, "IB/RoCE v1"),
        (2, "IB/RoCE v1"),
        (3, "IB/RoCE v1"),
    ]);
    let r = row(&rows(&f, &[v1], &host, None), "port_address").clone();
    assert_eq!(r.status, Status::Fail);
    assert!(
        r.result
            .starts_with("no RoCE v2 GID among 4 populated entries"),
        "{}",
        r.result
    );
    assert!(r.remedy.contains("RoCE v2 GIDs are made from IP addresses"));
    // No type files (as on the emulated ConnectX): said, not guessed.
    let r = row(&rows(&f, &[], &host, None), "port_address").clone();
    assert_eq!(r.status, Status::Warn);
    assert!(r.result.contains(
        "their types (RoCE v1 or v2) cannot be read: /sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types is missing"
    ), "{}", r.result);
    // An InfiniBand port with LID 0.
    let f = healthy(port(LinkLayer::InfiniBand, 0), vec![Some(LINK_LOCAL)]);
    let r = row(&rows(&f, &[], &host, None), "port_address").clone();
    assert_eq!(r.status, Status::Fail);
    assert!(r
        .result
        .starts_with("LID 0: the port has no address on the subnet"));
    assert!(r.remedy.contains("run opensm"));
}

#[test]
fn devices_sysfs_lists_but_verbs_cannot_open_are_explained() {
    let mut f = healthy(port(LinkLayer::InfiniBand, 1), Vec::new());
    f.devices = Some(Ok(Vec::new()));
    let e = Mlx5Error::NoDevice {
        requested: None,
        available: Vec::new(),
        errno: 0,
    };
    f.opened = Some(Err(e.clone()));
    let sysfs = [sysfs_with_types(&[])];
    let rows = rows(&f, &sysfs, &HostFacts::default(), None);
    let r = row(&rows, "rdma_devices");
    assert_eq!(r.status, Status::Fail);
    assert_eq!(
        r.result,
        "verbs lists no RDMA device; /sys/class/infiniband has mlx5_0 but verbs cannot open it: \
         /dev/infiniband is empty or missing (a container needs it passed in)"
    );
    assert_eq!(r.remedy, e.to_string());
    assert_eq!(row(&rows, "devx_context").status, Status::Skip);
    for id in ["uar", "hca_caps", "umem", "port", "port_address"] {
        assert_eq!(row(&rows, id).status, Status::Skip, "{id}");
        assert_eq!(row(&rows, id).result, "cannot run: no mlx5 device to open");
    }
    // With the character devices there, the module is the suspect.
    let host = HostFacts {
        infiniband_devices: vec!["uverbs0".into()],
        ..HostFacts::default()
    };
    let r = row(&rows_of(&f, &sysfs, &host), "rdma_devices")
        .result
        .clone();
    assert!(r.ends_with("ib_uverbs may not be loaded"), "{r}");
}

fn rows_of(f: &NicFacts, sysfs: &[SysfsNic], host: &HostFacts) -> Vec<Row> {
    rows(f, sysfs, host, None)
}

#[test]
fn capability_pages_the_emulator_cannot_report() {
    let host = HostFacts::default();
    let with = |caps: DeviceCaps, edit: &dyn Fn(&mut GeneralCaps)| {
        let ((mut general, atomic), opened) = reading(caps);
        edit(&mut general);
        let mut f = healthy(port(LinkLayer::InfiniBand, 1), vec![Some(LINK_LOCAL)]);
        f.caps = Some(Ok((general, atomic)));
        f.control_plane = Some(Ok(opened));
        rows(&f, &[], &host, None)
    };
    // No RC transport.
    let r = with(SOFT_NIC_CAPS, &|g| g.rc = false);
    assert_eq!(row(&r, "send_queue").status, Status::Fail);
    assert!(row(&r, "send_queue").result.starts_with("RC not supported"));
    // A send queue smaller than the largest WQE.
    let small = DeviceCaps {
        log_max_qp_size: 3,
        ..SOFT_NIC_CAPS
    };
    assert_eq!(
        row(&with(small, &|_| {}), "send_queue").status,
        Status::Fail
    );
    // No WQE of one basic block.
    let tiny = DeviceCaps {
        max_send_wqe_bytes: 48,
        ..SOFT_NIC_CAPS
    };
    assert_eq!(row(&with(tiny, &|_| {}), "inline").status, Status::Fail);
    // An endianness mode the PRM reserves: the control plane refuses the device, as its
    // capability reading reports it.
    let mut f = healthy(port(LinkLayer::InfiniBand, 1), vec![Some(LINK_LOCAL)]);
    f.control_plane = Some(Err(NicError::Capability {
        name: "atomic_req_8B_endianness_mode",
        found: 2,
        needed: "0 (big-endian) or 1 (host-endian)",
    }));
    let r = rows(&f, &[], &host, None);
    let atomics = row(&r, "atomics");
    assert_eq!(atomics.status, Status::Fail);
    assert!(atomics.needed);
    assert!(atomics
        .result
        .starts_with("atomic_req_8B_endianness_mode is 2"));
    assert!(atomics
        .remedy
        .starts_with("capability atomic_req_8B_endianness_mode is 0x2; needed: 0 (big-endian)"));
    assert_eq!(row(&r, "send_queue").status, Status::Skip);
    // Any other refusal skips the rows that need the control plane's reading, saying why.
    f.control_plane = Some(Err(NicError::OutOfRange {
        what: "completion event queue number (cqc.c_eqn is 8 bits)",
        value: 300,
        max: 255,
    }));
    let r = rows(&f, &[], &host, None);
    assert!(row(&r, "inline").result.starts_with(
        "cannot run: the control plane could not open the device: completion event queue number"
    ));
    assert_eq!(row(&r, "cqe_version").status, Status::Ok);
}

#[test]
fn a_probe_cut_off_says_where() {
    let f = NicFacts {
        libraries: Some(Ok(Vec::new())),
        devices: Some(Ok(vec![DeviceInfo {
            name: "mlx5_0".into(),
            mlx5: true,
        }])),
        opened: Some(Ok("mlx5_0".into())),
        uar: Some(Ok(UarKind::NonCached)),
        ending: Some(Ending::TimedOut {
            step: "reading the HCA capabilities (QUERY_HCA_CAP)",
            limit: Duration::from_secs(30),
        }),
        ..NicFacts::default()
    };
    let rows = rows(&f, &[], &HostFacts::default(), None);
    let caps = row(&rows, "hca_caps");
    assert_eq!(caps.status, Status::Fail);
    assert_eq!(
        caps.result,
        "the probe stopped: reading the HCA capabilities (QUERY_HCA_CAP) did not return within \
         30 s (the call is left running)"
    );
    assert!(caps.fails_run());
    assert_eq!(row(&rows, "cqe_version").status, Status::Skip);
    assert_eq!(row(&rows, "umem").status, Status::Fail);
    assert_eq!(row(&rows, "uar").status, Status::Ok);
}
