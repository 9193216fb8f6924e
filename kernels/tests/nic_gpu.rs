//! The CUDA side of the NIC backends on a real GPU (the H200 machine): ignored by default,
//! since CI has no GPU. Run there with `--ignored` (kernels/README.md: build here, run
//! there).

use ibgda::nic::gpu_access::DmaBufExporter;
use ibgda_kernels::gpu::Gpu;
use ibgda_kernels::nic::CudaNicAccess;

/// The `exp_name` line of a DMA-BUF's fdinfo: present only for DMA-BUF file descriptors.
fn dmabuf_exporter_name(fd: i32) -> Option<String> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("exp_name:").map(|v| v.trim().to_owned()))
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn gpu_queue_memory_exports_as_dmabuf_where_the_driver_supports_it() {
    let gpu = std::sync::Arc::new(Gpu::open(0).expect("GPU"));
    let access = CudaNicAccess::new(gpu.clone());
    let supported = access.dmabuf_supported().expect("attribute");
    // 2 MiB: an allocation of its own, so the page-aligned export stays inside it.
    let buffer = gpu.device_buffer(2 << 20).expect("device buffer");
    println!(
        "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = {supported}; buffer at {:#x}",
        buffer.addr()
    );
    match access.export(&buffer) {
        Ok(range) => {
            assert!(
                supported,
                "export worked though the device reports no DMA-BUF"
            );
            assert_eq!(range.offset(), buffer.addr() % 4096);
            assert_eq!(range.len() % 4096, 0);
            assert!(range.len() >= range.offset() + buffer.len() as u64);
            let exporter = dmabuf_exporter_name(range.fd());
            println!(
                "DMA-BUF fd {} offset {} len {} exporter {exporter:?}",
                range.fd(),
                range.offset(),
                range.len()
            );
            assert!(exporter.is_some(), "fd {} is not a DMA-BUF", range.fd());
        }
        Err(e) => {
            println!("DMA-BUF export refused: {e}");
            assert!(!supported, "the device reports DMA-BUF support, yet: {e}");
            assert_ne!(e.code, 0, "a refusal carries the driver's code");
        }
    }
}
