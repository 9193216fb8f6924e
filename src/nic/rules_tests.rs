//! The firmware rules the software NIC's executor models for receive queues, atomic modes
//! and CQ overrun, and the control plane's choices under them: a DC target needs a real
//! SRQ, DC initiators name one, RC queue pairs may receive through one; atomic modes the
//! capabilities do not offer are refused, and the control plane picks the one they do;
//! ring CQs ignore overrun only where none can happen, and the NIC does what `oi` says.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::backend::{Backend, SharedReceiveQueueId, UarPage, UmemId};
use super::caps::DeviceCaps;
use super::command::{self, OUTPUT_BYTES};
use super::device::{Device, QueueSpec, Receives, SRQ_RECEIVES};
use super::error::NicError;
use super::prm::{
    AtomicMode, Command, CommandOutput, CommandStatus, CreateCqOutput, CreateDct, CreateQp,
    CreateQpOutput, PrmError, ReceiveQueue, ServiceType,
};
use super::soft::{SoftNic, SoftObject, SOFT_NIC_CAPS};
use crate::cq::{CqMode, Syndrome};
use crate::memory::DmaBuffer;
use crate::queue::{PollError, Polled, QueuePair};
use crate::softnic::{Cqn, Fabric};
use crate::wqe::{Atomic, RdmaWrite, RingSize, Transport};

const WAIT: Duration = Duration::from_secs(10);

fn status_of(e: &NicError) -> Option<(CommandStatus, u32)> {
    match e {
        NicError::Command(PrmError::CommandError {
            status, syndrome, ..
        }) => Some((*status, *syndrome)),
        _ => None,
    }
}

/// A device's raw objects for commands built by hand: a PD, a UAR, a CQ of 16 entries.
struct Raw {
    nic: SoftNic,
    pd: super::soft::SoftPd,
    uar: super::soft::SoftUar,
    cqn: u32,
    _umems: Vec<super::soft::SoftUmem>,
}

impl Raw {
    fn new(caps: DeviceCaps) -> Self {
        let fabric = Fabric::new();
        let nic = SoftNic::open(&fabric, 1).unwrap().with_caps(caps);
        let pd = nic.alloc_pd().unwrap();
        let uar = nic.alloc_uar().unwrap();
        let ring = nic
            .register_umem_buffer(DmaBuffer::zeroed(16 * 64, 4096).unwrap())
            .unwrap();
        let dbrec = nic
            .register_umem_buffer(DmaBuffer::zeroed(8, 64).unwrap())
            .unwrap();
        let input = command::create_cq(
            4,
            false,
            false,
            uar.page_id(),
            0,
            ring.umem_id(),
            dbrec.umem_id(),
        )
        .encode()
        .unwrap();
        let mut output = vec![0u8; OUTPUT_BYTES];
        nic.create_object(&input, &mut output).unwrap();
        let cqn = CreateCqOutput::decode(&output).unwrap().cqn;
        Self {
            nic,
            pd,
            uar,
            cqn,
            _umems: vec![ring, dbrec],
        }
    }

    /// CREATE_QP of `service` over fresh UMEMs (16 WQEBBs), receiving as `receive` says.
    fn create_qp(
        &mut self,
        service: ServiceType,
        receive: ReceiveQueue,
    ) -> Result<SoftObject, NicError> {
        let ring = self
            .nic
            .register_umem_buffer(DmaBuffer::zeroed(16 * 64, 4096).unwrap())
            .unwrap();
        let dbrec = self
            .nic
            .register_umem_buffer(DmaBuffer::zeroed(8, 64).unwrap())
            .unwrap();
        let command: CreateQp = command::create_qp(
            service,
            super::backend::ProtectionDomainId::pdn(&self.pd),
            self.uar.page_id(),
            self.cqn,
            4,
            ring.umem_id(),
            dbrec.umem_id(),
            receive,
        );
        self._umems.extend([ring, dbrec]);
        let mut output = vec![0u8; OUTPUT_BYTES];
        let made = self
            .nic
            .create_object(&command.encode().unwrap(), &mut output);
        if made.is_ok() {
            CreateQpOutput::decode(&output).unwrap();
        }
        made
    }

    fn create_dct(&self, srqn: u32, atomic_mode: AtomicMode) -> Result<SoftObject, NicError> {
        let mut command: CreateDct = command::create_dct(
            super::backend::ProtectionDomainId::pdn(&self.pd),
            self.cqn,
            srqn,
            7,
            1,
            5,
            (atomic_mode != AtomicMode::NotSet, atomic_mode),
            0,
        )
        .unwrap();
        command.dctc.atomic_mode = atomic_mode;
        let mut output = vec![0u8; OUTPUT_BYTES];
        self.nic
            .create_object(&command.encode().unwrap(), &mut output)
    }
}

#[test]
fn a_dc_target_needs_a_real_srq_of_its_device() {
    let raw = Raw::new(SOFT_NIC_CAPS);
    let census = raw.nic.fabric().census();
    for srqn in [0, 0x77] {
        let e = raw.create_dct(srqn, AtomicMode::NotSet).unwrap_err();
        assert_eq!(
            status_of(&e),
            Some((CommandStatus::BadParameter, 0x0d)),
            "srqn {srqn:#x}"
        );
    }
    // Another device's SRQ is not this one's.
    let other = SoftNic::open(raw.nic.fabric(), 2).unwrap();
    let other_srq = other.create_srq(&other.alloc_pd().unwrap(), 4).unwrap();
    let e = raw
        .create_dct(other_srq.srqn(), AtomicMode::NotSet)
        .unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::BadParameter, 0x0d)));
    assert_eq!(
        raw.nic.fabric().census().dc_targets,
        census.dc_targets,
        "a refused CREATE_DCT made nothing"
    );
    let srq = raw.nic.create_srq(&raw.pd, 4).unwrap();
    assert!(!srq.is_in_use());
    let dct = raw.create_dct(srq.srqn(), AtomicMode::NotSet).unwrap();
    assert!(srq.is_in_use(), "the DCT names the SRQ");
    let SoftObject::Dct(dctn) = dct else {
        panic!("{dct:?}")
    };
    raw.nic
        .destroy_object(dct, &command::destroy_dct(dctn).unwrap())
        .unwrap();
    assert!(!srq.is_in_use());
}

#[test]
fn dc_initiators_name_an_srq_and_rc_queue_pairs_may_go_without() {
    let mut raw = Raw::new(SOFT_NIC_CAPS);
    let srq = raw.nic.create_srq(&raw.pd, 4).unwrap();
    let e = raw
        .create_qp(ServiceType::Dci, ReceiveQueue::ZeroSize)
        .unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::BadParameter, 0x0d)));
    let e = raw
        .create_qp(ServiceType::Rc, ReceiveQueue::Srq { srqn: 0 })
        .unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::BadParameter, 0x0d)));
    raw.create_qp(ServiceType::Dci, ReceiveQueue::Srq { srqn: srq.srqn() })
        .unwrap();
    raw.create_qp(ServiceType::Rc, ReceiveQueue::ZeroSize)
        .unwrap();
    raw.create_qp(ServiceType::Rc, ReceiveQueue::Srq { srqn: srq.srqn() })
        .unwrap();
    assert!(srq.is_in_use());
}

fn open(caps: DeviceCaps, lid: u16, fabric: &Fabric) -> Device<SoftNic> {
    Device::open(SoftNic::open(fabric, lid).unwrap().with_caps(caps)).unwrap()
}

fn poll<T: Transport>(qp: &mut QueuePair<T>) -> Result<Polled, PollError> {
    let start = Instant::now();
    loop {
        match qp.poll() {
            Ok(Some(p)) => return Ok(p),
            Ok(None) if start.elapsed() < WAIT => std::thread::yield_now(),
            Ok(None) => panic!("no completion after {WAIT:?}"),
            Err(e) => return Err(e),
        }
    }
}

#[test]
fn the_control_plane_gives_every_dc_queue_its_protection_domains_srq() {
    let fabric = Fabric::new();
    let device = open(SOFT_NIC_CAPS, 1, &fabric);
    let pd = device.alloc_pd().unwrap();
    let spec = QueueSpec::new(RingSize::new(16).unwrap());
    let dct = pd.create_dct(9, 16).unwrap();
    let dci = pd
        .create_dci::<crate::wqe::Full>(spec)
        .unwrap()
        .activate()
        .unwrap();
    let rc = pd.create_rc(spec).unwrap();
    assert_eq!(
        fabric.census().shared_receive_queues,
        1,
        "one SRQ per protection domain, made on first use"
    );
    let srqn = pd.shared_receive_queue().unwrap().srqn();
    assert_ne!(srqn, 0);
    drop((pd, dct, dci, rc));
    assert_eq!(
        fabric.census().shared_receive_queues,
        0,
        "the SRQ goes after the last queue naming it"
    );
    assert_eq!(device.teardown_failures().0, 0);
}

#[test]
fn write_with_immediate_consumes_the_srqs_receive_wqes_in_order() {
    let fabric = Fabric::new();
    let _engine = fabric.spawn_engine();
    let (a, b) = (
        open(SOFT_NIC_CAPS, 1, &fabric),
        open(SOFT_NIC_CAPS, 2, &fabric),
    );
    let (pd_a, pd_b) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let memory = Arc::new(DmaBuffer::zeroed(64, 64).unwrap());
    let region = pd_b
        .register(memory.clone(), 0, 64, super::backend::MemoryAccess::all())
        .unwrap();
    let spec = QueueSpec::new(RingSize::new(16).unwrap());
    let receiving = spec.with_receives(Receives::SharedQueue);
    // Two requesters, two responders receiving from B's SRQ, one responder without a
    // receive queue.
    let (pa1, pa2, pa3) = (
        pd_a.create_rc(spec).unwrap(),
        pd_a.create_rc(spec).unwrap(),
        pd_a.create_rc(spec).unwrap(),
    );
    let (pb1, pb2, pb3) = (
        pd_b.create_rc(receiving).unwrap(),
        pd_b.create_rc(receiving).unwrap(),
        pd_b.create_rc(spec).unwrap(),
    );
    let (ea1, ea2, ea3) = (pa1.endpoint(), pa2.endpoint(), pa3.endpoint());
    let (eb1, eb2, eb3) = (pb1.endpoint(), pb2.endpoint(), pb3.endpoint());
    let (mut a1, mut a2, mut a3) = (
        pa1.connect(&eb1).unwrap(),
        pa2.connect(&eb2).unwrap(),
        pa3.connect(&eb3).unwrap(),
    );
    let (mut b1, mut b2, _b3) = (
        pb1.connect(&ea1).unwrap(),
        pb2.connect(&ea2).unwrap(),
        pb3.connect(&ea3).unwrap(),
    );
    let srq = pd_b.shared_receive_queue().unwrap();
    srq.post_receives(2).unwrap();
    let write = |imm: u32| {
        RdmaWrite::new(region.remote(0))
            .inline(&[1, 2, 3])
            .immediate(imm)
            .signaled()
            .build()
            .unwrap()
    };
    // A queue pair without a receive queue takes no WRITE_WITH_IMM, receives posted or not.
    a3.post(&write(3), &[]).unwrap();
    match poll(&mut a3) {
        Err(PollError::Completion(e)) => assert_eq!(e.syndrome, Some(Syndrome::RnrRetryExceeded)),
        other => panic!("{other:?}"),
    }
    for (a, b, imm, index) in [(&mut a1, &mut b1, 11, 0), (&mut a2, &mut b2, 22, 1)] {
        a.post(&write(imm), &[]).unwrap();
        assert!(matches!(poll(a), Ok(Polled::Sent { .. })));
        match poll(b) {
            Ok(Polled::Received(r)) => {
                assert_eq!((r.imm, r.qpn), (imm, b.qpn().get()));
                assert_eq!(r.wqe_counter, index, "the SRQ's receive WQEs, in order");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        fabric.srq_receives(srq.srqn()),
        Some(0),
        "both receive WQEs consumed"
    );
    // None left: receiver not ready.
    a1.post(&write(33), &[]).unwrap();
    match poll(&mut a1) {
        Err(PollError::Completion(e)) => assert_eq!(e.syndrome, Some(Syndrome::RnrRetryExceeded)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_srq_holds_at_most_its_capacity() {
    let fabric = Fabric::new();
    let device = open(SOFT_NIC_CAPS, 1, &fabric);
    let pd = device.alloc_pd().unwrap();
    let srq = pd.shared_receive_queue().unwrap();
    srq.post_receives(SRQ_RECEIVES - 1).unwrap();
    match srq.post_receives(2) {
        Err(NicError::SoftNic(crate::softnic::SoftNicError::SharedReceiveQueueFull {
            capacity,
            outstanding,
            posted,
            ..
        })) => assert_eq!(
            (capacity, outstanding, posted),
            (SRQ_RECEIVES.into(), u64::from(SRQ_RECEIVES - 1), 2)
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        fabric.srq_receives(srq.srqn()),
        Some(u64::from(SRQ_RECEIVES - 1)),
        "a refused post posts nothing"
    );
    srq.post_receives(1).unwrap();
}

#[test]
fn the_atomic_mode_comes_from_the_capabilities() {
    let full = SOFT_NIC_CAPS;
    let ib_only = DeviceCaps {
        masked_atomics: false,
        ..full
    };
    let four_byte_masked = DeviceCaps {
        atomic_sizes: 0x4,
        atomic_sizes_dc: 0x4,
        ..full
    };
    let none = DeviceCaps {
        atomic: false,
        ..full
    };
    let no_operations = DeviceCaps {
        standard_atomics: false,
        masked_atomics: false,
        ..full
    };
    let rc_only_8 = DeviceCaps {
        atomic_sizes_dc: 0x4,
        ..full
    };
    for (caps, dc, expected) in [
        (full, false, (true, AtomicMode::UpTo8Bytes)),
        (full, true, (true, AtomicMode::UpTo8Bytes)),
        (ib_only, false, (true, AtomicMode::IbCompatible)),
        (four_byte_masked, false, (true, AtomicMode::IbCompatible)),
        (rc_only_8, false, (true, AtomicMode::UpTo8Bytes)),
        (rc_only_8, true, (true, AtomicMode::IbCompatible)),
        (none, false, (false, AtomicMode::NotSet)),
        (no_operations, false, (false, AtomicMode::NotSet)),
    ] {
        assert_eq!(
            command::atomic_access(&caps, dc),
            expected,
            "{caps:?} dc {dc}"
        );
    }
}

#[test]
fn the_executor_refuses_an_atomic_mode_the_capabilities_do_not_offer() {
    let ib_only = DeviceCaps {
        masked_atomics: false,
        ..SOFT_NIC_CAPS
    };
    let raw = Raw::new(ib_only);
    let srq = raw.nic.create_srq(&raw.pd, 4).unwrap();
    let e = raw
        .create_dct(srq.srqn(), AtomicMode::UpTo8Bytes)
        .unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::BadParameter, 0x0e)));
    raw.create_dct(srq.srqn(), AtomicMode::IbCompatible)
        .unwrap();
    // RST2INIT the same way.
    let mut raw = raw;
    let qp = raw
        .create_qp(ServiceType::Rc, ReceiveQueue::ZeroSize)
        .unwrap();
    let SoftObject::Qp(qpn) = qp else {
        panic!("{qp:?}")
    };
    let mut output = vec![0u8; OUTPUT_BYTES];
    let too_much = command::rst2init(qpn, 1, true, (true, AtomicMode::UpTo8Bytes));
    let e = raw
        .nic
        .modify_object(&qp, &too_much.encode().unwrap(), &mut output)
        .unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::BadParameter, 0x0e)));
    let ok = command::rst2init(qpn, 1, true, (true, AtomicMode::IbCompatible));
    raw.nic
        .modify_object(&qp, &ok.encode().unwrap(), &mut output)
        .unwrap();
    // Larger modes need their size: 16 bytes (mode 4) where `atomic_size_dc` has bit 4.
    let sixteen = Raw::new(DeviceCaps {
        atomic_sizes_dc: 0x1c,
        ..SOFT_NIC_CAPS
    });
    let srq16 = sixteen.nic.create_srq(&sixteen.pd, 4).unwrap();
    sixteen
        .create_dct(srq16.srqn(), AtomicMode::UpTo16Bytes)
        .unwrap();
    let eight = Raw::new(SOFT_NIC_CAPS);
    let srq8 = eight.nic.create_srq(&eight.pd, 4).unwrap();
    let e = eight
        .create_dct(srq8.srqn(), AtomicMode::UpTo16Bytes)
        .unwrap_err();
    assert_eq!(status_of(&e), Some((CommandStatus::BadParameter, 0x0e)));
}

#[test]
fn ib_compatible_atomics_run_on_a_device_without_masked_atomics() {
    let fabric = Fabric::new();
    let _engine = fabric.spawn_engine();
    let caps = DeviceCaps {
        masked_atomics: false,
        ..SOFT_NIC_CAPS
    };
    let device = open(caps, 1, &fabric);
    let pd = device.alloc_pd().unwrap();
    let memory = Arc::new(DmaBuffer::zeroed(64, 64).unwrap());
    memory.write(0, &40u64.to_be_bytes()).unwrap();
    let region = pd
        .register(memory.clone(), 0, 64, super::backend::MemoryAccess::all())
        .unwrap();
    // Mode 3 would be refused by this device: connecting proves the control plane asked
    // for mode 1.
    let pending = pd
        .create_rc(QueueSpec::new(RingSize::new(16).unwrap()))
        .unwrap();
    let endpoint = pending.endpoint();
    let mut qp = pending.connect(&endpoint).unwrap();
    let fa = Atomic::fetch_add(region.remote(0), region.local(8), 2);
    qp.post(&fa.signaled().build().unwrap(), &[region.registered()])
        .unwrap();
    assert!(matches!(poll(&mut qp), Ok(Polled::Sent { .. })));
    assert_eq!(memory.to_vec()[..8], 42u64.to_be_bytes());
}

/// Capabilities with limits below the 2^4 outstanding reads and 2^30-byte messages the
/// control plane asks for on a ConnectX-7.
const SMALL_LIMITS: DeviceCaps = DeviceCaps {
    log_max_msg: 20,
    log_max_ra_req_qp: 2,
    log_max_ra_res_qp: 1,
    log_max_ra_req_dc: 3,
    log_max_ra_res_dc: 0,
    ..SOFT_NIC_CAPS
};

#[test]
fn the_executor_refuses_message_sizes_and_outstanding_reads_above_the_capabilities() {
    let mut raw = Raw::new(SMALL_LIMITS);
    let srq = raw.nic.create_srq(&raw.pd, 4).unwrap();
    let peer = |qpn| command::Peer {
        qpn,
        psn: 0,
        address: command::PeerAddress::InfiniBand { lid: 1 },
    };
    let limits = |log_msg_max, log_rra_max, log_sra_max| command::Limits {
        log_msg_max,
        log_rra_max,
        log_sra_max,
    };
    let too_large = Some((CommandStatus::BadParameter, 0x0a));
    for (service, receive, rc) in [
        (ServiceType::Rc, ReceiveQueue::ZeroSize, true),
        (
            ServiceType::Dci,
            ReceiveQueue::Srq { srqn: srq.srqn() },
            false,
        ),
    ] {
        let qp = raw.create_qp(service, receive).unwrap();
        let SoftObject::Qp(qpn) = qp else {
            panic!("{qp:?}")
        };
        let modify = |bytes: Vec<u8>| {
            raw.nic
                .modify_object(&qp, &bytes, &mut vec![0u8; OUTPUT_BYTES])
        };
        let path = if rc { Some(peer(qpn)) } else { None };
        modify(
            command::rst2init(qpn, 1, rc, (false, AtomicMode::NotSet))
                .encode()
                .unwrap(),
        )
        .unwrap();
        // One over the message size; (RC) one over the responder's reads; each refused and
        // the queue pair left in INIT.
        let mut refused = vec![limits(21, 0, 0)];
        if rc {
            refused.push(limits(20, 2, 0));
        }
        for wrong in refused {
            let e = modify(
                command::init2rtr(qpn, 1, 5, path, wrong)
                    .unwrap()
                    .encode()
                    .unwrap(),
            )
            .unwrap_err();
            assert_eq!(status_of(&e), too_large, "{service:?} {wrong:?}");
        }
        let fits = command::Limits::of(&SMALL_LIMITS, rc);
        assert_eq!(
            fits,
            if rc {
                limits(20, 1, 2)
            } else {
                limits(20, 0, 3)
            }
        );
        modify(
            command::init2rtr(qpn, 1, 5, path, fits)
                .unwrap()
                .encode()
                .unwrap(),
        )
        .unwrap();
        // The requester's reads: the RC limit is 2, the DC initiator's 3.
        let over = limits(20, 0, fits.log_sra_max + 1);
        let e = modify(command::rtr2rts(qpn, 0, over).encode().unwrap()).unwrap_err();
        assert_eq!(status_of(&e), too_large, "{service:?}");
        modify(command::rtr2rts(qpn, 0, fits).encode().unwrap()).unwrap();
    }
}

#[test]
fn queue_pairs_ask_for_the_reads_and_message_size_the_device_offers() {
    // On a ConnectX-7's capabilities: 2^4 reads each way, 2^30-byte messages (NVSHMEM's
    // values there); on a smaller device, its limits, which the executor holds the
    // commands to: connecting and reading through it proves the control plane asked for
    // no more.
    assert_eq!(
        command::Limits::of(&SOFT_NIC_CAPS, true),
        command::Limits {
            log_msg_max: 30,
            log_rra_max: 4,
            log_sra_max: 4
        }
    );
    let fabric = Fabric::new();
    let _engine = fabric.spawn_engine();
    let device = open(SMALL_LIMITS, 1, &fabric);
    let pd = device.alloc_pd().unwrap();
    let memory = Arc::new(DmaBuffer::zeroed(64, 64).unwrap());
    memory.write(0, b"limits").unwrap();
    let region = pd
        .register(memory.clone(), 0, 64, super::backend::MemoryAccess::all())
        .unwrap();
    let pending = pd
        .create_rc(QueueSpec::new(RingSize::new(16).unwrap()))
        .unwrap();
    let endpoint = pending.endpoint();
    let mut qp = pending.connect(&endpoint).unwrap();
    let read = crate::wqe::RdmaRead::new(region.remote(0)).sge(region.sge(32, 6).unwrap());
    qp.post(&read.signaled().build().unwrap(), &[region.registered()])
        .unwrap();
    assert!(matches!(poll(&mut qp), Ok(Polled::Sent { .. })));
    assert_eq!(&memory.to_vec()[32..38], b"limits");
    let _dci = pd
        .create_dci::<crate::wqe::Full>(QueueSpec::new(RingSize::new(16).unwrap()))
        .unwrap()
        .activate()
        .unwrap();
}

/// The `oi` of the CQ a queue pair completes to.
fn overrun_ignore(fabric: &Fabric, cqn: Cqn) -> bool {
    fabric.shared.lock().cqs[&cqn.0].overrun_ignore
}

#[test]
fn ring_cqs_ignore_overrun_only_where_none_can_happen() {
    let fabric = Fabric::new();
    let device = open(SOFT_NIC_CAPS, 1, &fabric);
    let pd = device.alloc_pd().unwrap();
    let ring = RingSize::new(16).unwrap();
    let cq_of = |spec: QueueSpec| {
        let pending = pd.create_rc(spec).unwrap();
        let cqn = fabric.send_cq(pending.qpn()).unwrap();
        (overrun_ignore(&fabric, cqn), pending)
    };
    let spec = QueueSpec::new(ring);
    let (send_only, _q1) = cq_of(spec);
    assert!(send_only, "send CQEs bounded by the ring's WQEBBs");
    let (small, _q2) = cq_of(QueueSpec {
        cq_entries: 8,
        ..spec
    });
    assert!(
        !small,
        "a ring CQ smaller than the send ring detects overrun"
    );
    let (receiving, _q3) = cq_of(spec.with_receives(Receives::SharedQueue));
    assert!(!receiving, "receive CQEs are not bounded by the send ring");
    let (collapsed, _q4) = cq_of(QueueSpec {
        cq_mode: CqMode::Collapsed,
        cq_entries: 1,
        ..spec
    });
    assert!(collapsed, "a collapsed CQ always ignores overrun");
    let dct = pd.create_dct(3, 16).unwrap();
    let cqn = fabric
        .receive_cq(crate::softnic::DctNumber(
            crate::wqe::Qpn::new(dct.dct()).unwrap(),
        ))
        .unwrap();
    assert!(
        !overrun_ignore(&fabric, cqn),
        "a DCT's receive CQ detects overrun"
    );
}

#[test]
fn a_full_ring_cq_overwrites_with_overrun_ignore_and_stops_without() {
    for oi in [true, false] {
        let fabric = Fabric::new();
        let _engine = fabric.spawn_engine();
        let device = open(SOFT_NIC_CAPS, 1, &fabric);
        let pd = device.alloc_pd().unwrap();
        let memory = Arc::new(DmaBuffer::zeroed(64, 64).unwrap());
        let region = pd
            .register(memory.clone(), 0, 64, super::backend::MemoryAccess::all())
            .unwrap();
        // A 2-entry ring CQ under a 16-WQEBB send ring: the control plane keeps overrun
        // detection; the test switches `oi` on the NIC's CQ to see what each does.
        let pending = pd
            .create_rc(QueueSpec {
                cq_entries: 2,
                ..QueueSpec::new(RingSize::new(16).unwrap())
            })
            .unwrap();
        let cqn = fabric.send_cq(pending.qpn()).unwrap();
        fabric
            .shared
            .lock()
            .cqs
            .get_mut(&cqn.0)
            .unwrap()
            .overrun_ignore = oi;
        let endpoint = pending.endpoint();
        let mut qp = pending.connect(&endpoint).unwrap();
        // Three signaled WRITEs, nothing polled: the third CQE finds the ring full.
        for i in 0..3u8 {
            qp.post(
                &RdmaWrite::new(region.remote(u64::from(i) * 8))
                    .inline(&[i + 1; 8])
                    .signaled()
                    .build()
                    .unwrap(),
                &[],
            )
            .unwrap();
        }
        let start = Instant::now();
        while fabric.counters().wqes_executed + fabric.counters().wqes_failed < 3
            && start.elapsed() < WAIT
        {
            std::thread::yield_now();
        }
        assert_eq!(fabric.cq_in_error(cqn), Some(!oi), "oi {oi}");
        let events = fabric.async_events();
        assert_eq!(
            events
                .iter()
                .any(|e| matches!(e, crate::softnic::AsyncEvent::CqError { .. })),
            !oi,
            "oi {oi}: {events:?}"
        );
    }
}

#[test]
fn queues_may_lie_inside_one_umem_at_offsets() {
    // Two 16-WQEBB rings in one UMEM and their records in another, as NVSHMEM places its
    // DC initiators; then the executor's bounds.
    let raw = Raw::new(SOFT_NIC_CAPS);
    let srq = raw.nic.create_srq(&raw.pd, 4).unwrap();
    let rings = raw
        .nic
        .register_umem_buffer(DmaBuffer::zeroed(2 * 16 * 64, 4096).unwrap())
        .unwrap();
    let records = raw
        .nic
        .register_umem_buffer(DmaBuffer::zeroed(16, 64).unwrap())
        .unwrap();
    let create = |wq_offset: u64, dbr_addr: u64| {
        let mut c: CreateQp = command::create_qp(
            ServiceType::Dci,
            super::backend::ProtectionDomainId::pdn(&raw.pd),
            raw.uar.page_id(),
            raw.cqn,
            4,
            rings.umem_id(),
            records.umem_id(),
            ReceiveQueue::Srq { srqn: srq.srqn() },
        );
        c.wq_umem_offset = wq_offset;
        c.qpc.dbr_addr = dbr_addr;
        let mut output = vec![0u8; OUTPUT_BYTES];
        raw.nic.create_object(&c.encode().unwrap(), &mut output)
    };
    let refused = |r: Result<SoftObject, NicError>| status_of(&r.unwrap_err());
    let mismatch = Some((CommandStatus::BadParameter, 0x02));
    assert_eq!(
        refused(create(32, 0)),
        mismatch,
        "a ring off a 64-byte boundary"
    );
    assert_eq!(
        refused(create(1088, 0)),
        mismatch,
        "a ring past the UMEM's end"
    );
    assert_eq!(
        refused(create(0, 16)),
        mismatch,
        "a record past the UMEM's end"
    );
    let census = raw.nic.fabric().census();
    assert_eq!(census.queue_pairs, 0, "refusals made nothing");
    create(0, 0).unwrap();
    create(1024, 8).unwrap();
    assert_eq!(raw.nic.fabric().census().queue_pairs, 2);
    // The same memory again is another queue's.
    assert_eq!(
        refused(create(1024, 8)),
        mismatch,
        "memory of another queue"
    );
}
