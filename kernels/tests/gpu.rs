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
use ibgda_kernels::gpu::{CompileOptions, Gpu, GpuError, KernelArg, KernelQueue};
use ibgda_kernels::harness::{gpu_queue_pair, host_encode, test_requests, Sink, SINK_CHECK};
use ibgda_kernels::request::{TransportForm, WqeRequest};

fn small() -> bool {
    std::env::var("IBGDA_SMALL").is_ok_and(|v| v == "1")
}

fn gpu() -> Gpu {
    // Every device wait gives up after 3 s: a protocol hang fails the test with
    // SPIN_TIMEOUT (-1024) instead of hanging the machine.
    let options = CompileOptions::new()
        .spin_limit(std::time::Duration::from_secs(3))
        .expect("a valid bound");
    Gpu::open_with(0, &options).unwrap_or_else(|e| panic!("no usable GPU: {e}"))
}

/// The producer state's counters by index: reserved, ready, posted, retired, CQ consumer.
fn state_word(s: &ibgda::queue::DeviceProducerState, i: usize) -> u64 {
    [s.reserved, s.ready, s.posted, s.retired, s.cq_consumer][i]
}

fn cfg(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The GPU-scope fence scope, for tests whose queues (throw-away device memory) are
/// executed by the doorbell sink, which counts a stale WQE as a bad one and so fails the
/// test, or by the CUDA software NIC, which reads a GpuFence queue's record only after a
/// doorbell.
fn gpu_fence() -> GpuFence {
    // SAFETY: as above: nothing a stale WQE could do reaches memory a test relies on
    // without being counted.
    unsafe { GpuFence::new() }
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
    publication_kernel(gpu, scope, if warp { "warp" } else { "thread" })
}

fn publication_kernel<S>(gpu: &Gpu, scope: S, kind: &str)
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
    let sink = Sink::start(gpu, &[&qp], SINK_CHECK, producers, 1, 1).expect("sink");
    let name = format!("ibgda_post_{kind}_{}", S::NAME);
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
    let (stats, expect) = sink.stop().expect("sink");
    let st = gpu.read_device(&status).expect("status");
    let state = gpu.read_producer_state(&q).expect("state");
    let word = |i: usize| state_word(&state, i);
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
    publication(&gpu, gpu_fence(), true);
    publication(&gpu, GpuFencedDbrec, true);
    publication(&gpu, ThreadFence, true);
    publication(&gpu, SystemReleaseStore, true);
    publication(&gpu, SystemFence, true);
    publication(&gpu, gpu_fence(), false);
    publication(&gpu, GpuReleaseStore, false);
    // The grouped per-thread path (the lanes of a warp publishing together).
    publication_kernel(&gpu, gpu_fence(), "thread_grouped");
    publication_kernel(&gpu, GpuReleaseStore, "thread_grouped");
    publication_kernel(&gpu, ThreadFence, "thread_grouped");
    // Reservations one round ahead, 4 or 32 warps sharing the queue.
    publication_kernel(&gpu, gpu_fence(), "warp_ahead");
    publication_kernel(&gpu, GpuReleaseStore, "warp_ahead");
    publication_kernel(&gpu, SystemFence, "warp_ahead");
}

/// The warp-entered occasional send (`warp_send_write_inline8`) on a small queue (64
/// WQEBBs, 16 CQEs: in ring mode the CQ bounds the room; collapsed, every CQE lands in
/// entry 0 and a wait may find several sends completed by one), thread 0 of a block
/// asking and all its threads calling: the sink checks every WQE and that the payload
/// sequence arrives complete and in order, every send completes without error, and the
/// queue's counters end consistent (everything reserved published and retired).
fn occasional<S>(gpu: &Gpu, scope: S, sends: u32, wait_every: u32, cq_mode: CqMode)
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let qp = gpu_queue_pair(gpu, 0x43, 64, 16, 8, cq_mode, scope).expect("queue");
    let q = qp.device_queue();
    let descs = ibgda_kernels::harness::descriptor_array(gpu, &[*q.raw()]).expect("descs");
    let status = gpu.device_buffer(4).expect("status");
    let sink = Sink::start(gpu, &[&qp], SINK_CHECK, 1, 1, 1).expect("sink");
    let name = format!("ibgda_occasional_send_{}", S::NAME);
    let args = [
        KernelArg::U64(descs.addr()),
        KernelArg::U32(sends),
        KernelArg::U32(wait_every),
        KernelArg::U64(0x7000_0000),
        KernelArg::U32(0x99),
        KernelArg::U64(status.addr()),
    ];
    // SAFETY: ibgda_occasional_send_S(const DeviceQueueDescriptor*, u32 n, u32 wait_every,
    // u64 raddr, u32 rkey, int* status): one descriptor of a queue pair that, with the
    // status word, lives until the sink's stop synchronizes.
    unsafe { gpu.launch_raw(false, &name, cfg(1, 128), false, &args) }.expect("launch");
    gpu.stream().synchronize().expect("sender");
    let (stats, expect) = sink.stop().expect("sink");
    let st = gpu.read_device(&status).expect("status");
    let state = gpu.read_producer_state(&q).expect("state");
    let word = |i: usize| state_word(&state, i);
    println!(
        "{name} ({cq_mode:?} CQ): {sends} sends, wait every {wait_every}: sink {stats:?}; reserved {} ready {} posted {} retired {}",
        word(0),
        word(1),
        word(2),
        word(3)
    );
    assert_eq!(
        i32::from_ne_bytes(st[..4].try_into().unwrap()),
        0,
        "{name}: an error completion or a timed-out wait"
    );
    assert_eq!(
        (stats.bad_wqes, stats.bad_payloads, stats.bad_doorbells),
        (0, 0, 0),
        "{name}: {stats:?}"
    );
    assert_eq!(expect[0], sends, "{name}: payloads missing");
    assert_eq!(stats.wqes, u64::from(sends), "{name}: WQEs consumed");
    assert_eq!(
        stats.cqes,
        u64::from(sends),
        "{name}: every send is signaled"
    );
    assert_eq!(word(0), u64::from(sends), "{name}: reserved");
    assert_eq!(
        (word(1), word(2)),
        (word(0), word(0)),
        "{name}: ready, posted"
    );
    if wait_every == 1 {
        assert_eq!(word(3), word(0), "{name}: every wait retired its send");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn the_occasional_send_delivers_every_payload_and_waits_for_room() {
    let gpu = gpu();
    occasional(&gpu, gpu_fence(), 200, 1, CqMode::Ring);
    occasional(&gpu, gpu_fence(), 200, 0, CqMode::Ring);
    occasional(&gpu, gpu_fence(), 200, 7, CqMode::Ring);
    occasional(&gpu, GpuReleaseStore, 200, 7, CqMode::Ring);
    occasional(&gpu, ThreadFence, 200, 7, CqMode::Ring);
    occasional(&gpu, SystemFence, 200, 7, CqMode::Ring);
    occasional(&gpu, gpu_fence(), 200, 1, CqMode::Collapsed);
    occasional(&gpu, gpu_fence(), 200, 7, CqMode::Collapsed);
    occasional(&gpu, gpu_fence(), 200, 0, CqMode::Collapsed);
}

/// `sink_capacity` writes a queue's ring and CQ from slot 0: given a queue with 4 published,
/// announced and never executed WQEs (the occasional send, no NIC running, no wait) it
/// refuses with `QueueNotFresh` naming the queue before anything runs (the queue pair,
/// handed over, is dropped unexecuted); a fresh queue runs.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn sink_capacity_refuses_a_queue_that_was_posted_to() {
    use ibgda_kernels::harness::{sink_capacity, SINK_RETIRE};
    let gpu = gpu();
    let qp = gpu_queue_pair(&gpu, 0x43, 64, 16, 8, CqMode::Ring, GpuReleaseStore).expect("queue");
    {
        let q = qp.device_queue();
        let descs = ibgda_kernels::harness::descriptor_array(&gpu, &[*q.raw()]).expect("descs");
        let status = gpu.device_buffer(4).expect("status");
        let args = [
            KernelArg::U64(descs.addr()),
            KernelArg::U32(4),
            KernelArg::U32(0),
            KernelArg::U64(0x7000_0000),
            KernelArg::U32(0x99),
            KernelArg::U64(status.addr()),
        ];
        // SAFETY: ibgda_occasional_send_GpuReleaseStore(const DeviceQueueDescriptor*, u32 n,
        // u32 wait_every, u64 raddr, u32 rkey, int* status): one descriptor of a queue pair
        // that, with the status word, lives until the stream is synchronized below; 4
        // signaled sends fit the ring and the CQ, and no wait is asked for.
        unsafe {
            gpu.launch_raw(
                false,
                "ibgda_occasional_send_GpuReleaseStore",
                cfg(1, 32),
                false,
                &args,
            )
        }
        .expect("launch");
        gpu.stream().synchronize().expect("sender");
        let state = gpu.read_producer_state(&q).expect("state");
        assert_eq!((state.reserved, state.posted, state.retired), (4, 4, 0));
    }
    let ring_address = qp.device_queue().raw().sq_ring;
    let refused = sink_capacity(&gpu, vec![qp], SINK_RETIRE, 1, 1).expect_err("not fresh");
    match refused {
        GpuError::QueueNotFresh {
            qpn,
            sq_ring,
            state,
        } => {
            assert_eq!((qpn, sq_ring), (0x43, ring_address));
            assert_eq!((state.reserved, state.posted), (4, 4));
        }
        other => panic!("{other}"),
    }
    let fresh =
        gpu_queue_pair(&gpu, 0x44, 64, 16, 8, CqMode::Ring, GpuReleaseStore).expect("queue");
    let c = sink_capacity(&gpu, vec![fresh], SINK_RETIRE, 1, 8).expect("a fresh queue runs");
    assert_eq!((c.stats.doorbells, c.stats.cqes), (8, 8), "{c:?}");
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
        let sink = Sink::start(gpu, &[&qp], SINK_CHECK, 0, 1, 1).expect("sink");
        let base = out.addr();
        let n = 8 * u64::from(iters);
        let args = [
            KernelArg::Queue(KernelQueue::new(&q).into()),
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
        let (stats, _) = sink.stop().expect("sink");
        let o = gpu.read_device(&out).expect("out");
        let status = i32::from_ne_bytes(o[(3 * n + 16) as usize..][..4].try_into().unwrap());
        let state = gpu.read_producer_state(&q).expect("state");
        let word = |i: usize| state_word(&state, i);
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
        rings.push(gpu.read_send_ring(&q).expect("ring"));
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
    issue_end_to_end(&gpu, gpu_fence());
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
            "GpuFence" => Q::A(
                gpu_queue_pair(&gpu, 0x42, 256, 256, 64, CqMode::Ring, gpu_fence()).expect("q"),
            ),
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

// ---------------------------------------------------------------------------------------
// The CUDA software NIC.

use ibgda::softnic::{atomic_new_value, Access};
use ibgda::wqe::{AtomicOp, AtomicWidth, CompactAddressVector, FullAddressVector, LinkAddress};
use ibgda_kernels::request::Shape;
use ibgda_kernels::softnic::builder::{DeviceNicBuilder, QueueOptions};
use ibgda_kernels::softnic::device::replay_on_device;
use ibgda_kernels::softnic::scenario::{compare, replay_on_host, run_on_fabric, Rng, Scenario};
use zerocopy::IntoBytes;

/// (a) The differential streams of `softnic_diff` (a fixed batch of seeds) executed by the
/// GPU engine over device memory, one launch to idle per doorbell point: memory, CQs,
/// queue states and totals identical to the CPU NIC's after every point.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn cuda_nic_replays_the_differential_streams() {
    let gpu = gpu();
    let seeds = if small() { 12u64 } else { 200 };
    let (mut points, mut wqes, mut executed, mut failed, mut flushed) = (0, 0, 0, 0, 0);
    let t0 = std::time::Instant::now();
    for seed in 0..seeds {
        let s = Scenario::generate(seed);
        let run = run_on_fabric(&s).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let host = replay_on_host(&run).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        compare(&run, &host).unwrap_or_else(|e| panic!("seed {seed} (host engine): {e}"));
        let device =
            replay_on_device(&gpu, &run).unwrap_or_else(|e| panic!("seed {seed}: GPU: {e}"));
        compare(&run, &device).unwrap_or_else(|e| panic!("seed {seed} (GPU engine): {e}"));
        points += run.snapshots.len();
        wqes += run.wqes_posted;
        let st = run.snapshots.last().expect("a point").stats;
        executed += st.wqes_executed;
        failed += st.wqes_failed;
        flushed += st.wqes_flushed;
    }
    println!(
        "GPU engine = CPU NIC on {seeds} streams ({points} doorbell points, {wqes} WQEs posted: \
         {executed} executed, {failed} failed, {flushed} flushed) in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

/// One request of the end-to-end test and what it does to the model.
struct Posted {
    req: WqeRequest,
    status: i32,
}

/// What one request does to the model.
type Effect = Box<dyn FnOnce(&mut Model)>;

/// The host model of the end-to-end test's memory: buffers by name.
struct Model {
    bufs: Vec<(u64, Vec<u8>)>,
}

impl Model {
    fn at(&mut self, addr: u64, len: usize) -> &mut [u8] {
        for (base, b) in &mut self.bufs {
            if addr >= *base && addr + len as u64 <= *base + b.len() as u64 {
                let o = (addr - *base) as usize;
                return &mut b[o..o + len];
            }
        }
        panic!("model has no {len} bytes at {addr:#x}")
    }
}

/// (b) End to end: GPU producer kernels post to GPU-placed queues served by the persistent
/// CUDA NIC (two engines, two SMs): one thread per queue posts inline and pointer WRITEs,
/// READs, every atomic, NOP and DUMP (RC loopback, DC compact and full to a DCT on another
/// node, a faulting queue), ringing every few WQEs across ring wraps; the per-thread and
/// per-warp shared paths post 8-byte inline WRITEs. Every payload, READ result, atomic
/// operand and atomic result is checked against a host model, and every completion's
/// status (the fault, then flushes).
#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn cuda_nic_end_to_end_with_gpu_producers() {
    let gpu = gpu();
    let per: u32 = if small() { 24 } else { 160 };
    let (tb, tt, titers) = if small() {
        (2u32, 32u32, 4u32)
    } else {
        (4, 64, 16)
    };
    let (wb, wt, witers) = if small() {
        (2u32, 64u32, 2u32)
    } else {
        (4, 128, 8)
    };
    let mut rng = Rng::new(0xe2e);
    let bytes =
        |rng: &mut Rng, n: usize| -> Vec<u8> { (0..n).map(|_| rng.next_u64() as u8).collect() };

    // Memory, all allocated before the NIC starts.
    let src_init = bytes(&mut rng, 8192);
    let atom_init = bytes(&mut rng, 4096);
    let atom1_init = bytes(&mut rng, 4096);
    let device = |b: ibgda::memory::DeviceBuffer| std::sync::Arc::new(b);
    let src = device(gpu.device_buffer_from(&src_init).expect("src"));
    let dst = device(gpu.device_buffer(192 << 10).expect("dst"));
    let dst1 = device(gpu.device_buffer(96 << 10).expect("dst1"));
    let atom = device(gpu.device_buffer_from(&atom_init).expect("atom"));
    let atom1 = device(gpu.device_buffer_from(&atom1_init).expect("atom1"));
    let res = device(gpu.device_buffer(32 << 10).expect("res"));
    let shared_t = device(gpu.device_buffer(8 * (tb * tt) as usize).expect("shared_t"));
    let shared_w = device(gpu.device_buffer(8 * (wb * wt) as usize).expect("shared_w"));
    let (lw, rw, rr, ra) = (
        Access::LOCAL_WRITE,
        Access::REMOTE_WRITE,
        Access::REMOTE_READ,
        Access::REMOTE_ATOMIC,
    );
    const DCT: u32 = 0x200;
    const DC_KEY: u64 = 0x0123_4567_89ab_cdef;

    // Queues: q0, q1 RC loopback, q2 DC, q3 RC loopback with a fault (exclusive producers,
    // GpuFence); q4 per-thread shared path (GpuFence); q5 per-warp (GpuReleaseStore).
    // The GpuFence queues are executed by the CUDA software NIC, which the builder makes
    // read their doorbell records only after a doorbell (the scope's contract).
    let fence = gpu_fence();
    let rc = |qpn| gpu_queue_pair(&gpu, qpn, 64, 128, 16, CqMode::Ring, fence).expect("q");
    let (q0, q1, q3) = (rc(0x100), rc(0x101), rc(0x103));
    use ibgda::wqe::{Compact, Dc};
    let q2 = gpu
        .queue_pair::<Dc<Compact>, _>(0x102, 64, 128, 16, CqMode::Ring, fence)
        .expect("q2");
    let q4 = gpu_queue_pair(&gpu, 0x104, 256, 256, 64, CqMode::Ring, fence).expect("q4");
    let q5 = gpu_queue_pair(&gpu, 0x105, 256, 256, 64, CqMode::Ring, GpuReleaseStore).expect("q5");

    // The NIC: two nodes, the regions on both engines, engine 0 serving q0..q2 and the DC
    // target (on node 1), engine 1 serving q3..q5; every table record made by the builder.
    let mut builder = DeviceNicBuilder::new();
    let node0 = builder.node(1).expect("node 0");
    let node1 = builder.node(2).expect("node 1");
    let (e0, e1) = (builder.engine(), builder.engine());
    let mut reg = |node, b: &std::sync::Arc<ibgda::memory::DeviceBuffer>, access| {
        builder.region(node, b, 0, b.len(), access).expect("region")
    };
    let k_src = reg(node0, &src, lw | rr);
    let k_dst = reg(node0, &dst, lw | rw | rr);
    let k_atom = reg(node0, &atom, lw | ra);
    let k_res = reg(node0, &res, lw);
    let k_shared_t = reg(node0, &shared_t, lw | rw);
    let k_shared_w = reg(node0, &shared_w, lw | rw);
    let k_dst1 = reg(node1, &dst1, lw | rw | rr);
    let k_atom1 = reg(node1, &atom1, lw | ra);
    let k_src1 = reg(node1, &src, lw | rr);
    let options = QueueOptions {
        max_message_bytes: 1 << 16,
        doorbell_only: false,
    };
    for (engine, q) in [(e0, &q0), (e0, &q1), (e1, &q3), (e1, &q4)] {
        let slot = builder.rc(engine, node0, q, options).expect("RC");
        builder.connect(slot, slot).expect("loopback");
    }
    let slot = builder.rc(e1, node0, &q5, options).expect("RC");
    builder.connect(slot, slot).expect("loopback");
    builder.dci(e0, node0, &q2, options).expect("DCI");
    builder
        .dc_target(e0, node1, DCT, DC_KEY)
        .expect("DC target");
    // A key no region has: its WRITE fails with a remote access error.
    let unknown_rkey = 0xdead;
    assert!(
        [k_src, k_dst, k_atom, k_res, k_shared_t, k_shared_w, k_dst1, k_atom1, k_src1]
            .iter()
            .all(|k| k.rkey.0 != unknown_rkey && k.lkey.0 != unknown_rkey),
        "the builder handed out the key the test uses as unknown"
    );

    // The requests and the model.
    let mut model = Model {
        bufs: vec![
            (src.addr(), src_init.clone()),
            (dst.addr(), vec![0; dst.len()]),
            (dst1.addr(), vec![0; dst1.len()]),
            (atom.addr(), atom_init.clone()),
            (atom1.addr(), atom1_init.clone()),
            (res.addr(), vec![0; res.len()]),
        ],
    };
    let compact = *CompactAddressVector {
        dct: DCT,
        dc_key: DC_KEY,
        lid: 2,
        ..Default::default()
    }
    .encode()
    .expect("AV")
    .segment();
    let full = *FullAddressVector {
        dct: DCT,
        dc_key: DC_KEY,
        link: LinkAddress::InfiniBand {
            lid: 2,
            sl: 0,
            static_rate: 0,
            source_path_bits: 0,
            force_loopback: false,
            grh: None,
        },
    }
    .encode()
    .expect("AV")
    .segment();
    let fault_at = per / 2;
    let mut posted: Vec<Posted> = Vec::new();
    let mut kinds = std::collections::BTreeMap::<&str, u32>::new();
    for t in 0..4u32 {
        let dc = t == 2;
        let (rdst, rdst_key, ratom, ratom_key, rsrc_key) = if dc {
            (
                dst1.addr(),
                k_dst1.rkey.0,
                atom1.addr(),
                k_atom1.rkey.0,
                k_src1.rkey.0,
            )
        } else {
            (
                dst.addr(),
                k_dst.rkey.0,
                atom.addr(),
                k_atom.rkey.0,
                k_src.rkey.0,
            )
        };
        let mut failed = false;
        for k in 0..per {
            let n = u64::from(t * per + k);
            let mut r = WqeRequest {
                fm_ce_se: 0x08,
                ..Default::default()
            };
            if dc {
                if k % 2 == 0 {
                    r.transport = TransportForm::DcCompact as u32;
                    r.av[..16].copy_from_slice(compact.as_bytes());
                } else {
                    r.transport = TransportForm::DcFull as u32;
                    r.av.copy_from_slice(full.as_bytes());
                }
            }
            let slot = n * 128; // this request's own 128 bytes of dst / dst1
            let mut effect: Option<Effect> = None;
            let name;
            match k % 12 {
                0 | 6 => {
                    name = "WRITE inline";
                    let len = 1 + (k * 7 % 100);
                    let data = bytes(&mut rng, len as usize);
                    r.shape = Shape::WriteInline as u32;
                    r.len = len;
                    r.inline_data[..len as usize].copy_from_slice(&data);
                    r.raddr = rdst + slot;
                    r.rkey = rdst_key;
                    let a = r.raddr;
                    effect = Some(Box::new(move |m: &mut Model| {
                        m.at(a, data.len()).copy_from_slice(&data)
                    }));
                }
                1 | 7 => {
                    name = "WRITE gather";
                    let len = 1 + (k * 13 % 120);
                    let off = n * 37 % 4000;
                    r.shape = Shape::Write as u32;
                    r.len = len;
                    r.laddr = src.addr() + off;
                    r.lkey = k_src.lkey.0;
                    r.raddr = rdst + slot;
                    r.rkey = rdst_key;
                    let (s, d) = (r.laddr, r.raddr);
                    effect = Some(Box::new(move |m: &mut Model| {
                        let v = m.at(s, len as usize).to_vec();
                        m.at(d, len as usize).copy_from_slice(&v);
                    }));
                }
                2 | 8 => {
                    name = "READ";
                    let len = 1 + (k * 11 % 128);
                    let off = n * 53 % 4000;
                    r.shape = Shape::Read as u32;
                    r.len = len;
                    r.raddr = src.addr() + off;
                    r.rkey = rsrc_key;
                    r.laddr = dst.addr() + (96 << 10) + slot; // READs land in the upper half
                    r.lkey = k_dst.lkey.0;
                    let (s, d) = (r.raddr, r.laddr);
                    effect = Some(Box::new(move |m: &mut Model| {
                        let v = m.at(s, len as usize).to_vec();
                        m.at(d, len as usize).copy_from_slice(&v);
                    }));
                }
                11 => {
                    name = if k % 24 == 11 { "NOP" } else { "DUMP" };
                    r.shape = if k % 24 == 11 {
                        Shape::Nop
                    } else {
                        Shape::Dump
                    } as u32;
                    r.laddr = src.addr() + n % 1000;
                    r.len = 64;
                    r.lkey = k_src.lkey.0;
                }
                a => {
                    // Atomics: this queue's own words, results to its own RES slots.
                    let which = (a + k / 12) % 6; // every atomic kind over the stream
                    let (shape, width, word) = match which {
                        3 => (Shape::FetchAdd, AtomicWidth::Eight, 8 * (k % 4)),
                        4 => (Shape::CompareSwap, AtomicWidth::Eight, 8 * (k % 4)),
                        5 => (Shape::MaskedFetchAdd4, AtomicWidth::Four, 64 + 4 * (k % 8)),
                        0 => (
                            Shape::MaskedCompareSwap4,
                            AtomicWidth::Four,
                            64 + 4 * (k % 8),
                        ),
                        1 => (
                            Shape::MaskedFetchAdd8,
                            AtomicWidth::Eight,
                            128 + 8 * (k % 4),
                        ),
                        _ => (
                            Shape::MaskedCompareSwap8,
                            AtomicWidth::Eight,
                            128 + 8 * (k % 4),
                        ),
                    };
                    name = match shape {
                        Shape::FetchAdd => "FA",
                        Shape::CompareSwap => "CS",
                        Shape::MaskedFetchAdd4 => "masked FA 4",
                        Shape::MaskedCompareSwap4 => "masked CS 4",
                        Shape::MaskedFetchAdd8 => "masked FA 8",
                        _ => "masked CS 8",
                    };
                    let size = width.bytes() as usize;
                    let operand = ratom + u64::from(t) * 256 + u64::from(word);
                    let old = model
                        .at(operand, size)
                        .iter()
                        .fold(0u64, |acc, &b| acc << 8 | u64::from(b));
                    let mask = if size == 4 { 0xffff_ffff } else { u64::MAX };
                    let v: [u64; 4] = core::array::from_fn(|_| rng.next_u64() & mask);
                    let compare = if k % 3 == 0 { v[1] } else { old };
                    let op = match shape {
                        Shape::FetchAdd => AtomicOp::FetchAdd { add: v[0] },
                        Shape::CompareSwap => AtomicOp::CompareSwap {
                            compare,
                            swap: v[0],
                        },
                        Shape::MaskedFetchAdd4 | Shape::MaskedFetchAdd8 => {
                            AtomicOp::MaskedFetchAdd {
                                width,
                                add: v[0],
                                field_boundary: v[1],
                            }
                        }
                        _ => AtomicOp::MaskedCompareSwap {
                            width,
                            swap: v[0],
                            compare,
                            swap_mask: v[2],
                            compare_mask: v[3],
                        },
                    };
                    let (op0, op1, op2, op3) = match op {
                        AtomicOp::FetchAdd { add } => (add, 0, 0, 0),
                        AtomicOp::CompareSwap { compare, swap } => (swap, compare, 0, 0),
                        AtomicOp::MaskedFetchAdd {
                            add,
                            field_boundary,
                            ..
                        } => (add, field_boundary, 0, 0),
                        AtomicOp::MaskedCompareSwap {
                            swap,
                            compare,
                            swap_mask,
                            compare_mask,
                            ..
                        } => (swap, compare, swap_mask, compare_mask),
                    };
                    r.shape = shape as u32;
                    r.op0 = op0;
                    r.op1 = op1;
                    r.op2 = op2;
                    r.op3 = op3;
                    r.raddr = operand;
                    r.rkey = ratom_key;
                    r.laddr = res.addr() + n * 8;
                    r.lkey = k_res.lkey.0;
                    let result = r.laddr;
                    effect = Some(Box::new(move |m: &mut Model| {
                        let old = m
                            .at(operand, size)
                            .iter()
                            .fold(0u64, |acc, &b| acc << 8 | u64::from(b));
                        let new = atomic_new_value(&op, old);
                        m.at(operand, size)
                            .copy_from_slice(&new.to_be_bytes()[8 - size..]);
                        m.at(result, size)
                            .copy_from_slice(&old.to_be_bytes()[8 - size..]);
                    }));
                }
            }
            let mut status = 0;
            if t == 3 && k == fault_at {
                // A WRITE with an unknown rkey: REMOTE_ACCESS, then every later WQE flushed.
                r.shape = Shape::WriteInline as u32;
                r.len = 8;
                r.raddr = dst.addr() + slot;
                r.rkey = unknown_rkey;
                effect = None;
                status = -0x13;
                failed = true;
            } else if failed {
                effect = None;
                status = -0x05;
            }
            *kinds.entry(name).or_default() += 1;
            if let Some(f) = effect {
                f(&mut model);
            }
            posted.push(Posted { req: r, status });
        }
    }
    let req_bytes: Vec<u8> = posted
        .iter()
        .flat_map(|p| {
            // SAFETY: WqeRequest is #[repr(C)] plain data without padding (264 bytes of
            // integers and byte arrays); viewing it as bytes reads initialised memory.
            unsafe {
                core::slice::from_raw_parts(
                    (&p.req as *const WqeRequest).cast::<u8>(),
                    size_of::<WqeRequest>(),
                )
            }
            .to_vec()
        })
        .collect();
    let dev_reqs = gpu.device_buffer_from(&req_bytes).expect("requests");
    let descs = ibgda_kernels::harness::descriptor_array(
        &gpu,
        &[
            *q0.device_queue().raw(),
            *q1.device_queue().raw(),
            *q2.device_queue().raw(),
            *q3.device_queue().raw(),
        ],
    )
    .expect("descs");
    let desc4 =
        ibgda_kernels::harness::descriptor_array(&gpu, &[*q4.device_queue().raw()]).expect("d4");
    let desc5 =
        ibgda_kernels::harness::descriptor_array(&gpu, &[*q5.device_queue().raw()]).expect("d5");
    let statuses = gpu.device_buffer(4 * posted.len()).expect("statuses");
    let status = gpu.device_buffer(12).expect("status");
    let mut nic = builder.build(&gpu).expect("NIC");

    // Run: the NIC on two blocks of the side stream, the producers on the main stream.
    nic.start().expect("start NIC");
    let args = [
        KernelArg::U64(descs.addr()),
        KernelArg::U32(4),
        KernelArg::U64(dev_reqs.addr()),
        KernelArg::U32(per),
        KernelArg::U32(5),
        KernelArg::U64(statuses.addr()),
        KernelArg::U64(status.addr()),
    ];
    // SAFETY: ibgda_nic_requests_GpuFence(const DeviceQueueDescriptor*, u32 nq, const
    // WqeRequest*, u32 per, u32 batch, int* statuses, int* status): 4 descriptors, 4 * per
    // requests, 4 * per statuses, one status; all alive until after `nic.stop`.
    unsafe {
        gpu.launch_raw(
            false,
            "ibgda_nic_requests_GpuFence",
            cfg(1, 4),
            false,
            &args,
        )
    }
    .expect("launch requests");
    let thread_args = [
        KernelArg::U64(desc4.addr()),
        KernelArg::U32(1),
        KernelArg::U32(titers),
        KernelArg::U32(32),
        KernelArg::U64(shared_t.addr()),
        KernelArg::U32(k_shared_t.rkey.0),
        KernelArg::U64(status.addr() + 4),
    ];
    // SAFETY: ibgda_post_thread_GpuFence(const DeviceQueueDescriptor*, u32 nq, u32 iters,
    // u32 batch, u64 raddr, u32 rkey, int* status): thread tid writes raddr + 8 * tid,
    // inside shared_t (8 bytes per thread); alive until after `nic.stop`.
    unsafe {
        gpu.launch_raw(
            false,
            "ibgda_post_thread_GpuFence",
            cfg(tb, tt),
            false,
            &thread_args,
        )
    }
    .expect("launch per-thread");
    let warp_args = [
        KernelArg::U64(desc5.addr()),
        KernelArg::U32(1),
        KernelArg::U32(witers),
        KernelArg::U32(32),
        KernelArg::U64(shared_w.addr()),
        KernelArg::U32(k_shared_w.rkey.0),
        KernelArg::U64(status.addr() + 8),
    ];
    // SAFETY: ibgda_post_warp_GpuReleaseStore(...), as above, inside shared_w.
    unsafe {
        gpu.launch_raw(
            false,
            "ibgda_post_warp_GpuReleaseStore",
            cfg(wb, wt),
            false,
            &warp_args,
        )
    }
    .expect("launch per-warp");
    gpu.stream().synchronize().expect("producers");
    nic.stop().expect("stop NIC");

    // Check.
    let engines = nic.read().expect("NIC state");
    for (i, (e, t)) in engines.iter().enumerate() {
        let mhz = e.cycles as f64 * 1e3 / e.ns.max(1) as f64;
        println!(
            "engine {i}: status {}, {} steps in {:.1} ms, SM clock {mhz:.0} MHz (clock64 / %globaltimer); {:?}",
            e.status,
            e.steps,
            e.ns as f64 / 1e6,
            e.stats
        );
        for q in &t.queues {
            println!(
                "  QP {:#x}: state {} consumer {} WQEs {} error ({}, {:#x}, {:#x}, {})",
                q.qpn,
                q.state,
                q.consumer,
                q.executed,
                q.error_kind,
                q.error_syndrome,
                q.error_vendor,
                q.error_detail
            );
        }
        assert_eq!(e.status, 0, "engine {i} status");
    }
    println!("requests per kind: {kinds:?}");
    let st = gpu.read_device(&status).expect("status");
    let words: Vec<i32> = st
        .chunks(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(
        words,
        [0, 0, 0],
        "producer status (requests, per-thread, per-warp)"
    );
    let got: Vec<i32> = gpu
        .read_device(&statuses)
        .expect("statuses")
        .chunks(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    for (i, p) in posted.iter().enumerate() {
        assert_eq!(
            got[i],
            p.status,
            "completion {} of queue {}",
            i as u32 % per,
            i as u32 / per
        );
    }
    for (name, buf, want) in [
        ("dst", &dst, &model.bufs[1].1),
        ("dst1", &dst1, &model.bufs[2].1),
        ("atom", &atom, &model.bufs[3].1),
        ("atom1", &atom1, &model.bufs[4].1),
        ("res", &res, &model.bufs[5].1),
        ("src", &src, &model.bufs[0].1),
    ] {
        let have = gpu.read_device(buf).expect("read");
        if let Some(k) = (0..have.len()).find(|&k| have[k] != want[k]) {
            panic!(
                "{name} byte {k}: GPU {:#04x}, model {:#04x}",
                have[k], want[k]
            );
        }
    }
    for (name, buf, n, iters) in [
        ("per-thread", &shared_t, tb * tt, titers),
        ("per-warp", &shared_w, wb * wt, witers),
    ] {
        let have = gpu.read_device(buf).expect("read");
        for tid in 0..n as usize {
            let v = u64::from_le_bytes(have[8 * tid..8 * tid + 8].try_into().unwrap());
            assert_eq!(
                v,
                (tid as u64) << 32 | u64::from(iters - 1),
                "{name} thread {tid}"
            );
        }
    }
    for (name, s) in [
        (
            "per-thread",
            gpu.read_producer_state(&q4.device_queue()).expect("state"),
        ),
        (
            "per-warp",
            gpu.read_producer_state(&q5.device_queue()).expect("state"),
        ),
    ] {
        let w = |i: usize| state_word(&s, i);
        println!(
            "{name}: reserved {} ready {} posted {} retired {}",
            w(0),
            w(1),
            w(2),
            w(3)
        );
        assert!(
            w(0) == w(1) && w(1) == w(2) && w(2) == w(3),
            "{name}: not all retired"
        );
    }
    let e1 = engines[1].0.stats;
    assert_eq!(e1.wqes_failed, 1, "one fault");
    assert_eq!(
        e1.wqes_flushed,
        u64::from(per - fault_at - 1),
        "flushes after it"
    );
    println!(
        "{} requests on 4 queues + {} per-thread and {} per-warp WQEs: every payload, READ, atomic operand and result, and completion status as expected",
        posted.len(),
        tb * tt * titers,
        wb * wt * witers
    );
}

// ---------------------------------------------------------------------------------------
// Loading, user programs and the scope check.

/// Under CUDA's lazy loading (`gpu-run.sh` runs with `CUDA_MODULE_LOADING=LAZY`), every
/// kernel of both programs is fully loaded once `Gpu::open` returns: nothing is left for a
/// first launch to load while a persistent kernel runs.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn every_kernel_is_loaded_at_open_whatever_the_loading_mode() {
    use cudarc::driver::sys as cu;
    let gpu = gpu();
    let mut mode = cu::CUmoduleLoadingMode::CU_MODULE_EAGER_LOADING;
    // SAFETY: the driver is initialised (`Gpu::open`); `mode` is a valid out-pointer.
    unsafe { cu::cuModuleGetLoadingMode(&mut mode) }
        .result()
        .expect("loading mode");
    let mut n = 0;
    for (i, c) in gpu.compiled().iter().enumerate() {
        for k in ibgda_kernels::ptx::kernel_orderings(&c.ptx) {
            let f = if i == 0 {
                gpu.function(&k.kernel)
            } else {
                gpu.raw_function(&k.kernel)
            }
            .unwrap_or_else(|e| panic!("{}: {e}", k.kernel));
            let mut state = cu::CUfunctionLoadingState::CU_FUNCTION_LOADING_STATE_UNLOADED;
            // SAFETY: `f` is a live function handle of a loaded module; `state` is a valid
            // out-pointer.
            unsafe { cu::cuFuncIsLoaded(&mut state, f.cu_function()) }
                .result()
                .expect("cuFuncIsLoaded");
            assert_eq!(
                state,
                cu::CUfunctionLoadingState::CU_FUNCTION_LOADING_STATE_LOADED,
                "{} not loaded",
                k.kernel
            );
            n += 1;
        }
    }
    println!("loading mode {mode:?}: all {n} kernels loaded at open");
}

/// A user kernel whose C name says GpuFence but whose body posts with ThreadFence traps
/// on the GpuFence descriptor it is given (a launch failure at the next synchronize),
/// while the honest instance runs. The trap leaves the context unusable: run this test in
/// a process of its own (gpu-run.sh does).
#[test]
#[ignore = "needs an NVIDIA GPU; poisons its CUDA context: run alone with --exact"]
fn a_user_kernel_posting_with_another_scope_traps() {
    use ibgda::wqe::Rc;
    let gpu = gpu();
    let source = include_str!("cuda/lying_scope.cu");
    let program = gpu.compile_program("lying.cu", source).expect("compiles");
    let qp = gpu_queue_pair(&gpu, 0x31, 64, 64, 16, CqMode::Ring, gpu_fence()).expect("queue");
    let status = gpu.device_buffer(4).expect("status");
    let honest = program.kernel::<Rc, GpuFence>("honest").expect("honest");
    // SAFETY: honest_GpuFence(descriptor, int* status): `status` is 4 bytes, alive past the
    // synchronize; the kernel writes one WQE into the queue's own ring.
    unsafe {
        honest.launch(
            &qp.device_queue(),
            cfg(1, 1),
            &[KernelArg::U64(status.addr())],
        )
    }
    .expect("launch");
    gpu.synchronize().expect("the honest instance runs");
    let st = gpu.read_device(&status).expect("status");
    assert_eq!(i32::from_ne_bytes(st[..4].try_into().unwrap()), 7);
    let lying = program.kernel::<Rc, GpuFence>("lying").expect("lying");
    // SAFETY: as above.
    let launched = unsafe {
        lying.launch(
            &qp.device_queue(),
            cfg(1, 1),
            &[KernelArg::U64(status.addr())],
        )
    };
    let result = launched.and_then(|()| gpu.synchronize());
    println!("lying kernel: {result:?}");
    assert!(result.is_err(), "a kernel posting with another scope ran");
}

/// The persistent kernels are guards: a sink and a CUDA software NIC dropped while running
/// stop and are waited for (without `Drop`, the synchronize after them would never return
/// and gpu-run.sh's time limit would fail the test).
#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn dropped_persistent_kernels_stop() {
    let gpu = gpu();
    let qp = gpu_queue_pair(&gpu, 0x21, 64, 64, 16, CqMode::Ring, GpuReleaseStore).expect("queue");
    {
        let _sink = Sink::start(&gpu, &[&qp], SINK_CHECK, 0, 1, 1).expect("sink");
        // One executor per queue: while the sink runs, no NIC may take its queue.
        let mut second = DeviceNicBuilder::new();
        let (node, engine) = (second.node(1).expect("node"), second.engine());
        let refused = second.rc(engine, node, &qp, QueueOptions::default());
        assert!(
            matches!(refused, Err(GpuError::ExecutedElsewhere(_))),
            "a NIC took the queue a running sink executes: {refused:?}"
        );
    }
    gpu.synchronize().expect("the sink stopped");
    let mut builder = DeviceNicBuilder::new();
    let (node, engine) = (builder.node(1).expect("node"), builder.engine());
    let slot = builder
        .rc(engine, node, &qp, QueueOptions::default())
        .expect("the sink let go of the queue");
    builder.connect(slot, slot).expect("loopback");
    {
        let mut nic = builder.build(&gpu).expect("NIC");
        nic.start().expect("start");
        assert!(nic.is_running());
        assert!(nic.start().is_err(), "a second start of a running NIC");
        assert!(nic.read().is_err(), "tables read while running");
        let refused = Sink::start(&gpu, &[&qp], SINK_CHECK, 0, 1, 1);
        assert!(
            matches!(refused, Err(GpuError::ExecutedElsewhere(_))),
            "a sink started over the queue a running NIC executes"
        );
    }
    gpu.synchronize().expect("the NIC stopped");
    println!("dropped sink and CUDA NIC stopped and were waited for");
}

/// Runs each configuration with the checking sink under a safe scope (no stale WQE; every
/// lane's payload sequence complete and in order) and under `GpuFence` (stale fetches
/// counted, none lost), and prints `what` with the figures.
fn exclusive_queues_deliver_every_wqe(
    what: &str,
    configs: &[ibgda_kernels::experiments::rate::RateConfig],
) {
    use ibgda_kernels::experiments::rate::run_checked;
    use ibgda_kernels::experiments::{bench_options, BenchProgram};
    let gpu = Gpu::open_with(0, &bench_options().expect("options")).expect("GPU");
    let program = BenchProgram::load(&gpu).expect("bench program");
    let gpu_fence = gpu_fence();
    for &c in configs {
        let safe = run_checked(&gpu, &program, GpuFencedDbrec, c).expect("GpuFencedDbrec");
        assert_eq!(safe.stale_wqes, 0);
        assert!(safe.sink_wqebbs >= safe.wqes);
        let fenced = run_checked(&gpu, &program, gpu_fence, c).expect("GpuFence");
        assert!(fenced.sink_wqebbs >= fenced.wqes);
        println!(
            "{what} {} queues x {} warps: {} WQEs checked each; {:.0} M WQE/s (GpuFencedDbrec), {:.0} (GpuFence, {} stale), checking sink, SM {:.0} MHz",
            c.queues,
            c.blocks * c.threads / 32 / c.queues,
            safe.wqes,
            safe.mwqe_per_s,
            fenced.mwqe_per_s,
            fenced.stale_wqes,
            fenced.sm_mhz
        );
    }
}

/// The warp-exclusive producer (one warp owns each queue, lane 0 rings for the warp):
/// with the sink checking every WQE's control segment (index, QPN, DS) as it consumes it,
/// every WQE of 1, 64 and 128 warp-owned queues arrives, in order, under a safe scope and
/// under `GpuFence`, the rings wrapping (4,096 WQEBBs, 2,000 rounds of 32 per warp).
#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn warp_exclusive_queues_deliver_every_wqe_in_order() {
    use ibgda_kernels::experiments::rate::{config, Publication};
    let configs: Vec<_> = [(1, 32, 1), (64, 32, 64), (64, 64, 128)]
        .into_iter()
        .map(|(blocks, threads, queues)| {
            config(
                Publication::WarpExclusive,
                blocks,
                threads,
                queues,
                1,
                32,
                2_000,
            )
        })
        .collect();
    exclusive_queues_deliver_every_wqe("warp-exclusive", &configs);
}

/// The block-exclusive producer (one block owns each queue, its warps sharing it through
/// shared-memory counters, lane 0 of each warp publishing in reservation order): with the
/// checking sink, every WQE of 1 queue (8 warps), 16 queues (8 warps each) and 4 queues
/// (16 warps each) arrives, in order, under a safe scope and under `GpuFence`, the rings
/// wrapping.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn block_exclusive_queues_deliver_every_wqe_in_order() {
    use ibgda_kernels::experiments::rate::{config, Publication};
    let configs: Vec<_> = [(1, 256, 1_000), (16, 256, 500), (4, 512, 400)]
        .into_iter()
        .map(|(blocks, threads, rounds)| {
            config(
                Publication::BlockExclusive,
                blocks,
                threads,
                blocks,
                threads / 32,
                32,
                rounds,
            )
        })
        .collect();
    exclusive_queues_deliver_every_wqe("block-exclusive", &configs);
}

/// Every safe GPU scope orders the WQE stores before the doorbell record: the sink, which
/// follows the record as an mlx5 NIC may and checks every WQE's control segment as it
/// consumes it, never fetches a stale WQE. At least `IBGDA_SOAK_WQES` (default 10^9; 4 x
/// 10^7 with IBGDA_SMALL=1) WQEs per scope on 64 single-warp queues, the row where
/// `GpuFence` showed stale WQEs. A stale WQE fails the launch that saw it.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn safe_scopes_never_let_the_sink_fetch_a_stale_wqe() {
    use ibgda_kernels::experiments::{bench_options, rate, BenchProgram};
    let min_wqes: u64 = std::env::var("IBGDA_SOAK_WQES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if small() { 40_000_000 } else { 1_000_000_000 });
    let gpu = Gpu::open_with(0, &bench_options().expect("options")).expect("GPU");
    let program = BenchProgram::load(&gpu).expect("bench program");
    let t0 = std::time::Instant::now();
    let results = [
        rate::soak(&gpu, &program, GpuFencedDbrec, min_wqes),
        rate::soak(&gpu, &program, GpuReleaseStore, min_wqes),
        rate::soak(&gpu, &program, ThreadFence, min_wqes),
        rate::soak(&gpu, &program, SystemReleaseStore, min_wqes),
        rate::soak(&gpu, &program, SystemFence, min_wqes),
    ];
    for r in &results {
        match r {
            Ok(s) => println!(
                "stale-WQE soak {}: {} stale of {} WQEs checked ({} launches of {:?}), {:.0} M WQE/s, SM {:.0} MHz",
                s.scope, s.stale_wqes, s.wqes_checked, s.launches, s.config, s.mwqe_per_s, s.sm_mhz
            ),
            Err(e) => println!("stale-WQE soak failed: {e}"),
        }
    }
    println!("soak took {:.1} s", t0.elapsed().as_secs_f64());
    for r in results {
        let s = r.expect("a safe scope's soak");
        assert_eq!(s.stale_wqes, 0, "{}", s.scope);
        assert!(s.wqes_checked >= min_wqes);
    }
}
