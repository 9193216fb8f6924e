//! How the software NIC executes PRM command bytes: decode with prm's decoders, check
//! everything against the NIC's tables, then change them, then encode the output.
//!
//! Refusals of well-formed commands carry a status and one of these syndromes (this
//! NIC's own; the hardware's are not documented):
//!
//! | syndrome | cause |
//! |---|---|
//! | 0x01 | a UMEM id that is not registered |
//! | 0x02 | queue memory that does not lie inside its UMEM: a ring or CQ past its end or at an offset that is not a multiple of 64 bytes, a doorbell record past its end (its address is 8-byte aligned by the decoder) |
//! | 0x03 | a UAR page that is not allocated |
//! | 0x04 | a protection domain that is not allocated |
//! | 0x05 | a CQ that does not exist |
//! | 0x06 | a feature this NIC does not model (128-byte CQEs, a collapsed CQ without overrun ignore, receive queues read from memory, PAS lists, atomic mode 2) |
//! | 0x07 | a state transition from the wrong state |
//! | 0x08 | a CQ still used by a queue |
//! | 0x09 | an object that does not exist, or a command naming another object than the one it is sent to |
//! | 0x0a | a size beyond the device's capabilities |
//! | 0x0b | a port other than 1, or an MTU above the port's |
//! | 0x0c | (the emulated ConnectX's: a command it cannot decode) |
//! | 0x0d | a shared receive queue that does not exist on this device: a DCT (which firmware, the kernel's driver and UCX refuse without one) or a queue pair with `rq_type` SRQ naming `srqn` 0 or an unknown number; a DC initiator without an SRQ (DCIs are modelled as NVSHMEM, the kernel and UCX make them, `rq_type` 1) |
//! | 0x0e | an atomic mode the device's capabilities do not offer (1 without compare-swap and fetch-add; 3 and above without masked atomics of that size for the transport, as QUERY_HCA_CAP reports them) |
//! | 0x0f | a RoCE RC path with a zero destination MAC (`rmac`) |
//! | 0x10 | a source GID index (`src_addr_index`, `my_addr_index`) that is not a populated entry of the port's GID table |
//! | 0x11 | a RoCE v2 RC path whose UDP source port is outside 0xc000..=0xffff |
//! | 0x12 | `grh` set on a RoCE path (every RoCE packet carries a GRH; the bit is reserved) |
//!
//! A zero `rmac` is refused with status BAD_PARAMETER, the status firmware gives a
//! command whose context holds a value the field cannot take: no Ethernet frame can be
//! addressed to it, and a queue pair connected with it would only ever time out. The other
//! RoCE checks are of the same kind; hardware behaviour for them is not documented, so
//! they are this NIC's rules, stricter than what is known of firmware, to catch a control
//! plane that would connect nothing.

use std::sync::Arc;

use super::backend::MemoryAccess;
use super::caps::{GidEntry, GidType, LinkLayer};
use super::command::{caps_pages, opcode_of, OUTPUT_BYTES};
use super::error::NicError;
use super::prm::AddressPath;
use super::prm::{
    opcode, AtomicCaps, CapabilityType, Command, CommandOutput, CommandStatus, CqeSize, CreateCq,
    CreateCqOutput, CreateDct, CreateDctOutput, CreateQp, CreateQpOutput, DestroyCq, DestroyDct,
    DestroyQp, GeneralCaps, Init2RtrQp, PrmError, Qp2Err, Qp2Rst, QueryHcaCap, QueryHcaCapOutput,
    ReceiveQueue, RemoteAccess, Rst2InitQp, Rtr2RtsQp, ServiceType,
};
use super::roce::UDP_SOURCE_PORTS;
use super::soft::{SoftNic, SoftObject};
use crate::cq::CqMode;
use crate::memory::DmaBuffer;
use crate::queue::executor::ExecutorClaim;
use crate::queue::{CompletionQueueNicAccess, SendQueueNicAccess};
use crate::softnic::{CommandedQp, ObjectRefusal, PeerPath, RocePath, Transition};
use crate::wqe::{RingSize, TransportKind};

/// Syndromes of refused commands (see the module's table).
mod syndrome {
    pub const UNKNOWN_UMEM: u32 = 0x01;
    pub const UMEM_MISMATCH: u32 = 0x02;
    pub const UNKNOWN_UAR: u32 = 0x03;
    pub const UNKNOWN_PD: u32 = 0x04;
    pub const UNKNOWN_CQ: u32 = 0x05;
    pub const NOT_MODELLED: u32 = 0x06;
    pub const BAD_STATE: u32 = 0x07;
    pub const BUSY: u32 = 0x08;
    pub const UNKNOWN_OBJECT: u32 = 0x09;
    pub const TOO_LARGE: u32 = 0x0a;
    pub const BAD_PORT: u32 = 0x0b;
    pub const UNKNOWN_SRQ: u32 = 0x0d;
    pub const ATOMIC_MODE: u32 = 0x0e;
    pub const ZERO_MAC: u32 = 0x0f;
    pub const BAD_GID_INDEX: u32 = 0x10;
    pub const BAD_UDP_PORT: u32 = 0x11;
    pub const RESERVED_GRH: u32 = 0x12;
}

/// Refuses an atomic mode the device does not offer to a responder of this transport
/// (`dc_target`: a DCT, whose sizes are `atomic_size_dc`), as firmware refuses a context
/// asking for more than QUERY_HCA_CAP reports: mode 1 needs compare-swap and fetch-add,
/// mode `n` >= 3 (up to 2^`n` bytes) the extended (masked) atomics and bit `n` of the
/// sizes. Mode 2 (ConnectX-specific) is not modelled.
fn check_atomic_mode(
    caps: &super::caps::DeviceCaps,
    mode: super::prm::AtomicMode,
    dc_target: bool,
) -> Result<(), Refusal> {
    use super::prm::AtomicMode;
    let sizes = if dc_target {
        caps.atomic_sizes_dc
    } else {
        caps.atomic_sizes
    };
    let offered = match mode {
        AtomicMode::NotSet => true,
        AtomicMode::IbCompatible => caps.atomic && caps.standard_atomics,
        AtomicMode::ConnectX => return Err(bad_param(syndrome::NOT_MODELLED)),
        extended => {
            let log_bytes = extended.wire() as u32;
            caps.atomic && caps.masked_atomics && sizes & (1 << log_bytes) != 0
        }
    };
    if offered {
        Ok(())
    } else {
        Err(bad_param(syndrome::ATOMIC_MODE))
    }
}

/// A refusal: the status and syndrome the output gets.
struct Refusal(CommandStatus, u32);

fn bad_param(syndrome: u32) -> Refusal {
    Refusal(CommandStatus::BadParameter, syndrome)
}

impl From<ObjectRefusal> for Refusal {
    fn from(refusal: ObjectRefusal) -> Self {
        match refusal {
            ObjectRefusal::Unknown => Refusal(CommandStatus::BadResource, syndrome::UNKNOWN_OBJECT),
            ObjectRefusal::Busy => Refusal(CommandStatus::ResourceBusy, syndrome::BUSY),
            ObjectRefusal::BadState(_) => Refusal(CommandStatus::BadQpState, syndrome::BAD_STATE),
            ObjectRefusal::Invalid(_) => bad_param(syndrome::UMEM_MISMATCH),
        }
    }
}

/// Writes `bytes` into the caller's output buffer.
fn write_output(output: &mut [u8], bytes: &[u8]) -> Result<(), NicError> {
    let available = output.len();
    let out = output.get_mut(..bytes.len()).ok_or(NicError::OutOfRange {
        what: "command output buffer too short (bytes needed)",
        value: bytes.len() as u64,
        max: available as u64,
    })?;
    out.copy_from_slice(bytes);
    Ok(())
}

/// Writes a refusal into the output and returns it as the command's error.
fn refuse<C: Command>(output: &mut [u8], refusal: Refusal) -> NicError {
    let Refusal(status, syndrome) = refusal;
    if let Ok(bytes) = C::Output::encode_failure(status, syndrome) {
        // A short buffer still gets the error below.
        let _ = write_output(output, &bytes);
    }
    NicError::Command(PrmError::CommandError {
        command: C::NAME,
        status,
        syndrome,
    })
}

/// Runs `execute` on the decoded command and writes its output, or the refusal.
fn run<C: Command>(
    input: &[u8],
    output: &mut [u8],
    execute: impl FnOnce(C) -> Result<C::Output, Refusal>,
) -> Result<(), NicError> {
    let command = C::decode(input)?;
    match execute(command) {
        Ok(out) => write_output(output, &out.encode()?),
        Err(refusal) => Err(refuse::<C>(output, refusal)),
    }
}

fn opcode(input: &[u8]) -> Result<u16, NicError> {
    opcode_of(input).ok_or(NicError::Command(PrmError::Truncated {
        command: "PRM command",
        len: input.len(),
        needed: 2,
    }))
}

/// QUERY_HCA_CAP (general or atomic page).
pub(super) fn general(nic: &SoftNic, input: &[u8], output: &mut [u8]) -> Result<(), NicError> {
    match opcode(input)? {
        opcode::QUERY_HCA_CAP => {
            let query = QueryHcaCap::decode(input)?;
            if output.len() < OUTPUT_BYTES {
                return Err(NicError::OutOfRange {
                    what: "QUERY_HCA_CAP output buffer too short (bytes needed)",
                    value: OUTPUT_BYTES as u64,
                    max: output.len() as u64,
                });
            }
            if query.other_function {
                return Err(refuse::<QueryHcaCap>(
                    output,
                    bad_param(syndrome::NOT_MODELLED),
                ));
            }
            let (general, atomic): (GeneralCaps, AtomicCaps) = caps_pages(nic.reported_caps());
            let answer = match query.capability {
                CapabilityType::General => QueryHcaCapOutput::General(general),
                CapabilityType::Atomic => QueryHcaCapOutput::Atomic(atomic),
            };
            write_output(output, &answer.encode()?)
        }
        other => Err(NicError::UnknownOpcode { opcode: other }),
    }
}

/// `len` bytes of UMEM `id` from `offset`, which must be a multiple of `align`: the whole
/// UMEM when they are all of it, else a view of them (several queues in one UMEM at
/// offsets, as NVSHMEM places its DCIs' rings and records; the fabric refuses two queues
/// on the same bytes). Either way with the executor claim the UMEM carries, if any.
fn umem_range(
    nic: &SoftNic,
    id: u32,
    offset: u64,
    len: usize,
    align: u64,
) -> Result<(Arc<DmaBuffer>, Option<ExecutorClaim>), Refusal> {
    let (buffer, claim) = nic.umem(id).ok_or(bad_param(syndrome::UNKNOWN_UMEM))?;
    let mismatch = || bad_param(syndrome::UMEM_MISMATCH);
    let start = usize::try_from(offset).map_err(|_| mismatch())?;
    if offset % align != 0 {
        return Err(mismatch());
    }
    if start == 0 && len == buffer.len() {
        return Ok((buffer, claim));
    }
    // The view checks that the bytes lie inside the UMEM.
    let view = DmaBuffer::view(&buffer, start, len).map_err(|_| mismatch())?;
    Ok((Arc::new(view), claim))
}

/// A ring or CQ: `len` bytes of UMEM `id` from `offset` (a multiple of 64 bytes, one WQE
/// basic block or CQE).
fn umem_exactly(
    nic: &SoftNic,
    id: u32,
    offset: u64,
    len: usize,
) -> Result<(Arc<DmaBuffer>, Option<ExecutorClaim>), Refusal> {
    umem_range(nic, id, offset, len, 64)
}

/// A doorbell record: 8 bytes of UMEM `id` at `addr` (8-byte aligned).
fn umem_record(nic: &SoftNic, id: u32, addr: u64) -> Result<Arc<DmaBuffer>, Refusal> {
    umem_range(nic, id, addr, 8, 8).map(|(buffer, _)| buffer)
}

fn execute_create_cq(nic: &SoftNic, command: CreateCq) -> Result<(u32, CreateCqOutput), Refusal> {
    let cqc = command.cqc;
    if !command.cq_umem_valid || !cqc.dbr_umem_valid || cqc.page_offset != 0 {
        return Err(bad_param(syndrome::NOT_MODELLED));
    }
    // A collapsed CQ always overwrites its one entry: only with overrun ignore. A ring CQ
    // with overrun ignore never stops on a full ring (it overwrites); without, it stops.
    if cqc.cqe_size != CqeSize::Bytes64 || (cqc.collapsed && !cqc.overrun_ignore) {
        return Err(bad_param(syndrome::NOT_MODELLED));
    }
    if cqc.log_cq_size > nic.reported_caps().log_max_cq_size {
        return Err(bad_param(syndrome::TOO_LARGE));
    }
    nic.uar(cqc.uar_page)
        .ok_or(bad_param(syndrome::UNKNOWN_UAR))?;
    if cqc.c_eqn != 0 {
        return Err(Refusal(
            CommandStatus::BadResource,
            syndrome::UNKNOWN_OBJECT,
        ));
    }
    let entries = 1u32 << cqc.log_cq_size;
    let (ring, claim) = umem_exactly(
        nic,
        command.cq_umem_id,
        command.cq_umem_offset,
        entries as usize * crate::cq::CQE_BYTES,
    )?;
    let dbrec = umem_record(nic, cqc.dbr_umem_id, cqc.dbr_addr)?;
    let mode = if cqc.collapsed {
        CqMode::Collapsed
    } else {
        CqMode::Ring
    };
    let memory = CompletionQueueNicAccess::from_registered(entries, ring, dbrec, claim)
        .map_err(|_| bad_param(syndrome::UMEM_MISMATCH))?;
    let cqn = nic
        .fabric()
        .create_cq_object(memory, mode, cqc.overrun_ignore)?;
    Ok((cqn, CreateCqOutput { cqn }))
}

fn execute_create_qp(nic: &SoftNic, command: CreateQp) -> Result<(u32, CreateQpOutput), Refusal> {
    let qpc = command.qpc;
    if !command.wq_umem_valid || !qpc.dbr_umem_valid || qpc.page_offset != 0 {
        return Err(bad_param(syndrome::NOT_MODELLED));
    }
    // Receives come from an SRQ of this device, or there is no receive queue at all (RC
    // only: DCIs take an SRQ); a receive queue read from memory is not modelled.
    let srq = match (qpc.receive, qpc.service_type) {
        (ReceiveQueue::Srq { srqn }, _) => {
            if !nic.fabric().srq_on(srqn, nic.node()) {
                return Err(bad_param(syndrome::UNKNOWN_SRQ));
            }
            Some(srqn)
        }
        (ReceiveQueue::ZeroSize, ServiceType::Rc) => None,
        (ReceiveQueue::ZeroSize, ServiceType::Dci) => return Err(bad_param(syndrome::UNKNOWN_SRQ)),
        (ReceiveQueue::Regular { .. }, _) => return Err(bad_param(syndrome::NOT_MODELLED)),
    };
    if !nic.has_pd(qpc.pd) {
        return Err(bad_param(syndrome::UNKNOWN_PD));
    }
    let doorbell = nic
        .uar(qpc.uar_page)
        .ok_or(bad_param(syndrome::UNKNOWN_UAR))?;
    if qpc.log_sq_size > nic.reported_caps().log_max_qp_size {
        return Err(bad_param(syndrome::TOO_LARGE));
    }
    let size =
        RingSize::new(1usize << qpc.log_sq_size).map_err(|_| bad_param(syndrome::TOO_LARGE))?;
    let (ring, claim) = umem_exactly(
        nic,
        command.wq_umem_id,
        command.wq_umem_offset,
        size.bytes(),
    )?;
    let dbrec = umem_record(nic, qpc.dbr_umem_id, qpc.dbr_addr)?;
    let transport = match qpc.service_type {
        ServiceType::Rc => TransportKind::Rc,
        ServiceType::Dci => TransportKind::Dc,
    };
    let fabric = nic.fabric();
    for cqn in [qpc.cqn_snd, qpc.cqn_rcv] {
        if !fabric.has_cq_object(cqn) {
            return Err(bad_param(syndrome::UNKNOWN_CQ));
        }
    }
    let qpn = fabric.create_commanded_qp(CommandedQp {
        node: nic.node(),
        transport,
        sq: SendQueueNicAccess::from_registered(size, ring, dbrec, doorbell, claim)
            .map_err(|_| bad_param(syndrome::UMEM_MISMATCH))?,
        send_cq: qpc.cqn_snd,
        // An RC queue pair receives (WRITE_WITH_IMM) only from its SRQ; with a zero-size
        // RQ it has no receive side.
        receive_cq: (transport == TransportKind::Rc && srq.is_some()).then_some(qpc.cqn_rcv),
        srq,
    })?;
    Ok((qpn.get(), CreateQpOutput { qpn: qpn.get() }))
}

fn execute_create_dct(
    nic: &SoftNic,
    command: CreateDct,
) -> Result<(u32, CreateDctOutput), Refusal> {
    let dctc = command.dctc;
    if !nic.has_pd(dctc.pd) {
        return Err(bad_param(syndrome::UNKNOWN_PD));
    }
    if dctc.port != 1 || dctc.mtu.wire() > u64::from(nic.port_attributes().mtu.code()) {
        return Err(bad_param(syndrome::BAD_PORT));
    }
    if populated_gid(nic, dctc.my_addr_index).is_none() {
        return Err(bad_param(syndrome::BAD_GID_INDEX));
    }
    if !nic.fabric().has_cq_object(dctc.cqn) {
        return Err(bad_param(syndrome::UNKNOWN_CQ));
    }
    check_atomic_mode(nic.reported_caps(), dctc.atomic_mode, true)?;
    // A DCT's receives come from an SRQ: `srqn_xrqn` 0 names none.
    if !nic.fabric().srq_on(dctc.srqn, nic.node()) {
        return Err(bad_param(syndrome::UNKNOWN_SRQ));
    }
    let dct = nic.fabric().create_commanded_dct(
        nic.node(),
        dctc.dc_access_key,
        dctc.cqn,
        dctc.srqn,
        enabled_rights(dctc.access),
    )?;
    Ok((dct.get(), CreateDctOutput { dctn: dct.get() }))
}

/// CREATE_CQ, CREATE_QP, CREATE_DCT.
pub(super) fn create(
    nic: &SoftNic,
    input: &[u8],
    output: &mut [u8],
) -> Result<SoftObject, NicError> {
    let mut made = None;
    match opcode(input)? {
        opcode::CREATE_CQ => run::<CreateCq>(input, output, |c| {
            execute_create_cq(nic, c).map(|(cqn, out)| {
                made = Some(SoftObject::Cq(cqn));
                out
            })
        })?,
        opcode::CREATE_QP => run::<CreateQp>(input, output, |c| {
            execute_create_qp(nic, c).map(|(qpn, out)| {
                made = Some(SoftObject::Qp(qpn));
                out
            })
        })?,
        opcode::CREATE_DCT => run::<CreateDct>(input, output, |c| {
            execute_create_dct(nic, c).map(|(dct, out)| {
                made = Some(SoftObject::Dct(dct));
                out
            })
        })?,
        other => return Err(NicError::UnknownOpcode { opcode: other }),
    }
    made.ok_or(NicError::UnknownOpcode { opcode: 0 })
}

/// `rre`, `rwe`, `rae` as the access rights a responder checks.
fn enabled_rights(access: RemoteAccess) -> MemoryAccess {
    let mut rights = MemoryAccess::empty();
    rights.set(MemoryAccess::REMOTE_READ, access.read);
    rights.set(MemoryAccess::REMOTE_WRITE, access.write);
    rights.set(MemoryAccess::REMOTE_ATOMIC, access.atomic);
    rights
}

/// Whether `index` is a populated entry of the port's GID table.
fn populated_gid(nic: &SoftNic, index: u8) -> Option<GidEntry> {
    nic.port_attributes()
        .gids
        .get(usize::from(index))
        .filter(|e| !e.gid.is_zero())
        .copied()
}

/// The path INIT2RTR's address path describes on this NIC's port: by LID on InfiniBand
/// (a GID-routed InfiniBand path is not modelled), by GID and MAC on Ethernet, checked as
/// the module's table says (for RC queue pairs; a DCI's INIT2RTR carries no peer).
fn peer_path(nic: &SoftNic, path: &AddressPath, rc: bool) -> Result<PeerPath, Refusal> {
    match nic.port_attributes().link_layer {
        LinkLayer::InfiniBand => {
            if path.grh {
                return Err(bad_param(syndrome::NOT_MODELLED));
            }
            Ok(PeerPath::Lid(path.rlid))
        }
        LinkLayer::Ethernet => {
            if path.grh {
                return Err(bad_param(syndrome::RESERVED_GRH));
            }
            let roce = RocePath {
                gid: path.rgid,
                mac: path.rmac,
                source_gid_index: path.src_addr_index,
                udp_source_port: path.udp_sport,
                hop_limit: path.hop_limit,
                traffic_class: path.tclass,
            };
            if rc {
                if path.rmac == [0; 6] {
                    return Err(bad_param(syndrome::ZERO_MAC));
                }
                let source = populated_gid(nic, path.src_addr_index)
                    .ok_or(bad_param(syndrome::BAD_GID_INDEX))?;
                if source.kind == GidType::RoceV2 && !UDP_SOURCE_PORTS.contains(&path.udp_sport) {
                    return Err(bad_param(syndrome::BAD_UDP_PORT));
                }
            }
            Ok(PeerPath::Roce(roce))
        }
    }
}

/// The queue pair a modify command is sent to: it must be the one the command names.
fn target_qp(object: SoftObject, qpn: u32) -> Result<u32, Refusal> {
    match object {
        SoftObject::Qp(number) if number == qpn => Ok(number),
        _ => Err(Refusal(
            CommandStatus::BadResource,
            syndrome::UNKNOWN_OBJECT,
        )),
    }
}

/// RST2INIT_QP, INIT2RTR_QP, RTR2RTS_QP, 2ERR_QP, 2RST_QP.
pub(super) fn modify(
    nic: &SoftNic,
    object: SoftObject,
    input: &[u8],
    output: &mut [u8],
) -> Result<(), NicError> {
    let fabric = nic.fabric();
    match opcode(input)? {
        opcode::RST2INIT_QP => run::<Rst2InitQp>(input, output, |c| {
            let qpn = target_qp(object, c.qpn)?;
            if c.vhca_port_num != 1 {
                return Err(bad_param(syndrome::BAD_PORT));
            }
            check_atomic_mode(nic.reported_caps(), c.atomic_mode, false)?;
            fabric.transition(
                qpn,
                Transition::ResetToInit {
                    enabled: enabled_rights(c.access),
                },
            )?;
            Ok(Default::default())
        }),
        opcode::INIT2RTR_QP => run::<Init2RtrQp>(input, output, |c| {
            let qpn = target_qp(object, c.qpn)?;
            if c.mtu.wire() > u64::from(nic.port_attributes().mtu.code()) {
                return Err(bad_param(syndrome::BAD_PORT));
            }
            let rc = fabric.commanded_transport(qpn) == Some(TransportKind::Rc);
            // Firmware refuses a message size or (RC) an outstanding-read depth above what
            // QUERY_HCA_CAP reports.
            let caps = nic.reported_caps();
            if c.log_msg_max > caps.log_max_msg || (rc && c.log_rra_max > caps.log_max_ra_res_qp) {
                return Err(bad_param(syndrome::TOO_LARGE));
            }
            let path = peer_path(nic, &c.path, rc)?;
            fabric.transition(
                qpn,
                Transition::InitToRtr {
                    peer: Some((c.remote_qpn, path)),
                },
            )?;
            Ok(Default::default())
        }),
        opcode::RTR2RTS_QP => run::<Rtr2RtsQp>(input, output, |c| {
            let qpn = target_qp(object, c.qpn)?;
            let caps = nic.reported_caps();
            let requester = if fabric.commanded_transport(qpn) == Some(TransportKind::Rc) {
                caps.log_max_ra_req_qp
            } else {
                caps.log_max_ra_req_dc
            };
            if c.log_sra_max > requester {
                return Err(bad_param(syndrome::TOO_LARGE));
            }
            fabric.transition(qpn, Transition::RtrToRts)?;
            Ok(Default::default())
        }),
        opcode::QP_2ERR => run::<Qp2Err>(input, output, |c| {
            let qpn = target_qp(object, c.qpn)?;
            fabric.transition(qpn, Transition::ToError)?;
            Ok(Default::default())
        }),
        opcode::QP_2RST => run::<Qp2Rst>(input, output, |c| {
            let qpn = target_qp(object, c.qpn)?;
            fabric.transition(qpn, Transition::ToReset)?;
            Ok(Default::default())
        }),
        other => Err(NicError::UnknownOpcode { opcode: other }),
    }
}

/// DESTROY_QP, DESTROY_DCT, DESTROY_CQ (refused while the CQ is in use).
pub(super) fn destroy(nic: &SoftNic, object: SoftObject, input: &[u8]) -> Result<(), NicError> {
    let fabric = nic.fabric();
    let mut output = vec![0u8; OUTPUT_BYTES];
    let mismatch = || Refusal(CommandStatus::BadResource, syndrome::UNKNOWN_OBJECT);
    match opcode(input)? {
        opcode::DESTROY_QP => run::<DestroyQp>(input, &mut output, |c| match object {
            SoftObject::Qp(qpn) if qpn == c.qpn => Ok(fabric
                .destroy_commanded_qp(qpn)
                .map(|_| Default::default())?),
            _ => Err(mismatch()),
        }),
        opcode::DESTROY_DCT => run::<DestroyDct>(input, &mut output, |c| match object {
            SoftObject::Dct(dct) if dct == c.dctn => {
                let number = crate::wqe::Qpn::new(dct).map_err(|_| mismatch())?;
                fabric
                    .destroy_dct(crate::softnic::DctNumber(number))
                    .map_err(|_| mismatch())?;
                Ok(Default::default())
            }
            _ => Err(mismatch()),
        }),
        opcode::DESTROY_CQ => run::<DestroyCq>(input, &mut output, |c| match object {
            SoftObject::Cq(cqn) if cqn == c.cqn => {
                Ok(fabric.destroy_cq_object(cqn).map(|_| Default::default())?)
            }
            _ => Err(mismatch()),
        }),
        other => Err(NicError::UnknownOpcode { opcode: other }),
    }
}
