//! The ibgda demo: CPU producers post through typed RC and DC queues made by the control
//! plane (`nic::Device`: PRM commands, UMEM, UAR, the QP state machine) on two hosts, every
//! result is validated against a model of remote memory, and a short table reports
//! operations, errors, rate and post-to-completion latency. No GPU and no NIC needed: the
//! default backend is the software NIC.
//!
//! ```text
//! ibgda-demo [run] [--nic soft|DEVICE] [--producers N] [--queues N] [--targets N]
//!                  [--batch N] [--payload BYTES] [--duration SECONDS]
//! ibgda-demo wqes      # build, dump and parse one WQE of every kind
//! ibgda-demo --help
//! ```
//!
//! `--nic soft` (the default) runs on two software NICs of one fabric. `--nic DEVICE` (e.g.
//! `mlx5_0`) runs the same traffic on that ConnectX through the mlx5 backend (build with
//! `--features mlx5`), both hosts on the one device (RC between its queue pairs, DC to its
//! targets), after reporting its port and capabilities; or it reports the typed reason the
//! device cannot be used (no RDMA device, not an mlx5 device, libraries missing).

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibgda::memory::DmaBuffer;
use std::num::NonZeroU32;

use ibgda::nic::{
    Backend, DcTargetQueue, Device, MemoryAccess, MemoryRegion, NicError, QueueSpec, SoftNic,
};
use ibgda::queue::{
    DoorbellPolicy, PollError, QueuePair, Registered, SendQueueConfig, Ticket, WaitError,
};
use ibgda::softnic::{EngineHandle, Fabric};
use ibgda::wqe::*;

mod wqes;

/// Which NIC the demo runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Nic {
    /// The software NIC.
    Soft,
    /// A hardware device by name (`mlx5_0`).
    Device(String),
}

fn parse_nic(name: &str) -> Result<Nic, String> {
    match name {
        "soft" => Ok(Nic::Soft),
        "" => Err("empty device name".into()),
        device => Ok(Nic::Device(device.to_owned())),
    }
}

/// The ibgda demo: typed RC and DC queues on the software NIC (no GPU, no NIC needed).
#[derive(Parser, Debug)]
#[command(
    name = "ibgda-demo",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    options: Options,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs the producers (the default).
    Run(Options),
    /// Builds, dumps and parses one WQE of every kind.
    Wqes,
}

#[derive(Args, Clone, Debug)]
struct Options {
    /// `soft` for the software NIC, or a ConnectX device name (e.g. mlx5_0; needs the
    /// mlx5 feature).
    #[arg(long, value_name = "soft|DEVICE", default_value = "soft", value_parser = parse_nic)]
    nic: Nic,
    /// Producer threads.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    producers: u16,
    /// RC queues per producer.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    queues: u16,
    /// DC targets.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    targets: u16,
    /// WQEs per doorbell (and per round).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    batch: u16,
    /// Pointer payload in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    payload: u32,
    /// How long to run, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 3,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    duration: u64,
}

impl Options {
    fn producers(&self) -> usize {
        usize::from(self.producers)
    }
    fn queues(&self) -> usize {
        usize::from(self.queues)
    }
    fn targets(&self) -> usize {
        usize::from(self.targets)
    }
    fn batch(&self) -> usize {
        usize::from(self.batch)
    }
    fn payload(&self) -> usize {
        self.payload as usize
    }
    fn duration(&self) -> Duration {
        Duration::from_secs(self.duration)
    }
}

/// The NIC the demo's two hosts run on.
trait Hosts {
    /// The backend.
    type Backend: Backend;
    /// What the hosts are, for the report.
    fn describe(&self) -> String;
    /// Opens host `host`'s device (0 or 1).
    fn open(&self, host: u8) -> Result<Device<Self::Backend>, NicError>;
    /// Starts whatever executes the WQEs, if the backend needs it (the software NIC's
    /// engine thread; a NIC executes them itself), until the returned value drops.
    fn execute(&self) -> Option<EngineHandle>;
    /// What the executing NIC counted, where it can tell.
    fn counted(&self) -> Option<String>;
}

/// Two software NICs on one fabric.
struct SoftHosts {
    fabric: Fabric,
}

impl Hosts for SoftHosts {
    type Backend = SoftNic;
    fn describe(&self) -> String {
        "two software NICs on one fabric".into()
    }
    fn open(&self, host: u8) -> Result<Device<SoftNic>, NicError> {
        Device::open(SoftNic::open(&self.fabric, u16::from(host) + 1)?)
    }
    fn execute(&self) -> Option<EngineHandle> {
        Some(self.fabric.spawn_engine())
    }
    fn counted(&self) -> Option<String> {
        let c = self.fabric.counters();
        Some(format!(
            "software NIC             {} WQEs executed, {} failed, {} flushed, {} doorbells, {} CQEs",
            c.wqes_executed, c.wqes_failed, c.wqes_flushed, c.doorbells, c.cqes_written
        ))
    }
}

/// Both hosts on one ConnectX, through the mlx5 backend.
#[cfg(feature = "mlx5")]
struct Mlx5Hosts {
    device: String,
}

#[cfg(feature = "mlx5")]
impl Hosts for Mlx5Hosts {
    type Backend = ibgda::nic::mlx5::Mlx5Backend;
    fn describe(&self) -> String {
        format!("{} (mlx5, DEVX), both hosts on it", self.device)
    }
    fn open(&self, _host: u8) -> Result<Device<Self::Backend>, NicError> {
        use ibgda::nic::mlx5::{Mlx5Backend, Mlx5Device};
        Device::open(Mlx5Backend::new(Mlx5Device::open(Some(&self.device))?))
    }
    fn execute(&self) -> Option<EngineHandle> {
        None
    }
    fn counted(&self) -> Option<String> {
        None
    }
}

/// Opens the hardware NIC `device` and runs the demo's traffic on it.
#[cfg(feature = "mlx5")]
fn hardware(o: &Options, device: &str) -> Result<u64, Box<dyn std::error::Error>> {
    let hosts = Mlx5Hosts {
        device: device.to_owned(),
    };
    let dev = hosts.open(0)?;
    let caps = dev.caps();
    let port = dev.port();
    println!(
        "opened {} (mlx5, DEVX): CQE version {}, max send queue 2^{} WQEBBs, max inline {} B, \
         atomics {} (8-byte results {:?}), DC {}, compact AV {}",
        device,
        caps.cqe_version,
        caps.log_max_qp_size,
        caps.max_inline(),
        caps.atomic,
        caps.atomic_endianness,
        caps.dc,
        caps.compact_address_vector
    );
    println!(
        "port {}: LID {:#x}, MTU {} B, {:?}, {} GIDs",
        port.port,
        port.lid,
        port.mtu.bytes(),
        port.link_layer,
        port.gids.len()
    );
    drop(dev);
    run(o, &hosts)
}

#[cfg(not(feature = "mlx5"))]
fn hardware(_o: &Options, device: &str) -> Result<u64, Box<dyn std::error::Error>> {
    Err(format!(
        "--nic {device}: this demo was built without the mlx5 backend; rebuild with \
         `cargo build --release -p ibgda-demo --features mlx5` (needs cmake and libclang)"
    )
    .into())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let options = match cli.command {
        Some(Command::Wqes) => {
            return match wqes::dump_every_kind() {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Some(Command::Run(options)) => options,
        None => cli.options,
    };
    let result = match &options.nic {
        Nic::Soft => run(
            &options,
            &SoftHosts {
                fabric: Fabric::new(),
            },
        ),
        Nic::Device(device) => hardware(&options, device),
    };
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The operations a producer cycles through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
enum Kind {
    InlineWrite,
    PointerWrite,
    Read,
    FetchAdd,
    CompareSwap,
    DcWrite,
}

const KINDS: [Kind; 6] = [
    Kind::InlineWrite,
    Kind::PointerWrite,
    Kind::Read,
    Kind::FetchAdd,
    Kind::CompareSwap,
    Kind::DcWrite,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::InlineWrite => "8 B inline write (RC)",
            Self::PointerWrite => "pointer write (RC)",
            Self::Read => "read (RC)",
            Self::FetchAdd => "fetch-add (RC)",
            Self::CompareSwap => "compare-swap (RC)",
            Self::DcWrite => "8 B inline write (DC)",
        }
    }
}

/// What every producer reports.
struct Tally {
    ops: [u64; KINDS.len()],
    errors: [u64; KINDS.len()],
    latencies_ns: Histogram<u64>,
    first_error: Option<String>,
}

impl Default for Tally {
    fn default() -> Self {
        Self {
            ops: [0; KINDS.len()],
            errors: [0; KINDS.len()],
            // Nanoseconds, three significant digits, growing as needed.
            latencies_ns: Histogram::new(3).expect("3 significant digits is valid"),
            first_error: None,
        }
    }
}

struct Shared {
    ops: AtomicU64,
    errors: AtomicU64,
    stop: AtomicBool,
}

/// One producer's memory and queues.
struct Producer<B: Backend> {
    rc: Vec<QueuePair<Rc>>,
    /// The RC queues' peers on host B (kept: dropping one destroys it).
    _peers: Vec<QueuePair<Rc>>,
    dci: QueuePair<Dc<Full>>,
    targets: Vec<DcTarget<Full>>,
    /// Remote memory on host B: per RC queue [inline word | payload | counter | cas word],
    /// then one word per DC target.
    remote: MemoryRegion<B>,
    remote_buf: Arc<DmaBuffer>,
    /// Local memory on host A: per RC queue and operation of a round, a payload source, a
    /// READ destination and an 8-byte atomic result.
    local: MemoryRegion<B>,
    local_buf: Arc<DmaBuffer>,
    layout: Layout,
}

#[derive(Clone, Copy)]
struct Layout {
    queues: usize,
    payload: usize,
    batch: usize,
}

impl Layout {
    fn padded(&self) -> usize {
        self.payload.next_multiple_of(8)
    }
    fn remote_per_queue(&self) -> usize {
        8 + self.padded() + 16
    }
    fn remote_len(&self, targets: usize) -> usize {
        (self.queues * self.remote_per_queue() + 8 * targets).next_multiple_of(64)
    }
    fn remote_inline(&self, q: usize) -> u64 {
        (q * self.remote_per_queue()) as u64
    }
    fn remote_payload(&self, q: usize) -> u64 {
        self.remote_inline(q) + 8
    }
    fn remote_counter(&self, q: usize) -> u64 {
        self.remote_payload(q) + self.padded() as u64
    }
    fn remote_cas(&self, q: usize) -> u64 {
        self.remote_counter(q) + 8
    }
    fn remote_dc(&self, t: usize) -> u64 {
        (self.queues * self.remote_per_queue() + 8 * t) as u64
    }
    fn local_per_op(&self) -> usize {
        2 * self.padded() + 8
    }
    fn local_len(&self) -> usize {
        (self.queues * self.batch * self.local_per_op()).next_multiple_of(64)
    }
    fn local_source(&self, q: usize, j: usize) -> u64 {
        ((q * self.batch + j) * self.local_per_op()) as u64
    }
    fn local_read(&self, q: usize, j: usize) -> u64 {
        self.local_source(q, j) + self.padded() as u64
    }
    fn local_result(&self, q: usize, j: usize) -> u64 {
        self.local_read(q, j) + self.padded() as u64
    }
}

fn run<H: Hosts>(o: &Options, hosts: &H) -> Result<u64, Box<dyn std::error::Error>> {
    let (host_a, host_b) = (hosts.open(0)?, hosts.open(1)?);
    let (pd_a, pd_b) = (host_a.alloc_pd()?, host_b.alloc_pd()?);
    let dc_key = 0x5623_ceaf;
    let dcts: Vec<DcTargetQueue<H::Backend>> = (0..o.targets())
        .map(|_| pd_b.create_dct(dc_key, 16))
        .collect::<Result<_, _>>()?;
    let layout = Layout {
        queues: o.queues(),
        payload: o.payload(),
        batch: o.batch(),
    };
    let ring = RingSize::new((4 * o.batch()).next_power_of_two().max(64))?;
    let every = NonZeroU32::new(o.batch() as u32).ok_or("the batch is at least 1")?;
    let spec = QueueSpec {
        send: SendQueueConfig {
            doorbell: DoorbellPolicy::Every(every),
            ..Default::default()
        },
        ..QueueSpec::new(ring)
    };
    let all = MemoryAccess::LOCAL_WRITE
        | MemoryAccess::REMOTE_WRITE
        | MemoryAccess::REMOTE_READ
        | MemoryAccess::REMOTE_ATOMIC;
    let mut producers = Vec::new();
    for _ in 0..o.producers() {
        let mut rc = Vec::new();
        let mut peers = Vec::new();
        for _ in 0..o.queues() {
            // Each side connects with the other's endpoint (what a TCP exchange carries).
            let (a, b) = (pd_a.create_rc(spec)?, pd_b.create_rc(spec)?);
            let (end_a, end_b) = (a.endpoint(), b.endpoint());
            rc.push(a.connect(&end_b)?);
            peers.push(b.connect(&end_a)?);
        }
        let dci = pd_a.create_dci::<Full>(spec)?.activate()?;
        let targets = dcts
            .iter()
            .map(|d| d.endpoint().full_target())
            .collect::<Result<Vec<_>, _>>()?;
        let remote_len = layout.remote_len(o.targets());
        let remote_buf = Arc::new(DmaBuffer::zeroed(remote_len, 4096)?);
        let remote = pd_b.register(remote_buf.clone(), 0, remote_len, all)?;
        let local_len = layout.local_len();
        let local_buf = Arc::new(DmaBuffer::zeroed(local_len, 4096)?);
        let local = pd_a.register(local_buf.clone(), 0, local_len, all)?;
        producers.push(Producer {
            rc,
            _peers: peers,
            dci,
            targets,
            remote,
            remote_buf,
            local,
            local_buf,
            layout,
        });
    }

    println!(
        "ibgda demo: {}, {} producers x ({} RC + 1 DC) queues, {} DC targets, \
         doorbell every {} WQEs, {} B pointer payload, {:?}",
        hosts.describe(),
        o.producers(),
        o.queues(),
        o.targets(),
        o.batch(),
        o.payload(),
        o.duration()
    );
    let shared = Arc::new(Shared {
        ops: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let engine = hosts.execute();
    let start = Instant::now();
    let handles: Vec<_> = producers
        .into_iter()
        .enumerate()
        .map(|(p, producer)| {
            let shared = shared.clone();
            std::thread::spawn(move || produce(p as u64, producer, &shared))
        })
        .collect();
    let mut last_report = Instant::now();
    while start.elapsed() < o.duration() {
        std::thread::sleep(Duration::from_millis(20));
        if last_report.elapsed() >= Duration::from_secs(1) {
            last_report = Instant::now();
            eprintln!(
                "[{:5.1} s] {} operations, {} errors",
                start.elapsed().as_secs_f64(),
                shared.ops.load(Ordering::Relaxed),
                shared.errors.load(Ordering::Relaxed)
            );
        }
    }
    shared.stop.store(true, Ordering::Relaxed);
    let mut total = Tally::default();
    for h in handles {
        let t = h.join().map_err(|_| "a producer panicked")?;
        for k in 0..KINDS.len() {
            total.ops[k] += t.ops[k];
            total.errors[k] += t.errors[k];
        }
        total
            .latencies_ns
            .add(&t.latencies_ns)
            .map_err(|e| format!("latency histogram: {e:?}"))?;
        total.first_error = total.first_error.or(t.first_error);
    }
    let elapsed = start.elapsed();
    drop(engine);

    let ops: u64 = total.ops.iter().sum();
    let errors: u64 = total.errors.iter().sum();
    println!();
    println!("{:<24} {:>12} {:>8}", "operation", "count", "errors");
    for (k, kind) in KINDS.iter().enumerate() {
        println!(
            "{:<24} {:>12} {:>8}",
            kind.name(),
            total.ops[k],
            total.errors[k]
        );
    }
    println!("{:<24} {:>12} {:>8}", "total", ops, errors);
    // Microseconds from the histogram (three significant digits); NaN when nothing ran.
    let pct = |q: f64| -> f64 {
        match total.latencies_ns.len() {
            0 => f64::NAN,
            _ => total.latencies_ns.value_at_quantile(q) as f64 / 1000.0,
        }
    };
    println!();
    println!(
        "rate                     {:.3} M operations/s over {:.2} s",
        ops as f64 / elapsed.as_secs_f64() / 1e6,
        elapsed.as_secs_f64()
    );
    println!(
        "post to completion       p50 {:.1} us, p99 {:.1} us (CPU clock; signaled WQE of each round, {} rounds)",
        pct(0.5),
        pct(0.99),
        total.latencies_ns.len()
    );
    if let Some(counted) = hosts.counted() {
        println!("{counted}");
    }
    if let Some(e) = &total.first_error {
        println!("first error              {e}");
    }
    Ok(errors)
}

/// What remote memory must hold, per RC queue.
#[derive(Clone, Default)]
struct Model {
    inline: u64,
    payload: Vec<u8>,
    counter: u64,
    cas: u64,
}

/// A result to check after the round completes: `want` at `at` in local memory.
struct Check {
    kind: Kind,
    at: usize,
    want: Vec<u8>,
}

/// Posts rounds of `batch` operations on each RC queue in turn (the last one signaled),
/// waits for each round, and checks every READ and atomic result against the model of
/// remote memory, and remote memory itself.
// `q` indexes the queues, the model and the memory layout together.
#[allow(clippy::needless_range_loop)]
fn produce<B: Backend>(p: u64, mut pr: Producer<B>, shared: &Shared) -> Tally {
    let mut tally = Tally::default();
    let l = pr.layout;
    let regs = [pr.local.registered()];
    let mut model = vec![
        Model {
            payload: vec![0; l.payload],
            ..Model::default()
        };
        l.queues
    ];
    let mut dc_model = vec![0u64; pr.targets.len()];
    let mut round = 0u64;
    let fail = |tally: &mut Tally, kind: Kind, what: String| {
        tally.errors[kind as usize] += 1;
        shared.errors.fetch_add(1, Ordering::Relaxed);
        tally.first_error.get_or_insert(what);
    };
    while !shared.stop.load(Ordering::Relaxed) {
        for q in 0..l.queues {
            round += 1;
            let mut checks = Vec::new();
            let mut last = None;
            let mut last_dc = None;
            let started = Instant::now();
            for j in 0..l.batch {
                let kind = KINDS[(round as usize + j) % KINDS.len()];
                let tag = p << 48 | (round & 0xff_ffff_ffff) << 8 | j as u64;
                let sig = j + 1 == l.batch;
                let m = &mut model[q];
                let posted: Result<Option<Ticket>, String> = match kind {
                    Kind::InlineWrite => {
                        m.inline = tag;
                        let v = tag.to_be_bytes();
                        let b = RdmaWrite::new(pr.remote.remote(l.remote_inline(q))).inline(&v);
                        post(
                            &mut pr.rc[q],
                            if sig { b.signaled() } else { b }.build(),
                            &[],
                        )
                    }
                    Kind::PointerWrite => {
                        let pattern: Vec<u8> = (0..l.payload)
                            .map(|i| (tag as usize).wrapping_add(i * 31) as u8)
                            .collect();
                        let src = l.local_source(q, j);
                        let written = pr
                            .local_buf
                            .write(src as usize, &pattern)
                            .map_err(|e| e.to_string());
                        m.payload.clone_from(&pattern);
                        written
                            .and_then(|()| {
                                pr.local
                                    .sge(src, l.payload as u32)
                                    .map_err(|e| e.to_string())
                            })
                            .and_then(|sge| {
                                let b =
                                    RdmaWrite::new(pr.remote.remote(l.remote_payload(q))).sge(sge);
                                post(
                                    &mut pr.rc[q],
                                    if sig { b.signaled() } else { b }.build(),
                                    &regs,
                                )
                            })
                    }
                    Kind::Read => {
                        let dst = l.local_read(q, j);
                        checks.push(Check {
                            kind,
                            at: dst as usize,
                            want: m.payload.clone(),
                        });
                        pr.local
                            .sge(dst, l.payload as u32)
                            .map_err(|e| e.to_string())
                            .and_then(|sge| {
                                let b =
                                    RdmaRead::new(pr.remote.remote(l.remote_payload(q))).sge(sge);
                                post(
                                    &mut pr.rc[q],
                                    if sig { b.signaled() } else { b }.build(),
                                    &regs,
                                )
                            })
                    }
                    Kind::FetchAdd => {
                        let result = l.local_result(q, j);
                        checks.push(Check {
                            kind,
                            at: result as usize,
                            want: m.counter.to_be_bytes().to_vec(),
                        });
                        m.counter += j as u64 + 1;
                        let b = Atomic::fetch_add(
                            pr.remote.remote(l.remote_counter(q)),
                            pr.local.local(result),
                            j as u64 + 1,
                        );
                        post(
                            &mut pr.rc[q],
                            if sig { b.signaled() } else { b }.build(),
                            &regs,
                        )
                    }
                    Kind::CompareSwap => {
                        let result = l.local_result(q, j);
                        // Alternate a matching and a failing compare; either returns the old value.
                        let matching = (round + j as u64) % 2 == 0;
                        let compare = if matching { m.cas } else { !m.cas };
                        checks.push(Check {
                            kind,
                            at: result as usize,
                            want: m.cas.to_be_bytes().to_vec(),
                        });
                        if matching {
                            m.cas = tag;
                        }
                        let b = Atomic::compare_swap(
                            pr.remote.remote(l.remote_cas(q)),
                            pr.local.local(result),
                            compare,
                            tag,
                        );
                        post(
                            &mut pr.rc[q],
                            if sig { b.signaled() } else { b }.build(),
                            &regs,
                        )
                    }
                    Kind::DcWrite => {
                        let t = (round as usize + j) % pr.targets.len();
                        dc_model[t] = tag;
                        let v = tag.to_be_bytes();
                        let to = pr.targets[t].at(pr.remote.remote(l.remote_dc(t)));
                        RdmaWrite::new(to)
                            .inline(&v)
                            .build()
                            .map_err(|e| e.to_string())
                            .and_then(|w| {
                                let ticket = pr.dci.post(&w, &[]).map_err(|e| e.to_string())?;
                                last_dc = Some(ticket);
                                Ok(None)
                            })
                    }
                };
                tally.ops[kind as usize] += 1;
                shared.ops.fetch_add(1, Ordering::Relaxed);
                match posted {
                    Ok(Some(ticket)) => last = Some(ticket),
                    Ok(None) => {}
                    Err(e) => fail(
                        &mut tally,
                        kind,
                        format!("producer {p} queue {q}: {kind:?}: {e}"),
                    ),
                }
            }
            if let Some(ticket) = last {
                match pr.rc[q].wait(ticket, Duration::from_secs(10)) {
                    Ok(()) => {
                        let ns = started.elapsed().as_nanos() as u64;
                        // The histogram grows to any value; a refusal would be a bug.
                        if let Err(e) = tally.latencies_ns.record(ns) {
                            tally
                                .first_error
                                .get_or_insert(format!("latency of {ns} ns not recorded: {e:?}"));
                        }
                    }
                    Err(e) => fail(
                        &mut tally,
                        Kind::InlineWrite,
                        format!("producer {p} queue {q}: {}", describe(&e)),
                    ),
                }
            }
            if let Some(ticket) = last_dc {
                if let Err(e) = pr.dci.wait(ticket, Duration::from_secs(10)) {
                    fail(
                        &mut tally,
                        Kind::DcWrite,
                        format!("producer {p} DCI: {}", describe(&e)),
                    );
                }
            }
            let local = pr.local_buf.to_vec();
            for c in checks {
                if local[c.at..c.at + c.want.len()] != c.want[..] {
                    fail(
                        &mut tally,
                        c.kind,
                        format!(
                            "producer {p} queue {q}: {:?} result differs from the model",
                            c.kind
                        ),
                    );
                }
            }
            let remote = pr.remote_buf.to_vec();
            let word = |at: u64| {
                u64::from_be_bytes(
                    remote[at as usize..at as usize + 8]
                        .try_into()
                        .unwrap_or_default(),
                )
            };
            let m = &model[q];
            if word(l.remote_inline(q)) != m.inline {
                fail(
                    &mut tally,
                    Kind::InlineWrite,
                    format!("producer {p} queue {q}: inline word differs"),
                );
            }
            let at = l.remote_payload(q) as usize;
            if remote[at..at + l.payload] != m.payload[..] {
                fail(
                    &mut tally,
                    Kind::PointerWrite,
                    format!("producer {p} queue {q}: payload differs"),
                );
            }
            if word(l.remote_counter(q)) != m.counter {
                fail(
                    &mut tally,
                    Kind::FetchAdd,
                    format!("producer {p} queue {q}: counter differs"),
                );
            }
            if word(l.remote_cas(q)) != m.cas {
                fail(
                    &mut tally,
                    Kind::CompareSwap,
                    format!("producer {p} queue {q}: compare-swap word differs"),
                );
            }
            for (t, want) in dc_model.iter().enumerate() {
                if last_dc.is_some() && word(l.remote_dc(t)) != *want {
                    fail(
                        &mut tally,
                        Kind::DcWrite,
                        format!("producer {p}: DC target {t} word differs"),
                    );
                }
            }
        }
    }
    tally
}

fn post<S: WqeSpec<Transport = Rc>>(
    qp: &mut QueuePair<Rc>,
    wqe: Result<Wqe<S>, WqeError>,
    regs: &[Arc<dyn Registered>],
) -> Result<Option<Ticket>, String> {
    let wqe = wqe.map_err(|e| e.to_string())?;
    qp.post(&wqe, regs).map(Some).map_err(|e| e.to_string())
}

fn describe(e: &WaitError) -> String {
    match e {
        WaitError::Poll(PollError::Completion(c)) => format!("completion error: {c}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(list: &[&str]) -> Result<Options, clap::Error> {
        let cli = Cli::try_parse_from(std::iter::once("ibgda-demo").chain(list.iter().copied()))?;
        Ok(match cli.command {
            Some(Command::Run(o)) => o,
            _ => cli.options,
        })
    }

    #[test]
    fn nic_defaults_to_the_software_nic_and_takes_a_device_name() {
        assert_eq!(parse(&[]).unwrap().nic, Nic::Soft);
        assert_eq!(parse(&["--nic", "soft"]).unwrap().nic, Nic::Soft);
        let o = parse(&["run", "--nic", "mlx5_1", "--producers", "3"]).unwrap();
        assert_eq!(o.nic, Nic::Device("mlx5_1".into()));
        assert_eq!(o.producers(), 3);
        let e = parse(&["--nic"]).unwrap_err().to_string();
        assert!(e.contains("--nic"), "{e}");
        let e = parse(&["--nic", ""]).unwrap_err().to_string();
        assert!(e.contains("empty device name"), "{e}");
    }

    #[test]
    fn out_of_range_values_are_refused_with_the_value_and_the_range() {
        let e = parse(&["--producers", "0"]).unwrap_err().to_string();
        assert!(e.contains("'0'") && e.contains("1..=64"), "{e}");
        let e = parse(&["--batch", "257"]).unwrap_err().to_string();
        assert!(e.contains("257") && e.contains("1..=256"), "{e}");
        assert!(parse(&["--payload", "1048577"]).is_err());
        assert!(parse(&["--bogus"]).is_err());
    }

    #[cfg(not(feature = "mlx5"))]
    #[test]
    fn a_device_without_the_mlx5_backend_says_how_to_build_it() {
        let o = parse(&["--nic", "mlx5_0"]).unwrap();
        let e = hardware(&o, "mlx5_0").unwrap_err().to_string();
        assert!(e.contains("--features mlx5"), "{e}");
    }

    #[cfg(feature = "mlx5")]
    #[test]
    fn a_device_on_a_machine_without_one_is_the_typed_no_device_error() {
        // No machine has a device of this name, with or without RDMA devices.
        let o = parse(&["--nic", "mlx5_ibgda_absent"]).unwrap();
        let e = hardware(&o, "mlx5_ibgda_absent").unwrap_err().to_string();
        // Through the control plane: the backend's typed "no device" error, as NicError.
        assert!(
            e.starts_with("no RDMA device: no RDMA device named `mlx5_ibgda_absent`"),
            "{e}"
        );
    }
}
