//! Writes the seed corpus of the `prm_commands` target: real encoded commands and outputs
//! (the shapes the control plane sends: RC and DCI QPs with SRQ, zero-size and regular
//! RQs, RoCE and InfiniBand paths, collapsed overrun-ignore CQs, a DCT, failed outputs),
//! each prefixed with the selector byte of its decoder, under `fuzz/corpus/prm_commands/`.
//!
//! Run: `cargo run --release --example make_prm_corpus` in `fuzz/`. Deterministic.

use std::fs;
use std::path::Path;

use ibgda::nic::prm::*;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/prm_commands");
    if dir.exists() {
        fs::remove_dir_all(&dir).expect("clear the old seeds");
    }
    fs::create_dir_all(&dir).expect("create the corpus directory");
    let save = |name: &str, selector: u8, bytes: Vec<u8>| {
        let mut input = vec![selector];
        input.extend_from_slice(&bytes);
        fs::write(dir.join(name), input).expect("write a seed");
    };

    save(
        "query-general",
        0,
        QueryHcaCap::current(CapabilityType::General)
            .encode()
            .unwrap(),
    );
    save(
        "query-atomic",
        0,
        QueryHcaCap::current(CapabilityType::Atomic)
            .encode()
            .unwrap(),
    );
    save("alloc-uar", 1, AllocUar.encode().unwrap());
    save("dealloc-uar", 2, DeallocUar { uar: 0x42 }.encode().unwrap());
    let cq = CreateCq {
        uid: 0,
        cqc: CqContext {
            dbr_umem_valid: true,
            dbr_umem_id: 7,
            dbr_addr: 0x40,
            cqe_size: CqeSize::Bytes64,
            collapsed: true,
            overrun_ignore: true,
            log_cq_size: 10,
            uar_page: 0x55,
            c_eqn: 3,
            log_page_size: 0,
            page_offset: 0,
        },
        cq_umem_offset: 0x1000,
        cq_umem_id: 6,
        cq_umem_valid: true,
    };
    save("create-cq", 3, cq.encode().unwrap());
    save(
        "destroy-cq",
        4,
        DestroyCq { uid: 0, cqn: 0x401 }.encode().unwrap(),
    );
    for (name, service_type, receive) in [
        (
            "create-qp-rc-srq",
            ServiceType::Rc,
            ReceiveQueue::Srq { srqn: 0x99 },
        ),
        (
            "create-qp-rc-zero-rq",
            ServiceType::Rc,
            ReceiveQueue::ZeroSize,
        ),
        (
            "create-qp-rc-regular-rq",
            ServiceType::Rc,
            ReceiveQueue::Regular {
                log_rq_size: 6,
                log_rq_stride: 2,
            },
        ),
        ("create-qp-dci", ServiceType::Dci, ReceiveQueue::ZeroSize),
    ] {
        let qp = CreateQp {
            uid: 0,
            opt_param_mask: 0,
            qpc: QpCreateContext {
                service_type,
                isolate_vl_tc: false,
                pm_state: PmState::Migrated,
                pd: 0x12,
                log_sq_size: 8,
                ts_format: 1,
                uar_page: 0x55,
                user_index: 0x77,
                log_page_size: 0,
                cqn_snd: 0x401,
                page_offset: 0,
                cqn_rcv: 0x402,
                dbr_addr: 0x80,
                receive,
                dbr_umem_valid: true,
                dbr_umem_id: 9,
            },
            wq_umem_offset: 0x2000,
            wq_umem_id: 8,
            wq_umem_valid: true,
        };
        save(name, 5, qp.encode().unwrap());
    }
    save(
        "destroy-qp",
        6,
        DestroyQp {
            uid: 0,
            qpn: 0x1234,
        }
        .encode()
        .unwrap(),
    );
    save(
        "rst2init-rc",
        7,
        Rst2InitQp {
            uid: 0,
            qpn: 0x1234,
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
    );
    save(
        "rst2init-dci",
        7,
        Rst2InitQp {
            uid: 0,
            qpn: 0x1235,
            opt_param_mask: 0,
            pm_state: PmState::Migrated,
            vhca_port_num: 1,
            pkey_index: 0,
            access: RemoteAccess::default(),
            atomic_mode: AtomicMode::NotSet,
            dc_access_key: 0xdead_beef_cafe_f00d,
        }
        .encode()
        .unwrap(),
    );
    let ib = AddressPath {
        rlid: 0x11,
        sl: 3,
        vhca_port_num: 1,
        ..AddressPath::default()
    };
    let roce = AddressPath {
        grh: true,
        src_addr_index: 3,
        hop_limit: 64,
        rgid: [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55,
        ],
        udp_sport: 0xc000,
        vhca_port_num: 1,
        rmac: [2, 0x11, 0x22, 0x33, 0x44, 0x55],
        ..AddressPath::default()
    };
    for (name, path) in [("init2rtr-ib", ib), ("init2rtr-roce", roce)] {
        let rtr = Init2RtrQp {
            uid: 0,
            qpn: 0x1234,
            opt_param_mask: 0,
            mtu: Mtu::Mtu4096,
            log_msg_max: 30,
            remote_qpn: 0x4321,
            next_rcv_psn: 0,
            min_rnr_nak: 12,
            log_rra_max: 4,
            path,
        };
        save(name, 8, rtr.encode().unwrap());
    }
    save(
        "rtr2rts",
        9,
        Rtr2RtsQp {
            uid: 0,
            qpn: 0x1234,
            opt_param_mask: 0,
            log_ack_req_freq: 0,
            log_sra_max: 4,
            retry_count: 7,
            rnr_retry: 7,
            next_send_psn: 0,
            ack_timeout: 20,
        }
        .encode()
        .unwrap(),
    );
    let dct = CreateDct {
        uid: 0,
        dctc: DctContext {
            user_index: 0x10,
            cqn: 0x403,
            atomic_mode: AtomicMode::UpTo8Bytes,
            access: RemoteAccess::ALL,
            min_rnr_nak: 12,
            srqn: 0x99,
            pd: 0x12,
            tclass: 0,
            flow_label: 0,
            dc_access_key: 0xdead_beef_cafe_f00d,
            mtu: Mtu::Mtu4096,
            port: 1,
            pkey_index: 0,
            my_addr_index: 3,
            hop_limit: 64,
            eth_prio: 0,
            dscp: 0,
        },
    };
    save("create-dct", 10, dct.encode().unwrap());
    save(
        "destroy-dct",
        11,
        DestroyDct {
            uid: 0,
            dctn: 0x500,
        }
        .encode()
        .unwrap(),
    );
    save(
        "qp-2err",
        23,
        Qp2Err {
            uid: 0,
            qpn: 0x1234,
        }
        .encode()
        .unwrap(),
    );
    save(
        "qp-2rst",
        24,
        Qp2Rst {
            uid: 0,
            qpn: 0x1234,
        }
        .encode()
        .unwrap(),
    );
    let general = GeneralCaps {
        log_max_qp_sz: 15,
        log_max_cq_sz: 22,
        cqe_version: 1,
        compact_address_vector: true,
        dct: true,
        atomic: true,
        rc: true,
        log_bf_reg_size: 9,
        max_wqe_sz_sq: 1024,
        ..GeneralCaps::default()
    };
    save(
        "caps-general",
        12,
        QueryHcaCapOutput::General(general).encode().unwrap(),
    );
    let atomic = AtomicCaps {
        endianness_mode: AtomicEndianness::HostEndian,
        host_endianness_supported: true,
        atomic_operations: 0xf,
        atomic_size_qp: 0x8 | 0x4,
        atomic_size_dc: 0x8 | 0x4,
    };
    save(
        "caps-atomic",
        13,
        QueryHcaCapOutput::Atomic(atomic).encode().unwrap(),
    );
    save(
        "alloc-uar-out",
        14,
        AllocUarOutput { uar: 0x55 }.encode().unwrap(),
    );
    save(
        "create-cq-out",
        16,
        CreateCqOutput { cqn: 0x401 }.encode().unwrap(),
    );
    save(
        "create-qp-out",
        17,
        CreateQpOutput { qpn: 0x1234 }.encode().unwrap(),
    );
    save(
        "create-qp-out-failed",
        17,
        CreateQpOutput::encode_failure(CommandStatus::BadParameter, 0x68).unwrap(),
    );
    save(
        "create-dct-out",
        18,
        CreateDctOutput { dctn: 0x500 }.encode().unwrap(),
    );
    save(
        "init2rtr-out-failed",
        20,
        Init2RtrQpOutput::encode_failure(CommandStatus::BadQpState, 0x1).unwrap(),
    );
}
