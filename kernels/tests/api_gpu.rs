//! The device API on a GPU (the H200 machine; ignored by default, CI has no GPU): ranks
//! made by the control plane on the CUDA software NIC's backend (`cudanic::CudaFabric`),
//! windows and communicators from their registrations and queue pairs, and
//!
//! - every operation, per thread and per warp, for every scope, leaves in the rings the
//!   bytes the Rust builders give for the same request (no NIC running);
//! - executed by the CUDA software NIC, every operation has exactly its memory effect,
//!   counters reach their operations' count and flush returns once everything completed;
//! - a receiver never sees a put_with_signal's signal before its data (1 MiB payloads,
//!   the receiver on another SM); the same payload put and signaled on two queue pairs is
//!   reported for comparison;
//! - a wait that nothing ends returns the deadline status within its bound;
//! - a GPU opened while the CUDA software NIC runs does not wait for it.
//!
//! The tests share one GPU (opening it compiles the crate's programs with NVRTC) and
//! compile the API test kernels once per scope; each holds the GPU alone while it runs
//! (a persistent NIC must not run beside another test's allocations). Each says its
//! steps with the seconds since the binary's first (shown with `--nocapture`), so that
//! a run stopped from outside shows where it was.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use cudarc::driver::LaunchConfig;
use ibgda::memory::DeviceBuffer;
use ibgda::nic::team::{connect_rc, exchange_window, Bootstrap};
use ibgda::nic::{
    Device, MemoryAccess, MemoryRegion, QueueSpec, RegisterMemory, SoftGpuNic, Window,
};
use ibgda::order::{
    GpuFence, GpuFencedDbrec, GpuReleaseStore, GpuThread, OrderingScope, SystemFence,
    SystemReleaseStore, ThreadFence, ValidFor,
};
use ibgda::queue::{Gpu as GpuPlaced, QueuePair};
use ibgda::wqe::{LocalBuffer, Rc, RingSize};
use ibgda_kernels::api::host::{
    builder_wqes, check_effects, effect_calls, BuilderRing, EFFECT_COUNTED, EFFECT_WORDS,
};
use ibgda_kernels::api::{
    ApiCall, ApiOp, CommArg, CommOptions, CommProgram, DeviceStatus, GpuComm, GpuWindow, SignalCmp,
    NO_COUNTER,
};
use ibgda_kernels::cudanic::CudaFabric;
use ibgda_kernels::gpu::{CompileOptions, Gpu};
use ibgda_kernels::nvrtc::{compile_api_kernels, Compiled};

const DATA_LEN: usize = 1 << 20;
const SIGNAL_LEN: usize = 4096;
const DATA: u32 = 0;
const SIGNALS: u32 = 1;

/// Says that the test reached `what`, with the seconds since the binary's first step.
fn step(what: &str) {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    println!("  +{:.1} s: {what}", start.elapsed().as_secs_f64());
}

/// The binary's GPU, opened once, and the lock the calling test holds it with.
fn gpu() -> (MutexGuard<'static, ()>, Arc<Gpu>) {
    static SERIAL: Mutex<()> = Mutex::new(());
    static GPU: OnceLock<Arc<Gpu>> = OnceLock::new();
    // A test that failed holding the lock left nothing running (its guards stopped it).
    let serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let gpu = GPU.get_or_init(|| {
        step("opening GPU 0 (NVRTC compiles the crate's programs)");
        let options = CompileOptions::new()
            .spin_limit(Duration::from_secs(3))
            .expect("a valid bound");
        let gpu = Gpu::open_with(0, &options).unwrap_or_else(|e| panic!("no usable GPU: {e}"));
        step("GPU 0 open");
        Arc::new(gpu)
    });
    (serial, gpu.clone())
}

fn cfg(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One rank: its device, queue pairs to every rank, registrations and windows.
struct Rank<S: OrderingScope + ValidFor<GpuPlaced>> {
    // Declared first: dropped before the device.
    windows: Vec<Window>,
    regions: Vec<MemoryRegion<SoftGpuNic>>,
    queues: Vec<QueuePair<Rc, GpuPlaced, S>>,
    data: Arc<DeviceBuffer>,
    signals: Arc<DeviceBuffer>,
    device: Device<SoftGpuNic>,
}

impl<S> Rank<S>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    /// The communicator over this rank's queue pairs, as rank 0 (the only rank whose
    /// kernels the tests launch).
    fn comm(&self, gpu: &Gpu, options: CommOptions) -> GpuComm<'_, S> {
        let queues: Vec<_> = self.queues.iter().collect();
        GpuComm::new(gpu, 0, &queues, &self.regions[2], options).expect("comm")
    }

    /// The data and signal windows' device tables.
    fn gpu_windows(&self, gpu: &Gpu) -> (GpuWindow<'_>, GpuWindow<'_>) {
        (
            GpuWindow::new(gpu, &self.windows[0]).expect("window"),
            GpuWindow::new(gpu, &self.windows[1]).expect("window"),
        )
    }
}

/// `ranks` ranks on `fabric`, each with a data window (`DATA_LEN` bytes, a pattern of its
/// rank), a signal window and a scratch word, and an RC queue pair to every rank.
fn world<S>(fabric: &CudaFabric, ranks: usize, scope: S) -> Vec<Rank<S>>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let gpu = fabric.gpu().clone();
    let rw = MemoryAccess::LOCAL_WRITE
        | MemoryAccess::REMOTE_WRITE
        | MemoryAccess::REMOTE_READ
        | MemoryAccess::REMOTE_ATOMIC;
    fabric
        .ranks(ranks, |b, device| {
            let pd = device.alloc_pd().expect("pd");
            let spec = QueueSpec::new(RingSize::new(256).expect("ring"));
            let queues = connect_rc(
                b,
                &pd,
                spec,
                fabric.queue_memory(),
                || fabric.producer_state(),
                scope,
            )
            .expect("connect");
            let pattern: Vec<u8> = (0..DATA_LEN)
                .map(|i| (i * 7 + b.rank() * 31 + 1) as u8)
                .collect();
            let data = Arc::new(gpu.device_buffer_from(&pattern).expect("data"));
            let signals = Arc::new(gpu.device_buffer(SIGNAL_LEN + 64).expect("signals"));
            let gpu_region = |buffer: &Arc<DeviceBuffer>, len: usize, access| {
                pd.register_memory(
                    RegisterMemory::Gpu {
                        buffer: buffer.clone(),
                        offset: 0,
                        len,
                    },
                    access,
                )
                .expect("region")
            };
            let data_mr = gpu_region(&data, DATA_LEN, rw);
            let signal_mr = gpu_region(&signals, SIGNAL_LEN, rw);
            // The scratch word: the last 64 bytes of the signal buffer, its own region.
            let scratch_mr = pd
                .register_memory(
                    RegisterMemory::Gpu {
                        buffer: signals.clone(),
                        offset: SIGNAL_LEN,
                        len: 64,
                    },
                    MemoryAccess::LOCAL_WRITE,
                )
                .expect("scratch");
            let windows = vec![
                exchange_window(b, &data_mr, DATA).expect("data window"),
                exchange_window(b, &signal_mr, SIGNALS).expect("signal window"),
            ];
            Rank {
                windows,
                regions: vec![data_mr, signal_mr, scratch_mr],
                queues,
                data,
                signals,
                device,
            }
        })
        .expect("ranks")
}

fn call(op: ApiOp) -> ApiCall {
    ApiCall {
        op: op as u32,
        dst_window: DATA,
        src_window: DATA,
        signal_window: SIGNALS,
        counter: NO_COUNTER,
        ..Default::default()
    }
}

fn bytes_of<T: Copy>(v: &[T]) -> Vec<u8> {
    // SAFETY: the records are `#[repr(C)]` plain data with explicit reserved words (no
    // padding), so their bytes are initialised.
    unsafe { core::slice::from_raw_parts(v.as_ptr().cast::<u8>(), core::mem::size_of_val(v)) }
        .to_vec()
}

/// The calls of the byte comparison: every operation, inline and gathered puts, to peer
/// 1, then a few to peer 0 (rank 0 itself); in rounds of 32 calls to one peer.
fn byte_calls() -> Vec<ApiCall> {
    let mut v = Vec::new();
    for (i, len) in [1u32, 8, 27, 28, 29, 100, 4096, 20000]
        .into_iter()
        .enumerate()
    {
        let off = 4096 * i as u64;
        v.push(ApiCall {
            peer: 1,
            len,
            dst_offset: off,
            src_offset: off + 3,
            ..call(ApiOp::Put)
        });
        v.push(ApiCall {
            peer: 1,
            len,
            dst_offset: off + 64,
            src_offset: off,
            signal_offset: 8 * i as u64,
            value: 1,
            ..call(ApiOp::PutWithSignal)
        });
    }
    v.push(ApiCall {
        peer: 1,
        dst_offset: 80_000,
        value: 0x0102_0304_0506_0708,
        ..call(ApiOp::PutValue)
    });
    v.push(ApiCall {
        peer: 1,
        len: 512,
        dst_offset: 90_000,
        src_offset: 100_000,
        ..call(ApiOp::Get)
    });
    v.push(ApiCall {
        peer: 1,
        dst_window: SIGNALS,
        dst_offset: 256,
        value: 3,
        ..call(ApiOp::AtomicAdd)
    });
    v.push(ApiCall {
        peer: 1,
        dst_window: SIGNALS,
        dst_offset: 264,
        src_offset: 200_000,
        value: 4,
        counter: 0,
        ..call(ApiOp::FetchAdd)
    });
    v.push(ApiCall {
        peer: 1,
        dst_window: SIGNALS,
        dst_offset: 272,
        src_offset: 200_008,
        compare: 0,
        value: 9,
        ..call(ApiOp::CompareSwap)
    });
    v.push(ApiCall {
        peer: 1,
        signal_offset: 512,
        value: 5,
        counter: 0,
        ..call(ApiOp::Signal)
    });
    while v.len() < 32 {
        let i = v.len() as u64;
        v.push(ApiCall {
            peer: 1,
            len: 16,
            dst_offset: 300_000 + 64 * i,
            src_offset: i,
            ..call(ApiOp::Put)
        });
    }
    for i in 0..8u64 {
        v.push(ApiCall {
            peer: 0,
            len: 40 + i as u32,
            dst_offset: 400_000 + 128 * i,
            src_offset: 10 * i,
            ..call(ApiOp::Put)
        });
    }
    v
}

struct Launched {
    statuses: Vec<i32>,
    tickets: Vec<u64>,
}

/// Everything a run of the API test kernel needs in device memory, allocated before any
/// persistent kernel runs (an allocation or a synchronous copy can wait for one).
struct Prepared {
    wins: DeviceBuffer,
    n_wins: u32,
    calls: DeviceBuffer,
    n: u32,
    statuses: DeviceBuffer,
    tickets: DeviceBuffer,
}

fn prepare(gpu: &Gpu, windows: &[&GpuWindow<'_>], calls: &[ApiCall]) -> Prepared {
    let descriptors: Vec<_> = windows.iter().map(|w| *w.device()).collect();
    Prepared {
        wins: gpu
            .device_buffer_from(&bytes_of(&descriptors))
            .expect("windows"),
        n_wins: windows.len() as u32,
        calls: gpu.device_buffer_from(&bytes_of(calls)).expect("calls"),
        n: calls.len() as u32,
        statuses: gpu.device_buffer(4 * calls.len()).expect("statuses"),
        tickets: gpu.device_buffer(8 * calls.len()).expect("tickets"),
    }
}

/// Performs the prepared calls on `comm` with the API test kernel of scope `S` (`warp`:
/// the warp-cooperative form) and waits for the kernel (its stream only).
fn launch<S: OrderingScope>(
    gpu: &Gpu,
    program: &CommProgram<'_>,
    comm: &GpuComm<'_, S>,
    p: &Prepared,
    warp: bool,
) {
    let args = [
        CommArg::U64(p.wins.addr()),
        CommArg::U32(p.n_wins),
        CommArg::U64(p.calls.addr()),
        CommArg::U32(p.n),
        CommArg::U64(p.statuses.addr()),
        CommArg::U64(p.tickets.addr()),
    ];
    let (kernel, shape) = if warp {
        ("ibgda_api_calls_warp", cfg(1, 32))
    } else {
        ("ibgda_api_calls_thread", cfg(1, 1))
    };
    // SAFETY: ibgda_api_calls_{thread,warp}_S(DeviceComm, const DeviceWindow*, u32, const
    // ApiCall*, u32, int*, u64*): the communicator, the window array and its length, the
    // calls and their count, one status and one ticket per call; everything is allocated
    // in `p` or borrowed by `comm` and the windows, alive until the synchronize below. The
    // kernel reaches memory only through the device API.
    unsafe { program.launch(kernel, &comm.arg(), shape, &args) }.expect("launch");
    gpu.stream().synchronize().expect("kernel");
}

/// The statuses and tickets of a run (read once no persistent kernel runs).
fn collect(gpu: &Gpu, p: &Prepared) -> Launched {
    let s = gpu.read_device(&p.statuses).expect("statuses");
    let t = gpu.read_device(&p.tickets).expect("tickets");
    Launched {
        statuses: s
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect(),
        tickets: t
            .chunks(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .collect(),
    }
}

fn perform<S: OrderingScope>(
    gpu: &Gpu,
    program: &CommProgram<'_>,
    comm: &GpuComm<'_, S>,
    windows: &[&GpuWindow<'_>],
    calls: &[ApiCall],
    warp: bool,
) -> Launched {
    let p = prepare(gpu, windows, calls);
    launch(gpu, program, comm, &p, warp);
    collect(gpu, &p)
}

/// The API test kernels of scope `S`, compiled once for the binary (NVRTC, seconds each)
/// and loaded on `gpu`. Called before any NIC runs (loading waits for nothing then).
fn program<'g, S: OrderingScope>(gpu: &'g Gpu) -> CommProgram<'g> {
    static COMPILED: Mutex<Option<HashMap<&'static str, Compiled>>> = Mutex::new(None);
    let compiled = {
        let mut cache = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
        let cache = cache.get_or_insert_with(HashMap::new);
        if !cache.contains_key(S::NAME) {
            step(&format!("compiling the API test kernels of {}", S::NAME));
            let c =
                compile_api_kernels(Some(S::NAME), gpu.options()).unwrap_or_else(|e| panic!("{e}"));
            cache.insert(S::NAME, c);
        }
        cache[S::NAME].clone()
    };
    CommProgram::load(gpu, compiled).expect("load")
}

fn bytes_for_scope<S>(scope: S)
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let (_serial, gpu) = gpu();
    let program = program::<S>(&gpu);
    for warp in [false, true] {
        let fabric = CudaFabric::new(gpu.clone());
        let ranks = world(&fabric, 2, scope);
        let r = &ranks[0];
        let comm = r.comm(
            &gpu,
            CommOptions {
                counters: 1,
                ..CommOptions::default()
            },
        );
        let (data_w, sig_w) = r.gpu_windows(&gpu);
        let calls = byte_calls();
        let got = perform(&gpu, &program, &comm, &[&data_w, &sig_w], &calls, warp);
        // The Rust side: each call in order into its peer's ring at that ring's counter.
        let local = gpu.read_device(&r.data).expect("data");
        let windows: Vec<&Window> = r.windows.iter().collect();
        let scratch = LocalBuffer::new(r.regions[2].addr(), r.regions[2].lkey());
        let mut rings: Vec<Vec<u8>> = r
            .queues
            .iter()
            .map(|q| vec![0u8; q.sq_memory().size().wqebbs() as usize * 64])
            .collect();
        let mut counters = vec![0u64; r.queues.len()];
        for (i, c) in calls.iter().enumerate() {
            let p = c.peer as usize;
            let d = *r.queues[p].device_queue().raw();
            let payload =
                |_: u32, off: u64, len: usize| local[off as usize..off as usize + len].to_vec();
            let at = BuilderRing {
                ring: &mut rings[p],
                qpn: r.queues[p].device_qpn(),
                interval: d.signal_interval,
                start: counters[p],
            };
            let n = builder_wqes(at, &windows, scratch, comm.device().inline_max, c, &payload)
                .unwrap_or_else(|s| panic!("call {i} {c:?}: {s}"));
            counters[p] += u64::from(n);
            assert_eq!(
                got.statuses[i],
                0,
                "{}: call {i} {c:?}: {}",
                S::NAME,
                DeviceStatus::from_code(got.statuses[i])
            );
            assert_eq!(got.tickets[i], counters[p], "{}: call {i}: ticket", S::NAME);
        }
        for (p, q) in r.queues.iter().enumerate() {
            let ring = gpu.read_send_ring(&q.device_queue()).expect("ring");
            assert_eq!(
                ring,
                rings[p],
                "{} ({}): the ring of peer {p} differs",
                S::NAME,
                if warp { "warp" } else { "thread" }
            );
        }
        step(&format!(
            "{}: {} calls ({}) left exactly the Rust builders' bytes",
            S::NAME,
            calls.len(),
            if warp { "per warp" } else { "per thread" }
        ));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn every_operation_leaves_the_rust_builders_bytes_for_every_scope() {
    // SAFETY: no NIC runs while these rings are written (they are read after a
    // synchronize), so nothing can follow a doorbell record ahead of its WQEs.
    bytes_for_scope(unsafe { GpuFence::new() });
    bytes_for_scope(GpuFencedDbrec);
    bytes_for_scope(GpuReleaseStore);
    bytes_for_scope(ThreadFence);
    bytes_for_scope(SystemReleaseStore);
    bytes_for_scope(SystemFence);
    // SAFETY: the control case of the scope table: nothing here relies on its ordering
    // (no NIC runs while it posts; the rings are read after a synchronize).
    bytes_for_scope(unsafe { ibgda::order::Unordered::new() });
}

fn effects_for_scope<S>(scope: S)
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let (_serial, gpu) = gpu();
    let program = program::<S>(&gpu);
    let fabric = CudaFabric::new(gpu.clone());
    let ranks = world(&fabric, 2, scope);
    step(&format!("effects, {}: 2 ranks made", S::NAME));
    let r = &ranks[0];
    let comm = r.comm(
        &gpu,
        CommOptions {
            counters: 1,
            ..CommOptions::default()
        },
    );
    let (data_w, sig_w) = r.gpu_windows(&gpu);
    let before0 = gpu.read_device(&r.data).expect("data");
    let before1 = gpu.read_device(&ranks[1].data).expect("data");
    let mut words = vec![0u8; SIGNAL_LEN];
    for (off, v) in EFFECT_WORDS {
        words[off..off + 8].copy_from_slice(&v.to_be_bytes());
    }
    gpu.write_device(&ranks[1].signals, 0, &words)
        .expect("words");
    let calls = effect_calls(0);
    let all: Vec<&QueuePair<Rc, GpuPlaced, S>> =
        ranks.iter().flat_map(|r| r.queues.iter()).collect();
    let devices: Vec<&SoftGpuNic> = ranks.iter().map(|r| r.device.backend()).collect();
    let prepared = prepare(&gpu, &[&data_w, &sig_w], &calls);
    let status = gpu.device_buffer(8).expect("status");
    let seen = gpu.device_buffer(8).expect("seen");
    let mut nic = fabric
        .device_nic(&gpu, &devices, &all, 2, 1 << 20)
        .expect("nic");
    nic.start().expect("start");
    step(&format!(
        "effects, {}: NIC started, performing {} calls",
        S::NAME,
        calls.len()
    ));
    launch(&gpu, &program, &comm, &prepared, false);
    step(&format!(
        "effects, {}: calls done; counter wait and flush",
        S::NAME
    ));
    // The counter of the three calls that named it, then a flush of everything.
    // SAFETY: ibgda_api_wait_counter_S(DeviceComm, u32, u64, int*, u64*) and
    // ibgda_api_flush_S(DeviceComm, u32, u32, int*): the communicator, then scalars and
    // device buffers allocated above, alive until the synchronize.
    unsafe {
        program
            .launch(
                "ibgda_api_wait_counter",
                &comm.arg(),
                cfg(1, 1),
                &[
                    CommArg::U32(0),
                    CommArg::U64(3),
                    CommArg::U64(status.addr()),
                    CommArg::U64(seen.addr()),
                ],
            )
            .expect("launch");
    }
    // SAFETY: as above (the flush's status goes to the second word).
    unsafe {
        program
            .launch(
                "ibgda_api_flush",
                &comm.arg(),
                cfg(1, 1),
                &[
                    CommArg::U32(1),
                    CommArg::U32(0),
                    CommArg::U64(status.addr() + 4),
                ],
            )
            .expect("launch");
    }
    gpu.stream().synchronize().expect("flush");
    nic.stop().expect("stop");
    step(&format!("effects, {}: NIC stopped", S::NAME));
    let got = collect(&gpu, &prepared);
    let words = gpu.read_device(&status).expect("status");
    let counter_status = i32::from_ne_bytes(words[..4].try_into().unwrap());
    let flush_status = i32::from_ne_bytes(words[4..8].try_into().unwrap());
    for (i, s) in got.statuses.iter().enumerate() {
        assert_eq!(
            *s,
            0,
            "{}: call {i}: {}",
            S::NAME,
            DeviceStatus::from_code(*s)
        );
    }
    assert_eq!(
        counter_status,
        0,
        "wait_counter: {}",
        DeviceStatus::from_code(counter_status)
    );
    assert!(
        u64::from_ne_bytes(gpu.read_device(&seen).expect("seen").try_into().unwrap())
            >= EFFECT_COUNTED
    );
    assert_eq!(
        flush_status,
        0,
        "flush_all: {}",
        DeviceStatus::from_code(flush_status)
    );
    let got0 = gpu.read_device(&r.data).expect("data");
    let got1 = gpu.read_device(&ranks[1].data).expect("data");
    let sig1 = gpu.read_device(&ranks[1].signals).expect("signals");
    check_effects(&before0, &before1, &got0, &got1, &sig1)
        .unwrap_or_else(|e| panic!("{}: {e}", S::NAME));
    step(&format!(
        "{}: every operation's memory effect on the CUDA software NIC, counter and flush",
        S::NAME
    ));
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn every_operation_has_its_memory_effect_on_the_cuda_software_nic() {
    effects_for_scope(GpuReleaseStore);
    // SAFETY: the CUDA software NIC built over these queues reads a GpuFence queue's
    // doorbell record only after its doorbell (the builder watches it doorbell-only).
    effects_for_scope(unsafe { GpuFence::new() });
    effects_for_scope(ThreadFence);
}

/// Rank 0 alone with two queue pairs connected to itself: the communicator's peers 0 and
/// 1 are both rank 0 (the windows name its registrations twice).
fn signal_order_for_scope<S>(scope: S)
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let (_serial, gpu) = gpu();
    let program = program::<S>(&gpu);
    let fabric = CudaFabric::new(gpu.clone());
    let mut ranks = world(&fabric, 1, scope);
    let r = &mut ranks[0];
    // A second queue pair to itself, on the same device.
    let more = {
        let group = ibgda::nic::team::LocalBootstrap::group(1);
        let pd = r.device.alloc_pd().expect("pd");
        connect_rc(
            &group[0],
            &pd,
            QueueSpec::new(RingSize::new(256).expect("ring")),
            fabric.queue_memory(),
            || fabric.producer_state(),
            scope,
        )
        .expect("second loopback")
    };
    r.queues.extend(more);
    let twice = |w: &Window, mr: &MemoryRegion<SoftGpuNic>| {
        let e = mr.window_endpoint(w.id());
        Window::new(mr, w.id(), vec![e, e]).expect("window")
    };
    let data_w2 = twice(&r.windows[0], &r.regions[0]);
    let sig_w2 = twice(&r.windows[1], &r.regions[1]);
    let comm = r.comm(&gpu, CommOptions::default());
    let data = GpuWindow::new(&gpu, &data_w2).expect("window");
    let sig = GpuWindow::new(&gpu, &sig_w2).expect("window");
    // The source: its own registration of the upper half of the data buffer (the
    // destination is the lower half), made before the NIC is built so that it knows it.
    let pd = r.device.alloc_pd().expect("pd");
    let src_region = pd
        .register_memory(
            RegisterMemory::Gpu {
                buffer: r.data.clone(),
                offset: DATA_LEN / 2,
                len: DATA_LEN / 2,
            },
            MemoryAccess::LOCAL_WRITE,
        )
        .expect("source");
    let src_window =
        Window::new(&src_region, 9, vec![src_region.window_endpoint(9); 2]).expect("src");
    let src = GpuWindow::new(&gpu, &src_window).expect("window");
    let devices: Vec<&SoftGpuNic> = vec![r.device.backend()];
    let all: Vec<_> = r.queues.iter().collect();
    for split in [0u32, 1] {
        gpu.write_device(&r.signals, 0, &[0u8; 64]).expect("reset");
        let status = gpu.device_buffer(4).expect("status");
        let late = gpu.device_buffer(8).expect("late");
        let (len, rounds) = (DATA_LEN as u32 / 2, 8u32);
        let mut nic = fabric
            .device_nic(&gpu, &devices, &all, 2, 1 << 20)
            .expect("nic");
        nic.start().expect("start");
        let args = [
            CommArg::Window(data.arg()),
            CommArg::Window(src.arg()),
            CommArg::Window(sig.arg()),
            CommArg::U32(0),
            CommArg::U32(len),
            CommArg::U32(rounds),
            CommArg::U32(split),
            CommArg::U64(status.addr()),
            CommArg::U64(late.addr()),
        ];
        // SAFETY: ibgda_api_signal_order_S(DeviceComm, DeviceWindow x3, u32 x4, int*,
        // unsigned long long*): the communicator, the three windows, scalars and two device
        // buffers allocated above; block 0 writes the source window's local side (its own
        // registration), block 1 reads the data window's; all alive until the stop below.
        unsafe { program.launch("ibgda_api_signal_order", &comm.arg(), cfg(2, 32), &args) }
            .expect("launch");
        gpu.stream().synchronize().expect("kernel");
        nic.stop().expect("stop");
        let s = i32::from_ne_bytes(
            gpu.read_device(&status).expect("status")[..4]
                .try_into()
                .unwrap(),
        );
        let late = u64::from_ne_bytes(
            gpu.read_device(&late).expect("late")[..8]
                .try_into()
                .unwrap(),
        );
        if split == 0 {
            assert_eq!(s, 0, "{}: {}", S::NAME, DeviceStatus::from_code(s));
            assert_eq!(
                late,
                0,
                "{}: a signal seen before its data ({late} bytes late)",
                S::NAME
            );
            step(&format!(
                "{}: {rounds} put_with_signal of {len} bytes: the signal never before the data",
                S::NAME
            ));
        } else {
            step(&format!(
                "{}: control, data and signal on two queue pairs: {late} bytes not yet placed when the signal was seen (status {s})",
                S::NAME
            ));
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn the_signal_of_a_put_with_signal_is_never_seen_before_its_data_on_the_cuda_nic() {
    signal_order_for_scope(GpuReleaseStore);
    signal_order_for_scope(ThreadFence);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn a_wait_nothing_ends_returns_the_deadline_status() {
    let (_serial, gpu) = gpu();
    let program = program::<GpuReleaseStore>(&gpu);
    let fabric = CudaFabric::new(gpu.clone());
    let ranks = world(&fabric, 1, GpuReleaseStore);
    let r = &ranks[0];
    let comm = r.comm(
        &gpu,
        CommOptions {
            wait: Duration::from_millis(20),
            ..CommOptions::default()
        },
    );
    let (_, sig) = r.gpu_windows(&gpu);
    let status = gpu.device_buffer(4).expect("status");
    let seen = gpu.device_buffer(8).expect("seen");
    let t0 = Instant::now();
    // SAFETY: ibgda_api_wait_signal_S(DeviceComm, DeviceWindow, u64, u32, u64, int*, u64*):
    // the window of rank 0's signal words and two device buffers, alive until the
    // synchronize.
    unsafe {
        program.launch(
            "ibgda_api_wait_signal",
            &comm.arg(),
            cfg(1, 1),
            &[
                CommArg::Window(sig.arg()),
                CommArg::U64(0),
                CommArg::U32(SignalCmp::Ge as u32),
                CommArg::U64(1),
                CommArg::U64(status.addr()),
                CommArg::U64(seen.addr()),
            ],
        )
    }
    .expect("launch");
    gpu.stream().synchronize().expect("synchronize");
    let took = t0.elapsed();
    let s = i32::from_ne_bytes(
        gpu.read_device(&status).expect("status")[..4]
            .try_into()
            .unwrap(),
    );
    assert_eq!(DeviceStatus::from_code(s), DeviceStatus::Deadline);
    assert!(
        took < Duration::from_secs(2),
        "the 20 ms wait took {took:?}"
    );
    step(&format!(
        "a signal wait with a 20 ms deadline returned DEADLINE after {took:?} (host side)"
    ));
}

/// cudarc synchronizes the whole context when a new handle makes its first stream with
/// event tracking on: a `Gpu` opened while the persistent NIC ran waited for the NIC (as
/// the emulated ConnectX's GPU side, opened during a program's first GPU registration,
/// would wait for the program's kernels). The NIC idles out after the binary's 3 s spin
/// limit, so an open that waited for it takes 3 s and finds it ended (status SPIN_TIMEOUT).
#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn a_gpu_opened_while_the_nic_runs_does_not_wait_for_it() {
    let (_serial, gpu) = gpu();
    let fabric = CudaFabric::new(gpu.clone());
    let ranks = world(&fabric, 1, GpuReleaseStore);
    let devices: Vec<&SoftGpuNic> = vec![ranks[0].device.backend()];
    let all: Vec<_> = ranks[0].queues.iter().collect();
    let mut nic = fabric
        .device_nic(&gpu, &devices, &all, 1, 1 << 20)
        .expect("nic");
    nic.start().expect("start");
    let t0 = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    // A thread of its own: an open that waits for the NIC is released by the stop below.
    std::thread::spawn(move || {
        let _ = tx.send(Gpu::open_without_programs(0).map(drop));
    });
    let opened = rx.recv_timeout(Duration::from_secs(10));
    let took = t0.elapsed();
    nic.stop().expect("stop");
    let engines = nic.read().expect("the NIC's engines");
    assert!(
        matches!(opened, Ok(Ok(()))),
        "opening a GPU beside the running NIC: {opened:?} after {took:?}"
    );
    assert!(
        took < Duration::from_secs(2),
        "opening a GPU beside the running NIC took {took:?}: it waited for the NIC"
    );
    assert_eq!(
        engines[0].0.status, 0,
        "the NIC ended before its stop (it idled out: something waited for it)"
    );
    step(&format!(
        "a GPU opened beside the running NIC in {took:?}, the NIC running until its stop"
    ));
}
