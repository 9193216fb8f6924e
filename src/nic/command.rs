//! The values the control plane puts in every PRM command it sends, as prm's typed
//! commands, and the reading of their outputs. Each choice is where NVSHMEM and DOCA
//! agree (reference: the control-plane notes), unless its comment says otherwise.

use super::caps::{AtomicEndianness, DeviceCaps};
use super::error::NicError;
use super::prm::{
    self, AddressPath, AtomicMode, CapabilityType, Command, CommandOutput, CqContext, CqeSize,
    CreateCq, CreateDct, CreateQp, DctContext, DestroyCq, DestroyDct, DestroyQp, Init2RtrQp,
    PmState, PrmError, Qp2Err, Qp2Rst, QpCreateContext, QueryHcaCap, QueryHcaCapOutput,
    ReceiveQueue, RemoteAccess, Rst2InitQp, Rtr2RtsQp, ServiceType,
};

/// Output buffer size for every command (the largest output is QUERY_HCA_CAP's).
pub(crate) const OUTPUT_BYTES: usize = QueryHcaCapOutput::OUTPUT_BYTES;

/// The largest message asked for: 2^30 bytes (NVSHMEM's `IBGDA_LOG_MAX_MSG_SIZE`, the most
/// an InfiniBand QP takes), less where the device's `log_max_msg` is smaller.
pub(crate) const LOG_MAX_MESSAGE: u8 = 30;
/// RC retry count and RNR retry: 7 (RNR 7 = retry forever), as NVSHMEM and DOCA set them.
pub(crate) const RETRY_COUNT: u8 = 7;
/// See [`RETRY_COUNT`].
pub(crate) const RNR_RETRY: u8 = 7;
/// Local ACK timeout exponent: 4.096 µs × 2^20 ≈ 4.3 s.
pub(crate) const ACK_TIMEOUT: u8 = 20;
/// Minimal RNR NAK timer code 12 (0.64 ms), what verbs examples use.
pub(crate) const MIN_RNR_NAK: u8 = 12;
/// Outstanding RDMA READ / atomic requests asked for, as requester and responder: 2^4 (a
/// ConnectX-7's limit), less where the device's `log_max_ra_*` is smaller, as NVSHMEM
/// takes them from the device (`ilog2(max_qp_rd_atom)`) and firmware refuses more.
pub(crate) const LOG_RDMA_ATOMIC_OUTSTANDING: u8 = 4;

/// The outstanding reads and atomics and the message size a queue pair asks for on a device
/// with `caps`: [`LOG_RDMA_ATOMIC_OUTSTANDING`] and [`LOG_MAX_MESSAGE`] capped at the
/// device's limits (for a DC initiator, its `_dc` limit as requester; it serves nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// INIT2RTR's `log_msg_max`.
    pub(crate) log_msg_max: u8,
    /// INIT2RTR's `log_rra_max` (RC responders).
    pub(crate) log_rra_max: u8,
    /// RTR2RTS's `log_sra_max`.
    pub(crate) log_sra_max: u8,
}

impl Limits {
    /// The limits of an RC queue pair (`rc`) or a DC initiator on a device with `caps`.
    pub(crate) fn of(caps: &DeviceCaps, rc: bool) -> Self {
        let requester = if rc {
            caps.log_max_ra_req_qp
        } else {
            caps.log_max_ra_req_dc
        };
        Self {
            log_msg_max: LOG_MAX_MESSAGE.min(caps.log_max_msg),
            log_rra_max: if rc {
                LOG_RDMA_ATOMIC_OUTSTANDING.min(caps.log_max_ra_res_qp)
            } else {
                0
            },
            log_sra_max: LOG_RDMA_ATOMIC_OUTSTANDING.min(requester),
        }
    }
}

/// `masked compare-swap` and `masked fetch-add` bits of `atomic_operations` (bit 2 and
/// bit 3, rdma-core's `MLX5_ATOMIC_OPS_MASKED_CMP_SWAP` / `_FETCH_ADD`, the kernel's
/// `MLX5_ATOMIC_OPS_EXTENDED_*`).
const MASKED_ATOMIC_OPERATIONS: u16 = 0b1100;
/// `compare-swap` and `fetch-add` bits of `atomic_operations` (bits 0 and 1).
const STANDARD_ATOMIC_OPERATIONS: u16 = 0b0011;
/// Bit 3 of `atomic_size_qp` / `atomic_size_dc`: 8-byte operands.
const EIGHT_BYTE_ATOMICS: u16 = 1 << 3;

/// What a responder's context asks for atomics (`rae` and `atomic_mode` of RST2INIT and
/// CREATE_DCT), chosen from the device's capabilities as the kernel's mlx5 driver chooses
/// it, capped at 8 bytes (the largest atomic this crate issues):
///
/// - no `atomic` capability: no atomics (`rae` 0, mode 0);
/// - the extended (masked) atomics with 8-byte operands for this transport
///   (`atomic_size_qp`, or `atomic_size_dc` for a DC target): mode 3, up to 8 bytes, which
///   masked compare-swap and fetch-add need;
/// - else compare-swap and fetch-add: mode 1, InfiniBand-compatible (what DOCA and NCCL
///   set);
/// - else no atomics.
pub(crate) fn atomic_access(caps: &DeviceCaps, dc_target: bool) -> (bool, AtomicMode) {
    let sizes = if dc_target {
        caps.atomic_sizes_dc
    } else {
        caps.atomic_sizes
    };
    if !caps.atomic {
        (false, AtomicMode::NotSet)
    } else if caps.masked_atomics && sizes & EIGHT_BYTE_ATOMICS != 0 {
        (true, AtomicMode::UpTo8Bytes)
    } else if caps.standard_atomics {
        (true, AtomicMode::IbCompatible)
    } else {
        (false, AtomicMode::NotSet)
    }
}

/// Reads the general and atomic capability pages through `run` (the backend's general
/// command channel).
pub(crate) fn query_caps(
    run: impl Fn(&[u8], &mut [u8]) -> Result<(), NicError>,
) -> Result<DeviceCaps, NicError> {
    let query = |capability| -> Result<QueryHcaCapOutput, NicError> {
        let input = QueryHcaCap::current(capability).encode()?;
        let mut output = vec![0u8; OUTPUT_BYTES];
        run(&input, &mut output)?;
        Ok(QueryHcaCapOutput::decode(capability, &output)?)
    };
    let QueryHcaCapOutput::General(general) = query(CapabilityType::General)? else {
        return Err(NicError::Command(PrmError::InvalidValue {
            command: "QUERY_HCA_CAP",
            field: "capability page",
            value: 0,
        }));
    };
    let atomic = if general.atomic {
        match query(CapabilityType::Atomic)? {
            QueryHcaCapOutput::Atomic(atomic) => Some(atomic),
            QueryHcaCapOutput::General(_) => None,
        }
    } else {
        None
    };
    let atomic_endianness = match atomic.map(|a| a.endianness_mode) {
        Some(prm::AtomicEndianness::HostEndian) => AtomicEndianness::HostEndian,
        Some(prm::AtomicEndianness::BigEndian) | None => AtomicEndianness::BigEndian,
        Some(other) => {
            return Err(NicError::Capability {
                name: "atomic_req_8B_endianness_mode",
                found: other.wire(),
                needed: "0 (big-endian) or 1 (host-endian)",
            })
        }
    };
    Ok(DeviceCaps {
        cqe_version: general.cqe_version,
        compact_address_vector: general.compact_address_vector,
        log_max_qp_size: general.log_max_qp_sz,
        log_max_cq_size: general.log_max_cq_sz,
        max_send_wqe_bytes: general.max_wqe_sz_sq,
        atomic: general.atomic,
        standard_atomics: atomic.is_some_and(|a| {
            a.atomic_operations & STANDARD_ATOMIC_OPERATIONS == STANDARD_ATOMIC_OPERATIONS
        }),
        masked_atomics: atomic.is_some_and(|a| {
            a.atomic_operations & MASKED_ATOMIC_OPERATIONS == MASKED_ATOMIC_OPERATIONS
        }),
        atomic_sizes: atomic.map_or(0, |a| a.atomic_size_qp),
        atomic_sizes_dc: atomic.map_or(0, |a| a.atomic_size_dc),
        atomic_endianness,
        dc: general.dct,
        log_bf_reg_size: general.log_bf_reg_size,
        log_max_msg: general.log_max_msg,
        log_max_ra_req_qp: general.log_max_ra_req_qp,
        log_max_ra_res_qp: general.log_max_ra_res_qp,
        log_max_ra_req_dc: general.log_max_ra_req_dc,
        log_max_ra_res_dc: general.log_max_ra_res_dc,
    })
}

/// The general and atomic capability pages that report `caps` (the software NIC's answer).
pub(crate) fn caps_pages(caps: &DeviceCaps) -> (prm::GeneralCaps, prm::AtomicCaps) {
    let general = prm::GeneralCaps {
        log_max_qp_sz: caps.log_max_qp_size,
        log_max_cq_sz: caps.log_max_cq_size,
        log_max_msg: caps.log_max_msg,
        cqe_version: caps.cqe_version,
        compact_address_vector: caps.compact_address_vector,
        dct: caps.dc,
        atomic: caps.atomic,
        rc: true,
        num_ports: 1,
        log_bf_reg_size: caps.log_bf_reg_size,
        log_max_ra_req_qp: caps.log_max_ra_req_qp,
        log_max_ra_res_qp: caps.log_max_ra_res_qp,
        log_max_ra_req_dc: caps.log_max_ra_req_dc,
        log_max_ra_res_dc: caps.log_max_ra_res_dc,
        max_wqe_sz_sq: caps.max_send_wqe_bytes,
        max_wqe_sz_sq_dc: caps.max_send_wqe_bytes,
        log_max_pd: 24,
        log_max_qp: 24,
        log_max_cq: 24,
        ..Default::default()
    };
    let atomic = prm::AtomicCaps {
        endianness_mode: match caps.atomic_endianness {
            AtomicEndianness::BigEndian => prm::AtomicEndianness::BigEndian,
            AtomicEndianness::HostEndian => prm::AtomicEndianness::HostEndian,
        },
        host_endianness_supported: false,
        atomic_operations: if caps.standard_atomics {
            STANDARD_ATOMIC_OPERATIONS
        } else {
            0
        } | if caps.masked_atomics {
            MASKED_ATOMIC_OPERATIONS
        } else {
            0
        },
        atomic_size_qp: caps.atomic_sizes,
        atomic_size_dc: caps.atomic_sizes_dc,
    };
    (general, atomic)
}

/// CREATE_CQ: 64-byte CQEs; the ring and the doorbell record each in their own UMEM at
/// offset 0; overrun ignore as `overrun_ignore` says (the control plane's choice, see
/// `ProtectionDomain::build`: always for a collapsed CQ, for a ring CQ only where no
/// overrun can happen); `log_page_size` 0 (the firmware deduces the page size from the
/// UMEM).
#[allow(clippy::too_many_arguments)]
pub(crate) fn create_cq(
    log_cq_size: u8,
    collapsed: bool,
    overrun_ignore: bool,
    uar_page: u32,
    eqn: u8,
    ring_umem: u32,
    dbr_umem: u32,
) -> CreateCq {
    CreateCq {
        uid: 0,
        cqc: CqContext {
            dbr_umem_valid: true,
            dbr_umem_id: dbr_umem,
            dbr_addr: 0,
            cqe_size: CqeSize::Bytes64,
            collapsed,
            overrun_ignore,
            log_cq_size,
            uar_page,
            c_eqn: eqn,
            log_page_size: 0,
            page_offset: 0,
        },
        cq_umem_offset: 0,
        cq_umem_id: ring_umem,
        cq_umem_valid: true,
    }
}

/// CREATE_QP for RC or DCI: migrated path state, the send ring and the doorbell record
/// each in their own UMEM at offset 0, the same CQ for send and receive. `receive` is the
/// receive side: an SRQ (`rq_type` 1, what DCIs get, as NVSHMEM, the kernel's driver and
/// UCX make them, and RC queue pairs that take WRITE_WITH_IMM), or none (`rq_type` 3,
/// zero-size, as DOCA makes RC queue pairs: proven on silicon for RC only).
#[allow(clippy::too_many_arguments)]
pub(crate) fn create_qp(
    service_type: ServiceType,
    pd: u32,
    uar_page: u32,
    cqn: u32,
    log_sq_size: u8,
    wq_umem: u32,
    dbr_umem: u32,
    receive: ReceiveQueue,
) -> CreateQp {
    CreateQp {
        uid: 0,
        opt_param_mask: 0,
        qpc: QpCreateContext {
            service_type,
            isolate_vl_tc: false,
            pm_state: PmState::Migrated,
            pd,
            log_sq_size,
            ts_format: 0,
            uar_page,
            user_index: 0,
            log_page_size: 0,
            cqn_snd: cqn,
            page_offset: 0,
            cqn_rcv: cqn,
            dbr_addr: 0,
            receive,
            dbr_umem_valid: true,
            dbr_umem_id: dbr_umem,
        },
        wq_umem_offset: 0,
        wq_umem_id: wq_umem,
        wq_umem_valid: true,
    }
}

/// RST2INIT: port `port`, P_Key index 0, migrated; RC queue pairs enable remote read and
/// write, and atomics as `atomics` says ([`atomic_access`]); DCIs enable nothing and carry
/// no access key (the key travels in each WQE's address vector).
pub(crate) fn rst2init(qpn: u32, port: u8, rc: bool, atomics: (bool, AtomicMode)) -> Rst2InitQp {
    let (atomic, mode) = atomics;
    Rst2InitQp {
        uid: 0,
        qpn,
        opt_param_mask: 0,
        pm_state: PmState::Migrated,
        vhca_port_num: port,
        pkey_index: 0,
        access: RemoteAccess {
            read: rc,
            write: rc,
            atomic: rc && atomic,
        },
        atomic_mode: if rc && atomic {
            mode
        } else {
            AtomicMode::NotSet
        },
        dc_access_key: 0,
    }
}

/// The GRH hop limit of RoCE paths: 64, the IPv4 TTL Linux gives the routes it resolves
/// an address handle's path by (`ip_default_ttl`); a RoCE packet with a hop limit of 0 or 1
/// cannot leave its subnet.
pub(crate) const HOP_LIMIT: u8 = 64;

/// How INIT2RTR reaches the RC peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PeerAddress {
    /// InfiniBand, within the subnet: the peer's LID, no GRH.
    InfiniBand {
        /// The peer's LID.
        lid: u16,
    },
    /// RoCE: the peer's GID and the MAC it resolved to, sent from local GID
    /// `source_gid_index` with `udp_source_port` (RoCE v2).
    Roce {
        /// The peer's GID.
        gid: [u8; 16],
        /// The next hop's MAC (never zero: the software NIC refuses a zero one).
        mac: [u8; 6],
        /// The local GID index.
        source_gid_index: u8,
        /// The UDP source port.
        udp_source_port: u16,
    },
}

/// The RC peer of INIT2RTR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Peer {
    pub(crate) qpn: u32,
    pub(crate) psn: u32,
    pub(crate) address: PeerAddress,
}

/// INIT2RTR: the path MTU, messages up to `limits.log_msg_max`; RC adds the peer (by LID
/// on InfiniBand, by GID and MAC on Ethernet, hop limit [`HOP_LIMIT`], traffic class 0),
/// its first PSN, the RNR NAK timer and the responder's outstanding reads
/// (`limits.log_rra_max`).
pub(crate) fn init2rtr(
    qpn: u32,
    port: u8,
    mtu: u8,
    peer: Option<Peer>,
    limits: Limits,
) -> Result<Init2RtrQp, NicError> {
    let mtu = prm::Mtu::from_wire("INIT2RTR_QP", mtu.into())?;
    let (path, remote_qpn, next_rcv_psn, min_rnr_nak, log_rra_max) = match peer {
        Some(peer) => {
            let path = match peer.address {
                PeerAddress::InfiniBand { lid } => AddressPath::infiniband(port, lid, 0),
                PeerAddress::Roce {
                    gid,
                    mac,
                    source_gid_index,
                    udp_source_port,
                } => {
                    AddressPath::roce(port, gid, mac, source_gid_index, HOP_LIMIT, udp_source_port)
                }
            };
            (path, peer.qpn, peer.psn, MIN_RNR_NAK, limits.log_rra_max)
        }
        None => (
            AddressPath {
                vhca_port_num: port,
                ..Default::default()
            },
            0,
            0,
            0,
            0,
        ),
    };
    Ok(Init2RtrQp {
        uid: 0,
        qpn,
        opt_param_mask: 0,
        mtu,
        log_msg_max: limits.log_msg_max,
        remote_qpn,
        next_rcv_psn,
        min_rnr_nak,
        log_rra_max,
        path,
    })
}

/// 2ERR_QP: the queue pair to the error state (recovery's first step).
pub(crate) fn to_error(qpn: u32) -> Qp2Err {
    Qp2Err { uid: 0, qpn }
}

/// 2RST_QP: the queue pair to RESET (recovery's second step).
pub(crate) fn to_reset(qpn: u32) -> Qp2Rst {
    Qp2Rst { uid: 0, qpn }
}

/// RTR2RTS: retry 7, RNR retry 7, ACK timeout 20, the first PSN this side sends, and the
/// requester's outstanding reads (`limits.log_sra_max`).
pub(crate) fn rtr2rts(qpn: u32, next_send_psn: u32, limits: Limits) -> Rtr2RtsQp {
    Rtr2RtsQp {
        uid: 0,
        qpn,
        opt_param_mask: 0,
        log_ack_req_freq: 0,
        log_sra_max: limits.log_sra_max,
        retry_count: RETRY_COUNT,
        rnr_retry: RNR_RETRY,
        next_send_psn,
        ack_timeout: ACK_TIMEOUT,
    }
}

/// CREATE_DCT: remote read and write, atomics as `atomics` says ([`atomic_access`] for a
/// DC target), the access key, port MTU, P_Key index 0, responses sent from GID
/// `source_gid_index` (the port's RoCE v2 GID on Ethernet, 0 on InfiniBand) with hop limit
/// [`HOP_LIMIT`]; receive completions to `cqn`, receives from SRQ `srqn` (a DCT needs one:
/// firmware, the kernel's driver and UCX refuse `srqn_xrqn` 0).
#[allow(clippy::too_many_arguments)]
pub(crate) fn create_dct(
    pd: u32,
    cqn: u32,
    srqn: u32,
    access_key: u64,
    port: u8,
    mtu: u8,
    atomics: (bool, AtomicMode),
    source_gid_index: u8,
) -> Result<CreateDct, NicError> {
    let (atomic, atomic_mode) = atomics;
    Ok(CreateDct {
        uid: 0,
        dctc: DctContext {
            user_index: 0,
            cqn,
            atomic_mode,
            access: RemoteAccess {
                read: true,
                write: true,
                atomic,
            },
            min_rnr_nak: MIN_RNR_NAK,
            srqn,
            pd,
            tclass: 0,
            flow_label: 0,
            dc_access_key: access_key,
            mtu: prm::Mtu::from_wire("CREATE_DCT", mtu.into())?,
            port,
            pkey_index: 0,
            my_addr_index: source_gid_index,
            hop_limit: HOP_LIMIT,
            eth_prio: 0,
            dscp: 0,
        },
    })
}

/// The DESTROY commands.
pub(crate) fn destroy_qp(qpn: u32) -> Result<Vec<u8>, PrmError> {
    DestroyQp { uid: 0, qpn }.encode()
}
/// See [`destroy_qp`].
pub(crate) fn destroy_cq(cqn: u32) -> Result<Vec<u8>, PrmError> {
    DestroyCq { uid: 0, cqn }.encode()
}
/// See [`destroy_qp`].
pub(crate) fn destroy_dct(dctn: u32) -> Result<Vec<u8>, PrmError> {
    DestroyDct { uid: 0, dctn }.encode()
}

/// Decodes a command's output (status first).
pub(crate) fn output<C: Command>(bytes: &[u8]) -> Result<C::Output, NicError> {
    Ok(C::Output::decode(bytes)?)
}

/// The opcode of command bytes, if there are at least two.
pub(crate) fn opcode_of(bytes: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes([*bytes.first()?, *bytes.get(1)?]))
}
