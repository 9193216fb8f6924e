//! Writing a kernel: two ranks on one GPU, each a device of the CUDA software NIC's
//! control plane, register GPU memory as windows, exchange them, and rank 0's kernel puts
//! a message into rank 1's window with a signal that rank 1's kernel waits for
//! (`put_signal.cu`). Needs an NVIDIA GPU (sm_90) and NVRTC 13:
//!
//! ```sh
//! cargo run --release -p ibgda-kernels --example put_signal
//! ```

use std::error::Error;
use std::sync::Arc;

use cudarc::driver::LaunchConfig;
use ibgda::nic::team::{connect_rc, exchange_window, Bootstrap};
use ibgda::nic::{MemoryAccess, QueueSpec, RegisterMemory};
use ibgda::order::GpuReleaseStore;
use ibgda::wqe::RingSize;
use ibgda_kernels::api::{status, CommArg, CommOptions, CommProgram, GpuComm, GpuWindow};
use ibgda_kernels::cudanic::CudaFabric;
use ibgda_kernels::gpu::Gpu;

const LEN: usize = 4096;
type Failure = Box<dyn Error + Send + Sync>;

fn main() -> Result<(), Failure> {
    let gpu = Arc::new(Gpu::open(0)?);
    let fabric = CudaFabric::new(gpu.clone());
    // Each rank, on a thread of its own: a queue pair to every rank, its GPU memory
    // registered, and windows made of every rank's registration.
    let ranks = fabric
        .ranks(2, |b, device| -> Result<_, Failure> {
            let pd = device.alloc_pd()?;
            let spec = QueueSpec::new(RingSize::new(64)?);
            let state = || fabric.producer_state();
            let queues = connect_rc(b, &pd, spec, fabric.queue_memory(), state, GpuReleaseStore)?;
            let message: Vec<u8> = (0..2 * LEN).map(|i| (i + 100 * b.rank()) as u8).collect();
            let data = Arc::new(gpu.device_buffer_from(&message)?);
            let words = Arc::new(gpu.device_buffer(16)?);
            let rw = MemoryAccess::LOCAL_WRITE
                | MemoryAccess::REMOTE_WRITE
                | MemoryAccess::REMOTE_ATOMIC;
            let gpu_memory = |buffer: &Arc<_>, offset, len, access| {
                pd.register_memory(
                    RegisterMemory::Gpu {
                        buffer: Arc::clone(buffer),
                        offset,
                        len,
                    },
                    access,
                )
            };
            let data_mr = gpu_memory(&data, 0, 2 * LEN, rw)?;
            let signal_mr = gpu_memory(&words, 0, 8, rw)?;
            let scratch_mr = gpu_memory(&words, 8, 8, MemoryAccess::LOCAL_WRITE)?;
            let data_window = exchange_window(b, &data_mr, 0)?;
            let signal_window = exchange_window(b, &signal_mr, 1)?;
            Ok((
                device,
                queues,
                data,
                [data_window, signal_window],
                scratch_mr,
                [data_mr, signal_mr],
            ))
        })?
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;

    // Communicators and windows as kernel arguments; a status word per kernel.
    let mut comms = Vec::new();
    let mut windows = Vec::new();
    for (rank, (_, queues, _, w, scratch, _)) in ranks.iter().enumerate() {
        let queues: Vec<_> = queues.iter().collect();
        comms.push(GpuComm::new(
            &gpu,
            rank,
            &queues,
            scratch,
            CommOptions::default(),
        )?);
        windows.push((GpuWindow::new(&gpu, &w[0])?, GpuWindow::new(&gpu, &w[1])?));
    }
    let program = CommProgram::compile(&gpu, "put_signal.cu", include_str!("put_signal.cu"))?;
    let statuses = gpu.device_buffer(8)?;

    // The CUDA software NIC over both devices: their nodes, registrations and queue pairs.
    let devices: Vec<_> = ranks.iter().map(|r| r.0.backend()).collect();
    let all: Vec<_> = ranks.iter().flat_map(|r| r.1.iter()).collect();
    let mut nic = fabric.device_nic(&gpu, &devices, &all, 1, 64 << 10)?;
    nic.start()?;
    let one = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: send_GpuReleaseStore(DeviceComm, DeviceWindow, DeviceWindow, u32, int*) and
    // receive_GpuReleaseStore(DeviceComm, DeviceWindow, int*): the windows borrow their
    // registrations, the status words are allocated above; all live until the NIC stops.
    unsafe {
        let (data, signals) = (&windows[0].0, &windows[0].1);
        let send = [
            CommArg::Window(data.arg()),
            CommArg::Window(signals.arg()),
            CommArg::U32(LEN as u32),
            CommArg::U64(statuses.addr()),
        ];
        program.launch("send", &comms[0].arg(), one, &send)?;
        let receive = [
            CommArg::Window(windows[1].1.arg()),
            CommArg::U64(statuses.addr() + 4),
        ];
        program.launch("receive", &comms[1].arg(), one, &receive)?;
    }
    gpu.stream().synchronize()?;
    nic.stop()?;

    let words = gpu.read_device(&statuses)?;
    for (who, word) in ["send", "receive"].iter().zip(words.chunks(4)) {
        let code = i32::from_ne_bytes(word.try_into()?);
        assert!(status(code).is_ok(), "{who}: {}", status(code));
    }
    let sent = gpu.read_device(&ranks[0].2)?;
    let received = gpu.read_device(&ranks[1].2)?;
    assert_eq!(received[..LEN], sent[LEN..], "the message");
    println!("rank 0 put {LEN} bytes with a signal; rank 1 saw the signal, then the bytes");
    Ok(())
}
