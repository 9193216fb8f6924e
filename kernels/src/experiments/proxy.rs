//! The CPU proxy and the CPU-assisted doorbell (section 4.2; Tables 3, 10 and 11). A
//! producer hands 8-byte inline WRITE requests to CPU workers through descriptor rings
//! (`ibgda::proxy`); each worker polls its rings and posts to its own queue pair on a
//! software NIC (one CPU engine thread per worker's fabric). What is measured is the
//! proxy's own cost with a software executor behind it, not a ConnectX's:
//!
//! - [`EnqueueResult`]: one producer's enqueue time per handoff protocol and its put +
//!   completion through the proxy (host-resident completion counter);
//! - [`RateResult`]: message rate over T workers x R rings x B requests per doorbell;
//! - [`ProbeResult`]: a probe's put + completion on a private ring against a ring shared
//!   with bulk traffic;
//! - [`AssistedResult`]: the CPU-assisted doorbell's WQE rate with F forwarding threads.
//!
//! Each comes in two variants: [`cpu`] (CPU threads stand in for the GPU, `Instant`
//! timing; runs anywhere) and [`ProxyGpu`] (GPU producers, `%globaltimer` timing, the SM
//! clock from `clock64`). Both return the same result structs with the raw samples.

use std::time::Duration;

use serde::Serialize;

use ibgda::memory::DmaBuffer;
use ibgda::proxy::{
    Baseline, ForwardTarget, Forwarder, Handoff, Pinning, RemoteRef, Request, RingProducer, Tuned,
    WorkerReport,
};

use crate::gpu::{CompileOptions, Gpu, GpuError};
use crate::proxy::world::{World, WorldConfig};
use crate::proxy::{assisted_world, DeviceRing, ProxyKernels};

/// The host's bound on waiting for one request's completion.
pub const COMPLETION_WAIT: Duration = Duration::from_secs(30);

/// The bound on every device wait of the GPU producers on a proxy ring (each ring's
/// [`DeviceRing::set_device_wait`]: a stalled worker becomes the deadline status, not a
/// hang): 20 s, since thousands of bulk threads may wait on a few workers.
pub const PROXY_DEVICE_WAIT: Duration = Duration::from_secs(20);

/// The first core a world's workers are pinned to (worker `w` to core `PIN_FROM + w`;
/// core 0 is left to the producers and the system).
pub const PIN_FROM: usize = 1;

/// Who produces the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Producer {
    /// CPU threads standing in for the GPU.
    Cpu,
    /// GPU threads.
    Gpu,
}

/// How many of a world's workers got the core they were pinned to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct WorkerPinning {
    /// Workers pinned.
    pub pinned: usize,
    /// Workers.
    pub workers: usize,
}

impl WorkerPinning {
    fn of(pinning: &[Pinning]) -> Self {
        Self {
            pinned: pinning
                .iter()
                .filter(|p| matches!(p, Pinning::Pinned(_)))
                .count(),
            workers: pinning.len(),
        }
    }
}

fn invalid(e: impl std::fmt::Display) -> GpuError {
    GpuError::Invalid(e.to_string())
}

/// An 8-byte inline WRITE of `value` to 8-byte slot `slot` of peer 0's window 0.
fn inline_write(slot: u64, value: u64) -> Result<Request, GpuError> {
    let offset = slot
        .checked_mul(8)
        .and_then(|o| u32::try_from(o).ok())
        .ok_or_else(|| invalid(format!("window slot {slot} is beyond a u32 byte offset")))?;
    Ok(Request::WriteInline8 {
        dst: RemoteRef {
            peer: 0,
            window: 0,
            offset,
        },
        value,
    })
}

/// Nanoseconds of a duration, saturating (a run of 584 years is not expected).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Millions per second of `count` events in `ns` nanoseconds (0 for an empty run).
pub fn millions_per_s(count: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        count as f64 * 1e3 / ns as f64
    }
}

/// Refuses a world whose workers reported failed requests or completions.
fn check_reports(what: &str, reports: &[WorkerReport]) -> Result<(), GpuError> {
    for (w, r) in reports.iter().enumerate() {
        if let Some((ring, index, e)) = r.errors.first() {
            return Err(invalid(format!(
                "{what}: worker {w}: request {index} of ring {ring} failed: {e:?}"
            )));
        }
        if let Some(e) = r.completion_errors.first() {
            return Err(invalid(format!(
                "{what}: worker {w}: completion error {e:?}"
            )));
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------
// Enqueue.

/// One producer's enqueue run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct EnqueueConfig {
    /// Requests pushed and waited for before the timed ones (discarded).
    pub warmup: u32,
    /// Timed requests.
    pub iters: u32,
    /// Slots of the one ring (one worker, B = 1).
    pub ring_slots: u64,
    /// 8-byte slots of the window the requests cycle over.
    pub window_slots: u32,
}

impl EnqueueConfig {
    /// `iters` timed requests after `warmup`, on a 64-slot ring and a 64-slot window.
    pub fn new(warmup: u32, iters: u32) -> Self {
        Self {
            warmup,
            iters,
            ring_slots: 64,
            window_slots: 64,
        }
    }

    fn world(&self) -> WorldConfig {
        WorldConfig {
            workers: 1,
            rings: 1,
            batch: 1,
            slots: self.ring_slots,
            window_slots: self.window_slots as usize,
            pin_from: Some(PIN_FROM),
        }
    }

    fn check(&self) -> Result<(), GpuError> {
        if self.iters == 0 || self.window_slots == 0 {
            return Err(invalid(format!(
                "enqueue needs iterations and window slots: {} iterations, {} slots",
                self.iters, self.window_slots
            )));
        }
        Ok(())
    }
}

/// What an enqueue run measured: one sample per timed request.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EnqueueResult {
    /// Who pushed.
    pub producer: Producer,
    /// The handoff protocol (`Handoff::NAME`: "baseline" or "tuned").
    pub handoff: &'static str,
    /// The run.
    pub config: EnqueueConfig,
    /// Per request: ns from the push's start to its end.
    pub enqueue_ns: Vec<u64>,
    /// Per request: ns from the push's start to the ring's completion counter passing it.
    pub put_completion_ns: Vec<u64>,
    /// GPU producers: the SM clock over the timed pushes (clock64 over %globaltimer, MHz).
    pub sm_mhz: Option<f64>,
    /// The worker's pinning.
    pub pinning: WorkerPinning,
}

// ------------------------------------------------------------------------------------
// Message rate.

/// One message-rate configuration: `rings` tuned rings (one producer each) served by
/// `workers` workers (ring `i` by worker `i mod workers`), up to `batch` requests chained
/// per doorbell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RateConfig {
    /// Workers (T).
    pub workers: usize,
    /// Rings (R).
    pub rings: usize,
    /// Requests chained per post (B).
    pub batch: u32,
    /// Requests pushed, split evenly over the rings (a remainder is not pushed).
    pub messages: u64,
    /// Slots per ring.
    pub ring_slots: u64,
    /// 8-byte slots of each worker's window the requests cycle over.
    pub window_slots: u32,
    /// CPU producers: threads sharing the rings (each ring has one owner thread). GPU
    /// producers: one thread per ring, always.
    pub cpu_threads: usize,
}

impl RateConfig {
    /// T x R x B with `messages` requests, the CPU producers' ring size (256 slots) and
    /// `min(R, 2)` producer threads.
    pub fn cpu(workers: usize, rings: usize, batch: u32, messages: u64) -> Self {
        Self {
            workers,
            rings,
            batch,
            messages,
            ring_slots: 256,
            window_slots: 4096,
            cpu_threads: rings.clamp(1, 2),
        }
    }

    /// T x R x B with `messages` requests, the GPU producers' ring size (1,024 slots).
    pub fn gpu(workers: usize, rings: usize, batch: u32, messages: u64) -> Self {
        Self {
            ring_slots: 1024,
            cpu_threads: 0,
            ..Self::cpu(workers, rings, batch, messages)
        }
    }

    /// Requests per ring.
    pub fn per_ring(&self) -> Result<u64, GpuError> {
        let per_ring = self.messages / self.rings.max(1) as u64;
        if self.rings == 0 || per_ring == 0 || self.window_slots == 0 {
            return Err(invalid(format!(
                "rate needs rings, a request per ring and window slots: {} requests, {} rings, {} slots",
                self.messages, self.rings, self.window_slots
            )));
        }
        Ok(per_ring)
    }

    fn world(&self) -> WorldConfig {
        WorldConfig {
            workers: self.workers,
            rings: self.rings,
            batch: self.batch,
            slots: self.ring_slots,
            window_slots: self.window_slots as usize,
            pin_from: Some(PIN_FROM),
        }
    }
}

/// What a message-rate run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RateResult {
    /// Who pushed.
    pub producer: Producer,
    /// The configuration.
    pub config: RateConfig,
    /// Requests pushed and completed.
    pub messages: u64,
    /// ns from the first push to the last completion.
    pub ns: u64,
    /// Millions of requests per second.
    pub mmsg_per_s: f64,
    /// WQEs the workers posted.
    pub posted: u64,
    /// Doorbells the workers rang.
    pub doorbells: u64,
    /// Posted over doorbells: the batch the workers achieved.
    pub wqes_per_doorbell: f64,
    /// The workers' pinning.
    pub pinning: WorkerPinning,
}

/// Stops a rate run's world and turns its totals into the result, for CPU and GPU
/// producers alike: the workers must have completed every request, without an error.
fn rate_result(
    producer: Producer,
    config: RateConfig,
    world: &mut World<Tuned>,
    messages: u64,
    ns: u64,
) -> Result<RateResult, GpuError> {
    let pinning = WorkerPinning::of(&world.pinning());
    let reports = world.stop();
    check_reports("rate", &reports)?;
    let completed: u64 = reports.iter().map(|r| r.completed).sum();
    if completed != messages {
        return Err(invalid(format!(
            "rate: the workers completed {completed} of {messages} requests"
        )));
    }
    let posted = reports.iter().map(|r| r.posted).sum();
    let doorbells = reports.iter().map(|r| r.doorbells).sum();
    Ok(RateResult {
        producer,
        config,
        messages,
        ns,
        mmsg_per_s: millions_per_s(messages, ns),
        posted,
        doorbells,
        wqes_per_doorbell: posted as f64 / u64::max(doorbells, 1) as f64,
        pinning,
    })
}

// ------------------------------------------------------------------------------------
// Probe.

/// A probe under bulk load: `bulk_rings` baseline rings carry bulk traffic, one more ring
/// is the probe's own; the probe pushes on it (private) or on bulk ring 0 (shared).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ProbeConfig {
    /// Whether the probe shares bulk ring 0 (else it has its own ring).
    pub shared: bool,
    /// Workers (T).
    pub workers: usize,
    /// Rings carrying bulk traffic (R).
    pub bulk_rings: usize,
    /// Requests chained per post (B).
    pub batch: u32,
    /// Slots per ring.
    pub ring_slots: u64,
    /// Bulk producers (CPU threads or GPU threads), pushing until the probe is done.
    pub bulk_producers: u32,
    /// Probes, each waited for before the next.
    pub iters: u32,
    /// 8-byte slots of each worker's window.
    pub window_slots: u32,
}

impl ProbeConfig {
    /// CPU producers: T=2, R=4, B=16, 64-slot rings, 2 bulk threads.
    pub fn cpu(shared: bool, iters: u32) -> Self {
        Self {
            shared,
            workers: 2,
            bulk_rings: 4,
            batch: 16,
            ring_slots: 64,
            bulk_producers: 2,
            iters,
            window_slots: 4096,
        }
    }

    /// GPU producers, the paper's Table 11 shape: T=4, R=32, B=16, 256-slot rings,
    /// 2,048 bulk threads.
    pub fn gpu(shared: bool, iters: u32) -> Self {
        Self {
            workers: 4,
            bulk_rings: 32,
            ring_slots: 256,
            bulk_producers: 2048,
            ..Self::cpu(shared, iters)
        }
    }

    fn world(&self) -> WorldConfig {
        WorldConfig {
            workers: self.workers,
            rings: self.bulk_rings + 1,
            batch: self.batch,
            slots: self.ring_slots,
            window_slots: self.window_slots as usize,
            pin_from: Some(PIN_FROM),
        }
    }

    fn check(&self) -> Result<(), GpuError> {
        if self.bulk_rings == 0 || self.bulk_producers == 0 || self.iters == 0 {
            return Err(invalid(format!(
                "probe needs bulk rings, bulk producers and probes: {} rings, {} producers, {} probes",
                self.bulk_rings, self.bulk_producers, self.iters
            )));
        }
        // The probe writes slots 0..8, the bulk traffic the slots above.
        if self.window_slots <= 8 {
            return Err(invalid(format!(
                "probe needs more than 8 window slots, not {}",
                self.window_slots
            )));
        }
        Ok(())
    }
}

/// What a probe run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeResult {
    /// Who pushed.
    pub producer: Producer,
    /// The configuration.
    pub config: ProbeConfig,
    /// Per probe: put + completion ns.
    pub probe_ns: Vec<u64>,
    /// Bulk requests pushed meanwhile.
    pub bulk_pushed: u64,
    /// ns the probes took, together.
    pub run_ns: u64,
    /// Bulk millions of requests per second during the probes.
    pub bulk_mmsg_per_s: f64,
    /// The workers' pinning.
    pub pinning: WorkerPinning,
}

// ------------------------------------------------------------------------------------
// CPU-assisted doorbell.

/// CPU-assisted queues (one software NIC each) whose producers publish an index per round
/// of `batch` WQEs, and `forwarders` host threads ringing the doorbells for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct AssistedConfig {
    /// Forwarding threads (queue `i` served by forwarder `i mod forwarders`).
    pub forwarders: usize,
    /// Queues (one producer each: a CPU thread or a GPU block).
    pub queues: usize,
    /// Rounds per queue.
    pub rounds: u32,
    /// WQEs per round (the last one signaled), one index published per round.
    pub batch: u32,
    /// Send ring size in WQEBBs.
    pub ring_wqebbs: usize,
    /// Bytes of each remote window (the WRITEs cycle over its first 64 8-byte slots).
    pub window_bytes: usize,
}

impl AssistedConfig {
    /// `queues` queues of 1,024 WQEBBs, `rounds` rounds of 16 WQEs.
    pub fn new(forwarders: usize, queues: usize, rounds: u32) -> Self {
        Self {
            forwarders,
            queues,
            rounds,
            batch: 16,
            ring_wqebbs: 1024,
            window_bytes: 512,
        }
    }

    fn check(&self) -> Result<u64, GpuError> {
        if self.forwarders == 0 || self.queues == 0 || self.rounds == 0 || self.batch == 0 {
            return Err(invalid(format!(
                "assisted needs forwarders, queues, rounds and a batch: {} forwarders, {} queues, {} rounds, batch {}",
                self.forwarders, self.queues, self.rounds, self.batch
            )));
        }
        if self.window_bytes < 64 * 8 {
            return Err(invalid(format!(
                "assisted writes 64 8-byte slots: a window of {} bytes is too small",
                self.window_bytes
            )));
        }
        (self.queues as u64)
            .checked_mul(u64::from(self.rounds))
            .and_then(|n| n.checked_mul(u64::from(self.batch)))
            .ok_or_else(|| invalid("assisted: queues x rounds x batch overflows a u64"))
    }
}

/// What a CPU-assisted run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AssistedResult {
    /// Who posted.
    pub producer: Producer,
    /// The configuration.
    pub config: AssistedConfig,
    /// Per queue: ns from its producer's first WQE to its last completion.
    pub queue_ns: Vec<u64>,
    /// ns of the run: CPU, from the first start to the last producer's end; GPU, the
    /// slowest block.
    pub ns: u64,
    /// WQEs posted and completed.
    pub wqes: u64,
    /// Millions of WQEs per second.
    pub mwqe_per_s: f64,
    /// Doorbells the forwarders rang.
    pub doorbells_forwarded: u64,
    /// Indices the producers published (one per round).
    pub indices_published: u64,
}

/// Starts `config.forwarders` forwarders, queue `i`'s target to forwarder `i mod F`.
fn spawn_forwarders(
    forwarders: usize,
    targets: Vec<ForwardTarget>,
) -> Result<Vec<Forwarder>, GpuError> {
    let mut groups: Vec<Vec<ForwardTarget>> = (0..forwarders).map(|_| Vec::new()).collect();
    for (i, t) in targets.into_iter().enumerate() {
        groups[i % forwarders].push(t);
    }
    groups
        .into_iter()
        .map(Forwarder::spawn)
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(format!("a forwarder did not start: {e}")))
}

fn assisted_result(
    producer: Producer,
    config: AssistedConfig,
    wqes: u64,
    queue_ns: Vec<u64>,
    ns: u64,
    forwarders: Vec<Forwarder>,
) -> AssistedResult {
    let doorbells_forwarded = forwarders.into_iter().map(|f| f.stop().forwarded).sum();
    AssistedResult {
        producer,
        config,
        queue_ns,
        ns,
        wqes,
        mwqe_per_s: millions_per_s(wqes, ns),
        doorbells_forwarded,
        indices_published: config.queues as u64 * u64::from(config.rounds),
    }
}

// ------------------------------------------------------------------------------------
// CPU producers.

/// The experiments with CPU threads standing in for the GPU (runnable anywhere).
pub mod cpu {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use ibgda::proxy::{
        wait_completed, AssistedQueuePair, Baseline, DescriptorError, Handoff, Request,
        RingProducer, Tuned,
    };
    use ibgda::queue::{DoorbellPolicy, PostError};
    use ibgda::softnic::{Access, DoorbellWatch, Fabric, QueuePairSpec};
    use ibgda::wqe::{Rc, RdmaWrite, RingSize};

    use super::*;

    /// A producer end that pushes one request (the tuned end needs `&mut`, the baseline
    /// end is shared).
    pub trait Push: Handoff {
        /// Pushes `request`, waiting for room; its index.
        fn push_one(p: &mut RingProducer<Self>, request: &Request) -> Result<u64, DescriptorError>;
    }

    impl Push for Tuned {
        fn push_one(p: &mut RingProducer<Self>, request: &Request) -> Result<u64, DescriptorError> {
            p.push(request)
        }
    }

    impl Push for Baseline {
        fn push_one(p: &mut RingProducer<Self>, request: &Request) -> Result<u64, DescriptorError> {
            p.push(request)
        }
    }

    /// Ring memory in plain host memory.
    fn host_ring(bytes: usize) -> Result<DmaBuffer, String> {
        DmaBuffer::zeroed(bytes, 4096).map_err(|e| e.to_string())
    }

    fn pushed(r: Result<u64, DescriptorError>) -> Result<u64, GpuError> {
        r.map_err(|e| invalid(format!("a request was refused: {e:?}")))
    }

    /// One thread pushes `warmup + iters` requests on a ring served by one worker and
    /// waits for each.
    pub fn enqueue<H: Push>(config: EnqueueConfig) -> Result<EnqueueResult, GpuError> {
        config.check()?;
        let mut world = World::<H>::build(config.world(), host_ring).map_err(invalid)?;
        let mut p = world.producers.pop().ok_or_else(|| invalid("no ring"))?;
        let ring = p.ring().clone();
        let timed = config.iters as usize;
        let (mut enqueue_ns, mut put_completion_ns) =
            (Vec::with_capacity(timed), Vec::with_capacity(timed));
        for i in 0..u64::from(config.warmup) + u64::from(config.iters) {
            let request = inline_write(i % u64::from(config.window_slots), i)?;
            let t0 = Instant::now();
            let index = pushed(H::push_one(&mut p, &request))?;
            let t1 = Instant::now();
            if !wait_completed(&ring, index + 1, COMPLETION_WAIT) {
                return Err(invalid(format!(
                    "enqueue: request {index} did not complete within {COMPLETION_WAIT:?}"
                )));
            }
            let t2 = Instant::now();
            if i >= u64::from(config.warmup) {
                enqueue_ns.push(nanos(t1 - t0));
                put_completion_ns.push(nanos(t2 - t0));
            }
        }
        let pinning = WorkerPinning::of(&world.pinning());
        check_reports("enqueue", &world.stop())?;
        Ok(EnqueueResult {
            producer: Producer::Cpu,
            handoff: H::NAME,
            config,
            enqueue_ns,
            put_completion_ns,
            sm_mhz: None,
            pinning,
        })
    }

    /// `config.cpu_threads` threads push to the R tuned rings (each ring has one owner
    /// thread), round-robin over their rings; timed to the last completion.
    pub fn rate(config: RateConfig) -> Result<RateResult, GpuError> {
        let per_ring = config.per_ring()?;
        let threads = config.cpu_threads.max(1);
        let mut world = World::<Tuned>::build(config.world(), host_ring).map_err(invalid)?;
        let mut owned: Vec<Vec<RingProducer<Tuned>>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, p) in world.producers.drain(..).enumerate() {
            owned[i % threads].push(p);
        }
        let window = u64::from(config.window_slots);
        let start = Instant::now();
        let handles: Vec<_> = owned
            .into_iter()
            .map(|mut mine| {
                std::thread::spawn(move || -> Result<Vec<RingProducer<Tuned>>, GpuError> {
                    let mut k = 0u64;
                    for _ in 0..per_ring {
                        for p in mine.iter_mut() {
                            pushed(p.push(&inline_write(k % window, k)?))?;
                            k += 1;
                        }
                    }
                    Ok(mine)
                })
            })
            .collect();
        let mut rings = Vec::new();
        for h in handles {
            rings.extend(
                h.join()
                    .map_err(|_| invalid("a producer thread panicked"))??,
            );
        }
        for p in &rings {
            if !wait_completed(p.ring(), per_ring, COMPLETION_WAIT) {
                return Err(invalid(format!(
                    "rate: a ring did not complete {per_ring} requests within {COMPLETION_WAIT:?}"
                )));
            }
        }
        let ns = nanos(start.elapsed());
        rate_result(
            Producer::Cpu,
            config,
            &mut world,
            per_ring * rings.len() as u64,
            ns,
        )
    }

    /// A probe thread pushes `iters` requests, waiting for each, while
    /// `bulk_producers` threads push to the bulk rings until it is done.
    pub fn probe(config: ProbeConfig) -> Result<ProbeResult, GpuError> {
        config.check()?;
        let mut world = World::<Baseline>::build(config.world(), host_ring).map_err(invalid)?;
        // Rings 0..R carry bulk traffic; ring R is the probe's private ring.
        let private = world.producers.pop().ok_or_else(|| invalid("no ring"))?;
        let bulk: Vec<_> = world.producers.drain(..).collect();
        let probe = if config.shared {
            bulk[0].clone()
        } else {
            private
        };
        let stop = Arc::new(AtomicBool::new(false));
        let bulk_slots = u64::from(config.window_slots - 8);
        let loaders: Vec<_> = (0..config.bulk_producers as usize)
            .map(|i| {
                let p = bulk[i % bulk.len()].clone();
                let stop = stop.clone();
                std::thread::spawn(move || -> Result<u64, GpuError> {
                    let mut k = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        pushed(p.push(&inline_write(8 + k % bulk_slots, k)?))?;
                        k += 1;
                    }
                    Ok(k)
                })
            })
            .collect();
        // Let the bulk traffic reach its steady state first.
        std::thread::sleep(Duration::from_millis(20));
        let mut probe_ns = Vec::with_capacity(config.iters as usize);
        let mut outcome = Ok(());
        let start = Instant::now();
        for i in 0..u64::from(config.iters) {
            let t0 = Instant::now();
            let index = match inline_write(i % 8, i).and_then(|r| pushed(probe.push(&r))) {
                Ok(index) => index,
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            };
            if !wait_completed(probe.ring(), index + 1, COMPLETION_WAIT) {
                outcome = Err(invalid(format!(
                    "probe {i} did not complete within {COMPLETION_WAIT:?}"
                )));
                break;
            }
            probe_ns.push(nanos(t0.elapsed()));
        }
        let run_ns = nanos(start.elapsed());
        stop.store(true, Ordering::Relaxed);
        let mut bulk_pushed = 0;
        for l in loaders {
            bulk_pushed += l.join().map_err(|_| invalid("a bulk thread panicked"))??;
        }
        outcome?;
        let pinning = WorkerPinning::of(&world.pinning());
        check_reports("probe", &world.stop())?;
        Ok(ProbeResult {
            producer: Producer::Cpu,
            config,
            probe_ns,
            bulk_pushed,
            run_ns,
            bulk_mmsg_per_s: millions_per_s(bulk_pushed, run_ns),
            pinning,
        })
    }

    /// One CPU thread per CPU-assisted queue (each on its own software NIC, watching
    /// doorbells only) posts rounds of `batch` WQEs and publishes its index after each;
    /// `forwarders` threads ring.
    pub fn assisted(config: AssistedConfig) -> Result<AssistedResult, GpuError> {
        let wqes = config.check()?;
        let mut pairs = Vec::new();
        let mut targets = Vec::new();
        let mut keep = Vec::new();
        for _ in 0..config.queues {
            let fabric = Fabric::new();
            let a = fabric.add_node(1).map_err(invalid)?;
            let b = fabric.add_node(2).map_err(invalid)?;
            let mut spec = QueuePairSpec::new(RingSize::new(config.ring_wqebbs).map_err(invalid)?);
            spec.send.doorbell = DoorbellPolicy::Explicit;
            spec.doorbell_watch = DoorbellWatch::DoorbellOnly;
            let qp = fabric.create_queue_pair::<Rc>(a, spec).map_err(invalid)?;
            let peer = fabric
                .create_queue_pair::<Rc>(b, QueuePairSpec::new(RingSize::new(64).map_err(invalid)?))
                .map_err(invalid)?;
            fabric.connect(qp.qpn(), peer.qpn()).map_err(invalid)?;
            // The responder posts nothing; its queue stays in the fabric.
            std::mem::forget(peer);
            let remote = Arc::new(DmaBuffer::zeroed(config.window_bytes, 4096).map_err(invalid)?);
            let region = fabric
                .register(
                    b,
                    remote.clone(),
                    0,
                    config.window_bytes,
                    Access::REMOTE_WRITE | Access::LOCAL_WRITE,
                )
                .map_err(invalid)?;
            let slot = DmaBuffer::zeroed(64, 64).map_err(invalid)?;
            let (q, t) = AssistedQueuePair::new(qp, slot).map_err(|e| invalid(format!("{e:?}")))?;
            let engine = fabric.spawn_engine();
            pairs.push((q, region));
            targets.push(t);
            keep.push((fabric, engine, remote));
        }
        let forwarders = spawn_forwarders(config.forwarders, targets)?;
        let start = Instant::now();
        let handles: Vec<_> = pairs
            .into_iter()
            .map(|(mut q, region)| {
                std::thread::spawn(move || -> Result<u64, GpuError> {
                    let t0 = Instant::now();
                    let deadline = t0 + COMPLETION_WAIT;
                    let mut last = None;
                    let mut n = 0u64;
                    for _ in 0..config.rounds {
                        for k in 0..config.batch {
                            let value = n.to_le_bytes();
                            let mut wqe =
                                RdmaWrite::new(region.remote(8 * (n % 64))).inline(&value);
                            if k + 1 == config.batch {
                                wqe = wqe.signaled();
                            }
                            let wqe = wqe.build().map_err(|e| invalid(format!("{e:?}")))?;
                            loop {
                                match q.post(&wqe, &[]) {
                                    Ok(t) => {
                                        last = Some(t);
                                        break;
                                    }
                                    // Full: publish what is there and retire.
                                    Err(PostError::Full { .. }) => {
                                        q.publish_index();
                                        q.poll().map_err(|e| invalid(format!("{e:?}")))?;
                                        if Instant::now() > deadline {
                                            return Err(invalid(format!(
                                                "assisted queue stuck full for {COMPLETION_WAIT:?}"
                                            )));
                                        }
                                    }
                                    Err(e) => return Err(invalid(format!("{e:?}"))),
                                }
                            }
                            n += 1;
                        }
                        q.publish_index();
                        q.poll().map_err(|e| invalid(format!("{e:?}")))?;
                    }
                    if let Some(t) = last {
                        while !q.is_complete(t) {
                            q.poll().map_err(|e| invalid(format!("{e:?}")))?;
                            if Instant::now() > deadline {
                                return Err(invalid(format!(
                                    "assisted queue did not complete within {COMPLETION_WAIT:?}"
                                )));
                            }
                        }
                    }
                    Ok(nanos(t0.elapsed()))
                })
            })
            .collect();
        let mut queue_ns = Vec::new();
        let mut outcome = Ok(());
        for h in handles {
            match h.join() {
                Ok(Ok(ns)) => queue_ns.push(ns),
                Ok(Err(e)) => outcome = outcome.and(Err(e)),
                Err(_) => outcome = outcome.and(Err(invalid("a producer thread panicked"))),
            }
        }
        let ns = nanos(start.elapsed());
        outcome?;
        let result = assisted_result(Producer::Cpu, config, wqes, queue_ns, ns, forwarders);
        drop(keep);
        Ok(result)
    }
}

// ------------------------------------------------------------------------------------
// GPU producers.

/// The proxy program loaded on GPU 0; every ring it hands to GPU producers bounds its
/// device waits by [`PROXY_DEVICE_WAIT`].
pub struct ProxyGpu {
    // Fields drop in order: the loaded kernels before the context they live in.
    kernels: ProxyKernels,
    gpu: Gpu,
}

impl std::fmt::Debug for ProxyGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProxyGpu")
    }
}

impl ProxyGpu {
    /// Opens GPU 0 and compiles and loads the proxy program.
    pub fn open() -> Result<Self, GpuError> {
        let gpu = Gpu::open_with(0, &CompileOptions::new())?;
        let kernels = ProxyKernels::load(&gpu)?;
        Ok(Self { kernels, gpu })
    }

    /// Hands `producer`'s ring to GPU producers, its device waits bounded by
    /// [`PROXY_DEVICE_WAIT`].
    fn device_ring<H: Handoff>(
        &self,
        producer: RingProducer<H>,
    ) -> Result<DeviceRing<H>, GpuError> {
        let mut ring = DeviceRing::new(&self.gpu, producer)?;
        ring.set_device_wait(PROXY_DEVICE_WAIT)?;
        Ok(ring)
    }

    /// Ring memory: pinned host memory mapped into the GPU.
    fn ring_memory(&self) -> impl FnMut(usize) -> Result<DmaBuffer, String> + '_ {
        |bytes| {
            self.gpu
                .mapped_host_buffer(bytes)
                .map_err(|e| e.to_string())
        }
    }

    /// One GPU thread pushes `warmup + iters` requests and waits for each.
    pub fn enqueue<H: Handoff>(&self, config: EnqueueConfig) -> Result<EnqueueResult, GpuError> {
        config.check()?;
        let mut world = World::<H>::build(config.world(), self.ring_memory()).map_err(invalid)?;
        let producer = world.producers.pop().ok_or_else(|| invalid("no ring"))?;
        let mut ring = self.device_ring(producer)?;
        let samples = self.kernels.enqueue(
            &self.gpu,
            &mut ring,
            config.warmup,
            config.iters,
            config.window_slots,
        )?;
        let pinning = WorkerPinning::of(&world.pinning());
        check_reports("enqueue", &world.stop())?;
        Ok(EnqueueResult {
            producer: Producer::Gpu,
            handoff: H::NAME,
            config,
            enqueue_ns: samples.enqueue_ns,
            put_completion_ns: samples.total_ns,
            sm_mhz: Some(super::sm_mhz(samples.cycles, samples.ns)),
            pinning,
        })
    }

    /// One GPU thread per tuned ring pushes its share; timed from the first push to the
    /// last completion (%globaltimer).
    pub fn rate(&self, config: RateConfig) -> Result<RateResult, GpuError> {
        let per_ring = config.per_ring()?;
        let per_thread = u32::try_from(per_ring).map_err(|_| {
            invalid(format!(
                "rate: {per_ring} requests per ring is beyond a GPU thread's u32 count"
            ))
        })?;
        let threads = u32::try_from(config.rings)
            .map_err(|_| invalid(format!("rate: {} rings is beyond u32", config.rings)))?;
        let mut world =
            World::<Tuned>::build(config.world(), self.ring_memory()).map_err(invalid)?;
        let mut rings: Vec<_> = world
            .producers
            .drain(..)
            .map(|p| self.device_ring(p))
            .collect::<Result<_, _>>()?;
        let ns = self.kernels.rate(
            &self.gpu,
            &mut rings,
            threads,
            per_thread,
            config.window_slots,
        )?;
        rate_result(
            Producer::Gpu,
            config,
            &mut world,
            per_ring * config.rings as u64,
            ns,
        )
    }

    /// A GPU thread probes while `bulk_producers` GPU threads load the bulk rings.
    pub fn probe(&self, config: ProbeConfig) -> Result<ProbeResult, GpuError> {
        config.check()?;
        let mut world =
            World::<Baseline>::build(config.world(), self.ring_memory()).map_err(invalid)?;
        let mut rings: Vec<_> = world
            .producers
            .drain(..)
            .map(|p| self.device_ring(p))
            .collect::<Result<_, _>>()?;
        let private = rings.pop().ok_or_else(|| invalid("no ring"))?;
        let probe = (!config.shared).then_some(&private);
        let out = self.kernels.probe(
            &self.gpu,
            probe,
            &rings,
            config.bulk_producers,
            config.iters,
            config.window_slots,
        )?;
        let pinning = WorkerPinning::of(&world.pinning());
        check_reports("probe", &world.stop())?;
        Ok(ProbeResult {
            producer: Producer::Gpu,
            config,
            bulk_mmsg_per_s: millions_per_s(out.bulk_pushed, out.run_ns),
            probe_ns: out.probe_ns,
            bulk_pushed: out.bulk_pushed,
            run_ns: out.run_ns,
            pinning,
        })
    }

    /// One GPU block per CPU-assisted queue (host memory mapped into the GPU, each on its
    /// own software NIC) posts rounds of `batch` WQEs; `forwarders` threads ring.
    pub fn assisted(&self, config: AssistedConfig) -> Result<AssistedResult, GpuError> {
        let wqes = config.check()?;
        let (mut nics, targets) = assisted_world::build(
            &self.gpu,
            config.queues,
            config.ring_wqebbs,
            config.window_bytes,
        )?;
        let forwarders = spawn_forwarders(config.forwarders, targets)?;
        let windows: Vec<(u64, u32)> = nics
            .iter()
            .map(|n| (n.region.addr(), n.region.rkey().0))
            .collect();
        let queues: Vec<_> = nics.iter_mut().map(|n| n.queue.device_queue()).collect();
        let queue_ns = self.kernels.assisted_post(
            &self.gpu,
            &queues,
            &windows,
            config.rounds,
            config.batch,
        )?;
        let ns = queue_ns.iter().copied().max().unwrap_or(0);
        Ok(assisted_result(
            Producer::Gpu,
            config,
            wqes,
            queue_ns,
            ns,
            forwarders,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_refuse_what_cannot_run_by_value() {
        let e = RateConfig::cpu(1, 4, 1, 3).per_ring().unwrap_err();
        assert!(e.to_string().contains("3 requests, 4 rings"), "{e}");
        assert_eq!(RateConfig::cpu(1, 4, 1, 4097).per_ring().unwrap(), 1024);
        let e = ProbeConfig {
            window_slots: 8,
            ..ProbeConfig::cpu(false, 10)
        }
        .check()
        .unwrap_err();
        assert!(e.to_string().contains("not 8"), "{e}");
        let e = AssistedConfig::new(0, 4, 10).check().unwrap_err();
        assert!(e.to_string().contains("0 forwarders"), "{e}");
        assert_eq!(AssistedConfig::new(1, 4, 10).check().unwrap(), 4 * 10 * 16);
        assert!(EnqueueConfig::new(0, 0).check().is_err());
        assert!(inline_write(u64::from(u32::MAX), 0).is_err());
        assert_eq!(millions_per_s(2_000, 1_000), 2_000.0 * 1e3 / 1_000.0);
        assert_eq!(millions_per_s(5, 0), 0.0);
    }

    // The CPU variants on software NICs, small: counts and totals exact, samples ordered.

    #[test]
    fn cpu_enqueue_times_each_request_through_its_completion() {
        for result in [
            cpu::enqueue::<Baseline>(EnqueueConfig::new(10, 50)).unwrap(),
            cpu::enqueue::<Tuned>(EnqueueConfig::new(10, 50)).unwrap(),
        ] {
            assert_eq!(result.producer, Producer::Cpu);
            assert_eq!(result.enqueue_ns.len(), 50, "warm-up discarded");
            assert_eq!(result.put_completion_ns.len(), 50);
            assert!(result
                .enqueue_ns
                .iter()
                .zip(&result.put_completion_ns)
                .all(|(e, t)| e <= t));
            assert_eq!(result.sm_mhz, None);
            assert_eq!(result.pinning.workers, 1);
        }
    }

    #[test]
    fn cpu_rate_posts_every_request_once_in_batches_of_at_most_b() {
        // 1,000 requests over 3 rings: 333 each, the remainder not pushed.
        let one = cpu::rate(RateConfig::cpu(2, 3, 1, 1_000)).unwrap();
        assert_eq!(one.messages, 999);
        assert_eq!(one.posted, 999);
        assert_eq!(one.doorbells, 999, "B=1: one doorbell per request");
        assert_eq!(one.wqes_per_doorbell, 1.0);
        assert_eq!(one.pinning.workers, 2);
        let batched = cpu::rate(RateConfig::cpu(1, 2, 16, 4_096)).unwrap();
        assert_eq!((batched.messages, batched.posted), (4_096, 4_096));
        assert!(batched.doorbells >= 4_096 / 16 && batched.doorbells <= 4_096);
        assert!(batched.wqes_per_doorbell <= 16.0);
        assert_eq!(
            batched.mmsg_per_s,
            millions_per_s(batched.messages, batched.ns)
        );
    }

    #[test]
    fn cpu_probe_waits_for_every_probe_under_load() {
        for shared in [false, true] {
            let r = cpu::probe(ProbeConfig::cpu(shared, 20)).unwrap();
            assert_eq!(r.probe_ns.len(), 20);
            assert!(r.probe_ns.iter().sum::<u64>() <= r.run_ns);
            assert_eq!(r.bulk_mmsg_per_s, millions_per_s(r.bulk_pushed, r.run_ns));
            assert!(r.config.shared == shared);
        }
    }

    #[test]
    fn cpu_assisted_completes_every_wqe_through_the_forwarders() {
        let r = cpu::assisted(AssistedConfig::new(2, 3, 40)).unwrap();
        assert_eq!(r.wqes, 3 * 40 * 16);
        assert_eq!(r.indices_published, 3 * 40);
        assert_eq!(r.queue_ns.len(), 3);
        assert!(r.queue_ns.iter().all(|&q| q <= r.ns));
        // Nothing completes without a doorbell; a forwarder rings once per new index it
        // sees, and each new index covers at least one new WQE.
        assert!(r.doorbells_forwarded >= 1 && r.doorbells_forwarded <= r.wqes);
    }
}
