//! Tests on a real GPU (the H200 machine): ignored by default, since CI has no GPU. Run
//! there with `--ignored` (see kernels/README.md for the build-here-run-there flow).
//! `IBGDA_SMALL=1` shrinks every run (for compute-sanitizer).

use cudarc::driver::LaunchConfig;
use ibgda::cq::CqMode;
use ibgda::order::{
    GpuFence, GpuFencedDbrec, GpuReleaseStore, GpuThread, OrderingScope, SystemFence,
    SystemReleaseStore, ThreadFence, ValidFor,
};
use ibgda::queue::Gpu as GpuPlaced;
use ibgda::wqe::{parse_wqe, TransportKind, WqeIndex};
use ibgda_kernels::gpu::{Gpu, KernelArg, KernelQueue};
use ibgda_kernels::harness::{gpu_queue_pair, host_encode, test_requests, Sink, SINK_CHECK};
use ibgda_kernels::request::{TransportForm, WqeRequest};

fn small() -> bool {
    std::env::var("IBGDA_SMALL").is_ok_and(|v| v == "1")
}

fn gpu() -> Gpu {
    // Every device wait gives up after 3 s: a protocol hang fails the test with
    // SPIN_TIMEOUT (-1024) instead of hanging the machine.
    Gpu::open_with(0, &["-DIBGDA_SPIN_LIMIT_NS=3000000000ull"])
        .unwrap_or_else(|e| panic!("no usable GPU: {e}"))
}

fn cfg(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn device_built_wqes_equal_the_host_encoder_for_every_shape() {
    let gpu = gpu();
    let reqs = test_requests();
    const LOG_RING: u32 = 4;
    let ring_bytes = (1usize << LOG_RING) * 64;
    let req_bytes: Vec<u8> = reqs
        .iter()
        .flat_map(|r| {
            // SAFETY: WqeRequest is #[repr(C)] plain data without padding (264 bytes of
            // integers and byte arrays); viewing it as bytes reads initialised memory.
            unsafe {
                core::slice::from_raw_parts(
                    (r as *const WqeRequest).cast::<u8>(),
                    size_of::<WqeRequest>(),
                )
            }
            .to_vec()
        })
        .collect();
    let dev_reqs = gpu.device_buffer_from(&req_bytes).expect("requests");
    let rings = gpu
        .device_buffer_from(&vec![0xa5u8; ring_bytes * reqs.len()])
        .expect("rings");
    let ds = gpu.device_buffer(4 * reqs.len()).expect("ds");
    let args = [
        KernelArg::U64(dev_reqs.addr()),
        KernelArg::U32(reqs.len() as u32),
        KernelArg::U64(rings.addr()),
        KernelArg::U32(LOG_RING),
        KernelArg::U64(ds.addr()),
    ];
    let blocks = (reqs.len() as u32).div_ceil(64);
    // SAFETY: ibgda_build_requests(const WqeRequest*, u32, u8*, u32, u32*): requests,
    // count, rings of 2^LOG_RING WQEBBs each, log2, one u32 per request; all allocated
    // above and alive until the synchronize below.
    unsafe { gpu.launch_raw(false, "ibgda_build_requests", cfg(blocks, 64), false, &args) }
        .expect("launch");
    gpu.synchronize().expect("build kernel");
    let device = gpu.read_device(&rings).expect("read rings");
    let mut shapes = std::collections::BTreeSet::new();
    for (i, r) in reqs.iter().enumerate() {
        let mut host = vec![0xa5u8; ring_bytes];
        host_encode(i, r, &mut host).unwrap_or_else(|e| panic!("request {i}: host encoder: {e}"));
        let dev = &device[i * ring_bytes..(i + 1) * ring_bytes];
        assert_eq!(
            dev,
            &host[..],
            "request {i} ({r:?}): device bytes differ from the host encoder's"
        );
        let kind = if r.transport == TransportForm::Rc as u32 {
            TransportKind::Rc
        } else {
            TransportKind::Dc
        };
        parse_wqe(dev, WqeIndex(r.index as u16), kind)
            .unwrap_or_else(|e| panic!("request {i}: device WQE does not parse: {e:?}"));
        shapes.insert((r.transport, r.shape));
    }
    println!(
        "{} WQEs ({} shape x transport pairs) byte-identical to the host encoder",
        reqs.len(),
        shapes.len()
    );
}

/// Many warps (cooperative) and threads (per thread) post 8-byte inline writes to one
/// GPU-placed queue; the sink checks every WQE and that each producer's payload sequence
/// arrives complete and in order; the queue's counters end consistent.
fn publication<S>(gpu: &Gpu, scope: S, warp: bool)
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let (blocks, threads, iters) = if small() { (2, 64, 8) } else { (8, 128, 64) };
    let qp = gpu_queue_pair(gpu, 0x42, 256, 256, 64, CqMode::Ring, scope).expect("queue");
    let q = qp.device_queue();
    let producers = blocks * threads;
    // Everything is allocated before the sink starts: allocation and synchronous copies
    // may wait for running kernels, and the sink runs until it is stopped.
    let descs = ibgda_kernels::harness::descriptor_array(gpu, &[*q.raw()]).expect("descs");
    let status = gpu.device_buffer(4).expect("status");
    let sink = Sink::start(gpu, &[*q.raw()], SINK_CHECK, producers, 1, 1).expect("sink");
    let name = format!(
        "ibgda_post_{}_{}",
        if warp { "warp" } else { "thread" },
        S::NAME
    );
    let args = [
        KernelArg::U64(descs.addr()),
        KernelArg::U32(1),
        KernelArg::U32(iters),
        KernelArg::U32(32),
        KernelArg::U64(0x7000_0000),
        KernelArg::U32(0x99),
        KernelArg::U64(status.addr()),
    ];
    // SAFETY: ibgda_post_{warp,thread}_S(const DeviceQueueDescriptor*, u32 nq, u32 iters,
    // u32 batch, u64 raddr, u32 rkey, int* status); the queue pair, descriptor array and
    // status live until the sink's stop synchronizes.
    unsafe { gpu.launch_raw(false, &name, cfg(blocks, threads), false, &args) }.expect("launch");
    gpu.stream().synchronize().expect("producers");
    let (stats, expect) = sink.stop(gpu).expect("sink");
    let st = gpu.read_device(&status).expect("status");
    let state = gpu.read_device_at(q.raw().state, 64).expect("state");
    let word = |i: usize| u64::from_ne_bytes(state[i * 8..i * 8 + 8].try_into().unwrap());
    println!(
        "{name}: {producers} producers x {iters}: sink {stats:?}; reserved {} ready {} posted {} retired {}",
        word(0),
        word(1),
        word(2),
        word(3)
    );
    assert_eq!(
        i32::from_ne_bytes(st[..4].try_into().unwrap()),
        0,
        "{name}: an error completion"
    );
    assert_eq!(stats.bad_wqes, 0, "{name}: malformed WQEs");
    assert_eq!(
        stats.bad_payloads, 0,
        "{name}: payloads out of order or lost"
    );
    assert_eq!(
        stats.bad_doorbells, 0,
        "{name}: doorbells disagreeing with the record"
    );
    assert!(
        expect.iter().all(|&e| e == iters),
        "{name}: a producer's payloads are missing"
    );
    assert!(
        stats.wqes >= u64::from(producers * iters),
        "{name}: WQEs missing"
    );
    assert_eq!(word(0), word(1), "{name}: reserved != ready");
    assert_eq!(word(1), word(2), "{name}: ready != posted");
    assert_eq!(word(2), word(3), "{name}: not everything retired");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn cooperative_and_per_thread_publication_deliver_every_payload() {
    let gpu = gpu();
    publication(&gpu, GpuReleaseStore, true);
    publication(&gpu, GpuFence, true);
    publication(&gpu, GpuFencedDbrec, true);
    publication(&gpu, ThreadFence, true);
    publication(&gpu, SystemReleaseStore, true);
    publication(&gpu, SystemFence, true);
    publication(&gpu, GpuFence, false);
    publication(&gpu, GpuReleaseStore, false);
}

/// The exclusive issue path end to end against the sink, typed and raw, for one scope:
/// every WQE completes without error, and both leave byte-identical rings.
fn issue_end_to_end<S>(gpu: &Gpu, scope: S)
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced> + Copy,
{
    let iters: u32 = if small() { 50 } else { 2000 };
    let mut rings = Vec::new();
    for raw in [false, true] {
        let qp = gpu_queue_pair(gpu, 0x77, 64, 64, 32, CqMode::Ring, scope).expect("queue");
        let q = qp.device_queue();
        let out = gpu
            .device_buffer(8 * 3 * iters as usize + 16 + 4)
            .expect("out");
        let sink = Sink::start(gpu, &[*q.raw()], SINK_CHECK, 0, 1, 1).expect("sink");
        let base = out.addr();
        let n = 8 * u64::from(iters);
        let args = [
            KernelArg::Queue(KernelQueue::new(&q)),
            KernelArg::U32(10),
            KernelArg::U32(iters),
            KernelArg::U64(0x7000_0000),
            KernelArg::U32(0x99),
            KernelArg::U64(base),
            KernelArg::U64(base + n),
            KernelArg::U64(base + 2 * n),
            KernelArg::U64(base + 3 * n),
            KernelArg::U64(base + 3 * n + 16),
        ];
        let name = format!(
            "ibgda_{}_{}",
            if raw { "raw_issue" } else { "issue_bench" },
            S::NAME
        );
        // SAFETY: (DeviceQueueDescriptor, u32 warmup, u32 iters, u64 raddr, u32 rkey,
        // u64* issue_ns, u64* issue_cycles, u64* total_ns, u64* clocks, int* status), all
        // inside `out`, which lives past the synchronize in `stop`.
        unsafe { gpu.launch_raw(raw, &name, cfg(1, 1), false, &args) }.expect("launch");
        gpu.stream().synchronize().expect("issue kernel");
        let (stats, _) = sink.stop(gpu).expect("sink");
        let o = gpu.read_device(&out).expect("out");
        let status = i32::from_ne_bytes(o[(3 * n + 16) as usize..][..4].try_into().unwrap());
        let state = gpu.read_device_at(q.raw().state, 64).expect("state");
        let word = |i: usize| u64::from_ne_bytes(state[i * 8..i * 8 + 8].try_into().unwrap());
        println!(
            "{name}: status {status}, sink {stats:?}, state reserved {} retired {} cq {}",
            word(0),
            word(3),
            word(4)
        );
        assert_eq!(status, 0, "{name}");
        assert_eq!(stats.wqes, u64::from(iters + 10), "{name}");
        assert_eq!(stats.cqes, u64::from(iters + 10), "{name}");
        assert_eq!(stats.bad_wqes + stats.bad_doorbells, 0, "{name}");
        rings.push(gpu.read_device(&qp.sq_memory().ring).expect("ring"));
    }
    assert_eq!(
        rings[0],
        rings[1],
        "{}: typed and raw kernels wrote different bytes",
        S::NAME
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn issue_path_end_to_end_against_the_sink_typed_and_raw() {
    let gpu = gpu();
    issue_end_to_end(&gpu, GpuReleaseStore);
    issue_end_to_end(&gpu, GpuFence);
    issue_end_to_end(&gpu, GpuFencedDbrec);
    issue_end_to_end(&gpu, ThreadFence);
    issue_end_to_end(&gpu, SystemReleaseStore);
    issue_end_to_end(&gpu, SystemFence);
    // SAFETY: a test on throw-away memory, read only by the sink.
    issue_end_to_end(&gpu, unsafe { ibgda::order::Unordered::new() });
}

/// Producers and sink in one launch (compute-sanitizer serializes kernels, so the
/// two-kernel tests cannot run under it): every payload checked as above.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn producers_and_sink_in_one_launch() {
    let gpu = gpu();
    let (blocks, threads, iters) = if small() {
        (2u32, 64u32, 4u32)
    } else {
        (8, 128, 32)
    };
    for name in ["GpuFence", "GpuReleaseStore", "ThreadFence"] {
        let qp = match name {
            "GpuFence" => {
                Q::A(gpu_queue_pair(&gpu, 0x42, 256, 256, 64, CqMode::Ring, GpuFence).expect("q"))
            }
            "GpuReleaseStore" => Q::B(
                gpu_queue_pair(&gpu, 0x42, 256, 256, 64, CqMode::Ring, GpuReleaseStore).expect("q"),
            ),
            _ => Q::C(
                gpu_queue_pair(&gpu, 0x42, 256, 256, 64, CqMode::Ring, ThreadFence).expect("q"),
            ),
        };
        let d = match &qp {
            Q::A(q) => *q.device_queue().raw(),
            Q::B(q) => *q.device_queue().raw(),
            Q::C(q) => *q.device_queue().raw(),
        };
        let descs = ibgda_kernels::harness::descriptor_array(&gpu, &[d]).expect("descs");
        let producers = blocks * threads;
        let sq = gpu.device_buffer(32).expect("sq");
        let expect = gpu.device_buffer(4 * producers as usize).expect("expect");
        let stats = gpu.device_buffer(64).expect("stats");
        let done = gpu.device_buffer(4).expect("done");
        let status = gpu.device_buffer(4).expect("status");
        let args = [
            KernelArg::U64(descs.addr()),
            KernelArg::U64(sq.addr()),
            KernelArg::U64(expect.addr()),
            KernelArg::U32(producers),
            KernelArg::U32(iters),
            KernelArg::U64(stats.addr()),
            KernelArg::U64(done.addr()),
            KernelArg::U64(status.addr()),
        ];
        let k = format!("ibgda_selftest_{name}");
        // SAFETY: (const DeviceQueueDescriptor*, SinkQueue*, u32*, u32, u32, SinkStats*,
        // u32*, int*): the allocations above, alive past the synchronize.
        unsafe { gpu.launch_raw(false, &k, cfg(blocks + 1, threads), false, &args) }
            .expect("launch");
        gpu.synchronize().expect("selftest");
        let s = gpu.read_device(&stats).expect("stats");
        let w = |i: usize| u64::from_ne_bytes(s[i * 8..i * 8 + 8].try_into().unwrap());
        let e = gpu.read_device(&expect).expect("expect");
        let st = gpu.read_device(&status).expect("status");
        println!(
            "{k}: wqes {} cqes {} bad wqes {} bad payloads {} bad doorbells {}",
            w(1),
            w(2),
            w(3),
            w(4),
            w(5)
        );
        assert_eq!(i32::from_ne_bytes(st[..4].try_into().unwrap()), 0, "{k}");
        assert_eq!((w(3), w(4), w(5)), (0, 0, 0), "{k}");
        assert!(
            e.chunks(4)
                .all(|c| u32::from_ne_bytes(c.try_into().unwrap()) == iters),
            "{k}: payloads missing"
        );
    }
}

enum Q {
    A(ibgda::queue::QueuePair<ibgda::wqe::Rc, GpuPlaced, GpuFence>),
    B(ibgda::queue::QueuePair<ibgda::wqe::Rc, GpuPlaced, GpuReleaseStore>),
    C(ibgda::queue::QueuePair<ibgda::wqe::Rc, GpuPlaced, ThreadFence>),
}

/// Whether an `st.mmio.relaxed.sys` store to ordinary device memory is seen by a reader
/// on another SM (the sink stands in for the NIC through such memory).
#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn mmio_store_to_device_memory_is_seen_by_another_sm() {
    let gpu = gpu();
    let buf = gpu.device_buffer(64).expect("buf");
    let args = [
        KernelArg::U64(buf.addr()),
        KernelArg::U64(0x1122_3344_5566_7788),
    ];
    // SAFETY: ibgda_mmio_probe(u64* cells, u64 value): 64 bytes allocated above.
    unsafe { gpu.launch_raw(false, "ibgda_mmio_probe", cfg(2, 1), false, &args) }.expect("launch");
    gpu.synchronize().expect("probe");
    let b = gpu.read_device(&buf).expect("read");
    let w = |i: usize| u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
    println!(
        "mmio probe: cell {:#x}, reader saw {:#x} after {} ns",
        w(0),
        w(1),
        w(2)
    );
    assert_eq!(
        w(0),
        0x1122_3344_5566_7788,
        "the mmio store did not reach memory"
    );
    assert_eq!(
        w(1),
        0x1122_3344_5566_7788,
        "the reader on another SM did not see it"
    );
}
