//! GPU-placed queues (feature `cuda`): queue memory and memory regions in GPU memory,
//! executed by the CUDA software NIC of `ibgda-kernels` on the same GPU.
//!
//! - **Memory.** A UMEM registered by DMA-BUF (`mlx5dv_devx_umem_reg_ex` with
//!   `MLX5DV_UMEM_MASK_DMABUF`) or a memory region registered by DMA-BUF
//!   (`ibv_reg_dmabuf_mr`) is GPU memory when its exporter announced the descriptor
//!   (`ibgda_emu_register_dmabuf`): the emulator then knows the device addresses the
//!   descriptor covers. A GPU UMEM gets a host *shadow* of its exact length registered with
//!   the device's software NIC, so that CREATE_CQ and CREATE_QP over it are decoded,
//!   checked and refused by the same PRM executor, and their objects live in the same
//!   fabric (whose CPU engine never finds work in a shadow: nothing ever writes one).
//!   A GPU memory region's keys are this module's own (the CUDA software NIC's key space).
//! - **Objects.** Every successful command is observed ([`observe`]): a CQ or queue pair
//!   whose UMEMs are GPU memory is recorded with the device addresses they stand for, an
//!   RC queue pair's peer at INIT2RTR, its readiness at RTR2RTS, DC targets at CREATE_DCT,
//!   and their destruction.
//! - **Execution.** The CUDA software NIC runs one engine over every GPU-placed queue pair
//!   in RTS, the GPU memory regions and the DC targets of every device. Its tables are
//!   rebuilt (keeping each queue's progress) when a command changes what it executes, at
//!   command time, before the command returns, so that memory the program frees after a
//!   DESTROY is never executed again. It is launched to run until idle, on its own side
//!   stream beside the program's kernels, by a host thread that watches the doorbells of
//!   those queues (each UAR page is host memory, which the mlx5 backend maps into the GPU
//!   as host memory) and relaunches it every [`IDLE_RELAUNCH`] as well, since a doorbell can
//!   arrive before its record is visible to the engine. A persistent kernel is not used:
//!   the program's own `cudaDeviceSynchronize` or `cudaFree` would wait for it.
//! - **Faults.** `fault.first_wqe` and `fault.transport_retry_exceeded_at` arm the
//!   injection words of each GPU queue's table entry, so device waits meet the error CQE.
//!
//! GPU memory registered by address (the peer-memory path, without DMA-BUF) is recognised
//! with `cuPointerGetAttribute` ([`is_gpu_memory`]) and executed the same way.
//!
//! Not modelled on this path (each refused or reported): receives (WRITE_WITH_IMM) at
//! GPU-placed queue pairs, a GPU-placed queue pair connected to a host-placed one.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use cudarc::driver::sys as cu;
use ibgda::memory::DmaBuffer;
use ibgda::nic::prm::{
    opcode, Command, CommandOutput, CreateCq, CreateCqOutput, CreateDct, CreateDctOutput, CreateQp,
    CreateQpOutput, DestroyCq, DestroyDct, DestroyQp, Init2RtrQp, Rtr2RtsQp, ServiceType,
};
use ibgda::nic::{SoftUmem, UmemId};
use ibgda_kernels::gpu::{CompileOptions, Gpu};
use ibgda_kernels::softnic::device::DeviceNic;
use ibgda_kernels::softnic::{
    cq_mode, state, transport, watch, NicCq, NicNode, NicQueue, NicRegion, NicResponder, NicTables,
    NIC_NONE,
};

use crate::emulator::Emulator;
use crate::entry::{Failure, Outcome};

/// How often the engine is launched while GPU queues exist, doorbell or not.
pub(crate) const IDLE_RELAUNCH: Duration = Duration::from_micros(500);
/// The longest message a GPU-placed queue's WQE may move (the engine's scratch buffer).
const MAX_MESSAGE_BYTES: u64 = 4 << 20;
/// Where the doorbell register sits in a UAR page.
const DOORBELL_OFFSET: usize = 0x800;
/// The vendor syndrome of an injected transport-retry-exceeded error CQE.
const RETRY_VENDOR: u32 = crate::dv::RETRY_EXCEEDED_VENDOR_SYNDROME as u32;

/// Device memory: a start and a length.
#[derive(Clone, Copy, Debug)]
struct Span {
    addr: u64,
    len: u64,
}

impl Span {
    /// The device address of `len` bytes at `offset`, if they lie inside.
    fn at(self, offset: u64, len: u64) -> Option<u64> {
        let end = offset.checked_add(len)?;
        (end <= self.len).then_some(self.addr + offset)
    }
}

#[derive(Clone, Copy, Debug)]
struct GpuCq {
    ring: u64,
    dbrec: u64,
    entries: u32,
    collapsed: bool,
}

#[derive(Debug)]
struct GpuQp {
    ring: u64,
    dbrec: u64,
    log_wqebbs: u32,
    cqn: u32,
    dc: bool,
    node: usize,
    /// The UAR page its producers ring (host memory, mapped into the GPU).
    page: Arc<DmaBuffer>,
    peer: Option<u32>,
    ready: bool,
    /// The injected fault: the WQE's sequence number, syndrome, vendor syndrome.
    inject: Option<(u64, u32, u32)>,
}

#[derive(Clone, Copy, Debug)]
struct GpuRegion {
    node: usize,
    addr: u64,
    len: u64,
    lkey: u32,
    rkey: u32,
    access: u32,
}

/// A doorbell the watcher compares with the value it saw last.
struct Watched {
    page: Arc<DmaBuffer>,
    last: u64,
}

/// The CUDA software NIC over foreign memory (the program's): it holds only addresses.
struct ForeignNic(DeviceNic<'static>);

// SAFETY: the NIC holds device buffers, a mapped stop flag and the addresses of the
// program's memory; every use of it is under the state's lock, from one thread at a time.
unsafe impl Send for ForeignNic {}

#[derive(Default)]
struct State {
    umems: HashMap<(usize, u32), Span>,
    cqs: HashMap<u32, GpuCq>,
    qps: BTreeMap<u32, GpuQp>,
    /// DC targets: node and key.
    dcts: HashMap<u32, (usize, u64)>,
    regions: HashMap<u64, GpuRegion>,
    next_region: u64,
    next_key: u32,
    nic: Option<ForeignNic>,
    watched: Vec<Watched>,
    last_launch: Option<Instant>,
}

/// The GPU side of the emulator: the GPU and what its engine executes.
pub(crate) struct GpuSide {
    gpu: &'static Gpu,
    state: Mutex<State>,
}

impl GpuSide {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The GPU side, once opened.
static SIDE: OnceLock<Result<&'static GpuSide, String>> = OnceLock::new();

/// The GPU side, opened on first use (GPU 0; the CUDA software NIC's kernel compiled with
/// NVRTC, seconds of the program's first GPU registration: said on stderr unless
/// `IBGDA_EMU_QUIET=1`), its watcher thread started.
fn side() -> Outcome<&'static GpuSide> {
    SIDE.get_or_init(|| {
        let start = Instant::now();
        if !crate::entry::quiet() {
            eprintln!(
                "ibgda-emu: opening GPU 0 for the CUDA software NIC (NVRTC compiles its kernel)"
            );
        }
        // The engine's kernel alone: the program that loaded the emulator compiles what
        // else it runs itself.
        let gpu = Gpu::open_softnic(0, &CompileOptions::new())
            .map_err(|e| format!("opening GPU 0 for the CUDA software NIC: {e}"))?;
        if !crate::entry::quiet() {
            eprintln!(
                "ibgda-emu: GPU 0 open for the CUDA software NIC after {:.1} s",
                start.elapsed().as_secs_f64()
            );
        }
        let side: &'static GpuSide = Box::leak(Box::new(GpuSide {
            gpu: Box::leak(Box::new(gpu)),
            state: Mutex::new(State {
                next_key: 0x4000_0000,
                ..State::default()
            }),
        }));
        std::thread::Builder::new()
            .name("ibgda-emu-gpu".into())
            .spawn(move || watch_doorbells(side))
            .map_err(|e| format!("starting the doorbell watcher: {e}"))?;
        Ok(side)
    })
    .as_ref()
    .copied()
    .map_err(|e| Failure::new(libc::ENODEV, e.clone()))
}

/// The GPU side if something opened it (commands over host memory never do).
fn opened() -> Option<&'static GpuSide> {
    SIDE.get().and_then(|s| s.as_ref().ok().copied())
}

/// The device range `offset..offset + len` of the DMA-BUF `fd`.
fn dmabuf_span(emulator: &Emulator, fd: i32, offset: u64, len: u64) -> Outcome<Span> {
    let export = emulator.dmabuf(fd).ok_or_else(|| {
        Failure::new(
            libc::EOPNOTSUPP,
            format!(
                "DMA-BUF fd {fd} was not announced by its exporter (ibgda_emu_register_dmabuf): \
                 the emulator reaches GPU memory by its device address"
            ),
        )
    })?;
    let end = offset
        .checked_add(len)
        .filter(|&e| len > 0 && e <= export.len);
    if end.is_none() {
        return Err(Failure::invalid(format!(
            "{len} bytes at offset {offset:#x} of a {}-byte DMA-BUF",
            export.len
        )));
    }
    Ok(Span {
        addr: export.start + offset,
        len,
    })
}

/// Whether `[addr, addr + len)` is GPU memory of this process's CUDA context
/// (`cuPointerGetAttribute`): what the peer-memory module resolves when a GPU address is
/// registered, as NVSHMEM does when DMA-BUF fails. False without a CUDA driver or before
/// CUDA is initialised (nothing can be GPU memory then).
pub(crate) fn is_gpu_memory(addr: u64, len: u64) -> bool {
    static DRIVER: OnceLock<bool> = OnceLock::new();
    // SAFETY: probes for the driver library without calling into it.
    if !*DRIVER.get_or_init(|| unsafe { cu::is_culib_present() }) || len == 0 {
        return false;
    }
    let memory_type = |at: u64| -> Option<u32> {
        let mut kind: u32 = 0;
        // SAFETY: a query of the driver's table of allocations; it writes `kind`.
        let rc = unsafe {
            cu::cuPointerGetAttribute(
                (&mut kind as *mut u32).cast(),
                cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                at,
            )
        };
        (rc == cu::CUresult::CUDA_SUCCESS).then_some(kind)
    };
    let device = cu::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32;
    memory_type(addr) == Some(device) && memory_type(addr + len - 1) == Some(device)
}

/// Registers `size` bytes at the GPU address `addr` as UMEM of `device` (the peer-memory
/// path): a host shadow for the executor, the device range for the engine.
pub(crate) fn register_umem_at(
    emulator: &Emulator,
    device: usize,
    addr: u64,
    size: usize,
) -> Outcome<SoftUmem> {
    shadow_umem(
        emulator,
        device,
        Span {
            addr,
            len: size as u64,
        },
    )
}

/// Registers `size` bytes at `offset` of the DMA-BUF `fd` as UMEM of `device`: a host
/// shadow for the executor, the device range for the engine.
pub(crate) fn register_umem(
    emulator: &Emulator,
    device: usize,
    fd: i32,
    offset: u64,
    size: usize,
) -> Outcome<SoftUmem> {
    let span = dmabuf_span(emulator, fd, offset, size as u64)?;
    shadow_umem(emulator, device, span)
}

fn shadow_umem(emulator: &Emulator, device: usize, span: Span) -> Outcome<SoftUmem> {
    let size = usize::try_from(span.len).map_err(|_| Failure::invalid("UMEM too long"))?;
    let side = side()?;
    let nomem = |e: &dyn std::fmt::Display| Failure::new(libc::ENOMEM, e.to_string());
    let shadow = DmaBuffer::zeroed(size, 64).map_err(|e| nomem(&e))?;
    let umem = emulator.devices[device]
        .nic
        .register_umem_buffer(shadow)
        .map_err(|e| nomem(&e))?;
    side.state().umems.insert((device, umem.umem_id()), span);
    Ok(umem)
}

/// Forgets a UMEM of `device` (deregistered).
pub(crate) fn forget_umem(device: usize, id: u32) {
    if let Some(side) = opened() {
        side.state().umems.remove(&(device, id));
    }
}

/// Registers `len` bytes at `offset` of the DMA-BUF `fd`, named by WQEs at `iova`, with
/// verbs `access`, on `device`: its keys. `None` when `fd` is not GPU memory the emulator
/// knows (the caller then takes the host path).
pub(crate) fn register_region(
    emulator: &Emulator,
    device: usize,
    fd: i32,
    offset: u64,
    len: usize,
    iova: u64,
    access: u32,
) -> Option<Outcome<(RegionHandle, u32, u32)>> {
    emulator.dmabuf(fd)?;
    Some(
        dmabuf_span(emulator, fd, offset, len as u64)
            .and_then(|span| region_at(emulator, device, span, iova, access)),
    )
}

/// Registers `len` bytes of GPU memory at `addr` (the peer-memory path, `ibv_reg_mr` of a
/// GPU address), with verbs `access`, on `device`: its keys.
pub(crate) fn register_region_at(
    emulator: &Emulator,
    device: usize,
    addr: u64,
    len: usize,
    access: u32,
) -> Outcome<(RegionHandle, u32, u32)> {
    let span = Span {
        addr,
        len: len as u64,
    };
    region_at(emulator, device, span, addr, access)
}

fn region_at(
    emulator: &Emulator,
    device: usize,
    span: Span,
    iova: u64,
    access: u32,
) -> Outcome<(RegionHandle, u32, u32)> {
    (|| {
        let len = span.len;
        if iova != span.addr {
            return Err(Failure::new(
                libc::EOPNOTSUPP,
                format!(
                    "iova {iova:#x} differs from the region's device address {:#x}: the CUDA \
                     software NIC addresses GPU regions by device address",
                    span.addr
                ),
            ));
        }
        let side = side()?;
        let mut st = side.state();
        let (lkey, rkey) = (st.next_key, st.next_key + 1);
        st.next_key = st.next_key.wrapping_add(2);
        let id = st.next_region;
        st.next_region += 1;
        st.regions.insert(
            id,
            GpuRegion {
                node: device,
                addr: span.addr,
                len,
                lkey,
                rkey,
                // The rights; the optional flags (relaxed ordering) are hints.
                access: access & 0xf,
            },
        );
        rebuild(side, &mut st, emulator);
        Ok((RegionHandle(id), lkey, rkey))
    })()
}

/// A GPU memory region's registration: dropping it deregisters the region (the engine no
/// longer reaches it when the drop returns).
pub(crate) struct RegionHandle(u64);

impl Drop for RegionHandle {
    fn drop(&mut self) {
        if let Ok(emulator) = Emulator::get() {
            forget_region(emulator, self.0);
        }
    }
}

/// Forgets a GPU memory region (deregistered): the engine no longer reaches it when this
/// returns.
fn forget_region(emulator: &Emulator, id: u64) {
    if let Some(side) = opened() {
        let mut st = side.state();
        if st.regions.remove(&id).is_some() {
            rebuild(side, &mut st, emulator);
        }
    }
}

/// The faults configured for `device`'s queue pairs, as the engine's injection words.
fn injected(emulator: &Emulator, device: usize) -> Option<(u64, u32, u32)> {
    let faults = &emulator.devices[device].config.faults;
    match (
        faults.first_wqe_vendor_syndrome,
        faults.transport_retry_exceeded_at,
    ) {
        (Some(vendor), _) => Some((0, 0x02, vendor.into())),
        (None, Some(at)) => Some((at, 0x15, RETRY_VENDOR)),
        (None, None) => None,
    }
}

/// What a successful command on `device` changes on the GPU side (nothing, for objects in
/// host memory).
pub(crate) fn observe(emulator: &Emulator, device: usize, input: &[u8], output: &[u8]) {
    let Some(side) = opened() else {
        return;
    };
    let Some(op) = input.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
        return;
    };
    let mut st = side.state();
    let changed = match op {
        opcode::CREATE_CQ => {
            if let (Ok(c), Ok(o)) = (CreateCq::decode(input), CreateCqOutput::decode(output)) {
                let entries = 1u32 << c.cqc.log_cq_size;
                let ring = st.umems.get(&(device, c.cq_umem_id)).copied();
                let dbrec = st.umems.get(&(device, c.cqc.dbr_umem_id)).copied();
                let placed = ring
                    .and_then(|r| r.at(c.cq_umem_offset, u64::from(entries) * 64))
                    .zip(dbrec.and_then(|d| d.at(c.cqc.dbr_addr, 8)));
                if let Some((ring, dbrec)) = placed {
                    st.cqs.insert(
                        o.cqn,
                        GpuCq {
                            ring,
                            dbrec,
                            entries,
                            collapsed: c.cqc.collapsed,
                        },
                    );
                }
            }
            false
        }
        opcode::CREATE_QP => {
            if let (Ok(c), Ok(o)) = (CreateQp::decode(input), CreateQpOutput::decode(output)) {
                let ring_bytes = 64u64 << c.qpc.log_sq_size;
                let ring = st
                    .umems
                    .get(&(device, c.wq_umem_id))
                    .and_then(|r| r.at(c.wq_umem_offset, ring_bytes));
                let dbrec = st
                    .umems
                    .get(&(device, c.qpc.dbr_umem_id))
                    .and_then(|d| d.at(c.qpc.dbr_addr, 8));
                let page = emulator.uar_pages().get(&(device, c.qpc.uar_page)).cloned();
                match (ring, dbrec, page) {
                    (Some(ring), Some(dbrec), Some(page)) => {
                        st.qps.insert(
                            o.qpn,
                            GpuQp {
                                ring,
                                dbrec,
                                log_wqebbs: c.qpc.log_sq_size.into(),
                                cqn: c.qpc.cqn_snd,
                                dc: c.qpc.service_type == ServiceType::Dci,
                                node: device,
                                page,
                                peer: None,
                                ready: false,
                                inject: injected(emulator, device),
                            },
                        );
                    }
                    (Some(_), Some(_), None) => eprintln!(
                        "ibgda-emu: GPU queue pair {:#x} rings UAR page {} of no DEVX UAR: \
                         the CUDA software NIC cannot watch its doorbell",
                        o.qpn, c.qpc.uar_page
                    ),
                    (Some(_), None, _) => eprintln!(
                        "ibgda-emu: GPU queue pair {:#x} keeps its doorbell record outside GPU \
                         memory (a CPU-rung doorbell, as NVSHMEM's CPU-assisted path): the \
                         CUDA software NIC does not execute it, and the CPU engine cannot \
                         read its GPU ring",
                        o.qpn
                    ),
                    _ => {}
                }
            }
            false
        }
        opcode::INIT2RTR_QP => {
            if let Ok(c) = Init2RtrQp::decode(input) {
                if let Some(q) = st.qps.get_mut(&c.qpn) {
                    q.peer = (!q.dc).then_some(c.remote_qpn);
                }
            }
            false
        }
        opcode::RTR2RTS_QP => Rtr2RtsQp::decode(input).is_ok_and(|c| {
            st.qps.get_mut(&c.qpn).is_some_and(|q| {
                q.ready = true;
                true
            })
        }),
        opcode::CREATE_DCT => {
            if let (Ok(c), Ok(o)) = (CreateDct::decode(input), CreateDctOutput::decode(output)) {
                st.dcts.insert(o.dctn, (device, c.dctc.dc_access_key));
                st.nic.is_some()
            } else {
                false
            }
        }
        opcode::DESTROY_QP => {
            DestroyQp::decode(input).is_ok_and(|c| st.qps.remove(&c.qpn).is_some_and(|q| q.ready))
        }
        opcode::DESTROY_DCT => DestroyDct::decode(input)
            .is_ok_and(|c| st.dcts.remove(&c.dctn).is_some() && st.nic.is_some()),
        opcode::DESTROY_CQ => {
            if let Ok(c) = DestroyCq::decode(input) {
                st.cqs.remove(&c.cqn);
            }
            false
        }
        _ => false,
    };
    if changed {
        rebuild(side, &mut st, emulator);
    }
}

/// The GPU address of the doorbell of a UAR page (registered into the GPU by its user).
fn doorbell_address(side: &GpuSide, page: &DmaBuffer) -> Result<u64, String> {
    side.gpu
        .context()
        .bind_to_thread()
        .map_err(|e| format!("binding the CUDA context: {e:?}"))?;
    let mut dptr: cu::CUdeviceptr = 0;
    let host = page.as_ptr().wrapping_add(DOORBELL_OFFSET);
    // SAFETY: a query of the driver's table of registered host memory; it writes `dptr`.
    unsafe { cu::cuMemHostGetDevicePointer_v2(&mut dptr, host.cast(), 0) }
        .result()
        .map_err(|e| {
            format!(
                "the UAR page at {:p} is not mapped into the GPU ({e:?}): GPU producers \
                 cannot ring it",
                page.as_ptr()
            )
        })?;
    Ok(dptr)
}

/// Rebuilds the engine over what is executable now, keeping each queue's, CQ's and
/// responder's progress; a failure is printed (the queues then do not run).
fn rebuild(side: &GpuSide, st: &mut State, emulator: &Emulator) {
    if let Err(e) = try_rebuild(side, st, emulator) {
        eprintln!("ibgda-emu: the CUDA software NIC over the GPU queues: {e}");
    }
}

fn try_rebuild(side: &GpuSide, st: &mut State, emulator: &Emulator) -> Result<(), String> {
    let mut old_queues = HashMap::new();
    let mut old_cqs = HashMap::new();
    let mut old_responders = HashMap::new();
    if let Some(nic) = st.nic.take() {
        match nic.0.read() {
            Ok(engines) => {
                for (_, t) in engines {
                    old_queues.extend(t.queues.into_iter().map(|q| (q.qpn, q)));
                    old_cqs.extend(t.cqs.into_iter().map(|c| (c.ring, c)));
                    old_responders.extend(t.responders.into_iter().map(|r| (r.number, r)));
                }
            }
            Err(e) => eprintln!("ibgda-emu: reading the CUDA software NIC back: {e}"),
        }
    }
    st.watched.clear();
    let ready: Vec<u32> = st
        .qps
        .iter()
        .filter(|(_, q)| q.ready && st.cqs.contains_key(&q.cqn))
        .map(|(&n, _)| n)
        .collect();
    if ready.is_empty() {
        return Ok(());
    }
    let mut t = NicTables {
        nodes: emulator
            .devices
            .iter()
            .map(|d| NicNode {
                lid: d.nic.port_attributes().lid.into(),
                reserved: 0,
            })
            .collect(),
        ..NicTables::default()
    };
    t.regions = st
        .regions
        .values()
        .map(|r| NicRegion {
            start: r.addr,
            base: r.addr,
            len: r.len,
            node: r.node as u32,
            lkey: r.lkey,
            rkey: r.rkey,
            access: r.access,
        })
        .collect();
    let mut cq_index: HashMap<u32, u32> = HashMap::new();
    for &qpn in &ready {
        let q = &st.qps[&qpn];
        let cq = st.cqs[&q.cqn];
        let index = *cq_index.entry(q.cqn).or_insert_with(|| {
            let kept = old_cqs.get(&cq.ring);
            t.cqs.push(NicCq {
                ring: cq.ring,
                dbrec: cq.dbrec,
                entries: cq.entries,
                log2_entries: cq.entries.trailing_zeros(),
                mode: if cq.collapsed {
                    cq_mode::COLLAPSED
                } else {
                    cq_mode::RING
                },
                error: kept.map_or(0, |c| c.error),
                producer: kept.map_or(0, |c| c.producer),
                reserved: 0,
            });
            (t.cqs.len() - 1) as u32
        });
        let doorbell = match doorbell_address(side, &q.page) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("ibgda-emu: GPU queue pair {qpn:#x} does not run: {e}");
                continue;
            }
        };
        let (inject_at, inject_syndrome, inject_vendor) = q.inject.unwrap_or((0, 0, 0));
        let fresh = NicQueue {
            ring: q.ring,
            dbrec: q.dbrec,
            doorbell,
            max_message_bytes: MAX_MESSAGE_BYTES,
            last_doorbell: q.page.words()[DOORBELL_OFFSET / 8].load(Ordering::Acquire),
            inject_at,
            qpn,
            node: q.node as u32,
            transport: if q.dc { transport::DC } else { transport::RC },
            log_wqebbs: q.log_wqebbs,
            cq: index,
            peer: q.peer.unwrap_or(NIC_NONE),
            state: state::READY,
            watch: watch::POLL_RECORD,
            inject_syndrome,
            inject_vendor,
            ..NicQueue::default()
        };
        // A queue that ran keeps where it was.
        t.queues.push(match old_queues.get(&qpn) {
            Some(old) => NicQueue {
                consumer: old.consumer,
                executed: old.executed,
                last_doorbell: old.last_doorbell,
                state: old.state,
                armed: old.armed,
                armed_limit: old.armed_limit,
                error_kind: old.error_kind,
                error_syndrome: old.error_syndrome,
                error_vendor: old.error_vendor,
                error_detail: old.error_detail,
                ..fresh
            },
            None => fresh,
        });
        if !q.dc {
            let kept = old_responders.get(&qpn);
            t.responders.push(NicResponder {
                number: qpn,
                node: q.node as u32,
                cq: NIC_NONE,
                error: kept.map_or(0, |r| r.error),
                received: kept.map_or(0, |r| r.received),
                ..NicResponder::default()
            });
        }
        st.watched.push(Watched {
            page: q.page.clone(),
            last: 0,
        });
    }
    for (&dctn, &(node, key)) in &st.dcts {
        t.responders.push(NicResponder {
            dc_key: key,
            number: dctn,
            node: node as u32,
            is_dct: 1,
            cq: NIC_NONE,
            ..NicResponder::default()
        });
    }
    t.queues.sort_by_key(|q| q.qpn);
    // SAFETY: every address in the tables names memory the program handed the device:
    // rings, records and CQs are the GPU memory of UMEMs it registered by DMA-BUF (their
    // exporter announced the device ranges), regions the GPU memory it registered as
    // memory regions, doorbells the device's UAR pages (allocated by the emulator, which
    // keeps each alive in the queue's entry) as the program mapped them into the GPU. The
    // NIC is rebuilt without a queue, CQ or region before the command destroying it (or
    // the deregistration) returns, so before the program may free that memory; the NIC
    // runs only under this module's lock, one launch at a time.
    let nic = unsafe { DeviceNic::from_foreign_tables(side.gpu, &[t]) }
        .map_err(|e| format!("building its tables: {e}"))?;
    st.nic = Some(ForeignNic(nic));
    Ok(())
}

/// The watcher: launches the engine when a watched doorbell changes, and every
/// [`IDLE_RELAUNCH`] while there is one; a failed launch is printed once.
fn watch_doorbells(side: &'static GpuSide) {
    let mut reported = false;
    loop {
        let mut st = side.state();
        let mut rung = false;
        for w in &mut st.watched {
            let value = w.page.words()[DOORBELL_OFFSET / 8].load(Ordering::Acquire);
            if value != w.last {
                w.last = value;
                rung = true;
            }
        }
        let due = st
            .last_launch
            .is_none_or(|at| at.elapsed() >= IDLE_RELAUNCH);
        let mut launched = false;
        if rung || due {
            if let Some(nic) = st.nic.as_mut() {
                if let Err(e) = nic.0.run_until_idle_beside() {
                    if !reported {
                        eprintln!("ibgda-emu: launching the CUDA software NIC: {e}");
                        reported = true;
                    }
                }
                launched = true;
            }
            st.last_launch = Some(Instant::now());
        }
        drop(st);
        if !launched || !rung {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}
