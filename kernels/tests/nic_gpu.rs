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

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn gpu_queue_allocator_aligns_fills_and_exports() {
    use ibgda::nic::{QueueAllocator, QueueFill};
    use ibgda::queue::{Gpu as GpuPlaced, CQE_INIT_OP_OWN};
    use ibgda_kernels::nic::GPU_QUEUE_ALIGN;

    let gpu = std::sync::Arc::new(Gpu::open(0).expect("GPU"));
    let access = CudaNicAccess::new(gpu.clone());
    let cq = QueueAllocator::<GpuPlaced>::allocate(&access, 16 * 64, 64, QueueFill::InvalidCqes)
        .expect("CQ memory");
    let ring = QueueAllocator::<GpuPlaced>::allocate(&access, 4096, 4096, QueueFill::Zero)
        .expect("ring memory");
    for b in [&cq, &ring] {
        assert_eq!(b.addr() % GPU_QUEUE_ALIGN as u64, 0, "{b:?}");
    }
    let cq_bytes = gpu.read_device(&cq).expect("read CQ");
    for (i, byte) in cq_bytes.iter().enumerate() {
        let expected = if i % 64 == 63 { CQE_INIT_OP_OWN } else { 0 };
        assert_eq!(*byte, expected, "CQ byte {i}");
    }
    assert!(gpu
        .read_device(&ring)
        .expect("read ring")
        .iter()
        .all(|&b| b == 0));
    let supported = access.dmabuf_supported().expect("attribute");
    match access.export(&ring) {
        Ok(range) => {
            assert!(supported);
            // 64 KiB-aligned memory starts its DMA-BUF.
            assert_eq!(range.offset(), 0);
            assert!(dmabuf_exporter_name(range.fd()).is_some());
            println!("allocator ring exported: {range:?}");
        }
        Err(e) => {
            assert!(!supported, "{e}");
            println!("DMA-BUF export refused: {e}");
        }
    }
}
