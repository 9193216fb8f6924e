//! The control plane over any [`Backend`]: devices, protection domains, memory regions,
//! and queue pairs created, connected and torn down by PRM commands.

use core::fmt;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::backend::{
    Backend, MemoryAccess, MemoryRegistration, ProtectionDomainId, QueueMemoryRef, RegisterMemory,
    SharedReceiveQueueId, UarPage, UmemId,
};
use super::caps::{DeviceCaps, Gid, LinkLayer, PortAttributes};
use super::command::{self, Peer, PeerAddress, OUTPUT_BYTES};
use super::connection::{DcEndpoint, RcEndpoint};
use super::error::NicError;
use super::prm::PrmError;
use super::prm::{Command, CreateCq, CreateDct, CreateQp, ReceiveQueue, ServiceType};
use super::roce::{UdpSourcePort, UDP_SOURCE_PORTS};
use crate::cq::{CompletionQueue, CqMode, CQE_BYTES};
use crate::memory::DmaBuffer;
use crate::order::{GpuThread, OrderingScope, ValidFor};
use crate::queue::RECORD_BYTES;
use crate::queue::{
    CompletionQueueMemory, Gpu, GpuDoorbell, Host, HostDoorbell, Placement, ProducerStateMemory,
    QpConfig, QueuePair, Registered, SendQueueConfig, SendQueueMemory, CQE_INIT_OP_OWN, RING_ALIGN,
};
use crate::wqe::{
    AvForm, Dc, LKey, LocalBuffer, Qpn, RKey, Rc, RemoteAddress, RingSize, Sge, TypedTransport,
    WqeError, WQEBB_BYTES,
};

/// The port every queue uses (single-port devices; multi-port selection is a follow-up).
const PORT: u8 = 1;

/// Receive WQEs a protection domain's shared receive queue holds
/// ([`ProtectionDomain::shared_receive_queue`]).
pub const SRQ_RECEIVES: u32 = 1024;

/// An opened device: its backend, capabilities, port and completion event queue.
///
/// Not `Clone`: handles made from it keep it alive as long as they need it.
pub struct Device<B: Backend> {
    inner: Arc<DeviceInner<B>>,
}

struct DeviceInner<B: Backend> {
    backend: B,
    caps: DeviceCaps,
    port: PortAttributes,
    eqn: u8,
    teardown_failures: AtomicU64,
    last_teardown_error: std::sync::Mutex<Option<NicError>>,
}

impl<B: Backend> fmt::Debug for Device<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.inner.backend.name())
            .field("caps", &self.inner.caps)
            .field("port", &self.inner.port)
            .finish()
    }
}

impl<B: Backend> DeviceInner<B> {
    /// Runs a command that creates an object; returns the object and the output.
    fn create<C: Command>(&self, command: &C) -> Result<(B::Object, Vec<u8>), NicError> {
        let input = command.encode()?;
        let mut output = vec![0u8; OUTPUT_BYTES];
        // SAFETY: `command` is one of the control plane's typed commands, encoded from the
        // objects this device made (UMEMs over queue memory its handles own, its UAR, PD and
        // CQs), never a raw address; the handle that receives the object keeps every one of
        // them alive until the object is destroyed.
        let object = unsafe { self.backend.create_object(&input, &mut output)? };
        Ok((object, output))
    }

    fn modify<C: Command>(&self, object: &B::Object, command: &C) -> Result<(), NicError> {
        let input = command.encode()?;
        let mut output = vec![0u8; OUTPUT_BYTES];
        // SAFETY: a typed state transition of `object`, encoded from values the control plane
        // validated; it names no memory (data access goes through registrations' keys).
        unsafe { self.backend.modify_object(object, &input, &mut output)? };
        command::output::<C>(&output)?;
        Ok(())
    }

    /// The GID queues send from and advertise, and its index: the port GID on
    /// InfiniBand, the RoCE v2 GID perftest would pick on Ethernet
    /// ([`PortAttributes::roce_v2_source`]); a RoCE port without one is
    /// [`NicError::NoRoceV2Gid`].
    fn source_gid(&self) -> Result<(u8, Gid), NicError> {
        self.port.source_gid().ok_or_else(|| NicError::NoRoceV2Gid {
            device: self.backend.name().to_owned(),
            port: self.port.port,
            entries: self.port.gids.len(),
        })
    }

    /// Destroys an object; a failure is counted (drop cannot return it) and reported as
    /// `false`, so that the caller keeps what the object may still use.
    fn destroy(&self, object: B::Object, input: Result<Vec<u8>, PrmError>) -> bool {
        let result = input
            .map_err(NicError::from)
            // SAFETY: the DESTROY command of `object` itself, sent when its handle drops;
            // handles keep their parents alive, so nothing depending on it still exists.
            .and_then(|input| unsafe { self.backend.destroy_object(object, &input) });
        match result {
            Ok(()) => true,
            Err(e) => {
                self.teardown_failures.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut last) = self.last_teardown_error.lock() {
                    *last = Some(e);
                }
                false
            }
        }
    }
}

impl<B: Backend> Device<B> {
    /// Opens the device behind `backend`: reads its capabilities with QUERY_HCA_CAP
    /// (general and atomic), checks that it can carry this crate's queues (CQE version 1,
    /// 64-byte WQE basic blocks), and queries port 1 and the completion event queue.
    pub fn open(backend: B) -> Result<Self, NicError> {
        let caps = command::query_caps(|input, output| {
            // SAFETY: QUERY_HCA_CAP commands built by `query_caps`; they name no memory and
            // no object, and the device writes only `output`.
            unsafe { backend.general_command(input, output) }
        })?;
        if caps.cqe_version != 1 {
            return Err(NicError::Capability {
                name: "cqe_version",
                found: caps.cqe_version.into(),
                needed: "1 (the only CQE format the CQ parser and the CUDA device library \
                         read); update the NIC firmware and rdma-core",
            });
        }
        let port = backend.query_port(PORT)?;
        let eqn = backend.query_eqn(0)?;
        let eqn = u8::try_from(eqn).map_err(|_| NicError::OutOfRange {
            what: "completion event queue number (cqc.c_eqn is 8 bits)",
            value: eqn.into(),
            max: u8::MAX.into(),
        })?;
        Ok(Self {
            inner: Arc::new(DeviceInner {
                backend,
                caps,
                port,
                eqn,
                teardown_failures: AtomicU64::new(0),
                last_teardown_error: std::sync::Mutex::new(None),
            }),
        })
    }

    /// The capabilities QUERY_HCA_CAP reported.
    pub fn caps(&self) -> &DeviceCaps {
        &self.inner.caps
    }

    /// The attributes of the port queues use.
    pub fn port(&self) -> &PortAttributes {
        &self.inner.port
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.inner.backend
    }

    /// The GID this device's queues send from and advertise, with its GID table index
    /// (see [`PortAttributes::source_gid`]), or [`NicError::NoRoceV2Gid`] on a RoCE port
    /// that has no RoCE v2 GID.
    pub fn source_gid(&self) -> Result<(u8, Gid), NicError> {
        self.inner.source_gid()
    }

    /// How many DESTROY commands failed while handles were dropped, and the last error.
    /// Zero on a healthy device: handles destroy in dependency order.
    pub fn teardown_failures(&self) -> (u64, Option<NicError>) {
        let last = self
            .inner
            .last_teardown_error
            .lock()
            .ok()
            .and_then(|l| l.clone());
        (self.inner.teardown_failures.load(Ordering::Relaxed), last)
    }

    /// Allocates a protection domain. It lives until its last memory region and queue pair
    /// are gone.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain<B>, NicError> {
        let pd = self.inner.backend.alloc_pd()?;
        Ok(ProtectionDomain {
            inner: Arc::new(PdInner {
                srq: std::sync::OnceLock::new(),
                srq_made: std::sync::Mutex::new(()),
                pd,
                device: self.inner.clone(),
            }),
        })
    }
}

struct PdInner<B: Backend> {
    // Fields drop in order: the SRQ (after every queue naming it, which hold this), then
    // the PD, then the device reference.
    srq: std::sync::OnceLock<B::Srq>,
    /// Held while the SRQ is made, so that it is made once.
    srq_made: std::sync::Mutex<()>,
    pd: B::Pd,
    device: Arc<DeviceInner<B>>,
}

impl<B: Backend> PdInner<B> {
    /// The PD's SRQ, made on first use.
    fn srq(&self) -> Result<&B::Srq, NicError> {
        if let Some(srq) = self.srq.get() {
            return Ok(srq);
        }
        let _made = self
            .srq_made
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(srq) = self.srq.get() {
            return Ok(srq);
        }
        let srq = self.device.backend.create_srq(&self.pd, SRQ_RECEIVES)?;
        Ok(self.srq.get_or_init(|| srq))
    }
}

/// A protection domain's shared receive queue (see
/// [`ProtectionDomain::shared_receive_queue`]).
pub struct SharedReceiveQueue<'a, B: Backend> {
    pd: &'a PdInner<B>,
    srq: &'a B::Srq,
}

impl<B: Backend> fmt::Debug for SharedReceiveQueue<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedReceiveQueue")
            .field("srqn", &self.srq.srqn())
            .finish()
    }
}

impl<B: Backend> SharedReceiveQueue<'_, B> {
    /// The SRQ number.
    pub fn srqn(&self) -> u32 {
        self.srq.srqn()
    }
    /// Posts `count` zero-length receive WQEs: each WRITE_WITH_IMM arriving at a queue
    /// that receives from this SRQ consumes one (and writes a CQE to that queue's CQ).
    /// Refused, posting none, when the SRQ cannot take them.
    pub fn post_receives(&self, count: u32) -> Result<(), NicError> {
        self.pd.device.backend.post_srq_receives(self.srq, count)
    }
}

/// A protection domain: memory regions and queue pairs are made in it.
pub struct ProtectionDomain<B: Backend> {
    inner: Arc<PdInner<B>>,
}

impl<B: Backend> fmt::Debug for ProtectionDomain<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProtectionDomain")
            .field("pdn", &self.inner.pd.pdn())
            .finish()
    }
}

/// A memory region of a [`ProtectionDomain`]: RDMA may reach it under its keys. It keeps
/// its protection domain (and the memory) alive.
pub struct MemoryRegion<B: Backend> {
    inner: Arc<MrInner<B>>,
}

struct MrInner<B: Backend> {
    mr: B::Mr,
    _pd: Arc<PdInner<B>>,
}

impl<B: Backend> fmt::Debug for MemoryRegion<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner.mr, f)
    }
}

// SAFETY: the backend's registration (itself `Registered`) lives as long as this value,
// and the answers are its own.
unsafe impl<B: Backend> Registered for MrInner<B> {
    fn lkey(&self) -> LKey {
        self.mr.lkey()
    }
    fn covers(&self, addr: u64, len: u64) -> bool {
        self.mr.covers(addr, len)
    }
}

impl<B: Backend> MemoryRegion<B> {
    /// The local key.
    pub fn lkey(&self) -> LKey {
        self.inner.mr.lkey()
    }
    /// The remote key.
    pub fn rkey(&self) -> RKey {
        self.inner.mr.rkey()
    }
    /// The address of the region's first byte.
    pub fn addr(&self) -> u64 {
        self.inner.mr.addr()
    }
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.inner.mr.len()
    }
    /// Whether it is empty (never: regions hold at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The address `offset` bytes into the region (not checked against its length: a WQE
    /// naming bytes outside it fails at the NIC with a protection error).
    pub fn addr_at(&self, offset: u64) -> u64 {
        self.addr().wrapping_add(offset)
    }
    /// Remote memory `offset` bytes into the region.
    pub fn remote(&self, offset: u64) -> RemoteAddress {
        RemoteAddress::new(self.addr_at(offset), self.rkey())
    }
    /// A gather or scatter entry of `len` bytes at `offset`.
    pub fn sge(&self, offset: u64, len: u32) -> Result<Sge, WqeError> {
        Sge::new(self.addr_at(offset), len, self.lkey())
    }
    /// The local buffer of an atomic's result at `offset`.
    pub fn local(&self, offset: u64) -> LocalBuffer {
        LocalBuffer::new(self.addr_at(offset), self.lkey())
    }
    /// A keep-alive handle for posting WQEs that name this region.
    pub fn registered(&self) -> Arc<dyn Registered> {
        self.inner.clone()
    }
    /// The backend's registration.
    pub fn backend_region(&self) -> &B::Mr {
        &self.inner.mr
    }
}

/// Where an RC queue pair's receives come from (DC initiators always name their
/// protection domain's SRQ, as NVSHMEM, the kernel's driver and UCX make them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Receives {
    /// No receive queue (`rq_type` 3, zero-size, as DOCA makes RC queue pairs): WRITE,
    /// READ and atomics reach the queue pair; a WRITE_WITH_IMM to it fails.
    #[default]
    None,
    /// The protection domain's shared receive queue (`rq_type` 1, as NVSHMEM makes RC
    /// queue pairs): a WRITE_WITH_IMM consumes one of its receive WQEs
    /// ([`SharedReceiveQueue::post_receives`]) and completes in the queue pair's CQ.
    SharedQueue,
}

/// How to make a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSpec {
    /// Send ring size.
    pub sq: RingSize,
    /// CQ entries (a power of two).
    pub cq_entries: u32,
    /// How the NIC fills the CQ: a ring (with overrun detection) or collapsed (overrun
    /// ignored, every CQE at entry 0).
    pub cq_mode: CqMode,
    /// The send queue's configuration.
    pub send: SendQueueConfig,
    /// Where an RC queue pair's receives come from.
    pub receives: Receives,
}

impl QueueSpec {
    /// A send ring of `sq` WQEBBs, as many ring-mode CQ entries, default configuration,
    /// no receive queue.
    pub fn new(sq: RingSize) -> Self {
        Self {
            sq,
            cq_entries: sq.wqebbs(),
            cq_mode: CqMode::Ring,
            send: SendQueueConfig::default(),
            receives: Receives::None,
        }
    }

    /// The same, receiving WRITE_WITH_IMM through the protection domain's SRQ.
    pub fn with_receives(mut self, receives: Receives) -> Self {
        self.receives = receives;
        self
    }
}

/// How queue memory is first filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueFill {
    /// Zeros (send rings, doorbell records, producer state).
    Zero,
    /// CQEs nobody has written: `op_own` of every 64-byte entry is invalid and
    /// hardware-owned.
    InvalidCqes,
}

/// Allocates queue memory in placement `P`. The host allocator is [`HostQueueMemory`]; a
/// GPU allocator (device memory, 64 KiB aligned, as NVSHMEM allocates it) comes from the
/// code that owns the CUDA context.
///
/// An allocator hands each buffer over by value: the queue memory takes it, and nothing
/// the allocator could keep reaches it afterwards (a [`DmaBuffer`] or [`DeviceBuffer`](crate::memory::DeviceBuffer) over
/// memory someone else still accesses can only be made through their `unsafe`
/// constructors, whose contracts forbid it).
pub trait QueueAllocator<P: Placement> {
    /// `len` bytes aligned to at least `align`, filled as `fill` says.
    fn allocate(&self, len: usize, align: usize, fill: QueueFill) -> Result<P::Owned, NicError>;
}

/// The host allocator of queue memory.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostQueueMemory;

impl QueueAllocator<Host> for HostQueueMemory {
    fn allocate(&self, len: usize, align: usize, fill: QueueFill) -> Result<DmaBuffer, NicError> {
        let buffer = DmaBuffer::zeroed(len, align)?;
        if fill == QueueFill::InvalidCqes {
            for entry in (0..len / CQE_BYTES).map(|i| i * CQE_BYTES) {
                buffer.write(entry + CQE_BYTES - 1, &[CQE_INIT_OP_OWN])?;
            }
        }
        Ok(buffer)
    }
}

/// A placement the control plane can put queues in.
pub trait QueuePlacement: Placement + umem::UmemRef {
    /// The doorbell register of `uar`, as producers of this placement reach it.
    fn doorbell<U: UarPage>(uar: &U) -> Result<Self::Doorbell, NicError>;
}

mod umem {
    use super::QueueMemoryRef;
    use crate::queue::{CompletionQueueMemory, Placement, SendQueueMemory};

    /// How the control plane names queue memory of a placement for UMEM registration
    /// (crate-private: only the control plane makes a [`QueueMemoryRef`]).
    pub trait UmemRef: Placement {
        /// The ring and doorbell record of `sq`, each registered under a claim on `sq`.
        fn sq_umems(sq: &SendQueueMemory<Self>) -> [QueueMemoryRef<'_>; 2];
        /// The ring and doorbell record of `cq`, each registered under a claim on `cq`.
        fn cq_umems(cq: &CompletionQueueMemory<Self>) -> [QueueMemoryRef<'_>; 2];
    }
}

impl umem::UmemRef for Host {
    fn sq_umems(sq: &SendQueueMemory) -> [QueueMemoryRef<'_>; 2] {
        let target = sq.claim_target();
        [sq.ring_buffer(), sq.dbrec_buffer()].map(|b| QueueMemoryRef::host(b, target))
    }
    fn cq_umems(cq: &CompletionQueueMemory) -> [QueueMemoryRef<'_>; 2] {
        let target = cq.claim_target();
        [cq.ring_buffer(), cq.dbrec_buffer()].map(|b| QueueMemoryRef::host(b, target))
    }
}

impl umem::UmemRef for Gpu {
    fn sq_umems(sq: &SendQueueMemory<Gpu>) -> [QueueMemoryRef<'_>; 2] {
        let target = sq.claim_target();
        [sq.ring_buffer(), sq.dbrec_buffer()].map(|b| QueueMemoryRef::gpu(b, target))
    }
    fn cq_umems(cq: &CompletionQueueMemory<Gpu>) -> [QueueMemoryRef<'_>; 2] {
        let target = cq.claim_target();
        [cq.ring_buffer(), cq.dbrec_buffer()].map(|b| QueueMemoryRef::gpu(b, target))
    }
}

impl QueuePlacement for Host {
    fn doorbell<U: UarPage>(uar: &U) -> Result<HostDoorbell, NicError> {
        uar.host_doorbell()
    }
}

impl QueuePlacement for Gpu {
    fn doorbell<U: UarPage>(uar: &U) -> Result<GpuDoorbell, NicError> {
        uar.gpu_doorbell()
    }
}

/// The NIC objects behind one queue pair (or DC target), destroyed in the hardware's order
/// when dropped: the queue, then its CQ, then the UMEMs and the UAR, then the protection
/// domain reference.
///
/// A DESTROY the device fails leaves an object that may still read its rings, write its CQ
/// and ring its UAR: then nothing it may use is released. The UMEM registrations (and the
/// queue memory they keep), the UAR and the protection domain stay allocated for the life
/// of the process (a leak the device's teardown counter reports,
/// [`Device::teardown_failures`]), rather than memory the NIC may write being reused.
pub(crate) struct QueueObjects<B: Backend> {
    device: Arc<DeviceInner<B>>,
    /// The queue pair or DC target, its number, and its DESTROY command's encoder.
    qp: Option<(B::Object, u32, DestroyCommand)>,
    cq: Option<(B::Object, u32)>,
    umems: Vec<B::Umem>,
    uar: Option<B::Uar>,
    pd: Option<Arc<PdInner<B>>>,
    connection: Connection,
}

/// How a queue pair is brought to RTS, kept so that recovery can do it again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Connection {
    /// No queue pair (the CQ of a DC target).
    None,
    /// An RC queue pair: how many times it was connected (each connection sends from a
    /// PSN of its own, [`send_psn`]) and how it picks its RoCE v2 UDP source port.
    Rc {
        connections: u32,
        udp_source_port: UdpSourcePort,
    },
    /// A DC initiator.
    Dci,
}

/// The PSN an RC queue pair sends from at its connection number `connection` (0 first,
/// then one more per recovery): a value derived from the QPN (any 24-bit value works;
/// distinct ones make traces easier to read), moved on by an odd step per connection so
/// that a peer still expecting the old stream cannot take the new one for it.
fn send_psn(qpn: u32, connection: u32) -> u32 {
    qpn.wrapping_mul(0x9e37_79b9)
        .wrapping_add(connection.wrapping_mul(0x00c3_5a97))
        & 0xff_ffff
}

/// A DESTROY command's encoder (DESTROY_QP or DESTROY_DCT) from the object's number.
type DestroyCommand = fn(u32) -> Result<Vec<u8>, PrmError>;

impl<B: Backend> fmt::Debug for QueueObjects<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueObjects")
            .field("qpn", &self.qp.as_ref().map(|q| q.1))
            .field("cqn", &self.cq.as_ref().map(|c| c.1))
            .finish()
    }
}

impl<B: Backend> QueueObjects<B> {
    fn new(
        device: &Arc<DeviceInner<B>>,
        pd: &Arc<PdInner<B>>,
        umems: usize,
        connection: Connection,
    ) -> Self {
        Self {
            device: device.clone(),
            qp: None,
            cq: None,
            umems: Vec::with_capacity(umems),
            uar: None,
            pd: Some(pd.clone()),
            connection,
        }
    }

    /// Keeps everything a live object may use for the life of the process: the CQ (if it
    /// was not destroyed), the UMEM registrations, the UAR and the protection domain.
    fn keep_for_the_device(&mut self) {
        keep_for_the_process((
            self.cq.take(),
            core::mem::take(&mut self.umems),
            self.uar.take(),
            self.pd.take(),
        ));
    }
}

/// What [`keep_for_the_process`] kept: never read, never dropped. Holding the boxes in a
/// static keeps that memory reachable, so that a leak checker (LeakSanitizer, Miri) sees
/// memory retained on purpose for a device, not memory lost.
static KEPT_FOR_THE_DEVICE: std::sync::Mutex<Vec<Box<dyn core::any::Any + Send>>> =
    std::sync::Mutex::new(Vec::new());

/// Moves `value` to the heap and never drops it: what a device may still use after it
/// failed a DESTROY stays allocated, registered and mapped for the life of the process.
fn keep_for_the_process<T: Send + 'static>(value: T) {
    let kept = Box::new(value);
    // A panic while the list was held cannot have left it half-pushed: push anyway.
    let mut all = KEPT_FOR_THE_DEVICE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    all.push(kept);
}

impl<B: Backend> Drop for QueueObjects<B> {
    fn drop(&mut self) {
        if let Some((object, number, destroy)) = self.qp.take() {
            if !self.device.destroy(object, destroy(number)) {
                return self.keep_for_the_device();
            }
        }
        if let Some((object, cqn)) = self.cq.take() {
            if !self.device.destroy(object, command::destroy_cq(cqn)) {
                return self.keep_for_the_device();
            }
        }
        // UMEMs and the UAR deregister as they drop, after the objects using them.
        self.umems.clear();
        self.uar.take();
    }
}

impl<B: Backend> QueueObjects<B> {
    fn qpn(&self) -> Result<u32, NicError> {
        self.qp
            .as_ref()
            .map(|(_, qpn, _)| *qpn)
            .ok_or(NicError::Unsupported {
                what: "queue pair without an object".into(),
            })
    }

    fn modify<C: Command>(&self, command: &C) -> Result<(), NicError> {
        let (object, _, _) = self.qp.as_ref().ok_or(NicError::Unsupported {
            what: "queue pair without an object".into(),
        })?;
        self.device.modify(object, command)
    }

    /// What the peer needs to connect to this RC queue pair's next connection (its QPN,
    /// the PSN it will send from, its port's addresses).
    fn endpoint(&self) -> Option<RcEndpoint> {
        let Connection::Rc { connections, .. } = self.connection else {
            return None;
        };
        let qpn = self.qpn().ok()?;
        let port = &self.device.port;
        Some(RcEndpoint {
            qpn,
            psn: send_psn(qpn, connections),
            lid: port.lid,
            mtu: port.mtu,
            link_layer: port.link_layer,
            gid: port.source_gid().map(|(_, gid)| gid).unwrap_or_default(),
        })
    }

    /// How INIT2RTR reaches `remote`: by LID on InfiniBand; on Ethernet by GID, with the MAC
    /// an address handle to that GID resolves to (the backend's address vector: on a
    /// ConnectX the kernel's neighbour lookup, on the software NIC its fabric's).
    fn peer_address(&self, remote: &RcEndpoint, qpn: u32) -> Result<PeerAddress, NicError> {
        let device = &*self.device;
        let port = &device.port;
        if remote.link_layer != port.link_layer {
            return Err(NicError::Unsupported {
                what: format!(
                    "connecting a {:?} port to a {:?} peer",
                    port.link_layer, remote.link_layer
                ),
            });
        }
        match port.link_layer {
            LinkLayer::InfiniBand => Ok(PeerAddress::InfiniBand { lid: remote.lid }),
            LinkLayer::Ethernet => {
                let (source_gid_index, _) = device.source_gid()?;
                // Held until the objects drop (taken only by a failed destroy).
                let pd = self.pd.as_ref().ok_or(NicError::Unsupported {
                    what: "a queue pair whose protection domain is gone".into(),
                })?;
                let av =
                    device
                        .backend
                        .address_vector(&pd.pd, port, source_gid_index, remote.gid)?;
                let Connection::Rc {
                    udp_source_port, ..
                } = self.connection
                else {
                    return Err(NicError::Unsupported {
                        what: "a peer for a queue pair that is not RC".into(),
                    });
                };
                Ok(PeerAddress::Roce {
                    gid: remote.gid.0,
                    mac: av.rmac,
                    source_gid_index,
                    udp_source_port: udp_source_port.for_connection(qpn, remote.qpn),
                })
            }
        }
    }

    /// RST2INIT, INIT2RTR and RTR2RTS: an RC queue pair to `remote` (with remote read,
    /// write and atomics enabled), a DCI to no one.
    fn connect(&mut self, remote: Option<&RcEndpoint>) -> Result<(), NicError> {
        let qpn = self.qpn()?;
        let device = &*self.device;
        let port = &device.port;
        match (self.connection, remote) {
            (Connection::Rc { connections, .. }, Some(remote)) => {
                let address = self.peer_address(remote, qpn)?;
                self.modify(&command::rst2init(
                    qpn,
                    port.port,
                    true,
                    command::atomic_access(&device.caps, false),
                ))?;
                let limits = command::Limits::of(&device.caps, true);
                self.modify(&command::init2rtr(
                    qpn,
                    port.port,
                    port.mtu.min(remote.mtu).code(),
                    Some(Peer {
                        qpn: remote.qpn,
                        psn: remote.psn,
                        address,
                    }),
                    limits,
                )?)?;
                self.modify(&command::rtr2rts(qpn, send_psn(qpn, connections), limits))?;
                if let Connection::Rc { connections, .. } = &mut self.connection {
                    *connections = connections.wrapping_add(1);
                }
                Ok(())
            }
            (Connection::Dci, None) => {
                self.modify(&command::rst2init(
                    qpn,
                    port.port,
                    false,
                    (false, super::prm::AtomicMode::NotSet),
                ))?;
                let limits = command::Limits::of(&device.caps, false);
                self.modify(&command::init2rtr(
                    qpn,
                    port.port,
                    port.mtu.code(),
                    None,
                    limits,
                )?)?;
                self.modify(&command::rtr2rts(qpn, 0, limits))
            }
            (connection, _) => Err(NicError::Unsupported {
                what: format!(
                    "connecting a {connection:?} queue pair {} a remote endpoint",
                    if remote.is_some() { "to" } else { "without" }
                ),
            }),
        }
    }
}

impl<B: Backend> crate::queue::NicObjects for QueueObjects<B> {
    fn to_error(&self) -> Result<(), NicError> {
        self.modify(&command::to_error(self.qpn()?))
    }
    fn to_reset(&self) -> Result<(), NicError> {
        self.modify(&command::to_reset(self.qpn()?))
    }
    fn reconnect(&mut self, remote: Option<&RcEndpoint>) -> Result<(), NicError> {
        self.connect(remote)
    }
    fn endpoint(&self) -> Option<RcEndpoint> {
        QueueObjects::endpoint(self)
    }
}

/// The memory and NIC objects of a queue pair not yet ready to send.
struct Building<B: Backend, P: Placement> {
    objects: QueueObjects<B>,
    sq: SendQueueMemory<P>,
    cq: CompletionQueueMemory<P>,
    spec: QueueSpec,
    qpn: Qpn,
}

impl<B: Backend> ProtectionDomain<B> {
    /// The protection domain number.
    pub fn pdn(&self) -> u32 {
        self.inner.pd.pdn()
    }

    fn device(&self) -> &DeviceInner<B> {
        &self.inner.device
    }

    /// The protection domain's shared receive queue, made on first use ([`SRQ_RECEIVES`]
    /// receive WQEs): its DC targets and DC initiators name it, and its RC queue pairs made
    /// with [`Receives::SharedQueue`] take WRITE_WITH_IMM from it. It lives as long as the
    /// protection domain (every queue naming it keeps that alive).
    pub fn shared_receive_queue(&self) -> Result<SharedReceiveQueue<'_, B>, NicError> {
        Ok(SharedReceiveQueue {
            pd: &self.inner,
            srq: self.inner.srq()?,
        })
    }

    /// Registers `len` bytes of `buffer` from `offset` with `access`.
    pub fn register(
        &self,
        buffer: Arc<DmaBuffer>,
        offset: usize,
        len: usize,
        access: MemoryAccess,
    ) -> Result<MemoryRegion<B>, NicError> {
        self.register_memory(
            RegisterMemory::Host {
                buffer,
                offset,
                len,
            },
            access,
        )
    }

    /// Registers host or GPU memory with `access`.
    pub fn register_memory(
        &self,
        memory: RegisterMemory,
        access: MemoryAccess,
    ) -> Result<MemoryRegion<B>, NicError> {
        let mr = self
            .device()
            .backend
            .register_memory(&self.inner.pd, memory, access)?;
        Ok(MemoryRegion {
            inner: Arc::new(MrInner {
                mr,
                _pd: self.inner.clone(),
            }),
        })
    }

    /// Creates the CQ and the QP of `service` in RESET, with memory from `allocator`.
    fn build<P: QueuePlacement>(
        &self,
        service: ServiceType,
        spec: QueueSpec,
        allocator: &dyn QueueAllocator<P>,
    ) -> Result<Building<B, P>, NicError> {
        let device = self.device();
        let caps = &device.caps;
        let log_sq = spec.sq.wqebbs().trailing_zeros();
        if log_sq > caps.log_max_qp_size.into() {
            return Err(NicError::OutOfRange {
                what: "send queue size (WQEBBs)",
                value: spec.sq.wqebbs().into(),
                max: 1 << caps.log_max_qp_size,
            });
        }
        let entries = spec.cq_entries;
        if entries == 0 || !entries.is_power_of_two() {
            return Err(NicError::Memory(crate::memory::DmaError::BadLength {
                len: entries as usize * CQE_BYTES,
            }));
        }
        let log_cq = entries.trailing_zeros();
        if log_cq > caps.log_max_cq_size.into() {
            return Err(NicError::OutOfRange {
                what: "CQ entries",
                value: entries.into(),
                max: 1 << caps.log_max_cq_size,
            });
        }
        // A RoCE port without a RoCE v2 GID cannot connect anything: say so before
        // allocating.
        device.source_gid()?;
        // DCIs name the SRQ (never receiving); RC queue pairs when asked to receive.
        let receive = match (service, spec.receives) {
            (ServiceType::Dci, _) | (ServiceType::Rc, Receives::SharedQueue) => ReceiveQueue::Srq {
                srqn: self.inner.srq()?.srqn(),
            },
            (ServiceType::Rc, Receives::None) => ReceiveQueue::ZeroSize,
        };
        let uar = device.backend.alloc_uar()?;
        let cq = CompletionQueueMemory::<P>::from_parts(
            entries,
            allocator
                .allocate(
                    entries as usize * CQE_BYTES,
                    RING_ALIGN,
                    QueueFill::InvalidCqes,
                )?
                .into(),
            allocator
                .allocate(RECORD_BYTES, 64, QueueFill::Zero)?
                .into(),
        )?;
        let sq = SendQueueMemory::<P>::from_parts(
            spec.sq,
            allocator
                .allocate(
                    spec.sq.wqebbs() as usize * WQEBB_BYTES,
                    RING_ALIGN,
                    QueueFill::Zero,
                )?
                .into(),
            allocator
                .allocate(RECORD_BYTES, 64, QueueFill::Zero)?
                .into(),
            P::doorbell(&uar)?,
        )?;
        let uar_page = uar.page_id();
        let connection = match service {
            ServiceType::Rc => Connection::Rc {
                connections: 0,
                udp_source_port: UdpSourcePort::Spread,
            },
            ServiceType::Dci => Connection::Dci,
        };
        let mut objects = QueueObjects::new(&self.inner.device, &self.inner, 4, connection);
        // Held by the objects from here on: a CQ or QP made over it keeps it if its
        // destruction fails.
        objects.uar = Some(uar);
        // CQ ring, CQ record, send ring, send record: the order `umem(i)` reads below.
        for memory in P::cq_umems(&cq).into_iter().chain(P::sq_umems(&sq)) {
            objects.umems.push(device.backend.register_umem(memory)?);
        }
        let umem = |i: usize| objects.umems[i].umem_id();
        // Overrun ignore (`cqc.oi`), as NVSHMEM and DOCA set it, wherever it cannot lose a
        // CQE. This CQ serves this one queue pair. A collapsed CQ overwrites its one entry
        // by design (each CQE retires every WQE before it): always. A ring CQ holds the
        // send CQEs of at most the WQEs not yet retired, because a producer reuses a WQEBB
        // only after a polled CQE covers it (each WQE fills at least one WQEBB, and an
        // error flushes at most the WQEs outstanding, one CQE each): with at least as many
        // entries as the ring has WQEBBs it cannot overrun, so it ignores overrun. A queue
        // pair that also receives (WRITE_WITH_IMM through the SRQ) has receive CQEs nothing
        // here bounds, and a ring CQ smaller than the send ring could overrun: those keep
        // overrun detection, so that an overrun stops the CQ with an error event instead of
        // overwriting a CQE nobody read.
        let receives = service == ServiceType::Rc && receive != ReceiveQueue::ZeroSize;
        let overrun_ignore = match spec.cq_mode {
            CqMode::Collapsed => true,
            CqMode::Ring => !receives && entries >= spec.sq.wqebbs(),
        };
        let (cq_object, output) = device.create(&command::create_cq(
            log_cq as u8,
            spec.cq_mode == CqMode::Collapsed,
            overrun_ignore,
            uar_page,
            device.eqn,
            umem(0),
            umem(1),
        ))?;
        // The object is owned from here on, so a failure below still destroys it.
        let cqn = command::output::<CreateCq>(&output).map(|o| o.cqn);
        objects.cq = Some((cq_object, cqn.as_ref().copied().unwrap_or(0)));
        let cqn = cqn?;
        let (qp_object, output) = device.create(&command::create_qp(
            service,
            self.pdn(),
            uar_page,
            cqn,
            log_sq as u8,
            umem(2),
            umem(3),
            receive,
        ))?;
        let qpn = command::output::<CreateQp>(&output).map(|o| o.qpn);
        objects.qp = Some((
            qp_object,
            qpn.as_ref().copied().unwrap_or(0),
            command::destroy_qp,
        ));
        let qpn = Qpn::new(qpn?).map_err(NicError::Queue)?;
        Ok(Building {
            objects,
            sq,
            cq,
            spec,
            qpn,
        })
    }

    /// Creates an RC queue pair in host memory (in RESET): connect it with
    /// [`PendingRc::connect`] to get the [`QueuePair`].
    pub fn create_rc(&self, spec: QueueSpec) -> Result<PendingRc<B, Host>, NicError> {
        self.create_rc_in(spec, &HostQueueMemory)
    }

    /// Creates an RC queue pair with memory from `allocator` (GPU memory for `Gpu`).
    pub fn create_rc_in<P: QueuePlacement>(
        &self,
        spec: QueueSpec,
        allocator: &dyn QueueAllocator<P>,
    ) -> Result<PendingRc<B, P>, NicError> {
        let building = self.build(ServiceType::Rc, spec, allocator)?;
        Ok(PendingRc { building })
    }

    /// Creates a DC initiator in host memory (in RESET): activate it with
    /// [`PendingDci::activate`]. A compact address vector needs the device's
    /// `compact_address_vector` capability.
    pub fn create_dci<Av: AvForm>(
        &self,
        spec: QueueSpec,
    ) -> Result<PendingDci<B, Av, Host>, NicError> {
        self.create_dci_in(spec, &HostQueueMemory)
    }

    /// Creates a DC initiator with memory from `allocator`.
    pub fn create_dci_in<Av: AvForm, P: QueuePlacement>(
        &self,
        spec: QueueSpec,
        allocator: &dyn QueueAllocator<P>,
    ) -> Result<PendingDci<B, Av, P>, NicError> {
        let caps = &self.device().caps;
        if !caps.dc {
            return Err(NicError::Capability {
                name: "dct",
                found: 0,
                needed: "DC transport support",
            });
        }
        if Av::DS == 1 && !caps.compact_address_vector {
            return Err(NicError::Capability {
                name: "compact_address_vector",
                found: 0,
                needed: "1 for 16-byte address vectors; use the full (48-byte) form",
            });
        }
        let building = self.build(ServiceType::Dci, spec, allocator)?;
        Ok(PendingDci {
            building,
            _av: PhantomData,
        })
    }

    /// Creates a DC target with access key `access_key`, its receive completions in a
    /// host CQ of `cq_entries` entries.
    pub fn create_dct(
        &self,
        access_key: u64,
        cq_entries: u32,
    ) -> Result<DcTargetQueue<B>, NicError> {
        let device = self.device();
        if !device.caps.dc {
            return Err(NicError::Capability {
                name: "dct",
                found: 0,
                needed: "DC transport support",
            });
        }
        if cq_entries == 0 || !cq_entries.is_power_of_two() {
            return Err(NicError::Memory(crate::memory::DmaError::BadLength {
                len: cq_entries as usize * CQE_BYTES,
            }));
        }
        let srqn = self.inner.srq()?.srqn();
        let uar = device.backend.alloc_uar()?;
        let cq = CompletionQueueMemory::<Host>::allocate(cq_entries)?;
        let (source_gid_index, gid) = device.source_gid()?;
        let uar_page = uar.page_id();
        let mut objects = QueueObjects::new(&self.inner.device, &self.inner, 2, Connection::None);
        objects.uar = Some(uar);
        for memory in <Host as umem::UmemRef>::cq_umems(&cq) {
            objects.umems.push(device.backend.register_umem(memory)?);
        }
        // Receive completions only, which nothing bounds: overrun detected.
        let (cq_object, output) = device.create(&command::create_cq(
            cq_entries.trailing_zeros() as u8,
            false,
            false,
            uar_page,
            device.eqn,
            objects.umems[0].umem_id(),
            objects.umems[1].umem_id(),
        ))?;
        let cqn = command::output::<CreateCq>(&output).map(|o| o.cqn);
        objects.cq = Some((cq_object, cqn.as_ref().copied().unwrap_or(0)));
        let cqn = cqn?;
        let (dct_object, output) = device.create(&command::create_dct(
            self.pdn(),
            cqn,
            srqn,
            access_key,
            PORT,
            device.port.mtu.code(),
            command::atomic_access(&device.caps, true),
            source_gid_index,
        )?)?;
        let dct = command::output::<CreateDct>(&output).map(|o| o.dctn);
        objects.qp = Some((
            dct_object,
            dct.as_ref().copied().unwrap_or(0),
            command::destroy_dct,
        ));
        let dct = dct?;
        let port = &device.port;
        let address_vector =
            device
                .backend
                .address_vector(&self.inner.pd, port, source_gid_index, gid)?;
        Ok(DcTargetQueue {
            endpoint: DcEndpoint {
                dct,
                access_key,
                lid: port.lid,
                mtu: port.mtu,
                link_layer: port.link_layer,
                gid,
                address_vector,
            },
            cq: CompletionQueue::new(cq, CqMode::Ring),
            _objects: objects,
        })
    }
}

impl<B: Backend, P: Placement> Building<B, P> {
    fn device_pair<T: TypedTransport, S>(
        self,
        state: ProducerStateMemory<P>,
        scope: S,
    ) -> Result<QueuePair<T, P, S>, NicError>
    where
        S: OrderingScope<Producer = GpuThread> + ValidFor<P>,
    {
        let Building {
            objects,
            sq,
            cq,
            spec,
            qpn,
        } = self;
        let config = QpConfig {
            send: spec.send,
            cq_mode: spec.cq_mode,
        };
        let pair = QueuePair::for_device(qpn, sq, cq, state, config, scope)?;
        Ok(pair.with_nic_objects(Box::new(objects)))
    }
}

impl<B: Backend> Building<B, Host> {
    fn host_pair<T: TypedTransport>(self) -> Result<QueuePair<T>, NicError> {
        let Building {
            objects,
            sq,
            cq,
            spec,
            qpn,
        } = self;
        let config = QpConfig {
            send: spec.send,
            cq_mode: spec.cq_mode,
        };
        let pair = QueuePair::new(qpn, sq, cq, config)?;
        Ok(pair.with_nic_objects(Box::new(objects)))
    }
}

/// An RC queue pair made but not connected: it has a number and an endpoint to send to
/// the peer, and no way to post until [`connect`](PendingRc::connect) has moved it to RTS.
pub struct PendingRc<B: Backend, P: Placement> {
    building: Building<B, P>,
}

impl<B: Backend, P: Placement> fmt::Debug for PendingRc<B, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingRc")
            .field("qpn", &self.building.qpn)
            .field("connection", &self.building.objects.connection)
            .finish()
    }
}

impl<B: Backend, P: Placement> PendingRc<B, P> {
    /// The queue pair number.
    pub fn qpn(&self) -> Qpn {
        self.building.qpn
    }

    /// What the peer needs to connect to this queue pair: its number, the PSN it sends
    /// from, and its port's LID, MTU, link layer and GID (on RoCE the port's RoCE v2 GID,
    /// [`Device::source_gid`]).
    pub fn endpoint(&self) -> RcEndpoint {
        // An RC queue pair's objects always have an endpoint.
        self.building.objects.endpoint().unwrap_or(RcEndpoint {
            qpn: self.building.qpn.get(),
            psn: 0,
            lid: 0,
            mtu: crate::nic::Mtu::Mtu256,
            link_layer: LinkLayer::InfiniBand,
            gid: Gid::default(),
        })
    }

    /// The RoCE v2 UDP source port rule of the queue pair (every connection, recoveries
    /// included): [`UdpSourcePort::Spread`] unless set. A fixed port must lie in
    /// [`UDP_SOURCE_PORTS`](crate::nic::roce::UDP_SOURCE_PORTS). InfiniBand ports send no
    /// UDP and ignore it.
    pub fn set_udp_source_port(&mut self, port: UdpSourcePort) -> Result<(), NicError> {
        if let UdpSourcePort::Fixed(p) = port {
            if !UDP_SOURCE_PORTS.contains(&p) {
                return Err(NicError::OutOfRange {
                    what: "RoCE v2 UDP source port (0xc000 to 0xffff)",
                    value: p.into(),
                    max: (*UDP_SOURCE_PORTS.end()).into(),
                });
            }
        }
        if let Connection::Rc {
            udp_source_port, ..
        } = &mut self.building.objects.connection
        {
            *udp_source_port = port;
        }
        Ok(())
    }
}

impl<B: Backend> PendingRc<B, Host> {
    /// Connects to `remote` (RST -> INIT -> RTR -> RTS) and returns the queue pair, posted
    /// from CPU threads. On failure the queue pair is destroyed.
    pub fn connect(mut self, remote: &RcEndpoint) -> Result<QueuePair<Rc>, NicError> {
        self.building.objects.connect(Some(remote))?;
        self.building.host_pair()
    }
}

impl<B: Backend, P: Placement> PendingRc<B, P> {
    /// Connects to `remote` and returns the queue pair GPU threads post to with `scope`;
    /// `state` (moved in: the queue pair owns it) holds the device producer state.
    pub fn connect_device<S>(
        mut self,
        remote: &RcEndpoint,
        state: ProducerStateMemory<P>,
        scope: S,
    ) -> Result<QueuePair<Rc, P, S>, NicError>
    where
        S: OrderingScope<Producer = GpuThread> + ValidFor<P>,
    {
        self.building.objects.connect(Some(remote))?;
        self.building.device_pair(state, scope)
    }
}

/// A DC initiator made but not active: [`activate`](PendingDci::activate) moves it to RTS.
pub struct PendingDci<B: Backend, Av: AvForm, P: Placement> {
    building: Building<B, P>,
    _av: PhantomData<Av>,
}

impl<B: Backend, Av: AvForm, P: Placement> fmt::Debug for PendingDci<B, Av, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingDci")
            .field("qpn", &self.building.qpn)
            .finish()
    }
}

impl<B: Backend, Av: AvForm, P: Placement> PendingDci<B, Av, P> {
    /// The queue pair number.
    pub fn qpn(&self) -> Qpn {
        self.building.qpn
    }

    /// Activates the DCI (RST -> INIT -> RTR -> RTS) for a GPU producer with `scope`.
    pub fn activate_device<S>(
        mut self,
        state: ProducerStateMemory<P>,
        scope: S,
    ) -> Result<QueuePair<Dc<Av>, P, S>, NicError>
    where
        S: OrderingScope<Producer = GpuThread> + ValidFor<P>,
        Dc<Av>: TypedTransport,
    {
        self.building.objects.connect(None)?;
        self.building.device_pair(state, scope)
    }
}

impl<B: Backend, Av: AvForm> PendingDci<B, Av, Host>
where
    Dc<Av>: TypedTransport,
{
    /// Activates the DCI (RST -> INIT -> RTR -> RTS) for CPU producers.
    pub fn activate(mut self) -> Result<QueuePair<Dc<Av>>, NicError> {
        self.building.objects.connect(None)?;
        self.building.host_pair()
    }
}

/// A DC target: its endpoint for initiators, and the CQ its receive completions go to.
/// Dropping it destroys the DCT, then its CQ.
pub struct DcTargetQueue<B: Backend> {
    endpoint: DcEndpoint,
    // Fields drop in order: the DCT is destroyed, then its CQ and UMEMs, and only then is
    // the CQ's memory released.
    _objects: QueueObjects<B>,
    cq: CompletionQueue,
}

impl<B: Backend> fmt::Debug for DcTargetQueue<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DcTargetQueue")
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl<B: Backend> DcTargetQueue<B> {
    /// What initiators need to reach the target.
    pub fn endpoint(&self) -> DcEndpoint {
        self.endpoint
    }
    /// The DCT number.
    pub fn dct(&self) -> u32 {
        self.endpoint.dct
    }
    /// The CQ receive completions go to.
    pub fn cq(&mut self) -> &mut CompletionQueue {
        &mut self.cq
    }
}
