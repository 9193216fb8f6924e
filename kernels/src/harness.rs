//! What the GPU tests and the benchmark share: GPU-placed queue pairs, the doorbell sink
//! (a persistent kernel standing in for the NIC), and the host encoder's side of the
//! byte-equality test.

use core::marker::PhantomData;
use std::sync::atomic::Ordering;

use cudarc::driver::LaunchConfig;
use ibgda::cq::CqMode;
use ibgda::memory::{DeviceBuffer, DmaBuffer};
use ibgda::order::{GpuThread, OrderingScope, ValidFor};
use ibgda::queue::{
    DeviceProducerState, DeviceQueueDescriptor, Executor, Gpu as GpuPlaced, QueuePair,
};
use ibgda::wqe::Rc;
use ibgda::wqe::{
    Atomic, Compact, CompactAddressVector, Destination, Dump, FenceMode, Full, FullAddressVector,
    Grh, LKey, LinkAddress, LocalBuffer, Nop, Qpn, RKey, RdmaRead, RdmaWrite, RemoteAddress,
    SendRing, Sge, Transport, WqeIndex, WqeLimits,
};
use ibgda::wqe::{CompletionMode, ControlFlags, Solicited};
use zerocopy::IntoBytes;

use crate::gpu::{Gpu, GpuError, KernelArg};
use crate::request::{Shape, SinkStats, TransportForm, WqeRequest, REQUEST_INLINE_MAX};
use crate::softnic::device::QueueReach;

/// A GPU-placed RC queue pair for scope `S` over fresh device memory
/// ([`Gpu::rc_queue_pair`]).
pub fn gpu_queue_pair<S>(
    gpu: &Gpu,
    qpn: u32,
    wqebbs: usize,
    cq_entries: u32,
    signal_interval: u32,
    cq_mode: CqMode,
    scope: S,
) -> Result<QueuePair<ibgda::wqe::Rc, GpuPlaced, S>, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    gpu.rc_queue_pair(qpn, wqebbs, cq_entries, signal_interval, cq_mode, scope)
}

pub use crate::gpu::descriptor_bytes;

/// Device memory holding an array of descriptors.
pub fn descriptor_array(gpu: &Gpu, ds: &[DeviceQueueDescriptor]) -> Result<DeviceBuffer, GpuError> {
    let bytes: Vec<u8> = ds.iter().flat_map(descriptor_bytes).collect();
    gpu.device_buffer_from(&bytes)
}

/// A running doorbell sink (`ibgda_sink` on the side stream), standing in for the NIC of
/// the queue pairs it serves: a guard that stops the kernel and waits for it when dropped.
///
/// It borrows the queue pairs for `'q` and keeps their memory referenced, so the kernel
/// never outlives what it reads and writes (even if the guard is leaked).
pub struct Sink<'q> {
    gpu: &'q Gpu,
    stop: DmaBuffer,
    stats: DeviceBuffer,
    expect: DeviceBuffer,
    _descriptors: DeviceBuffer,
    _state: DeviceBuffer,
    _queue_memory: Vec<QueueReach>,
    running: bool,
    _queues: PhantomData<&'q ()>,
}

/// What the sink checks, and how it polls (`ibgda_sink` in `cuda/kernels.cu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum SinkMode {
    /// Check every WQE and payload, a CQE per signaled WQE.
    Check = 0,
    /// One control segment read and at most one CQE per doorbell: what every rate row runs
    /// against (state reloaded every pass, an acquire load per poll, the doorbell's loads
    /// one after another, CQEs released at system scope).
    Retire = 1,
    /// [`SinkMode::Retire`] with its per-doorbell cost cut (doorbell polled relaxed and
    /// acquired only when it changed, one-queue state in registers, independent loads
    /// together, CQEs released at GPU scope): higher capacity, but on the H200 the
    /// producers beside it on 64 queues ran 4x slower; the same-run A/B row.
    RetireTight = 2,
    /// [`SinkMode::RetireTight`] pausing between idle polls (the idle poll rate of
    /// [`SinkMode::Retire`]).
    TightPaused = 3,
    /// [`SinkMode::RetireTight`] polling with an acquire load (an L1 invalidation on
    /// every pass, as [`SinkMode::Retire`]).
    TightAcquire = 4,
    /// [`SinkMode::RetireTight`] reading the host-mapped stop flag by time (every
    /// 100 us) instead of every 256 passes.
    TightTimedStop = 5,
}

impl SinkMode {
    /// The mode whose capacity row bounds a run in this one: the tight variants differ from
    /// [`SinkMode::RetireTight`] only when idle (or, [`SinkMode::TightAcquire`], by an
    /// invalidation per pass, which the bound leaves out).
    pub fn capacity_mode(self) -> Self {
        match self {
            Self::Check | Self::Retire => self,
            Self::RetireTight | Self::TightPaused | Self::TightAcquire | Self::TightTimedStop => {
                Self::RetireTight
            }
        }
    }
}

/// Sink mode 0: check every WQE and payload, a CQE per signaled WQE.
pub const SINK_CHECK: SinkMode = SinkMode::Check;
/// Sink mode 1: one control segment read and at most one CQE per doorbell (the rate rows').
pub const SINK_RETIRE: SinkMode = SinkMode::Retire;
/// Sink mode 2: mode 1 with its per-doorbell cost cut (see [`SinkMode::RetireTight`]).
pub const SINK_RETIRE_TIGHT: SinkMode = SinkMode::RetireTight;

/// The sink's own capacity over some queues, no producer (`ibgda_sink_capacity`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkCapacity {
    /// The mode measured.
    pub mode: SinkMode,
    /// Doorbells each queue's thread processed.
    pub doorbells: u32,
    /// WQEBBs each doorbell announced.
    pub batch: u32,
    /// ns each queue's thread took for its doorbells, per queue.
    pub ns: Vec<u64>,
    /// The sink's counts over all queues.
    pub stats: SinkStats,
}

/// Runs the sink alone over `queues` (one thread per queue, each in its own block, as the
/// rate experiment's sink is launched): each thread plays a producer's last stores of
/// `doorbells` doorbells of `batch` one-WQEBB WQEs on its queue (the batch's last control
/// segment, signaled; the record; the doorbell) and the consumer's (freeing every CQE),
/// each followed by one sink pass in `mode` ([`SINK_RETIRE`] or [`SINK_RETIRE_TIGHT`]).
///
/// The kernel writes each queue's ring, doorbell record, doorbell and CQ from slot 0 and
/// leaves its producer state as it was, so:
/// - the queues must be fresh, which is checked before anything runs: a queue whose
///   producer state shows anything reserved, published, announced, retired or consumed
///   (or a lock held) is [`GpuError::QueueNotFresh`] naming it (its WQEs would be
///   overwritten, and the CQEs written for a ring it never issued);
/// - the queues are consumed (dropped once the kernel has finished, or with the error):
///   what the kernel leaves in their rings and CQs (NOPs and CQEs their producer state
///   never counted) must never meet a later producer, which would take those CQEs as its
///   own WQEs' completions. To keep a queue that may not be fresh, read its state first
///   ([`Gpu::read_producer_state`]).
pub fn sink_capacity<S>(
    gpu: &Gpu,
    queues: Vec<QueuePair<Rc, GpuPlaced, S>>,
    mode: SinkMode,
    batch: u32,
    doorbells: u32,
) -> Result<SinkCapacity, GpuError>
where
    S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
{
    let n = sink_shape(queues.len(), u32::try_from(queues.len()).unwrap_or(0), 1)?;
    if mode == SinkMode::Check || batch == 0 || doorbells == 0 {
        return Err(GpuError::Invalid(format!(
            "sink capacity in {mode:?}, batch {batch}, {doorbells} doorbells (a retire mode, both > 0)"
        )));
    }
    let descriptors: Vec<DeviceQueueDescriptor> =
        queues.iter().map(|q| *q.device_queue().raw()).collect();
    distinct_queues(&descriptors)?;
    for q in &queues {
        let device_queue = q.device_queue();
        fresh_queue(device_queue.raw(), &gpu.read_producer_state(&device_queue)?)?;
    }
    if let Some(d) = descriptors.iter().find(|d| batch > 1u32 << d.log_sq_wqebbs) {
        return Err(GpuError::Invalid(format!(
            "a batch of {batch} WQEBBs on a ring of {}",
            1u32 << d.log_sq_wqebbs
        )));
    }
    // The run executes these queues: its claims refuse a queue another NIC executes.
    let executor = Executor::new("a sink capacity run");
    // SAFETY: for this call the kernel is these queues' NIC and producer (it writes their
    // rings, records, doorbells and CQs, nothing else) under its own executor; the
    // capabilities are held until the launch is synchronized below.
    let _reach: Vec<QueueReach> = queues
        .iter()
        .map(|q| unsafe { QueueReach::of(q, &executor) })
        .collect::<Result<_, _>>()?;
    let descs = descriptor_array(gpu, &descriptors)?;
    let state = gpu.device_buffer(32 * queues.len())?;
    let clocks = gpu.device_buffer(8 * queues.len())?;
    let stats = gpu.device_buffer(64)?;
    let args = [
        KernelArg::U64(descs.addr()),
        KernelArg::U32(n),
        KernelArg::U64(state.addr()),
        KernelArg::U32(mode as u32),
        KernelArg::U32(batch),
        KernelArg::U32(doorbells),
        KernelArg::U64(clocks.addr()),
        KernelArg::U64(stats.addr()),
    ];
    let cfg = LaunchConfig {
        grid_dim: (n, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `ibgda_sink_capacity(const DeviceQueueDescriptor*, u32, SinkQueue*, u32,
    // u32, u32, u64*, SinkStats*)`: the arguments above in that order, each a live
    // allocation of the needed size (32 bytes of state and 8 of clock per queue); the
    // descriptors come from the queue pairs this call owns; synchronized before anything
    // here (the queue pairs included) is released. The kernel ends by itself (every CQE is
    // freed before the next doorbell).
    unsafe { gpu.launch_raw(false, "ibgda_sink_capacity", cfg, false, &args) }?;
    gpu.synchronize()?;
    let c = gpu.read_device(&clocks)?;
    let ns = c
        .chunks(8)
        .map(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")))
        .collect();
    Ok(SinkCapacity {
        mode,
        doorbells,
        batch,
        ns,
        stats: sink_stats(&gpu.read_device(&stats)?),
    })
}

/// The sink's counts from its stats words (doorbells, WQEs, CQEs, bad WQEs, payloads,
/// doorbells).
fn sink_stats(s: &[u8]) -> SinkStats {
    let w = |i: usize| {
        s.get(i * 8..i * 8 + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_ne_bytes)
    };
    SinkStats {
        doorbells: w(0),
        wqes: w(1),
        cqes: w(2),
        bad_wqes: w(3),
        bad_payloads: w(4),
        bad_doorbells: w(5),
        ..Default::default()
    }
}

/// The sink's launch shape, checked before anything reaches the device.
fn sink_shape(queues: usize, blocks: u32, threads: u32) -> Result<u32, GpuError> {
    let n = u32::try_from(queues)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| GpuError::Invalid(format!("a sink over {queues} queues (1..=u32::MAX)")))?;
    if blocks == 0 || threads == 0 || threads > 1024 {
        return Err(GpuError::Invalid(format!(
            "a sink of {blocks} blocks x {threads} threads (each 1 or more, threads at most 1024)"
        )));
    }
    Ok(n)
}

/// A fresh queue's producer state: nothing reserved, published, announced, retired or
/// consumed, no lock held, no collapsed CQE seen (all zero, as the queue was made). Else
/// [`GpuError::QueueNotFresh`] naming the queue `d` describes.
fn fresh_queue(d: &DeviceQueueDescriptor, state: &DeviceProducerState) -> Result<(), GpuError> {
    if *state == DeviceProducerState::default() {
        Ok(())
    } else {
        Err(GpuError::QueueNotFresh {
            qpn: d.qpn,
            sq_ring: d.sq_ring,
            state: Box::new(*state),
        })
    }
}

/// One sink thread per queue: the same queue pair twice would have two threads execute it.
fn distinct_queues(queues: &[DeviceQueueDescriptor]) -> Result<(), GpuError> {
    let mut rings: Vec<u64> = queues.iter().map(|d| d.sq_ring).collect();
    rings.sort_unstable();
    match rings.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(GpuError::Invalid(format!(
            "the queue with its ring at {:#x} is given to the sink twice",
            w[0]
        ))),
        None => Ok(()),
    }
}

impl<'q> Sink<'q> {
    /// Starts a sink over `queues` with `blocks` × `threads` threads (thread t serves
    /// queues t, t + all threads, ...), checking payloads of up to `max_producers`.
    pub fn start<S>(
        gpu: &'q Gpu,
        queues: &[&'q QueuePair<Rc, GpuPlaced, S>],
        mode: SinkMode,
        max_producers: u32,
        blocks: u32,
        threads: u32,
    ) -> Result<Self, GpuError>
    where
        S: OrderingScope<Producer = GpuThread> + ValidFor<GpuPlaced>,
    {
        let n = sink_shape(queues.len(), blocks, threads)?;
        let descriptors: Vec<DeviceQueueDescriptor> =
            queues.iter().map(|q| *q.device_queue().raw()).collect();
        distinct_queues(&descriptors)?;
        // The sink executes these queues: its claims refuse a queue another NIC (a CUDA
        // software NIC, another sink) executes, and keep them from one while it runs.
        let executor = Executor::new("a doorbell sink");
        // SAFETY: the sink is these queues' NIC (it reads their rings and writes their
        // CQEs, nothing else) under its own executor; the guard borrows them for 'q, as
        // long as it holds the capabilities, and stops the kernel before it releases them.
        let queue_memory: Vec<QueueReach> = queues
            .iter()
            .map(|q| unsafe { QueueReach::of(*q, &executor) })
            .collect::<Result<_, _>>()?;
        let descs = descriptor_array(gpu, &descriptors)?;
        let state = gpu.device_buffer(32 * queues.len())?;
        let expect = gpu.device_buffer(4 * max_producers.max(1) as usize)?;
        let stats = gpu.device_buffer(64)?;
        let stop = gpu.mapped_host_buffer(8)?;
        let stop_dev = stop
            .device_addr()
            .ok_or_else(|| GpuError::Invalid("unmapped".into()))?;
        let args = [
            KernelArg::U64(descs.addr()),
            KernelArg::U32(n),
            KernelArg::U64(state.addr()),
            KernelArg::U32(mode as u32),
            KernelArg::U64(if max_producers > 0 { expect.addr() } else { 0 }),
            KernelArg::U32(max_producers),
            KernelArg::U64(stop_dev),
            KernelArg::U64(stats.addr()),
        ];
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `ibgda_sink(const DeviceQueueDescriptor*, u32, SinkQueue*, u32, u32*,
        // u32, const volatile u32*, SinkStats*)`: the arguments above in that order, each
        // a live allocation of the needed size (32 bytes of sink state per queue, 4 per
        // producer); the descriptors come from the queue pairs borrowed for 'q, whose
        // memory the returned guard also references; the guard's `stop` or `Drop` waits
        // for the kernel before any of it is released.
        unsafe { gpu.launch_raw(false, "ibgda_sink", cfg, true, &args) }?;
        Ok(Self {
            gpu,
            stop,
            stats,
            expect,
            _descriptors: descs,
            _state: state,
            _queue_memory: queue_memory,
            running: true,
            _queues: PhantomData,
        })
    }

    /// Stops the sink (after the producers finished), waits for it, and returns its
    /// counts and the per-producer next expected sequence numbers.
    pub fn stop(mut self) -> Result<(SinkStats, Vec<u32>), GpuError> {
        self.halt()?;
        let stats = sink_stats(&self.gpu.read_device(&self.stats)?);
        let e = self.gpu.read_device(&self.expect)?;
        let expect = e
            .chunks(4)
            .map(|c| u32::from_ne_bytes(c.try_into().expect("4 bytes")))
            .collect();
        Ok((stats, expect))
    }

    fn halt(&mut self) -> Result<(), GpuError> {
        self.stop.words()[0].store(1, Ordering::Release);
        self.running = false;
        self.gpu.synchronize()
    }
}

impl Drop for Sink<'_> {
    fn drop(&mut self) {
        if self.running {
            // Nothing the kernel touches may be released before it has stopped.
            let _ = self.halt();
        }
    }
}

/// The `fm_ce_se` flags of test request `i` (a mix of completion, fence, solicited).
pub fn request_flags(i: usize) -> ControlFlags {
    ControlFlags {
        fence: [FenceMode::None, FenceMode::Fence, FenceMode::StrongOrdering][i % 3],
        completion: [CompletionMode::Always, CompletionMode::OnError][i / 3 % 2],
        solicited: if i % 5 == 0 {
            Solicited::Yes
        } else {
            Solicited::No
        },
    }
}

/// Every shape on every transport at indices that run past a 16-WQEBB ring's end, with
/// inline payloads of many lengths.
pub fn test_requests() -> Vec<WqeRequest> {
    let mut out = Vec::new();
    let mut n = 0usize;
    for transport in [
        TransportForm::Rc,
        TransportForm::DcCompact,
        TransportForm::DcFull,
    ] {
        for shape in Shape::ALL {
            let lens: &[u32] = match shape {
                Shape::WriteInline => &[1, 4, 8, 12, 13, 28, 44, 60, 61, 100, 128],
                Shape::Write | Shape::WriteImm | Shape::Read | Shape::Dump => &[1, 8, 4096],
                _ => &[8],
            };
            for &len in lens {
                for index in [3u32, 14, 15, 0xfffe, 0x1_000f] {
                    let mut r = WqeRequest {
                        shape: shape as u32,
                        transport: transport as u32,
                        index,
                        qpn: 0x12_3456 ^ (n as u32 & 0xff),
                        fm_ce_se: u32::from(request_flags(n).byte()),
                        imm: 0xdead_0000 | n as u32,
                        rkey: 0x7700_0000 | n as u32,
                        lkey: 0x1100_0000 | n as u32,
                        raddr: 0x7f00_0000_1000 + 64 * n as u64,
                        laddr: 0x5500_0000_2000 + 8 * n as u64,
                        len,
                        stream_id: 0,
                        op0: 0x0102_0304_0506_0708 ^ n as u64,
                        op1: 0x1112_1314_1516_1718,
                        op2: 0x00ff_00ff_00ff_00ff,
                        op3: 0xffff_0000_ffff_0000,
                        ..Default::default()
                    };
                    if matches!(shape, Shape::MaskedCompareSwap4 | Shape::MaskedFetchAdd4) {
                        r.op0 &= 0xffff_ffff;
                        r.op1 &= 0xffff_ffff;
                        r.op2 &= 0xffff_ffff;
                        r.op3 &= 0xffff_ffff;
                    }
                    for (k, b) in r
                        .inline_data
                        .iter_mut()
                        .enumerate()
                        .take(REQUEST_INLINE_MAX)
                    {
                        *b = (k as u8).wrapping_mul(31).wrapping_add(n as u8);
                    }
                    match transport {
                        TransportForm::Rc => {}
                        TransportForm::DcCompact => {
                            let t = compact_target(n);
                            r.av[..16].copy_from_slice(t.segment().as_bytes());
                        }
                        TransportForm::DcFull => {
                            let t = full_target(n);
                            r.av.copy_from_slice(t.segment().as_bytes());
                        }
                    }
                    out.push(r);
                    n += 1;
                }
            }
        }
    }
    out
}

/// A compact DC target (address vector) for test or benchmark request `n`.
pub fn compact_target(n: usize) -> ibgda::wqe::DcTarget<Compact> {
    CompactAddressVector {
        dct: 0x00ab_cd00 | (n as u32 & 0xff),
        dc_key: 0x1234_5678_9abc_def0 ^ n as u64,
        lid: 0x0102 + n as u16,
        sl: (n % 16) as u8,
        static_rate: 3,
        source_path_bits: 5,
        force_loopback: n % 2 == 0,
    }
    .encode()
    .expect("valid compact AV")
}

/// A full DC target (address vector) for test or benchmark request `n`.
pub fn full_target(n: usize) -> ibgda::wqe::DcTarget<Full> {
    FullAddressVector {
        dct: 0x00ef_0100 | (n as u32 & 0xff),
        dc_key: 0x0fed_cba9_8765_4321 ^ n as u64,
        link: LinkAddress::InfiniBand {
            lid: 0x0203,
            sl: 2,
            static_rate: 1,
            source_path_bits: 0,
            force_loopback: false,
            grh: Some(Grh {
                sgid_index: 1,
                flow_label: 0x1_2345,
                traffic_class: 0x20,
                hop_limit: 64,
                dgid: [n as u8; 16],
            }),
        },
    }
    .encode()
    .expect("valid full AV")
}

/// The host encoder's bytes for request `i` of [`test_requests`]: written with the Rust
/// builders at its index into `ring` (which the caller poisoned).
pub fn host_encode(i: usize, r: &WqeRequest, ring: &mut [u8]) -> Result<u32, String> {
    let remote = RemoteAddress::new(r.raddr, RKey(r.rkey));
    match r.transport {
        x if x == TransportForm::Rc as u32 => encode_with(r, remote, ring),
        x if x == TransportForm::DcCompact as u32 => {
            encode_with(r, compact_target(i).at(remote), ring)
        }
        _ => encode_with(r, full_target(i).at(remote), ring),
    }
}

fn flags_of(r: &WqeRequest) -> ControlFlags {
    ControlFlags::from_byte(r.fm_ce_se as u8).expect("valid flags")
}

macro_rules! with_flags {
    ($b:expr, $f:expr) => {{
        let b = $b.completion($f.completion).fence($f.fence);
        if $f.solicited == Solicited::Yes {
            b.solicited()
        } else {
            b
        }
    }};
}

fn encode_with<D>(r: &WqeRequest, to: D, ring: &mut [u8]) -> Result<u32, String>
where
    D: Destination,
    D::Transport: Transport,
{
    let e = |x: ibgda::wqe::WqeError| x.to_string();
    let f = flags_of(r);
    let qpn = Qpn::new(r.qpn).map_err(e)?;
    let index = WqeIndex(r.index as u16);
    let mut ring = SendRing::new(ring, WqeLimits::default()).map_err(e)?;
    let sge = || Sge::new(r.laddr, r.len, LKey(r.lkey));
    let result = LocalBuffer::new(r.laddr, LKey(r.lkey));
    let shape = Shape::ALL[r.shape as usize];
    let written = match shape {
        Shape::Write => {
            let w = with_flags!(RdmaWrite::new(to), f)
                .sge(sge().map_err(e)?)
                .build()
                .map_err(e)?;
            ring.write(index, qpn, &w)
        }
        Shape::WriteImm => {
            let w = with_flags!(RdmaWrite::new(to), f)
                .immediate(r.imm)
                .sge(sge().map_err(e)?)
                .build()
                .map_err(e)?;
            ring.write(index, qpn, &w)
        }
        Shape::WriteInline => {
            let w = with_flags!(RdmaWrite::new(to), f)
                .inline(&r.inline_data[..r.len as usize])
                .build()
                .map_err(e)?;
            ring.write(index, qpn, &w)
        }
        Shape::Read => {
            let w = with_flags!(RdmaRead::new(to), f)
                .sge(sge().map_err(e)?)
                .build()
                .map_err(e)?;
            ring.write(index, qpn, &w)
        }
        Shape::CompareSwap => {
            let w = with_flags!(Atomic::compare_swap(to, result, r.op1, r.op0), f)
                .build()
                .map_err(e)?;
            ring.write(index, qpn, &w)
        }
        Shape::FetchAdd => {
            let w = with_flags!(Atomic::fetch_add(to, result, r.op0), f)
                .build()
                .map_err(e)?;
            ring.write(index, qpn, &w)
        }
        Shape::MaskedCompareSwap4 => {
            let w = with_flags!(
                Atomic::masked_compare_swap_32(
                    to,
                    result,
                    r.op0 as u32,
                    r.op1 as u32,
                    r.op2 as u32,
                    r.op3 as u32
                ),
                f
            )
            .build()
            .map_err(e)?;
            ring.write(index, qpn, &w)
        }
        Shape::MaskedCompareSwap8 => {
            let w = with_flags!(
                Atomic::masked_compare_swap_64(to, result, r.op0, r.op1, r.op2, r.op3),
                f
            )
            .build()
            .map_err(e)?;
            ring.write(index, qpn, &w)
        }
        Shape::MaskedFetchAdd4 => {
            let w = with_flags!(
                Atomic::masked_fetch_add_32(to, result, r.op0 as u32, r.op1 as u32),
                f
            )
            .build()
            .map_err(e)?;
            ring.write(index, qpn, &w)
        }
        Shape::MaskedFetchAdd8 => {
            let w = with_flags!(Atomic::masked_fetch_add_64(to, result, r.op0, r.op1), f)
                .build()
                .map_err(e)?;
            ring.write(index, qpn, &w)
        }
        Shape::Nop => {
            let w = with_flags!(Nop::<D::Transport>::new(), f)
                .build()
                .map_err(e)?;
            ring.write(index, qpn, &w)
        }
        Shape::Dump => {
            let w = with_flags!(Dump::<D::Transport>::new(sge().map_err(e)?), f)
                .build()
                .map_err(e)?;
            ring.write(index, qpn, &w)
        }
    };
    written.map_err(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_given_to_the_sink_once() {
        let q = |ring| DeviceQueueDescriptor {
            sq_ring: ring,
            ..Default::default()
        };
        assert_eq!(distinct_queues(&[q(0x1000), q(0x2000)]), Ok(()));
        assert!(distinct_queues(&[q(0x1000), q(0x2000), q(0x1000)]).is_err());
    }

    /// The freshness rule `sink_capacity` checks before it writes a queue's ring and CQ
    /// from slot 0 (the read itself needs a GPU: `kernels/tests/gpu.rs`
    /// `sink_capacity_refuses_a_queue_that_was_posted_to`).
    #[test]
    fn only_a_queue_nothing_touched_is_fresh() {
        let d = DeviceQueueDescriptor {
            sq_ring: 0x7000_0000,
            qpn: 0x43,
            ..Default::default()
        };
        assert_eq!(fresh_queue(&d, &DeviceProducerState::default()), Ok(()));
        let touched = [
            DeviceProducerState {
                reserved: 1,
                ..Default::default()
            },
            // Published and announced, never executed: what would be overwritten.
            DeviceProducerState {
                reserved: 4,
                ready: 4,
                posted: 4,
                ..Default::default()
            },
            // Everything retired and consumed: the CQ holds CQEs of the queue's own.
            DeviceProducerState {
                reserved: 4,
                ready: 4,
                posted: 4,
                retired: 4,
                cq_consumer: 1,
                ..Default::default()
            },
            // As recovery leaves a queue: counters at a multiple of 2^16.
            DeviceProducerState {
                reserved: 1 << 16,
                ready: 1 << 16,
                posted: 1 << 16,
                retired: 1 << 16,
                ..Default::default()
            },
            DeviceProducerState {
                cq_consumer: 3,
                ..Default::default()
            },
            DeviceProducerState {
                doorbell_lock: 1,
                ..Default::default()
            },
            DeviceProducerState {
                collapsed_seen: 9,
                ..Default::default()
            },
        ];
        for state in touched {
            let refused = fresh_queue(&d, &state);
            assert_eq!(
                refused,
                Err(GpuError::QueueNotFresh {
                    qpn: 0x43,
                    sq_ring: 0x7000_0000,
                    state: Box::new(state)
                })
            );
            let message = refused.unwrap_err().to_string();
            assert!(
                message.contains("queue pair 0x43") && message.contains("0x70000000"),
                "{message}"
            );
        }
    }

    #[test]
    fn sink_shapes_are_validated_before_launch() {
        assert_eq!(sink_shape(3, 1, 32), Ok(3));
        assert!(matches!(sink_shape(0, 1, 1), Err(GpuError::Invalid(_))));
        assert!(matches!(sink_shape(1, 0, 1), Err(GpuError::Invalid(_))));
        assert!(matches!(sink_shape(1, 1, 0), Err(GpuError::Invalid(_))));
        assert!(matches!(sink_shape(1, 1, 1025), Err(GpuError::Invalid(_))));
        assert!(matches!(
            sink_shape(u32::MAX as usize + 1, 1, 1),
            Err(GpuError::Invalid(_))
        ));
    }
}
