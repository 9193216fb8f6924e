//! Verbs objects (device context, protection domain, memory regions, port and GID queries)
//! as owners: each releases its object on `Drop` and keeps what it depends on alive, so
//! teardown happens in the order the driver needs. No raw pointer leaves this module.

use core::ffi::CStr;
use core::ptr::NonNull;
use std::sync::Arc;

use rdma_mummy_sys as sys;

use super::dv::{errno, Libraries};
use super::error::{Mlx5Error, ENOSYS};
use crate::memory::{DeviceBuffer, DmaBuffer};
use crate::nic::gpu_access::DmaBufExporter;
use crate::queue::Registered;
use crate::wqe::LKey;

/// `MLX5DV_CONTEXT_FLAGS_DEVX`: open the context with a DEVX user id.
const CONTEXT_FLAGS_DEVX: u32 = 1;

/// The environment variable naming the RDMA device to use (`mlx5_0`).
pub const NIC_ENV: &str = "IBGDA_NIC";

/// An RDMA device as `ibv_get_device_list` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Its name (`mlx5_0`).
    pub name: String,
    /// Whether the mlx5 provider drives it (`mlx5dv_is_supported`).
    pub mlx5: bool,
}

/// The device list, freed on drop.
struct DeviceList {
    list: NonNull<*mut sys::ibv_device>,
    len: usize,
}

impl DeviceList {
    fn get() -> Result<Self, Mlx5Error> {
        let mut n: core::ffi::c_int = 0;
        // SAFETY: `n` is a valid out-pointer; the list is freed once, on drop.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        match NonNull::new(list) {
            Some(list) => Ok(Self {
                list,
                len: usize::try_from(n).unwrap_or(0),
            }),
            None => {
                let e = errno();
                if e == ENOSYS {
                    Err(Mlx5Error::NoDevice {
                        requested: None,
                        available: Vec::new(),
                        errno: e,
                    })
                } else {
                    Err(Mlx5Error::Verbs {
                        call: "ibv_get_device_list",
                        errno: e,
                    })
                }
            }
        }
    }

    fn devices(&self) -> impl Iterator<Item = NonNull<sys::ibv_device>> + '_ {
        (0..self.len).filter_map(move |i| {
            // SAFETY: the list holds `len` entries (then a null one) while it lives.
            NonNull::new(unsafe { *self.list.as_ptr().add(i) })
        })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: returned by `ibv_get_device_list`, freed once.
        unsafe { sys::ibv_free_device_list(self.list.as_ptr()) };
    }
}

fn device_name(dev: NonNull<sys::ibv_device>) -> String {
    // SAFETY: `dev` is an entry of a live device list.
    let name = unsafe { sys::ibv_get_device_name(dev.as_ptr()) };
    if name.is_null() {
        return String::new();
    }
    // SAFETY: a NUL-terminated name owned by the device, read while the list lives.
    unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

fn is_mlx5(libs: &Libraries, dev: NonNull<sys::ibv_device>) -> Result<bool, Mlx5Error> {
    let f = libs.is_supported.get()?;
    // SAFETY: `dev` is an entry of a live device list.
    Ok(unsafe { f(dev.as_ptr()) })
}

/// The RDMA devices of this machine.
pub fn devices() -> Result<Vec<DeviceInfo>, Mlx5Error> {
    let libs = Libraries::get()?;
    let list = DeviceList::get()?;
    list.devices()
        .map(|d| {
            Ok(DeviceInfo {
                name: device_name(d),
                mlx5: is_mlx5(libs, d)?,
            })
        })
        .collect()
}

/// An open device context (with DEVX).
pub(crate) struct Context {
    pub(crate) ctx: NonNull<sys::ibv_context>,
    pub(crate) libs: &'static Libraries,
    pub(crate) name: String,
}

// SAFETY: verbs contexts are thread-safe (rdma-core serialises what needs it); the pointer
// is only closed once, on drop, after every child (which holds an `Arc<Context>`) is gone.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: opened by `mlx5dv_open_device`, closed once; no child object is left.
        unsafe { sys::ibv_close_device(self.ctx.as_ptr()) };
    }
}

impl Context {
    /// Opens the device named `requested` (or the first mlx5 device) with DEVX.
    pub(crate) fn open(requested: Option<&str>) -> Result<Arc<Self>, Mlx5Error> {
        let libs = Libraries::get()?;
        let list = DeviceList::get().map_err(|e| match e {
            Mlx5Error::NoDevice {
                available, errno, ..
            } => Mlx5Error::NoDevice {
                requested: requested.map(str::to_owned),
                available,
                errno,
            },
            e => e,
        })?;
        let named: Vec<(NonNull<sys::ibv_device>, String)> =
            list.devices().map(|d| (d, device_name(d))).collect();
        let available: Vec<String> = named.iter().map(|(_, n)| n.clone()).collect();
        let chosen =
            match requested {
                Some(want) => {
                    let (dev, name) = named.iter().find(|(_, n)| n == want).ok_or_else(|| {
                        Mlx5Error::NoDevice {
                            requested: Some(want.to_owned()),
                            available: available.clone(),
                            errno: 0,
                        }
                    })?;
                    if !is_mlx5(libs, *dev)? {
                        return Err(Mlx5Error::NotMlx5 {
                            device: name.clone(),
                        });
                    }
                    (*dev, name.clone())
                }
                None => {
                    let mut first_mlx5 = None;
                    for (dev, name) in &named {
                        if is_mlx5(libs, *dev)? {
                            first_mlx5 = Some((*dev, name.clone()));
                            break;
                        }
                    }
                    match (first_mlx5, named.first()) {
                        (Some(found), _) => found,
                        (None, Some((_, other))) => {
                            return Err(Mlx5Error::NotMlx5 {
                                device: other.clone(),
                            })
                        }
                        (None, None) => {
                            return Err(Mlx5Error::NoDevice {
                                requested: None,
                                available,
                                errno: 0,
                            })
                        }
                    }
                }
            };
        let open_device = libs.open_device.get()?;
        let mut attr = sys::mlx5dv_context_attr {
            flags: CONTEXT_FLAGS_DEVX,
            comp_mask: 0,
            fds: core::ptr::null_mut(),
        };
        // SAFETY: `chosen.0` is an entry of the live list; `attr` is a valid attribute
        // block with no optional fields. The context outlives the list (rdma-core keeps
        // the device referenced by the open context).
        let ctx = unsafe { open_device(chosen.0.as_ptr(), &mut attr) };
        let ctx = NonNull::new(ctx).ok_or_else(|| Mlx5Error::DevxUnavailable {
            device: chosen.1.clone(),
            errno: errno(),
        })?;
        Ok(Arc::new(Self {
            ctx,
            libs,
            name: chosen.1,
        }))
    }
}

/// The link layer of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand: addressed by LID (GRH optional).
    InfiniBand,
    /// Ethernet (RoCE): addressed by GID.
    Ethernet,
    /// Unspecified (the driver reported 0).
    Unspecified,
}

/// What a port query reports that queues need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// `ibv_port_state` (4: active).
    pub state: u32,
    /// Active MTU as the verbs enum (1: 256 ... 5: 4096).
    pub active_mtu: u32,
    /// The port's LID (InfiniBand).
    pub lid: u16,
    /// Entries in the GID table.
    pub gid_table_len: u32,
    /// The link layer.
    pub link_layer: LinkLayer,
}

impl PortInfo {
    /// Whether the port is active (`IBV_PORT_ACTIVE`).
    pub fn is_active(&self) -> bool {
        self.state == sys::ibv_port_state::IBV_PORT_ACTIVE
    }
}

pub(crate) fn query_port(ctx: &Context, port: u8) -> Result<PortInfo, Mlx5Error> {
    // SAFETY: `ibv_port_attr` is plain data (integers); all-zero is a valid value.
    let mut attr: sys::ibv_port_attr = unsafe { core::mem::zeroed() };
    // SAFETY: a live context and a valid out-pointer of the type the call fills.
    let rc = unsafe { sys::ibv_query_port(ctx.ctx.as_ptr(), port, &mut attr) };
    if rc != 0 {
        return Err(Mlx5Error::Verbs {
            call: "ibv_query_port",
            errno: if rc > 0 { rc } else { errno() },
        });
    }
    Ok(PortInfo {
        state: attr.state,
        active_mtu: attr.active_mtu,
        lid: attr.lid,
        gid_table_len: u32::try_from(attr.gid_tbl_len).unwrap_or(0),
        link_layer: match attr.link_layer {
            1 => LinkLayer::InfiniBand,
            2 => LinkLayer::Ethernet,
            _ => LinkLayer::Unspecified,
        },
    })
}

pub(crate) fn query_gid(ctx: &Context, port: u8, index: u32) -> Result<[u8; 16], Mlx5Error> {
    let gid_error = |errno| Mlx5Error::Gid { port, index, errno };
    let idx = core::ffi::c_int::try_from(index).map_err(|_| gid_error(22))?;
    let mut gid = sys::ibv_gid { raw: [0; 16] };
    // SAFETY: a live context and a valid out-pointer.
    let rc = unsafe { sys::ibv_query_gid(ctx.ctx.as_ptr(), port, idx, &mut gid) };
    if rc != 0 {
        return Err(gid_error(errno()));
    }
    // SAFETY: both union fields are plain bytes; `raw` covers all 16.
    Ok(unsafe { gid.raw })
}

/// The type of a GID table entry as verbs' `ibv_gid_type` numbers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerbsGidType {
    /// `IBV_GID_TYPE_IB`.
    InfiniBand,
    /// `IBV_GID_TYPE_ROCE_V1`.
    RoceV1,
    /// `IBV_GID_TYPE_ROCE_V2`.
    RoceV2,
}

/// Entry `index` of port `port`'s GID table with its type (`ibv_query_gid_ex`, rdma-core
/// 32 and later, which reads the kernel's table or its sysfs files).
pub(crate) fn query_gid_entry(
    ctx: &Context,
    port: u8,
    index: u32,
) -> Result<([u8; 16], VerbsGidType), Mlx5Error> {
    // SAFETY: `ibv_gid_entry` is plain data (integers and a byte union).
    let mut entry: sys::ibv_gid_entry = unsafe { core::mem::zeroed() };
    // SAFETY: a live context and a valid out-pointer of the size passed.
    let rc = unsafe { sys::ibv_query_gid_ex(ctx.ctx.as_ptr(), port.into(), index, &mut entry, 0) };
    if rc != 0 {
        return Err(Mlx5Error::Gid {
            port,
            index,
            errno: if rc > 0 { rc } else { errno() },
        });
    }
    let kind = match entry.gid_type {
        1 => VerbsGidType::RoceV1,
        2 => VerbsGidType::RoceV2,
        _ => VerbsGidType::InfiniBand,
    };
    // SAFETY: both union fields are plain bytes; `raw` covers all 16.
    Ok((unsafe { entry.gid.raw }, kind))
}

/// A protection domain (and its number, from `mlx5dv_init_obj`).
pub struct ProtectionDomain {
    pub(crate) inner: Arc<PdInner>,
}

pub(crate) struct PdInner {
    pd: NonNull<sys::ibv_pd>,
    pdn: u32,
    ctx: Arc<Context>,
}

// SAFETY: a PD is only used through thread-safe verbs and deallocated once, on drop, after
// every memory region (which holds an `Arc<PdInner>`).
unsafe impl Send for PdInner {}
// SAFETY: as above.
unsafe impl Sync for PdInner {}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: allocated by `ibv_alloc_pd`, deallocated once; its context is alive
        // (held by `self.ctx`, dropped after this).
        unsafe { sys::ibv_dealloc_pd(self.pd.as_ptr()) };
    }
}

impl core::fmt::Debug for ProtectionDomain {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ProtectionDomain")
            .field("device", &self.inner.ctx.name)
            .field("pdn", &self.inner.pdn)
            .finish()
    }
}

impl ProtectionDomain {
    pub(crate) fn alloc(ctx: &Arc<Context>) -> Result<Self, Mlx5Error> {
        let init_obj = ctx.libs.init_obj.get()?;
        // SAFETY: a live context.
        let pd = unsafe { sys::ibv_alloc_pd(ctx.ctx.as_ptr()) };
        let pd = NonNull::new(pd).ok_or_else(|| Mlx5Error::Verbs {
            call: "ibv_alloc_pd",
            errno: errno(),
        })?;
        let mut dv_pd = sys::mlx5dv_pd {
            pdn: 0,
            comp_mask: 0,
        };
        // SAFETY: `mlx5dv_obj` is a struct of pointer pairs; all-null is valid.
        let mut obj: sys::mlx5dv_obj = unsafe { core::mem::zeroed() };
        obj.pd.in_ = pd.as_ptr();
        obj.pd.out = &mut dv_pd;
        /// `MLX5DV_OBJ_PD`.
        const OBJ_PD: u64 = 1 << 6;
        // SAFETY: `obj.pd` names a live PD and a valid out-struct; only the PD is asked.
        let rc = unsafe { init_obj(&mut obj, OBJ_PD) };
        let inner = PdInner {
            pd,
            pdn: dv_pd.pdn,
            ctx: ctx.clone(),
        };
        if rc != 0 {
            return Err(Mlx5Error::Verbs {
                call: "mlx5dv_init_obj",
                errno: rc,
            });
        }
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The PD number (CREATE_QP's `pd`).
    pub fn pdn(&self) -> u32 {
        self.inner.pdn
    }
}

/// A shared receive queue (`ibv_create_srq`), its number read with `mlx5dv_init_obj`, as
/// NVSHMEM makes the SRQ its DC targets and queue pairs name. Destroyed on drop, before the
/// PD it holds.
pub struct SharedReceiveQueue {
    srq: NonNull<sys::ibv_srq>,
    srqn: u32,
    /// The receive WQEs rdma-core made room for (`attr.max_wr` as it returned it).
    capacity: u32,
    /// Receive WQEs posted over its life (see [`SharedReceiveQueue::post_zero_length`]).
    posted: std::sync::Mutex<u64>,
    pd: Arc<PdInner>,
}

// SAFETY: an SRQ is used through thread-safe verbs (posting is serialised by `posted`'s
// lock) and destroyed once, on drop.
unsafe impl Send for SharedReceiveQueue {}
// SAFETY: as above.
unsafe impl Sync for SharedReceiveQueue {}

impl Drop for SharedReceiveQueue {
    fn drop(&mut self) {
        // SAFETY: created by `ibv_create_srq`, destroyed once; its PD (and so its context)
        // is alive (a field, dropped after this). A refusal (a queue still names it) leaves
        // the SRQ to the context's teardown.
        unsafe { sys::ibv_destroy_srq(self.srq.as_ptr()) };
    }
}

impl core::fmt::Debug for SharedReceiveQueue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SharedReceiveQueue")
            .field("device", &self.pd.ctx.name)
            .field("srqn", &self.srqn)
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// `MLX5DV_OBJ_SRQ`.
const OBJ_SRQ: u64 = 1 << 2;
/// `MLX5DV_SRQ_MASK_SRQN`: ask `mlx5dv_init_obj` for the SRQ number (rdma-core >= 24).
const SRQ_MASK_SRQN: u64 = 1 << 0;

impl SharedReceiveQueue {
    /// An SRQ of at least `max_wr` zero-scatter receive WQEs in `pd`.
    pub fn create(pd: &ProtectionDomain, max_wr: u32) -> Result<Self, Mlx5Error> {
        let ctx = &pd.inner.ctx;
        let init_obj = ctx.libs.init_obj.get()?;
        let mut attr = sys::ibv_srq_init_attr {
            srq_context: core::ptr::null_mut(),
            attr: sys::ibv_srq_attr {
                max_wr,
                max_sge: 1,
                srq_limit: 0,
            },
        };
        // SAFETY: a live PD and a fully initialised attribute block, which the call updates.
        let srq = unsafe { sys::ibv_create_srq(pd.inner.pd.as_ptr(), &mut attr) };
        let srq = NonNull::new(srq).ok_or_else(|| Mlx5Error::Verbs {
            call: "ibv_create_srq",
            errno: errno(),
        })?;
        let mut dv_srq: sys::mlx5dv_srq = sys::mlx5dv_srq {
            buf: core::ptr::null_mut(),
            dbrec: core::ptr::null_mut(),
            stride: 0,
            head: 0,
            tail: 0,
            comp_mask: SRQ_MASK_SRQN,
            srqn: 0,
        };
        // SAFETY: `mlx5dv_obj` is a struct of pointer pairs; all-null is valid.
        let mut obj: sys::mlx5dv_obj = unsafe { core::mem::zeroed() };
        obj.srq.in_ = srq.as_ptr();
        obj.srq.out = &mut dv_srq;
        // The owner first, so that every failure below destroys the SRQ.
        let mut made = Self {
            srq,
            srqn: 0,
            capacity: attr.attr.max_wr,
            posted: std::sync::Mutex::new(0),
            pd: pd.inner.clone(),
        };
        // SAFETY: `obj.srq` names a live SRQ and a valid out-struct whose `comp_mask` asks
        // for the number; only the SRQ is asked.
        let rc = unsafe { init_obj(&mut obj, OBJ_SRQ) };
        if rc != 0 {
            return Err(Mlx5Error::Verbs {
                call: "mlx5dv_init_obj",
                errno: rc,
            });
        }
        if dv_srq.comp_mask & SRQ_MASK_SRQN == 0 {
            return Err(Mlx5Error::Unsupported {
                symbol: "mlx5dv_init_obj with MLX5DV_SRQ_MASK_SRQN (rdma-core >= 24)",
                library: super::dv::MLX5,
            });
        }
        made.srqn = dv_srq.srqn;
        Ok(made)
    }

    /// The SRQ number (CREATE_DCT's `srqn_xrqn`, CREATE_QP's `srqn_rmpn_xrqn`).
    pub fn srqn(&self) -> u32 {
        self.srqn
    }

    /// Posts `count` receive WQEs without scatter entries (what a WRITE_WITH_IMM consumes).
    ///
    /// rdma-core returns an SRQ WQE to its free list only when `ibv_poll_cq` reports the
    /// completion that consumed it, and the control plane polls its own (DEVX) CQs: over
    /// its life the SRQ takes at most its capacity of receives, and a post beyond it is
    /// refused here (rdma-core would refuse it with `ENOMEM`).
    pub fn post_zero_length(&self, count: u32) -> Result<(), Mlx5Error> {
        let mut posted = self
            .posted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let total = *posted + u64::from(count);
        if total > u64::from(self.capacity) {
            return Err(Mlx5Error::OutOfRange {
                what: "receive WQEs posted to the SRQ over its life (rdma-core frees an SRQ \
                       WQE only when ibv_poll_cq reports it, and the control plane polls its \
                       own CQs)",
                value: total,
                limit: self.capacity.into(),
            });
        }
        if count == 0 {
            return Ok(());
        }
        let mut wrs: Vec<sys::ibv_recv_wr> = (0..count)
            .map(|i| sys::ibv_recv_wr {
                wr_id: *posted + u64::from(i),
                next: core::ptr::null_mut(),
                sg_list: core::ptr::null_mut(),
                num_sge: 0,
            })
            .collect();
        for i in 1..wrs.len() {
            let next: *mut sys::ibv_recv_wr = &mut wrs[i];
            wrs[i - 1].next = next;
        }
        let mut bad: *mut sys::ibv_recv_wr = core::ptr::null_mut();
        // SAFETY: a live SRQ; `wrs` is a null-terminated list of receive requests without
        // scatter entries (they name no memory), alive for the call.
        let rc = unsafe { sys::ibv_post_srq_recv(self.srq.as_ptr(), wrs.as_mut_ptr(), &mut bad) };
        if rc != 0 {
            // Those before the failed one were posted.
            let failed = if bad.is_null() {
                0
            } else {
                // SAFETY: `bad` points into `wrs` (rdma-core's contract).
                unsafe { bad.offset_from(wrs.as_ptr()) }.max(0) as u64
            };
            *posted += failed;
            return Err(Mlx5Error::Verbs {
                call: "ibv_post_srq_recv",
                errno: rc,
            });
        }
        *posted = total;
        Ok(())
    }
}

/// An address handle's address vector: the 48 bytes of `mlx5_wqe_av` the provider built
/// for a path (read through `mlx5dv_init_obj`), for DC initiators to carry in their WQEs.
/// `gid` (with the local GID index to send from) makes the path global (RoCE, routed
/// InfiniBand); `None` addresses `dlid` on the local subnet.
pub(crate) fn address_vector(
    pd: &ProtectionDomain,
    port: u8,
    dlid: u16,
    gid: Option<([u8; 16], u8)>,
) -> Result<[u8; 48], Mlx5Error> {
    let ctx = &pd.inner.ctx;
    let init_obj = ctx.libs.init_obj.get()?;
    let global = gid.is_some();
    let (dgid, sgid_index) = gid.unwrap_or(([0; 16], 0));
    let mut attr = sys::ibv_ah_attr {
        grh: sys::ibv_global_route {
            dgid: sys::ibv_gid { raw: dgid },
            flow_label: 0,
            sgid_index,
            // RoCE drops packets with a hop limit of 0 or 1; 64 crosses any data centre.
            hop_limit: if global { 64 } else { 0 },
            traffic_class: 0,
        },
        dlid,
        sl: 0,
        src_path_bits: 0,
        static_rate: 0,
        is_global: u8::from(global),
        port_num: port,
    };
    let ah_error = |errno| Mlx5Error::AddressHandle {
        port,
        global,
        errno,
    };
    // SAFETY: a live PD and a fully initialised attribute block.
    let ah = unsafe { sys::ibv_create_ah(pd.inner.pd.as_ptr(), &mut attr) };
    let ah = NonNull::new(ah).ok_or_else(|| ah_error(errno()))?;
    let mut dv_ah = sys::mlx5dv_ah {
        av: core::ptr::null_mut(),
        comp_mask: 0,
    };
    // SAFETY: `mlx5dv_obj` is a struct of pointer pairs; all-null is valid.
    let mut obj: sys::mlx5dv_obj = unsafe { core::mem::zeroed() };
    obj.ah.in_ = ah.as_ptr();
    obj.ah.out = &mut dv_ah;
    /// `MLX5DV_OBJ_AH`.
    const OBJ_AH: u64 = 1 << 5;
    // SAFETY: `obj.ah` names a live AH and a valid out-struct; only the AH is asked.
    let rc = unsafe { init_obj(&mut obj, OBJ_AH) };
    let mut av = [0u8; 48];
    let result = if rc != 0 || dv_ah.av.is_null() {
        Err(ah_error(if rc != 0 { rc } else { 22 }))
    } else {
        // SAFETY: `av` points at the AH's 48-byte `mlx5_wqe_av`, alive until the AH is
        // destroyed below; the copy reads exactly those bytes.
        unsafe { core::ptr::copy_nonoverlapping(dv_ah.av.cast::<u8>(), av.as_mut_ptr(), av.len()) };
        Ok(av)
    };
    // SAFETY: created above, destroyed once; only the copy of its vector is kept.
    unsafe { sys::ibv_destroy_ah(ah.as_ptr()) };
    result
}

/// What memory a region covers, kept alive as long as the region. A DMA-BUF's descriptor
/// is not: the kernel holds its own reference to the DMA-BUF from the registration on, so
/// the descriptor is closed once `ibv_reg_dmabuf_mr` returns (as NVSHMEM and UCX close
/// theirs), or a process with many GPU registrations would run out of descriptors.
#[derive(Debug)]
enum RegionMemory {
    Host(#[allow(dead_code)] Arc<DmaBuffer>),
    Gpu(#[allow(dead_code)] Arc<DeviceBuffer>),
}

/// A memory region: registered host or GPU memory with its keys.
pub struct MemoryRegion {
    mr: NonNull<sys::ibv_mr>,
    lkey: u32,
    rkey: u32,
    addr: u64,
    len: u64,
    gpu_path: Option<GpuPath>,
    _pd: Arc<PdInner>,
    // Released only once deregistered: if that fails the NIC may still access it.
    memory: core::mem::ManuallyDrop<RegionMemory>,
}

// SAFETY: the region is only deregistered once, on drop; keys and bounds are plain values.
unsafe impl Send for MemoryRegion {}
// SAFETY: as above.
unsafe impl Sync for MemoryRegion {}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: registered by `ibv_reg_*mr`, deregistered once, before the PD (a field,
        // dropped after this).
        if unsafe { sys::ibv_dereg_mr(self.mr.as_ptr()) } == 0 {
            // SAFETY: taken once, after the NIC lost access to the memory.
            drop(unsafe { core::mem::ManuallyDrop::take(&mut self.memory) });
        }
    }
}

impl core::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .field("lkey", &format_args!("{:#x}", self.lkey))
            .field("rkey", &format_args!("{:#x}", self.rkey))
            .field("gpu_path", &self.gpu_path)
            .finish()
    }
}

/// How GPU memory reached the NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuPath {
    /// Through a DMA-BUF export (no kernel module needed).
    DmaBuf,
    /// Through the peer-memory module (`nvidia_peermem`), by GPU virtual address.
    PeerMemory,
}

fn range_check(
    what: &'static str,
    offset: usize,
    len: usize,
    total: usize,
) -> Result<(), Mlx5Error> {
    let end = offset.checked_add(len).ok_or(Mlx5Error::OutOfRange {
        what,
        value: u64::MAX,
        limit: total as u64,
    })?;
    if len == 0 || end > total {
        return Err(Mlx5Error::OutOfRange {
            what,
            value: end as u64,
            limit: total as u64,
        });
    }
    Ok(())
}

impl MemoryRegion {
    /// Registers `len` bytes of host memory from `offset` of `buffer` with verbs `access`
    /// flags.
    pub fn register_host(
        pd: &ProtectionDomain,
        buffer: Arc<DmaBuffer>,
        offset: usize,
        len: usize,
        access: u32,
    ) -> Result<Self, Mlx5Error> {
        range_check("host region end", offset, len, buffer.len())?;
        // SAFETY: `offset + len <= buffer.len()` (checked), so the pointer stays inside the
        // allocation, which the region keeps alive (`memory`) until it is deregistered.
        let ptr = unsafe { buffer.as_ptr().add(offset) };
        // SAFETY: a live PD and a live range of host memory.
        let mr = unsafe {
            sys::ibv_reg_mr(
                pd.inner.pd.as_ptr(),
                ptr.cast(),
                len,
                access as core::ffi::c_int,
            )
        };
        let mr = NonNull::new(mr).ok_or_else(|| Mlx5Error::Verbs {
            call: "ibv_reg_mr",
            errno: errno(),
        })?;
        // SAFETY: `mr` is a live region the driver filled.
        let (lkey, rkey) = unsafe { ((*mr.as_ptr()).lkey, (*mr.as_ptr()).rkey) };
        Ok(Self {
            mr,
            lkey,
            rkey,
            addr: ptr as u64,
            len: len as u64,
            gpu_path: None,
            _pd: pd.inner.clone(),
            memory: core::mem::ManuallyDrop::new(RegionMemory::Host(buffer)),
        })
    }

    /// Registers `len` bytes of GPU memory from `offset` of `buffer`: by DMA-BUF through
    /// `exporter` (`ibv_reg_dmabuf_mr`) when given and it works, else through the
    /// peer-memory module by GPU address. The region's addresses are GPU addresses.
    pub fn register_gpu(
        pd: &ProtectionDomain,
        buffer: Arc<DeviceBuffer>,
        offset: usize,
        len: usize,
        access: u32,
        exporter: Option<&dyn DmaBufExporter>,
    ) -> Result<Self, Mlx5Error> {
        range_check("GPU region end", offset, len, buffer.len())?;
        let iova = buffer
            .addr()
            .checked_add(offset as u64)
            .ok_or(Mlx5Error::OutOfRange {
                what: "GPU region address",
                value: buffer.addr(),
                limit: u64::MAX - offset as u64,
            })?;
        let mut dmabuf_error = crate::nic::gpu_access::DmaBufExportError {
            code: 0,
            message: "no DMA-BUF exporter given".to_owned(),
        };
        if let Some(exporter) = exporter {
            match exporter.export(&buffer) {
                Ok(range) => {
                    let start = range.offset().checked_add(offset as u64);
                    // SAFETY: the exporter's contract: `range` is a DMA-BUF of the
                    // buffer's memory, whose byte `range.offset()` is the buffer's first;
                    // the range is checked inside the buffer above.
                    let mr = start.and_then(|start| {
                        NonNull::new(unsafe {
                            sys::ibv_reg_dmabuf_mr(
                                pd.inner.pd.as_ptr(),
                                start,
                                len,
                                iova,
                                range.fd(),
                                access as core::ffi::c_int,
                            )
                        })
                    });
                    let errno = errno();
                    // The registration holds the DMA-BUF itself: the descriptor closes now.
                    drop(range);
                    match mr {
                        Some(mr) => {
                            // SAFETY: `mr` is a live region the driver filled.
                            let (lkey, rkey) =
                                unsafe { ((*mr.as_ptr()).lkey, (*mr.as_ptr()).rkey) };
                            return Ok(Self {
                                mr,
                                lkey,
                                rkey,
                                addr: iova,
                                len: len as u64,
                                gpu_path: Some(GpuPath::DmaBuf),
                                _pd: pd.inner.clone(),
                                memory: core::mem::ManuallyDrop::new(RegionMemory::Gpu(buffer)),
                            });
                        }
                        None => {
                            dmabuf_error = crate::nic::gpu_access::DmaBufExportError {
                                code: errno,
                                message: "ibv_reg_dmabuf_mr failed (errno in code)".to_owned(),
                            }
                        }
                    }
                }
                Err(e) => dmabuf_error = e,
            }
        }
        // SAFETY: the range lies inside a live GPU allocation that the region keeps alive;
        // the peer-memory module resolves the GPU address (the host never dereferences it).
        let mr = unsafe {
            sys::ibv_reg_mr(
                pd.inner.pd.as_ptr(),
                iova as *mut core::ffi::c_void,
                len,
                access as core::ffi::c_int,
            )
        };
        let mr =
            NonNull::new(mr).ok_or_else(|| Mlx5Error::gpu_registration(&dmabuf_error, errno()))?;
        // SAFETY: `mr` is a live region the driver filled.
        let (lkey, rkey) = unsafe { ((*mr.as_ptr()).lkey, (*mr.as_ptr()).rkey) };
        Ok(Self {
            mr,
            lkey,
            rkey,
            addr: iova,
            len: len as u64,
            gpu_path: Some(GpuPath::PeerMemory),
            _pd: pd.inner.clone(),
            memory: core::mem::ManuallyDrop::new(RegionMemory::Gpu(buffer)),
        })
    }

    /// The remote key.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    /// First address covered (host virtual or GPU address).
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// Length covered.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// Whether the region is empty (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// For GPU memory, how it reached the NIC.
    pub fn gpu_path(&self) -> Option<GpuPath> {
        self.gpu_path
    }
}

// SAFETY: the verbs MR is deregistered only when this value drops, and keeps the memory it
// registered alive until then; `covers` answers for exactly the registered range.
unsafe impl Registered for MemoryRegion {
    fn lkey(&self) -> LKey {
        LKey(self.lkey)
    }
    fn covers(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.addr + self.len)
    }
}
