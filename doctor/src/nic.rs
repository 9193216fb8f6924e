//! The NIC checks: rdma-core's libraries, the RDMA devices and their drivers, DEVX (a
//! context, a UAR allocated and freed), the HCA capabilities queues depend on, a host
//! UMEM registration, port 1 and its address. The probe goes through ibgda's own mlx5
//! backend (`ibgda::nic::mlx5`), so every failure is the typed error ibgda itself would
//! return, and its message is the remedy shown.

use std::sync::Arc;

use ibgda::memory::DmaBuffer;
use ibgda::nic::mlx5::{
    check_atomic_capabilities, devices, DeviceInfo, LinkLayer, Mlx5Backend, Mlx5Device, Mlx5Error,
    PortInfo, UarKind, EPERM, IBVERBS, MLX5,
};
use ibgda::nic::prm::{
    opcode, AtomicCaps, CapabilityType, Command, GeneralCaps, QueryHcaCap, QueryHcaCapOutput,
};
use ibgda::nic::{AtomicEndianness, Backend, Device, DeviceCaps, NicError};
use ibgda::wqe::{RingSize, WqeLimits};

use crate::bounded::{Ending, Progress};
use crate::host::{HostFacts, Root};
use crate::report::{Row, Status};

/// The port ibgda's queues use.
pub const PORT: u8 = 1;
/// The most GID table entries read.
const MAX_GIDS: u32 = 256;

/// What the NIC probe found (each `None` when the probe never got there).
#[derive(Clone, Debug, Default)]
pub struct NicFacts {
    /// Entry points `libmlx5.so.1` lacks, or why the libraries did not load.
    pub libraries: Option<Result<Vec<&'static str>, Mlx5Error>>,
    /// The emulated ConnectX's identity, when `libibverbs.so.1` is the emulator.
    pub emulator: Option<String>,
    /// Whether `libibverbs.so.1` has `ibv_reg_dmabuf_mr` (rdma-core 34 and later).
    pub reg_dmabuf_mr: Option<bool>,
    /// The devices verbs lists.
    pub devices: Option<Result<Vec<DeviceInfo>, Mlx5Error>>,
    /// The device opened with DEVX, or why none was.
    pub opened: Option<Result<String, Mlx5Error>>,
    /// The UAR page allocated (and freed).
    pub uar: Option<Result<UarKind, Mlx5Error>>,
    /// The general and atomic capability pages.
    pub caps: Option<Result<(GeneralCaps, Option<AtomicCaps>), NicError>>,
    /// The capabilities as the control plane reads them (`nic::Device::open`), or why it
    /// refuses the device.
    pub control_plane: Option<Result<DeviceCaps, NicError>>,
    /// A host UMEM registered (and released), or the error's message.
    pub umem: Option<Result<(), String>>,
    /// Port 1.
    pub port: Option<Result<PortInfo, Mlx5Error>>,
    /// The GID table of port 1 (an entry that could not be read is `None`).
    pub gids: Vec<Option<[u8; 16]>>,
    /// How the probe ended.
    pub ending: Option<Ending>,
}

/// What sysfs says of one RDMA device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SysfsNic {
    /// Its name (`mlx5_0`).
    pub name: String,
    /// The kernel driver of its PCI function (`mlx5_core`).
    pub driver: Option<String>,
    /// The resolved path of its PCI function.
    pub pci_path: Option<String>,
    /// The NUMA node of its host bridge.
    pub numa: Option<u32>,
    /// Its IOMMU group's DMA domain type.
    pub iommu_type: Option<String>,
    /// Port 1's GID types by index (`RoCE v2`, `IB/RoCE v1`), for entries whose type file
    /// reads.
    pub gid_types: Vec<(u32, String)>,
    /// Whether the GID type directory exists at all.
    pub gid_types_listed: bool,
}

/// Reads `/sys/class/infiniband/*`.
pub fn sysfs_nics(root: &Root) -> Vec<SysfsNic> {
    root.list("/sys/class/infiniband")
        .into_iter()
        .map(|name| {
            let dev = format!("/sys/class/infiniband/{name}/device");
            let types_dir = format!("/sys/class/infiniband/{name}/ports/{PORT}/gid_attrs/types");
            let gid_types = root
                .list(&types_dir)
                .into_iter()
                .filter_map(|i| {
                    let index = i.parse().ok()?;
                    let text = root.read(&format!("{types_dir}/{i}"))?;
                    Some((index, text.trim().to_owned()))
                })
                .collect();
            SysfsNic {
                driver: root.link_name(&format!("{dev}/driver")),
                pci_path: root.resolve(&dev),
                numa: root
                    .read(&format!("{dev}/numa_node"))
                    .and_then(|t| crate::pci::numa_node(&t)),
                iommu_type: root
                    .read(&format!("{dev}/iommu_group/type"))
                    .map(|t| t.trim().to_owned()),
                gid_types,
                gid_types_listed: root.exists(&types_dir),
                name,
            }
        })
        .collect()
}

/// The emulated ConnectX's version string, if `libibverbs.so.1` is the emulator, and
/// whether `libibverbs.so.1` has `ibv_reg_dmabuf_mr`.
fn library_identity() -> (Option<String>, Option<bool>) {
    // SAFETY: loading rdma-core's libibverbs runs its initialisers, which only register
    // providers and read the environment (ibgda's backend loads it the same way).
    let Ok(lib) = (unsafe { libloading::Library::new(IBVERBS) }) else {
        return (None, None);
    };
    // SAFETY: the emulator's identity function takes nothing and returns a static
    // NUL-terminated string.
    let emulator =
        unsafe { lib.get::<unsafe extern "C" fn() -> *const libc::c_char>(b"ibgda_emu_version\0") }
            .ok()
            .and_then(|version| {
                // SAFETY: as above.
                let text = unsafe { version() };
                // SAFETY: a static NUL-terminated string when not null.
                (!text.is_null()).then(|| {
                    unsafe { std::ffi::CStr::from_ptr(text) }
                        .to_string_lossy()
                        .into_owned()
                })
            });
    // SAFETY: only the symbol's presence is checked; it is never called.
    let dmabuf_mr = unsafe { lib.get::<unsafe extern "C" fn()>(b"ibv_reg_dmabuf_mr\0") }.is_ok();
    (emulator, Some(dmabuf_mr))
}

/// Runs the NIC probe (on the caller's thread: [`crate::bounded::run`] bounds it).
pub fn probe(requested: Option<String>, progress: &Progress<NicFacts>) {
    progress.step("loading libibverbs.so.1 and libmlx5.so.1");
    let libraries = Mlx5Device::missing_entry_points();
    let loaded = libraries.is_ok();
    progress.record(|f| f.libraries = Some(libraries));
    if !loaded {
        return;
    }
    let (emulator, dmabuf_mr) = library_identity();
    progress.record(|f| {
        f.emulator = emulator;
        f.reg_dmabuf_mr = dmabuf_mr;
    });
    progress.step("listing RDMA devices (ibv_get_device_list)");
    let listed = devices();
    progress.record(|f| f.devices = Some(listed));
    progress.step("opening a DEVX context (mlx5dv_open_device)");
    let device = match Mlx5Device::open(requested.as_deref()) {
        Ok(device) => device,
        Err(e) => {
            progress.record(|f| f.opened = Some(Err(e)));
            return;
        }
    };
    let name = device.name().to_owned();
    progress.record(|f| f.opened = Some(Ok(name.clone())));
    progress.step("allocating a UAR page (mlx5dv_devx_alloc_uar)");
    let uar = device.alloc_uar().map(|uar| uar.kind());
    progress.record(|f| f.uar = Some(uar));
    let backend = Mlx5Backend::new(device);
    progress.step("reading the HCA capabilities (QUERY_HCA_CAP)");
    let caps = query_caps(&backend);
    progress.record(|f| f.caps = Some(caps));
    progress.step("opening the device through the control plane (nic::Device::open)");
    let opened = Device::open(backend);
    progress.record(|f| {
        f.control_plane = Some(opened.as_ref().map(|d| *d.caps()).map_err(Clone::clone));
    });
    // Where the control plane refused the device, the remaining checks open it again.
    let reopened;
    let device = match &opened {
        Ok(d) => d.backend().device(),
        Err(_) => match Mlx5Device::open(Some(&name)) {
            Ok(d) => {
                reopened = d;
                &reopened
            }
            Err(e) => {
                progress.record(|f| f.umem = Some(Err(e.to_string())));
                return;
            }
        },
    };
    progress.step("registering host memory as UMEM (mlx5dv_devx_umem_reg)");
    let umem = DmaBuffer::zeroed(4096, 4096)
        .map_err(|e| format!("no 4 KiB host buffer: {e}"))
        .and_then(|buffer| {
            device
                .register_host_umem(Arc::new(buffer))
                .map(drop)
                .map_err(|e| e.to_string())
        });
    progress.record(|f| f.umem = Some(umem));
    progress.step("querying port 1 (ibv_query_port)");
    let port = device.query_port(PORT);
    let gid_len = port.as_ref().map_or(0, |p| p.gid_table_len.min(MAX_GIDS));
    progress.record(|f| f.port = Some(port));
    progress.step("reading port 1's GID table (ibv_query_gid)");
    let gids = (0..gid_len)
        .map(|i| device.query_gid(PORT, i).ok())
        .collect();
    progress.record(|f| f.gids = gids);
}

fn query_caps(backend: &Mlx5Backend) -> Result<(GeneralCaps, Option<AtomicCaps>), NicError> {
    let query = |capability| -> Result<QueryHcaCapOutput, NicError> {
        let input = QueryHcaCap::current(capability).encode()?;
        let mut output = vec![0u8; QueryHcaCapOutput::OUTPUT_BYTES];
        // SAFETY: QUERY_HCA_CAP names no memory and no object; the device writes only
        // `output`.
        unsafe { backend.general_command(&input, &mut output)? };
        Ok(QueryHcaCapOutput::decode(capability, &output)?)
    };
    let QueryHcaCapOutput::General(general) = query(CapabilityType::General)? else {
        return Err(NicError::Unsupported {
            what: "QUERY_HCA_CAP returned another page than the general one".into(),
        });
    };
    let atomic = if general.atomic {
        match query(CapabilityType::Atomic)? {
            QueryHcaCapOutput::Atomic(a) => Some(a),
            QueryHcaCapOutput::General(_) => None,
        }
    } else {
        None
    };
    Ok((general, atomic))
}

fn skip(id: &'static str, check: &'static str, why: &str) -> Row {
    Row::new(id, check, Status::Skip)
        .needed()
        .result(format!("cannot run: {why}"))
}

/// Why the NIC rows after `libraries` cannot run, if they cannot.
fn blocked(f: &NicFacts) -> Option<String> {
    match &f.libraries {
        Some(Err(_)) => Some("rdma-core's libraries did not load (see above)".into()),
        None => Some(interrupted(f, "loading the libraries")),
        Some(Ok(missing)) => required(missing)
            .first()
            .map(|first| format!("{MLX5} lacks {first}, which the mlx5 backend needs (see above)")),
    }
}

/// The entry points of `missing` the mlx5 backend cannot do without (all but
/// `mlx5dv_devx_umem_reg_ex`, needed only for DMA-BUF UMEM: the `dmabuf_api` row).
fn required(missing: &[&'static str]) -> Vec<&'static str> {
    missing
        .iter()
        .copied()
        .filter(|s| *s != "mlx5dv_devx_umem_reg_ex")
        .collect()
}

fn interrupted(f: &NicFacts, what: &str) -> String {
    match f.ending.as_ref().and_then(Ending::reason) {
        Some(reason) => format!("the probe stopped: {reason}"),
        None => format!("the probe did not get to {what}"),
    }
}

/// The rows of the NIC checks, in bring-up order.
pub fn rows(
    f: &NicFacts,
    sysfs: &[SysfsNic],
    host: &HostFacts,
    requested: Option<&str>,
) -> Vec<Row> {
    let mut rows = vec![libraries_row(f), devices_row(f, sysfs, host, requested)];
    let device = match &f.opened {
        Some(Ok(name)) => Ok(name.clone()),
        Some(Err(Mlx5Error::DevxUnavailable { device, .. })) => Err(Some(device.clone())),
        _ => Err(None),
    };
    rows.push(devx_row(f));
    let usable = match (&device, blocked(f)) {
        (_, Some(why)) => Err(why),
        (Ok(_), None) => Ok(()),
        (Err(Some(d)), None) => Err(format!("no DEVX context on {d}")),
        (Err(None), None) => Err(match &f.opened {
            None => interrupted(f, "opening a device"),
            Some(_) => "no mlx5 device to open".into(),
        }),
    };
    let name = device.clone().ok().unwrap_or_default();
    match &usable {
        Err(why) => {
            for (id, check) in [
                ("uar", "UAR allocation"),
                ("hca_caps", "HCA capabilities"),
                ("cqe_version", "CQE version"),
                ("send_queue", "send queues"),
                ("inline", "inline size"),
                ("atomics", "atomics"),
                ("dc", "DC transport"),
                ("umem", "UMEM registration"),
                ("port", "port 1"),
                ("port_address", "port 1 address"),
            ] {
                rows.push(skip(id, check, why));
            }
        }
        Ok(()) => {
            rows.push(uar_row(f, &name));
            rows.extend(caps_rows(f));
            rows.push(umem_row(f, &name));
            rows.extend(port_rows(f, sysfs, &name));
        }
    }
    rows.push(dmabuf_api_row(f));
    rows
}

fn libraries_row(f: &NicFacts) -> Row {
    let row = Row::new("libraries", "rdma-core libraries", Status::Ok)
        .needed()
        .how(format!(
            "dlopen {IBVERBS} and {MLX5}, dlsym of every mlx5dv/DEVX entry point ibgda uses"
        ));
    let emulated = f
        .emulator
        .as_ref()
        .map(|v| format!(" ({IBVERBS} is the emulated ConnectX, {v})"))
        .unwrap_or_default();
    match &f.libraries {
        None => row
            .status(Status::Fail)
            .result(interrupted(f, "loading the libraries")),
        Some(Err(e)) => row
            .status(Status::Fail)
            .result(match e {
                Mlx5Error::LibraryMissing { library, reason } => {
                    format!("{library} could not be loaded: {reason}")
                }
                Mlx5Error::LibraryMismatch { library, reason } => format!(
                    "{library} is not from the rdma-core of the {IBVERBS} loaded before it: {reason}"
                ),
                _ => "the libraries could not be loaded".to_owned(),
            })
            .remedy(e.to_string()),
        Some(Ok(missing)) => {
            let required = required(missing);
            match required.first() {
                None => row.result(format!(
                    "{IBVERBS} and {MLX5} load with every entry point the mlx5 backend needs{emulated}"
                )),
                Some(first) => row
                    .status(Status::Fail)
                    .result(format!("{MLX5} lacks {}", required.join(", ")))
                    .remedy(
                        Mlx5Error::Unsupported {
                            symbol: first,
                            library: MLX5,
                        }
                        .to_string(),
                    ),
            }
        }
    }
}

fn devices_row(f: &NicFacts, sysfs: &[SysfsNic], host: &HostFacts, requested: Option<&str>) -> Row {
    let row = Row::new("rdma_devices", "RDMA devices", Status::Ok)
        .needed()
        .how(
            "ibv_get_device_list and mlx5dv_is_supported; kernel drivers from \
         /sys/class/infiniband/*/device/driver",
        );
    if let Some(why) = blocked(f) {
        return row
            .status(Status::Skip)
            .result(format!("cannot run: {why}"));
    }
    let listed = match &f.devices {
        None => {
            return row
                .status(Status::Fail)
                .result(interrupted(f, "listing the devices"))
        }
        Some(Err(e)) => {
            let result = match e {
                Mlx5Error::NoDevice { errno, .. } if *errno != 0 => format!(
                    "no RDMA device: ibv_get_device_list failed with {} ({errno}){}",
                    ibgda::nic::mlx5::errno_name(*errno),
                    if *errno == ibgda::nic::mlx5::ENOSYS {
                        ", the kernel has no verbs support"
                    } else {
                        ""
                    }
                ),
                _ => "ibv_get_device_list failed".to_owned(),
            };
            return row
                .status(Status::Fail)
                .result(result)
                .remedy(e.to_string());
        }
        Some(Ok(listed)) => listed,
    };
    let describe = |d: &DeviceInfo| {
        let driver = sysfs
            .iter()
            .find(|s| s.name == d.name)
            .and_then(|s| s.driver.clone())
            .map(|k| format!(", kernel driver {k}"))
            .unwrap_or_default();
        if d.mlx5 {
            format!("{} (mlx5{driver})", d.name)
        } else {
            format!("{} (not mlx5{driver})", d.name)
        }
    };
    let list: Vec<String> = listed.iter().map(describe).collect();
    let from = match requested {
        Some(name) => format!("IBGDA_NIC/--device names {name}"),
        None => "the first mlx5 device".into(),
    };
    match &f.opened {
        Some(Err(e @ (Mlx5Error::NoDevice { .. } | Mlx5Error::NotMlx5 { .. }))) => {
            let mut result = if list.is_empty() {
                "verbs lists no RDMA device".to_owned()
            } else {
                format!("{} ({from})", list.join(", "))
            };
            if listed.is_empty() && !sysfs.is_empty() {
                let names: Vec<&str> = sysfs.iter().map(|s| s.name.as_str()).collect();
                result.push_str(&format!(
                    "; /sys/class/infiniband has {} but verbs cannot open {}: {}",
                    names.join(", "),
                    if names.len() == 1 { "it" } else { "them" },
                    if host.infiniband_devices.is_empty() {
                        "/dev/infiniband is empty or missing (a container needs it passed in)"
                    } else {
                        "ib_uverbs may not be loaded"
                    }
                ));
            }
            if requested.is_some_and(|r| r.starts_with("soft")) {
                result.push_str(
                    "; `soft` names ibgda's software NIC, which needs nothing of this host",
                );
            }
            row.status(Status::Fail)
                .result(result)
                .remedy(e.to_string())
        }
        Some(Ok(name)) | Some(Err(Mlx5Error::DevxUnavailable { device: name, .. })) => {
            let emulated = f
                .emulator
                .as_ref()
                .map(|_| " on the emulated ConnectX")
                .unwrap_or_default();
            row.result(format!(
                "{}; checking {name} ({from}){emulated}",
                list.join(", ")
            ))
        }
        Some(Err(e)) => row
            .status(Status::Fail)
            .result(format!("{}; opening failed", list.join(", ")))
            .remedy(e.to_string()),
        None => row.status(Status::Fail).result(format!(
            "{}; {}",
            list.join(", "),
            interrupted(f, "opening a device")
        )),
    }
}

fn devx_row(f: &NicFacts) -> Row {
    let row = Row::new("devx_context", "DEVX context", Status::Ok)
        .needed()
        .how("mlx5dv_open_device with MLX5DV_CONTEXT_FLAGS_DEVX");
    if let Some(why) = blocked(f) {
        return row
            .status(Status::Skip)
            .result(format!("cannot run: {why}"));
    }
    match &f.opened {
        Some(Ok(name)) => row.result(format!("opened {name} with DEVX")),
        Some(Err(e @ Mlx5Error::DevxUnavailable { device, errno })) => row
            .status(Status::Fail)
            .result(format!(
                "the kernel refused DEVX on {device}: {} ({errno})",
                ibgda::nic::mlx5::errno_name(*errno)
            ))
            .remedy(e.to_string()),
        Some(Err(_)) => row
            .status(Status::Skip)
            .result("cannot run: no mlx5 device to open"),
        None => row
            .status(Status::Fail)
            .result(interrupted(f, "opening a device")),
    }
}

fn uar_row(f: &NicFacts, device: &str) -> Row {
    let row = Row::new("uar", "UAR allocation", Status::Ok)
        .needed()
        .how("mlx5dv_devx_alloc_uar (non-cached dedicated, then non-cached, then BlueFlame), then mlx5dv_devx_free_uar");
    match &f.uar {
        None => row
            .status(Status::Fail)
            .result(interrupted(f, "allocating a UAR")),
        Some(Ok(kind)) => row.result(format!(
            "allocated and freed a UAR page on {device} ({})",
            match kind {
                UarKind::NonCachedDedicated => "non-cached, dedicated",
                UarKind::NonCached => "non-cached, shared per context",
                UarKind::BlueFlame => "BlueFlame, write-combining",
            }
        )),
        Some(Err(e)) => {
            let errno = match e {
                Mlx5Error::UarAllocation { errno } => *errno,
                _ => 0,
            };
            row.status(Status::Fail)
                .result(format!(
                    "no UAR page on {device}: {} ({errno}){}",
                    ibgda::nic::mlx5::errno_name(errno),
                    if errno == EPERM || errno == 13 {
                        " as in an unprivileged container"
                    } else {
                        ""
                    }
                ))
                .remedy(e.to_string())
        }
    }
}

fn caps_rows(f: &NicFacts) -> Vec<Row> {
    let query_row = Row::new("hca_caps", "HCA capabilities", Status::Ok)
        .needed()
        .how("QUERY_HCA_CAP (current values) of the general and atomic pages, through mlx5dv_devx_general_cmd");
    let ids = [
        ("cqe_version", "CQE version"),
        ("send_queue", "send queues"),
        ("inline", "inline size"),
        ("atomics", "atomics"),
        ("dc", "DC transport"),
    ];
    let (general, atomic) = match &f.caps {
        Some(Ok((g, a))) => (g, a.as_ref()),
        other => {
            let (result, remedy) = match other {
                Some(Err(NicError::Command(error))) => (
                    format!("QUERY_HCA_CAP failed in firmware: {error}"),
                    Mlx5Error::Command {
                        opcode: opcode::QUERY_HCA_CAP,
                        error: error.clone(),
                    }
                    .to_string(),
                ),
                Some(Err(e)) => ("QUERY_HCA_CAP failed".to_owned(), e.to_string()),
                _ => (interrupted(f, "QUERY_HCA_CAP"), String::new()),
            };
            let mut rows = vec![query_row.status(Status::Fail).result(result).remedy(remedy)];
            rows.extend(
                ids.map(|(id, check)| skip(id, check, "the capabilities could not be read")),
            );
            return rows;
        }
    };
    let mut rows = vec![query_row.result(format!(
        "general page read{}",
        if general.atomic {
            " and the atomic page"
        } else {
            " (the device reports no atomics: no atomic page)"
        }
    ))];
    let how = |field: &str| format!("QUERY_HCA_CAP: {field}");
    // CQE version: the CQ parser and the device library read version 1 only.
    let cqe = Row::new("cqe_version", "CQE version", Status::Ok)
        .needed()
        .how(how("cmd_hca_cap.cqe_version"));
    rows.push(if general.cqe_version == 1 {
        cqe.result("cqe_version 1")
    } else {
        cqe.status(Status::Fail)
            .result(format!(
                "cqe_version {}: ibgda's CQ parser and device library read only version 1, \
                 and the control plane refuses the device",
                general.cqe_version
            ))
            .remedy(
                "update the NIC firmware (and rdma-core): every ConnectX that GPU-initiated \
                 RDMA stacks support reports CQE version 1 (NVSHMEM, DeepEP and NCCL require it too)",
            )
    });
    let rest = [ids[1], ids[2], ids[3], ids[4]];
    let caps = match &f.control_plane {
        Some(Ok(caps)) => caps,
        Some(Err(e @ NicError::Capability { name, found, .. })) if name.contains("endianness") => {
            rows.push(
                Row::new("atomics", "atomics", Status::Fail)
                    .needed()
                    .how(how("atomic_caps.atomic_req_8B_endianness_mode"))
                    .result(format!(
                        "atomic_req_8B_endianness_mode is {found}, a value the PRM reserves: \
                         the control plane refuses the device"
                    ))
                    .remedy(format!(
                        "{e}; update the NIC firmware, or report the device to ibgda's maintainers"
                    )),
            );
            rows.extend(
                [ids[1], ids[2], ids[4]]
                    .map(|(id, check)| skip(id, check, "the control plane refuses the device")),
            );
            return rows;
        }
        Some(Err(NicError::Capability { name, .. })) if *name == "cqe_version" => {
            rows.extend(rest.map(|(id, check)| {
                skip(
                    id,
                    check,
                    "the control plane refuses the device (its CQE version)",
                )
            }));
            return rows;
        }
        Some(Err(e)) => {
            let why = format!("the control plane could not open the device: {e}");
            rows.extend(rest.map(|(id, check)| skip(id, check, &why)));
            return rows;
        }
        None => {
            let why = interrupted(f, "opening the device through the control plane");
            rows.extend(rest.map(|(id, check)| skip(id, check, &why)));
            return rows;
        }
    };
    rows.push(send_queue_row(general, caps));
    rows.push(inline_row(caps));
    rows.push(atomics_row(atomic, caps));
    rows.push(dc_row(general, caps));
    rows
}

fn send_queue_row(general: &GeneralCaps, caps: &DeviceCaps) -> Row {
    let row = Row::new("send_queue", "send queues", Status::Ok)
        .needed()
        .how("QUERY_HCA_CAP: cmd_hca_cap.rc, log_max_qp_sz, log_max_cq_sz");
    let largest = 1u64 << caps.log_max_qp_size.min(63);
    let ibgda_max = RingSize::MAX_WQEBBS as u64;
    let wqe_max = u64::from(WqeLimits::MAX_WQEBBS);
    let found = format!(
        "RC {}, send queues up to 2^{} = {largest} WQEBBs, CQs up to 2^{} CQEs",
        if general.rc {
            "supported"
        } else {
            "not supported"
        },
        caps.log_max_qp_size,
        caps.log_max_cq_size
    );
    if !general.rc {
        row.status(Status::Fail)
            .result(found)
            .remedy("ibgda's queue pairs are RC (and DC initiators): use a ConnectX that reports the RC transport")
    } else if largest < wqe_max {
        row.status(Status::Fail).result(found).remedy(format!(
            "a send queue must hold the largest WQE ({wqe_max} WQEBBs); this device's limit is \
             below it: use another device"
        ))
    } else if largest < ibgda_max {
        row.status(Status::Warn).result(found).remedy(format!(
            "rings above {largest} WQEBBs are refused with a typed error (ibgda allows up to \
             {ibgda_max}); ask for at most {largest}"
        ))
    } else {
        row.result(found)
    }
}

fn inline_row(caps: &DeviceCaps) -> Row {
    let row = Row::new("inline", "inline size", Status::Ok)
        .needed()
        .how("QUERY_HCA_CAP: cmd_hca_cap.max_wqe_sz_sq (inline = that less the control, remote address and inline headers)");
    let found = format!(
        "send WQEs up to {} B: inline payloads up to {} B",
        caps.max_send_wqe_bytes,
        caps.max_inline()
    );
    // One basic block: the NOPs queues pad and signal with, and the WRITE of a signal (28
    // inline bytes fit in it).
    if usize::from(caps.max_send_wqe_bytes) < ibgda::wqe::WQEBB_BYTES {
        row.status(Status::Fail)
            .result(found)
            .remedy("the device takes no WQE of one basic block (64 B): use another device")
    } else {
        row.result(found)
    }
}

fn atomics_row(atomic: Option<&AtomicCaps>, caps: &DeviceCaps) -> Row {
    let row = Row::new("atomics", "atomics", Status::Ok).how(
        "QUERY_HCA_CAP: cmd_hca_cap.atomic; atomic_caps.atomic_operations, atomic_size_qp, \
         atomic_req_8B_endianness_mode",
    );
    let endianness = match caps.atomic_endianness {
        AtomicEndianness::BigEndian => "big-endian (network order) 8-byte results",
        AtomicEndianness::HostEndian => "host-endian 8-byte results",
    };
    let found = match atomic {
        None => "no atomics".to_owned(),
        Some(a) => format!(
            "atomic_size_qp {:#x} ({}), operations {:#x} (masked {}), {endianness}{}",
            a.atomic_size_qp,
            match (a.atomic_size_qp & 0x4 != 0, a.atomic_size_qp & 0x8 != 0) {
                (true, true) => "4 and 8 bytes",
                (false, true) => "8 bytes",
                (true, false) => "4 bytes only",
                (false, false) => "no operand size",
            },
            a.atomic_operations,
            if caps.masked_atomics { "yes" } else { "no" },
            if a.host_endianness_supported {
                "; host-endian mode selectable"
            } else {
                ""
            }
        ),
    };
    match check_atomic_capabilities(caps) {
        Ok(()) => row.result(found),
        Err(e) => row
            .status(Status::Warn)
            .result(format!(
                "{found}: atomic WQEs (compare-swap, fetch-add, the signals built on them) fail"
            ))
            .remedy(e.to_string()),
    }
}

fn dc_row(general: &GeneralCaps, caps: &DeviceCaps) -> Row {
    let row = Row::new("dc", "DC transport", Status::Ok)
        .how("QUERY_HCA_CAP: cmd_hca_cap.dct, compact_address_vector, log_max_ra_req_dc");
    if !caps.dc {
        return row
            .status(Status::Warn)
            .result("no DC transport: RC queue pairs only")
            .remedy(
                "DC initiators and targets cannot be made here (their creation fails in \
                 firmware); use RC queue pairs, one per peer",
            );
    }
    row.result(format!(
        "DC supported, {} address vectors, up to 2^{} reads/atomics in flight per DCI",
        if caps.compact_address_vector {
            "compact (16 B) and full (48 B)"
        } else {
            "full (48 B) only"
        },
        general.log_max_ra_req_dc
    ))
}

fn umem_row(f: &NicFacts, device: &str) -> Row {
    let row = Row::new("umem", "UMEM registration", Status::Ok)
        .needed()
        .how("mlx5dv_devx_umem_reg of 4 KiB of host memory, then mlx5dv_devx_umem_dereg");
    match &f.umem {
        None => row
            .status(Status::Fail)
            .result(interrupted(f, "registering a UMEM")),
        Some(Ok(())) => row.result(format!(
            "registered and released 4 KiB of host queue memory on {device}"
        )),
        Some(Err(e)) => row
            .status(Status::Fail)
            .result(format!(
                "host queue memory cannot be registered on {device}"
            ))
            .remedy(e.clone()),
    }
}

fn dmabuf_api_row(f: &NicFacts) -> Row {
    let row = Row::new("dmabuf_api", "DMA-BUF in rdma-core", Status::Ok).how(format!(
        "dlsym: mlx5dv_devx_umem_reg_ex in {MLX5} (queue memory), ibv_reg_dmabuf_mr in {IBVERBS} (data)"
    ));
    let Some(Ok(missing)) = &f.libraries else {
        return row
            .status(Status::Skip)
            .result("cannot run: rdma-core's libraries did not load");
    };
    let umem_ex = !missing.contains(&"mlx5dv_devx_umem_reg_ex");
    let mr = f.reg_dmabuf_mr.unwrap_or(false);
    if umem_ex && mr {
        return row.result("both present: GPU memory can be registered by DMA-BUF");
    }
    let mut lacking = Vec::new();
    if !umem_ex {
        lacking.push(format!("{MLX5} has no mlx5dv_devx_umem_reg_ex"));
    }
    if !mr {
        lacking.push(format!("{IBVERBS} has no ibv_reg_dmabuf_mr"));
    }
    row.status(Status::Warn)
        .result(format!(
            "{}: GPU memory can reach the NIC only through the peer-memory module",
            lacking.join("; ")
        ))
        .remedy(
            Mlx5Error::Unsupported {
                symbol: if umem_ex {
                    "ibv_reg_dmabuf_mr"
                } else {
                    "mlx5dv_devx_umem_reg_ex"
                },
                library: if umem_ex { IBVERBS } else { MLX5 },
            }
            .to_string(),
        )
}

/// `ibv_port_state`'s names.
fn port_state(state: u32) -> &'static str {
    match state {
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "NOP",
    }
}

fn gid_text(gid: &[u8; 16]) -> String {
    format!("{:?}", ibgda::nic::Gid(*gid))
}

fn port_rows(f: &NicFacts, sysfs: &[SysfsNic], device: &str) -> Vec<Row> {
    let port_row = Row::new("port", "port 1", Status::Ok)
        .needed()
        .how("ibv_query_port (state, link layer, active MTU)");
    let info = match &f.port {
        None => {
            return vec![
                port_row
                    .status(Status::Fail)
                    .result(interrupted(f, "querying port 1")),
                skip(
                    "port_address",
                    "port 1 address",
                    "port 1 could not be queried",
                ),
            ]
        }
        Some(Err(e)) => {
            return vec![
                port_row
                    .status(Status::Fail)
                    .result(format!("port 1 of {device} could not be queried"))
                    .remedy(e.to_string()),
                skip(
                    "port_address",
                    "port 1 address",
                    "port 1 could not be queried",
                ),
            ]
        }
        Some(Ok(info)) => info,
    };
    let layer = match info.link_layer {
        LinkLayer::InfiniBand | LinkLayer::Unspecified => "InfiniBand",
        LinkLayer::Ethernet => "Ethernet (RoCE)",
    };
    let mtu = match info.active_mtu {
        code @ 1..=5 => format!("{} B", 128u32 << code),
        code => format!("code {code}"),
    };
    let found = format!("{}, {layer}, active MTU {mtu}", port_state(info.state));
    let port = if info.is_active() {
        port_row.result(found)
    } else {
        port_row
            .status(Status::Fail)
            .result(found)
            .remedy(match info.link_layer {
                LinkLayer::Ethernet => {
                    "bring the link up: check the cable and the switch port, and that the port's \
                 network interface is up (`ip link set <netdev> up`; `ibdev2netdev` names it)"
                }
                _ => {
                    "bring the link up: check the cable and the switch port; an InfiniBand port \
                 stays INIT until a subnet manager configures it (run opensm or enable the \
                 switch's; `ibstat` shows the state and the SM LID)"
                }
            })
    };
    vec![
        port,
        address_row(f, info, sysfs.iter().find(|s| s.name == device), device),
    ]
}

fn address_row(f: &NicFacts, info: &PortInfo, sysfs: Option<&SysfsNic>, device: &str) -> Row {
    let row = Row::new("port_address", "port 1 address", Status::Ok).needed();
    let populated: Vec<(usize, [u8; 16])> = f
        .gids
        .iter()
        .enumerate()
        .filter_map(|(i, g)| g.filter(|g| *g != [0; 16]).map(|g| (i, g)))
        .collect();
    if info.link_layer != LinkLayer::Ethernet {
        let row = row.how("ibv_query_port (LID), ibv_query_gid (GID 0)");
        let gid0 = populated
            .first()
            .map(|(i, g)| format!(", GID {i} {}", gid_text(g)))
            .unwrap_or_default();
        return if info.lid == 0 {
            row.status(Status::Fail)
                .result(format!(
                    "LID 0: the port has no address on the subnet{gid0}"
                ))
                .remedy(
                    "a subnet manager assigns LIDs: run opensm on a host of the fabric or enable \
                     the switch's, then wait for the port to become ACTIVE (`ibstat`: Base lid)",
                )
        } else {
            row.result(format!("LID {:#06x}{gid0}", info.lid))
        };
    }
    let types_dir = format!("/sys/class/infiniband/{device}/ports/1/gid_attrs/types");
    let row = row.how(format!(
        "ibv_query_gid over the GID table; types from {types_dir}/<index>"
    ));
    if populated.is_empty() {
        return row
            .status(Status::Fail)
            .result(format!(
                "no GID: all {} entries of the RoCE port's table are empty",
                f.gids.len()
            ))
            .remedy(
                "RoCE addresses are the network interface's IP addresses: give the port's \
                 netdev an IPv4 or IPv6 address (`ip addr add <address> dev <netdev>`; \
                 `ibdev2netdev` names it); the kernel then adds RoCE v1 and v2 GIDs for it \
                 (`show_gids` lists them with their types)",
            );
    }
    let typed = sysfs.filter(|s| s.gid_types_listed);
    let Some(typed) = typed else {
        return row.status(Status::Warn).result(format!(
            "{} populated GIDs (first: index {} {}); their types (RoCE v1 or v2) cannot be \
             read: {types_dir} is missing",
            populated.len(),
            populated[0].0,
            gid_text(&populated[0].1)
        ));
    };
    let v2: Vec<&(usize, [u8; 16])> = populated
        .iter()
        .filter(|(i, _)| {
            typed
                .gid_types
                .iter()
                .any(|(t, kind)| *t as usize == *i && kind == "RoCE v2")
        })
        .collect();
    match v2.first() {
        Some((i, g)) => row.result(format!(
            "{} RoCE v2 GID{} (first: index {i} {})",
            v2.len(),
            if v2.len() == 1 { "" } else { "s" },
            gid_text(g)
        )),
        None => row
            .status(Status::Fail)
            .result(format!(
                "no RoCE v2 GID among {} populated entries (RoCE v1 only): RoCE v2 is what \
                 routed networks carry and what ibgda's control plane sends from",
                populated.len()
            ))
            .remedy(
                "give the port's netdev an IP address (RoCE v2 GIDs are made from IP \
                 addresses; a link-local-only interface may have only RoCE v1 entries), and \
                 check that the kernel's RoCE v2 support is enabled (`show_gids` shows the types)",
            ),
    }
}

#[cfg(test)]
mod tests;
