//! The software NIC as a control-plane backend: it executes the PRM command bytes the
//! control plane sends, on a [`Fabric`] node.
//!
//! Each [`SoftNic`] is one device: a node of a fabric (one port, one LID) with its own
//! tables of protection domains, UMEM registrations and UAR pages. Commands are decoded
//! with [`prm`](super::prm)'s decoders and answered with its output encoders, exactly as
//! the hardware would answer them:
//!
//! - QUERY_HCA_CAP (general and atomic): the device's [`DeviceCaps`];
//! - CREATE_CQ: a CQ over the ring and doorbell record the UMEM ids and offsets name
//!   (64-byte CQEs; collapsed with overrun ignore, or a ring without);
//! - CREATE_QP (RC or DCI): a queue pair in RESET over the UMEMs, the UAR page's doorbell
//!   and the named CQs;
//! - RST2INIT_QP, INIT2RTR_QP, RTR2RTS_QP: the state machine; a transition from the wrong
//!   state is status BAD_QP_STATE and changes nothing; a WQE published in INIT or RTR is an
//!   error CQE (LOCAL_QP_OP) and the queue goes to error (in RESET the NIC reads neither
//!   doorbell nor record);
//! - 2ERR_QP (any state): every WQE not yet executed is flushed, signaled or not, each
//!   with a flush-error CQE; 2RST_QP (any state): the queue pair forgets its progress (the
//!   next WQE index is 0), its responses in flight and its receive side, and writes no
//!   CQE (those already written stay);
//! - CREATE_DCT: a DC target reporting to the named CQ;
//! - DESTROY_QP, DESTROY_DCT, DESTROY_CQ: refused (RESOURCE_BUSY) while a queue still uses
//!   the CQ.
//!
//! A malformed command (short, an unknown opcode, a bit outside every field, a value with
//! no meaning) is a typed [`NicError`] and changes nothing: every check runs before the
//! NIC's tables change. A well-formed command the NIC refuses (an unknown UMEM, a ring
//! that does not fit its UMEM, a missing CQ) writes the status and syndrome into the
//! output and returns [`NicError::Command`], as a DEVX call reports a failed command.
//!
//! Receive queues are shared receive queues ([`Backend::create_srq`]): DC targets need one
//! (CREATE_DCT with `srqn_xrqn` 0 is refused, as the kernel's driver and UCX refuse it),
//! DC initiators name one (`rq_type` 1, as NVSHMEM, the kernel and UCX make them), and an
//! RC queue pair takes WRITE_WITH_IMM only from one: each consumes a zero-length receive
//! WQE posted with [`Backend::post_srq_receives`] (the SRQ's ring is modelled by its count,
//! not read from memory); with none posted, or with a zero-size RQ, a WRITE_WITH_IMM to it
//! fails as receiver-not-ready.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use super::backend::{
    Backend, BackendObject, MemoryAccess, MemoryRegistration, ProtectionDomainId, QueueMemoryRef,
    RegisterMemory, SharedReceiveQueueId, UarPage, UmemId,
};
use super::caps::{
    AtomicEndianness, DeviceCaps, Gid, GidEntry, GidType, LinkLayer, Mtu, PortAttributes,
};
use super::error::NicError;
use super::prm::log::CommandRecord;
use super::prm::PrmError;
use crate::memory::DmaBuffer;
use crate::queue::executor::ExecutorClaim;
use crate::queue::{GpuDoorbell, HostDoorbell};
use crate::softnic::{Fabric, MemoryRegion, NodeId};
use crate::wqe::segment::AddressVectorSegment;
use crate::wqe::{FullAddressVector, Grh, LinkAddress, RKey};

/// The capabilities a software NIC reports unless told otherwise: CQE version 1, compact
/// address vectors, send queues up to 2^15 WQEBBs, CQs up to 2^22 entries, WQEs up to 1 KiB,
/// 4- and 8-byte atomics including the masked ones, big-endian.
pub const SOFT_NIC_CAPS: DeviceCaps = DeviceCaps {
    cqe_version: 1,
    compact_address_vector: true,
    log_max_qp_size: 15,
    log_max_cq_size: 22,
    max_send_wqe_bytes: 1024,
    atomic: true,
    standard_atomics: true,
    masked_atomics: true,
    atomic_sizes: 0b1100,
    atomic_sizes_dc: 0b1100,
    atomic_endianness: AtomicEndianness::BigEndian,
    dc: true,
    log_bf_reg_size: 9,
    // A ConnectX-7's: messages up to 2^30 bytes, 16 reads and atomics outstanding each way
    // (rdma-core reports `max_qp_rd_atom` 16 = 2^`log_max_ra_req_qp`).
    log_max_msg: 30,
    log_max_ra_req_qp: 4,
    log_max_ra_res_qp: 4,
    log_max_ra_req_dc: 4,
    log_max_ra_res_dc: 4,
};

/// The software NIC's tables of what the control plane registered and allocated.
#[derive(Debug, Default)]
struct Tables {
    pds: HashSet<u32>,
    umems: HashMap<u32, UmemEntry>,
    uars: HashMap<u32, Arc<DmaBuffer>>,
    next_pd: u32,
    next_umem: u32,
    next_uar: u32,
    /// The opcode of every command executed successfully, in order.
    executed: Vec<u16>,
    /// Every command with its output and result, once [`SoftNic::with_command_log`] asked.
    log: Option<Vec<CommandRecord>>,
}

/// A UMEM registration: the queue buffer, and the fabric's executor claim on the queue it
/// belongs to (held until the registration is dropped, and again by every queue or CQ the
/// NIC made over it). Memory a C caller handed the device (the emulated ConnectX's UMEMs)
/// has no claim record: the device owns it outright.
#[derive(Debug)]
struct UmemEntry {
    buffer: Arc<DmaBuffer>,
    claim: Option<ExecutorClaim>,
}

#[derive(Debug, Default)]
struct SharedTables(Mutex<Tables>);

impl SharedTables {
    fn lock(&self) -> MutexGuard<'_, Tables> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn next_id(counter: &mut u32) -> Result<u32, NicError> {
    // Ids start at 1: 0 is never a valid PD, UMEM or UAR id.
    *counter = counter.checked_add(1).ok_or(NicError::OutOfRange {
        what: "object ids of the software NIC",
        value: u64::from(u32::MAX) + 1,
        max: u32::MAX.into(),
    })?;
    Ok(*counter)
}

/// A software mlx5 device: one node of a [`Fabric`], driven by PRM command bytes.
///
/// ```
/// use ibgda::nic::{Device, SoftNic};
/// use ibgda::softnic::Fabric;
/// let fabric = Fabric::new();
/// let device = Device::open(SoftNic::open(&fabric, 1)?)?;
/// assert_eq!(device.caps().cqe_version, 1);
/// assert_eq!(device.port().lid, 1);
/// # Ok::<(), ibgda::nic::NicError>(())
/// ```
#[derive(Debug)]
pub struct SoftNic {
    fabric: Fabric,
    node: NodeId,
    name: String,
    caps: DeviceCaps,
    port: PortAttributes,
    tables: Arc<SharedTables>,
    /// Unit tests that play a GPU producer give doorbells a "GPU address" (their own).
    mapped_doorbells: bool,
}

impl SoftNic {
    /// A new device on `fabric`: a node with LID `lid`, InfiniBand, MTU 4096, one GID
    /// (the link-local GID with the LID as interface id).
    pub fn open(fabric: &Fabric, lid: u16) -> Result<Self, NicError> {
        let node = fabric.add_node(lid).map_err(|e| NicError::NoDevice {
            reason: format!("software NIC with LID {lid:#06x}: {e}"),
        })?;
        let mut gid = [0u8; 16];
        gid[0] = 0xfe;
        gid[1] = 0x80;
        gid[14..].copy_from_slice(&lid.to_be_bytes());
        Ok(Self {
            fabric: fabric.clone(),
            node,
            name: format!("soft:{node}"),
            caps: SOFT_NIC_CAPS,
            port: PortAttributes {
                port: 1,
                lid,
                mtu: Mtu::Mtu4096,
                link_layer: LinkLayer::InfiniBand,
                gids: vec![GidEntry {
                    gid: Gid(gid),
                    kind: GidType::InfiniBand,
                }],
            },
            tables: Arc::default(),
            mapped_doorbells: false,
        })
    }

    /// A new device on `fabric` with an Ethernet (RoCE) port: MAC `mac`, MTU 4096, GID
    /// table `gids` (a ConnectX's, for given addresses, is
    /// [`roce::kernel_gid_table`](super::roce::kernel_gid_table)). Its node of the fabric
    /// answers for every GID of the table: RoCE paths reach it by GID and MAC (the next
    /// hop's MAC must be right), RC paths with a RoCE v2 source GID carry a UDP source port
    /// in 0xc000..=0xffff, and an address vector to a GID resolves its MAC as an address
    /// handle would (see [`Fabric::resolve_mac`]).
    pub fn open_roce(fabric: &Fabric, mac: [u8; 6], gids: Vec<GidEntry>) -> Result<Self, NicError> {
        let mut addresses: Vec<[u8; 16]> = Vec::new();
        for entry in gids.iter().filter(|e| !e.gid.is_zero()) {
            if !addresses.contains(&entry.gid.0) {
                addresses.push(entry.gid.0);
            }
        }
        let node = fabric
            .add_ethernet_node(mac, &addresses)
            .map_err(|e| NicError::NoDevice {
                reason: format!("software RoCE NIC with MAC {mac:02x?}: {e}"),
            })?;
        Ok(Self {
            fabric: fabric.clone(),
            node,
            name: format!("soft:{node}"),
            caps: SOFT_NIC_CAPS,
            port: PortAttributes {
                port: 1,
                lid: 0,
                mtu: Mtu::Mtu4096,
                link_layer: LinkLayer::Ethernet,
                gids,
            },
            tables: Arc::default(),
            mapped_doorbells: false,
        })
    }

    /// The same device reporting `caps` to QUERY_HCA_CAP (to see how the control plane
    /// meets a device that lacks something).
    pub fn with_caps(mut self, caps: DeviceCaps) -> Self {
        self.caps = caps;
        self
    }

    /// The same device with its port at `mtu` (INIT2RTR and CREATE_DCT are refused above
    /// it).
    pub fn with_mtu(mut self, mtu: Mtu) -> Self {
        self.port.mtu = mtu;
        self
    }

    /// Registers `memory` as UMEM: the device owns it from now on (CREATE_CQ and
    /// CREATE_QP name it by the id). This is how a device reached through a C ABI (the
    /// emulated ConnectX) registers the memory its caller hands it; the control plane's
    /// own queue memory goes through [`Backend::register_umem`].
    pub fn register_umem_buffer(&self, memory: DmaBuffer) -> Result<SoftUmem, NicError> {
        self.insert_umem(Arc::new(memory), None)
    }

    fn insert_umem(
        &self,
        buffer: Arc<DmaBuffer>,
        claim: Option<ExecutorClaim>,
    ) -> Result<SoftUmem, NicError> {
        let mut tables = self.tables.lock();
        let id = next_id(&mut tables.next_umem)?;
        tables.umems.insert(id, UmemEntry { buffer, claim });
        Ok(SoftUmem {
            id,
            tables: Arc::downgrade(&self.tables),
        })
    }

    /// A UAR page whose 8-byte doorbell is `doorbell` (which the device only reads), handed
    /// over: for a device that lays out its own UAR pages (the emulated ConnectX's doorbell
    /// sits at offset 0x800 of a 4 KiB page, as on a ConnectX).
    ///
    /// The buffer may be a view of a page its caller keeps mapped for producers, as the
    /// emulator keeps each UAR page for the programs it serves, which store their doorbells
    /// through the page's address (rdma-core's `reg_addr`): a UAR page is shared by design
    /// between whoever rings it and the NIC. What the caller cannot keep is this handle,
    /// through which the device would be given memory to watch that someone else owns.
    pub fn register_uar(&self, doorbell: DmaBuffer) -> Result<SoftUar, NicError> {
        if doorbell.len() != 8 {
            return Err(NicError::OutOfRange {
                what: "UAR doorbell length (bytes)",
                value: doorbell.len() as u64,
                max: 8,
            });
        }
        self.insert_uar(doorbell)
    }

    /// The doorbell becomes shared, as a doorbell is: the device's table holds it (the NIC
    /// watches it), the page's handle (which counts the queue pairs ringing it), and each
    /// queue pair's memory the control plane makes over the page (its producer stores to
    /// it); nothing else.
    fn insert_uar(&self, doorbell: DmaBuffer) -> Result<SoftUar, NicError> {
        let doorbell = Arc::new(doorbell);
        let mut tables = self.tables.lock();
        let page = next_id(&mut tables.next_uar)?;
        tables.uars.insert(page, doorbell.clone());
        Ok(SoftUar {
            page,
            doorbell,
            tables: Arc::downgrade(&self.tables),
        })
    }

    /// The same device with doorbells whose "GPU address" is their host address, for unit
    /// tests in which the host plays a GPU producer of a queue in host memory (no GPU
    /// reaches them).
    #[cfg(test)]
    pub(crate) fn with_mapped_doorbells_for_tests(mut self) -> Self {
        self.mapped_doorbells = true;
        self
    }

    /// The fabric the device is on.
    pub fn fabric(&self) -> &Fabric {
        &self.fabric
    }

    /// The device's node.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The attributes of its port.
    pub fn port_attributes(&self) -> &PortAttributes {
        &self.port
    }

    /// The capabilities QUERY_HCA_CAP reports.
    pub fn reported_caps(&self) -> &DeviceCaps {
        &self.caps
    }

    /// The opcode of every PRM command the device executed successfully, in order (what a
    /// test reads to see the command sequence of a control-plane call).
    pub fn executed_commands(&self) -> Vec<u16> {
        self.tables.lock().executed.clone()
    }

    /// The same device keeping a command log: every PRM command from here on, executed or
    /// refused, with its output, as the emulated ConnectX logs the DEVX calls carrying them
    /// (the same entry-point names; errno 121, `EREMOTEIO`, for a command the executor
    /// failed with a status, 22 for one it could not run). UAR allocations are not logged:
    /// this device's UAR pages have no type.
    ///
    /// ```
    /// use ibgda::nic::prm::opcode;
    /// use ibgda::nic::{Device, SoftNic};
    /// use ibgda::softnic::Fabric;
    /// let nic = SoftNic::open(&Fabric::new(), 1)?.with_command_log();
    /// let device = Device::open(nic)?;
    /// let log = device.backend().command_log();
    /// assert_eq!(log.len(), 2);
    /// assert!(log.iter().all(|r| r.opcode() == opcode::QUERY_HCA_CAP));
    /// assert_eq!(log[0].call, "mlx5dv_devx_general_cmd");
    /// # Ok::<(), ibgda::nic::NicError>(())
    /// ```
    pub fn with_command_log(self) -> Self {
        self.tables.lock().log.get_or_insert_with(Vec::new);
        self
    }

    /// The commands logged since [`SoftNic::with_command_log`] (none without it).
    pub fn command_log(&self) -> Vec<CommandRecord> {
        self.tables.lock().log.clone().unwrap_or_default()
    }

    fn record(&self, input: &[u8]) {
        if let Some(opcode) = super::command::opcode_of(input) {
            self.tables.lock().executed.push(opcode);
        }
    }

    /// Appends a command to the log, if one is kept.
    fn log<T>(&self, call: &str, input: &[u8], output: &[u8], result: &Result<T, NicError>) {
        let mut tables = self.tables.lock();
        let Some(log) = tables.log.as_mut() else {
            return;
        };
        let errno = match result {
            Ok(_) => 0,
            Err(NicError::Command(PrmError::CommandError { .. })) => 121,
            Err(_) => 22,
        };
        log.push(CommandRecord {
            seq: log.len() as u64 + 1,
            device: self.name.clone(),
            call: call.to_owned(),
            errno,
            attributes: Vec::new(),
            input: input.to_vec(),
            output: output.to_vec(),
        });
    }

    /// How many protection domains, UMEM registrations and UAR pages are allocated now.
    pub fn allocated(&self) -> SoftNicAllocations {
        let tables = self.tables.lock();
        SoftNicAllocations {
            pds: tables.pds.len(),
            umems: tables.umems.len(),
            uars: tables.uars.len(),
        }
    }

    /// The buffer of UMEM `id`, and a claim of this NIC's executor on its queue (none for
    /// memory the device owns outright).
    pub(super) fn umem(&self, id: u32) -> Option<(Arc<DmaBuffer>, Option<ExecutorClaim>)> {
        let tables = self.tables.lock();
        let entry = tables.umems.get(&id)?;
        Some((
            entry.buffer.clone(),
            entry.claim.as_ref().map(ExecutorClaim::again),
        ))
    }

    pub(super) fn uar(&self, page: u32) -> Option<Arc<DmaBuffer>> {
        self.tables.lock().uars.get(&page).cloned()
    }

    pub(super) fn has_pd(&self, pdn: u32) -> bool {
        self.tables.lock().pds.contains(&pdn)
    }
}

/// Counts of what a [`SoftNic`] has allocated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoftNicAllocations {
    /// Protection domains.
    pub pds: usize,
    /// UMEM registrations.
    pub umems: usize,
    /// UAR pages.
    pub uars: usize,
}

/// A protection domain of a [`SoftNic`].
#[derive(Debug)]
pub struct SoftPd {
    pdn: u32,
    tables: Weak<SharedTables>,
}

impl ProtectionDomainId for SoftPd {
    fn pdn(&self) -> u32 {
        self.pdn
    }
}

impl Drop for SoftPd {
    fn drop(&mut self) {
        if let Some(tables) = self.tables.upgrade() {
            tables.lock().pds.remove(&self.pdn);
        }
    }
}

/// A UMEM registration of a [`SoftNic`].
#[derive(Debug)]
pub struct SoftUmem {
    id: u32,
    tables: Weak<SharedTables>,
}

impl UmemId for SoftUmem {
    fn umem_id(&self) -> u32 {
        self.id
    }
}

/// Whether anything but the device's own table holds `buffer` (an object made over it).
fn shared(buffer: Option<&Arc<DmaBuffer>>) -> bool {
    buffer.is_some_and(|b| Arc::strong_count(b) > 1)
}

impl SoftUmem {
    /// Whether an object (a CQ or a queue pair) still uses the memory: a deregistration
    /// now would leave the NIC with memory its owner may reuse (a ConnectX's kernel driver
    /// refuses it with `EBUSY`).
    pub fn is_in_use(&self) -> bool {
        self.tables
            .upgrade()
            .is_some_and(|tables| shared(tables.lock().umems.get(&self.id).map(|e| &e.buffer)))
    }
}

impl Drop for SoftUmem {
    fn drop(&mut self) {
        if let Some(tables) = self.tables.upgrade() {
            tables.lock().umems.remove(&self.id);
        }
    }
}

/// A UAR page of a [`SoftNic`]: an 8-byte doorbell the NIC watches.
#[derive(Debug)]
pub struct SoftUar {
    page: u32,
    doorbell: Arc<DmaBuffer>,
    tables: Weak<SharedTables>,
}

impl UarPage for SoftUar {
    fn page_id(&self) -> u32 {
        self.page
    }
    fn host_doorbell(&self) -> Result<HostDoorbell, NicError> {
        Ok(HostDoorbell::memory(self.doorbell.clone()))
    }
    fn gpu_doorbell(&self) -> Result<GpuDoorbell, NicError> {
        Err(NicError::Unsupported {
            what: "GPU-placed queues on the CPU software NIC (its doorbells are host memory)"
                .into(),
        })
    }
}

impl SoftUar {
    /// Whether a queue pair still rings this page.
    pub fn is_in_use(&self) -> bool {
        // The device's table and this handle hold the doorbell; a queue pair holds more.
        Arc::strong_count(&self.doorbell) > 2
    }
}

impl Drop for SoftUar {
    fn drop(&mut self) {
        if let Some(tables) = self.tables.upgrade() {
            tables.lock().uars.remove(&self.page);
        }
    }
}

/// A shared receive queue of a [`SoftNic`]: destroyed when dropped (after the queues that
/// name it, which the control plane drops first).
#[derive(Debug)]
pub struct SoftSrq {
    srqn: u32,
    fabric: Fabric,
}

impl SharedReceiveQueueId for SoftSrq {
    fn srqn(&self) -> u32 {
        self.srqn
    }
}

impl SoftSrq {
    /// The receive WQEs it holds now.
    pub fn receives(&self) -> u64 {
        self.fabric.srq_receives(self.srqn).unwrap_or(0)
    }
    /// Whether a queue still names it (destroying it now would be refused).
    pub fn is_in_use(&self) -> bool {
        self.fabric.srq_in_use(self.srqn)
    }
}

impl Drop for SoftSrq {
    fn drop(&mut self) {
        // Refused only while a queue names it (the device keeps it then, as firmware
        // keeps an SRQ its queues reference).
        let _ = self.fabric.destroy_srq(self.srqn);
    }
}

/// An object a [`SoftNic`] command created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SoftObject {
    /// A completion queue.
    Cq(u32),
    /// A queue pair.
    Qp(u32),
    /// A DC target.
    Dct(u32),
}

impl BackendObject for SoftObject {}

/// The command methods of the software NIC are safe, unlike [`Backend`]'s: it names queue
/// memory only by the UMEM ids registered with it (a CREATE_CQ or CREATE_QP with
/// `*_umem_valid = 0`, that is a raw address, is refused), resolves every object number in
/// its own tables, and writes nothing outside the memory it was given. Tests and the fuzz
/// target feed it arbitrary bytes through these.
impl SoftNic {
    /// Executes a command that creates no object (see [`Backend::general_command`]).
    pub fn general_command(&self, input: &[u8], output: &mut [u8]) -> Result<(), NicError> {
        let result = super::soft_commands::general(self, input, output);
        self.log("mlx5dv_devx_general_cmd", input, output, &result);
        result?;
        self.record(input);
        Ok(())
    }

    /// Executes a command that creates an object (see [`Backend::create_object`]).
    pub fn create_object(&self, input: &[u8], output: &mut [u8]) -> Result<SoftObject, NicError> {
        let result = super::soft_commands::create(self, input, output);
        self.log("mlx5dv_devx_obj_create", input, output, &result);
        let object = result?;
        self.record(input);
        Ok(object)
    }

    /// Executes a command on an object (see [`Backend::modify_object`]).
    pub fn modify_object(
        &self,
        object: &SoftObject,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(), NicError> {
        let result = super::soft_commands::modify(self, *object, input, output);
        self.log("mlx5dv_devx_obj_modify", input, output, &result);
        result?;
        self.record(input);
        Ok(())
    }

    /// Executes a DESTROY command (see [`Backend::destroy_object`]).
    pub fn destroy_object(&self, object: SoftObject, input: &[u8]) -> Result<(), NicError> {
        let result = super::soft_commands::destroy(self, object, input);
        self.log("mlx5dv_devx_obj_destroy", input, &[0; 16], &result);
        result?;
        self.record(input);
        Ok(())
    }
}

impl Backend for SoftNic {
    type Pd = SoftPd;
    type Umem = SoftUmem;
    type Uar = SoftUar;
    type Srq = SoftSrq;
    type Object = SoftObject;
    type Mr = MemoryRegion;

    fn name(&self) -> &str {
        &self.name
    }

    // SAFETY (of the four command methods): nothing to uphold here, the software NIC's
    // own methods are safe (see `SoftNic::create_object`).
    unsafe fn general_command(&self, input: &[u8], output: &mut [u8]) -> Result<(), NicError> {
        SoftNic::general_command(self, input, output)
    }

    unsafe fn create_object(
        &self,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<SoftObject, NicError> {
        SoftNic::create_object(self, input, output)
    }

    unsafe fn modify_object(
        &self,
        object: &SoftObject,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(), NicError> {
        SoftNic::modify_object(self, object, input, output)
    }

    unsafe fn destroy_object(&self, object: SoftObject, input: &[u8]) -> Result<(), NicError> {
        SoftNic::destroy_object(self, object, input)
    }

    fn query_port(&self, port: u8) -> Result<PortAttributes, NicError> {
        if port != self.port.port {
            return Err(NicError::OutOfRange {
                what: "port number",
                value: port.into(),
                max: self.port.port.into(),
            });
        }
        Ok(self.port.clone())
    }

    fn query_eqn(&self, vector: u32) -> Result<u32, NicError> {
        // One completion vector, reporting to event queue 0 (events are not modelled).
        if vector != 0 {
            return Err(NicError::OutOfRange {
                what: "completion vector",
                value: vector.into(),
                max: 0,
            });
        }
        Ok(0)
    }

    fn alloc_pd(&self) -> Result<SoftPd, NicError> {
        let mut tables = self.tables.lock();
        let pdn = next_id(&mut tables.next_pd)?;
        tables.pds.insert(pdn);
        Ok(SoftPd {
            pdn,
            tables: Arc::downgrade(&self.tables),
        })
    }

    fn alloc_uar(&self) -> Result<SoftUar, NicError> {
        let mut doorbell = DmaBuffer::zeroed(8, 64)?;
        if self.mapped_doorbells {
            let addr = doorbell.addr();
            let ptr = core::ptr::NonNull::from(&doorbell.words()[0]).cast::<u8>();
            // SAFETY: only unit tests set `mapped_doorbells`; the buffer moves in as the
            // owner of its own memory, and the "GPU address" is the host address, which no
            // GPU reaches (the test plays the producer).
            doorbell = unsafe { DmaBuffer::from_raw_mapped(ptr, 8, addr, Box::new(doorbell)) }?;
        }
        self.insert_uar(doorbell)
    }

    fn create_srq(&self, pd: &SoftPd, max_wr: u32) -> Result<SoftSrq, NicError> {
        if !self.has_pd(pd.pdn) {
            return Err(NicError::OutOfRange {
                what: "protection domain number (not allocated on this device)",
                value: pd.pdn.into(),
                max: 0,
            });
        }
        let srqn = self
            .fabric
            .create_srq(self.node, max_wr)
            .map_err(NicError::SoftNic)?;
        Ok(SoftSrq {
            srqn,
            fabric: self.fabric.clone(),
        })
    }

    fn post_srq_receives(&self, srq: &SoftSrq, count: u32) -> Result<(), NicError> {
        self.fabric
            .post_srq_receives(srq.srqn, count)
            .map_err(NicError::SoftNic)
    }

    fn register_umem(&self, memory: QueueMemoryRef<'_>) -> Result<SoftUmem, NicError> {
        let buffer = memory
            .host_buffer()
            .ok_or_else(|| NicError::Unsupported {
                what: "GPU queue memory on the CPU software NIC".into(),
            })?
            .clone();
        let claim = memory.claim(self.fabric.executor())?;
        self.insert_umem(buffer, Some(claim))
    }

    fn address_vector(
        &self,
        _pd: &SoftPd,
        port: &PortAttributes,
        source_gid_index: u8,
        gid: Gid,
    ) -> Result<AddressVectorSegment, NicError> {
        // The DCT number and key are patched in later.
        let link = match port.link_layer {
            // The software fabric routes InfiniBand by LID.
            LinkLayer::InfiniBand => LinkAddress::InfiniBand {
                lid: port.lid,
                sl: 0,
                static_rate: 0,
                source_path_bits: 0,
                force_loopback: false,
                grh: None,
            },
            LinkLayer::Ethernet => {
                let populated = port
                    .gids
                    .get(usize::from(source_gid_index))
                    .is_some_and(|e| !e.gid.is_zero());
                if !populated {
                    return Err(NicError::OutOfRange {
                        what: "source GID index (not a populated entry of the port's table)",
                        value: source_gid_index.into(),
                        max: port.gids.len().saturating_sub(1) as u64,
                    });
                }
                let mac = self.fabric.resolve_mac(gid.0).map_err(NicError::SoftNic)?;
                // rdma-core draws a random RoCE v2 port for an address handle without a
                // flow label; this NIC derives one from the GID, so runs repeat.
                let tail = u32::from_be_bytes([gid.0[12], gid.0[13], gid.0[14], gid.0[15]]);
                LinkAddress::Roce {
                    udp_source_port: super::roce::udp_source_port(super::roce::flow_label(
                        tail & 0xff_ffff,
                        1,
                    )),
                    sl: 0,
                    static_rate: 0,
                    mac,
                    grh: Grh {
                        sgid_index: source_gid_index,
                        flow_label: 0,
                        traffic_class: 0,
                        hop_limit: super::command::HOP_LIMIT,
                        dgid: gid.0,
                    },
                }
            }
        };
        let target = FullAddressVector {
            dct: 0,
            dc_key: 0,
            link,
        }
        .encode()?;
        Ok(*target.segment())
    }

    fn register_memory(
        &self,
        pd: &SoftPd,
        memory: RegisterMemory,
        access: MemoryAccess,
    ) -> Result<MemoryRegion, NicError> {
        if !self.has_pd(pd.pdn) {
            return Err(NicError::OutOfRange {
                what: "protection domain number (not allocated on this device)",
                value: pd.pdn.into(),
                max: 0,
            });
        }
        match memory {
            RegisterMemory::Host {
                buffer,
                offset,
                len,
            } => self
                .fabric
                .register(self.node, buffer, offset, len, access)
                .map_err(NicError::SoftNic),
            RegisterMemory::Gpu { .. } => Err(NicError::Unsupported {
                what: "GPU memory registration on the CPU software NIC".into(),
            }),
        }
    }
}

impl MemoryRegistration for MemoryRegion {
    fn rkey(&self) -> RKey {
        MemoryRegion::rkey(self)
    }
    fn addr(&self) -> u64 {
        MemoryRegion::addr(self)
    }
    fn len(&self) -> usize {
        MemoryRegion::len(self)
    }
}
