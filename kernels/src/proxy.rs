//! The proxy's GPU side: the generated layout header of `cuda/proxy.cuh`, descriptor
//! rings handed to GPU producers, and launchers of `cuda/proxy_kernels.cu`.
//!
//! A ring's producer end ([`ibgda::proxy::RingProducer`]) is consumed when a ring is
//! handed to the GPU ([`DeviceRing::new`]): from then on only kernels push to it, and a
//! tuned ring's one producer is the one GPU thread the launcher maps to it.

use core::fmt::Write as _;
use core::marker::PhantomData;
use core::mem::{align_of, offset_of, size_of};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::{CudaFunction, DeviceRepr, LaunchConfig, PushKernelArg};
use static_assertions::const_assert_eq;

use ibgda::memory::DeviceBuffer;
use ibgda::order::{GpuThread, OrderingScope};
use ibgda::proxy::{
    opcode, AssistedDeviceQueue, Epoch, Handoff, HandoffKind, LocalRef, RemoteRef, Request,
    RequestDescriptor, RingGeometry, RingProducer, MAX_CAS_VALUE, MAX_LENGTH, MAX_OPERAND,
    MAX_PEERS,
};
use ibgda::queue::{DeviceQueueError, DEFAULT_DEVICE_WAIT};
use ibgda::wqe::Rc;

use crate::api::DeviceStatus;
use crate::gpu::{descriptor_bytes, CompileOptions, Gpu, GpuError};
use crate::nvrtc::{compile_source_with, Compiled};

/// The proxy's device library.
pub const PROXY_CUH: &str = include_str!("../cuda/proxy.cuh");
/// The proxy's kernels.
pub const PROXY_KERNELS_CU: &str = include_str!("../cuda/proxy_kernels.cu");

/// Compiles the proxy program (`cuda/proxy_kernels.cu` on `cuda/proxy.cuh`, with the
/// generated `ibgda_proxy_layout.h`) for sm_90.
pub fn compile(options: &CompileOptions) -> Result<Compiled, GpuError> {
    let layout = layout_header();
    compile_source_with(
        "proxy_kernels.cu",
        PROXY_KERNELS_CU,
        options,
        &[("ibgda_proxy_layout.h", &layout), ("proxy.cuh", PROXY_CUH)],
        &[],
    )
}

/// The instance of the device kernel `base` for handoff `H`: the device program suffixes
/// its kernels with the protocol's tag type (`ibgda_proxy_rate_Tuned`), as the device
/// library does with scopes.
pub fn handoff_kernel<H: Handoff>(base: &str) -> String {
    format!("{base}_{:?}", H::KIND)
}

/// A descriptor ring as a kernel sees it. Plain data, passed by value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct DeviceProxyRing {
    /// Device address of slot 0.
    pub slots: u64,
    /// Device address of the control block (consumed, completed, errors words).
    pub control: u64,
    /// Device address of the producer state in device memory: the baseline's
    /// reservation counter, or the tuned producer's head and cached progress.
    pub producer: u64,
    /// log2 of the slots.
    pub log_slots: u32,
    /// The [`HandoffKind`].
    pub handoff: u32,
    /// How long, in ns of the GPU's global timer, a device wait on this ring (for room to
    /// push, for the worker's completion counter) spins before it gives up with the
    /// deadline status (`DeviceStatus::Deadline`, -0x402); counted from the wait's first
    /// failed check, and read only then ([`DeviceRing::set_device_wait`]; at least 1).
    pub wait_ns: u64,
}

const_assert_eq!(size_of::<DeviceProxyRing>(), 40);
const_assert_eq!(offset_of!(DeviceProxyRing, slots), 0);
const_assert_eq!(offset_of!(DeviceProxyRing, control), 8);
const_assert_eq!(offset_of!(DeviceProxyRing, producer), 16);
const_assert_eq!(offset_of!(DeviceProxyRing, log_slots), 24);
const_assert_eq!(offset_of!(DeviceProxyRing, handoff), 28);
const_assert_eq!(offset_of!(DeviceProxyRing, wait_ns), 32);

// SAFETY: `DeviceProxyRing` is `#[repr(C)]`, 40 bytes of `u64`/`u32` fields with no
// padding; the CUDA side takes the same layout from the generated header, whose
// `static_assert`s pin its size and offsets. Passing it by value copies plain bytes.
unsafe impl DeviceRepr for DeviceProxyRing {}

impl DeviceProxyRing {
    /// The bytes a kernel reads from an array of rings (native order, the layout the
    /// generated header pins).
    pub fn to_bytes(&self) -> [u8; size_of::<DeviceProxyRing>()] {
        let mut b = [0u8; size_of::<DeviceProxyRing>()];
        b[0..8].copy_from_slice(&self.slots.to_ne_bytes());
        b[8..16].copy_from_slice(&self.control.to_ne_bytes());
        b[16..24].copy_from_slice(&self.producer.to_ne_bytes());
        b[24..28].copy_from_slice(&self.log_slots.to_ne_bytes());
        b[28..32].copy_from_slice(&self.handoff.to_ne_bytes());
        b[32..40].copy_from_slice(&self.wait_ns.to_ne_bytes());
        b
    }
}

/// A device wait bound as a ring's descriptor carries it: 1 ns to `u64::MAX` ns, checked
/// as `QueuePair::set_device_wait` checks a queue pair's (a wait of 0 could never succeed
/// once it spins).
fn device_wait_ns(wait: Duration) -> Result<u64, GpuError> {
    u64::try_from(wait.as_nanos())
        .ok()
        .filter(|&ns| ns > 0)
        .ok_or(GpuError::Queue(DeviceQueueError::DeviceWait { wait }))
}

fn constant(out: &mut String, name: &str, value: u64) {
    if value > u64::from(u32::MAX) {
        let _ = writeln!(out, "constexpr unsigned long long {name} = {value:#x}ull;");
    } else {
        let _ = writeln!(out, "constexpr unsigned {name} = {value:#x}u;");
    }
}

fn words(r: &Request, lap: u64) -> (u64, u64) {
    let d = RequestDescriptor::encode(r, Epoch::of_lap(lap)).expect("example requests fit");
    (d.control.get(), d.operand.get())
}

/// The text of `ibgda_proxy_layout.h`: the descriptor format's constants, the ring's
/// control block, `DeviceProxyRing` with `static_assert`s, and example descriptors
/// encoded by the Rust encoder, which the device encoders are `static_assert`ed against.
pub fn layout_header() -> String {
    let mut out = String::new();
    out.push_str(
        "/* ibgda_proxy_layout.h: GENERATED by ibgda_kernels::proxy::layout_header() from\n\
         * ibgda::proxy (descriptor format, ring control block) and DeviceProxyRing. */\n\
         #pragma once\n#include \"ibgda_layout.h\"\n\nnamespace ibgda {\nnamespace layout {\n",
    );
    let g = RingGeometry::new(2).expect("two slots");
    let c = |w: usize| (w - g.consumed_word()) as u64;
    for (name, value) in [
        (
            "PROXY_DESCRIPTOR_BYTES",
            size_of::<RequestDescriptor>() as u64,
        ),
        ("PROXY_OPCODE_SHIFT", 8),
        ("PROXY_PEER_SHIFT", 12),
        ("PROXY_WINDOW_SHIFT", 16),
        ("PROXY_EXTRA_SHIFT", 24),
        ("PROXY_OFFSET_SHIFT", 32),
        ("PROXY_OPERAND_SHIFT", 8),
        ("PROXY_MAX_PEERS", MAX_PEERS as u64),
        ("PROXY_MAX_OPERAND", MAX_OPERAND),
        ("PROXY_MAX_LENGTH", u64::from(MAX_LENGTH)),
        ("PROXY_MAX_CAS_VALUE", u64::from(MAX_CAS_VALUE)),
        ("PROXY_OP_WRITE_INLINE8", u64::from(opcode::WRITE_INLINE8)),
        ("PROXY_OP_WRITE", u64::from(opcode::WRITE)),
        ("PROXY_OP_READ", u64::from(opcode::READ)),
        ("PROXY_OP_FETCH_ADD", u64::from(opcode::FETCH_ADD)),
        ("PROXY_OP_COMPARE_SWAP", u64::from(opcode::COMPARE_SWAP)),
        ("PROXY_OP_SIGNAL", u64::from(opcode::SIGNAL)),
        ("PROXY_OP_INVALID", 15),
        ("PROXY_CONSUMED_WORD", c(g.consumed_word())),
        ("PROXY_COMPLETED_WORD", c(g.completed_word())),
        ("PROXY_ERRORS_WORD", c(g.errors_word())),
        ("PROXY_HANDOFF_BASELINE", HandoffKind::Baseline as u64),
        ("PROXY_HANDOFF_TUNED", HandoffKind::Tuned as u64),
    ] {
        constant(&mut out, name, value);
    }
    let remote = |peer, window, offset| RemoteRef {
        peer,
        window,
        offset,
    };
    let examples = [
        (
            "INLINE",
            Request::WriteInline8 {
                dst: remote(3, 5, 0x1234_5678),
                value: 0x1122_3344_5566_7788,
            },
            6,
        ),
        (
            "WRITE",
            Request::Write {
                dst: remote(15, 0xfe, 8),
                src: LocalRef {
                    window: 2,
                    offset: 0xa0b0_c0d0,
                },
                len: 0x12_3456,
            },
            0,
        ),
        (
            "READ",
            Request::Read {
                src: remote(1, 2, 64),
                dst: LocalRef {
                    window: 3,
                    offset: 128,
                },
                len: 4096,
            },
            8,
        ),
        (
            "FETCH_ADD",
            Request::FetchAdd {
                dst: remote(2, 1, 16),
                add: 0xab_cdef,
            },
            199,
        ),
        (
            "SIGNAL",
            Request::Signal {
                dst: remote(0, 0, 24),
                add: 1,
            },
            254,
        ),
        (
            "CAS",
            Request::CompareSwap {
                dst: remote(4, 3, 32),
                compare: 0xabc_def1,
                swap: 0x123_4567,
            },
            1,
        ),
    ];
    out.push_str("/* Descriptors encoded by ibgda::proxy::RequestDescriptor::encode. */\n");
    for (name, request, lap) in examples {
        let (control, operand) = words(&request, lap);
        let _ = writeln!(
            out,
            "constexpr unsigned long long PROXY_EXAMPLE_{name}_CONTROL = {control:#x}ull;"
        );
        let _ = writeln!(
            out,
            "constexpr unsigned long long PROXY_EXAMPLE_{name}_OPERAND = {operand:#x}ull;"
        );
    }
    out.push_str("} /* namespace layout */\n\n");
    let _ = writeln!(
        out,
        "/* ibgda_kernels::proxy::DeviceProxyRing */\nstruct alignas({}) DeviceProxyRing {{\n    \
         unsigned long long slots;\n    unsigned long long control;\n    \
         unsigned long long producer;\n    unsigned int log_slots;\n    unsigned int handoff;\n    \
         unsigned long long wait_ns;\n}};",
        align_of::<DeviceProxyRing>()
    );
    let _ = writeln!(
        out,
        "static_assert(sizeof(DeviceProxyRing) == {}, \"DeviceProxyRing: size\");",
        size_of::<DeviceProxyRing>()
    );
    for (field, offset) in [
        ("slots", offset_of!(DeviceProxyRing, slots)),
        ("control", offset_of!(DeviceProxyRing, control)),
        ("producer", offset_of!(DeviceProxyRing, producer)),
        ("log_slots", offset_of!(DeviceProxyRing, log_slots)),
        ("handoff", offset_of!(DeviceProxyRing, handoff)),
        ("wait_ns", offset_of!(DeviceProxyRing, wait_ns)),
    ] {
        let _ = writeln!(
            out,
            "static_assert(IBGDA_OFFSETOF(DeviceProxyRing, {field}) == {offset}, \"DeviceProxyRing.{field}\");"
        );
    }
    out.push_str("} /* namespace ibgda */\n");
    out
}

/// A ring whose producer is now the GPU: the ring (kept alive) and the producer state
/// in device memory.
pub struct DeviceRing<H: Handoff> {
    producer: RingProducer<H>,
    /// The producer state in device memory (kept alive while kernels use it).
    _state: DeviceBuffer,
    raw: DeviceProxyRing,
    _handoff: PhantomData<H>,
}

impl<H: Handoff> core::fmt::Debug for DeviceRing<H> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceRing")
            .field("handoff", &H::NAME)
            .field("raw", &self.raw)
            .finish()
    }
}

impl<H: Handoff> DeviceRing<H> {
    /// Hands the ring of `producer` (in host memory mapped into the GPU) to GPU
    /// producers; the producer state goes to fresh device memory. The producer must be
    /// the ring's only one (no clone of a baseline producer alive): GPU producers reserve
    /// slots on a counter of their own, so a host producer beside them would take the
    /// same slots.
    pub fn new(gpu: &Gpu, producer: RingProducer<H>) -> Result<Self, GpuError> {
        if !producer.is_sole_producer() {
            return Err(GpuError::Invalid(
                "the ring has another producer handle: GPU producers reserve slots on a \
                 counter of their own, so the ring must be handed over by its only producer"
                    .into(),
            ));
        }
        let ring = producer.ring().clone();
        let base = ring.span().device_addr.ok_or_else(|| {
            GpuError::Invalid("the ring's memory is not mapped into the GPU".into())
        })?;
        let g = ring.geometry();
        // The GPU's producer state starts at zero: the ring must be fresh.
        if !ring.is_unused() {
            return Err(GpuError::Invalid(
                "the ring was used before it was handed to the GPU".into(),
            ));
        }
        let state = gpu.device_buffer(64)?;
        let raw = DeviceProxyRing {
            slots: base,
            control: base + 8 * g.consumed_word() as u64,
            producer: state.addr(),
            log_slots: g.slots().trailing_zeros(),
            handoff: H::KIND as u32,
            wait_ns: device_wait_ns(DEFAULT_DEVICE_WAIT)?,
        };
        Ok(Self {
            producer,
            _state: state,
            raw,
            _handoff: PhantomData,
        })
    }

    /// The descriptor kernels take.
    pub fn raw(&self) -> DeviceProxyRing {
        self.raw
    }

    /// Bounds every device wait on this ring (room to push, the worker's completion
    /// counter): a wait that has spun this long returns the deadline status
    /// (`DeviceStatus::Deadline`, -0x402; a launcher reports it as
    /// [`GpuError::Timeout`] with `still_running: false`) instead of spinning on. Counted
    /// from the wait's first failed check; a push that finds room never reads it.
    /// Kernels get it with the descriptor ([`DeviceRing::raw`]), so it holds for
    /// launches after this call. [`DEFAULT_DEVICE_WAIT`] (as for a queue pair) until set;
    /// 1 ns to `u64::MAX` ns, else [`GpuError::Queue`] with
    /// `DeviceQueueError::DeviceWait`.
    pub fn set_device_wait(&mut self, wait: Duration) -> Result<(), GpuError> {
        self.raw.wait_ns = device_wait_ns(wait)?;
        Ok(())
    }

    /// The bound on this ring's device waits ([`DeviceRing::set_device_wait`]).
    pub fn device_wait(&self) -> Duration {
        Duration::from_nanos(self.raw.wait_ns)
    }

    /// The ring (its counters).
    pub fn ring(&self) -> &Arc<ibgda::proxy::RingMemory> {
        self.producer.ring()
    }
}

/// The proxy program, loaded.
pub struct ProxyKernels {
    functions: HashMap<String, CudaFunction>,
}

impl core::fmt::Debug for ProxyKernels {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ProxyKernels")
    }
}

/// What an enqueue benchmark measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnqueueSamples {
    /// Per request: ns from push start to push end.
    pub enqueue_ns: Vec<u64>,
    /// Per request: ns from push start to the completion counter passing it.
    pub total_ns: Vec<u64>,
    /// SM cycles over the timed pushes.
    pub cycles: u64,
    /// %globaltimer ns over the timed pushes.
    pub ns: u64,
}

/// What a probe run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProbeSamples {
    /// Per probe: put + completion ns.
    pub probe_ns: Vec<u64>,
    /// Bulk requests pushed meanwhile.
    pub bulk_pushed: u64,
    /// ns the run took (first probe to last).
    pub run_ns: u64,
}

/// A kernel's status word: 0 is success; the deadline status (a device wait ran past its
/// run-time bound, `limit`, and the kernel then finished) is [`GpuError::Timeout`] with
/// `still_running: false`; any other code is reported with the [`DeviceStatus`] it names.
fn status_of(
    gpu: &Gpu,
    status: &DeviceBuffer,
    what: &str,
    limit: Duration,
) -> Result<(), GpuError> {
    let s = i32::from_le_bytes(gpu.read_device(status)?[..4].try_into().expect("4 bytes"));
    match DeviceStatus::from_code(s) {
        DeviceStatus::Ok => Ok(()),
        DeviceStatus::Deadline => Err(GpuError::Timeout {
            what: format!("a device wait on {what}"),
            limit,
            still_running: false,
        }),
        other => Err(GpuError::Driver(format!(
            "kernel reported status {s:#x} ({other})"
        ))),
    }
}

/// The longest device wait bound of `rings` (what a deadline status of a kernel on all
/// of them ran past at most).
fn longest_wait<'a>(waits: impl IntoIterator<Item = &'a DeviceProxyRing>) -> Duration {
    Duration::from_nanos(waits.into_iter().map(|d| d.wait_ns).max().unwrap_or(0))
}

fn u64s(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

fn one_thread() -> LaunchConfig {
    LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl ProxyKernels {
    /// Compiles the proxy program with `gpu`'s options and loads it.
    pub fn load(gpu: &Gpu) -> Result<Self, GpuError> {
        let compiled = compile(gpu.options())?;
        Ok(Self {
            functions: gpu.load_compiled(&compiled)?,
        })
    }

    fn function(&self, name: &str) -> Result<CudaFunction, GpuError> {
        self.functions
            .get(name)
            .cloned()
            .ok_or_else(|| GpuError::Invalid(format!("no kernel {name} in the proxy program")))
    }

    /// One thread pushes `warmup + iters` 8-byte inline writes (to window 0 of peer 0,
    /// cycling over `slots_in_window` 8-byte slots) and waits for each; returns the timed
    /// ones. A worker must serve the ring. The ring is borrowed mutably: while the kernel
    /// runs it is its one producer.
    pub fn enqueue<H: Handoff>(
        &self,
        gpu: &Gpu,
        ring: &mut DeviceRing<H>,
        warmup: u32,
        iters: u32,
        slots_in_window: u32,
    ) -> Result<EnqueueSamples, GpuError> {
        if iters == 0 || slots_in_window == 0 {
            return Err(GpuError::Invalid(
                "iters and slots_in_window must be > 0".into(),
            ));
        }
        let f = self.function(&handoff_kernel::<H>("ibgda_proxy_enqueue"))?;
        let enqueue = gpu.device_buffer(8 * iters as usize)?;
        let total = gpu.device_buffer(8 * iters as usize)?;
        let clocks = gpu.device_buffer(16)?;
        let status = gpu.device_buffer(8)?;
        let d = ring.raw();
        let window = 0u32;
        let (e, t, c, s) = (enqueue.addr(), total.addr(), clocks.addr(), status.addr());
        let mut b = gpu.stream().launch_builder(&f);
        b.arg(&d)
            .arg(&warmup)
            .arg(&iters)
            .arg(&window)
            .arg(&slots_in_window)
            .arg(&e)
            .arg(&t)
            .arg(&c)
            .arg(&s);
        // SAFETY: the arguments are exactly `ibgda_proxy_enqueue_<H>`'s parameters; the
        // output buffers hold `iters` u64s, 2 u64s and one int, and live (with the ring,
        // owned by `ring`) until the synchronize below.
        unsafe { b.launch(one_thread()) }?;
        gpu.synchronize()?;
        status_of(gpu, &status, "a proxy ring", ring.device_wait())?;
        let c = u64s(&gpu.read_device(&clocks)?);
        Ok(EnqueueSamples {
            enqueue_ns: u64s(&gpu.read_device(&enqueue)?),
            total_ns: u64s(&gpu.read_device(&total)?),
            cycles: c[0],
            ns: c[1],
        })
    }

    /// `threads` threads push `per_thread` inline writes each, thread `t` to ring
    /// `t % rings.len()`, and wait for their last; returns the ns from the first push to
    /// the last completion. Tuned rings take exactly one thread each (and are borrowed
    /// mutably, so no other launch produces to them meanwhile).
    pub fn rate<H: Handoff>(
        &self,
        gpu: &Gpu,
        rings: &mut [DeviceRing<H>],
        threads: u32,
        per_thread: u32,
        slots_in_window: u32,
    ) -> Result<u64, GpuError> {
        if rings.is_empty() || threads == 0 || slots_in_window == 0 {
            return Err(GpuError::Invalid(
                "no rings, threads or window slots".into(),
            ));
        }
        if H::KIND == HandoffKind::Tuned && threads as usize != rings.len() {
            return Err(GpuError::Invalid(format!(
                "a tuned ring has one producer: {threads} threads for {} rings",
                rings.len()
            )));
        }
        let raws: Vec<DeviceProxyRing> = rings.iter().map(DeviceRing::raw).collect();
        let descs: Vec<u8> = raws.iter().flat_map(DeviceProxyRing::to_bytes).collect();
        let descs = gpu.device_buffer_from(&descs)?;
        let mut clock_init = u64::MAX.to_le_bytes().to_vec();
        clock_init.extend_from_slice(&0u64.to_le_bytes());
        let clocks = gpu.device_buffer_from(&clock_init)?;
        let status = gpu.device_buffer(8)?;
        let f = self.function(&handoff_kernel::<H>("ibgda_proxy_rate"))?;
        let block = threads.min(128);
        let cfg = LaunchConfig {
            grid_dim: (threads.div_ceil(block), 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        if cfg.grid_dim.0 * block != threads {
            return Err(GpuError::Invalid(format!(
                "{threads} threads is not a whole number of {block}-thread blocks"
            )));
        }
        let nrings = rings.len() as u32;
        let window = 0u32;
        let (dp, c, s) = (descs.addr(), clocks.addr(), status.addr());
        let mut b = gpu.stream().launch_builder(&f);
        b.arg(&dp)
            .arg(&nrings)
            .arg(&per_thread)
            .arg(&window)
            .arg(&slots_in_window)
            .arg(&c)
            .arg(&s);
        // SAFETY: the arguments are exactly `ibgda_proxy_rate_<H>`'s parameters; `descs`
        // holds one 40-byte DeviceProxyRing per ring (layout pinned above), the rings and
        // buffers live until the synchronize below.
        unsafe { b.launch(cfg) }?;
        gpu.synchronize()?;
        status_of(gpu, &status, "a proxy ring", longest_wait(&raws))?;
        let c = u64s(&gpu.read_device(&clocks)?);
        Ok(c[1].saturating_sub(c[0]))
    }

    /// A probe pushes `iters` requests on `probe` (waiting for each) while
    /// `bulk_threads` threads push to `bulk` until it is done. The probe's ring is its
    /// own (`Some`: a private ring) or `bulk[0]` (`None`: a ring shared with bulk traffic).
    pub fn probe(
        &self,
        gpu: &Gpu,
        probe: Option<&DeviceRing<ibgda::proxy::Baseline>>,
        bulk: &[DeviceRing<ibgda::proxy::Baseline>],
        bulk_threads: u32,
        iters: u32,
        slots_in_window: u32,
    ) -> Result<ProbeSamples, GpuError> {
        if bulk.is_empty() || bulk_threads == 0 || iters == 0 || slots_in_window <= 8 {
            return Err(GpuError::Invalid(
                "probe needs bulk rings, threads, iters, >8 slots".into(),
            ));
        }
        let probe_ring = probe.unwrap_or(&bulk[0]).raw();
        let raws: Vec<DeviceProxyRing> = bulk.iter().map(DeviceRing::raw).collect();
        let descs: Vec<u8> = raws.iter().flat_map(DeviceProxyRing::to_bytes).collect();
        let descs = gpu.device_buffer_from(&descs)?;
        let samples = gpu.device_buffer(8 * iters as usize)?;
        let done = gpu.device_buffer(8)?;
        let pushed = gpu.device_buffer(8)?;
        let status = gpu.device_buffer(8)?;
        let f = self.function("ibgda_proxy_probe")?;
        let block = bulk_threads.min(128);
        let cfg = LaunchConfig {
            grid_dim: (1 + bulk_threads.div_ceil(block), 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        let nbulk = bulk.len() as u32;
        let window = 0u32;
        let (dp, sp, dn, pp, st) = (
            descs.addr(),
            samples.addr(),
            done.addr(),
            pushed.addr(),
            status.addr(),
        );
        let mut b = gpu.stream().launch_builder(&f);
        b.arg(&probe_ring)
            .arg(&dp)
            .arg(&nbulk)
            .arg(&iters)
            .arg(&window)
            .arg(&slots_in_window)
            .arg(&sp)
            .arg(&dn)
            .arg(&pp)
            .arg(&st);
        // SAFETY: the arguments are exactly `ibgda_proxy_probe`'s parameters; every
        // buffer has the size the kernel uses and lives until the synchronize below.
        unsafe { b.launch(cfg) }?;
        gpu.synchronize()?;
        status_of(
            gpu,
            &status,
            "a proxy ring",
            longest_wait(raws.iter().chain([&probe_ring])),
        )?;
        let probe_ns = u64s(&gpu.read_device(&samples)?);
        Ok(ProbeSamples {
            run_ns: probe_ns.iter().sum(),
            probe_ns,
            bulk_pushed: u64s(&gpu.read_device(&pushed)?)[0],
        })
    }

    /// Block `b` posts `rounds` rounds of `batch` inline writes to `queues[b]` (to
    /// `targets[b].0 + 8 · (i mod 64)` under rkey `targets[b].1`: remote memory, which
    /// only the remote NIC dereferences), ringing each round's CPU-assisted doorbell,
    /// and waits for its last; returns each block's ns. A forwarder must serve the
    /// queues' slots and a NIC their rings.
    ///
    /// Each block is its queue's exclusive producer. The handles are unique (each borrows
    /// its queue mutably and none is `Clone`), so the slice names every queue at most
    /// once: the same queue twice does not compile
    /// (`tests/compile_fail/assisted_post_takes_each_queue_once.rs`).
    pub fn assisted_post<S>(
        &self,
        gpu: &Gpu,
        queues: &[AssistedDeviceQueue<'_, Rc, S>],
        targets: &[(u64, u32)],
        rounds: u32,
        batch: u32,
    ) -> Result<Vec<u64>, GpuError>
    where
        S: OrderingScope<Producer = GpuThread>,
    {
        if queues.is_empty() || rounds == 0 || batch == 0 || targets.len() != queues.len() {
            return Err(GpuError::Invalid(
                "no queues, rounds or batch, or not one target per queue".into(),
            ));
        }
        let target_words: Vec<u8> = targets
            .iter()
            .flat_map(|&(addr, rkey)| {
                let mut b = addr.to_le_bytes().to_vec();
                b.extend_from_slice(&u64::from(rkey).to_le_bytes());
                b
            })
            .collect();
        let target_words = gpu.device_buffer_from(&target_words)?;
        let descs: Vec<u8> = queues
            .iter()
            .flat_map(|q| descriptor_bytes(q.raw()))
            .collect();
        let descs = gpu.device_buffer_from(&descs)?;
        let clocks = gpu.device_buffer(8 * queues.len())?;
        let status = gpu.device_buffer(8)?;
        let f = self.function(&format!("ibgda_assisted_post_{}", S::NAME))?;
        let cfg = LaunchConfig {
            grid_dim: (queues.len() as u32, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        let (dp, tp, c, s) = (
            descs.addr(),
            target_words.addr(),
            clocks.addr(),
            status.addr(),
        );
        let mut b = gpu.stream().launch_builder(&f);
        b.arg(&dp).arg(&tp).arg(&rounds).arg(&batch).arg(&c).arg(&s);
        // SAFETY: the arguments are exactly `ibgda_assisted_post_<S>`'s parameters;
        // `descs` holds one descriptor per queue, each from a live CPU-assisted queue
        // borrowed mutably by its handle in `queues` for this call (one handle per queue,
        // so one producer per ring), and the buffers live until the synchronize below.
        unsafe { b.launch(cfg) }?;
        gpu.synchronize()?;
        let longest = queues.iter().map(|q| q.raw().wait_ns).max().unwrap_or(0);
        status_of(
            gpu,
            &status,
            "a CPU-assisted queue",
            Duration::from_nanos(longest),
        )?;
        Ok(u64s(&gpu.read_device(&clocks)?))
    }
}

/// A proxy on software NICs, for the benchmark and the tests: `workers` workers, each
/// with its own fabric (and engine thread) holding its queue pair to a peer and the
/// peer's window, serving rings `w, w + T, w + 2T, ...` of `rings`.
pub mod world {
    use std::num::NonZeroU32;
    use std::sync::Arc;

    use ibgda::memory::DmaBuffer;
    use ibgda::proxy::{
        Handoff, LocalWindow, Pinning, ProxyRing, RemoteWindow, RingProducer, Windows, Worker,
        WorkerConfig, WorkerReport, WorkerRing,
    };
    use ibgda::queue::DoorbellPolicy;
    use ibgda::softnic::{Access, EngineHandle, Fabric, MemoryRegion, NodeId, QueuePairSpec};
    use ibgda::wqe::{Rc, RingSize};

    /// How to build a proxy world.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct WorldConfig {
        /// Workers (T).
        pub workers: usize,
        /// Rings (R).
        pub rings: usize,
        /// Requests chained per post (B).
        pub batch: u32,
        /// Slots per ring.
        pub slots: u64,
        /// 8-byte slots in each worker's remote window.
        pub window_slots: usize,
        /// Pin worker `w` to core `pin_from + w` (None: unpinned).
        pub pin_from: Option<usize>,
    }

    /// One worker's software NIC: its fabric, its engine, the peer's window memory.
    pub struct Nic {
        /// The fabric.
        pub fabric: Fabric,
        /// The proxy's node.
        pub proxy: NodeId,
        /// The peer's node.
        pub peer: NodeId,
        /// The peer's window (what requests write).
        pub remote: Arc<DmaBuffer>,
        /// Its registration (kept alive).
        pub region: MemoryRegion,
        _engine: EngineHandle,
    }

    /// A running proxy world.
    pub struct World<H: Handoff> {
        /// The workers (stop and join on drop, before their NICs go).
        pub workers: Vec<Worker>,
        /// Per worker.
        pub nics: Vec<Nic>,
        /// The producer ends, ring `i` served by worker `i % T`.
        pub producers: Vec<RingProducer<H>>,
    }

    const ALL: Access = Access::LOCAL_WRITE
        .union(Access::REMOTE_WRITE)
        .union(Access::REMOTE_READ)
        .union(Access::REMOTE_ATOMIC);

    impl<H: Handoff> World<H> {
        /// Builds the world; `ring_memory(bytes)` gives each ring's (zeroed) memory: plain
        /// host memory, or pinned memory mapped into a GPU.
        pub fn build(
            config: WorldConfig,
            mut ring_memory: impl FnMut(usize) -> Result<DmaBuffer, String>,
        ) -> Result<Self, String> {
            let err = |e: &dyn std::fmt::Display| e.to_string();
            if config.workers == 0 || config.rings == 0 {
                return Err("a world needs workers and rings".into());
            }
            let batch = NonZeroU32::new(config.batch).ok_or("batch of 0")?;
            let geometry = ibgda::proxy::RingGeometry::new(config.slots).map_err(|e| err(&e))?;
            let mut nics = Vec::new();
            let mut per_worker: Vec<Vec<WorkerRing>> =
                (0..config.workers).map(|_| Vec::new()).collect();
            let mut producers = Vec::new();
            for _ in 0..config.workers {
                let fabric = Fabric::new();
                let proxy = fabric.add_node(1).map_err(|e| err(&e))?;
                let peer = fabric.add_node(2).map_err(|e| err(&e))?;
                let bytes = 8 * config.window_slots.max(1);
                let remote = Arc::new(DmaBuffer::zeroed(bytes, 4096).map_err(|e| err(&e))?);
                let region = fabric
                    .register(peer, remote.clone(), 0, bytes, ALL)
                    .map_err(|e| err(&e))?;
                let engine = fabric.spawn_engine();
                nics.push(Nic {
                    fabric,
                    proxy,
                    peer,
                    remote,
                    region,
                    _engine: engine,
                });
            }
            for r in 0..config.rings {
                let buffer = ring_memory(geometry.bytes())?;
                let (producer, consumer) =
                    ProxyRing::in_buffer::<H>(buffer, config.slots).map_err(|e| err(&e))?;
                let nic = &nics[r % config.workers];
                let results = Arc::new(
                    DmaBuffer::zeroed(8 * config.slots as usize, 4096).map_err(|e| err(&e))?,
                );
                let results = nic
                    .fabric
                    .register(
                        nic.proxy,
                        results,
                        0,
                        8 * config.slots as usize,
                        Access::LOCAL_WRITE,
                    )
                    .map_err(|e| err(&e))?;
                per_worker[r % config.workers].push(WorkerRing {
                    consumer,
                    results: LocalWindow::new(results),
                });
                producers.push(producer);
            }
            let mut workers = Vec::new();
            for (w, (nic, rings)) in nics.iter().zip(per_worker).enumerate() {
                let mut spec = QueuePairSpec::new(RingSize::new(1024).map_err(|e| err(&e))?);
                spec.send.doorbell = DoorbellPolicy::Explicit;
                let qp = nic
                    .fabric
                    .create_queue_pair::<Rc>(nic.proxy, spec)
                    .map_err(|e| err(&e))?;
                let responder = nic
                    .fabric
                    .create_queue_pair::<Rc>(
                        nic.peer,
                        QueuePairSpec::new(RingSize::new(64).map_err(|e| err(&e))?),
                    )
                    .map_err(|e| err(&e))?;
                nic.fabric
                    .connect(qp.qpn(), responder.qpn())
                    .map_err(|e| err(&e))?;
                // The responder posts nothing; its queue stays in the fabric.
                std::mem::forget(responder);
                let windows = Arc::new(
                    Windows::new(vec![], vec![vec![RemoteWindow::of(&nic.region)]])
                        .map_err(|e| err(&e))?,
                );
                let worker = Worker::spawn(
                    vec![qp],
                    windows,
                    rings,
                    WorkerConfig {
                        core: config.pin_from.map(|c| c + w),
                        batch,
                        ..WorkerConfig::default()
                    },
                )
                .map_err(|e| err(&e))?;
                workers.push(worker);
            }
            Ok(Self {
                workers,
                nics,
                producers,
            })
        }

        /// Whether each worker got its core.
        pub fn pinning(&self) -> Vec<Pinning> {
            self.workers.iter().map(|w| w.pinning()).collect()
        }

        /// Stops the workers and returns their reports.
        pub fn stop(&mut self) -> Vec<WorkerReport> {
            self.workers.drain(..).map(|w| w.stop()).collect()
        }
    }
}

/// GPU-produced queue pairs with CPU-assisted doorbells, each on its own software NIC
/// (queue memory pinned on the host and mapped into the GPU, so the CPU NIC executes
/// what GPU threads build), for the benchmark and the tests.
pub mod assisted_world {
    use std::sync::Arc;

    use ibgda::cq::CqMode;
    use ibgda::memory::DmaBuffer;
    use ibgda::order::SystemReleaseStore;
    use ibgda::proxy::{AssistedGpuQueue, ForwardTarget};
    use ibgda::queue::{
        CompletionQueueMemory, DoorbellPolicy, Host, ProducerStateMemory, QpConfig, QueuePair,
        SendQueueConfig, SendQueueMemory,
    };
    use ibgda::softnic::{self, Access, DoorbellWatch, EngineHandle, Fabric, MemoryRegion};
    use ibgda::wqe::{Rc, RingSize, TransportKind, WqeLimits};

    use crate::gpu::{Gpu, GpuError};

    /// One CPU-assisted queue and its NIC.
    pub struct AssistedNic {
        /// The queue (its device descriptor for kernels).
        pub queue: AssistedGpuQueue<Rc, SystemReleaseStore>,
        /// The remote window's memory.
        pub remote: Arc<DmaBuffer>,
        /// Its registration (rkey, address).
        pub region: MemoryRegion,
        /// The fabric.
        pub fabric: Fabric,
        _engine: EngineHandle,
    }

    fn invalid(e: impl std::fmt::Display) -> GpuError {
        GpuError::Invalid(e.to_string())
    }

    /// `count` CPU-assisted queues of `wqebbs` WQEBBs, each on its own software NIC
    /// (watching doorbells only: nothing runs until a forwarder rings), with a remote
    /// window of `window_bytes`; returns them and their forwarding targets.
    pub fn build(
        gpu: &Gpu,
        count: usize,
        wqebbs: usize,
        window_bytes: usize,
    ) -> Result<(Vec<AssistedNic>, Vec<ForwardTarget>), GpuError> {
        let mut nics = Vec::new();
        let mut targets = Vec::new();
        for _ in 0..count {
            let size = RingSize::new(wqebbs).map_err(invalid)?;
            let entries = wqebbs as u32;
            let mapped = |len: usize| gpu.mapped_host_buffer(len);
            let sq = SendQueueMemory::<Host>::from_buffers(
                size,
                mapped(size.bytes())?,
                mapped(8)?,
                mapped(8)?,
            )
            .map_err(invalid)?;
            let cq = CompletionQueueMemory::<Host>::from_buffers(
                entries,
                mapped(entries as usize * 64)?,
                mapped(8)?,
            )
            .map_err(invalid)?;
            let fabric = Fabric::new();
            let proxy = fabric.add_node(1).map_err(invalid)?;
            let peer = fabric.add_node(2).map_err(invalid)?;
            let mut config = softnic::QpConfig::new(TransportKind::Rc, &sq, &cq);
            config.doorbell_watch = DoorbellWatch::DoorbellOnly;
            let qpn = fabric.create_qp(proxy, config).map_err(invalid)?;
            let responder = fabric
                .create_queue_pair::<Rc>(
                    peer,
                    softnic::QueuePairSpec::new(RingSize::new(64).map_err(invalid)?),
                )
                .map_err(invalid)?;
            fabric.connect(qpn, responder.qpn()).map_err(invalid)?;
            std::mem::forget(responder);
            let remote = Arc::new(DmaBuffer::zeroed(window_bytes, 4096).map_err(invalid)?);
            let region = fabric
                .register(
                    peer,
                    remote.clone(),
                    0,
                    window_bytes,
                    Access::REMOTE_WRITE | Access::LOCAL_WRITE,
                )
                .map_err(invalid)?;
            let state = ProducerStateMemory::<Host>::from_buffer(mapped(64)?).map_err(invalid)?;
            let pair = QueuePair::for_device(
                qpn,
                sq,
                cq,
                state,
                QpConfig {
                    send: SendQueueConfig {
                        limits: WqeLimits::default(),
                        max_unsignaled_wqebbs: Some((wqebbs / 4).max(1) as u32),
                        doorbell: DoorbellPolicy::Explicit,
                    },
                    cq_mode: CqMode::Ring,
                },
                SystemReleaseStore,
            )?;
            let (queue, target) =
                AssistedGpuQueue::new(pair, gpu.mapped_host_buffer(64)?).map_err(invalid)?;
            let engine = fabric.spawn_engine();
            targets.push(target);
            nics.push(AssistedNic {
                queue,
                remote,
                region,
                fabric,
                _engine: engine,
            });
        }
        Ok((nics, targets))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rings_device_wait_is_one_ns_to_the_largest_u64_as_a_queue_pairs() {
        assert_eq!(device_wait_ns(Duration::from_nanos(1)).ok(), Some(1));
        assert_eq!(
            device_wait_ns(Duration::from_nanos(u64::MAX)).ok(),
            Some(u64::MAX)
        );
        assert_eq!(
            device_wait_ns(DEFAULT_DEVICE_WAIT).ok(),
            Some(60_000_000_000)
        );
        for wait in [Duration::ZERO, Duration::MAX] {
            match device_wait_ns(wait) {
                Err(GpuError::Queue(DeviceQueueError::DeviceWait { wait: w })) => {
                    assert_eq!(w, wait)
                }
                other => panic!("{wait:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_ring_descriptor_is_the_bytes_the_header_pins() {
        let d = DeviceProxyRing {
            slots: 0x1111_2222_3333_4444,
            control: 0x5555_6666_7777_8888,
            producer: 0x9999_aaaa_bbbb_cccc,
            log_slots: 6,
            handoff: HandoffKind::Tuned as u32,
            wait_ns: 200_000_000,
        };
        let b = d.to_bytes();
        let word = |at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let half = |at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        assert_eq!(word(offset_of!(DeviceProxyRing, slots)), d.slots);
        assert_eq!(word(offset_of!(DeviceProxyRing, control)), d.control);
        assert_eq!(word(offset_of!(DeviceProxyRing, producer)), d.producer);
        assert_eq!(half(offset_of!(DeviceProxyRing, log_slots)), d.log_slots);
        assert_eq!(half(offset_of!(DeviceProxyRing, handoff)), d.handoff);
        assert_eq!(word(offset_of!(DeviceProxyRing, wait_ns)), d.wait_ns);
        let h = layout_header();
        assert!(h.contains("unsigned long long wait_ns;"));
        assert!(h.contains("static_assert(sizeof(DeviceProxyRing) == 40"));
        assert!(h.contains("static_assert(IBGDA_OFFSETOF(DeviceProxyRing, wait_ns) == 32"));
    }
}
