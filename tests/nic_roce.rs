//! RoCE v2 through the control plane on the software NIC: which GID a port sends from
//! (and the typed error when it has no RoCE v2 GID), how a destination MAC is resolved,
//! and the INIT2RTR paths the software NIC refuses as firmware would (a zero MAC) or by
//! its own stricter rules (a source GID index that is no entry, a RoCE v2 UDP source port
//! outside 0xc000..=0xffff, the reserved `grh` bit set), each refusal changing nothing.
//! The RoCE data path itself (RC and DC, faults and recovery) is in `nic_suite`
//! (`IBGDA_NIC=soft-roce`) and `nic_recovery`.

use ibgda::nic::prm::{
    AddressPath, AtomicMode, Command, CommandStatus, Init2RtrQp, Mtu, PmState, PrmError,
    RemoteAccess, Rst2InitQp,
};
use ibgda::nic::{
    roce, Backend, Device, Gid, GidEntry, GidType, NicError, QueueSpec, SoftNic, SoftObject,
};
use ibgda::softnic::{Fabric, PeerPath, QpState, RocePath, SoftNicError};
use ibgda::wqe::RingSize;

const MAC_A: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [0x02, 0xbb, 0, 0, 0, 2];

fn entry(gid: Gid, kind: GidType) -> GidEntry {
    GidEntry { gid, kind }
}

fn ipv6(last: u8) -> Gid {
    let mut g = [0u8; 16];
    g[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    g[15] = last;
    Gid(g)
}

#[test]
fn the_source_gid_is_the_roce_v2_entry_perftest_would_choose() {
    use GidType::{RoceV1, RoceV2};
    let ll = Gid::link_local(MAC_A);
    let v4 = Gid::from_ipv4([192, 168, 0, 9]);
    let fabric = Fabric::new();
    let open = |gids: Vec<GidEntry>, mac| {
        Device::open(SoftNic::open_roce(&fabric, mac, gids).unwrap())
            .unwrap()
            .source_gid()
    };
    // An IPv4 address beats a global IPv6 one, which beats the link-local one; RoCE v1
    // entries never count; an empty (zero) entry is skipped.
    let table = vec![
        entry(ll, RoceV1),
        entry(ll, RoceV2),
        entry(ipv6(1), RoceV1),
        entry(ipv6(1), RoceV2),
        entry(Gid::default(), RoceV2),
        entry(v4, RoceV1),
        entry(v4, RoceV2),
    ];
    assert_eq!(open(table, MAC_A), Ok((6, v4)));
    let mac = [0x02, 1, 1, 1, 1, 1];
    let table = vec![
        entry(Gid::link_local(mac), RoceV2),
        entry(ipv6(2), RoceV2),
        entry(ipv6(3), RoceV2),
    ];
    assert_eq!(open(table, mac), Ok((1, ipv6(2))), "the first of equals");
}

#[test]
fn a_roce_port_without_a_roce_v2_gid_is_a_typed_error_naming_the_port() {
    let fabric = Fabric::new();
    let table: Vec<GidEntry> = roce::kernel_gid_table(MAC_A, &[[10, 1, 1, 1]])
        .into_iter()
        .filter(|e| e.kind == GidType::RoceV1)
        .collect();
    let device = Device::open(SoftNic::open_roce(&fabric, MAC_A, table).unwrap()).unwrap();
    let expected = NicError::NoRoceV2Gid {
        device: device.backend().name().to_owned(),
        port: 1,
        entries: 2,
    };
    assert_eq!(device.source_gid(), Err(expected.clone()));
    let pd = device.alloc_pd().unwrap();
    let spec = QueueSpec::new(RingSize::new(16).unwrap());
    assert_eq!(pd.create_rc(spec).map(|_| ()).unwrap_err(), expected);
    assert_eq!(
        pd.create_dci::<ibgda::wqe::Full>(spec)
            .map(|_| ())
            .unwrap_err(),
        expected
    );
    assert_eq!(pd.create_dct(1, 16).map(|_| ()).unwrap_err(), expected);
    let message = expected.to_string();
    assert!(message.contains("port 1 of soft:"), "{message}");
    assert!(message.contains("RoCE v2"), "{message}");
    // Nothing was allocated for the refused queues.
    assert_eq!(fabric.census().queue_pairs, 0);
}

#[test]
fn macs_resolve_as_an_address_handle_resolves_them() {
    let fabric = Fabric::new();
    let a = SoftNic::open_roce(
        &fabric,
        MAC_A,
        roce::kernel_gid_table(MAC_A, &[[10, 0, 0, 1]]),
    )
    .unwrap();
    let _b = SoftNic::open_roce(
        &fabric,
        MAC_B,
        roce::kernel_gid_table(MAC_B, &[[10, 0, 0, 2]]),
    )
    .unwrap();
    // A link-local GID: the MAC comes from the interface id, even for no node of the
    // fabric (nothing is asked); any other: the MAC of the node that has the address.
    let stranger = [0x0a, 1, 2, 3, 4, 5];
    assert_eq!(
        fabric.resolve_mac(Gid::link_local(stranger).0),
        Ok(stranger)
    );
    assert_eq!(
        fabric.resolve_mac(Gid::from_ipv4([10, 0, 0, 2]).0),
        Ok(MAC_B)
    );
    let nobody = Gid::from_ipv4([10, 0, 0, 3]).0;
    assert_eq!(
        fabric.resolve_mac(nobody),
        Err(SoftNicError::NoNeighbour { gid: nobody })
    );
    // Through the backend: the address vector to B's IPv4 GID, sent from A's index 3.
    let pd = a.alloc_pd().unwrap();
    let port = a.port_attributes().clone();
    let av = a
        .address_vector(&pd, &port, 3, Gid::from_ipv4([10, 0, 0, 2]))
        .unwrap();
    assert_eq!(av.rmac, MAC_B);
    assert_eq!(av.rgid, Gid::from_ipv4([10, 0, 0, 2]).0);
    // The GRH bit is reserved on RoCE; the source GID index is bits 27:20.
    assert_eq!(av.grh_gid_fl.get(), 3 << 20);
    assert!(roce::UDP_SOURCE_PORTS.contains(&av.rlid.get()));
    assert!(matches!(
        a.address_vector(&pd, &port, 3, Gid(nobody)),
        Err(NicError::SoftNic(SoftNicError::NoNeighbour { .. }))
    ));
    assert!(matches!(
        a.address_vector(&pd, &port, 9, Gid::from_ipv4([10, 0, 0, 2])),
        Err(NicError::OutOfRange { .. })
    ));
}

#[test]
fn init2rtr_refuses_roce_paths_that_reach_no_one_and_changes_nothing() {
    let fabric = Fabric::new();
    let device = Device::open(
        SoftNic::open_roce(
            &fabric,
            MAC_A,
            roce::kernel_gid_table(MAC_A, &[[10, 0, 0, 1]]),
        )
        .unwrap(),
    )
    .unwrap();
    let pd = device.alloc_pd().unwrap();
    // A queue pair in RESET, moved by raw commands.
    let pending = pd
        .create_rc(QueueSpec::new(RingSize::new(16).unwrap()))
        .unwrap();
    let qpn = pending.qpn();
    let nic = device.backend();
    let send =
        |input: Vec<u8>| nic.modify_object(&SoftObject::Qp(qpn.get()), &input, &mut [0u8; 64]);
    send(
        Rst2InitQp {
            uid: 0,
            qpn: qpn.get(),
            opt_param_mask: 0,
            pm_state: PmState::Migrated,
            vhca_port_num: 1,
            pkey_index: 0,
            access: RemoteAccess::ALL,
            atomic_mode: AtomicMode::UpTo8Bytes,
            dc_access_key: 0,
        }
        .encode()
        .unwrap(),
    )
    .unwrap();
    let peer = Gid::from_ipv4([10, 0, 0, 1]).0;
    let good = AddressPath::roce(1, peer, MAC_A, 3, 64, 0xc123);
    let rtr = |path: AddressPath| Init2RtrQp {
        uid: 0,
        qpn: qpn.get(),
        opt_param_mask: 0,
        mtu: Mtu::Mtu4096,
        log_msg_max: 30,
        remote_qpn: qpn.get(),
        next_rcv_psn: 0,
        min_rnr_nak: 12,
        log_rra_max: 4,
        path,
    };
    let refused = |path: AddressPath| match send(rtr(path).encode().unwrap()) {
        Err(NicError::Command(PrmError::CommandError {
            status, syndrome, ..
        })) => (status, syndrome),
        other => panic!("expected a refusal, got {other:?}"),
    };
    let bad = CommandStatus::BadParameter;
    assert_eq!(
        refused(AddressPath {
            rmac: [0; 6],
            ..good
        }),
        (bad, 0x0f),
        "zero MAC"
    );
    assert_eq!(
        refused(AddressPath {
            src_addr_index: 9,
            ..good
        }),
        (bad, 0x10),
        "no GID entry 9"
    );
    assert_eq!(
        refused(AddressPath {
            udp_sport: 0,
            ..good
        }),
        (bad, 0x11),
        "UDP source port 0 from a RoCE v2 GID"
    );
    assert_eq!(
        refused(AddressPath { grh: true, ..good }),
        (bad, 0x12),
        "grh set"
    );
    let status = fabric.qp_status(qpn).unwrap();
    assert_eq!((status.state, status.peer_path), (QpState::Init, None));
    // From a RoCE v1 GID there is no UDP, and any port field passes.
    send(
        rtr(AddressPath {
            src_addr_index: 2,
            udp_sport: 0,
            ..good
        })
        .encode()
        .unwrap(),
    )
    .unwrap();
    let status = fabric.qp_status(qpn).unwrap();
    assert_eq!(status.state, QpState::ReadyToReceive);
    assert_eq!(
        status.peer_path,
        Some(PeerPath::Roce(RocePath {
            gid: peer,
            mac: MAC_A,
            source_gid_index: 2,
            udp_source_port: 0,
            hop_limit: 64,
            traffic_class: 0,
        }))
    );
}

#[test]
fn an_rc_queue_pair_connected_over_roce_carries_the_path_the_control_plane_resolved() {
    let fabric = Fabric::new();
    let open = |mac, ip| {
        Device::open(SoftNic::open_roce(&fabric, mac, roce::kernel_gid_table(mac, &[ip])).unwrap())
            .unwrap()
    };
    let (a, b) = (open(MAC_A, [10, 0, 0, 1]), open(MAC_B, [10, 0, 0, 2]));
    let spec = QueueSpec::new(RingSize::new(16).unwrap());
    let (pa, pb) = (
        a.alloc_pd().unwrap().create_rc(spec).unwrap(),
        b.alloc_pd().unwrap().create_rc(spec).unwrap(),
    );
    let (ea, eb) = (pa.endpoint(), pb.endpoint());
    assert_eq!(
        ea.gid,
        Gid::from_ipv4([10, 0, 0, 1]),
        "A advertises its RoCE v2 IPv4 GID"
    );
    let (qa, qb) = (pa.connect(&eb).unwrap(), pb.connect(&ea).unwrap());
    let path = |qpn| match fabric.qp_status(qpn).unwrap().peer_path {
        Some(PeerPath::Roce(path)) => path,
        other => panic!("{other:?}"),
    };
    let sport = roce::udp_source_port(roce::flow_label(qa.qpn().get(), qb.qpn().get()));
    assert_eq!(
        path(qa.qpn()),
        RocePath {
            gid: Gid::from_ipv4([10, 0, 0, 2]).0,
            mac: MAC_B,
            source_gid_index: 3,
            udp_source_port: sport,
            hop_limit: 64,
            traffic_class: 0,
        }
    );
    // The flow label is symmetric: both directions of the connection use one port.
    assert_eq!(path(qb.qpn()).udp_source_port, sport);
    assert_eq!(path(qb.qpn()).mac, MAC_A);
}
