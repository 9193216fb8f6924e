//! Bring-up failures on demand: the mlx5 backend on the emulated ConnectX (`emu/`), each
//! case in a process of its own with the emulator configured to reproduce one failure that
//! users of NVSHMEM, DeepEP and NCCL GIN report, checking the typed error and the message
//! the backend promises; and the command log of a queue pair's life decoded with
//! `nic::prm`.
//!
//! The emulator is found at `<target>/emu/lib` (`scripts/build-emulated-nic` builds it) or
//! `$IBGDA_EMU_LIB_DIR`. Without it every case is reported ignored, unless
//! `IBGDA_REQUIRE_EMU=1` (CI), which fails the run.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibgda::cq::Syndrome;
use ibgda::memory::{DeviceBuffer, DmaBuffer};
use ibgda::nic::gpu_access::{DmaBufExportError, DmaBufExporter, DmaBufRange};
use ibgda::nic::mlx5::{
    check_atomic_capabilities, GpuPath, MemoryRegion, Mlx5Backend, Mlx5Device, Mlx5Error,
};
use ibgda::nic::prm::log::{self, DecodedCommand, DecodedOutput};
use ibgda::nic::prm::{opcode, CommandStatus, PrmError, ServiceType};
use ibgda::nic::{Device, MemoryAccess, NicError, QueueSpec};
use ibgda::queue::{PollError, WaitError};
use ibgda::wqe::{RdmaWrite, RingSize};

/// Set in a child process: the case it runs.
const CHILD_ENV: &str = "IBGDA_EMU_FAULT_CASE";
/// How long a child may run.
const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

type Outcome = Result<(), String>;

struct Case {
    name: &'static str,
    /// The emulator's configuration for the child (`IBGDA_EMU_CONFIG_TEXT`).
    config: &'static str,
    /// Runs in the child.
    run: fn() -> Outcome,
    /// Checks what the child left (its command log), in the parent.
    check: Option<fn(&std::path::Path) -> Outcome>,
}

const DEFAULT_DEVICE: &str = "[device mlx5_0]\n";

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "no_device",
            config: "# no device section: no device\n",
            run: no_device,
            check: None,
        },
        Case {
            name: "a_device_that_is_not_mlx5",
            config: "[device erdma_0]\nprovider = erdma\nlink_layer = ethernet\n",
            run: not_mlx5,
            check: None,
        },
        Case {
            name: "devx_context_refused",
            config: "[device mlx5_0]\nfault.open_devx = EPERM\n",
            run: devx_context_refused,
            check: None,
        },
        Case {
            name: "uar_allocation_refused_in_an_unprivileged_container",
            config: "[device mlx5_0]\nfault.alloc_uar = EPERM\n",
            run: uar_allocation_refused,
            check: None,
        },
        Case {
            name: "gpu_memory_without_dmabuf_or_peer_memory",
            config: DEFAULT_DEVICE,
            run: no_dmabuf_no_peer_memory,
            check: None,
        },
        Case {
            name: "dmabuf_umem_efault_falls_back_to_peer_memory",
            config: "[device mlx5_0]\nfault.umem_reg_dmabuf = EFAULT\n",
            run: dmabuf_umem_efault_falls_back,
            check: None,
        },
        Case {
            name: "cqe_version_0",
            config: "[device mlx5_0]\ncap.cqe_version = 0\n",
            run: cqe_version_0,
            check: None,
        },
        Case {
            name: "missing_atomic_capabilities",
            config: "[device mlx5_0]\ncap.atomic = 0\n[device mlx5_1]\ncap.atomic_sizes = 0x4\n",
            run: missing_atomics,
            check: None,
        },
        Case {
            name: "firmware_status_and_syndrome_on_chosen_commands",
            config: "[device mlx5_0]\nfault.command = CREATE_CQ status=0x03 syndrome=0x0badc0de\n\
                     [device mlx5_1]\nfault.command = CREATE_QP status=0x0f syndrome=0x12345678\n\
                     [device mlx5_2]\nfault.command = RTR2RTS_QP status=0x10 syndrome=0x00c0ffee\n\
                     [device mlx5_3]\nfault.command = QUERY_HCA_CAP status=0x01 syndrome=0x7 nth=2\n",
            run: firmware_failures,
            check: None,
        },
        Case {
            name: "empty_gid_table_on_roce",
            config: "[device mlx5_0]\nlink_layer = ethernet\ngids = none\n",
            run: empty_gid_table,
            check: None,
        },
        Case {
            name: "first_wqe_fails_with_local_qp_operation_error_0x68",
            config: "[device mlx5_0]\nfault.first_wqe = 0x68\n",
            run: first_wqe_fails,
            check: None,
        },
        Case {
            name: "transport_retry_exceeded_arrives_later",
            config: "[device mlx5_0]\nfault.transport_retry_exceeded_at = 2\n",
            run: retry_exceeded_later,
            check: None,
        },
        Case {
            name: "command_log_of_a_queue_pair_decodes",
            config: DEFAULT_DEVICE,
            run: queue_pair_life,
            check: Some(check_command_log),
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

    // The second QUERY_HCA_CAP (the atomic page) fails: the device does not open.
    let e = expect_err(open("mlx5_3"), "the second QUERY_HCA_CAP")?;
    expect_command_error(&e, "QUERY_HCA_CAP", CommandStatus::InternalError, 7)
}

fn empty_gid_table() -> Outcome {
    let device = open("mlx5_0").map_err(fail)?;
    if !device.port().gids.is_empty() {
        return Err(format!("GIDs {:?}", device.port().gids));
    }
    let pd = device.alloc_pd().map_err(fail)?;
    let e = expect_err(
        pd.create_dct(0x42, 16),
        "a DC target on a RoCE port without GIDs",
    )?;
    let mlx5 = mlx5_of(&e)?;
    if *mlx5
        != (Mlx5Error::Gid {
            port: 1,
            index: 0,
            errno: libc::ENODATA,
        })
    {
        return Err(format!("expected the Gid error (ENODATA), got {mlx5:?}"));
    }
    contains(&e.to_string(), "choose an index that exists")
}

/// A connected RC loopback queue pair and a registered 64-byte buffer on device mlx5_0.
struct Loopback {
    qp: ibgda::queue::QueuePair<ibgda::wqe::Rc>,
    region: ibgda::nic::MemoryRegion<Mlx5Backend>,
    _device: Device<Mlx5Backend>,
}

fn loopback() -> Result<Loopback, String> {
    let device = open("mlx5_0").map_err(fail)?;
    let pd = device.alloc_pd().map_err(fail)?;
    let buffer = Arc::new(DmaBuffer::zeroed(64, 4096).map_err(fail)?);
    let access = MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_WRITE;
    let region = pd.register(buffer, 0, 64, access).map_err(fail)?;
    let pending = pd.create_rc(spec()).map_err(fail)?;
    let endpoint = pending.endpoint();
    let qp = pending.connect(&endpoint).map_err(fail)?;
    Ok(Loopback {
        qp,
        region,
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

fn check_command_log(path: &std::path::Path) -> Outcome {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let records = log::parse(&text).map_err(fail)?;
    let opcodes: Vec<u16> = records.iter().map(|r| r.opcode()).collect();
    let expected = vec![
        opcode::QUERY_HCA_CAP,
        opcode::QUERY_HCA_CAP,
        opcode::CREATE_CQ,
        opcode::CREATE_QP,
        opcode::RST2INIT_QP,
        opcode::INIT2RTR_QP,
        opcode::RTR2RTS_QP,
        opcode::DESTROY_QP,
        opcode::DESTROY_CQ,
    ];
    if opcodes != expected {
        return Err(format!("opcodes {opcodes:x?}, expected {expected:x?}"));
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
        match (input, output) {
            (DecodedCommand::CreateCq(c), DecodedOutput::CreateCq(_)) => {
                // 64 CQ entries: log2 6.
                if c.cqc.log_cq_size != 6 || !c.cq_umem_valid {
                    return Err(format!("CREATE_CQ {c:?}"));
                }
            }
            (DecodedCommand::CreateQp(c), DecodedOutput::CreateQp(o)) => {
                // 64 WQEBBs: log2 6.
                if c.qpc.log_sq_size != 6 || c.qpc.service_type != ServiceType::Rc {
                    return Err(format!("CREATE_QP {c:?}"));
                }
                qpn = Some(o.qpn);
            }
            (DecodedCommand::Init2RtrQp(c), _) => {
                // Connected to itself.
                if Some(c.remote_qpn) != qpn || Some(c.qpn) != qpn {
                    return Err(format!("INIT2RTR_QP {c:?} for QP {qpn:?}"));
                }
            }
            (DecodedCommand::DestroyQp(c), _) => {
                if Some(c.qpn) != qpn {
                    return Err(format!("DESTROY_QP {c:?} for QP {qpn:?}"));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Where the emulated libraries are.
fn emulator_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("IBGDA_EMU_LIB_DIR") {
        return Some(PathBuf::from(dir));
    }
    // <target>/release/deps/emu_faults-*: the libraries are at <target>/emu/lib.
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.join("emu/lib"))
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
        match cases().into_iter().find(|c| c.name == name) {
            Some(case) => (case.run)(),
            None => Err(format!("no case {name}")),
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

fn run_child(case: &Case, dir: &std::path::Path, log_path: &std::path::Path) -> Outcome {
    let exe = std::env::current_exe().map_err(fail)?;
    let mut library_path = dir.as_os_str().to_owned();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        library_path.push(":");
        library_path.push(old);
    }
    let mut command = Command::new(exe);
    command
        .env(CHILD_ENV, case.name)
        .env("LD_LIBRARY_PATH", library_path)
        .env("IBGDA_EMU_CONFIG_TEXT", case.config)
        .env_remove("IBGDA_EMU_CONFIG")
        .env_remove("IBGDA_NIC")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if case.check.is_some() {
        command.env("IBGDA_EMU_LOG", log_path);
    } else {
        command.env_remove("IBGDA_EMU_LOG");
    }
    let mut child = command.spawn().map_err(fail)?;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(fail)? {
            break status;
        }
        if start.elapsed() > CHILD_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("timed out after {CHILD_TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = child.wait_with_output().map_err(fail)?;
    if !status.success() {
        return Err(format!(
            "{status}\n--- stdout\n{}--- stderr\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    match case.check {
        Some(check) => check(log_path),
        None => Ok(()),
    }
}

fn main() -> ExitCode {
    if let Ok(name) = std::env::var(CHILD_ENV) {
        return child(&name);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cases = cases();
    if args.iter().any(|a| a == "--list") {
        for case in &cases {
            println!("{}: test", case.name);
        }
        return ExitCode::SUCCESS;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let selected: Vec<&Case> = cases
        .iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.name.contains(f.as_str())))
        .collect();
    println!("emu_faults: the mlx5 backend on the emulated ConnectX");
    println!("\nrunning {} tests", selected.len());
    let dir = emulator_dir().filter(|d| d.join("libibverbs.so.1").is_file());
    let required = std::env::var("IBGDA_REQUIRE_EMU").is_ok_and(|v| v == "1");
    let (mut passed, mut failed, mut ignored) = (0, 0, 0);
    let scratch = std::env::temp_dir().join(format!("ibgda-emu-faults-{}", std::process::id()));
    for case in selected {
        let outcome = match &dir {
            Some(dir) => {
                let log_path = scratch.with_extension(format!("{}.log", case.name));
                let r = run_child(case, dir, &log_path).map(Some);
                let _ = std::fs::remove_file(&log_path);
                r
            }
            None if required => Err(
                "IBGDA_REQUIRE_EMU=1 but the emulated ConnectX is not built (run scripts/build-emulated-nic)"
                    .into(),
            ),
            None => Ok(None),
        };
        match outcome {
            Ok(Some(())) => {
                passed += 1;
                println!("test {} ... ok", case.name);
            }
            Ok(None) => {
                ignored += 1;
                println!(
                    "test {} ... ignored, the emulated ConnectX is not built (scripts/build-emulated-nic)",
                    case.name
                );
            }
            Err(why) => {
                failed += 1;
                println!("test {} ... FAILED\n    {why}", case.name);
            }
        }
    }
    let verdict = if failed == 0 { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {verdict}. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; 0 filtered out\n"
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
