//! The proxy and the CPU-assisted doorbell with GPU producers, on the software NIC (CPU
//! engines execute what CPU workers and GPU threads post): every payload, counter and
//! completion checked. Needs an NVIDIA GPU: run with `--ignored` on the GPU machine
//! (`kernels/gpu-run.sh proxy`). Every device wait is bounded at run time (each ring's and
//! each queue's device wait, [`WAIT`]): a hang is an error status, and a ring nobody serves
//! ends its waits at that bound.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ibgda::proxy::{Baseline, Forwarder, Handoff, ProxyRing, RingGeometry, RingProducer, Tuned};
use ibgda_kernels::gpu::{CompileOptions, Gpu, GpuError};
use ibgda_kernels::proxy::world::{World, WorldConfig};
use ibgda_kernels::proxy::{assisted_world, DeviceRing, ProxyKernels};

/// The device wait bound of every ring and queue these tests hand to the GPU.
const WAIT: Duration = Duration::from_secs(10);

fn gpu() -> (Gpu, ProxyKernels) {
    let gpu = Gpu::open_with(0, &CompileOptions::new()).unwrap_or_else(|e| panic!("no GPU: {e}"));
    let kernels = ProxyKernels::load(&gpu).unwrap_or_else(|e| panic!("{e}"));
    (gpu, kernels)
}

/// `producer`'s ring handed to GPU producers, its device waits bounded by `wait`.
fn device_ring<H: Handoff>(gpu: &Gpu, producer: RingProducer<H>, wait: Duration) -> DeviceRing<H> {
    let mut ring = DeviceRing::new(gpu, producer).unwrap_or_else(|e| panic!("{e}"));
    ring.set_device_wait(wait).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ring.device_wait(), wait);
    ring
}

fn small() -> bool {
    std::env::var_os("IBGDA_SMALL").is_some()
}

/// GPU threads push through rings served by two workers; every write lands exactly once
/// in the window of the worker serving its ring, and nothing else changes.
fn producers_end_to_end<H: Handoff>(threads_per_ring: u32) {
    let (gpu, k) = gpu();
    const WORKERS: usize = 2;
    const RINGS: usize = 4;
    const WINDOW_SLOTS: u32 = 4096;
    let mut world = World::<H>::build(
        WorldConfig {
            workers: WORKERS,
            rings: RINGS,
            batch: 4,
            slots: 64,
            window_slots: WINDOW_SLOTS as usize,
            pin_from: Some(1),
        },
        |b| gpu.mapped_host_buffer(b).map_err(|e| e.to_string()),
    )
    .unwrap();
    let mut rings: Vec<_> = world
        .producers
        .drain(..)
        .map(|p| device_ring(&gpu, p, WAIT))
        .collect();
    let threads = RINGS as u32 * threads_per_ring;
    let per_thread = if small() { 16 } else { WINDOW_SLOTS / threads };
    let ns = k
        .rate(&gpu, &mut rings, threads, per_thread, WINDOW_SLOTS)
        .unwrap_or_else(|e| panic!("{e}"));
    let reports = world.stop();
    println!(
        "{}: {threads} GPU threads x {per_thread} through {RINGS} rings, 2 workers: {ns} ns; {reports:?}",
        H::NAME
    );
    for r in &rings {
        let ring = r.ring();
        assert_eq!(ring.errors(), 0);
        assert_eq!(ring.completed(), u64::from(threads_per_ring * per_thread));
        assert_eq!(ring.consumed(), ring.completed());
    }
    let mut expected = vec![vec![0u64; WINDOW_SLOTS as usize]; WORKERS];
    for tid in 0..threads {
        let worker = (tid as usize % RINGS) % WORKERS;
        for kk in 0..per_thread {
            let slot = ((tid * per_thread + kk) % WINDOW_SLOTS) as usize;
            expected[worker][slot] = u64::from(tid) << 32 | u64::from(kk);
        }
    }
    for (w, nic) in world.nics.iter().enumerate() {
        let got: Vec<u64> = nic
            .remote
            .words()
            .iter()
            .map(|x| u64::from_le(x.load(Ordering::Acquire)))
            .collect();
        assert_eq!(got, expected[w], "worker {w}'s window");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn tuned_gpu_producers_end_to_end() {
    producers_end_to_end::<Tuned>(1);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn baseline_gpu_producers_sharing_rings_end_to_end() {
    producers_end_to_end::<Baseline>(16);
}

/// One producer's enqueue and put+completion through a proxy of handoff `H` (one worker,
/// one ring): every request completes.
fn enqueue_through<H: Handoff>(
    gpu: &Gpu,
    k: &ProxyKernels,
    iters: u32,
) -> ibgda_kernels::proxy::EnqueueSamples {
    let mut world = World::<H>::build(
        WorldConfig {
            workers: 1,
            rings: 1,
            batch: 1,
            slots: 16,
            window_slots: 64,
            pin_from: Some(1),
        },
        |b| gpu.mapped_host_buffer(b).map_err(|e| e.to_string()),
    )
    .unwrap();
    let mut ring = device_ring(gpu, world.producers.pop().unwrap(), WAIT);
    let s = k.enqueue(gpu, &mut ring, 10, iters, 64).unwrap();
    assert_eq!(ring.ring().completed(), u64::from(10 + iters));
    world.stop();
    s
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn enqueue_and_completion_through_the_proxy() {
    let (gpu, k) = gpu();
    for tuned in [false, true] {
        let iters = if small() { 50 } else { 2_000 };
        let samples = if tuned {
            enqueue_through::<Tuned>(&gpu, &k, iters)
        } else {
            enqueue_through::<Baseline>(&gpu, &k, iters)
        };
        let mut e = samples.enqueue_ns.clone();
        e.sort_unstable();
        let mut t = samples.total_ns.clone();
        t.sort_unstable();
        println!(
            "{}: enqueue p50 {} ns, put+completion p50 {} ns, SM {:.0} MHz",
            if tuned { "tuned" } else { "baseline" },
            e[e.len() / 2],
            t[t.len() / 2],
            samples.cycles as f64 / samples.ns.max(1) as f64 * 1e3
        );
        assert_eq!(samples.enqueue_ns.len(), iters as usize);
        for (en, to) in samples.enqueue_ns.iter().zip(&samples.total_ns) {
            assert!(en <= to, "completion after enqueue");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn probe_on_private_and_shared_rings() {
    let (gpu, k) = gpu();
    for shared in [false, true] {
        let mut world = World::<Baseline>::build(
            WorldConfig {
                workers: 2,
                rings: 5,
                batch: 16,
                slots: 64,
                window_slots: 1024,
                pin_from: Some(1),
            },
            |b| gpu.mapped_host_buffer(b).map_err(|e| e.to_string()),
        )
        .unwrap();
        let mut rings: Vec<_> = world
            .producers
            .drain(..)
            .map(|p| device_ring(&gpu, p, WAIT))
            .collect();
        let private = rings.pop().unwrap();
        let probe = if shared { None } else { Some(&private) };
        let out = k
            .probe(&gpu, probe, &rings, 256, 50, 1024)
            .unwrap_or_else(|e| panic!("{e}"));
        let reports = world.stop();
        assert!(reports.iter().all(|r| r.errors.is_empty()));
        let mut p = out.probe_ns.clone();
        p.sort_unstable();
        println!(
            "probe on a {} ring: p50 {} ns (bulk pushed {})",
            if shared { "shared" } else { "private" },
            p[p.len() / 2],
            out.bulk_pushed
        );
        let pushed: u64 =
            rings.iter().map(|r| r.ring().completed()).sum::<u64>() + private.ring().completed();
        assert_eq!(pushed, out.bulk_pushed + 50, "every push completed");
    }
}

/// GPU threads build WQEs and publish their index; host forwarders ring. Every write
/// lands, and nothing runs without the forwarder (the NICs watch doorbells only).
#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn cpu_assisted_doorbell_end_to_end() {
    let (gpu, k) = gpu();
    let queues = 4;
    let (mut nics, targets) = assisted_world::build(&gpu, queues, 256, 512).unwrap();
    let mut targets = targets.into_iter();
    let forwarders: Vec<_> = (0..queues.div_ceil(2))
        .map(|_| Forwarder::spawn(targets.by_ref().take(2).collect()).unwrap())
        .collect();
    let targets: Vec<(u64, u32)> = nics
        .iter()
        .map(|n| (n.region.addr(), n.region.rkey().0))
        .collect();
    for n in &mut nics {
        n.queue.set_device_wait(WAIT).unwrap();
    }
    let qs: Vec<_> = nics.iter_mut().map(|n| n.queue.device_queue()).collect();
    let (rounds, batch) = (8u32, 4u32);
    let ns = k
        .assisted_post(&gpu, &qs, &targets, rounds, batch)
        .unwrap_or_else(|e| panic!("{e}"));
    let forwarded: u64 = forwarders.into_iter().map(|f| f.stop().forwarded).sum();
    println!("assisted: {queues} queues x {rounds} rounds of {batch}: {ns:?} ns, {forwarded} doorbells forwarded");
    assert!(forwarded >= queues as u64 && forwarded <= u64::from(rounds) * queues as u64);
    for (b, nic) in nics.iter().enumerate() {
        let got: Vec<u64> = nic
            .remote
            .words()
            .iter()
            .map(|x| u64::from_le(x.load(Ordering::Acquire)))
            .collect();
        for (slot, &v) in got.iter().enumerate() {
            let i = slot as u32;
            let expected = if i < rounds * batch {
                (b as u64) << 48 | u64::from(i / batch) << 16 | u64::from(i % batch)
            } else {
                0
            };
            assert_eq!(v, expected, "queue {b} slot {slot}");
        }
    }
}

/// Checks that a launch ended with the deadline status of a `wait` bound: the typed
/// timeout (the kernel finished: nothing is left running), after at least `wait` and well
/// before a watchdog would have had to act.
fn ended_at_the_deadline(what: &str, result: Result<(), GpuError>, took: Duration, wait: Duration) {
    match result {
        Err(GpuError::Timeout {
            limit,
            still_running: false,
            ..
        }) => assert_eq!(limit, wait, "{what}: the bound reported"),
        other => panic!("{what}: {other:?}, the deadline status expected"),
    }
    assert!(
        took >= wait,
        "{what}: ended after {took:?}, before its bound {wait:?}"
    );
    assert!(
        took < wait + Duration::from_secs(2),
        "{what}: ended after {took:?}, long past its bound {wait:?}"
    );
    println!("{what}: deadline status after {took:?} (bound {wait:?})");
}

/// A ring nobody serves (its consumer end held, no worker): a GPU producer pushing into
/// it once it is full, and one waiting for the completion of a request nobody takes, each
/// get the deadline status at the ring's device wait bound; the kernel returns it, no
/// watchdog needed, and nothing was consumed or completed.
fn an_unserved_ring_ends_its_waits_at_its_deadline<H: Handoff>(gpu: &Gpu, k: &ProxyKernels) {
    const SLOTS: u64 = 16;
    let wait = Duration::from_millis(200);
    let unserved = || {
        let bytes = RingGeometry::new(SLOTS).unwrap().bytes();
        let buffer = gpu.mapped_host_buffer(bytes).unwrap();
        let (producer, consumer) = ProxyRing::in_buffer::<H>(buffer, SLOTS).unwrap();
        (device_ring(gpu, producer, wait), consumer)
    };

    // Room: one thread pushes one request more than the ring holds.
    let (mut full, _consumer) = unserved();
    let t = Instant::now();
    let pushed = k.rate(
        gpu,
        std::slice::from_mut(&mut full),
        1,
        SLOTS as u32 + 1,
        64,
    );
    ended_at_the_deadline(
        &format!("{} push into a full ring", H::NAME),
        pushed.map(|_| ()),
        t.elapsed(),
        wait,
    );
    assert_eq!((full.ring().consumed(), full.ring().completed()), (0, 0));

    // Completion: the push finds room; its completion never comes.
    let (mut idle, _consumer) = unserved();
    let t = Instant::now();
    let waited = k.enqueue(gpu, &mut idle, 0, 1, 64);
    ended_at_the_deadline(
        &format!("{} wait for a completion nobody makes", H::NAME),
        waited.map(|_| ()),
        t.elapsed(),
        wait,
    );
    assert_eq!((idle.ring().consumed(), idle.ring().completed()), (0, 0));
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn an_unserved_ring_ends_each_device_wait_at_its_deadline() {
    let (gpu, k) = gpu();
    an_unserved_ring_ends_its_waits_at_its_deadline::<Tuned>(&gpu, &k);
    an_unserved_ring_ends_its_waits_at_its_deadline::<Baseline>(&gpu, &k);
}

/// A baseline ring whose producer has a live clone is refused: the GPU's producers reserve
/// slots on a counter of their own, so the clone would take the slots they take. Once the
/// clone is gone the same producer is no longer refused for that.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --ignored on the GPU machine"]
fn a_ring_with_another_producer_is_not_handed_to_the_gpu() {
    let (gpu, _k) = gpu();
    let (producer, _consumer) =
        ProxyRing::allocate::<Baseline>(64).unwrap_or_else(|e| panic!("{e}"));
    let clone = producer.clone();
    let refused = DeviceRing::new(&gpu, producer)
        .map(|_| ())
        .expect_err("a ring with two producers");
    assert!(
        refused.to_string().contains("another producer handle"),
        "{refused}"
    );
    // The clone is now the only producer: not refused for that (this ring is in host
    // memory the GPU cannot reach, which is then the reason).
    assert!(clone.is_sole_producer());
    let reason = DeviceRing::new(&gpu, clone)
        .map(|_| ())
        .expect_err("an unmapped ring");
    assert!(
        !reason.to_string().contains("another producer handle"),
        "{reason}"
    );
}
