//! The GPU checks: the CUDA driver and its GPUs, GPU queue memory exported as DMA-BUF and
//! registered with the NIC by DMA-BUF and through the peer-memory module, and the NIC's
//! doorbell (UAR) page mapped into the GPU. The probe uses `ibgda-kernels`'
//! [`CudaNicAccess`], the same DMA-BUF export and I/O mapping the mlx5 backend uses for
//! GPU-placed queues; where no NIC is there, the GPU side runs alone and the rest is
//! predicted from the driver's settings, and the row says so.

use std::sync::Arc;

use cudarc::driver::result as cu;
use cudarc::driver::sys::CUdevice_attribute as Attribute;
use ibgda::nic::gpu_access::{DmaBufExportError, DmaBufExporter};
use ibgda::nic::mlx5::{GpuPath, Mlx5Backend, Mlx5Device, Mlx5Error, CUDA_ERROR_NOT_PERMITTED};
use ibgda::nic::{Backend, NicError, QueueAllocator, QueueFill, UarPage};
use ibgda::queue::Gpu as GpuPlaced;
use ibgda_kernels::gpu::{driver_present, Gpu};
use ibgda_kernels::nic::CudaNicAccess;

use crate::bounded::{Ending, Progress};
use crate::host::{driver_version, kernel_version, registry_setting, HostFacts};
use crate::path::{Known, PathInputs};
use crate::report::{Row, Status};

/// The queue memory the probe allocates: 64 KiB, as NVSHMEM aligns GPU queue buffers.
const QUEUE_BYTES: usize = 64 << 10;

/// One GPU as CUDA reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuInfo {
    /// Its CUDA ordinal.
    pub ordinal: usize,
    /// Its name (`NVIDIA H200`).
    pub name: String,
    /// Its PCI address as sysfs names it (`0000:19:00.0`).
    pub bus_id: Option<String>,
    /// `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`.
    pub dmabuf: Option<bool>,
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED`.
    pub gpudirect_rdma: Option<bool>,
    /// Compute capability.
    pub compute: Option<(i32, i32)>,
}

/// How GPU memory registered as UMEM when a DMA-BUF exporter was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registered {
    /// The path it took.
    pub path: GpuPath,
    /// Why DMA-BUF was not used, when it fell back to peer memory.
    pub dmabuf_error: Option<DmaBufExportError>,
}

/// What the GPU probe found (each `None` when the probe never got there).
#[derive(Clone, Debug, Default)]
pub struct GpuFacts {
    /// Whether `libcuda.so.1` loads.
    pub driver_library: Option<bool>,
    /// `cuInit`.
    pub init: Option<Result<(), String>>,
    /// The GPUs.
    pub gpus: Vec<GpuInfo>,
    /// The GPU the memory and mapping checks ran on.
    pub tested: Option<usize>,
    /// A context on it, or why none.
    pub context: Option<Result<(), String>>,
    /// GPU queue memory allocated, or why not.
    pub allocation: Option<Result<(), String>>,
    /// The DMA-BUF export of that memory (its length).
    pub export: Option<Result<u64, DmaBufExportError>>,
    /// The NIC the registrations and the mapping went to.
    pub nic: Option<String>,
    /// GPU queue memory registered as UMEM with the DMA-BUF exporter.
    pub umem_dmabuf: Option<Result<Registered, Mlx5Error>>,
    /// GPU queue memory registered as UMEM without an exporter (peer memory only).
    pub umem_peer: Option<Result<(), Mlx5Error>>,
    /// The UAR page mapped into the GPU.
    pub uar_mapping: Option<Result<(), NicError>>,
    /// How the probe ended.
    pub ending: Option<Ending>,
}

impl GpuFacts {
    /// Whether a GPU could be used at all (a context on the tested one).
    pub fn usable(&self) -> bool {
        matches!(self.context, Some(Ok(())))
    }

    /// The tested GPU.
    pub fn tested_gpu(&self) -> Option<&GpuInfo> {
        self.tested
            .and_then(|t| self.gpus.iter().find(|g| g.ordinal == t))
    }
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Runs the GPU probe on GPU `ordinal`, registering with and mapping from `nic` when given
/// (on the caller's thread: [`crate::bounded::run`] bounds it).
pub fn probe(ordinal: usize, nic: Option<String>, progress: &Progress<GpuFacts>) {
    progress.step("loading libcuda.so.1");
    let present = driver_present();
    progress.record(|f| f.driver_library = Some(present));
    if !present {
        return;
    }
    progress.step("initialising the CUDA driver (cuInit)");
    let init = cu::init().map_err(|e| format!("{e:?}"));
    let ok = init.is_ok();
    progress.record(|f| f.init = Some(init));
    if !ok {
        return;
    }
    progress.step("listing GPUs (cuDeviceGetCount, cuDeviceGetAttribute)");
    let count = cu::device::get_count().unwrap_or(0);
    let gpus: Vec<GpuInfo> = (0..count).filter_map(describe).collect();
    let exists = gpus.iter().any(|g| g.ordinal == ordinal);
    progress.record(|f| {
        f.gpus = gpus;
        f.tested = exists.then_some(ordinal);
    });
    if !exists {
        return;
    }
    progress.step("creating a context (cuCtxCreate)");
    let gpu = match Gpu::open_without_programs(ordinal) {
        Ok(gpu) => Arc::new(gpu),
        Err(e) => {
            progress.record(|f| f.context = Some(Err(text(e))));
            return;
        }
    };
    progress.record(|f| f.context = Some(Ok(())));
    let access = Arc::new(CudaNicAccess::new(gpu));
    progress.step("allocating 64 KiB of GPU queue memory (cuMemAlloc)");
    let allocated =
        QueueAllocator::<GpuPlaced>::allocate(&*access, QUEUE_BYTES, 4096, QueueFill::Zero);
    let buffer = match allocated {
        Ok(buffer) => buffer,
        Err(e) => {
            progress.record(|f| f.allocation = Some(Err(text(e))));
            return;
        }
    };
    progress.record(|f| f.allocation = Some(Ok(())));
    progress.step("exporting it as a DMA-BUF (cuMemGetHandleForAddressRange)");
    let export = access.export(&buffer).map(|range| range.len());
    progress.record(|f| f.export = Some(export));
    let Some(nic) = nic else {
        return;
    };
    progress.record(|f| f.nic = Some(nic.clone()));
    // One buffer serves both registrations, one after the other (each UMEM is released
    // before the next is made).
    let buffer = Arc::new(buffer);
    progress.step("registering GPU queue memory as UMEM by DMA-BUF (mlx5dv_devx_umem_reg_ex)");
    let umem = Mlx5Device::open(Some(&nic)).and_then(|device| {
        device
            .register_gpu_umem(buffer.clone(), Some(&*access))
            .map(|umem| Registered {
                path: umem.gpu_path().unwrap_or(GpuPath::DmaBuf),
                dmabuf_error: umem.dmabuf_error().cloned(),
            })
    });
    progress.record(|f| f.umem_dmabuf = Some(umem));
    progress
        .step("registering GPU queue memory as UMEM through peer memory (mlx5dv_devx_umem_reg)");
    let peer = Mlx5Device::open(Some(&nic))
        .and_then(|device| device.register_gpu_umem(buffer, None).map(drop));
    progress.record(|f| f.umem_peer = Some(peer));
    progress.step("mapping the UAR page into the GPU (cuMemHostRegister with the I/O-memory flag)");
    let mapped = Mlx5Device::open(Some(&nic))
        .map_err(NicError::from)
        .and_then(|device| {
            let backend = Mlx5Backend::new(device).with_gpu(access.clone(), access.clone());
            backend.alloc_uar()?.gpu_doorbell().map(drop)
        });
    progress.record(|f| f.uar_mapping = Some(mapped));
}

fn describe(ordinal: i32) -> Option<GpuInfo> {
    let dev = cu::device::get(ordinal).ok()?;
    // SAFETY: `dev` came from `cuDeviceGet`; attribute queries touch no memory of ours.
    let attr = |a: Attribute| unsafe { cu::device::get_attribute(dev, a) }.ok();
    let flag = |a: Attribute| attr(a).map(|v| v != 0);
    let bus_id = match (
        attr(Attribute::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
        attr(Attribute::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
        attr(Attribute::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID),
    ) {
        (Some(d), Some(b), Some(s)) => Some(crate::host::pci_address(d as u32, b as u32, s as u32)),
        _ => None,
    };
    Some(GpuInfo {
        ordinal: ordinal as usize,
        name: cu::device::get_name(dev).unwrap_or_default(),
        bus_id,
        dmabuf: flag(Attribute::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED),
        gpudirect_rdma: flag(Attribute::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED),
        compute: attr(Attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR).zip(attr(
            Attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
        )),
    })
}

/// Why the GPU rows cannot run, if they cannot: `(why, whether it is a shortfall)`.
fn unusable(g: &GpuFacts, host: &HostFacts) -> Option<(String, bool)> {
    if g.usable() {
        return None;
    }
    let stopped = g.ending.as_ref().and_then(Ending::reason);
    Some(match (&g.driver_library, &g.init, &g.context) {
        (Some(false), _, _) if host.nvidia_gpus.is_empty() => (
            "no GPU (libcuda.so.1 does not load and /proc/driver/nvidia/gpus lists none)".into(),
            false,
        ),
        (Some(false), _, _) => (
            format!(
                "the NVIDIA driver drives {} but libcuda.so.1 does not load",
                host.nvidia_gpus.join(", ")
            ),
            true,
        ),
        (_, Some(Err(e)), _) => (format!("cuInit failed: {e}"), true),
        (_, Some(Ok(())), None) if g.gpus.is_empty() => ("CUDA sees no GPU".into(), false),
        (_, _, Some(Err(e))) => (format!("no context on the GPU: {e}"), true),
        _ => match stopped {
            Some(reason) => (format!("the GPU probe stopped: {reason}"), true),
            None => ("the GPU asked for does not exist".into(), true),
        },
    })
}

fn not_needed(why: &str) -> String {
    format!(
        "cannot run: {why}; not needed for CPU producers on host-placed queues, which need no GPU"
    )
}

/// The rows of the GPU checks, in bring-up order: the GPU, GPU memory by DMA-BUF and by
/// peer memory, the UAR mapped into the GPU. `nic_why` says why no NIC was used, when none
/// was.
pub fn rows(g: &GpuFacts, host: &HostFacts, nic_why: Option<&str>) -> Vec<Row> {
    let mut rows = vec![
        gpu_row(g, host),
        dmabuf_row(g, host, nic_why),
        peer_row(g, host, nic_why),
        mapping_row(g, host, nic_why),
    ];
    // The first row says in full why no GPU could be used; the others point to it.
    if rows[0].status != Status::Ok {
        for row in &mut rows[1..] {
            if row.status == Status::Skip {
                row.result =
                    "cannot run: no usable GPU (see the GPU row); not needed for CPU producers"
                        .into();
            }
        }
    }
    rows
}

fn driver_text(host: &HostFacts) -> String {
    match host.nvidia_version.as_deref().and_then(driver_version) {
        Some(v) => format!(
            "driver {} ({})",
            v.version,
            if v.open {
                "open kernel modules"
            } else {
                "proprietary kernel module"
            }
        ),
        None => "driver version unknown (no /proc/driver/nvidia/version)".into(),
    }
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    }
}

fn gpu_row(g: &GpuFacts, host: &HostFacts) -> Row {
    let row = Row::new("gpu", "GPU and CUDA driver", Status::Ok).how(
        "dlopen libcuda.so.1, cuInit, cuDeviceGetAttribute (PCI address, DMA-BUF and GPUDirect \
         RDMA support), cuCtxCreate; /proc/driver/nvidia/version and /gpus",
    );
    if let Some((why, shortfall)) = unusable(g, host) {
        if !shortfall {
            return row.status(Status::Skip).result(not_needed(&why));
        }
        return row.status(Status::Warn).result(why).remedy(
            "check `nvidia-smi`: the kernel module and libcuda.so.1 must be the same driver \
             version; in a container, run with the NVIDIA container runtime so that the \
             driver's libraries and /dev/nvidia* are passed in",
        );
    }
    let gpus: Vec<String> = g
        .gpus
        .iter()
        .map(|d| {
            format!(
                "{} {} ({}, sm_{}, DMA-BUF {}, GPUDirect RDMA {})",
                d.ordinal,
                d.name,
                d.bus_id.as_deref().unwrap_or("no PCI address"),
                d.compute.map_or("?".into(), |(a, b)| format!("{a}{b}")),
                yes_no(d.dmabuf),
                yes_no(d.gpudirect_rdma)
            )
        })
        .collect();
    row.result(format!(
        "{} GPU{}: {}; {}; checking GPU {}",
        g.gpus.len(),
        if g.gpus.len() == 1 { "" } else { "s" },
        gpus.join("; "),
        driver_text(host),
        g.tested.unwrap_or(0)
    ))
}

/// Why DMA-BUF cannot work here, from the driver and the kernel (empty: nothing against
/// it is known).
fn dmabuf_obstacles(g: &GpuFacts, host: &HostFacts) -> Vec<String> {
    let mut why = Vec::new();
    if g.tested_gpu().and_then(|t| t.dmabuf) == Some(false) {
        why.push("the driver reports no DMA-BUF support for the GPU (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0)".to_owned());
    }
    if let Some(v) = host.nvidia_version.as_deref().and_then(driver_version) {
        if !v.open {
            why.push(format!(
                "driver {} is the proprietary kernel module, which exports no DMA-BUF (the open kernel modules do)",
                v.version
            ));
        }
    }
    if let Some((major, minor)) = host.kernel_release.as_deref().and_then(kernel_version) {
        if (major, minor) < (5, 12) {
            why.push(format!(
                "Linux {major}.{minor} is older than 5.12, the first with DMA-BUF for RDMA"
            ));
        }
    }
    why
}

const DMABUF_REMEDY: &str = "use the NVIDIA open kernel modules (`nvidia-open`, driver 515 or \
    later) on Linux 5.12 or later with rdma-core 34 or later; or load the peer-memory module \
    (`modprobe nvidia_peermem`), which registers GPU memory without DMA-BUF";

fn no_nic(why: Option<&str>) -> String {
    why.map_or_else(
        || "no NIC was used".to_owned(),
        |w| format!("no NIC to register with ({w})"),
    )
}

fn dmabuf_row(g: &GpuFacts, host: &HostFacts, nic_why: Option<&str>) -> Row {
    let row = Row::new("gpu_memory_dmabuf", "GPU memory by DMA-BUF", Status::Ok).how(
        "cuMemGetHandleForAddressRange of 64 KiB of GPU queue memory, then \
         mlx5dv_devx_umem_reg_ex with the DMA-BUF (ibgda's register_gpu_umem); the driver, \
         kernel release and GPU attribute when that fails",
    );
    if let Some((why, _)) = unusable(g, host) {
        return row.status(Status::Skip).result(not_needed(&why));
    }
    let obstacles = dmabuf_obstacles(g, host);
    let export_len = match &g.export {
        Some(Ok(len)) => *len,
        Some(Err(e)) => {
            let mut result = format!("the GPU cannot export its memory: {e}");
            if !obstacles.is_empty() {
                result.push_str(&format!(" ({})", obstacles.join("; ")));
            }
            return row
                .status(Status::Warn)
                .result(result)
                .remedy(DMABUF_REMEDY);
        }
        None => {
            let why = match &g.allocation {
                Some(Err(e)) => format!("no GPU memory could be allocated: {e}"),
                _ => g
                    .ending
                    .as_ref()
                    .and_then(Ending::reason)
                    .unwrap_or_else(|| "the probe did not get to the export".into()),
            };
            return row.status(Status::Warn).result(why);
        }
    };
    let nic = g.nic.as_deref().unwrap_or("the NIC");
    match &g.umem_dmabuf {
        None => row.result(format!(
            "GPU {} exports queue memory as a DMA-BUF ({export_len} B); the NIC side is not checked: {}",
            g.tested.unwrap_or(0),
            no_nic(nic_why)
        )),
        Some(Ok(Registered {
            path: GpuPath::DmaBuf,
            ..
        })) => row.result(format!(
            "GPU queue memory registered as UMEM on {nic} by DMA-BUF"
        )),
        Some(Ok(Registered {
            path: GpuPath::PeerMemory,
            dmabuf_error,
        })) => row
            .status(Status::Warn)
            .result(format!(
                "the DMA-BUF UMEM registration on {nic} failed ({}); the backend fell back to \
                 peer memory, which worked",
                dmabuf_error
                    .as_ref()
                    .map_or("no reason kept".to_owned(), ToString::to_string)
            ))
            .remedy(
                "as NVSHMEM issue 67 reports (EFAULT for a DMA-BUF UMEM while data regions \
                 register): update the NVIDIA driver and the kernel; until then keep \
                 nvidia_peermem loaded, which the fallback needs",
            ),
        Some(Err(e)) => row
            .status(Status::Warn)
            .result(format!("GPU queue memory cannot be registered on {nic}"))
            .remedy(e.to_string()),
    }
}

fn peer_row(g: &GpuFacts, host: &HostFacts, nic_why: Option<&str>) -> Row {
    let row = Row::new("gpu_memory_peer", "GPU memory by peer memory", Status::Ok).how(
        "/sys/module/nvidia_peermem, /proc/modules; mlx5dv_devx_umem_reg on the GPU address \
         (ibgda's register_gpu_umem without an exporter)",
    );
    if let Some((why, _)) = unusable(g, host) {
        return row.status(Status::Skip).result(not_needed(&why));
    }
    let module = if host.module_loaded("nvidia_peermem") {
        "nvidia_peermem is loaded"
    } else if host.module_loaded("nv_peer_mem") {
        "the legacy nv_peer_mem is loaded, nvidia_peermem is not"
    } else {
        "no peer-memory module is loaded"
    };
    let dmabuf_works = matches!(
        g.umem_dmabuf,
        Some(Ok(Registered {
            path: GpuPath::DmaBuf,
            ..
        }))
    ) || (g.umem_dmabuf.is_none() && matches!(g.export, Some(Ok(_))));
    let nic = g.nic.as_deref().unwrap_or("the NIC");
    let legacy = host.module_loaded("nv_peer_mem") && !host.module_loaded("nvidia_peermem");
    const REMEDY: &str = "load the peer-memory module: `modprobe nvidia_peermem` (it ships with \
        the NVIDIA driver; the old nv_peer_mem must be unloaded and replaced by it)";
    match &g.umem_peer {
        Some(Ok(())) => row.result(format!(
            "{module}; GPU queue memory registered as UMEM on {nic} through it"
        )),
        Some(Err(e)) if dmabuf_works => row.result(format!(
            "{module}; registration through it fails on {nic} ({}), which DMA-BUF makes unnecessary",
            peer_errno(e)
        )),
        Some(Err(e)) => row
            .status(Status::Warn)
            .result(format!("{module}; registration through it fails on {nic}"))
            .remedy(e.to_string()),
        None => {
            let untested = no_nic(nic_why);
            if legacy {
                row.status(Status::Warn)
                    .result(format!("{module}; not exercised: {untested}"))
                    .remedy(format!(
                        "DEVX UMEM registration of GPU memory fails with nv_peer_mem (DeepEP \
                         issue 36): {REMEDY}"
                    ))
            } else if module == "nvidia_peermem is loaded" || dmabuf_works {
                row.result(format!(
                    "{module}{}; not exercised: {untested}",
                    if module == "nvidia_peermem is loaded" {
                        ""
                    } else {
                        ", which DMA-BUF makes unnecessary"
                    }
                ))
            } else {
                row.status(Status::Warn)
                    .result(format!(
                        "{module} and DMA-BUF does not work: GPU memory cannot reach the NIC"
                    ))
                    .remedy(REMEDY)
            }
        }
    }
}

fn peer_errno(e: &Mlx5Error) -> String {
    match e {
        Mlx5Error::GpuMemoryRegistration {
            peer_memory_errno, ..
        } => format!(
            "{} ({peer_memory_errno})",
            ibgda::nic::mlx5::errno_name(*peer_memory_errno)
        ),
        other => other.to_string(),
    }
}

/// What the driver's parameters say of the peer-mapping override, and who runs this.
fn override_text(host: &HostFacts) -> (Option<bool>, String) {
    let Some(params) = host.nvidia_params.as_deref() else {
        return (
            None,
            "/proc/driver/nvidia/params cannot be read, so the peer-mapping override is unknown"
                .into(),
        );
    };
    let found = registry_setting(params, "PeerMappingOverride");
    match found.iter().find(|s| s.value != 0) {
        Some(s) => (
            Some(true),
            format!("PeerMappingOverride={} is set ({})", s.value, s.source),
        ),
        None if found.is_empty() => (
            Some(false),
            "PeerMappingOverride is not set (RegistryDwords of /proc/driver/nvidia/params)".into(),
        ),
        None => (
            Some(false),
            format!("PeerMappingOverride=0 ({})", found[0].source),
        ),
    }
}

const MAPPING_REMEDY: &str = "load the nvidia module with the peer-mapping override \
    (`options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1;\"` in /etc/modprobe.d, then \
    reload the driver or reboot), or run as root; without it ibgda's GPU producers take the \
    CPU-assisted doorbell (a host thread rings it)";

fn mapping_row(g: &GpuFacts, host: &HostFacts, nic_why: Option<&str>) -> Row {
    let row = Row::new(
        "uar_gpu_mapping",
        "doorbell mapped into the GPU",
        Status::Ok,
    )
    .how(
        "cuMemHostRegister(PORTABLE | DEVICEMAP | IOMEMORY) of a UAR page (ibgda's \
         gpu_doorbell); the override from /proc/driver/nvidia/params (RegistryDwords, \
         RegistryDwordsPerDevice); the effective user id",
    );
    if let Some((why, _)) = unusable(g, host) {
        return row.status(Status::Skip).result(not_needed(&why));
    }
    let (set, setting) = override_text(host);
    let root = host.euid == 0;
    let who = if root {
        "this process runs as root"
    } else {
        "this process is not root"
    };
    let nic = g.nic.as_deref().unwrap_or("the NIC");
    match &g.uar_mapping {
        Some(Ok(())) => row.result(format!(
            "a UAR page of {nic} is mapped into GPU {}: GPU threads ring the doorbell themselves \
             ({setting}; {who})",
            g.tested.unwrap_or(0)
        )),
        Some(Err(e)) => {
            let mlx5 = match e {
                NicError::Backend(b) => b.downcast_ref::<Mlx5Error>().cloned(),
                _ => None,
            };
            let result = match &mlx5 {
                Some(Mlx5Error::UarMappingRefused { cuda_error, .. }) => format!(
                    "the CUDA driver refused to map a UAR page of {nic} (CUDA error {cuda_error}{}); {setting}; {who}",
                    if *cuda_error == CUDA_ERROR_NOT_PERMITTED {
                        ", not permitted"
                    } else {
                        ""
                    }
                ),
                _ => format!("a UAR page of {nic} could not be mapped into the GPU; {setting}; {who}"),
            };
            row.status(Status::Warn)
                .result(result)
                .remedy(mlx5.map_or_else(|| e.to_string(), |m| m.to_string()))
        }
        None => {
            let untested = format!("not tried: {}", no_nic(nic_why));
            match (set, root) {
                (Some(true), _) => row.result(format!(
                    "{untested}; {setting}: the driver maps NIC doorbell pages for every user"
                )),
                (_, true) => row.result(format!(
                    "{untested}; {setting}, but {who}, which the driver lets map NIC doorbell pages"
                )),
                (Some(false), false) => row
                    .status(Status::Warn)
                    .result(format!(
                        "{untested}; {setting} and {who}: the driver refuses such a mapping \
                         (CUDA error 800, as in DeepEP issue 163)"
                    ))
                    .remedy(MAPPING_REMEDY),
                (None, false) => row
                    .status(Status::Warn)
                    .result(format!("{untested}; {setting}; {who}"))
                    .remedy(MAPPING_REMEDY),
            }
        }
    }
}

/// The doorbell path's inputs from what the GPU probe found, or predicted from the rows
/// where it could not run.
pub fn path_inputs(g: &GpuFacts, rows: &[Row], nic_usable: bool) -> PathInputs {
    let status = |id: &str| rows.iter().find(|r| r.id == id).map(|r| r.status);
    let gpu_memory = match (&g.umem_dmabuf, &g.umem_peer) {
        (Some(Ok(_)), _) | (_, Some(Ok(()))) => Known::Tested(true),
        (Some(Err(_)), Some(Err(_))) => Known::Tested(false),
        _ => match (status("gpu_memory_dmabuf"), status("gpu_memory_peer")) {
            (Some(Status::Ok), _) | (_, Some(Status::Ok)) => Known::Predicted(true),
            (Some(Status::Warn), Some(Status::Warn)) => Known::Predicted(false),
            _ => Known::Unknown,
        },
    };
    let doorbell_mapping = match &g.uar_mapping {
        Some(r) => Known::Tested(r.is_ok()),
        None => match status("uar_gpu_mapping") {
            Some(Status::Ok) => Known::Predicted(true),
            Some(Status::Warn) => Known::Predicted(false),
            _ => Known::Unknown,
        },
    };
    PathInputs {
        nic_usable,
        gpu: g.usable(),
        gpu_memory,
        doorbell_mapping,
    }
}

#[cfg(test)]
mod tests;
