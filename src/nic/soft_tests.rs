//! The software NIC's command execution, through raw command bytes: malformed commands
//! are typed errors that change nothing, refused commands report status and syndrome in
//! their output and change nothing, the QP state machine refuses wrong transitions, a WQE
//! before RTS is an error CQE, and a CQ cannot be destroyed while a queue uses it.

use std::sync::Arc;

use super::backend::{Backend, ProtectionDomainId, QueueMemoryRef, UarPage, UmemId};
use super::command::{self, OUTPUT_BYTES};
use super::error::NicError;
use super::prm::{
    Command, CommandOutput, CommandStatus, CreateCq, CreateQp, CreateQpOutput, DestroyCq, PrmError,
    ServiceType,
};
use super::soft::{SoftNic, SoftObject, SoftPd, SoftUar, SoftUmem};
use crate::cq::{CompletionStatus, Syndrome};
use crate::queue::{CompletionQueueMemory, PollError, QpConfig, QueuePair, SendQueueMemory};
use crate::softnic::{Census, Fabric, QpState};
use crate::wqe::{Nop, Qpn, Rc, RingSize};

/// An RC queue pair's limits on the software NIC's default capabilities.
const RC_LIMITS: command::Limits = command::Limits {
    log_msg_max: 30,
    log_rra_max: 4,
    log_sra_max: 4,
};

/// A device with a PD, a UAR, a CQ and the UMEMs of one send queue: the pieces a raw
/// CREATE_QP names.
struct Bench {
    nic: SoftNic,
    pd: SoftPd,
    uar: SoftUar,
    cq_memory: CompletionQueueMemory,
    sq_memory: SendQueueMemory,
    umems: Vec<SoftUmem>,
    cq: SoftObject,
    cqn: u32,
}

impl Bench {
    fn new() -> Self {
        let fabric = Fabric::new();
        let nic = SoftNic::open(&fabric, 1).unwrap();
        let pd = nic.alloc_pd().unwrap();
        let uar = nic.alloc_uar().unwrap();
        let cq_memory = CompletionQueueMemory::allocate(16).unwrap();
        let size = RingSize::new(16).unwrap();
        let sq_memory = SendQueueMemory::from_parts(
            size,
            Arc::new(crate::memory::DmaBuffer::zeroed(size.bytes(), 4096).unwrap()),
            Arc::new(crate::memory::DmaBuffer::zeroed(8, 64).unwrap()),
            uar.host_doorbell().unwrap(),
        )
        .unwrap();
        let umems: Vec<SoftUmem> = [
            (cq_memory.ring_buffer(), cq_memory.claim_target()),
            (cq_memory.dbrec_buffer(), cq_memory.claim_target()),
            (sq_memory.ring_buffer(), sq_memory.claim_target()),
            (sq_memory.dbrec_buffer(), sq_memory.claim_target()),
        ]
        .into_iter()
        .map(|(b, target)| nic.register_umem(QueueMemoryRef::host(b, target)).unwrap())
        .collect();
        let input = command::create_cq(
            4,
            false,
            false,
            uar.page_id(),
            0,
            umems[0].umem_id(),
            umems[1].umem_id(),
        )
        .encode()
        .unwrap();
        let mut output = vec![0u8; OUTPUT_BYTES];
        let cq = nic.create_object(&input, &mut output).unwrap();
        let cqn = command::output::<CreateCq>(&output).unwrap().cqn;
        Self {
            nic,
            pd,
            uar,
            cq_memory,
            sq_memory,
            umems,
            cq,
            cqn,
        }
    }

    fn create_qp_command(&self) -> CreateQp {
        command::create_qp(
            ServiceType::Rc,
            self.pd.pdn(),
            self.uar.page_id(),
            self.cqn,
            4,
            self.umems[2].umem_id(),
            self.umems[3].umem_id(),
            super::prm::ReceiveQueue::ZeroSize,
        )
    }

    fn create_qp(&self) -> (SoftObject, u32) {
        let mut output = vec![0u8; OUTPUT_BYTES];
        let input = self.create_qp_command().encode().unwrap();
        let qp = self.nic.create_object(&input, &mut output).unwrap();
        (qp, CreateQpOutput::decode(&output).unwrap().qpn)
    }

    /// Everything the NIC holds.
    fn state(&self) -> (Census, super::soft::SoftNicAllocations) {
        (self.nic.fabric().census(), self.nic.allocated())
    }
}

/// `rae` and atomic mode 3 (the software NIC has masked 8-byte atomics).
const ALL_ATOMICS: (bool, super::prm::AtomicMode) = (true, super::prm::AtomicMode::UpTo8Bytes);

fn status_of(e: &NicError) -> Option<(CommandStatus, u32)> {
    match e {
        NicError::Command(PrmError::CommandError {
            status, syndrome, ..
        }) => Some((*status, *syndrome)),
        _ => None,
    }
}

#[test]
fn truncated_and_unknown_commands_are_typed_errors_and_change_nothing() {
    let bench = Bench::new();
    let before = bench.state();
    let valid = bench.create_qp_command().encode().unwrap();
    for len in [0, 1, 2, 8, 16, valid.len() / 2, valid.len() - 1] {
        let mut output = vec![0u8; OUTPUT_BYTES];
        let e = bench
            .nic
            .create_object(&valid[..len], &mut output)
            .unwrap_err();
        assert!(
            matches!(e, NicError::Command(PrmError::Truncated { .. })),
            "{len} bytes: {e:?}"
        );
        assert_eq!(bench.state(), before, "{len} bytes changed the NIC");
    }
    let mut unknown = valid.clone();
    unknown[0..2].copy_from_slice(&0x0999u16.to_be_bytes());
    let e = bench
        .nic
        .create_object(&unknown, &mut vec![0u8; OUTPUT_BYTES])
        .unwrap_err();
    assert_eq!(e, NicError::UnknownOpcode { opcode: 0x0999 });
    let e = bench
        .nic
        .general_command(&valid, &mut vec![0u8; OUTPUT_BYTES])
        .unwrap_err();
    assert_eq!(
        e,
        NicError::UnknownOpcode { opcode: 0x0500 },
        "CREATE_QP is no general command"
    );
    assert_eq!(bench.state(), before);
}

#[test]
fn a_bit_outside_every_field_is_malformed_and_changes_nothing() {
    let bench = Bench::new();
    let before = bench.state();
    let valid = bench.create_qp_command().encode().unwrap();
    let mut refused = 0;
    // Every single-bit flip either decodes to another well-formed command or is refused
    // with a typed error; none panics, and a refused one changes nothing.
    for bit in 16..valid.len() * 8 {
        let mut input = valid.clone();
        input[bit / 8] ^= 0x80 >> (bit % 8);
        if CreateQp::decode(&input).is_ok() {
            continue;
        }
        refused += 1;
        let e = bench
            .nic
            .create_object(&input, &mut vec![0u8; OUTPUT_BYTES])
            .unwrap_err();
        assert!(matches!(e, NicError::Command(_)), "bit {bit}: {e:?}");
        assert_eq!(bench.state(), before, "bit {bit} changed the NIC");
    }
    assert!(refused > 1000, "only {refused} flips were malformed");
}

#[test]
fn random_bytes_under_every_opcode_never_change_the_nic() {
    let bench = Bench::new();
    let (qp, _) = bench.create_qp();
    let before = bench.state();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let opcodes = [
        0x100u16, 0x400, 0x401, 0x500, 0x501, 0x502, 0x503, 0x504, 0x507, 0x50a, 0x710, 0x711,
    ];
    for case in 0..4000 {
        let opcode = opcodes[case % opcodes.len()];
        let len = (next() % 0x140) as usize;
        let mut input: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if len >= 2 {
            input[..2].copy_from_slice(&opcode.to_be_bytes());
        }
        let mut output = vec![0u8; OUTPUT_BYTES];
        let results = [
            bench.nic.create_object(&input, &mut output).map(|_| ()),
            bench.nic.modify_object(&qp, &input, &mut output),
            bench.nic.general_command(&input, &mut output),
        ];
        for result in results {
            assert!(result.is_err(), "case {case}: random bytes were accepted");
        }
        assert_eq!(bench.state(), before, "case {case} changed the NIC");
    }
}

#[test]
fn refused_commands_report_status_and_syndrome_in_the_output() {
    let bench = Bench::new();
    let before = bench.state();
    let mut command = bench.create_qp_command();
    command.wq_umem_id = 0x77;
    let mut output = vec![0u8; OUTPUT_BYTES];
    let e = bench
        .nic
        .create_object(&command.encode().unwrap(), &mut output)
        .unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::BadParameter, 0x01)));
    assert_eq!(
        CreateQpOutput::decode(&output),
        Err(PrmError::CommandError {
            command: "CREATE_QP",
            status: CommandStatus::BadParameter,
            syndrome: 0x01
        }),
        "the output carries the status, as DEVX returns it"
    );
    let mut command = bench.create_qp_command();
    command.qpc.pd = 0x55;
    let e = bench
        .nic
        .create_object(&command.encode().unwrap(), &mut output)
        .unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::BadParameter, 0x04)));
    let mut command = bench.create_qp_command();
    command.qpc.cqn_snd = bench.cqn + 1;
    let e = bench
        .nic
        .create_object(&command.encode().unwrap(), &mut output)
        .unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::BadParameter, 0x05)));
    let mut command = bench.create_qp_command();
    command.qpc.log_sq_size = 5; // the UMEM holds 16 WQEBBs, not 32
    let e = bench
        .nic
        .create_object(&command.encode().unwrap(), &mut output)
        .unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::BadParameter, 0x02)));
    assert_eq!(bench.state(), before);
}

#[test]
fn transitions_follow_the_state_machine_and_a_wrong_one_changes_nothing() {
    let bench = Bench::new();
    let (qp, qpn) = bench.create_qp();
    let number = Qpn::new(qpn).unwrap();
    let fabric = bench.nic.fabric();
    let state = || fabric.qp_status(number).unwrap().state;
    assert_eq!(state(), QpState::Reset);
    let modify = |c: &dyn Fn() -> Result<Vec<u8>, NicError>| {
        bench
            .nic
            .modify_object(&qp, &c().unwrap(), &mut vec![0u8; OUTPUT_BYTES])
    };
    let rst2init = || Ok(command::rst2init(qpn, 1, true, ALL_ATOMICS).encode()?);
    let init2rtr = || {
        Ok(command::init2rtr(
            qpn,
            1,
            5,
            Some(command::Peer {
                qpn,
                psn: 0,
                address: command::PeerAddress::InfiniBand { lid: 1 },
            }),
            RC_LIMITS,
        )?
        .encode()?)
    };
    let rtr2rts = || Ok(command::rtr2rts(qpn, 0, RC_LIMITS).encode()?);
    for (wrong, name) in [
        (&rtr2rts as &dyn Fn() -> _, "RTR2RTS"),
        (&init2rtr, "INIT2RTR"),
    ] {
        let e = modify(wrong).unwrap_err();
        assert_eq!(
            status_of(&e),
            Some((CommandStatus::BadQpState, 0x07)),
            "{name} from RESET"
        );
        assert_eq!(state(), QpState::Reset);
    }
    modify(&rst2init).unwrap();
    assert_eq!(state(), QpState::Init);
    assert_eq!(
        status_of(&modify(&rst2init).unwrap_err()),
        Some((CommandStatus::BadQpState, 0x07))
    );
    modify(&init2rtr).unwrap();
    assert_eq!(state(), QpState::ReadyToReceive);
    modify(&rtr2rts).unwrap();
    assert_eq!(state(), QpState::ReadyToSend);
    // A command naming another queue pair than the object it is sent to is refused.
    let other = command::rst2init(qpn + 1, 1, true, ALL_ATOMICS)
        .encode()
        .unwrap();
    let e = bench
        .nic
        .modify_object(&qp, &other, &mut vec![0u8; OUTPUT_BYTES])
        .unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::BadResource, 0x09)));
}

#[test]
fn a_wqe_before_rts_is_an_error_cqe_and_the_queue_goes_to_error() {
    let bench = Bench::new();
    let (qp, qpn) = bench.create_qp();
    bench
        .nic
        .modify_object(
            &qp,
            &command::rst2init(qpn, 1, true, ALL_ATOMICS)
                .encode()
                .unwrap(),
            &mut vec![0u8; OUTPUT_BYTES],
        )
        .unwrap();
    let Bench {
        nic,
        sq_memory,
        cq_memory,
        ..
    } = bench;
    let number = Qpn::new(qpn).unwrap();
    let mut pair: QueuePair<Rc> =
        QueuePair::new(number, sq_memory, cq_memory, QpConfig::default()).unwrap();
    pair.post(&Nop::new().signaled().build().unwrap(), &[])
        .unwrap();
    pair.post(&Nop::new().signaled().build().unwrap(), &[])
        .unwrap();
    nic.fabric().run_until_idle();
    let mut errors = Vec::new();
    for _ in 0..2 {
        match pair.poll() {
            Err(PollError::Completion(e)) => {
                errors.push((e.wqe_index, e.syndrome, e.vendor_syndrome, e.status))
            }
            other => panic!("expected an error CQE, got {other:?}"),
        }
    }
    assert_eq!(
        errors,
        vec![
            (
                0,
                Some(Syndrome::LocalQpOperation),
                0x04,
                CompletionStatus::LocalQpOperationError
            ),
            (
                1,
                Some(Syndrome::WorkRequestFlushed),
                0x00,
                CompletionStatus::WorkRequestFlushError
            ),
        ]
    );
    assert_eq!(
        nic.fabric().qp_status(number).unwrap().state,
        QpState::Error
    );
}

#[test]
fn a_cq_in_use_cannot_be_destroyed() {
    let bench = Bench::new();
    let (qp, qpn) = bench.create_qp();
    let destroy_cq = DestroyCq {
        uid: 0,
        cqn: bench.cqn,
    }
    .encode()
    .unwrap();
    let e = bench.nic.destroy_object(bench.cq, &destroy_cq).unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::ResourceBusy, 0x08)));
    assert_eq!(bench.nic.fabric().census().completion_queues, 1);
    // A DESTROY naming another object than the one it is sent to is refused.
    let e = bench
        .nic
        .destroy_object(qp, &command::destroy_qp(qpn + 1).unwrap())
        .unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::BadResource, 0x09)));
    bench
        .nic
        .destroy_object(qp, &command::destroy_qp(qpn).unwrap())
        .unwrap();
    bench.nic.destroy_object(bench.cq, &destroy_cq).unwrap();
    assert_eq!(
        bench.nic.fabric().census(),
        Census {
            nodes: 1,
            ..Census::default()
        }
    );
}

#[test]
fn a_queue_refuses_remote_operations_its_context_disables() {
    let bench = Bench::new();
    let (qp, qpn) = bench.create_qp();
    let mut rst2init = command::rst2init(qpn, 1, true, ALL_ATOMICS);
    rst2init.access = super::prm::RemoteAccess {
        read: false,
        write: true,
        atomic: false,
    };
    let peer = command::Peer {
        qpn,
        psn: 0,
        address: command::PeerAddress::InfiniBand { lid: 1 },
    };
    for input in [
        rst2init.encode().unwrap(),
        command::init2rtr(qpn, 1, 5, Some(peer), RC_LIMITS)
            .unwrap()
            .encode()
            .unwrap(),
        command::rtr2rts(qpn, 0, RC_LIMITS).encode().unwrap(),
    ] {
        bench
            .nic
            .modify_object(&qp, &input, &mut vec![0u8; OUTPUT_BYTES])
            .unwrap();
    }
    let Bench {
        nic,
        sq_memory,
        cq_memory,
        ..
    } = bench;
    let buffer = Arc::new(crate::memory::DmaBuffer::zeroed(64, 64).unwrap());
    let region = nic
        .fabric()
        .register(
            nic.node(),
            buffer.clone(),
            0,
            64,
            crate::softnic::Access::all(),
        )
        .unwrap();
    let number = Qpn::new(qpn).unwrap();
    let mut pair: QueuePair<Rc> =
        QueuePair::new(number, sq_memory, cq_memory, QpConfig::default()).unwrap();
    let write = crate::wqe::RdmaWrite::new(region.remote(0))
        .inline(&[7; 8])
        .signaled()
        .build()
        .unwrap();
    let read = crate::wqe::RdmaRead::new(region.remote(0))
        .sge(region.sge(32, 8).unwrap())
        .signaled()
        .build()
        .unwrap();
    pair.post(&write, &[]).unwrap();
    pair.post(&read, &[region.registered()]).unwrap();
    nic.fabric().run_until_idle();
    assert!(matches!(
        pair.poll(),
        Ok(Some(crate::queue::Polled::Sent { .. }))
    ));
    match pair.poll() {
        Err(PollError::Completion(e)) => {
            assert_eq!(
                (e.wqe_index, e.syndrome, e.vendor_syndrome),
                (1, Some(Syndrome::RemoteAccess), 0x43)
            )
        }
        other => panic!("expected the READ to fail, got {other:?}"),
    }
    let mut expected = vec![0u8; 64];
    expected[..8].copy_from_slice(&[7; 8]);
    assert_eq!(
        buffer.to_vec(),
        expected,
        "the WRITE landed; the READ moved nothing"
    );
}

impl Bench {
    /// Sends `input` to `qp`.
    fn modify(&self, qp: &SoftObject, input: Vec<u8>) -> Result<(), NicError> {
        self.nic
            .modify_object(qp, &input, &mut vec![0u8; OUTPUT_BYTES])
    }

    /// Moves `qp` (queue pair `qpn`, connected to itself) from RESET through the states to
    /// `target`.
    fn walk_to(&self, qp: &SoftObject, qpn: u32, target: QpState) {
        let peer = command::Peer {
            qpn,
            psn: 0,
            address: command::PeerAddress::InfiniBand { lid: 1 },
        };
        let steps = [
            (
                QpState::Init,
                command::rst2init(qpn, 1, true, ALL_ATOMICS).encode(),
            ),
            (
                QpState::ReadyToReceive,
                command::init2rtr(qpn, 1, 5, Some(peer), RC_LIMITS)
                    .unwrap()
                    .encode(),
            ),
            (
                QpState::ReadyToSend,
                command::rtr2rts(qpn, 0, RC_LIMITS).encode(),
            ),
        ];
        for (state, input) in steps {
            if target == QpState::Reset {
                break;
            }
            self.modify(qp, input.unwrap()).unwrap();
            if state == target {
                break;
            }
        }
    }
}

/// Every error CQE of `pair`, as (WQE index, syndrome, vendor syndrome), until it is empty.
fn error_cqes(pair: &mut QueuePair<Rc>) -> Vec<(u16, Option<Syndrome>, u8)> {
    let mut found = Vec::new();
    loop {
        match pair.poll() {
            Ok(None) => return found,
            Err(PollError::Completion(e)) => {
                found.push((e.wqe_index, e.syndrome, e.vendor_syndrome))
            }
            other => panic!("expected an error CQE, got {other:?}"),
        }
    }
}

#[test]
fn two_err_flushes_every_outstanding_wqe_signaled_or_not_from_every_state() {
    for from in [
        QpState::Reset,
        QpState::Init,
        QpState::ReadyToReceive,
        QpState::ReadyToSend,
    ] {
        let bench = Bench::new();
        let (qp, qpn) = bench.create_qp();
        bench.walk_to(&qp, qpn, from);
        let number = Qpn::new(qpn).unwrap();
        let fabric = bench.nic.fabric().clone();
        assert_eq!(fabric.qp_status(number).unwrap().state, from);
        let Bench {
            nic,
            sq_memory,
            cq_memory,
            ..
        } = bench;
        let mut pair: QueuePair<Rc> =
            QueuePair::new(number, sq_memory, cq_memory, QpConfig::default()).unwrap();
        // Signaled, unsignaled, signaled; published and rung, nothing executed yet.
        pair.post(&Nop::new().signaled().build().unwrap(), &[])
            .unwrap();
        pair.post(&Nop::new().build().unwrap(), &[]).unwrap();
        pair.post(&Nop::new().signaled().build().unwrap(), &[])
            .unwrap();
        nic.modify_object(
            &qp,
            &super::prm::Qp2Err { uid: 0, qpn }.encode().unwrap(),
            &mut vec![0u8; OUTPUT_BYTES],
        )
        .unwrap();
        let status = fabric.qp_status(number).unwrap();
        assert_eq!(status.state, QpState::Error, "from {from:?}");
        assert_eq!(status.error, Some(crate::softnic::ErrorCause::Command));
        let report = fabric.run_until_idle();
        assert_eq!(
            (
                report.wqes_executed,
                report.wqes_failed,
                report.wqes_flushed
            ),
            (0, 0, 3),
            "from {from:?}"
        );
        let flushed = Some(Syndrome::WorkRequestFlushed);
        assert_eq!(
            error_cqes(&mut pair),
            vec![(0, flushed, 0), (1, flushed, 0), (2, flushed, 0)],
            "from {from:?}: one flush CQE per WQE, the unsignaled one too"
        );
        assert!(pair.sq().is_idle());
        // 2ERR from ERR changes nothing, and a later WQE is flushed too.
        nic.modify_object(
            &qp,
            &super::prm::Qp2Err { uid: 0, qpn }.encode().unwrap(),
            &mut vec![0u8; OUTPUT_BYTES],
        )
        .unwrap();
        pair.post(&Nop::new().build().unwrap(), &[]).unwrap();
        fabric.run_until_idle();
        assert_eq!(error_cqes(&mut pair), vec![(3, flushed, 0)]);
    }
}

#[test]
fn two_err_writes_the_cqes_of_work_already_done_first() {
    let bench = Bench::new();
    let (qp, qpn) = bench.create_qp();
    bench.walk_to(&qp, qpn, QpState::ReadyToSend);
    let number = Qpn::new(qpn).unwrap();
    let Bench {
        nic,
        sq_memory,
        cq_memory,
        ..
    } = bench;
    let fabric = nic.fabric().clone();
    let mut pair: QueuePair<Rc> =
        QueuePair::new(number, sq_memory, cq_memory, QpConfig::default()).unwrap();
    pair.post(&Nop::new().signaled().build().unwrap(), &[])
        .unwrap();
    fabric.run_until_idle();
    pair.post(&Nop::new().signaled().build().unwrap(), &[])
        .unwrap();
    nic.modify_object(
        &qp,
        &super::prm::Qp2Err { uid: 0, qpn }.encode().unwrap(),
        &mut vec![0u8; OUTPUT_BYTES],
    )
    .unwrap();
    fabric.run_until_idle();
    assert!(matches!(
        pair.poll(),
        Ok(Some(crate::queue::Polled::Sent { wqe_counter: 0, .. }))
    ));
    assert_eq!(
        error_cqes(&mut pair),
        vec![(1, Some(Syndrome::WorkRequestFlushed), 0)]
    );
}

#[test]
fn two_rst_forgets_the_queue_writes_no_cqe_and_leaves_written_cqes() {
    let bench = Bench::new();
    let (qp, qpn) = bench.create_qp();
    bench.walk_to(&qp, qpn, QpState::ReadyToSend);
    let number = Qpn::new(qpn).unwrap();
    let Bench {
        nic,
        sq_memory,
        cq_memory,
        ..
    } = bench;
    let fabric = nic.fabric().clone();
    let mut pair: QueuePair<Rc> =
        QueuePair::new(number, sq_memory, cq_memory, QpConfig::default()).unwrap();
    for _ in 0..2 {
        pair.post(&Nop::new().signaled().build().unwrap(), &[])
            .unwrap();
    }
    fabric.run_until_idle();
    let written = pair.cq().memory().ring_bytes();
    assert_eq!(fabric.qp_status(number).unwrap().wqes, 2);
    // Two more, published and rung but not executed when the queue is reset.
    for _ in 0..2 {
        pair.post(&Nop::new().signaled().build().unwrap(), &[])
            .unwrap();
    }
    let reset = super::prm::Qp2Rst { uid: 0, qpn }.encode().unwrap();
    nic.modify_object(&qp, &reset, &mut vec![0u8; OUTPUT_BYTES])
        .unwrap();
    let status = fabric.qp_status(number).unwrap();
    assert_eq!(
        (status.state, status.consumer, status.wqes, status.error),
        (QpState::Reset, 0, 0, None)
    );
    // In RESET the NIC reads neither the doorbell nor the record (which still says 4).
    let report = fabric.run_until_idle();
    assert!(!report.made_progress(), "{report:?}");
    assert_eq!(
        pair.cq().memory().ring_bytes(),
        written,
        "no CQE written; those written before stay"
    );
    // From RESET the state machine starts over: RTR2RTS is refused, RST2INIT accepted.
    let e = nic
        .modify_object(
            &qp,
            &command::rtr2rts(qpn, 0, RC_LIMITS).encode().unwrap(),
            &mut vec![0u8; OUTPUT_BYTES],
        )
        .unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::BadQpState, 0x07)));
    nic.modify_object(
        &qp,
        &command::rst2init(qpn, 1, true, ALL_ATOMICS)
            .encode()
            .unwrap(),
        &mut vec![0u8; OUTPUT_BYTES],
    )
    .unwrap();
    assert_eq!(fabric.qp_status(number).unwrap().state, QpState::Init);
}
