//! The command diff on logs with known differences.

use super::*;
use crate::nic::prm::layout::{create_qp_in, QP_COMMAND_QPC};
use crate::nic::prm::log::{self, CommandRecord};
use crate::nic::prm::{
    AtomicMode, CapabilityType, Command, CommandOutput, CqContext, CqeSize, CreateCq,
    CreateCqOutput, CreateQp, CreateQpOutput, PmState, QpCreateContext, QueryHcaCap, ReceiveQueue,
    RemoteAccess, Rst2InitQp, ServiceType,
};

fn record(seq: u64, call: &str, input: Vec<u8>, output: Vec<u8>) -> CommandRecord {
    CommandRecord {
        seq,
        device: "mlx5_0".into(),
        call: call.into(),
        errno: 0,
        attributes: Vec::new(),
        input,
        output,
    }
}

fn query(seq: u64) -> CommandRecord {
    record(
        seq,
        "mlx5dv_devx_general_cmd",
        QueryHcaCap::current(CapabilityType::General)
            .encode()
            .unwrap(),
        vec![0; 16],
    )
}

struct Cq {
    cqn: u32,
    log_page_size: u8,
    collapsed: bool,
    umem_offset: u64,
    dbr_addr: u64,
    uar_page: u32,
}

fn create_cq(seq: u64, cq: Cq) -> CommandRecord {
    let input = CreateCq {
        uid: 0,
        cqc: CqContext {
            dbr_umem_valid: true,
            dbr_umem_id: 0x20,
            dbr_addr: cq.dbr_addr,
            cqe_size: CqeSize::Bytes64,
            collapsed: cq.collapsed,
            overrun_ignore: true,
            log_cq_size: 10,
            uar_page: cq.uar_page,
            c_eqn: 0,
            log_page_size: cq.log_page_size,
            page_offset: 0,
        },
        cq_umem_offset: cq.umem_offset,
        cq_umem_id: 0x21,
        cq_umem_valid: true,
    }
    .encode()
    .unwrap();
    let output = CreateCqOutput { cqn: cq.cqn }.encode().unwrap();
    record(seq, "mlx5dv_devx_obj_create", input, output)
}

fn create_qp(
    seq: u64,
    service: ServiceType,
    qpn: u32,
    cqn_snd: u32,
    cqn_rcv: u32,
    receive: ReceiveQueue,
) -> CommandRecord {
    let input = CreateQp {
        uid: 0,
        opt_param_mask: 0,
        qpc: QpCreateContext {
            service_type: service,
            isolate_vl_tc: false,
            pm_state: PmState::Migrated,
            pd: 1,
            log_sq_size: 10,
            ts_format: 0,
            uar_page: 2,
            user_index: 0,
            log_page_size: 0,
            cqn_snd,
            page_offset: 0,
            cqn_rcv,
            dbr_addr: 0,
            receive,
            dbr_umem_valid: true,
            dbr_umem_id: 0x30,
        },
        wq_umem_offset: 0,
        wq_umem_id: 0x31,
        wq_umem_valid: true,
    }
    .encode()
    .unwrap();
    let output = CreateQpOutput { qpn }.encode().unwrap();
    record(seq, "mlx5dv_devx_obj_create", input, output)
}

fn rst2init(seq: u64, qpn: u32, dc_access_key: u64) -> CommandRecord {
    let input = Rst2InitQp {
        uid: 0,
        qpn,
        opt_param_mask: 0,
        pm_state: PmState::Migrated,
        vhca_port_num: 1,
        pkey_index: 0,
        access: RemoteAccess::default(),
        atomic_mode: AtomicMode::NotSet,
        dc_access_key,
    }
    .encode()
    .unwrap();
    record(seq, "mlx5dv_devx_obj_modify", input, vec![0; 16])
}

/// Sets bit `bit` (from the most significant bit of byte 0) of `bytes`.
fn set_bit(bytes: &mut [u8], bit: u32) {
    bytes[(bit / 8) as usize] |= 0x80 >> (bit % 8);
}

/// What NVSHMEM-like and ibgda-like streams differ in, field by field.
fn theirs() -> Vec<CommandRecord> {
    let mut rst = rst2init(7, 0x100, 0x5623_ceaf);
    // qpc.fre (rdma-core: qpc bit 0x394) and a reserved bit of qpc dword 0x3a0.
    set_bit(&mut rst.input, QP_COMMAND_QPC + 0x394);
    set_bit(&mut rst.input, QP_COMMAND_QPC + 0x3a1);
    let mut alloc_pd = record(8, "ibv_alloc_pd", vec![0; 16], vec![0; 16]);
    alloc_pd.input[0] = 0x08; // opcode 0x800, ALLOC_PD
    alloc_pd.input[8] = 0x12; // bits 0x40..0x48
    vec![
        query(1),
        query(2),
        // The receive CQ (verbs), then the DCI's send CQ at an offset of a shared UMEM.
        create_cq(
            3,
            Cq {
                cqn: 0x401,
                log_page_size: 0,
                collapsed: false,
                umem_offset: 0,
                dbr_addr: 0,
                uar_page: 6,
            },
        ),
        create_cq(
            4,
            Cq {
                cqn: 0x400,
                log_page_size: 4,
                collapsed: true,
                umem_offset: 0x10000,
                dbr_addr: 8,
                uar_page: 7,
            },
        ),
        create_qp(
            5,
            ServiceType::Dci,
            0x100,
            0x400,
            0x401,
            ReceiveQueue::Srq { srqn: 3 },
        ),
        rst,
        alloc_pd,
    ]
}

fn ours() -> Vec<CommandRecord> {
    vec![
        query(1),
        create_cq(
            2,
            Cq {
                cqn: 0x500,
                log_page_size: 0,
                collapsed: false,
                umem_offset: 0,
                dbr_addr: 0,
                uar_page: 7,
            },
        ),
        create_qp(
            3,
            ServiceType::Dci,
            0x200,
            0x500,
            0x500,
            ReceiveQueue::Srq { srqn: 9 },
        ),
        rst2init(4, 0x200, 0),
    ]
}

fn shown(pair: &Pair) -> Vec<(&str, Option<&Value>, Option<&Value>)> {
    pair.differences
        .iter()
        .filter(|d| !d.object_number)
        .map(|d| (d.field.as_str(), d.a.as_ref(), d.b.as_ref()))
        .collect()
}

fn int(v: u128) -> Option<Value> {
    Some(Value::Int(v))
}

#[test]
fn commands_pair_by_opcode_and_role_and_fields_differ_by_name() {
    let result = diff(&theirs(), &ours());
    let seqs: Vec<(Option<u64>, Option<u64>, Role)> = result
        .pairs
        .iter()
        .map(|p| {
            (
                p.a.as_ref().map(|v| v.seq),
                p.b.as_ref().map(|v| v.seq),
                p.role,
            )
        })
        .collect();
    assert_eq!(
        seqs,
        vec![
            (Some(1), Some(1), Role::Capability(1)),
            (Some(2), None, Role::Capability(1)),
            (Some(3), None, Role::Cq(CqUse::Receive)),
            (Some(4), Some(2), Role::Cq(CqUse::DciSend)),
            (Some(5), Some(3), Role::Dci),
            (Some(7), Some(4), Role::Dci),
            (Some(8), None, Role::None),
        ]
    );
    // The identical capability queries.
    assert!(result.pairs[0].differences.is_empty());
    assert_eq!(result.pairs[1].occurrence, 2);

    // The DCI's send CQ: page size, collapsing, its place in the UMEMs; the UAR page is the
    // same number (7) in both, so it does not differ.
    let cq = &result.pairs[3];
    assert_eq!(
        shown(cq),
        vec![
            ("cq_umem_offset", int(0x10000).as_ref(), int(0).as_ref()),
            ("cqc.cc", int(1).as_ref(), int(0).as_ref()),
            ("cqc.log_page_size", int(4).as_ref(), int(0).as_ref()),
            ("cqc.dbr_addr", int(8).as_ref(), int(0).as_ref()),
        ]
    );
    assert!(cq.differences.iter().all(|d| d.field != "cqc.uar_page"));

    // The DCI: only object numbers (its CQs and the SRQ) differ.
    let qp = &result.pairs[4];
    assert!(shown(qp).is_empty(), "{:?}", qp.differences);
    let numbers: Vec<&str> = qp.differences.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(
        numbers,
        vec!["qpc.cqn_snd", "qpc.cqn_rcv", "qpc.srqn_rmpn_xrqn"]
    );

    // RST2INIT of the DCI: the access key, fre by its name, and the reserved bit by its
    // dword of the qpc (0x3a0 / 8 = 0x74; bit 0x3a1 is the dword's second bit).
    let rst = &result.pairs[5];
    assert_eq!(
        shown(rst),
        vec![
            (
                "qpc.dc_access_key",
                int(0x5623_ceaf).as_ref(),
                int(0).as_ref()
            ),
            ("qpc.fre", int(1).as_ref(), int(0).as_ref()),
            (
                "qpc+0x74 undeclared",
                int(0x4000_0000).as_ref(),
                int(0).as_ref()
            ),
        ]
    );
    // This crate's decoder refuses the bits it does not know.
    let refused = rst.a.as_ref().unwrap().refused.as_deref().unwrap();
    assert!(refused.contains("RST2INIT_QP"), "{refused}");
    assert_eq!(rst.b.as_ref().unwrap().refused, None);

    // A command no layout describes: by name, its set bits undeclared.
    let pd = result.pairs[6].a.as_ref().unwrap();
    assert_eq!(
        (pd.name, pd.opcode, pd.described),
        ("ALLOC_PD", 0x800, false)
    );
    assert_eq!(
        pd.field("ALLOC_PD+0x8 undeclared"),
        int(0x1200_0000).as_ref()
    );
    assert!(pd.refused.as_deref().unwrap().contains("ALLOC_PD"));
}

#[test]
fn creation_order_does_not_decide_the_pairing() {
    // A: the RC queue pair's CQ and queue pair, then the DCI's. B: the other way round.
    let cq = |seq, cqn| {
        create_cq(
            seq,
            Cq {
                cqn,
                log_page_size: 0,
                collapsed: cqn % 2 == 0,
                umem_offset: 0,
                dbr_addr: 0,
                uar_page: 1,
            },
        )
    };
    let a = vec![
        cq(1, 0x10),
        create_qp(2, ServiceType::Rc, 0x50, 0x10, 0x10, ReceiveQueue::ZeroSize),
        cq(3, 0x11),
        create_qp(
            4,
            ServiceType::Dci,
            0x51,
            0x11,
            0x11,
            ReceiveQueue::Srq { srqn: 1 },
        ),
    ];
    let b = vec![
        cq(1, 0x21),
        create_qp(
            2,
            ServiceType::Dci,
            0x60,
            0x21,
            0x21,
            ReceiveQueue::Srq { srqn: 1 },
        ),
        cq(3, 0x20),
        create_qp(4, ServiceType::Rc, 0x61, 0x20, 0x20, ReceiveQueue::ZeroSize),
    ];
    let result = diff(&a, &b);
    let seqs: Vec<(u64, u64, Role)> = result
        .paired()
        .map(|p| (p.a.as_ref().unwrap().seq, p.b.as_ref().unwrap().seq, p.role))
        .collect();
    assert_eq!(
        seqs,
        vec![
            (1, 3, Role::Cq(CqUse::RcSend)),
            (2, 4, Role::Rc),
            (3, 1, Role::Cq(CqUse::DciSend)),
            (4, 2, Role::Dci),
        ]
    );
    // Both RC CQs are collapsed (even CQNs), both DCI CQs not: no differences but numbers.
    assert!(result.paired().all(|p| shown(p).is_empty()));
    assert_eq!(result.only_a().count() + result.only_b().count(), 0);
}

#[test]
fn a_transition_of_a_queue_pair_the_log_never_created_has_an_unknown_role() {
    let result = diff(&[rst2init(1, 0x77, 0)], &[]);
    assert_eq!(result.pairs[0].role, Role::Unknown);
    assert_eq!(result.only_a().count(), 1);
}

#[test]
fn the_report_lists_differences_and_hides_object_numbers_unless_asked() {
    let result = diff(&theirs(), &ours());
    let text = result.report("nvshmem.log", "ibgda.log", false);
    assert!(text.contains("A: nvshmem.log (7 commands)"), "{text}");
    assert!(text.contains("B: ibgda.log (4 commands)"), "{text}");
    assert!(
        text.contains(
            "4 paired (2 with differences other than object numbers), 3 only in A, 0 only in B"
        ),
        "{text}"
    );
    assert!(
        text.contains("CREATE_CQ [send CQ of a DCI] #1: A seq 4"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("cqc.log_page_size"))
        .unwrap();
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        ["cqc.log_page_size", "A", "4", "B", "0"]
    );
    assert!(!text.contains("srqn_rmpn_xrqn"), "{text}");
    assert!(text.contains("seq 8 ALLOC_PD (opcode 0x0800)"), "{text}");
    assert!(text.contains("refused by ibgda's decoder"), "{text}");
    let all = result.report("nvshmem.log", "ibgda.log", true);
    assert!(all.contains("qpc.srqn_rmpn_xrqn"), "{all}");
    assert!(
        all.contains("4 paired (3 with differences), 3 only in A, 0 only in B"),
        "{all}"
    );
}

#[test]
fn attributes_and_calls_compare_as_text() {
    let mut a = query(1);
    a.attributes.push(("uar_type".into(), "nc".into()));
    let mut b = query(1);
    b.attributes.push(("uar_type".into(), "bf".into()));
    b.call = "ibv_other".into();
    let result = diff(&[a], &[b]);
    let fields: Vec<(&str, Option<&Value>, Option<&Value>)> = shown(&result.pairs[0]);
    assert_eq!(
        fields,
        vec![
            (
                "call",
                Some(&Value::Text("mlx5dv_devx_general_cmd".into())),
                Some(&Value::Text("ibv_other".into()))
            ),
            (
                "attribute uar_type",
                Some(&Value::Text("nc".into())),
                Some(&Value::Text("bf".into()))
            ),
        ]
    );
}

#[test]
fn short_and_empty_inputs_are_read_without_panicking() {
    let short = record(1, "x", vec![0x05, 0x00, 0, 0], vec![]);
    let empty = record(2, "x", vec![], vec![1, 2, 3]);
    let views = view(&[short, empty]);
    assert_eq!(views[0].name, "CREATE_QP");
    assert_eq!(views[0].field("input bytes"), int(4).as_ref());
    assert_eq!(views[0].field("qpc.st"), int(0).as_ref());
    assert_eq!(views[1].opcode, 0);
    assert_eq!(views[1].field("status"), None);
    assert!(!views[1].described);
}

#[test]
fn a_log_read_back_diffs_as_written() {
    let mut text = Vec::new();
    log::write_header(&mut text).unwrap();
    for r in theirs() {
        log::write_record(&mut text, &r).unwrap();
    }
    let parsed = log::parse(std::str::from_utf8(&text).unwrap()).unwrap();
    assert_eq!(diff(&parsed, &ours()), diff(&theirs(), &ours()));
}

#[test]
fn the_other_fields_never_overlap_the_declared_ones() {
    use crate::nic::prm::layout::{ads, ads_other, cqc, cqc_other, qpc, qpc_other};
    for (main, other) in [
        (qpc::LAYOUT, qpc_other::LAYOUT),
        (ads::LAYOUT, ads_other::LAYOUT),
        (cqc::LAYOUT, cqc_other::LAYOUT),
    ] {
        assert_eq!((main.name, main.bits), (other.name, other.bits));
        for f in main.fields {
            for g in other.fields {
                assert!(
                    f.end() <= g.bit_offset || g.end() <= f.bit_offset,
                    "{}.{} overlaps {}",
                    main.name,
                    f.name,
                    g.name
                );
                assert_ne!(f.name, g.name);
            }
        }
    }
    // Pinned from rdma-core 56.1's mlx5_ifc.h by hand: fre and rlky, where the copyrpc
    // report suspects them.
    assert!(qpc_other::LAYOUT.has("fre", 0x394, 1));
    assert!(qpc_other::LAYOUT.has("rlky", 0x05b, 1));
    assert!(qpc_other::LAYOUT.has("cs_res", 0x638, 8));
    assert!(ads_other::LAYOUT.has("mlid", 0x029, 7));
    let _ = create_qp_in::LAYOUT;
}
