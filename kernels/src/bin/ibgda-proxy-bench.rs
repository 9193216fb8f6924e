//! Figures of the CPU-proxy path and the CPU-assisted doorbell.
//!
//! The NIC is the software NIC (one CPU engine thread per worker's fabric), so these are
//! the proxy's own costs with a software executor behind it, not a ConnectX's.
//!
//! - enqueue time per handoff protocol (p50/p99) and put + completion through the proxy
//!   (host-resident completion counter);
//! - message rate over T workers x R rings x B requests per doorbell;
//! - a probe's put + completion on a private ring against a ring shared with bulk traffic;
//! - the CPU-assisted doorbell's rate with 1 and 4 forwarding threads.
//!
//! `--gpu`: GPU producers (%globaltimer; the SM clock from clock64 over %globaltimer).
//! `--cpu`: CPU threads stand in for the GPU (Instant timing), runnable anywhere.
//! `--quick`: a smaller grid. Usage: `ibgda-proxy-bench --cpu|--gpu [--quick] [OUT_DIR]`.
//! Prints a table and writes `OUT_DIR/proxy-bench-{cpu,gpu}.json`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibgda::memory::DmaBuffer;
use ibgda::proxy::{
    wait_completed, AssistedQueuePair, Baseline, Forwarder, Handoff, Pinning, RemoteRef, Request,
    RingProducer, Tuned,
};
use ibgda::queue::DoorbellPolicy;
use ibgda::softnic::{Access, DoorbellWatch, Fabric, QueuePairSpec};
use ibgda::wqe::{Rc, RdmaWrite, RingSize};
use ibgda_kernels::gpu::{CompileOptions, Gpu};
use ibgda_kernels::proxy::world::{World, WorldConfig};
use ibgda_kernels::proxy::{assisted_world, DeviceRing, ProxyKernels};

const WAIT: Duration = Duration::from_secs(30);

fn pct(v: &[u64], p: f64) -> u64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    if v.is_empty() {
        return 0;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Rows of output: a table line and a JSON object each.
#[derive(Default)]
struct Report {
    table: String,
    json: Vec<String>,
}

impl Report {
    fn row(&mut self, line: String, fields: &[(&str, String)]) {
        println!("{line}");
        self.table.push_str(&line);
        self.table.push('\n');
        let body: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("\"{k}\": {v}"))
            .collect();
        self.json.push(format!("{{{}}}", body.join(", ")));
    }
}

fn s(v: &str) -> String {
    format!("\"{v}\"")
}

fn inline(offset: u32, value: u64) -> Request {
    Request::WriteInline8 {
        dst: RemoteRef {
            peer: 0,
            window: 0,
            offset,
        },
        value,
    }
}

fn host_ring(bytes: usize) -> Result<Arc<DmaBuffer>, String> {
    DmaBuffer::zeroed(bytes, 4096)
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

fn pinning_note(p: &[Pinning]) -> String {
    let pinned = p.iter().filter(|p| matches!(p, Pinning::Pinned(_))).count();
    format!("{pinned}/{} pinned", p.len())
}

trait Push {
    fn push_one(&mut self, r: &Request) -> u64;
}
impl Push for RingProducer<Tuned> {
    fn push_one(&mut self, r: &Request) -> u64 {
        self.push(r).expect("valid request")
    }
}
impl Push for RingProducer<Baseline> {
    fn push_one(&mut self, r: &Request) -> u64 {
        self.push(r).expect("valid request")
    }
}

// ------------------------------------------------------------------------------------
// CPU producers.

fn cpu_enqueue<H: Handoff>(report: &mut Report, iters: usize) -> Result<(), String>
where
    RingProducer<H>: Push,
{
    let mut world = World::<H>::build(
        WorldConfig {
            workers: 1,
            rings: 1,
            batch: 1,
            slots: 64,
            window_slots: 64,
            pin_from: Some(1),
        },
        host_ring,
    )?;
    let mut p = world.producers.pop().ok_or("no ring")?;
    let ring = p.ring().clone();
    let (mut enq, mut total) = (Vec::new(), Vec::new());
    for i in 0..iters + 100 {
        let t0 = Instant::now();
        let index = p.push_one(&inline(8 * (i % 64) as u32, i as u64));
        let t1 = Instant::now();
        if !wait_completed(&ring, index + 1, WAIT) {
            return Err(format!("request {index} did not complete"));
        }
        let t2 = Instant::now();
        if i >= 100 {
            enq.push((t1 - t0).as_nanos() as u64);
            total.push((t2 - t0).as_nanos() as u64);
        }
    }
    let pin = pinning_note(&world.pinning());
    world.stop();
    report.row(
        format!(
            "enqueue  {:<9} p50 {:>7} ns  p99 {:>7} ns | put+completion p50 {:>8} ns p99 {:>8} ns  ({pin})",
            H::NAME,
            pct(&enq, 0.5),
            pct(&enq, 0.99),
            pct(&total, 0.5),
            pct(&total, 0.99)
        ),
        &[
            ("section", s("enqueue")),
            ("producer", s("cpu")),
            ("handoff", s(H::NAME)),
            ("enqueue_p50_ns", pct(&enq, 0.5).to_string()),
            ("enqueue_p99_ns", pct(&enq, 0.99).to_string()),
            ("put_completion_p50_ns", pct(&total, 0.5).to_string()),
            ("put_completion_p99_ns", pct(&total, 0.99).to_string()),
            ("samples", enq.len().to_string()),
        ],
    );
    Ok(())
}

/// Message rate with CPU producers: `producers` threads share the R tuned rings (each
/// ring has one owner thread).
fn cpu_rate(
    report: &mut Report,
    t: usize,
    r: usize,
    b: u32,
    total: usize,
    producers: usize,
) -> Result<(), String> {
    let mut world = World::<Tuned>::build(
        WorldConfig {
            workers: t,
            rings: r,
            batch: b,
            slots: 256,
            window_slots: 4096,
            pin_from: Some(1),
        },
        host_ring,
    )?;
    let rings: Vec<_> = world.producers.drain(..).collect();
    let mut owned: Vec<Vec<RingProducer<Tuned>>> = (0..producers).map(|_| Vec::new()).collect();
    for (i, p) in rings.into_iter().enumerate() {
        owned[i % producers].push(p);
    }
    let per_ring = total / r;
    let start = Instant::now();
    let threads: Vec<_> = owned
        .into_iter()
        .map(|mut mine| {
            std::thread::spawn(move || {
                let mut k = 0usize;
                for _ in 0..per_ring {
                    for p in mine.iter_mut() {
                        p.push_one(&inline(8 * (k % 4096) as u32, k as u64));
                        k += 1;
                    }
                }
                mine
            })
        })
        .collect();
    let mut back = Vec::new();
    for th in threads {
        back.extend(th.join().map_err(|_| "producer panicked")?);
    }
    for p in &back {
        if !wait_completed(p.ring(), per_ring as u64, WAIT) {
            return Err("rate run did not complete".into());
        }
    }
    let ns = start.elapsed().as_nanos() as f64;
    let pin = pinning_note(&world.pinning());
    let reports = world.stop();
    let doorbells: u64 = reports.iter().map(|r| r.doorbells).sum();
    let posted: u64 = reports.iter().map(|r| r.posted).sum();
    let mps = (per_ring * r) as f64 / ns * 1e3;
    report.row(
        format!(
            "rate     T={t} R={r:<2} B={b:<2} {mps:>8.2} M msg/s  ({:.1} WQEs per doorbell, {pin})",
            posted as f64 / doorbells.max(1) as f64
        ),
        &[
            ("section", s("rate")),
            ("producer", s("cpu")),
            ("workers", t.to_string()),
            ("rings", r.to_string()),
            ("pinning", s(&pin)),
            ("batch", b.to_string()),
            ("mmsg_per_s", format!("{mps:.3}")),
            (
                "wqes_per_doorbell",
                format!("{:.2}", posted as f64 / doorbells.max(1) as f64),
            ),
        ],
    );
    Ok(())
}

/// A probe thread's put + completion while `bulk` threads load the rings.
fn cpu_probe(
    report: &mut Report,
    shared: bool,
    bulk_threads: usize,
    iters: usize,
) -> Result<(), String> {
    let mut world = World::<Baseline>::build(
        WorldConfig {
            workers: 2,
            rings: 5,
            batch: 16,
            slots: 64,
            window_slots: 4096,
            pin_from: Some(1),
        },
        host_ring,
    )?;
    // Rings 0..4 carry bulk traffic; ring 4 is the probe's private ring.
    let private = world.producers.pop().ok_or("no ring")?;
    let bulk: Vec<_> = world.producers.drain(..).collect();
    let probe = if shared { bulk[0].clone() } else { private };
    let stop = Arc::new(AtomicBool::new(false));
    let loaders: Vec<_> = (0..bulk_threads)
        .map(|i| {
            let p = bulk[i % bulk.len()].clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut k = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    p.push(&inline(64 + 8 * (k % 500) as u32, k))
                        .expect("valid");
                    k += 1;
                }
                k
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    let mut ns = Vec::new();
    let start = Instant::now();
    for i in 0..iters {
        let t0 = Instant::now();
        let index = probe
            .push(&inline(8 * (i % 8) as u32, i as u64))
            .expect("valid");
        if !wait_completed(probe.ring(), index + 1, WAIT) {
            return Err("probe did not complete".into());
        }
        ns.push(t0.elapsed().as_nanos() as u64);
    }
    let run = start.elapsed().as_nanos() as f64;
    stop.store(true, Ordering::Relaxed);
    let mut bulk_pushed = 0;
    for l in loaders {
        bulk_pushed += l.join().map_err(|_| "loader panicked")?;
    }
    world.stop();
    let ring = if shared { "shared" } else { "private" };
    let rate = bulk_pushed as f64 / run * 1e3;
    report.row(
        format!(
            "probe    {ring:<8} ring  p50 {:>9} ns  p99 {:>9} ns  (bulk {rate:.2} M msg/s, {bulk_threads} loaders)",
            pct(&ns, 0.5),
            pct(&ns, 0.99)
        ),
        &[
            ("section", s("probe")),
            ("producer", s("cpu")),
            ("ring", s(ring)),
            ("p50_ns", pct(&ns, 0.5).to_string()),
            ("p99_ns", pct(&ns, 0.99).to_string()),
            ("bulk_mmsg_per_s", format!("{rate:.3}")),
        ],
    );
    Ok(())
}

/// CPU producers on CPU-assisted queues (one fabric each); `forwarders` threads ring.
fn cpu_assisted(
    report: &mut Report,
    forwarders: usize,
    queues: usize,
    rounds: usize,
    batch: usize,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let mut pairs = Vec::new();
    let mut targets = Vec::new();
    let mut keep = Vec::new();
    for _ in 0..queues {
        let fabric = Fabric::new();
        let a = fabric.add_node(1).map_err(|e| err(&e))?;
        let b = fabric.add_node(2).map_err(|e| err(&e))?;
        let mut spec = QueuePairSpec::new(RingSize::new(1024).map_err(|e| err(&e))?);
        spec.send.doorbell = DoorbellPolicy::Explicit;
        spec.doorbell_watch = DoorbellWatch::DoorbellOnly;
        let qp = fabric
            .create_queue_pair::<Rc>(a, spec)
            .map_err(|e| err(&e))?;
        let peer = fabric
            .create_queue_pair::<Rc>(
                b,
                QueuePairSpec::new(RingSize::new(64).map_err(|e| err(&e))?),
            )
            .map_err(|e| err(&e))?;
        fabric.connect(qp.qpn(), peer.qpn()).map_err(|e| err(&e))?;
        std::mem::forget(peer);
        let remote = Arc::new(DmaBuffer::zeroed(512, 4096).map_err(|e| err(&e))?);
        let region = fabric
            .register(
                b,
                remote.clone(),
                0,
                512,
                Access::REMOTE_WRITE | Access::LOCAL_WRITE,
            )
            .map_err(|e| err(&e))?;
        let slot = Arc::new(DmaBuffer::zeroed(64, 64).map_err(|e| err(&e))?);
        let (q, t) = AssistedQueuePair::new(qp, slot).map_err(|e| err(&e))?;
        let engine = fabric.spawn_engine();
        pairs.push((q, region));
        targets.push(t);
        keep.push((fabric, engine, remote));
    }
    let mut groups: Vec<Vec<_>> = (0..forwarders).map(|_| Vec::new()).collect();
    for (i, t) in targets.into_iter().enumerate() {
        groups[i % forwarders].push(t);
    }
    let fwd: Vec<Forwarder> = groups
        .into_iter()
        .map(Forwarder::spawn)
        .collect::<Result<_, _>>()
        .map_err(|e| err(&e))?;
    let start = Instant::now();
    let threads: Vec<_> = pairs
        .into_iter()
        .map(|(mut q, region)| {
            std::thread::spawn(move || -> Result<(), String> {
                let deadline = Instant::now() + WAIT;
                let mut last = None;
                for r in 0..rounds {
                    for k in 0..batch {
                        let v = ((r * batch + k) as u64).to_le_bytes();
                        let mut wqe =
                            RdmaWrite::new(region.remote(8 * ((r * batch + k) % 64) as u64))
                                .inline(&v);
                        if k == batch - 1 {
                            wqe = wqe.signaled();
                        }
                        let wqe = wqe.build().map_err(|e| e.to_string())?;
                        loop {
                            match q.post(&wqe, &[]) {
                                Ok(t) => {
                                    last = Some(t);
                                    break;
                                }
                                Err(_) => {
                                    q.publish_index();
                                    let _ = q.poll();
                                    if Instant::now() > deadline {
                                        return Err("assisted queue stuck".into());
                                    }
                                }
                            }
                        }
                    }
                    q.publish_index();
                    let _ = q.poll();
                }
                if let Some(t) = last {
                    while !q.is_complete(t) {
                        let _ = q.poll();
                        if Instant::now() > deadline {
                            return Err("assisted queue did not complete".into());
                        }
                    }
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "producer panicked")??;
    }
    let ns = start.elapsed().as_nanos() as f64;
    let forwarded: u64 = fwd.into_iter().map(|f| f.stop().forwarded).sum();
    drop(keep);
    let mps = (queues * rounds * batch) as f64 / ns * 1e3;
    report.row(
        format!(
            "assisted {forwarders} forwarder(s) {queues} queues B={batch:<2} {mps:>8.2} M WQE/s  {forwarded} doorbells forwarded ({} indices published)",
            queues * rounds
        ),
        &[
            ("section", s("assisted")),
            ("producer", s("cpu")),
            ("forwarders", forwarders.to_string()),
            ("queues", queues.to_string()),
            ("batch", batch.to_string()),
            ("mwqe_per_s", format!("{mps:.3}")),
            ("doorbells_forwarded", forwarded.to_string()),
            ("indices_published", (queues * rounds).to_string()),
        ],
    );
    Ok(())
}

fn run_cpu(report: &mut Report, quick: bool) -> Result<(), String> {
    println!(
        "CPU producers stand in for the GPU; the software NIC executes (one engine per worker)."
    );
    let iters = if quick { 2_000 } else { 20_000 };
    cpu_enqueue::<Baseline>(report, iters)?;
    cpu_enqueue::<Tuned>(report, iters)?;
    let (ts, rs, bs): (&[usize], &[usize], &[u32]) = if quick {
        (&[1, 2], &[1, 4], &[1, 16])
    } else {
        (&[1, 2, 4, 8], &[1, 4, 32], &[1, 4, 16])
    };
    let total = if quick { 1 << 14 } else { 1 << 17 };
    for &t in ts {
        for &r in rs {
            for &b in bs {
                cpu_rate(report, t, r, b, total, r.min(2))?;
            }
        }
    }
    let probes = if quick { 200 } else { 2_000 };
    cpu_probe(report, false, 2, probes)?;
    cpu_probe(report, true, 2, probes)?;
    let rounds = if quick { 500 } else { 5_000 };
    cpu_assisted(report, 1, 4, rounds, 16)?;
    cpu_assisted(report, 4, 4, rounds, 16)?;
    Ok(())
}

// ------------------------------------------------------------------------------------
// GPU producers.

fn gpu_enqueue<H: Handoff>(
    report: &mut Report,
    gpu: &Gpu,
    k: &ProxyKernels,
    iters: u32,
) -> Result<(), String> {
    let mut world = World::<H>::build(
        WorldConfig {
            workers: 1,
            rings: 1,
            batch: 1,
            slots: 64,
            window_slots: 64,
            pin_from: Some(1),
        },
        |b| gpu.mapped_host_buffer(b).map_err(|e| e.to_string()),
    )?;
    let mut ring =
        DeviceRing::new(gpu, world.producers.pop().ok_or("no ring")?).map_err(|e| e.to_string())?;
    let samples = k
        .enqueue(gpu, &mut ring, 1000, iters, 64)
        .map_err(|e| e.to_string())?;
    let pin = pinning_note(&world.pinning());
    world.stop();
    let mhz = samples.cycles as f64 / samples.ns.max(1) as f64 * 1e3;
    let (e, t) = (&samples.enqueue_ns, &samples.total_ns);
    report.row(
        format!(
            "enqueue  {:<9} p50 {:>7} ns  p99 {:>7} ns | put+completion p50 {:>8} ns p99 {:>8} ns  (SM {mhz:.0} MHz, {pin})",
            H::NAME,
            pct(e, 0.5),
            pct(e, 0.99),
            pct(t, 0.5),
            pct(t, 0.99)
        ),
        &[
            ("section", s("enqueue")),
            ("producer", s("gpu")),
            ("handoff", s(H::NAME)),
            ("enqueue_p50_ns", pct(e, 0.5).to_string()),
            ("enqueue_p99_ns", pct(e, 0.99).to_string()),
            ("put_completion_p50_ns", pct(t, 0.5).to_string()),
            ("put_completion_p99_ns", pct(t, 0.99).to_string()),
            ("sm_mhz", format!("{mhz:.0}")),
            ("samples", e.len().to_string()),
            ("paper_enqueue_us", s(if H::NAME == "tuned" { "0.13" } else { "2.27" })),
        ],
    );
    Ok(())
}

fn gpu_rate(
    report: &mut Report,
    gpu: &Gpu,
    k: &ProxyKernels,
    t: usize,
    r: usize,
    b: u32,
    per_ring: u32,
) -> Result<(), String> {
    let mut world = World::<Tuned>::build(
        WorldConfig {
            workers: t,
            rings: r,
            batch: b,
            slots: 1024,
            window_slots: 4096,
            pin_from: Some(1),
        },
        |bytes| gpu.mapped_host_buffer(bytes).map_err(|e| e.to_string()),
    )?;
    let mut rings: Vec<_> = world
        .producers
        .drain(..)
        .map(|p| DeviceRing::new(gpu, p))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let ns = k
        .rate(gpu, &mut rings, r as u32, per_ring, 4096)
        .map_err(|e| e.to_string())?;
    let pin = pinning_note(&world.pinning());
    let reports = world.stop();
    let doorbells: u64 = reports.iter().map(|r| r.doorbells).sum();
    let posted: u64 = reports.iter().map(|r| r.posted).sum();
    let mps = (per_ring as usize * r) as f64 / ns.max(1) as f64 * 1e3;
    report.row(
        format!(
            "rate     T={t} R={r:<2} B={b:<2} {mps:>8.2} M msg/s  ({:.1} WQEs per doorbell, {pin})",
            posted as f64 / doorbells.max(1) as f64
        ),
        &[
            ("section", s("rate")),
            ("producer", s("gpu")),
            ("workers", t.to_string()),
            ("rings", r.to_string()),
            ("pinning", s(&pin)),
            ("batch", b.to_string()),
            ("mmsg_per_s", format!("{mps:.3}")),
            (
                "wqes_per_doorbell",
                format!("{:.2}", posted as f64 / doorbells.max(1) as f64),
            ),
        ],
    );
    Ok(())
}

fn gpu_probe(
    report: &mut Report,
    gpu: &Gpu,
    k: &ProxyKernels,
    shared: bool,
    iters: u32,
) -> Result<(), String> {
    // T=4 workers, R=32 bulk rings (+ the probe's private ring), B=16; 2,048 bulk threads.
    let mut world = World::<Baseline>::build(
        WorldConfig {
            workers: 4,
            rings: 33,
            batch: 16,
            slots: 256,
            window_slots: 4096,
            pin_from: Some(1),
        },
        |bytes| gpu.mapped_host_buffer(bytes).map_err(|e| e.to_string()),
    )?;
    let mut rings: Vec<_> = world
        .producers
        .drain(..)
        .map(|p| DeviceRing::new(gpu, p))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let private = rings.pop().ok_or("no ring")?;
    let probe = if shared { None } else { Some(&private) };
    let out = k
        .probe(gpu, probe, &rings, 2048, iters, 4096)
        .map_err(|e| e.to_string())?;
    world.stop();
    let ring = if shared { "shared" } else { "private" };
    let rate = out.bulk_pushed as f64 / out.run_ns.max(1) as f64 * 1e3;
    report.row(
        format!(
            "probe    {ring:<8} ring  p50 {:>9} ns  p99 {:>9} ns  (bulk {rate:.2} M msg/s, 2048 threads, T4 R32 B16)",
            pct(&out.probe_ns, 0.5),
            pct(&out.probe_ns, 0.99)
        ),
        &[
            ("section", s("probe")),
            ("producer", s("gpu")),
            ("ring", s(ring)),
            ("p50_ns", pct(&out.probe_ns, 0.5).to_string()),
            ("p99_ns", pct(&out.probe_ns, 0.99).to_string()),
            ("bulk_mmsg_per_s", format!("{rate:.3}")),
            ("paper_p50_us", s(if shared { "2190" } else { "115" })),
        ],
    );
    Ok(())
}

fn gpu_assisted(
    report: &mut Report,
    gpu: &Gpu,
    k: &ProxyKernels,
    forwarders: usize,
    rounds: u32,
) -> Result<(), String> {
    let queues = 8;
    let batch = 16;
    let (nics, targets) =
        assisted_world::build(gpu, queues, 1024, 512).map_err(|e| e.to_string())?;
    let mut groups: Vec<Vec<_>> = (0..forwarders).map(|_| Vec::new()).collect();
    for (i, t) in targets.into_iter().enumerate() {
        groups[i % forwarders].push(t);
    }
    let fwd: Vec<Forwarder> = groups
        .into_iter()
        .map(Forwarder::spawn)
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let qs: Vec<_> = nics.iter().map(|n| n.queue.device_queue()).collect();
    let targets: Vec<(u64, u32)> = nics
        .iter()
        .map(|n| (n.region.addr(), n.region.rkey().0))
        .collect();
    let ns = k
        .assisted_post(gpu, &qs, &targets, rounds, batch)
        .map_err(|e| e.to_string())?;
    let forwarded: u64 = fwd.into_iter().map(|f| f.stop().forwarded).sum();
    let max = ns.iter().copied().max().unwrap_or(1).max(1) as f64;
    let mps = (queues as u32 * rounds * batch) as f64 / max * 1e3;
    report.row(
        format!(
            "assisted {forwarders} forwarder(s) {queues} queues B={batch:<2} {mps:>8.2} M WQE/s  {forwarded} doorbells forwarded ({} rounds)",
            queues as u32 * rounds
        ),
        &[
            ("section", s("assisted")),
            ("producer", s("gpu")),
            ("forwarders", forwarders.to_string()),
            ("queues", queues.to_string()),
            ("batch", batch.to_string()),
            ("mwqe_per_s", format!("{mps:.3}")),
            ("doorbells_forwarded", forwarded.to_string()),
            ("rounds", (queues as u32 * rounds).to_string()),
        ],
    );
    Ok(())
}

fn run_gpu(report: &mut Report, quick: bool) -> Result<(), String> {
    // Every device wait is bounded: a stalled worker becomes an error, not a hang.
    let options = CompileOptions::new()
        .spin_limit(Duration::from_secs(20))
        .map_err(|e| e.to_string())?;
    let gpu = Gpu::open_with(0, &options).map_err(|e| e.to_string())?;
    let k = ProxyKernels::load(&gpu).map_err(|e| e.to_string())?;
    println!("GPU producers; the software NIC executes (one CPU engine per worker): the proxy's own costs.");
    let iters = if quick { 2_000 } else { 10_000 };
    gpu_enqueue::<Baseline>(report, &gpu, &k, iters)?;
    gpu_enqueue::<Tuned>(report, &gpu, &k, iters)?;
    let (ts, rs, bs): (&[usize], &[usize], &[u32]) = if quick {
        (&[1, 4], &[1, 32], &[1, 16])
    } else {
        (&[1, 2, 4, 8], &[1, 4, 32], &[1, 4, 16])
    };
    for &t in ts {
        for &r in rs {
            for &b in bs {
                let per_ring = ((1u32 << 17) / r as u32).max(1);
                gpu_rate(report, &gpu, &k, t, r, b, per_ring)?;
            }
        }
    }
    let probes = if quick { 100 } else { 300 };
    gpu_probe(report, &gpu, &k, false, probes)?;
    gpu_probe(report, &gpu, &k, true, probes)?;
    let rounds = if quick { 200 } else { 2_000 };
    gpu_assisted(report, &gpu, &k, 1, rounds)?;
    gpu_assisted(report, &gpu, &k, 4, rounds)?;
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let gpu = args.iter().any(|a| a == "--gpu");
    let cpu = args.iter().any(|a| a == "--cpu");
    let quick = args.iter().any(|a| a == "--quick");
    let out = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_else(|| ".".into());
    if gpu == cpu {
        eprintln!("usage: ibgda-proxy-bench --cpu|--gpu [--quick] [OUT_DIR]");
        std::process::exit(2);
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "ibgda-proxy-bench ({} producers, {cores} cores)",
        if gpu { "GPU" } else { "CPU" }
    );
    let mut report = Report::default();
    let t0 = Instant::now();
    let result = if gpu {
        run_gpu(&mut report, quick)
    } else {
        run_cpu(&mut report, quick)
    };
    let mode = if gpu { "gpu" } else { "cpu" };
    let mut json = String::new();
    let _ = write!(
        json,
        "{{\"mode\": \"{mode}\", \"cores\": {cores}, \"seconds\": {:.1}, \"rows\": [\n  {}\n]}}\n",
        t0.elapsed().as_secs_f64(),
        report.json.join(",\n  ")
    );
    let path = std::path::Path::new(&out).join(format!("proxy-bench-{mode}.json"));
    if let Err(e) = std::fs::write(&path, json) {
        eprintln!("cannot write {}: {e}", path.display());
    }
    println!(
        "wrote {} ({:.1} s)",
        path.display(),
        t0.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        eprintln!("ibgda-proxy-bench: {e}");
        std::process::exit(2);
    }
}
