//! The emulated ConnectX (`emu/`) under its clients, each case in a process of its own
//! with the emulator configured for it:
//!
//! - bring-up failures on demand: the mlx5 backend meets each failure users of NVSHMEM,
//!   DeepEP and NCCL GIN report, and the case checks the typed error and the message the
//!   backend promises;
//! - the configured data-path faults (`fault.first_wqe`, `fault.transport_retry_exceeded_at`)
//!   followed by a recovery of the queue pair (its list exactly, every ticket resolved) and
//!   every operation after it, on the mlx5 backend;
//! - the command log of a queue pair's life, decoded with `nic::prm`;
//! - recovery of a GPU-placed queue pair (host memory standing in for the GPU's, the case
//!   playing the GPU producer) whose doorbell is the UAR register: rung from the host;
//! - rdma-core's own `ibv_devinfo -v` (Debian's ibverbs-utils: a client nobody here wrote)
//!   listing the configured devices, every field checked;
//! - every entry point at the symbol version rdma-core 56.1 gives it (`dlvsym`), and every
//!   entry point the clients look up present.
//!
//! The emulator is found at `<target>/emu/lib` (`scripts/build-emulated-nic` builds it) or
//! `$IBGDA_EMU_LIB_DIR`. Without it (or without `ibv_devinfo`, or rdma-core's source for the
//! version maps) a case is reported ignored, unless `IBGDA_REQUIRE_EMU=1` (CI), which fails
//! it.

mod case_report;
mod emulator_path;
#[path = "../examples/host_rdma.rs"]
mod host_rdma;

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibgda::cq::{Syndrome, CQE_BYTES};
use ibgda::memory::{DeviceBuffer, DmaBuffer};
use ibgda::nic::gpu_access::{
    DmaBufExportError, DmaBufExporter, DmaBufRange, IoMapError, IoMapping, IoMemoryMapper,
};
use ibgda::nic::mlx5::{
    check_atomic_capabilities, GpuPath, MemoryRegion, Mlx5Backend, Mlx5Device, Mlx5Error, UmemPaths,
};
use ibgda::nic::prm::log::{self, DecodedCommand, DecodedOutput};
use ibgda::nic::prm::{opcode, CommandStatus, PrmError, ServiceType};
use ibgda::nic::{Device, MemoryAccess, NicError, QueueAllocator, QueueFill, QueueSpec};
use ibgda::order::GpuReleaseStore;
use ibgda::queue::{
    DeviceQueueAccess, Gpu, Gpu as GpuPlaced, GpuDoorbell, PollError, ProducerStateMemory,
    QueueBuffer, Ticket, UnfinishedOutcome, WaitError, CQE_INIT_OP_OWN,
};
use ibgda::wqe::{
    Atomic, Compact, Qpn, Rc, RdmaRead, RdmaWrite, RemoteAddress, RingSize, SendRing, Wqe,
    WqeIndex, WqeLimits, WqeSpec,
};

use emulator_path::{emulator_dir, library_path};

/// Set in a child process: the case it runs.
const CHILD_ENV: &str = "IBGDA_EMULATED_NIC_CASE";
/// How long a child may run.
const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

type Outcome = Result<(), String>;

/// What a case runs.
enum Run {
    /// In a child process on the emulator configured with `config`
    /// (`IBGDA_EMU_CONFIG_TEXT`); `check` then reads the command log it left, in the parent.
    Child {
        config: &'static str,
        run: fn() -> Outcome,
        check: Option<fn(&Path) -> Outcome>,
    },
    /// In the parent, given the emulator's directory: `Ok(None)` when what it needs is
    /// missing (the reason).
    Host(fn(&Path) -> Result<Option<String>, String>),
}

struct Case {
    name: &'static str,
    run: Run,
}

/// Every access right a region can have.
const ALL: MemoryAccess = MemoryAccess::LOCAL_WRITE
    .union(MemoryAccess::REMOTE_WRITE)
    .union(MemoryAccess::REMOTE_READ)
    .union(MemoryAccess::REMOTE_ATOMIC);

const DEFAULT_DEVICE: &str = "[device mlx5_0]\n";

fn child_case(name: &'static str, config: &'static str, run: fn() -> Outcome) -> Case {
    Case {
        name,
        run: Run::Child {
            config,
            run,
            check: None,
        },
    }
}

fn cases() -> Vec<Case> {
    vec![
        child_case("no_device", "# no device section: no device\n", no_device),
        child_case(
            "a_device_that_is_not_mlx5",
            "[device erdma_0]\nprovider = erdma\nlink_layer = ethernet\n",
            not_mlx5,
        ),
        child_case(
            "devx_context_refused",
            "[device mlx5_0]\nfault.open_devx = EPERM\n",
            devx_context_refused,
        ),
        child_case(
            "whitelisted_queries_on_a_verbs_context_even_without_devx",
            "[device mlx5_0]\nfault.open_devx = EPERM\n",
            whitelisted_general_commands,
        ),
        child_case(
            "uar_allocation_refused_in_an_unprivileged_container",
            "[device mlx5_0]\nfault.alloc_uar = EPERM\n",
            uar_allocation_refused,
        ),
        child_case(
            "gpu_memory_without_dmabuf_or_peer_memory",
            DEFAULT_DEVICE,
            no_dmabuf_no_peer_memory,
        ),
        child_case(
            "dmabuf_umem_efault_falls_back_to_peer_memory",
            "[device mlx5_0]\nfault.umem_reg_dmabuf = EFAULT\n",
            dmabuf_umem_efault_falls_back,
        ),
        child_case(
            "dmabuf_descriptors_close_once_registered",
            DEFAULT_DEVICE,
            dmabuf_descriptors_close,
        ),
        child_case(
            "uar_gpu_mapping_refused_with_cuda_error_800",
            "[device mlx5_0]\nfault.uar_gpu_mapping = 800\n",
            uar_gpu_mapping_refused,
        ),
        child_case(
            "gpu_queue_memory_says_which_registration_it_took",
            DEFAULT_DEVICE,
            gpu_queue_registrations_reported,
        ),
        Case {
            name: "host_rdma_example_runs_on_the_mlx5_backend",
            run: Run::Child {
                config: DEFAULT_DEVICE,
                run: host_rdma_on_mlx5,
                check: Some(check_host_rdma_log),
            },
        },
        child_case(
            "cqe_version_0",
            "[device mlx5_0]\ncap.cqe_version = 0\n",
            cqe_version_0,
        ),
        child_case(
            "missing_atomic_capabilities",
            "[device mlx5_0]\ncap.atomic = 0\n[device mlx5_1]\ncap.atomic_sizes = 0x4\n",
            missing_atomics,
        ),
        child_case(
            "firmware_status_and_syndrome_on_chosen_commands",
            "[device mlx5_0]\nfault.command = CREATE_CQ status=0x03 syndrome=0x0badc0de\n\
             [device mlx5_1]\nfault.command = CREATE_QP status=0x0f syndrome=0x12345678\n\
             [device mlx5_2]\nfault.command = RTR2RTS_QP status=0x10 syndrome=0x00c0ffee\n\
             [device mlx5_3]\nfault.command = CREATE_QP status=0x08 syndrome=0x5 nth=2\n\
             [device mlx5_4]\nfault.command = QUERY_HCA_CAP status=0x01 syndrome=0x7\n",
            firmware_failures,
        ),
        child_case(
            "empty_gid_table_on_roce",
            "[device mlx5_0]\nlink_layer = ethernet\ngids = none\n",
            empty_gid_table,
        ),
        child_case(
            "first_wqe_fails_with_local_qp_operation_error_0x68",
            "[device mlx5_0]\nfault.first_wqe = 0x68\n",
            first_wqe_fails,
        ),
        child_case(
            "transport_retry_exceeded_arrives_later",
            "[device mlx5_0]\nfault.transport_retry_exceeded_at = 2\n",
            retry_exceeded_later,
        ),
        child_case(
            "first_wqe_failure_then_recovery_then_every_operation",
            "[device mlx5_0]\nfault.first_wqe = 0x68\n",
            first_wqe_failure_then_recovery,
        ),
        child_case(
            "transport_retry_exceeded_then_recovery_then_every_operation",
            "[device mlx5_0]\nfault.transport_retry_exceeded_at = 2\n",
            retry_exceeded_then_recovery,
        ),
        Case {
            name: "command_log_of_a_queue_pair_decodes",
            run: Run::Child {
                config: DEFAULT_DEVICE,
                run: queue_pair_life,
                check: Some(check_command_log),
            },
        },
        Case {
            name: "command_log_shows_the_srq_the_atomic_mode_and_overrun_ignore",
            run: Run::Child {
                config: "[device mlx5_0]\n[device mlx5_1]\ncap.masked_atomics = 0\n",
                run: queues_of_every_kind,
                check: Some(check_receive_atomic_overrun),
            },
        },
        Case {
            name: "a_failed_destroy_keeps_what_the_object_uses",
            run: Run::Child {
                config: "[device mlx5_0]\nfault.command = DESTROY_QP status=0x08 syndrome=0x51\n\
                         [device mlx5_1]\nfault.command = DESTROY_CQ status=0x08 syndrome=0x52\n",
                run: failed_destroys,
                check: Some(check_failed_destroys),
            },
        },
        child_case(
            "a_gpu_placed_queue_pair_recovers_ringing_its_uar_from_the_host",
            DEFAULT_DEVICE,
            gpu_placed_recovery,
        ),
        child_case(
            "dc_target_made_with_verbs_as_nvshmem_makes_it",
            DEFAULT_DEVICE,
            verbs_dc_target,
        ),
        Case {
            name: "ibv_devinfo_lists_the_configured_devices",
            run: Run::Host(ibv_devinfo),
        },
        child_case(
            "every_entry_point_at_rdma_cores_symbol_version",
            DEFAULT_DEVICE,
            symbol_versions,
        ),
        Case {
            name: "the_exported_versions_are_rdma_cores",
            run: Run::Host(versions_match_rdma_core),
        },
    ]
}

fn fail(what: impl std::fmt::Display) -> String {
    what.to_string()
}

fn expect_err<T: std::fmt::Debug, E>(result: Result<T, E>, what: &str) -> Result<E, String> {
    match result {
        Ok(value) => Err(format!("{what}: succeeded ({value:?}), expected a failure")),
        Err(e) => Ok(e),
    }
}

fn contains(message: &str, needle: &str) -> Outcome {
    if message.contains(needle) {
        Ok(())
    } else {
        Err(format!("the message lacks {needle:?}: {message}"))
    }
}

fn mlx5_of(error: &NicError) -> Result<&Mlx5Error, String> {
    match error {
        NicError::Backend(b) => b
            .downcast_ref::<Mlx5Error>()
            .ok_or_else(|| format!("not an Mlx5Error: {error}")),
        other => Err(format!("not a backend error: {other:?}")),
    }
}

fn open(name: &str) -> Result<Device<Mlx5Backend>, NicError> {
    Device::open(Mlx5Backend::new(Mlx5Device::open(Some(name))?))
}

fn spec() -> QueueSpec {
    QueueSpec::new(RingSize::new(64).expect("64 WQEBBs"))
}

fn no_device() -> Outcome {
    let e = expect_err(Mlx5Device::open(Some("mlx5_0")), "opening mlx5_0")?;
    if !matches!(&e, Mlx5Error::NoDevice { requested: Some(n), available, errno: 0 } if n == "mlx5_0" && available.is_empty())
    {
        return Err(format!(
            "expected NoDevice for mlx5_0 with none present, got {e:?}"
        ));
    }
    contains(
        &e.to_string(),
        "no RDMA device named `mlx5_0` (devices present: none)",
    )?;
    let e = expect_err(Mlx5Backend::from_env(), "the backend from the environment")?;
    if !e.is_no_device() {
        return Err(format!("from_env: expected no device, got {e:?}"));
    }
    match NicError::from(e) {
        NicError::NoDevice { reason } => contains(&reason, "no RDMA device"),
        other => Err(format!("as NicError: {other:?}")),
    }
}

fn not_mlx5() -> Outcome {
    let e = expect_err(Mlx5Device::open(Some("erdma_0")), "opening erdma_0")?;
    if e != (Mlx5Error::NotMlx5 {
        device: "erdma_0".into(),
    }) {
        return Err(format!("expected NotMlx5 for erdma_0, got {e:?}"));
    }
    contains(&e.to_string(), "is not an mlx5 (ConnectX/BlueField) device")?;
    // Without a name, the first device is taken only if mlx5 drives it.
    let e = expect_err(Mlx5Device::open(None), "opening the first mlx5 device")?;
    if e != (Mlx5Error::NotMlx5 {
        device: "erdma_0".into(),
    }) {
        return Err(format!("first device: expected NotMlx5, got {e:?}"));
    }
    let devices = ibgda::nic::mlx5::devices().map_err(fail)?;
    if devices.len() != 1 || devices[0].name != "erdma_0" || devices[0].mlx5 {
        return Err(format!("device list {devices:?}"));
    }
    Ok(())
}

fn devx_context_refused() -> Outcome {
    let e = expect_err(Mlx5Device::open(Some("mlx5_0")), "opening mlx5_0 with DEVX")?;
    if e != (Mlx5Error::DevxUnavailable {
        device: "mlx5_0".into(),
        errno: libc::EPERM,
    }) {
        return Err(format!("expected DevxUnavailable with EPERM, got {e:?}"));
    }
    contains(
        &e.to_string(),
        "the kernel refused a DEVX context on `mlx5_0` (EPERM (1))",
    )
}

/// A context opened with `ibv_open_device` (no DEVX; here DEVX is refused outright, as in
/// an unprivileged container) may still send the kernel's whitelisted general commands:
/// NVSHMEM's IBGDA transport reads QUERY_HCA_CAP that way when it enumerates devices.
/// Any other general command on it is refused.
fn whitelisted_general_commands() -> Outcome {
    use rdma_mummy_sys as sys;

    type GeneralCmd = unsafe extern "C" fn(
        *mut sys::ibv_context,
        *const libc::c_void,
        usize,
        *mut libc::c_void,
        usize,
    ) -> libc::c_int;
    // SAFETY: the emulated library (loaded by this process); the type is
    // `mlx5dv_devx_general_cmd`'s prototype.
    let lib = unsafe { libloading::Library::new("libmlx5.so.1") }.map_err(fail)?;
    // SAFETY: as above.
    let general_cmd: GeneralCmd =
        *unsafe { lib.get::<GeneralCmd>(b"mlx5dv_devx_general_cmd\0") }.map_err(fail)?;
    use ibgda::nic::prm::{CapabilityType, Command as _, QueryHcaCap, QueryHcaCapOutput};
    // QUERY_HCA_CAP of the general capabilities (current values), as the control plane
    // encodes it, and QUERY_ADAPTER (0x101), which the kernel does not whitelist.
    let query_cap = QueryHcaCap::current(CapabilityType::General)
        .encode()
        .map_err(fail)?;
    let mut query_adapter = [0u8; 16];
    query_adapter[..2].copy_from_slice(&0x101u16.to_be_bytes());
    let mut out = vec![0u8; QueryHcaCapOutput::OUTPUT_BYTES];
    let mut adapter_out = [0xffu8; 16];
    // SAFETY (every call below): rdma-core's documented contracts; the buffers are live
    // and of the lengths given.
    unsafe {
        let mut n = 0;
        let list = sys::ibv_get_device_list(&mut n);
        if list.is_null() || n != 1 {
            return Err(format!("ibv_get_device_list: {n} devices"));
        }
        let ctx = sys::ibv_open_device(*list);
        sys::ibv_free_device_list(list);
        if ctx.is_null() {
            return Err("ibv_open_device failed".into());
        }
        let send = |input: &[u8], output: &mut [u8]| {
            general_cmd(
                ctx,
                input.as_ptr().cast(),
                input.len(),
                output.as_mut_ptr().cast(),
                output.len(),
            )
        };
        let cap = send(&query_cap, &mut out);
        let adapter = send(&query_adapter, &mut adapter_out);
        sys::ibv_close_device(ctx);
        if cap != 0 || out[0] != 0 {
            return Err(format!(
                "QUERY_HCA_CAP on a verbs context: returned {cap}, status {:#x}",
                out[0]
            ));
        }
        // The general capabilities' first words are not all zero on a ConnectX.
        if out[16..].iter().all(|&b| b == 0) {
            return Err("QUERY_HCA_CAP answered with no capabilities".into());
        }
        // mlx5dv_devx_general_cmd returns the errno itself.
        if adapter != libc::EOPNOTSUPP {
            return Err(format!(
                "QUERY_ADAPTER on a context without DEVX returned {adapter}, expected \
                 EOPNOTSUPP ({})",
                libc::EOPNOTSUPP
            ));
        }
        Ok(())
    }
}

fn uar_allocation_refused() -> Outcome {
    let device = open("mlx5_0").map_err(fail)?;
    let pd = device.alloc_pd().map_err(fail)?;
    let e = expect_err(pd.create_rc(spec()), "creating an RC queue pair")?;
    let mlx5 = mlx5_of(&e)?;
    if *mlx5 != (Mlx5Error::UarAllocation { errno: libc::EPERM }) {
        return Err(format!("expected UarAllocation with EPERM, got {mlx5:?}"));
    }
    contains(&e.to_string(), "an unprivileged container")
}

/// A DMA-BUF exporter that has none to give (a driver without DMA-BUF support).
#[derive(Debug)]
struct NoDmaBuf;

// SAFETY: it returns no DMA-BUF at all.
unsafe impl DmaBufExporter for NoDmaBuf {
    fn export(&self, _: &DeviceBuffer) -> Result<DmaBufRange, DmaBufExportError> {
        Err(DmaBufExportError {
            code: 801,
            message: "cuMemGetHandleForAddressRange: DMA-BUF not supported (stand-in)".into(),
        })
    }
}

/// A stand-in exporter for the emulator, which reaches memory by address: it hands out a
/// descriptor that is not read (`/dev/null`).
#[derive(Debug)]
struct StandInDmaBuf;

// SAFETY: the emulated NIC on the CPU never reads a DMA-BUF descriptor: it reaches the
// memory of a registration through its address, which is the buffer's (host memory standing
// in for GPU memory, alive while the buffer is), so the range describes what the NIC uses.
unsafe impl DmaBufExporter for StandInDmaBuf {
    fn export(&self, buffer: &DeviceBuffer) -> Result<DmaBufRange, DmaBufExportError> {
        let fd: OwnedFd = std::fs::File::open("/dev/null")
            .map_err(|e| DmaBufExportError {
                code: 1,
                message: e.to_string(),
            })?
            .into();
        // SAFETY: as for the impl: the descriptor is never read; offset 0 is the buffer.
        Ok(unsafe { DmaBufRange::new(fd, 0, buffer.len() as u64) })
    }
}

/// Address space reserved with no access (as CUDA reserves GPU virtual addresses on the
/// host): what the kernel cannot pin without peer memory.
struct Reserved {
    addr: *mut libc::c_void,
    len: usize,
}

// SAFETY: a reservation nobody accesses; unmapped once, on drop.
unsafe impl Send for Reserved {}
// SAFETY: as above.
unsafe impl Sync for Reserved {}

impl Drop for Reserved {
    fn drop(&mut self) {
        // SAFETY: mapped by `mmap` below, unmapped once.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

fn reserved_gpu_buffer(len: usize) -> Result<Arc<DeviceBuffer>, String> {
    // SAFETY: an anonymous PROT_NONE reservation; no memory of this process is affected.
    let addr = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err("mmap of a reservation failed".into());
    }
    let owner = Reserved { addr, len };
    // SAFETY: a stand-in for GPU memory: `len` bytes of reserved address space that stay
    // reserved while `owner` lives; the host never dereferences a `DeviceBuffer`.
    Ok(Arc::new(unsafe {
        DeviceBuffer::from_raw(addr as u64, len, Box::new(owner))
    }))
}

fn no_dmabuf_no_peer_memory() -> Outcome {
    let device = Mlx5Device::open(Some("mlx5_0")).map_err(fail)?;
    let buffer = reserved_gpu_buffer(1 << 16)?;
    let e = expect_err(
        device.register_gpu_umem(buffer.clone(), Some(&NoDmaBuf)),
        "registering GPU queue memory",
    )?;
    match &e {
        Mlx5Error::GpuMemoryRegistration {
            dmabuf,
            peer_memory_errno: libc::EFAULT,
        } => contains(dmabuf, "DMA-BUF not supported")?,
        other => {
            return Err(format!(
                "UMEM: expected GpuMemoryRegistration with EFAULT, got {other:?}"
            ))
        }
    }
    contains(&e.to_string(), "modprobe nvidia_peermem")?;
    let pd = device.alloc_pd().map_err(fail)?;
    let e = expect_err(
        MemoryRegion::register_gpu(&pd, buffer, 0, 4096, 0xf, Some(&NoDmaBuf)),
        "registering GPU data memory",
    )?;
    match e {
        Mlx5Error::GpuMemoryRegistration {
            peer_memory_errno: libc::EFAULT,
            ..
        } => Ok(()),
        other => Err(format!(
            "MR: expected GpuMemoryRegistration with EFAULT, got {other:?}"
        )),
    }
}

fn host_stand_in(len: usize) -> Result<Arc<DeviceBuffer>, String> {
    let host = DmaBuffer::zeroed(len, 4096).map_err(fail)?;
    let addr = host.addr();
    // SAFETY: a stand-in for GPU memory: host memory (kept allocated by the owner, the
    // buffer itself) that nothing but the emulated NIC touches.
    Ok(Arc::new(unsafe {
        DeviceBuffer::from_raw(addr, len, Box::new(host))
    }))
}

fn dmabuf_umem_efault_falls_back() -> Outcome {
    let device = Mlx5Device::open(Some("mlx5_0")).map_err(fail)?;
    // The control buffer (a CQ ring): DMA-BUF UMEM registration fails with EFAULT, the
    // backend registers it through peer memory and keeps why.
    let umem = device
        .register_gpu_umem(host_stand_in(4096)?, Some(&StandInDmaBuf))
        .map_err(fail)?;
    if umem.gpu_path() != Some(GpuPath::PeerMemory) {
        return Err(format!(
            "UMEM path {:?}, expected the peer-memory fallback",
            umem.gpu_path()
        ));
    }
    let why = umem.dmabuf_error().ok_or("the fallback does not say why")?;
    if why.code != libc::EFAULT {
        return Err(format!("fallback reason {why:?}, expected EFAULT"));
    }
    contains(
        &why.to_string(),
        "mlx5dv_devx_umem_reg_ex with the DMA-BUF failed",
    )?;
    // Data buffers still register by DMA-BUF.
    let pd = device.alloc_pd().map_err(fail)?;
    let region = MemoryRegion::register_gpu(
        &pd,
        host_stand_in(8192)?,
        0,
        8192,
        0xf,
        Some(&StandInDmaBuf),
    )
    .map_err(fail)?;
    if region.gpu_path() != Some(GpuPath::DmaBuf) {
        return Err(format!("MR path {:?}, expected DMA-BUF", region.gpu_path()));
    }
    Ok(())
}

/// The descriptors this process has open.
fn open_descriptors() -> Result<usize, String> {
    Ok(std::fs::read_dir("/proc/self/fd").map_err(fail)?.count())
}

/// 1,000 GPU (stand-in) memory regions registered by DMA-BUF with every access right and
/// relaxed ordering, all alive at once: the
/// descriptors of their exports are closed once each registration returns (kept, they
/// would pass the default limit of 1,024 open files), and every one registered by DMA-BUF.
fn dmabuf_descriptors_close() -> Outcome {
    const REGIONS: usize = 1000;
    let device = Mlx5Device::open(Some("mlx5_0")).map_err(fail)?;
    let pd = device.alloc_pd().map_err(fail)?;
    let before = open_descriptors()?;
    let mut regions = Vec::with_capacity(REGIONS);
    // Every right and relaxed ordering, as NVSHMEM and NCCL register GPU memory.
    let access = MemoryAccess::all().bits();
    for i in 0..REGIONS {
        let region = MemoryRegion::register_gpu(
            &pd,
            host_stand_in(4096)?,
            0,
            4096,
            access,
            Some(&StandInDmaBuf),
        )
        .map_err(|e| format!("region {i}: {e}"))?;
        if region.gpu_path() != Some(GpuPath::DmaBuf) {
            return Err(format!("region {i}: path {:?}", region.gpu_path()));
        }
        regions.push(region);
    }
    let after = open_descriptors()?;
    if after != before {
        return Err(format!(
            "{} descriptors open with {REGIONS} regions registered (before: {before})",
            after
        ));
    }
    Ok(())
}

/// Queue memory for GPU-placed queues, standing in for GPU memory on a machine without
/// one: host memory seen as device memory (the CPU emulator reaches it by address), filled
/// as the control plane asks.
struct StandInGpuQueueMemory;

impl QueueAllocator<GpuPlaced> for StandInGpuQueueMemory {
    fn allocate(
        &self,
        len: usize,
        align: usize,
        fill: QueueFill,
    ) -> Result<DeviceBuffer, NicError> {
        let host = DmaBuffer::zeroed(len, align.max(4096))?;
        if fill == QueueFill::InvalidCqes {
            for entry in (0..len / CQE_BYTES).map(|i| i * CQE_BYTES) {
                host.write(entry + CQE_BYTES - 1, &[CQE_INIT_OP_OWN])?;
            }
        }
        let addr = host.addr();
        // SAFETY: a stand-in for GPU memory: host memory kept allocated by the owner (the
        // buffer itself) that only the emulated NIC touches.
        Ok(unsafe { DeviceBuffer::from_raw(addr, len, Box::new(host)) })
    }
}

/// A stand-in GPU mapping of the UAR page: the host address itself (nothing here
/// dereferences it: no GPU kernel runs).
#[derive(Debug)]
struct StandInMapping(u64);

// SAFETY: the "GPU" of these tests sees host memory at host addresses: the mapped range's
// first byte is at the address it was given.
unsafe impl IoMapping for StandInMapping {
    fn device_addr(&self) -> u64 {
        self.0
    }
}

/// Maps the doorbell page for a stand-in GPU, counting what the backend asked of it.
#[derive(Debug, Default)]
struct CountingMapper {
    io: AtomicUsize,
    host: AtomicUsize,
}

// SAFETY: each mapping it returns is of exactly the range given (its first byte at the
// range's address).
unsafe impl IoMemoryMapper for CountingMapper {
    unsafe fn map_io(&self, _: NonNull<u8>, _: usize) -> Result<Box<dyn IoMapping>, IoMapError> {
        self.io.fetch_add(1, Ordering::Relaxed);
        Err(IoMapError {
            code: 1,
            message: "the stand-in maps no I/O memory (the emulator's UAR pages are memory)".into(),
        })
    }
    unsafe fn map_host_memory(
        &self,
        ptr: NonNull<u8>,
        _: usize,
    ) -> Result<Box<dyn IoMapping>, IoMapError> {
        self.host.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(StandInMapping(ptr.as_ptr() as u64)))
    }
}

impl CountingMapper {
    fn calls(&self) -> (usize, usize) {
        (
            self.io.load(Ordering::Relaxed),
            self.host.load(Ordering::Relaxed),
        )
    }
}

/// The device opened with GPU access through stand-ins (the DMA-BUF exporter and the
/// doorbell mapper a GPU's `CudaNicAccess` would be).
fn open_with_gpu(name: &str) -> Result<(Device<Mlx5Backend>, Arc<CountingMapper>), String> {
    let mapper = Arc::new(CountingMapper::default());
    let backend = Mlx5Backend::new(Mlx5Device::open(Some(name)).map_err(fail)?)
        .with_gpu(Arc::new(StandInDmaBuf), mapper.clone());
    Ok((Device::open(backend).map_err(fail)?, mapper))
}

/// `fault.uar_gpu_mapping = 800`: the emulator answers the backend's question about the
/// doorbell page with CUDA's "not permitted", as the driver refuses a BAR mapping to users
/// without the peer-mapping override; GPU-placed queue pairs (RC and DC) then fail with
/// the typed `UarMappingRefused` and its remedy, before the backend asks the mapper (no
/// CUDA call is made), and everything allocated for them is released.
fn uar_gpu_mapping_refused() -> Outcome {
    let (device, mapper) = open_with_gpu("mlx5_0")?;
    let pd = device.alloc_pd().map_err(fail)?;
    let rc = expect_err(
        pd.create_rc_in::<GpuPlaced>(spec(), &StandInGpuQueueMemory),
        "a GPU-placed RC queue pair",
    )?;
    let dci = expect_err(
        pd.create_dci_in::<Compact, GpuPlaced>(spec(), &StandInGpuQueueMemory),
        "a GPU-placed DC initiator",
    )?;
    for e in [&rc, &dci] {
        match mlx5_of(e)? {
            Mlx5Error::UarMappingRefused {
                cuda_error: 800,
                message,
            } => contains(message, "fault.uar_gpu_mapping")?,
            other => {
                return Err(format!(
                    "expected UarMappingRefused with 800, got {other:?}"
                ))
            }
        }
        match e {
            NicError::Backend(b) if b.is_unsupported() => {}
            other => return Err(format!("not an unsupported backend error: {other:?}")),
        }
        let text = e.to_string();
        contains(
            &text,
            "refused to map the NIC doorbell (UAR) page into the GPU",
        )?;
        contains(&text, "CUDA error 800")?;
        contains(&text, "PeerMappingOverride=1")?;
    }
    if mapper.calls() != (0, 0) {
        return Err(format!(
            "the mapper was asked {:?} (I/O, host)",
            mapper.calls()
        ));
    }
    if device.backend().doorbell_mappings() != (0, 0) {
        return Err(format!(
            "doorbell mappings {:?} after a refusal",
            device.backend().doorbell_mappings()
        ));
    }
    // Host-placed queues on the same device do not map the doorbell into the GPU.
    drop(pd.create_rc(spec()).map_err(fail)?);
    drop(pd);
    let left = outstanding()?;
    for kind in ["uars", "umems", "devx", "qps", "cqs"] {
        if count(&left, kind) != 0 {
            return Err(format!("left after the refusals: {left:?}"));
        }
    }
    Ok(())
}

/// GPU-placed queue pairs over the CPU emulator, their memory a stand-in: the backend says
/// which registration each UMEM took. The CPU emulator cannot reach a DMA-BUF (its UMEM
/// registration is `EOPNOTSUPP`), so the four UMEMs of each queue pair fall back to peer
/// memory, and `umem_paths` and `dmabuf_fallback` say so: the count kernels'
/// `nic_suite_gpu` asserts zero of on the emulator's GPU build. The doorbell page, the
/// emulator's, takes the host-memory registration, once per page.
fn gpu_queue_registrations_reported() -> Outcome {
    let (device, mapper) = open_with_gpu("mlx5_0")?;
    let pd = device.alloc_pd().map_err(fail)?;
    let paths = || device.backend().umem_paths();
    if paths() != UmemPaths::default() {
        return Err(format!("UMEM paths before any queue: {:?}", paths()));
    }
    let rc = pd
        .create_rc_in::<GpuPlaced>(spec(), &StandInGpuQueueMemory)
        .map_err(fail)?;
    let dci = pd
        .create_dci_in::<Compact, GpuPlaced>(spec(), &StandInGpuQueueMemory)
        .map_err(fail)?;
    let host = pd.create_rc(spec()).map_err(fail)?;
    // A DC target's CQ is host memory (2 UMEMs), as in nic_suite_gpu's case.
    let dct = pd.create_dct(0x0102_0304_0506_0708, 16).map_err(fail)?;
    let expected = UmemPaths {
        host: 6,
        dmabuf: 0,
        peer_memory: 8,
    };
    if paths() != expected {
        return Err(format!("UMEM paths {:?}, expected {expected:?}", paths()));
    }
    let why = device
        .backend()
        .dmabuf_fallback()
        .ok_or("the peer-memory fallback does not say why")?;
    if why.code != libc::EOPNOTSUPP {
        return Err(format!("fallback reason {why:?}, expected EOPNOTSUPP"));
    }
    contains(&why.to_string(), "DMA-BUF UMEM needs rdma-core >= 43")?;
    // One UAR page per queue pair on the emulator: each mapped as host memory, none as I/O
    // memory.
    if device.backend().doorbell_mappings() != (0, 2) || mapper.calls() != (0, 2) {
        return Err(format!(
            "doorbell mappings {:?}, mapper calls {:?} (I/O, host), expected (0, 2) each",
            device.backend().doorbell_mappings(),
            mapper.calls()
        ));
    }
    drop((rc, dci, host, dct));
    Ok(())
}

/// `examples/host_rdma.rs` with `--nic mlx5_0`: the example's whole job on the mlx5
/// backend over the emulated ConnectX (its command log checked in the parent).
fn host_rdma_on_mlx5() -> Outcome {
    let args = host_rdma::nic_from_args(["--nic".to_owned(), "mlx5_0".to_owned()])?;
    let report = host_rdma::run(&args).map_err(fail)?;
    contains(&report, "on mlx5_0 (mlx5 backend: mlx5_0)")?;
    let left = outstanding()?;
    if left.iter().any(|(_, n)| *n != 0) {
        return Err(format!("the example left {left:?}"));
    }
    Ok(())
}

/// The example's two RC queue pairs were made, connected and destroyed by the emulated
/// device's firmware (the command log), every command accepted.
fn check_host_rdma_log(path: &Path) -> Outcome {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let records = log::parse(&text).map_err(fail)?;
    if let Some(r) = records
        .iter()
        .find(|r| r.errno != 0 || r.device != "mlx5_0")
    {
        return Err(format!("record {}: {} errno {}", r.seq, r.device, r.errno));
    }
    let times = |op: u16| records.iter().filter(|r| r.opcode() == op).count();
    for (name, op) in [
        ("CREATE_CQ", opcode::CREATE_CQ),
        ("CREATE_QP", opcode::CREATE_QP),
        ("RST2INIT_QP", opcode::RST2INIT_QP),
        ("INIT2RTR_QP", opcode::INIT2RTR_QP),
        ("RTR2RTS_QP", opcode::RTR2RTS_QP),
        ("DESTROY_QP", opcode::DESTROY_QP),
        ("DESTROY_CQ", opcode::DESTROY_CQ),
    ] {
        if times(op) != 2 {
            return Err(format!(
                "{name} {} times, expected 2 (one per host)",
                times(op)
            ));
        }
    }
    Ok(())
}

fn cqe_version_0() -> Outcome {
    let e = expect_err(open("mlx5_0"), "opening a device with CQE version 0")?;
    match &e {
        NicError::Capability {
            name: "cqe_version",
            found: 0,
            ..
        } => contains(&e.to_string(), "update the NIC firmware"),
        other => Err(format!(
            "expected the cqe_version capability error, got {other:?}"
        )),
    }
}

fn missing_atomics() -> Outcome {
    let no_atomics = open("mlx5_0").map_err(fail)?;
    let e = expect_err(
        check_atomic_capabilities(no_atomics.caps()),
        "atomics without `atomic`",
    )?;
    if !matches!(&e, Mlx5Error::MissingAtomics { missing } if missing.contains("`atomic` is 0")) {
        return Err(format!("expected MissingAtomics (atomic 0), got {e:?}"));
    }
    contains(&e.to_string(), "post no atomic WQEs on it")?;
    let four_bytes = open("mlx5_1").map_err(fail)?;
    let e = expect_err(
        check_atomic_capabilities(four_bytes.caps()),
        "atomics of 4 bytes only",
    )?;
    if !matches!(&e, Mlx5Error::MissingAtomics { missing } if missing.contains("atomic_size_qp is 0x4"))
    {
        return Err(format!("expected MissingAtomics (8-byte), got {e:?}"));
    }
    Ok(())
}

fn expect_command_error(
    e: &NicError,
    command: &'static str,
    status: CommandStatus,
    syndrome: u32,
) -> Outcome {
    let expected = NicError::Command(PrmError::CommandError {
        command,
        status,
        syndrome,
    });
    if *e != expected {
        return Err(format!("expected {expected:?}, got {e:?}"));
    }
    contains(&e.to_string(), &format!("syndrome {syndrome:#010x}"))
}

fn firmware_failures() -> Outcome {
    let cq = open("mlx5_0").map_err(fail)?;
    let e = expect_err(cq.alloc_pd().map_err(fail)?.create_rc(spec()), "CREATE_CQ")?;
    expect_command_error(&e, "CREATE_CQ", CommandStatus::BadParameter, 0x0bad_c0de)?;

    let qp = open("mlx5_1").map_err(fail)?;
    let e = expect_err(qp.alloc_pd().map_err(fail)?.create_rc(spec()), "CREATE_QP")?;
    expect_command_error(&e, "CREATE_QP", CommandStatus::NoResources, 0x1234_5678)?;
    // The CQ made before the failed CREATE_QP was destroyed with it.
    if qp.teardown_failures().0 != 0 {
        return Err(format!(
            "teardown after CREATE_QP failed: {:?}",
            qp.teardown_failures()
        ));
    }

    let rts = open("mlx5_2").map_err(fail)?;
    let pending = rts
        .alloc_pd()
        .map_err(fail)?
        .create_rc(spec())
        .map_err(fail)?;
    let endpoint = pending.endpoint();
    let e = expect_err(pending.connect(&endpoint), "RTR2RTS_QP")?;
    expect_command_error(&e, "RTR2RTS_QP", CommandStatus::BadQpState, 0x00c0_ffee)?;

    // Only the second CREATE_QP fails.
    let second = open("mlx5_3").map_err(fail)?;
    let pd = second.alloc_pd().map_err(fail)?;
    let _first = pd
        .create_rc(spec())
        .map_err(|e| format!("the first CREATE_QP: {e}"))?;
    let e = expect_err(pd.create_rc(spec()), "the second CREATE_QP")?;
    expect_command_error(&e, "CREATE_QP", CommandStatus::LimitExceeded, 5)?;

    // QUERY_HCA_CAP fails: the device does not open.
    let e = expect_err(open("mlx5_4"), "QUERY_HCA_CAP")?;
    expect_command_error(&e, "QUERY_HCA_CAP", CommandStatus::InternalError, 7)
}

fn empty_gid_table() -> Outcome {
    let device = open("mlx5_0").map_err(fail)?;
    if !device.port().gids.is_empty() {
        return Err(format!("GIDs {:?}", device.port().gids));
    }
    let pd = device.alloc_pd().map_err(fail)?;
    // The control plane refuses before it allocates anything: no RoCE v2 GID to send from.
    let e = expect_err(
        pd.create_dct(0x42, 16),
        "a DC target on a RoCE port without GIDs",
    )?;
    let expected = NicError::NoRoceV2Gid {
        device: "mlx5_0".into(),
        port: 1,
        entries: 0,
    };
    if e.to_string() != expected.to_string() || !matches!(e, NicError::NoRoceV2Gid { .. }) {
        return Err(format!("expected {expected:?}, got {e:?}"));
    }
    contains(
        &e.to_string(),
        "give its network interface an IPv4 or IPv6 address",
    )?;
    let e = expect_err(
        pd.create_rc(spec()),
        "an RC queue pair on a RoCE port without GIDs",
    )?;
    if !matches!(
        &e,
        NicError::NoRoceV2Gid {
            entries: 0,
            port: 1,
            ..
        }
    ) {
        return Err(format!("expected NoRoceV2Gid for RC too, got {e:?}"));
    }
    Ok(())
}

/// A connected RC loopback queue pair and a registered buffer on device mlx5_0.
struct Loopback {
    qp: ibgda::queue::QueuePair<ibgda::wqe::Rc>,
    region: ibgda::nic::MemoryRegion<Mlx5Backend>,
    buffer: Arc<DmaBuffer>,
    _device: Device<Mlx5Backend>,
}

/// A loopback queue pair and 64 bytes the NIC may write.
fn loopback() -> Result<Loopback, String> {
    loopback_with(64, MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_WRITE)
}

fn loopback_with(len: usize, access: MemoryAccess) -> Result<Loopback, String> {
    let device = open("mlx5_0").map_err(fail)?;
    let pd = device.alloc_pd().map_err(fail)?;
    let buffer = Arc::new(DmaBuffer::zeroed(len, 4096).map_err(fail)?);
    let region = pd.register(buffer.clone(), 0, len, access).map_err(fail)?;
    let pending = pd.create_rc(spec()).map_err(fail)?;
    let endpoint = pending.endpoint();
    let qp = pending.connect(&endpoint).map_err(fail)?;
    Ok(Loopback {
        qp,
        region,
        buffer,
        _device: device,
    })
}

fn first_wqe_fails() -> Outcome {
    let mut l = loopback()?;
    let wqe = RdmaWrite::new(l.region.remote(0))
        .inline(&[1; 8])
        .signaled()
        .build()
        .map_err(fail)?;
    let ticket = l.qp.post(&wqe, &[]).map_err(fail)?;
    let e = expect_err(l.qp.wait(ticket, Duration::from_secs(10)), "the first WQE")?;
    let WaitError::Poll(PollError::Completion(c)) = e else {
        return Err(format!("expected an error completion, got {e:?}"));
    };
    if (c.wqe_index, c.syndrome, c.vendor_syndrome) != (0, Some(Syndrome::LocalQpOperation), 0x68) {
        return Err(format!("expected WQE 0, LOCAL_QP_OP, vendor 0x68: {c:?}"));
    }
    let typed = Mlx5Error::first_wqe_failed(&c).ok_or("not reported as the first WQE's failure")?;
    let message = typed.to_string();
    contains(&message, "failed on its first WQE (index 0)")?;
    contains(&message, "vendor syndrome 0x68")?;
    contains(&message, "create it with a zero-size RQ or an SRQ")
}

fn retry_exceeded_later() -> Outcome {
    let mut l = loopback()?;
    let mut tickets = Vec::new();
    for i in 0..4u8 {
        let payload = [i + 1; 8];
        let wqe = RdmaWrite::new(l.region.remote(8 * u64::from(i)))
            .inline(&payload)
            .signaled()
            .build()
            .map_err(fail)?;
        tickets.push(l.qp.post(&wqe, &[]).map_err(fail)?);
    }
    let start = Instant::now();
    for (i, ticket) in tickets.into_iter().enumerate() {
        let result = l.qp.wait(ticket, Duration::from_secs(10));
        match (i, result) {
            (0 | 1, Ok(())) => {}
            (2, Err(WaitError::Poll(PollError::Completion(c)))) => {
                if (c.wqe_index, c.syndrome) != (2, Some(Syndrome::TransportRetryExceeded)) {
                    return Err(format!(
                        "WQE 2: expected transport retry exceeded, got {c:?}"
                    ));
                }
                if Mlx5Error::first_wqe_failed(&c).is_some() {
                    return Err("a later WQE's failure reported as the first WQE's".into());
                }
                contains(&c.to_string(), "vendor syndrome 0x81")?;
                return if start.elapsed() < Duration::from_secs(10) {
                    Ok(())
                } else {
                    Err(format!("the error took {:?}", start.elapsed()))
                };
            }
            (i, other) => return Err(format!("WQE {i}: {other:?}")),
        }
    }
    Err("no error completion".into())
}

/// Maps the emulated ConnectX's UAR pages (ordinary memory of this process) into "the GPU"
/// at their own addresses: there is no GPU here, the case plays the GPU producer and
/// stores its doorbells at that address.
#[derive(Debug)]
struct HostAsGpu;

#[derive(Debug)]
struct AtItsOwnAddress(u64);

// SAFETY: the "GPU address" of the range is its host address, which stays its address for
// as long as the mapping lives (the backend keeps the UAR, so its page, alive as long).
unsafe impl IoMapping for AtItsOwnAddress {
    fn device_addr(&self) -> u64 {
        self.0
    }
}

// SAFETY: the mappings it returns are of exactly the range given, at its own address.
unsafe impl IoMemoryMapper for HostAsGpu {
    unsafe fn map_io(&self, _: NonNull<u8>, _: usize) -> Result<Box<dyn IoMapping>, IoMapError> {
        Err(IoMapError {
            code: 801,
            message: "no GPU: only the emulator's UAR pages (memory) are mapped".into(),
        })
    }
    unsafe fn map_host_memory(
        &self,
        ptr: NonNull<u8>,
        _: usize,
    ) -> Result<Box<dyn IoMapping>, IoMapError> {
        Ok(Box::new(AtItsOwnAddress(ptr.as_ptr() as u64)))
    }
}

/// GPU queue memory stood in for by host memory at its own address (the backend then
/// registers it by peer memory, which the emulator reaches by address, after `NoDmaBuf`
/// has none).
#[derive(Debug)]
struct HostStandIns;

impl QueueAllocator<Gpu> for HostStandIns {
    fn allocate(
        &self,
        len: usize,
        align: usize,
        fill: QueueFill,
    ) -> Result<DeviceBuffer, NicError> {
        let host = DmaBuffer::zeroed(len, align.max(4096))?;
        if fill == QueueFill::InvalidCqes {
            for entry in (0..len / 64).map(|i| i * 64) {
                // Invalid opcode, hardware-owned: a CQE nobody wrote.
                host.write(entry + 63, &[0xf1])?;
            }
        }
        let addr = host.addr();
        // SAFETY: host memory standing in for GPU memory, kept allocated by the owner (the
        // buffer itself); only the NIC, the "GPU producer" and recovery's access (this
        // case, by address) reach it.
        Ok(unsafe { DeviceBuffer::from_raw(addr, len, Box::new(host)) })
    }
}

/// The bytes at `addr`, as atomics: the emulator's engine thread reads and writes the same
/// memory (it reaches queue memory through atomic words too).
///
/// # Safety
///
/// `addr..addr + len` must be live memory of this process (a host stand-in).
unsafe fn stand_in_bytes<'a>(addr: u64, len: usize) -> &'a [AtomicU8] {
    // SAFETY: live memory (the caller's contract), accessed only atomically.
    unsafe { core::slice::from_raw_parts(addr as *const AtomicU8, len) }
}

/// Recovery's access to the stand-in GPU memory, by address (as a copy engine reaches GPU
/// memory). Its `ring` refuses: the doorbell is the UAR's register, which recovery must
/// ring itself through the host's mapping of the page.
struct StandInAccess;

// SAFETY: exactly the bytes asked for, at `offset` of the buffer given (whose device
// address is the host address of a live stand-in), nothing kept; `ring` stores nothing.
unsafe impl DeviceQueueAccess<Gpu> for StandInAccess {
    fn read(&self, buffer: &DeviceBuffer, offset: usize, dst: &mut [u8]) -> Result<(), String> {
        if offset + dst.len() > buffer.len() {
            return Err(format!(
                "{} bytes at {offset} of {}",
                dst.len(),
                buffer.len()
            ));
        }
        // SAFETY: inside the stand-in `buffer` describes, which it keeps alive.
        let bytes = unsafe { stand_in_bytes(buffer.addr() + offset as u64, dst.len()) };
        for (d, b) in dst.iter_mut().zip(bytes) {
            *d = b.load(Ordering::Acquire);
        }
        Ok(())
    }
    fn write(&self, buffer: &DeviceBuffer, offset: usize, src: &[u8]) -> Result<(), String> {
        if offset + src.len() > buffer.len() {
            return Err(format!(
                "{} bytes at {offset} of {}",
                src.len(),
                buffer.len()
            ));
        }
        // SAFETY: as in `read`.
        let bytes = unsafe { stand_in_bytes(buffer.addr() + offset as u64, src.len()) };
        for (b, s) in bytes.iter().zip(src) {
            b.store(*s, Ordering::Release);
        }
        core::sync::atomic::fence(Ordering::SeqCst);
        Ok(())
    }
    fn ring(&self, doorbell: &GpuDoorbell, _: [u8; 8]) -> Result<(), String> {
        Err(format!(
            "ring called for the doorbell at {:#x}: recovery must ring a ConnectX UAR \
             through the host's mapping",
            doorbell.addr()
        ))
    }
}

type GpuQp = ibgda::queue::QueuePair<Rc, Gpu, GpuReleaseStore>;

/// Posts `wqe` as a GPU thread does, from the queue's device descriptor: the WQE at
/// `reserved`, the counters, the doorbell record's send counter and (if `ring`) the
/// doorbell, a 64-bit
/// store to the UAR register's "GPU" address. Returns the WQE's end counter.
fn gpu_post<W: WqeSpec>(qp: &GpuQp, wqe: &Wqe<W>, ring: bool) -> Result<u64, String> {
    let d = *qp.device_queue().raw();
    // SAFETY: the descriptor names the queue pair's live stand-ins (64 bytes of producer
    // state, a ring of 2^log_sq_wqebbs WQEBBs, the record's 4-byte send counter) and the
    // UAR register's 8 bytes, all alive while `qp` is.
    let (state, ring_bytes, record, doorbell) = unsafe {
        (
            stand_in_bytes(d.state, 64),
            stand_in_bytes(d.sq_ring, 64 << d.log_sq_wqebbs),
            stand_in_bytes(d.sq_dbrec, 4),
            &*(d.doorbell as *const AtomicU64),
        )
    };
    let word = |at: usize| {
        u64::from_ne_bytes(core::array::from_fn(|i| {
            state[at + i].load(Ordering::Acquire)
        }))
    };
    let put = |bytes: &[AtomicU8], at: usize, value: &[u8]| {
        for (b, v) in bytes[at..at + value.len()].iter().zip(value) {
            b.store(*v, Ordering::Release);
        }
    };
    let at = word(0);
    let mut bytes = vec![0u8; wqe.wqebbs() as usize * 64];
    SendRing::new(&mut bytes, WqeLimits::default())
        .map_err(fail)?
        .write(
            WqeIndex::from_counter(at),
            Qpn::new(d.qpn).map_err(fail)?,
            wqe,
        )
        .map_err(fail)?;
    let size = 1u64 << d.log_sq_wqebbs;
    for (k, block) in bytes.chunks(64).enumerate() {
        put(ring_bytes, ((at + k as u64) % size) as usize * 64, block);
    }
    let end = at + u64::from(wqe.wqebbs());
    for offset in [0, 8, 16] {
        put(state, offset, &end.to_ne_bytes());
    }
    core::sync::atomic::fence(Ordering::SeqCst);
    // The send counter: the record's second word, which the descriptor names.
    put(record, 0, &((end & 0xffff) as u32).to_be_bytes());
    core::sync::atomic::fence(Ordering::SeqCst);
    if ring {
        doorbell.store(
            u64::from_ne_bytes(bytes[..8].try_into().expect("8 bytes")),
            Ordering::Release,
        );
    }
    Ok(end)
}

/// A GPU thread's WRITE of 8 inline bytes of `byte` to `at` ([`gpu_post`]).
fn gpu_write(
    qp: &GpuQp,
    at: RemoteAddress,
    byte: u8,
    signaled: bool,
    ring: bool,
) -> Result<u64, String> {
    let payload = [byte; 8];
    let w = RdmaWrite::new(at).inline(&payload);
    let wqe = if signaled {
        w.signaled().build()
    } else {
        w.build()
    };
    gpu_post(qp, &wqe.map_err(fail)?, ring)
}

/// A GPU-placed RC queue pair on the emulated ConnectX (its memory host stand-ins, its
/// doorbell the UAR register mapped into "the GPU" at its host address): the case, as the
/// GPU, completes a WRITE, fails one on a region without remote write, and publishes two
/// unsignaled ones after it (the last not rung). Recovery rings the UAR from the host
/// (its access refuses to), signals the tail with a NOP, and returns the failed WRITE
/// with its syndrome and the two after it flushed; the queue pair then writes again from
/// WQE index 0.
fn gpu_placed_recovery() -> Outcome {
    let backend = Mlx5Backend::new(Mlx5Device::open(Some("mlx5_0")).map_err(fail)?)
        .with_gpu(Arc::new(NoDmaBuf), Arc::new(HostAsGpu));
    let device = Device::open(backend).map_err(fail)?;
    let pd = device.alloc_pd().map_err(fail)?;
    let buffer = Arc::new(DmaBuffer::zeroed(128, 4096).map_err(fail)?);
    let region = pd
        .register(buffer.clone(), 0, 64, MemoryAccess::all())
        .map_err(fail)?;
    let read_only = pd
        .register(
            buffer.clone(),
            64,
            64,
            MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_READ,
        )
        .map_err(fail)?;
    let pending = pd
        .create_rc_in(
            QueueSpec::new(RingSize::new(16).map_err(fail)?),
            &HostStandIns,
        )
        .map_err(fail)?;
    let endpoint = pending.endpoint();
    let state = ProducerStateMemory::from_device(
        HostStandIns
            .allocate(64, 64, QueueFill::Zero)
            .map_err(fail)?,
    )
    .map_err(fail)?;
    let mut qp: GpuQp = pending
        .connect_device(&endpoint, state, GpuReleaseStore)
        .map_err(fail)?;
    gpu_write(&qp, region.remote(0), 0x11, true, true)?;
    let failed = gpu_write(&qp, read_only.remote(0), 0x22, true, true)?;
    // The first two CQEs (the completion and the error) are written before recovery, so
    // that what it returns does not depend on when the engine ran.
    let d = *qp.device_queue().raw();
    // SAFETY: the CQ ring the descriptor names, a live stand-in of 2^log_cq_entries CQEs.
    let cq = unsafe { stand_in_bytes(d.cq_ring, 64 << d.log_cq_entries) };
    let start = Instant::now();
    while (0..2).any(|slot| cq[slot * 64 + 63].load(Ordering::Acquire) >> 4 == 0xf) {
        if start.elapsed() > Duration::from_secs(10) {
            return Err("the emulated NIC wrote no CQE for the first two WRITEs".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let flushed = [
        gpu_write(&qp, region.remote(8), 0x33, false, true)?,
        // Published, never rung: recovery's doorbell announces it.
        gpu_write(&qp, region.remote(16), 0x44, false, false)?,
    ];
    let next = qp.endpoint().ok_or("no endpoint")?;
    let recovery = qp
        .recover_device(
            Some(&next),
            &StandInAccess,
            Duration::from_secs(10),
            &mut || std::thread::sleep(Duration::from_micros(100)),
        )
        .map_err(fail)?;
    let found: Vec<_> = recovery
        .unfinished
        .iter()
        .map(|u| (u.ticket.end(), u.outcome.completion().syndrome))
        .collect();
    let expected = vec![
        (failed, Some(Syndrome::RemoteAccess)),
        (flushed[0], Some(Syndrome::WorkRequestFlushed)),
        (flushed[1], Some(Syndrome::WorkRequestFlushed)),
    ];
    if found != expected {
        return Err(format!(
            "recovery returned {found:?}, expected {expected:?}"
        ));
    }
    let mut image = vec![0x11; 8];
    image.extend([0; 120]);
    if buffer.to_vec() != image {
        return Err(format!("memory after recovery: {:?}", buffer.to_vec()));
    }
    // The last doorbell in the UAR page the engine watches is recovery's, stored from the
    // host: its NOP's (WQE index 4, opcode 0) on this queue pair.
    // SAFETY: the UAR register the descriptor names, 8 aligned bytes of the emulator's
    // page, alive while the queue pair is.
    let rung = unsafe { &*(d.doorbell as *const AtomicU64) }
        .load(Ordering::Acquire)
        .to_ne_bytes();
    if rung[1..4] != [0, 4, 0] || rung[4..7] != qp.device_qpn().get().to_be_bytes()[1..] {
        return Err(format!(
            "the UAR register holds {rung:x?}, not the NOP's doorbell"
        ));
    }
    // The kernels' next WQE is index 0, and the NIC runs it.
    let again = gpu_write(&qp, region.remote(24), 0x55, true, true)?;
    if again != 1 << 16 | 1 {
        return Err(format!("the first WQE after recovery ends at {again:#x}"));
    }
    let start = Instant::now();
    while buffer.to_vec()[24..32] != [0x55; 8] {
        if start.elapsed() > Duration::from_secs(10) {
            return Err("the WRITE after recovery did not land".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// An inline WRITE of eight `byte`s at `at` of the loopback's own region.
fn loopback_write(l: &mut Loopback, at: u64, byte: u8, signaled: bool) -> Result<Ticket, String> {
    let payload = [byte; 8];
    let wqe = RdmaWrite::new(l.region.remote(at)).inline(&payload);
    let wqe = if signaled { wqe.signaled() } else { wqe };
    l.qp.post(&wqe.build().map_err(fail)?, &[]).map_err(fail)
}

/// The first WQE index of a one-WQEBB request.
fn index_of(t: Ticket) -> u16 {
    (t.end() - 1) as u16
}

/// Waits for `last` expecting the error CQE of the WQE at `index` with `syndrome` and
/// `vendor` (the poll inside the wait reports it, once).
fn expect_error_at(
    l: &mut Loopback,
    last: Ticket,
    index: u16,
    syndrome: Syndrome,
    vendor: u8,
) -> Outcome {
    let e = expect_err(l.qp.wait(last, Duration::from_secs(10)), "the faulted WQE")?;
    let WaitError::Poll(PollError::Completion(c)) = e else {
        return Err(format!("expected an error completion, got {e:?}"));
    };
    if (c.wqe_index, c.syndrome, c.vendor_syndrome) != (index, Some(syndrome), vendor) {
        return Err(format!(
            "expected WQE {index}, {syndrome:?}, vendor {vendor:#04x}: {c:?}"
        ));
    }
    Ok(())
}

/// Recovers the loopback queue pair (its own peer): the list is exactly `flushed`, each
/// flushed (WR_FLUSH_ERR, vendor syndrome 0) with its ticket and WQE index; every ticket
/// up to the last is resolved; the ring starts over at WQE index 0; then every operation
/// works, memory checked byte for byte (the configured fault, spent, does not strike the
/// new WQE of its number).
fn recover_then_every_operation(l: &mut Loopback, flushed: &[Ticket]) -> Outcome {
    let next = l.qp.endpoint().ok_or("the queue pair has no endpoint")?;
    let recovery =
        l.qp.recover(&next, Duration::from_secs(10))
            .map_err(|e| format!("recovery: {e}"))?;
    let listed: Vec<(Ticket, u16, Option<Syndrome>, u8, bool)> = recovery
        .unfinished
        .iter()
        .map(|u| {
            let e = u.outcome.completion();
            let flushed = matches!(u.outcome, UnfinishedOutcome::Flushed(_));
            (
                u.ticket,
                u.wqe_index,
                e.syndrome,
                e.vendor_syndrome,
                flushed,
            )
        })
        .collect();
    let expected: Vec<_> = flushed
        .iter()
        .map(|t| {
            (
                *t,
                index_of(*t),
                Some(Syndrome::WorkRequestFlushed),
                0,
                true,
            )
        })
        .collect();
    if listed != expected {
        return Err(format!("recovery listed {listed:?}, expected {expected:?}"));
    }
    if let Some(&last) = flushed.last() {
        if !l.qp.sq().is_complete(last) {
            return Err(format!("{last:?} unresolved after recovery"));
        }
    }
    every_operation_on_loopback(l)
}

/// Inline and gathered WRITE, READ, fetch-add, compare-swap, masked fetch-add and masked
/// compare-swap through the loopback queue pair: the region's first 128 bytes are the
/// remote side, the rest the local side.
fn every_operation_on_loopback(l: &mut Loopback) -> Outcome {
    const LOCAL: usize = 128;
    let b = l.buffer.clone();
    let put = |at: usize, bytes: &[u8]| b.write(at, bytes).map_err(fail);
    put(0, &[0; 256])?;
    put(16, b"sixteen bytes!!!")?;
    put(64, &100u64.to_be_bytes())?;
    put(72, &7u64.to_be_bytes())?;
    put(80, &0xffff_0001_7fff_0000u64.to_be_bytes())?;
    put(96, &0x1234_5678u32.to_be_bytes())?;
    put(LOCAL + 40, &0x0102_0304_0506_0708u64.to_be_bytes())?;
    let r = &l.region;
    let regs = [r.registered()];
    let local = |at: usize| r.local((LOCAL + at) as u64);
    let first =
        l.qp.post(
            &RdmaWrite::new(r.remote(0))
                .inline(&[0xa5; 8])
                .signaled()
                .build()
                .map_err(fail)?,
            &[],
        )
        .map_err(fail)?;
    if index_of(first) != 0 {
        return Err(format!(
            "the first WQE after recovery is at index {}",
            index_of(first)
        ));
    }
    let gathered = RdmaWrite::new(r.remote(8))
        .sge(r.sge((LOCAL + 40) as u64, 8).map_err(fail)?)
        .signaled()
        .build()
        .map_err(fail)?;
    l.qp.post(&gathered, &regs).map_err(fail)?;
    let read = RdmaRead::new(r.remote(16))
        .sge(r.sge(LOCAL as u64, 16).map_err(fail)?)
        .signaled()
        .build()
        .map_err(fail)?;
    l.qp.post(&read, &regs).map_err(fail)?;
    let atomics = [
        Atomic::fetch_add(r.remote(64), local(64), 5),
        Atomic::compare_swap(r.remote(72), local(72), 7, 9),
        Atomic::masked_fetch_add_64(
            r.remote(80),
            local(80),
            0x0001_0001_0001_0001,
            0x8000_8000_8000_8000,
        ),
        Atomic::masked_compare_swap_32(
            r.remote(96),
            local(96),
            0xabcd_0000,
            0x0000_5678,
            0xffff_0000,
            0x0000_ffff,
        ),
    ];
    let mut last = first;
    for atomic in atomics {
        let wqe = atomic.signaled().build().map_err(fail)?;
        last = l.qp.post(&wqe, &regs).map_err(fail)?;
    }
    l.qp.wait(last, Duration::from_secs(10))
        .map_err(|e| format!("the operations after recovery: {e}"))?;
    let bytes = b.to_vec();
    let u64_at = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    let checks: [(&str, Vec<u8>, Vec<u8>); 7] = [
        ("inline WRITE", bytes[0..8].to_vec(), vec![0xa5; 8]),
        (
            "gathered WRITE",
            bytes[8..16].to_vec(),
            0x0102_0304_0506_0708u64.to_be_bytes().to_vec(),
        ),
        (
            "READ",
            bytes[LOCAL..LOCAL + 16].to_vec(),
            b"sixteen bytes!!!".to_vec(),
        ),
        (
            "fetch-add (old, new)",
            [u64_at(LOCAL + 64), u64_at(64)]
                .map(u64::to_be_bytes)
                .concat(),
            [100u64, 105].map(u64::to_be_bytes).concat(),
        ),
        (
            "compare-swap (old, new)",
            [u64_at(LOCAL + 72), u64_at(72)]
                .map(u64::to_be_bytes)
                .concat(),
            [7u64, 9].map(u64::to_be_bytes).concat(),
        ),
        (
            "masked fetch-add (old, new)",
            [u64_at(LOCAL + 80), u64_at(80)]
                .map(u64::to_be_bytes)
                .concat(),
            [0xffff_0001_7fff_0000u64, 0x0000_0002_8000_0001]
                .map(u64::to_be_bytes)
                .concat(),
        ),
        (
            "masked compare-swap (old, new)",
            [&bytes[LOCAL + 96..LOCAL + 100], &bytes[96..100]].concat(),
            [0x1234_5678u32, 0xabcd_5678].map(u32::to_be_bytes).concat(),
        ),
    ];
    for (what, found, expected) in checks {
        if found != expected {
            return Err(format!("{what}: {found:02x?}, expected {expected:02x?}"));
        }
    }
    Ok(())
}

/// `fault.first_wqe = 0x68`: the first WQE fails (LOCAL_QP_OP, vendor syndrome 0x68),
/// the two after it are flushed; recovery returns those two, and the queue pair then runs
/// every operation.
fn first_wqe_failure_then_recovery() -> Outcome {
    let mut l = loopback_with(256, ALL)?;
    let failed = loopback_write(&mut l, 0, 1, true)?;
    let f1 = loopback_write(&mut l, 8, 2, false)?;
    let f2 = loopback_write(&mut l, 16, 3, true)?;
    expect_error_at(
        &mut l,
        f2,
        index_of(failed),
        Syndrome::LocalQpOperation,
        0x68,
    )?;
    recover_then_every_operation(&mut l, &[f1, f2])
}

/// `fault.transport_retry_exceeded_at = 2`: two WRITEs land, the third fails with
/// transport retry exceeded (vendor syndrome 0x81), the fourth is flushed; recovery
/// returns the fourth, and the queue pair then runs every operation (seven WQEs: the
/// new WQE of number 2 among them).
fn retry_exceeded_then_recovery() -> Outcome {
    let mut l = loopback_with(256, ALL)?;
    let mut tickets = Vec::new();
    for i in 0..4u8 {
        tickets.push(loopback_write(&mut l, 8 * u64::from(i), i + 1, true)?);
    }
    expect_error_at(
        &mut l,
        tickets[3],
        index_of(tickets[2]),
        Syndrome::TransportRetryExceeded,
        0x81,
    )?;
    let landed = l.buffer.to_vec()[..32].to_vec();
    let expected = [[1u8; 8], [2; 8], [0; 8], [0; 8]].concat();
    if landed != expected {
        return Err(format!("memory {landed:02x?}, expected {expected:02x?}"));
    }
    recover_then_every_operation(&mut l, &tickets[3..])
}

/// The queue-pair life whose command log the parent decodes: open, an RC queue pair
/// connected to itself, one WRITE, teardown.
fn queue_pair_life() -> Outcome {
    let mut l = loopback()?;
    let wqe = RdmaWrite::new(l.region.remote(0))
        .inline(b"logged!!")
        .signaled()
        .build()
        .map_err(fail)?;
    let ticket = l.qp.post(&wqe, &[]).map_err(fail)?;
    l.qp.wait(ticket, Duration::from_secs(10)).map_err(fail)?;
    drop(l);
    Ok(())
}

fn check_command_log(path: &Path) -> Outcome {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let records = log::parse(&text).map_err(fail)?;
    let opcodes: Vec<u16> = records.iter().map(|r| r.opcode()).collect();
    // The UAR the queue pair rings: allocated first (as ALLOC_UAR, the type asked for as an
    // attribute), released last.
    let expected = vec![
        opcode::QUERY_HCA_CAP,
        opcode::QUERY_HCA_CAP,
        opcode::ALLOC_UAR,
        opcode::CREATE_CQ,
        opcode::CREATE_QP,
        opcode::RST2INIT_QP,
        opcode::INIT2RTR_QP,
        opcode::RTR2RTS_QP,
        opcode::DESTROY_QP,
        opcode::DESTROY_CQ,
        opcode::DEALLOC_UAR,
    ];
    if opcodes != expected {
        return Err(format!("opcodes {opcodes:x?}, expected {expected:x?}"));
    }
    let uar = &records[2];
    if (uar.call.as_str(), uar.attribute("uar_type"))
        != ("mlx5dv_devx_alloc_uar", Some("nc_dedicated"))
    {
        return Err(format!("ALLOC_UAR record {uar:?}"));
    }
    let mut qpn = None;
    for record in &records {
        if record.device != "mlx5_0" || record.errno != 0 {
            return Err(format!(
                "record {}: {} errno {}",
                record.seq, record.device, record.errno
            ));
        }
        let decoded = record.decode();
        let input = decoded
            .input
            .map_err(|e| format!("record {} input: {e}", record.seq))?;
        let output = decoded
            .output
            .map_err(|e| format!("record {} output: {e}", record.seq))?;
        // 64 CQ entries and 64 WQEBBs (log2 6); connected to itself; destroyed.
        let wrong = match (input, output) {
            (DecodedCommand::CreateCq(c), DecodedOutput::CreateCq(_)) => {
                (c.cqc.log_cq_size != 6 || !c.cq_umem_valid).then(|| format!("CREATE_CQ {c:?}"))
            }
            (DecodedCommand::CreateQp(c), DecodedOutput::CreateQp(o)) => {
                qpn = Some(o.qpn);
                (c.qpc.log_sq_size != 6 || c.qpc.service_type != ServiceType::Rc)
                    .then(|| format!("CREATE_QP {c:?}"))
            }
            (DecodedCommand::Init2RtrQp(c), _) => (Some(c.remote_qpn) != qpn || Some(c.qpn) != qpn)
                .then(|| format!("INIT2RTR_QP {c:?} for QP {qpn:?}")),
            (DecodedCommand::DestroyQp(c), _) => {
                (Some(c.qpn) != qpn).then(|| format!("DESTROY_QP {c:?} for QP {qpn:?}"))
            }
            _ => None,
        };
        if let Some(wrong) = wrong {
            return Err(wrong);
        }
    }
    Ok(())
}

/// On each of two devices (the second without masked atomics): a DC target, a DC
/// initiator, an RC queue pair without receives and one receiving through the SRQ, each
/// connected to itself; one WRITE_WITH_IMM received through the SRQ; teardown.
fn queues_of_every_kind() -> Outcome {
    use ibgda::nic::Receives;
    for name in ["mlx5_0", "mlx5_1"] {
        let device = open(name).map_err(fail)?;
        let pd = device.alloc_pd().map_err(fail)?;
        let buffer = Arc::new(DmaBuffer::zeroed(64, 4096).map_err(fail)?);
        let region = pd
            .register(buffer.clone(), 0, 64, MemoryAccess::all())
            .map_err(fail)?;
        let _dct = pd.create_dct(0x77, 16).map_err(fail)?;
        let _dci = pd
            .create_dci::<ibgda::wqe::Full>(spec())
            .map_err(fail)?
            .activate()
            .map_err(fail)?;
        let send_only = pd.create_rc(spec()).map_err(fail)?;
        let e = send_only.endpoint();
        let _send_only = send_only.connect(&e).map_err(fail)?;
        let receiving = pd
            .create_rc(spec().with_receives(Receives::SharedQueue))
            .map_err(fail)?;
        let e = receiving.endpoint();
        let mut receiving = receiving.connect(&e).map_err(fail)?;
        pd.shared_receive_queue()
            .and_then(|srq| srq.post_receives(1))
            .map_err(fail)?;
        let wqe = RdmaWrite::new(region.remote(0))
            .inline(b"imm")
            .immediate(7)
            .signaled()
            .build()
            .map_err(fail)?;
        receiving.post(&wqe, &[]).map_err(fail)?;
        let start = Instant::now();
        let mut seen = Vec::new();
        while seen.len() < 2 && start.elapsed() < Duration::from_secs(10) {
            if let Some(polled) = receiving.poll().map_err(fail)? {
                seen.push(polled);
            }
        }
        if !seen
            .iter()
            .any(|p| matches!(p, ibgda::queue::Polled::Received(r) if r.imm == 7))
        {
            return Err(format!("{name}: no receive completion in {seen:?}"));
        }
    }
    Ok(())
}

/// The log of [`queues_of_every_kind`]: every DC target names a real SRQ, every DC
/// initiator the same one (`rq_type` 1), RC queue pairs a zero-size RQ unless they
/// receive; RST2INIT and CREATE_DCT ask for atomic mode 3 where the device has masked
/// 8-byte atomics and 1 where it has not; ring CQs ignore overrun only for send-only queue
/// pairs whose CQ holds the send ring.
fn check_receive_atomic_overrun(path: &Path) -> Outcome {
    use ibgda::nic::prm::{AtomicMode, ReceiveQueue};
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let records = log::parse(&text).map_err(fail)?;
    for (device, mode) in [
        ("mlx5_0", AtomicMode::UpTo8Bytes),
        ("mlx5_1", AtomicMode::IbCompatible),
    ] {
        let mut srqn = None;
        let mut receives = Vec::new();
        let mut oi = Vec::new();
        let mut rst2init_modes = Vec::new();
        for record in records.iter().filter(|r| r.device == device) {
            if record.errno != 0 {
                return Err(format!(
                    "record {} failed: errno {}",
                    record.seq, record.errno
                ));
            }
            match record.decode().input.map_err(fail)? {
                DecodedCommand::CreateCq(c) => oi.push(c.cqc.overrun_ignore),
                DecodedCommand::CreateDct(c) => {
                    if c.dctc.srqn == 0 {
                        return Err(format!("{device}: CREATE_DCT with srqn 0"));
                    }
                    srqn = Some(c.dctc.srqn);
                    if c.dctc.atomic_mode != mode || !c.dctc.access.atomic {
                        return Err(format!("{device}: CREATE_DCT {:?}", c.dctc));
                    }
                }
                DecodedCommand::CreateQp(c) => receives.push((c.qpc.service_type, c.qpc.receive)),
                DecodedCommand::Rst2InitQp(c) => rst2init_modes.push(c.atomic_mode),
                _ => {}
            }
        }
        let srqn = srqn.ok_or(format!("{device}: no CREATE_DCT"))?;
        let shared = ReceiveQueue::Srq { srqn };
        let expected = vec![
            (ServiceType::Dci, shared),
            (ServiceType::Rc, ReceiveQueue::ZeroSize),
            (ServiceType::Rc, shared),
        ];
        if receives != expected {
            return Err(format!(
                "{device}: receive sides {receives:?}, expected {expected:?}"
            ));
        }
        // The DCT's CQ (receives only), the DCI's, the send-only RC's, the receiving RC's.
        if oi != [false, true, true, false] {
            return Err(format!("{device}: CQ overrun ignore {oi:?}"));
        }
        // The DCI enables nothing; the RC queue pairs ask for the device's mode.
        if rst2init_modes != [AtomicMode::NotSet, mode, mode] {
            return Err(format!(
                "{device}: RST2INIT atomic modes {rst2init_modes:?}"
            ));
        }
    }
    Ok(())
}

/// What the emulated devices still hold (`ibgda_emu_outstanding`), as `name=count` pairs.
fn outstanding() -> Result<Vec<(String, usize)>, String> {
    type Outstanding = unsafe extern "C" fn(*mut libc::c_char, usize) -> libc::c_int;
    // SAFETY: the emulated libibverbs.so.1 this process loaded (no initialiser runs again).
    let lib = unsafe { libloading::Library::new("libibverbs.so.1") }.map_err(fail)?;
    // SAFETY: the emulator's entry point, of this type.
    let f = unsafe { lib.get::<Outstanding>(b"ibgda_emu_outstanding\0") }.map_err(fail)?;
    let mut text = [0 as libc::c_char; 256];
    // SAFETY: a buffer of the length given; the call NUL-terminates it.
    let total = unsafe { f(text.as_mut_ptr(), text.len()) };
    if total < 0 {
        return Err("the emulator is unusable".into());
    }
    // SAFETY: NUL-terminated by the call.
    let text = unsafe { std::ffi::CStr::from_ptr(text.as_ptr()) }.to_string_lossy();
    text.split_whitespace()
        .map(|pair| {
            let (name, n) = pair.split_once('=').ok_or(format!("`{pair}`"))?;
            Ok((name.to_owned(), n.parse().map_err(fail)?))
        })
        .collect()
}

fn count(of: &[(String, usize)], name: &str) -> usize {
    of.iter().find(|(n, _)| n == name).map_or(0, |(_, c)| *c)
}

/// On a device whose DESTROY_QP fails, and on one whose DESTROY_CQ fails: an RC queue pair
/// connected to itself, used, dropped. Its UMEMs, UAR and PD must stay allocated (the NIC
/// may still use them), and the device counts the failure.
fn failed_destroys() -> Outcome {
    for (name, failing, objects_left) in [("mlx5_0", "DESTROY_QP", 2), ("mlx5_1", "DESTROY_CQ", 1)]
    {
        let before = outstanding()?;
        let device = open(name).map_err(fail)?;
        {
            let pd = device.alloc_pd().map_err(fail)?;
            let buffer = Arc::new(DmaBuffer::zeroed(64, 4096).map_err(fail)?);
            let region = pd
                .register(buffer, 0, 64, MemoryAccess::all())
                .map_err(fail)?;
            let pending = pd.create_rc(spec()).map_err(fail)?;
            let endpoint = pending.endpoint();
            let mut qp = pending.connect(&endpoint).map_err(fail)?;
            let wqe = RdmaWrite::new(region.remote(0))
                .inline(b"before")
                .signaled()
                .build()
                .map_err(fail)?;
            let ticket = qp.post(&wqe, &[]).map_err(fail)?;
            qp.wait(ticket, Duration::from_secs(10)).map_err(fail)?;
        }
        let (failures, last) = device.teardown_failures();
        if failures != 1
            || !last
                .as_ref()
                .is_some_and(|e| e.to_string().contains(failing))
        {
            return Err(format!(
                "{name}: teardown failures {failures}, last {last:?}"
            ));
        }
        let after = outstanding()?;
        let grew = |what: &str| count(&after, what) - count(&before, what);
        // The queue's four UMEMs, its UAR and its PD stay; so does the object whose
        // DESTROY failed (and, when DESTROY_QP failed, the CQ it completes to).
        let expected = [
            ("umems", 4),
            ("uars", 1),
            ("pds", 1),
            ("devx", objects_left),
        ];
        for (what, n) in expected {
            if grew(what) != n {
                return Err(format!(
                    "{name}: {what} left {}, expected {n}: {after:?}",
                    grew(what)
                ));
            }
        }
        if grew("mrs") != 0 {
            return Err(format!("{name}: the data region should be gone: {after:?}"));
        }
    }
    Ok(())
}

/// Nothing was destroyed after the failed DESTROY: no DESTROY_CQ after a failed DESTROY_QP,
/// and the UAR the queue pair rang is never released (no DEALLOC_UAR).
fn check_failed_destroys(path: &Path) -> Outcome {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let records = log::parse(&text).map_err(fail)?;
    for (device, expected) in [
        ("mlx5_0", vec![opcode::DESTROY_QP]),
        ("mlx5_1", vec![opcode::DESTROY_QP, opcode::DESTROY_CQ]),
    ] {
        let destroys: Vec<u16> = records
            .iter()
            .filter(|r| r.device == device)
            .map(|r| r.opcode())
            .filter(|&o| {
                o == opcode::DESTROY_QP || o == opcode::DESTROY_CQ || o == opcode::DEALLOC_UAR
            })
            .collect();
        if destroys != expected {
            return Err(format!(
                "{device}: DESTROY commands {destroys:x?}, expected {expected:x?}"
            ));
        }
    }
    Ok(())
}

/// The DC target NVSHMEM's IBGDA transport makes with plain verbs (its
/// `ibgda_create_dct_shared_objects` and `ibgda_create_dct`): a parent domain, a host SRQ and
/// host CQs, an address handle read back through `mlx5dv_init_obj`, `mlx5dv_create_qp` for
/// the DCT and `ibv_modify_qp` to INIT and RTR; then a DCI of ibgda's control plane writes
/// into memory registered in that PD through it, and everything is torn down. The calls go
/// through rdma-mummy-sys's bindings (rdma-core 65's headers) and the static-inline
/// `ibv_alloc_parent_domain`'s own lookup of the operation in the context.
fn verbs_dc_target() -> Outcome {
    use rdma_mummy_sys as sys;
    use zerocopy::FromBytes;

    type InitObj = unsafe extern "C" fn(*mut sys::mlx5dv_obj, u64) -> libc::c_int;
    // SAFETY: the emulated library (loaded by this process); the type is
    // `mlx5dv_init_obj`'s prototype.
    let lib = unsafe { libloading::Library::new("libmlx5.so.1") }.map_err(fail)?;
    // SAFETY: as above.
    let init_obj: InitObj = *unsafe { lib.get::<InitObj>(b"mlx5dv_init_obj\0") }.map_err(fail)?;
    let check = |what: &str, ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(format!("{what} failed"))
        }
    };

    // SAFETY (every call below): rdma-core's documented contracts, with objects made here
    // and attribute blocks initialised as the man pages ask; the buffers outlive their
    // registrations.
    unsafe {
        let mut n = 0;
        let list = sys::ibv_get_device_list(&mut n);
        check("ibv_get_device_list", !list.is_null() && n == 1)?;
        let ctx = sys::ibv_open_device(*list);
        sys::ibv_free_device_list(list);
        check("ibv_open_device", !ctx.is_null())?;
        let pd = sys::ibv_alloc_pd(ctx);
        check("ibv_alloc_pd", !pd.is_null())?;

        // ibv_alloc_parent_domain is static inline: it finds the operation in the
        // verbs_context around the context, if the context is large enough to hold it.
        let vctx = ctx
            .cast::<u8>()
            .sub(core::mem::offset_of!(sys::verbs_context, context))
            .cast::<sys::verbs_context>();
        let reach = core::mem::size_of::<sys::verbs_context>()
            - core::mem::offset_of!(sys::verbs_context, alloc_parent_domain);
        check("the context's size", (*vctx).sz >= reach)?;
        let alloc_parent_domain = (*vctx)
            .alloc_parent_domain
            .ok_or("no alloc_parent_domain")?;
        let mut pd_attr: sys::ibv_parent_domain_init_attr = core::mem::zeroed();
        pd_attr.pd = pd;
        let parent = alloc_parent_domain(ctx, &mut pd_attr);
        check("ibv_alloc_parent_domain", !parent.is_null())?;

        let mut srq_attr: sys::ibv_srq_init_attr = core::mem::zeroed();
        srq_attr.attr.max_wr = 100;
        srq_attr.attr.max_sge = 1;
        let srq = sys::ibv_create_srq(parent, &mut srq_attr);
        check(
            "ibv_create_srq",
            !srq.is_null() && srq_attr.attr.max_wr >= 100,
        )?;
        let mut dv_srq: sys::mlx5dv_srq = core::mem::zeroed();
        dv_srq.comp_mask = 1; // MLX5DV_SRQ_MASK_SRQN
        let mut obj: sys::mlx5dv_obj = core::mem::zeroed();
        obj.srq.in_ = srq;
        obj.srq.out = &mut dv_srq;
        check("mlx5dv_init_obj(SRQ)", init_obj(&mut obj, 1 << 2) == 0)?;
        check("the SRQ number", dv_srq.srqn != 0 && dv_srq.comp_mask == 1)?;

        let send_cq = sys::ibv_create_cq(ctx, 100, core::ptr::null_mut(), core::ptr::null_mut(), 0);
        let recv_cq = sys::ibv_create_cq(ctx, 100, core::ptr::null_mut(), core::ptr::null_mut(), 0);
        check("ibv_create_cq", !send_cq.is_null() && !recv_cq.is_null())?;
        check("the CQ size", (*recv_cq).cqe == 127)?;
        let mut dv_cq: sys::mlx5dv_cq = core::mem::zeroed();
        let mut obj: sys::mlx5dv_obj = core::mem::zeroed();
        obj.cq.in_ = recv_cq;
        obj.cq.out = &mut dv_cq;
        check("mlx5dv_init_obj(CQ)", init_obj(&mut obj, 1 << 1) == 0)?;
        check(
            "the CQ's ring",
            dv_cq.cqe_cnt == 128 && dv_cq.cqe_size == 64 && !dv_cq.buf.is_null(),
        )?;

        let mut port: sys::ibv_port_attr = core::mem::zeroed();
        check(
            "ibv_query_port",
            sys::ibv_query_port(ctx, 1, &mut port as *mut _ as *mut _) == 0,
        )?;
        let mut ah_attr: sys::ibv_ah_attr = core::mem::zeroed();
        ah_attr.dlid = port.lid;
        ah_attr.port_num = 1;
        let ah = sys::ibv_create_ah(pd, &mut ah_attr);
        check("ibv_create_ah", !ah.is_null())?;
        let mut dv_ah: sys::mlx5dv_ah = core::mem::zeroed();
        let mut obj: sys::mlx5dv_obj = core::mem::zeroed();
        obj.ah.in_ = ah;
        obj.ah.out = &mut dv_ah;
        check(
            "mlx5dv_init_obj(AH)",
            init_obj(&mut obj, 1 << 5) == 0 && !dv_ah.av.is_null(),
        )?;
        let av = ibgda::wqe::segment::AddressVectorSegment::read_from_bytes(
            core::slice::from_raw_parts(dv_ah.av.cast::<u8>(), 48),
        )
        .map_err(|_| "the AH's address vector")?;

        const KEY: u64 = 0x0102_0304_0506_0708;
        let mut qp_attr: sys::ibv_qp_init_attr_ex = core::mem::zeroed();
        qp_attr.pd = parent;
        qp_attr.comp_mask = 1; // IBV_QP_INIT_ATTR_PD
        qp_attr.qp_type = 0xff; // IBV_QPT_DRIVER
        qp_attr.srq = srq;
        qp_attr.send_cq = send_cq;
        qp_attr.recv_cq = recv_cq;
        let mut dv_attr: sys::mlx5dv_qp_init_attr = core::mem::zeroed();
        dv_attr.comp_mask = 1 << 1; // MLX5DV_QP_INIT_ATTR_MASK_DC
        dv_attr.dc_init_attr.dc_type = sys::MLX5DV_DCTYPE_DCT;
        *dv_attr
            .dc_init_attr
            .__bindgen_anon_1
            .dct_access_key
            .as_mut() = KEY;
        let dct = sys::mlx5dv_create_qp(ctx, &mut qp_attr, &mut dv_attr);
        check("mlx5dv_create_qp(DCT)", !dct.is_null())?;
        let mut attr: sys::ibv_qp_attr = core::mem::zeroed();
        attr.qp_state = sys::ibv_qp_state::IBV_QPS_INIT;
        attr.port_num = 1;
        attr.qp_access_flags = 0xf; // local write, remote write, read, atomic
        let mask = 1 | (1 << 4) | (1 << 5) | (1 << 3);
        check(
            "RST2INIT of the DCT",
            sys::ibv_modify_qp(dct, &mut attr, mask) == 0,
        )?;
        let mut attr: sys::ibv_qp_attr = core::mem::zeroed();
        attr.qp_state = sys::ibv_qp_state::IBV_QPS_RTR;
        attr.path_mtu = port.active_mtu;
        attr.min_rnr_timer = 12;
        attr.ah_attr = ah_attr;
        let mask = 1 | (1 << 7) | (1 << 8) | (1 << 15);
        check(
            "INIT2RTR of the DCT",
            sys::ibv_modify_qp(dct, &mut attr, mask) == 0,
        )?;
        let dct_number = (*dct).qp_num;
        check("the DCT number", dct_number != 0)?;
        // A CQ a DCT completes to cannot go.
        check(
            "destroying a CQ in use is refused",
            sys::ibv_destroy_cq(recv_cq) == libc::EBUSY,
        )?;

        let target = DmaBuffer::zeroed(64, 4096).map_err(fail)?;
        let mr = sys::ibv_reg_mr(pd, target.as_ptr().cast(), 64, 0xf);
        check("ibv_reg_mr", !mr.is_null())?;

        let device = open("mlx5_0").map_err(fail)?;
        let endpoint = ibgda::nic::DcEndpoint {
            dct: dct_number,
            access_key: KEY,
            lid: port.lid,
            mtu: device.port().mtu,
            link_layer: device.port().link_layer,
            gid: ibgda::nic::Gid::default(),
            address_vector: av,
        };
        let mut dci = device
            .alloc_pd()
            .map_err(fail)?
            .create_dci::<ibgda::wqe::Full>(spec())
            .map_err(fail)?
            .activate()
            .map_err(fail)?;
        let remote = ibgda::wqe::RemoteAddress::new(target.addr(), ibgda::wqe::RKey((*mr).rkey));
        let wqe = RdmaWrite::new(endpoint.full_target().map_err(fail)?.at(remote))
            .inline(b"via a verbs DCT")
            .signaled()
            .build()
            .map_err(fail)?;
        let ticket = dci.post(&wqe, &[]).map_err(fail)?;
        dci.wait(ticket, Duration::from_secs(10)).map_err(fail)?;
        let written = target.to_vec();
        if &written[..15] != b"via a verbs DCT" {
            return Err(format!("the target holds {:?}", &written[..15]));
        }
        drop(dci);
        drop(device);

        check("ibv_dereg_mr", sys::ibv_dereg_mr(mr) == 0)?;
        check("ibv_destroy_qp", sys::ibv_destroy_qp(dct) == 0)?;
        check("ibv_destroy_ah", sys::ibv_destroy_ah(ah) == 0)?;
        check(
            "ibv_destroy_cq",
            sys::ibv_destroy_cq(recv_cq) == 0 && sys::ibv_destroy_cq(send_cq) == 0,
        )?;
        check("ibv_destroy_srq", sys::ibv_destroy_srq(srq) == 0)?;
        check(
            "dealloc of the parent domain",
            sys::ibv_dealloc_pd(parent) == 0,
        )?;
        check("ibv_dealloc_pd", sys::ibv_dealloc_pd(pd) == 0)?;
        check("ibv_close_device", sys::ibv_close_device(ctx) == 0)?;
    }
    Ok(())
}

/// The configuration `ibv_devinfo` lists; the expected output below is derived from it by
/// hand (the emulator's computed limits: `max_qp_wr` = 2^cap.log_max_qp_size, `max_cqe` =
/// 2^cap.log_max_cq_size - 1).
const DEVINFO_CONFIG: &str = "[device mlx5_4]\n\
    lid = 0x2a\n\
    mtu = 2048\n\
    fw_ver = 28.42.1000\n\
    node_guid = 0x1122334455667788\n\
    sys_image_guid = 0x1122334455667700\n\
    board_id = MT_0000000999\n\
    max_qp = 4096\n\
    cap.log_max_qp_size = 13\n\
    cap.log_max_cq_size = 20\n\
    gids = fe80::1122:3344:5566:7788\n\
    [device mlx5_5]\n\
    link_layer = ethernet\n\
    port_state = down\n\
    cap.atomic = 0\n\
    gids = fe80::a, ::ffff:192.168.1.7\n";

/// The `key: value` lines of one `hca_id` block of `ibv_devinfo -v`, and its GID lines.
struct DevinfoBlock {
    fields: Vec<(String, String)>,
    gids: Vec<String>,
}

impl DevinfoBlock {
    fn field(&self, key: &str) -> Result<&str, String> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| format!("ibv_devinfo printed no `{key}`"))
    }
}

fn parse_devinfo(text: &str) -> Vec<DevinfoBlock> {
    let mut blocks: Vec<DevinfoBlock> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("hca_id:") {
            blocks.push(DevinfoBlock {
                fields: Vec::new(),
                gids: Vec::new(),
            });
        }
        let Some(block) = blocks.last_mut() else {
            continue;
        };
        if let Some(rest) = trimmed.strip_prefix("GID[") {
            if let Some((_, gid)) = rest.split_once(':') {
                block.gids.push(gid.trim().to_owned());
            }
        } else if let Some((key, value)) = trimmed.split_once(':') {
            block
                .fields
                .push((key.trim().to_owned(), value.trim().to_owned()));
        }
    }
    blocks
}

fn ibv_devinfo(dir: &Path) -> Result<Option<String>, String> {
    let Some(tool) = ["/usr/bin/ibv_devinfo", "/usr/local/bin/ibv_devinfo"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.is_file())
    else {
        return Ok(Some(
            "rdma-core's ibv_devinfo is not installed (Debian: ibverbs-utils; scripts/mlx5-deps.sh installs it)"
                .into(),
        ));
    };
    let child = Command::new(tool)
        .arg("-v")
        .env("LD_LIBRARY_PATH", library_path(dir))
        .env("IBGDA_EMU_CONFIG_TEXT", DEVINFO_CONFIG)
        .env_remove("IBGDA_EMU_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(fail)?;
    let output = finish(child)?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "ibv_devinfo -v: {}\n{text}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let blocks = parse_devinfo(&text);
    if blocks.len() != 2 {
        return Err(format!(
            "{} devices listed, expected 2:\n{text}",
            blocks.len()
        ));
    }
    let expect = |block: &DevinfoBlock, key: &str, value: &str| -> Outcome {
        let found = block.field(key)?;
        if found == value {
            Ok(())
        } else {
            Err(format!(
                "`{key}`: ibv_devinfo printed {found:?}, expected {value:?}"
            ))
        }
    };
    let (ib, roce) = (&blocks[0], &blocks[1]);
    for (key, value) in [
        ("hca_id", "mlx5_4"),
        ("transport", "InfiniBand (0)"),
        ("fw_ver", "28.42.1000"),
        ("node_guid", "1122:3344:5566:7788"),
        ("sys_image_guid", "1122:3344:5566:7700"),
        ("vendor_id", "0x02c9"),
        ("vendor_part_id", "4129"),
        ("hw_ver", "0x0"),
        ("board_id", "MT_0000000999"),
        ("phys_port_cnt", "1"),
        ("max_qp", "4096"),
        ("max_qp_wr", "8192"),
        ("max_cqe", "1048575"),
        ("atomic_cap", "ATOMIC_HCA (1)"),
        ("num_comp_vectors", "1"),
        ("state", "PORT_ACTIVE (4)"),
        ("max_mtu", "2048 (4)"),
        ("active_mtu", "2048 (4)"),
        ("port_lid", "42"),
        ("link_layer", "InfiniBand"),
        ("gid_tbl_len", "1"),
    ] {
        expect(ib, key, value)?;
    }
    if ib.gids != ["fe80:0000:0000:0000:1122:3344:5566:7788"] {
        return Err(format!("InfiniBand GIDs {:?}", ib.gids));
    }
    for (key, value) in [
        ("hca_id", "mlx5_5"),
        ("atomic_cap", "ATOMIC_NONE (0)"),
        ("state", "PORT_DOWN (1)"),
        ("max_mtu", "4096 (5)"),
        ("port_lid", "0"),
        ("link_layer", "Ethernet"),
        ("gid_tbl_len", "2"),
    ] {
        expect(roce, key, value)?;
    }
    if roce.gids != ["fe80::a, RoCE v2", "::ffff:192.168.1.7, RoCE v2"] {
        return Err(format!("RoCE GIDs {:?}", roce.gids));
    }
    Ok(None)
}

/// `(version node, symbol)` of every entry of a linker version script (comments and
/// `local: *` aside), in file order.
fn version_script(text: &str) -> Vec<(String, String)> {
    let mut clean = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("/*") {
        clean.push_str(&rest[..start]);
        rest = rest[start..]
            .find("*/")
            .map_or("", |end| &rest[start + end + 2..]);
    }
    clean.push_str(rest);
    let mut entries = Vec::new();
    let mut node: Option<String> = None;
    let mut previous = String::new();
    for token in clean
        .replace('{', " { ")
        .replace('}', " } ")
        .replace(';', " ; ")
        .split_whitespace()
    {
        match token {
            "{" => node = Some(previous.clone()),
            "}" => node = None,
            ";" | "global:" | "local:" | "*" => {}
            word => {
                if let Some(node) = &node {
                    entries.push((node.clone(), word.to_owned()));
                }
            }
        }
        previous = token.to_owned();
    }
    entries
}

fn exports() -> Vec<(String, String)> {
    version_script(include_str!("../emu/exports.map"))
}

/// What the clients look up (plain `dlsym` unless a version is given): ibgda's mlx5
/// backend (src/nic/mlx5/dv.rs), rdma-mummy-sys 0.2.6's loader shim, NVSHMEM 3.8.0's IBGDA
/// transport (the strings of `nvshmem_transport_ibgda.so.7`) and `ibv_devinfo`.
const CLIENT_SYMBOLS: &[(&str, Option<&str>)] = &[
    ("mlx5dv_open_device", None),
    ("mlx5dv_is_supported", None),
    ("mlx5dv_init_obj", Some("MLX5_1.2")),
    ("mlx5dv_create_qp", Some("MLX5_1.3")),
    ("mlx5dv_devx_alloc_uar", Some("MLX5_1.7")),
    ("mlx5dv_devx_free_uar", Some("MLX5_1.7")),
    ("mlx5dv_devx_general_cmd", Some("MLX5_1.7")),
    ("mlx5dv_devx_obj_create", Some("MLX5_1.7")),
    ("mlx5dv_devx_obj_destroy", Some("MLX5_1.7")),
    ("mlx5dv_devx_obj_modify", Some("MLX5_1.7")),
    ("mlx5dv_devx_obj_query", None),
    ("mlx5dv_devx_query_eqn", Some("MLX5_1.7")),
    ("mlx5dv_devx_umem_reg", Some("MLX5_1.7")),
    ("mlx5dv_devx_umem_dereg", Some("MLX5_1.7")),
    ("mlx5dv_devx_umem_reg_ex", Some("MLX5_1.19")),
    ("mlx5dv_reg_dmabuf_mr", None),
    ("mlx5dv_get_data_direct_sysfs_path", None),
    ("mlx5dv_query_device", None),
    ("mlx5dv_qp_ex_from_ibv_qp_ex", None),
    ("mlx5dv_set_context_attr", None),
    ("mlx5dv_query_qp_lag_port", None),
    ("mlx5dv_modify_qp_lag_port", None),
    ("mlx5dv_modify_qp_udp_sport", None),
    ("mlx5dv_get_clock_info", None),
    ("ibv_wc_status_str", None),
    ("ibv_qp_to_qp_ex", None),
    ("ibv_get_device_list", Some("IBVERBS_1.1")),
    ("ibv_free_device_list", Some("IBVERBS_1.1")),
    ("ibv_get_device_name", Some("IBVERBS_1.1")),
    ("ibv_get_device_guid", None),
    ("ibv_open_device", Some("IBVERBS_1.1")),
    ("ibv_close_device", Some("IBVERBS_1.1")),
    ("ibv_get_async_event", None),
    ("ibv_ack_async_event", None),
    ("ibv_query_device", Some("IBVERBS_1.1")),
    ("ibv_query_port", Some("IBVERBS_1.1")),
    ("ibv_query_gid", Some("IBVERBS_1.1")),
    ("_ibv_query_gid_ex", None),
    ("_ibv_query_gid_table", None),
    ("ibv_query_pkey", None),
    ("ibv_alloc_pd", None),
    ("ibv_dealloc_pd", None),
    ("ibv_reg_mr", None),
    ("ibv_reg_mr_iova", None),
    ("ibv_reg_mr_iova2", None),
    ("ibv_reg_dmabuf_mr", None),
    ("ibv_dereg_mr", None),
    ("ibv_create_comp_channel", None),
    ("ibv_destroy_comp_channel", None),
    ("ibv_create_cq", None),
    ("ibv_resize_cq", None),
    ("ibv_destroy_cq", None),
    ("ibv_get_cq_event", None),
    ("ibv_ack_cq_events", None),
    ("ibv_create_srq", None),
    ("ibv_destroy_srq", None),
    ("ibv_modify_srq", None),
    ("ibv_query_srq", None),
    ("ibv_create_qp", None),
    ("ibv_modify_qp", None),
    ("ibv_query_qp", None),
    ("ibv_destroy_qp", None),
    ("ibv_create_ah", None),
    ("ibv_init_ah_from_wc", None),
    ("ibv_create_ah_from_wc", None),
    ("ibv_destroy_ah", None),
    ("ibv_attach_mcast", None),
    ("ibv_detach_mcast", None),
    ("ibv_fork_init", None),
    ("ibv_is_fork_initialized", None),
    ("ibv_node_type_str", None),
    ("ibv_port_state_str", None),
    ("ibv_event_type_str", None),
    ("ibv_resolve_eth_l2_from_gid", None),
    ("ibv_set_ece", None),
    ("ibv_query_ece", None),
    ("ibv_get_sysfs_path", None),
    ("ibv_read_sysfs_file", Some("IBVERBS_1.0")),
    ("ibv_query_gid_type", Some("IBVERBS_PRIVATE_34")),
];

fn symbol_versions() -> Outcome {
    let open = |name: &core::ffi::CStr| {
        // SAFETY: loading the emulated library (already loaded by this process).
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        if handle.is_null() {
            Err(format!("dlopen({name:?}) failed"))
        } else {
            Ok(handle)
        }
    };
    let (verbs, mlx5) = (open(c"libibverbs.so.1")?, open(c"libmlx5.so.1")?);
    if verbs != mlx5 {
        return Err(
            "libibverbs.so.1 and libmlx5.so.1 are two objects: their states would differ".into(),
        );
    }
    let lookup = |symbol: &str, version: Option<&str>| -> bool {
        let symbol = std::ffi::CString::new(symbol).expect("no NUL");
        // SAFETY: lookups in a loaded library's symbol table.
        let found = unsafe {
            match version {
                Some(v) => {
                    let v = std::ffi::CString::new(v).expect("no NUL");
                    libc::dlvsym(verbs, symbol.as_ptr(), v.as_ptr())
                }
                None => libc::dlsym(verbs, symbol.as_ptr()),
            }
        };
        !found.is_null()
    };
    let entries = exports();
    if entries.len() < 100 {
        return Err(format!(
            "only {} exports parsed from emu/exports.map",
            entries.len()
        ));
    }
    for (version, symbol) in &entries {
        if !lookup(symbol, Some(version)) {
            return Err(format!("dlvsym({symbol}, {version}) found nothing"));
        }
        if lookup(symbol, Some("IBVERBS_0.9")) {
            return Err(format!("{symbol} found at a version that does not exist"));
        }
    }
    for (symbol, version) in CLIENT_SYMBOLS {
        if !lookup(symbol, *version) {
            return Err(format!(
                "a client looks up {symbol} ({version:?}): not exported"
            ));
        }
    }
    Ok(())
}

/// rdma-core 56.1's source as scripts/rdma-core.sh leaves it.
fn rdma_core_source() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("IBGDA_RDMA_CORE_DIR") {
        return Some(PathBuf::from(dir).join("src"));
    }
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.join("rdma-core/56.1/src"))
}

fn versions_match_rdma_core(_: &Path) -> Result<Option<String>, String> {
    let Some(src) = rdma_core_source().filter(|s| s.join("libibverbs/libibverbs.map.in").is_file())
    else {
        return Ok(Some(
            "rdma-core 56.1's source is not unpacked (bash scripts/rdma-core.sh)".into(),
        ));
    };
    let read =
        |path: &str| std::fs::read_to_string(src.join(path)).map_err(|e| format!("{path}: {e}"));
    let cmake = read("CMakeLists.txt")?;
    let pabi = cmake
        .lines()
        .find_map(|l| l.trim().strip_prefix("set(IBVERBS_PABI_VERSION \""))
        .and_then(|rest| rest.strip_suffix("\")"))
        .ok_or("IBVERBS_PABI_VERSION not found in CMakeLists.txt")?;
    let verbs = read("libibverbs/libibverbs.map.in")?.replace("@IBVERBS_PABI_VERSION@", pabi);
    let mlx5 = read("providers/mlx5/libmlx5.map")?;
    // A symbol listed in several nodes is exported at the last (the default version).
    let mut newest = std::collections::HashMap::new();
    for (node, symbol) in version_script(&verbs)
        .into_iter()
        .chain(version_script(&mlx5))
    {
        newest.insert(symbol, node);
    }
    for (version, symbol) in exports() {
        if version == "IBGDA_EMU_1" {
            continue;
        }
        match newest.get(&symbol) {
            Some(theirs) if *theirs == version => {}
            Some(theirs) => {
                return Err(format!(
                    "{symbol}: exported at {version}, rdma-core 56.1 exports it at {theirs}"
                ))
            }
            None => return Err(format!("{symbol}: not an rdma-core 56.1 entry point")),
        }
    }
    Ok(None)
}

fn child(name: &str) -> ExitCode {
    // The libraries loaded must be the emulator's.
    // SAFETY: loading the libibverbs.so.1 the loader finds runs its initialisers only.
    let emulated = unsafe { libloading::Library::new("libibverbs.so.1") }
        .ok()
        .is_some_and(|lib| {
            // SAFETY: the symbol, if present, is the emulator's identity function.
            unsafe {
                lib.get::<unsafe extern "C" fn() -> *const libc::c_char>(b"ibgda_emu_version\0")
            }
            .is_ok()
        });
    let outcome = if !emulated {
        Err("libibverbs.so.1 is not the emulated ConnectX".to_owned())
    } else {
        match cases().into_iter().find(|c| c.name == name).map(|c| c.run) {
            Some(Run::Child { run, .. }) => run(),
            _ => Err(format!("no child case {name}")),
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            println!("CASE FAILED: {why}");
            ExitCode::FAILURE
        }
    }
}

/// Waits for `child`, killing it after [`CHILD_TIMEOUT`].
fn finish(mut child: std::process::Child) -> Result<std::process::Output, String> {
    let start = Instant::now();
    loop {
        if child.try_wait().map_err(fail)?.is_some() {
            return child.wait_with_output().map_err(fail);
        }
        if start.elapsed() > CHILD_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("timed out after {CHILD_TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_child(name: &str, config: &str, dir: &Path, log_path: Option<&Path>) -> Outcome {
    let exe = std::env::current_exe().map_err(fail)?;
    let mut command = Command::new(exe);
    command
        .env(CHILD_ENV, name)
        .env("LD_LIBRARY_PATH", library_path(dir))
        .env("IBGDA_EMU_CONFIG_TEXT", config)
        .env_remove("IBGDA_EMU_CONFIG")
        .env_remove("IBGDA_NIC")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match log_path {
        Some(path) => command.env("IBGDA_EMU_LOG", path),
        None => command.env_remove("IBGDA_EMU_LOG"),
    };
    // The child writes little: reading its pipes after it exits cannot block it.
    let output = finish(command.spawn().map_err(fail)?)?;
    if !output.status.success() {
        return Err(format!(
            "{}\n--- stdout\n{}--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}

/// Runs `case`: `Ok(None)` with the reason when it cannot run here.
fn run_case(case: &Case, dir: Option<&Path>, scratch: &Path) -> Result<Option<String>, String> {
    let Some(dir) = dir else {
        return Ok(Some(
            "the emulated ConnectX is not built (scripts/build-emulated-nic)".into(),
        ));
    };
    match &case.run {
        Run::Child { config, check, .. } => {
            let log_path = scratch.with_extension(format!("{}.log", case.name));
            let result = run_child(case.name, config, dir, check.map(|_| log_path.as_path()))
                .and_then(|()| check.map_or(Ok(()), |check| check(&log_path)));
            let _ = std::fs::remove_file(&log_path);
            result.map(|()| None)
        }
        Run::Host(run) => run(dir),
    }
}

fn main() -> ExitCode {
    if let Ok(name) = std::env::var(CHILD_ENV) {
        return child(&name);
    }
    let dir = emulator_dir();
    let required = std::env::var("IBGDA_REQUIRE_EMU").is_ok_and(|v| v == "1");
    let scratch = std::env::temp_dir().join(format!("ibgda-emulated-nic-{}", std::process::id()));
    case_report::run_selected(
        "emulated_nic: the mlx5 backend and rdma-core's tools on the emulated ConnectX",
        &cases(),
        |c| c.name,
        required.then_some("IBGDA_REQUIRE_EMU=1"),
        |case| run_case(case, dir.as_deref(), &scratch),
    )
}
