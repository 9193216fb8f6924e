//! NVSHMEM 3.4.5's IBGDA bring-up as read from its source, against ibgda's control plane
//! for the same configuration, both on the software NIC with its command log, compared
//! with [`prm::diff`](super::prm::diff).
//!
//! The reading: PE 0 of a two-PE job on one InfiniBand port, NVSHMEM's defaults
//! (`NVSHMEM_IBGDA_NUM_DCT` 2, `_NUM_DCI` 1, `_NUM_RC_PER_PE` 2, `QP_DEPTH` 1024,
//! `SRQ_DEPTH` 16384, NIC buffers in GPU memory, the GPU ringing the doorbell), each
//! command with the values `src/modules/transport/ibgda/ibgda.cpp` of 3.4.5 sets and in its
//! order (`nvshmemt_init`, then `nvshmemt_ibgda_connect_endpoints`): the capability
//! queries; the DC targets' verbs objects and the DCTs (the CQ and DCT commands the
//! emulated ConnectX sends for `ibv_create_cq` and `ibv_modify_qp`); the DCI's collapsed
//! CQ and queue pair at offsets of shared UMEMs; the two RC queue pairs to PE 1 (here
//! connected to each other, PE 1 not being in this process). Verbs objects the log does
//! not show (PD, SRQs, address handle, memory regions, UMEMs, UARs) are made through the
//! software NIC's own calls.
//!
//! ibgda's side: `Device::open`, two DC targets with NVSHMEM's access key and CQs of the
//! size NVSHMEM's verbs CQ gets, a DC initiator and two RC queue pairs of 1,024 WQEBBs
//! with collapsed CQs of 1,024 entries, the RC pair connected to each other.
//!
//! The test asserts every difference other than object numbers, each of them classified
//! in `emu/nvshmem-command-diff.md`; with `IBGDA_NVSHMEM_DIFF_DIR=<dir>` it also writes
//! both logs and the report there (how that document's listing was made).

use std::collections::BTreeSet;

use super::backend::{Backend, ProtectionDomainId, SharedReceiveQueueId, UarPage, UmemId};
use super::command::OUTPUT_BYTES;
use super::device::{Device, QueueSpec};
use super::prm::diff::{self, CqUse, Role, Value};
use super::prm::log::{self, CommandRecord};
use super::prm::{
    opcode, AddressPath, AtomicMode, CapabilityType, Command, CommandOutput, CqContext, CqeSize,
    CreateCq, CreateCqOutput, CreateDct, CreateDctOutput, CreateQp, CreateQpOutput, DctContext,
    Init2RtrQp, Mtu, PmState, QpCreateContext, QueryHcaCap, ReceiveQueue, RemoteAccess, Rst2InitQp,
    Rtr2RtsQp, ServiceType,
};
use super::soft::{SoftNic, SoftObject};
use crate::cq::CqMode;
use crate::memory::DmaBuffer;
use crate::softnic::Fabric;
use crate::wqe::RingSize;

/// `IBGDA_DC_ACCESS_KEY`.
const DC_ACCESS_KEY: u64 = 0x5623_ceaf;
/// `QP_DEPTH`: WQEBBs per send queue, CQEs per CQ.
const DEPTH: u32 = 1024;
/// `SRQ_DEPTH`: `ibv_create_cq(16384)` gets 2^15 CQEs (mlx5 rounds `cqe` + 1 up).
const VERBS_CQ_LOG: u8 = 15;
/// `IBGDA_GPAGE_SIZE`: every NIC buffer is allocated in whole 64 KiB GPU pages.
const GPU_PAGE: usize = 64 << 10;
/// The CQs (1 DCI + 2 RC per PE x 2 PEs) and queue pairs the shared UMEMs hold slots for.
const SLOTS: usize = 5;

/// The commands of NVSHMEM 3.4.5's bring-up as read, executed on `nic` (which must keep a
/// command log); the records the emulator would log for verbs calls get those calls' names.
fn nvshmem_3_4_5_as_read(nic: &SoftNic) -> Vec<CommandRecord> {
    let mut keep = Vec::new();
    let mut output = vec![0u8; OUTPUT_BYTES];
    let query = |capability| {
        let input = QueryHcaCap::current(capability).encode().unwrap();
        nic.general_command(&input, &mut vec![0u8; OUTPUT_BYTES])
            .unwrap();
    };
    // nvshmemt_init: nvshmemt_ib_common_query_mlx5_caps (general), the GPU mapping check of
    // a UAR (NC_DEDICATED: no command), nvshmemt_ib_common_check_nic_ext_atomic_support
    // (atomic), then nvshmemt_ib_common_query_endianness_conversion_size (atomic).
    query(CapabilityType::General);
    query(CapabilityType::Atomic);
    query(CapabilityType::Atomic);
    let pd = nic.alloc_pd().unwrap();
    let pdn = ProtectionDomainId::pdn(&pd);
    let port = nic.query_port(1).unwrap();
    let mtu = Mtu::from_wire("INIT2RTR_QP", port.mtu.code().into()).unwrap();
    let umem = |keep: &mut Vec<super::soft::SoftUmem>, len: usize| {
        let u = nic
            .register_umem_buffer(DmaBuffer::zeroed(len, 4096).unwrap())
            .unwrap();
        let id = u.umem_id();
        keep.push(u);
        id
    };
    let mut uars = Vec::new();
    let mut uar = || {
        let u = nic.alloc_uar().unwrap();
        let id = u.page_id();
        uars.push(u);
        id
    };
    // A verbs CQ as the emulated ConnectX's ibv_create_cq sends it: a ring of its own,
    // ring mode, overrun detected.
    let verbs_cq = |keep: &mut Vec<_>, uar: u32| {
        let ring = umem(keep, (1 << VERBS_CQ_LOG) * 64);
        let record = umem(keep, 64);
        let input = CreateCq {
            uid: 0,
            cqc: CqContext {
                dbr_umem_valid: true,
                dbr_umem_id: record,
                dbr_addr: 0,
                cqe_size: CqeSize::Bytes64,
                collapsed: false,
                overrun_ignore: false,
                log_cq_size: VERBS_CQ_LOG,
                uar_page: uar,
                c_eqn: 0,
                log_page_size: 0,
                page_offset: 0,
            },
            cq_umem_offset: 0,
            cq_umem_id: ring,
            cq_umem_valid: true,
        }
        .encode()
        .unwrap();
        let mut output = vec![0u8; OUTPUT_BYTES];
        nic.create_object(&input, &mut output).unwrap();
        CreateCqOutput::decode(&output).unwrap().cqn
    };

    // ibgda_create_cq_shared_objects: one UMEM for every CQ ring, one for their records.
    let cq_rings = umem(&mut keep, SLOTS * DEPTH as usize * 64);
    let cq_records = umem(&mut keep, GPU_PAGE);
    // ibgda_create_qp_shared_objects: the SRQ and its receive CQ (verbs, 16,384), the
    // shared UMEMs of every send ring and record.
    let srq = nic.create_srq(&pd, 16384).unwrap();
    let rcqn = verbs_cq(&mut keep, uar());
    let wq_rings = umem(&mut keep, SLOTS * DEPTH as usize * 64);
    let wq_records = umem(&mut keep, GPU_PAGE);
    // ibgda_create_dct_shared_objects: a general query, a parent domain (no command), an
    // SRQ of its own, a send and a receive CQ (verbs).
    query(CapabilityType::General);
    let dct_srq = nic.create_srq(&pd, 16384).unwrap();
    let _dct_send_cq = verbs_cq(&mut keep, uar());
    let dct_recv_cq = verbs_cq(&mut keep, uar());
    // ibgda_create_dct x 2: mlx5dv_create_qp, then ibv_modify_qp to INIT (no command) and
    // to RTR, where the driver sends CREATE_DCT: remote write, read and atomics (the
    // kernel's atomic mode for the device: 3 here), min_rnr_timer 12, the port's MTU, no
    // GRH on InfiniBand (hop limit 0).
    let mut dcts = Vec::new();
    for _ in 0..2 {
        let input = CreateDct {
            uid: 0,
            dctc: DctContext {
                user_index: 0,
                cqn: dct_recv_cq,
                atomic_mode: AtomicMode::UpTo8Bytes,
                access: RemoteAccess::ALL,
                min_rnr_nak: 12,
                srqn: dct_srq.srqn(),
                pd: pdn,
                tclass: 0,
                flow_label: 0,
                dc_access_key: DC_ACCESS_KEY,
                mtu,
                port: 1,
                pkey_index: 0,
                my_addr_index: 0,
                hop_limit: 0,
                eth_prio: 0,
                dscp: 0,
            },
        }
        .encode()
        .unwrap();
        dcts.push(nic.create_object(&input, &mut output).unwrap());
        CreateDctOutput::decode(&output).unwrap();
    }

    // ibgda_create_qp, slot by slot (the DCI first, then the RC queue pairs to PE 1, whose
    // user index is their place among PE 0's RC queue pairs, 2 and 3): a general query
    // (the CQE version check), the send CQ (ibgda_create_cq: collapsed, overrun ignored,
    // log_page_size 4 for 64 KiB pages, an NC UAR of its own), the queue pair's UAR
    // (NC_DEDICATED), CREATE_QP: SRQ receive side, the shared receive CQ.
    let mut create = |slot: usize, service, user_index| {
        query(CapabilityType::General);
        let cq_input = CreateCq {
            uid: 0,
            cqc: CqContext {
                dbr_umem_valid: true,
                dbr_umem_id: cq_records,
                dbr_addr: slot as u64 * 8,
                cqe_size: CqeSize::Bytes64,
                collapsed: true,
                overrun_ignore: true,
                log_cq_size: DEPTH.trailing_zeros() as u8,
                uar_page: uar(),
                c_eqn: 0,
                log_page_size: 4,
                page_offset: 0,
            },
            cq_umem_offset: (slot * DEPTH as usize * 64) as u64,
            cq_umem_id: cq_rings,
            cq_umem_valid: true,
        }
        .encode()
        .unwrap();
        let mut output = vec![0u8; OUTPUT_BYTES];
        nic.create_object(&cq_input, &mut output).unwrap();
        let cqn = CreateCqOutput::decode(&output).unwrap().cqn;
        let qp_input = CreateQp {
            uid: 0,
            opt_param_mask: 0,
            qpc: QpCreateContext {
                service_type: service,
                isolate_vl_tc: false,
                pm_state: PmState::Migrated,
                pd: pdn,
                log_sq_size: DEPTH.trailing_zeros() as u8,
                ts_format: 0,
                uar_page: uar(),
                user_index,
                log_page_size: 0,
                cqn_snd: cqn,
                page_offset: 0,
                cqn_rcv: rcqn,
                dbr_addr: slot as u64 * 8,
                receive: ReceiveQueue::Srq { srqn: srq.srqn() },
                dbr_umem_valid: true,
                dbr_umem_id: wq_records,
            },
            wq_umem_offset: (slot * DEPTH as usize * 64) as u64,
            wq_umem_id: wq_rings,
            wq_umem_valid: true,
        }
        .encode()
        .unwrap();
        let object = nic.create_object(&qp_input, &mut output).unwrap();
        (object, CreateQpOutput::decode(&output).unwrap().qpn)
    };
    let modify = |object: &SoftObject, input: Vec<u8>| {
        nic.modify_object(object, &input, &mut vec![0u8; OUTPUT_BYTES])
            .unwrap();
    };
    // ibgda_qp_rst2init: RC responders get read, write and atomics with mode 3
    // unconditionally; DCIs carry the access key; the port; P_Key index 0; migrated.
    let rst2init = |qpn, rc: bool| Rst2InitQp {
        uid: 0,
        qpn,
        opt_param_mask: 0,
        pm_state: PmState::Migrated,
        vhca_port_num: 1,
        pkey_index: 0,
        access: if rc {
            RemoteAccess::ALL
        } else {
            RemoteAccess::default()
        },
        atomic_mode: if rc {
            AtomicMode::UpTo8Bytes
        } else {
            AtomicMode::NotSet
        },
        dc_access_key: if rc { 0 } else { DC_ACCESS_KEY },
    };
    // ibgda_qp_rtr2rts: ack every packet, ilog2(max_qp_rd_atom) reads, PSN 0, retry 7,
    // RNR retry 7, ACK timeout 20.
    let rtr2rts = |qpn| Rtr2RtsQp {
        uid: 0,
        qpn,
        opt_param_mask: 0,
        log_ack_req_freq: 0,
        log_sra_max: 4,
        retry_count: 7,
        rnr_retry: 7,
        next_send_psn: 0,
        ack_timeout: 20,
    };
    // The DCI: created, then RST2INIT, INIT2RTR (ibgda_dci_init2rtr: MTU, log_msg_max 30,
    // the SL; no port), RTR2RTS.
    let (dci, dci_qpn) = create(0, ServiceType::Dci, 0);
    modify(&dci, rst2init(dci_qpn, false).encode().unwrap());
    let dci_rtr = Init2RtrQp {
        uid: 0,
        qpn: dci_qpn,
        opt_param_mask: 0,
        mtu,
        log_msg_max: 30,
        remote_qpn: 0,
        next_rcv_psn: 0,
        min_rnr_nak: 0,
        log_rra_max: 0,
        path: AddressPath::default(),
    };
    modify(&dci, dci_rtr.encode().unwrap());
    modify(&dci, rtr2rts(dci_qpn).encode().unwrap());
    // The RC queue pairs: both created, then each brought up (ibgda_rc_init2rtr on IB:
    // MTU, log_msg_max 30, the peer's QPN and LID, min_rnr_nak 12, ilog2(max_qp_rd_atom)
    // reads, traffic class and SL 0, no GRH, PSN 0; no port).
    let rcs = [create(1, ServiceType::Rc, 2), create(2, ServiceType::Rc, 3)];
    for (i, (rc, qpn)) in rcs.iter().enumerate() {
        let peer = rcs[1 - i].1;
        modify(rc, rst2init(*qpn, true).encode().unwrap());
        let rtr = Init2RtrQp {
            remote_qpn: peer,
            min_rnr_nak: 12,
            log_rra_max: 4,
            path: AddressPath {
                rlid: port.lid,
                ..AddressPath::default()
            },
            qpn: *qpn,
            ..dci_rtr
        };
        modify(rc, rtr.encode().unwrap());
        modify(rc, rtr2rts(*qpn).encode().unwrap());
    }
    let mut records = nic.command_log();
    for r in &mut records {
        match r.opcode() {
            opcode::CREATE_CQ if read_cqc_cc(r) == 0 => r.call = "ibv_create_cq".into(),
            opcode::CREATE_DCT => r.call = "ibv_modify_qp".into(),
            _ => {}
        }
    }
    drop((dcts, rcs, dci, uars, srq, dct_srq, keep, pd));
    records
}

/// `cqc.cc` of a CREATE_CQ input (the verbs CQs are the ring-mode ones here).
fn read_cqc_cc(record: &CommandRecord) -> u8 {
    match CreateCq::decode(&record.input) {
        Ok(c) => u8::from(c.cqc.collapsed),
        Err(_) => 0,
    }
}

/// ibgda's control plane for the same configuration; the log of its bring-up.
fn ibgda_same_configuration(fabric: &Fabric) -> Vec<CommandRecord> {
    let device = Device::open(SoftNic::open(fabric, 1).unwrap().with_command_log()).unwrap();
    let pd = device.alloc_pd().unwrap();
    let dcts = [
        pd.create_dct(DC_ACCESS_KEY, 1 << VERBS_CQ_LOG).unwrap(),
        pd.create_dct(DC_ACCESS_KEY, 1 << VERBS_CQ_LOG).unwrap(),
    ];
    let spec = QueueSpec {
        cq_mode: CqMode::Collapsed,
        ..QueueSpec::new(RingSize::new(DEPTH as usize).unwrap())
    };
    let dci = pd
        .create_dci::<crate::wqe::Full>(spec)
        .unwrap()
        .activate()
        .unwrap();
    let (a, b) = (pd.create_rc(spec).unwrap(), pd.create_rc(spec).unwrap());
    let (ea, eb) = (a.endpoint(), b.endpoint());
    let rcs = (a.connect(&eb).unwrap(), b.connect(&ea).unwrap());
    let records = device.backend().command_log();
    drop((rcs, dci, dcts, pd));
    records
}

/// A difference as `(command, role, occurrence, field)`.
type Key = (&'static str, Role, usize, String);

#[test]
fn nvshmem_3_4_5s_bring_up_as_read_is_accepted_and_differs_from_ours_as_classified() {
    let fabric = Fabric::new();
    let theirs_nic = SoftNic::open(&fabric, 1).unwrap().with_command_log();
    let theirs = nvshmem_3_4_5_as_read(&theirs_nic);
    // The executor accepted every command (as firmware does, so that the transport comes
    // up on the emulated ConnectX): no record failed.
    assert!(theirs.iter().all(|r| r.errno == 0), "{theirs:?}");
    let ours = ibgda_same_configuration(&Fabric::new());
    assert!(ours.iter().all(|r| r.errno == 0));
    let result = diff::diff(&theirs, &ours);

    if let Some(dir) = std::env::var_os("IBGDA_NVSHMEM_DIFF_DIR") {
        let dir = std::path::PathBuf::from(dir);
        for (name, records) in [("nvshmem-3.4.5-as-read.log", &theirs), ("ibgda.log", &ours)] {
            let mut text = Vec::new();
            log::write_header(&mut text).unwrap();
            for r in records {
                log::write_record(&mut text, r).unwrap();
            }
            std::fs::write(dir.join(name), text).unwrap();
        }
        std::fs::write(
            dir.join("diff.txt"),
            result.report("nvshmem-3.4.5-as-read.log", "ibgda.log", false),
        )
        .unwrap();
    }

    // Every difference other than object numbers, each classified in
    // emu/nvshmem-command-diff.md.
    let found: BTreeSet<Key> = result
        .paired()
        .flat_map(|p| {
            let name = p.a.as_ref().map_or("", |v| v.name);
            p.differences
                .iter()
                .filter(|d| !d.object_number)
                .map(move |d| (name, p.role, p.occurrence, d.field.clone()))
        })
        .collect();
    let key = |name, role, n, field: &str| (name, role, n, field.to_owned());
    let dci_cq = Role::Cq(CqUse::DciSend);
    let rc_cq = Role::Cq(CqUse::RcSend);
    let path = "qpc.primary_address_path.vhca_port_num";
    let expected: BTreeSet<Key> = [
        // Their quirk: log_page_size 4 where the UMEM gives firmware the page size.
        key("CREATE_CQ", dci_cq, 1, "cqc.log_page_size"),
        key("CREATE_CQ", rc_cq, 1, "cqc.log_page_size"),
        key("CREATE_CQ", rc_cq, 2, "cqc.log_page_size"),
        // Their policy: every ring and record at an offset of one shared UMEM.
        key("CREATE_CQ", rc_cq, 1, "cq_umem_offset"),
        key("CREATE_CQ", rc_cq, 1, "cqc.dbr_addr"),
        key("CREATE_CQ", rc_cq, 2, "cq_umem_offset"),
        key("CREATE_CQ", rc_cq, 2, "cqc.dbr_addr"),
        key("CREATE_QP", Role::Rc, 1, "wq_umem_offset"),
        key("CREATE_QP", Role::Rc, 1, "qpc.dbr_addr"),
        key("CREATE_QP", Role::Rc, 2, "wq_umem_offset"),
        key("CREATE_QP", Role::Rc, 2, "qpc.dbr_addr"),
        // Their policy: the user index is the queue pair's place.
        key("CREATE_QP", Role::Rc, 1, "qpc.user_index"),
        key("CREATE_QP", Role::Rc, 2, "qpc.user_index"),
        // Policy both ways: RC queue pairs on the SRQ (theirs) or with no receive queue.
        key("CREATE_QP", Role::Rc, 1, "qpc.rq_type"),
        key("CREATE_QP", Role::Rc, 2, "qpc.rq_type"),
        // Their policy: the DCI's context carries the access key (each WQE does anyway).
        key("RST2INIT_QP", Role::Dci, 1, "qpc.dc_access_key"),
        // Theirs leave the port out of INIT2RTR (RST2INIT set it); ours, as the kernel.
        key("INIT2RTR_QP", Role::Dci, 1, path),
        key("INIT2RTR_QP", Role::Rc, 1, path),
        key("INIT2RTR_QP", Role::Rc, 2, path),
        // Our policy: a PSN per queue pair and connection, theirs 0.
        key("INIT2RTR_QP", Role::Rc, 1, "qpc.next_rcv_psn"),
        key("INIT2RTR_QP", Role::Rc, 2, "qpc.next_rcv_psn"),
        key("RTR2RTS_QP", Role::Rc, 1, "qpc.next_send_psn"),
        key("RTR2RTS_QP", Role::Rc, 2, "qpc.next_send_psn"),
        // The DCT through verbs (the kernel's driver builds it) against ours through DEVX.
        key("CREATE_DCT", Role::Dct, 1, "call"),
        key("CREATE_DCT", Role::Dct, 2, "call"),
        key("CREATE_DCT", Role::Dct, 1, "dctc.hop_limit"),
        key("CREATE_DCT", Role::Dct, 2, "dctc.hop_limit"),
        key("CREATE_CQ", Role::Cq(CqUse::DcTarget), 1, "call"),
    ]
    .into_iter()
    .collect();
    let missing: Vec<_> = expected.difference(&found).collect();
    let extra: Vec<_> = found.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:#?}\nextra {extra:#?}\n{}",
        result.report("theirs", "ours", false)
    );

    // The values.
    let value = |name: &str, role, n, field: &str| {
        let p = result
            .paired()
            .find(|p| p.a.as_ref().unwrap().name == name && p.role == role && p.occurrence == n)
            .unwrap();
        let d = p.differences.iter().find(|d| d.field == field).unwrap();
        (d.a.clone(), d.b.clone())
    };
    let int = |v: u128| Some(Value::Int(v));
    assert_eq!(
        value("CREATE_CQ", dci_cq, 1, "cqc.log_page_size"),
        (int(4), int(0))
    );
    assert_eq!(
        value("CREATE_CQ", rc_cq, 2, "cq_umem_offset"),
        (int(2 * 1024 * 64), int(0))
    );
    assert_eq!(
        value("CREATE_QP", Role::Rc, 1, "qpc.rq_type"),
        (int(1), int(3))
    );
    assert_eq!(
        value("RST2INIT_QP", Role::Dci, 1, "qpc.dc_access_key"),
        (int(DC_ACCESS_KEY.into()), int(0))
    );
    assert_eq!(value("INIT2RTR_QP", Role::Dci, 1, path), (int(0), int(1)));
    assert_eq!(
        value("CREATE_DCT", Role::Dct, 1, "dctc.hop_limit"),
        (int(0), int(64))
    );
    let (their_psn, our_psn) = value("RTR2RTS_QP", Role::Rc, 1, "qpc.next_send_psn");
    assert_eq!(their_psn, int(0));
    assert_ne!(our_psn, int(0));

    // What only one side sends: their extra capability queries (one per queue pair, one
    // for the DC targets, the atomic page twice), their verbs receive CQs (the SRQ's, and
    // the DC targets' send CQ no command names); our second DC target CQ (theirs share
    // one).
    let only = |views: Vec<&diff::CommandView>| -> Vec<(&'static str, Role)> {
        views.iter().map(|v| (v.name, v.role)).collect()
    };
    let general = Role::Capability(0x1);
    assert_eq!(
        only(result.only_a().collect()),
        vec![
            ("QUERY_HCA_CAP", Role::Capability(0x7)),
            ("CREATE_CQ", Role::Cq(CqUse::Receive)),
            ("QUERY_HCA_CAP", general),
            ("CREATE_CQ", Role::Cq(CqUse::Unused)),
            ("QUERY_HCA_CAP", general),
            ("QUERY_HCA_CAP", general),
            ("QUERY_HCA_CAP", general),
        ]
    );
    assert_eq!(
        only(result.only_b().collect()),
        vec![("CREATE_CQ", Role::Cq(CqUse::DcTarget))]
    );
    // Neither stream has a command this crate's decoder refuses.
    assert!(result
        .pairs
        .iter()
        .flat_map(|p| [&p.a, &p.b])
        .flatten()
        .all(|v| v.refused.is_none()));
}
