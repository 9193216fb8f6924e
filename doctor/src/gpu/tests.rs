//! The GPU rows over facts as the probe records them on GPU hosts (the emulated ConnectX
//! does not model a GPU): the errors are the mlx5 backend's own typed errors, built as it
//! builds them, and the driver files are in the formats `host.rs` documents.

use super::*;
use crate::path::{self, DoorbellPath};

const OPEN_DRIVER: &str = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  \
    Release Build  (dvs-builder@U22-I3-B17-02-5)  Tue Sep 23 09:55:41 UTC 2025\n";
const PROPRIETARY_DRIVER: &str =
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Tue Jun  6 22:20:39 UTC 2023\n";
const PARAMS_PLAIN: &str =
    "EnableStreamMemOPs: 0\nRegistryDwords: \"\"\nRegistryDwordsPerDevice: \"\"\n";
const PARAMS_OVERRIDE: &str =
    "EnableStreamMemOPs: 0\nRegistryDwords: \"PeerMappingOverride=1;\"\nRegistryDwordsPerDevice: \"\"\n";

fn h200() -> GpuInfo {
    GpuInfo {
        ordinal: 0,
        name: "NVIDIA H200".into(),
        bus_id: Some("0000:19:00.0".into()),
        dmabuf: Some(true),
        gpudirect_rdma: Some(true),
        compute: Some((9, 0)),
    }
}

/// A GPU that opened and exported its memory, with no NIC used.
fn gpu_alone() -> GpuFacts {
    GpuFacts {
        driver_library: Some(true),
        init: Some(Ok(())),
        gpus: vec![h200()],
        tested: Some(0),
        context: Some(Ok(())),
        allocation: Some(Ok(())),
        export: Some(Ok(65536)),
        ending: Some(Ending::Finished),
        ..GpuFacts::default()
    }
}

/// The same GPU with every NIC step having run on `mlx5_0`.
fn gpu_with_nic(
    dmabuf: Result<Registered, Mlx5Error>,
    peer: Result<(), Mlx5Error>,
    mapping: Result<(), NicError>,
) -> GpuFacts {
    GpuFacts {
        nic: Some("mlx5_0".into()),
        umem_dmabuf: Some(dmabuf),
        umem_peer: Some(peer),
        uar_mapping: Some(mapping),
        ..gpu_alone()
    }
}

/// GPU memory registered by DMA-BUF.
fn by_dmabuf() -> Result<Registered, Mlx5Error> {
    Ok(Registered {
        path: GpuPath::DmaBuf,
        dmabuf_error: None,
    })
}

fn host(version: &str, params: &str, euid: u32, modules: &str) -> HostFacts {
    HostFacts {
        nvidia_version: Some(version.into()),
        nvidia_params: Some(params.into()),
        nvidia_gpus: vec!["0000:19:00.0".into()],
        modules: Some(modules.into()),
        kernel_release: Some("6.8.0-45-generic".into()),
        euid,
        ..HostFacts::default()
    }
}

fn by_id<'a>(rows: &'a [Row], id: &str) -> &'a Row {
    rows.iter().find(|r| r.id == id).unwrap()
}

/// What the backend returns when both ways fail (its `gpu_registration`).
fn both_failed(peer_errno: i32) -> Mlx5Error {
    Mlx5Error::gpu_registration(
        &DmaBufExportError {
            code: 14,
            message: "mlx5dv_devx_umem_reg_ex with the DMA-BUF failed (errno in code)".into(),
        },
        peer_errno,
    )
}

fn refused() -> NicError {
    NicError::from(Mlx5Error::from_uar_mapping(
        ibgda::nic::gpu_access::IoMapError {
            code: 800,
            message: "DriverError(CUDA_ERROR_NOT_PERMITTED, \"operation not permitted\")".into(),
        },
    ))
}

fn path_of(g: &GpuFacts, rows: &[Row]) -> (Option<DoorbellPath>, bool) {
    let (actual, _, predicted) = path::decide(&path_inputs(g, rows, g.nic.is_some()));
    (actual, predicted)
}

#[test]
fn a_gpu_host_with_everything_takes_the_gpu_path() {
    let g = gpu_with_nic(by_dmabuf(), Ok(()), Ok(()));
    let h = host(
        OPEN_DRIVER,
        PARAMS_OVERRIDE,
        1000,
        "nvidia_peermem 16384 0 - Live 0x0\n",
    );
    let rows = rows(&g, &h, None);
    for r in &rows {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert!(!r.needed, "GPU rows are never needed by themselves: {r:?}");
    }
    assert_eq!(
        by_id(&rows, "gpu").result,
        "1 GPU: 0 NVIDIA H200 (0000:19:00.0, sm_90, DMA-BUF yes, GPUDirect RDMA yes); driver \
         580.95.05 (open kernel modules); checking GPU 0"
    );
    assert!(by_id(&rows, "uar_gpu_mapping")
        .result
        .contains("PeerMappingOverride=1 is set (RegistryDwords)"));
    assert_eq!(path_of(&g, &rows), (Some(DoorbellPath::Gpu), false));
}

#[test]
fn a_refused_mapping_gives_the_cpu_assisted_doorbell() {
    let g = gpu_with_nic(by_dmabuf(), Ok(()), Err(refused()));
    let h = host(OPEN_DRIVER, PARAMS_PLAIN, 1000, "");
    let rows = rows(&g, &h, None);
    let mapping = by_id(&rows, "uar_gpu_mapping");
    assert_eq!(mapping.status, Status::Warn);
    assert!(mapping.result.starts_with(
        "the CUDA driver refused to map a UAR page of mlx5_0 (CUDA error 800, not permitted); \
         PeerMappingOverride is not set"
    ));
    // The remedy is the backend's own message for the refusal.
    let Some(NicError::Backend(b)) = g.uar_mapping.clone().and_then(Result::err) else {
        unreachable!()
    };
    assert_eq!(
        mapping.remedy,
        b.downcast_ref::<Mlx5Error>().unwrap().to_string()
    );
    assert!(mapping.remedy.contains("PeerMappingOverride=1"));
    assert_eq!(path_of(&g, &rows), (Some(DoorbellPath::CpuAssisted), false));
}

#[test]
fn a_dmabuf_umem_efault_falls_back_to_peer_memory() {
    let efault = DmaBufExportError {
        code: 14,
        message: "mlx5dv_devx_umem_reg_ex with the DMA-BUF failed (errno in code)".into(),
    };
    let g = gpu_with_nic(
        Ok(Registered {
            path: GpuPath::PeerMemory,
            dmabuf_error: Some(efault.clone()),
        }),
        Ok(()),
        Ok(()),
    );
    let h = host(
        OPEN_DRIVER,
        PARAMS_OVERRIDE,
        1000,
        "nvidia_peermem 1 0 - Live 0x0\n",
    );
    let rows = rows(&g, &h, None);
    let dmabuf = by_id(&rows, "gpu_memory_dmabuf");
    assert_eq!(dmabuf.status, Status::Warn);
    assert_eq!(
        dmabuf.result,
        format!(
            "the DMA-BUF UMEM registration on mlx5_0 failed ({efault}); the backend fell back \
             to peer memory, which worked"
        )
    );
    assert!(dmabuf.remedy.contains("NVSHMEM issue 67"));
    assert_eq!(by_id(&rows, "gpu_memory_peer").status, Status::Ok);
    assert_eq!(path_of(&g, &rows), (Some(DoorbellPath::Gpu), false));
}

#[test]
fn gpu_memory_that_registers_neither_way_gives_the_proxy() {
    let g = gpu_with_nic(Err(both_failed(14)), Err(both_failed(14)), Ok(()));
    let h = host(PROPRIETARY_DRIVER, PARAMS_OVERRIDE, 0, "");
    let rows = rows(&g, &h, None);
    let dmabuf = by_id(&rows, "gpu_memory_dmabuf");
    assert_eq!(dmabuf.status, Status::Warn);
    assert_eq!(dmabuf.remedy, both_failed(14).to_string());
    assert!(dmabuf.remedy.contains("modprobe nvidia_peermem"));
    let peer = by_id(&rows, "gpu_memory_peer");
    assert_eq!(peer.status, Status::Warn);
    assert!(peer
        .result
        .starts_with("no peer-memory module is loaded; registration through it fails on mlx5_0"));
    assert_eq!(path_of(&g, &rows), (Some(DoorbellPath::Proxy), false));
}

#[test]
fn without_a_nic_the_gpu_side_runs_and_the_rest_is_predicted() {
    // The GPU machine: an H200, no RDMA device.
    let g = gpu_alone();
    let why = Some("the RDMA devices check failed");
    // Not root, no override: the mapping would be refused.
    let h = host(OPEN_DRIVER, PARAMS_PLAIN, 1000, "");
    let rows = rows(&g, &h, why);
    let dmabuf = by_id(&rows, "gpu_memory_dmabuf");
    assert_eq!(dmabuf.status, Status::Ok);
    assert_eq!(
        dmabuf.result,
        "GPU 0 exports queue memory as a DMA-BUF (65536 B); the NIC side is not checked: no NIC \
         to register with (the RDMA devices check failed)"
    );
    let peer = by_id(&rows, "gpu_memory_peer");
    assert_eq!(peer.status, Status::Ok);
    assert!(peer
        .result
        .starts_with("no peer-memory module is loaded, which DMA-BUF makes unnecessary"));
    let mapping = by_id(&rows, "uar_gpu_mapping");
    assert_eq!(mapping.status, Status::Warn);
    assert!(mapping
        .result
        .contains("the driver refuses such a mapping (CUDA error 800"));
    assert!(
        mapping
            .remedy
            .contains("NVreg_RegistryDwords=\\\"PeerMappingOverride=1;\\\"")
            || mapping
                .remedy
                .contains("NVreg_RegistryDwords=\"PeerMappingOverride=1;\"")
    );
    assert_eq!(path_of(&g, &rows), (None, true));
    // As root the mapping is expected to work.
    let root = host(OPEN_DRIVER, PARAMS_PLAIN, 0, "");
    let rows = super::rows(&g, &root, why);
    let mapping = by_id(&rows, "uar_gpu_mapping");
    assert_eq!(mapping.status, Status::Ok);
    assert!(mapping.result.contains("this process runs as root"));
    // The legacy module is called out.
    let legacy = host(OPEN_DRIVER, PARAMS_PLAIN, 0, "nv_peer_mem 1 0 - Live 0x0\n");
    let rows = super::rows(&g, &legacy, why);
    let peer = by_id(&rows, "gpu_memory_peer");
    assert_eq!(peer.status, Status::Warn);
    assert!(peer.remedy.contains("DeepEP issue 36"));
}

#[test]
fn an_export_failure_names_what_stands_in_the_way() {
    let mut g = gpu_alone();
    g.gpus[0].dmabuf = Some(false);
    g.export = Some(Err(DmaBufExportError {
        code: 801,
        message: "cuMemGetHandleForAddressRange: CUDA_ERROR_NOT_SUPPORTED".into(),
    }));
    let mut h = host(PROPRIETARY_DRIVER, PARAMS_PLAIN, 0, "");
    h.kernel_release = Some("5.4.0-150-generic".into());
    let rows = rows(&g, &h, Some("no device"));
    let dmabuf = by_id(&rows, "gpu_memory_dmabuf");
    assert_eq!(dmabuf.status, Status::Warn);
    for cause in [
        "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0",
        "driver 535.54.03 is the proprietary kernel module",
        "Linux 5.4 is older than 5.12",
    ] {
        assert!(dmabuf.result.contains(cause), "{cause}: {}", dmabuf.result);
    }
    assert_eq!(dmabuf.remedy, DMABUF_REMEDY);
    // Neither DMA-BUF nor a peer-memory module: the peer row says GPU memory is stuck.
    let peer = by_id(&rows, "gpu_memory_peer");
    assert_eq!(peer.status, Status::Warn);
    assert!(peer.remedy.starts_with("load the peer-memory module"));
}

#[test]
fn without_a_gpu_every_gpu_row_is_skipped_as_not_needed() {
    let g = GpuFacts {
        driver_library: Some(false),
        ending: Some(Ending::Finished),
        ..GpuFacts::default()
    };
    let rows = rows(&g, &HostFacts::default(), None);
    for r in &rows {
        assert_eq!(r.status, Status::Skip, "{r:?}");
        assert!(
            r.result.contains("not needed for CPU producers"),
            "{}",
            r.result
        );
    }
    assert!(rows[0]
        .result
        .starts_with("cannot run: no GPU (libcuda.so.1 does not load"));
    // GPUs the driver drives but CUDA cannot reach: a warning, with what to do.
    let h = HostFacts {
        nvidia_gpus: vec!["0000:19:00.0".into()],
        ..HostFacts::default()
    };
    let rows = super::rows(&g, &h, None);
    assert_eq!(rows[0].status, Status::Warn);
    assert_eq!(
        rows[0].result,
        "the NVIDIA driver drives 0000:19:00.0 but libcuda.so.1 does not load"
    );
    assert!(rows[0].remedy.contains("nvidia-smi"));
}
