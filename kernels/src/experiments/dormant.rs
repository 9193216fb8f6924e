//! What the enclosing kernel pays (section 4.3.2, Figure 9). Two callers of the same
//! launch shape (the paper's 528 blocks of 256 threads, four per SM on 132 SMs) and the
//! same useful work: a compute caller (8 live floats, FMAs) and a streaming caller (16
//! live floats, each block reading its own 256 KiB part of a buffer round and round, 132
//! MiB in all), each compiled three ways
//! (`cuda/bench_dormant.cu`): without any communication code, with the device library's
//! send inlined, and with the send behind a call. Each block sends 0, 1, 4 or 16 8-byte
//! inline WRITEs on its own queue from thread 0 between segments of its work, with or
//! without waiting for each completion; the other warps compute throughout. The send is
//! the device library's warp-entered occasional send (`warp_send_write_inline8`: every
//! branch on a warp vote, the queue's counters in memory, the CQ poll out of line), which
//! ptxas (NVRTC 13.0, sm_90) compiles into the compute caller at 29 -> 32 registers and
//! into the streaming caller at 43 -> 45 (behind a call 40 and 54; `Exclusive<S>` inlined
//! into the earlier callers: 30 -> 56, 44 -> 64).
//! The streaming caller also runs plain, inlined and behind a call at eight blocks per SM
//! ([`WIDE_BLOCKS_PER_SM`], 0 messages), the launch where the paper's mini-gda loses 27 %.
//!
//! [`registers`] needs only NVRTC (CI runs it): ptxas's registers, stack and spills of
//! every variant, and the blocks per SM they allow at 256 threads. [`run`] needs the GPU.

use cudarc::driver::sys::CUdevice_attribute;
use serde::Serialize;

use ibgda::cq::CqMode;
use ibgda::order::GpuFence;

use super::{
    bench_options, launch, launch_config, sm_mhz, wait_stream, word32, word64, Summary,
    HOST_WAIT_LIMIT,
};
use crate::gpu::{CompileOptions, Gpu, GpuError, KernelArg};
use crate::harness::{descriptor_array, gpu_queue_pair, Sink, SINK_RETIRE_TIGHT};
use crate::nvrtc::{compile_source_with, resource_usage, Compiled, Program, ResourceUsage};

/// The paper's launch shape: blocks.
pub const BLOCKS: u32 = 528;
/// The paper's launch shape: threads per block.
pub const THREADS: u32 = 256;
/// Messages per block of the paper's figure.
pub const MESSAGES: [u32; 4] = [0, 1, 4, 16];
/// Blocks per SM of the streaming caller's wide launch (the paper's "eight blocks per SM").
pub const WIDE_BLOCKS_PER_SM: u32 = 8;
/// The streaming caller's part of the buffer per block, in float4 (256 KiB; a power of two).
pub const STREAM_PART: u32 = 1 << 14;
/// The compute caller's coefficients (`v = v * a + b`), given at launch.
pub const FMA_A: f32 = 0.99991;
/// See [`FMA_A`].
pub const FMA_B: f32 = 0.00013;

/// How the communication code is compiled into the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Build {
    /// No communication code (the baseline).
    Plain,
    /// The send inlined into the caller.
    Inlined,
    /// The send behind a call (`__noinline__`).
    Call,
}

impl Build {
    /// Every build.
    pub const ALL: [Self; 3] = [Self::Plain, Self::Inlined, Self::Call];

    /// The compile option that selects it.
    pub fn option(self) -> &'static str {
        match self {
            Self::Plain => "-DIBGDA_DORMANT_COMM=0",
            Self::Inlined => "-DIBGDA_DORMANT_COMM=1",
            Self::Call => "-DIBGDA_DORMANT_COMM=2",
        }
    }
}

/// The two callers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Caller {
    /// `ibgda_dormant_fma`.
    Compute,
    /// `ibgda_dormant_stream`.
    Streaming,
}

impl Caller {
    /// Both.
    pub const ALL: [Self; 2] = [Self::Compute, Self::Streaming];

    /// The kernel's name.
    pub fn kernel(self) -> &'static str {
        match self {
            Self::Compute => "ibgda_dormant_fma",
            Self::Streaming => "ibgda_dormant_stream",
        }
    }
}

/// ptxas's report of one caller in one build.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DormantRegisters {
    /// The caller.
    pub caller: Caller,
    /// The build.
    pub build: Build,
    /// Registers per thread.
    pub registers: u32,
    /// Stack frame bytes.
    pub stack_bytes: u32,
    /// Spill stores bytes.
    pub spill_stores: u32,
    /// Spill loads bytes.
    pub spill_loads: u32,
    /// Blocks of [`THREADS`] threads one SM holds by registers (sm_90: 64 K registers,
    /// allocated per warp in units of 256, at most 2048 threads and 32 blocks per SM).
    pub blocks_per_sm: u32,
}

/// Blocks of `threads` threads an sm_90 SM holds with `registers` registers per thread.
pub fn blocks_per_sm(registers: u32, threads: u32) -> u32 {
    if threads == 0 || threads > 1024 {
        return 0;
    }
    let warps = threads.div_ceil(32);
    // Registers are allocated per warp, in units of 256 (8 per thread).
    let per_warp = (registers.max(1) * 32).div_ceil(256) * 256;
    let by_registers = 65_536 / (per_warp * warps);
    let by_threads = 2048 / (warps * 32);
    by_registers.min(by_threads).min(32)
}

fn report(log: &str, caller: Caller, build: Build) -> Result<DormantRegisters, GpuError> {
    let u: ResourceUsage = resource_usage(log)
        .into_iter()
        .find(|u| u.kernel == caller.kernel())
        .ok_or_else(|| {
            GpuError::Invalid(format!(
                "no ptxas report for {} ({build:?}) in the log:\n{log}",
                caller.kernel()
            ))
        })?;
    Ok(DormantRegisters {
        caller,
        build,
        registers: u.registers,
        stack_bytes: u.stack_bytes,
        spill_stores: u.spill_stores,
        spill_loads: u.spill_loads,
        blocks_per_sm: blocks_per_sm(u.registers, THREADS),
    })
}

impl Caller {
    /// The define that caps this caller's kernel at `registers` in the call build
    /// (`__maxnreg__`, bench_dormant.cu).
    fn call_cap(self, registers: u32) -> String {
        match self {
            Self::Compute => format!("-DIBGDA_DORMANT_FMA_MAXNREG={registers}"),
            Self::Streaming => format!("-DIBGDA_DORMANT_STREAM_MAXNREG={registers}"),
        }
    }
}

fn compile_with(
    build: Build,
    options: &CompileOptions,
    caps: &[String],
) -> Result<Compiled, GpuError> {
    let p = Program::BenchDormant;
    let mut extra: Vec<&str> = vec![build.option()];
    extra.extend(caps.iter().map(String::as_str));
    compile_source_with(p.name(), p.source(), options, &[], &extra)
}

/// Compiles the call build with each caller's kernel capped at the inlined build's
/// registers (launch bounds, `__maxnreg__`) where ptxas fits it there with no stack and no
/// spills, and uncapped where it does not. A callee behind a call gets only registers that
/// nothing live across the call holds, so uncapped it takes more than inlined (NVRTC 13.0,
/// sm_90: compute 40 against 32, streaming 54 against 45); capped, both fit with no stack.
fn compile_call(options: &CompileOptions, inlined: &Compiled) -> Result<Compiled, GpuError> {
    let mut caps = Vec::new();
    for caller in Caller::ALL {
        caps.push((
            caller,
            report(&inlined.log, caller, Build::Inlined)?.registers,
        ));
    }
    let all: Vec<String> = caps.iter().map(|&(c, r)| c.call_cap(r)).collect();
    let capped = compile_with(Build::Call, options, &all)?;
    let mut fitting = Vec::new();
    for &(caller, registers) in &caps {
        let r = report(&capped.log, caller, Build::Call)?;
        if (r.stack_bytes, r.spill_stores, r.spill_loads) == (0, 0, 0) {
            fitting.push(caller.call_cap(registers));
        }
    }
    if fitting.len() == all.len() {
        Ok(capped)
    } else {
        compile_with(Build::Call, options, &fitting)
    }
}

/// Compiles the three builds with `options`, one per [`Build::ALL`] in its order; the call
/// build capped at the inlined build's registers where that costs no stack or spill
/// (`compile_call`).
pub fn compile_builds(options: &CompileOptions) -> Result<Vec<Compiled>, GpuError> {
    let plain = compile_with(Build::Plain, options, &[])?;
    let inlined = compile_with(Build::Inlined, options, &[])?;
    let call = compile_call(options, &inlined)?;
    Ok(vec![plain, inlined, call])
}

/// Compiles the three builds (NVRTC only, no GPU) and returns both callers' reports.
pub fn registers() -> Result<Vec<DormantRegisters>, GpuError> {
    registers_with(&CompileOptions::new())
}

/// As [`registers`], compiled with `options` (the run's: [`bench_options`]).
pub fn registers_with(options: &CompileOptions) -> Result<Vec<DormantRegisters>, GpuError> {
    let mut out = Vec::new();
    for (build, c) in Build::ALL.into_iter().zip(compile_builds(options)?) {
        for caller in Caller::ALL {
            out.push(report(&c.log, caller, build)?);
        }
    }
    Ok(out)
}

/// Loop iterations of each caller (about 2 ms each on an H200 at 1,980 MHz).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Work {
    /// Compute caller: iterations of 8 FMAs.
    pub fma_iters: u32,
    /// Streaming caller: iterations of 4 float4 reads per thread.
    pub stream_iters: u32,
    /// Repetitions of every point (interleaved).
    pub repetitions: u32,
}

impl Work {
    /// Refuses zero sizes, and iteration counts whose segment bounds would overflow the
    /// callers' 32-bit arithmetic (`iters * (messages + 1)` must stay below 2^32).
    pub fn check(&self) -> Result<(), GpuError> {
        let segments = u64::from(MESSAGES.iter().copied().max().unwrap_or(0)) + 1;
        for (what, iters) in [
            ("fma_iters", self.fma_iters),
            ("stream_iters", self.stream_iters),
        ] {
            if iters == 0 || u64::from(iters) * segments > u64::from(u32::MAX) {
                return Err(GpuError::Invalid(format!(
                    "dormant: {what} = {iters} (1..={} with {segments} segments)",
                    u64::from(u32::MAX) / segments
                )));
            }
        }
        if self.repetitions == 0 {
            return Err(GpuError::Invalid("dormant: 0 repetitions".into()));
        }
        Ok(())
    }
}

impl Default for Work {
    fn default() -> Self {
        Self {
            fma_iters: 65_536,
            stream_iters: 1_200,
            repetitions: 9,
        }
    }
}

/// One point: a caller, a build, messages per block, waiting or not, blocks launched.
#[derive(Clone, Debug, Serialize)]
pub struct DormantPoint {
    /// The caller.
    pub caller: Caller,
    /// The build.
    pub build: Build,
    /// Blocks launched ([`BLOCKS`], or [`WIDE_BLOCKS_PER_SM`] per SM of the GPU).
    pub blocks: u32,
    /// ptxas's registers per thread of the build that ran (compiled with the run's options).
    pub registers: u32,
    /// Messages per block.
    pub messages: u32,
    /// Whether thread 0 waits for each completion.
    pub wait: bool,
    /// First block start to last block end per repetition, ns.
    pub ns: Vec<u64>,
    /// SM clock of block 0's thread 0, MHz, per repetition.
    pub sm_mhz: Vec<f64>,
    /// Loss of useful-work throughput against the plain build of the same caller and
    /// launch (both at their median repetition): 1 - plain / this. The median, not the
    /// fastest: the streaming caller's repetitions spread by several percent both ways
    /// (the 2026-12-03 run: 1,654 to 1,972 us for one point), and a fastest-of-three
    /// took one lucky run as the point.
    pub loss: f64,
}

/// One point of a run: caller, build, messages per block, waiting, wide launch.
pub type PointSpec = (Caller, Build, u32, bool, bool);

/// The points of one run, in order: per caller, the plain build, then for each build with
/// code: 0 messages (dormant), then each count sending, then each count sending and
/// waiting; then the streaming caller's wide launch (plain, inlined, call; 0 messages).
pub fn points() -> Vec<PointSpec> {
    let mut v = Vec::new();
    for caller in Caller::ALL {
        v.push((caller, Build::Plain, 0, false, false));
        for build in [Build::Inlined, Build::Call] {
            v.push((caller, build, 0, false, false));
            for wait in [false, true] {
                for m in MESSAGES.into_iter().filter(|&m| m > 0) {
                    v.push((caller, build, m, wait, false));
                }
            }
        }
    }
    for build in Build::ALL {
        v.push((Caller::Streaming, build, 0, false, true));
    }
    v
}

/// Runs every point of [`points`] `work.repetitions` times (interleaved), with one sink
/// serving the 528 queues for the whole run (so every point, the plain ones too, shares
/// the GPU with the same sink).
pub fn run(gpu: &Gpu, work: Work) -> Result<Vec<DormantPoint>, GpuError> {
    work.check()?;
    let options = bench_options()?;
    let compiled = compile_builds(&options)?;
    let modules = compiled
        .iter()
        .map(|c| gpu.load_compiled(c))
        .collect::<Result<Vec<_>, GpuError>>()?;
    let sms = gpu
        .context()
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| GpuError::Invalid(format!("dormant: multiprocessor count: {e:?}")))?;
    let wide_blocks = WIDE_BLOCKS_PER_SM * u32::try_from(sms).unwrap_or(0).max(1);
    // One queue per block of the widest launch (its points send nothing, but a block's
    // queue must exist for any launch).
    let max_blocks = BLOCKS.max(wide_blocks);
    // SAFETY: benchmark queues on throw-away device memory: the dormant kernels post at
    // most a few messages to a sink that counts any stale WQE as a finding.
    let scope = unsafe { GpuFence::new() };
    let qps = (0..max_blocks)
        .map(|i| gpu_queue_pair(gpu, 0x1000 + i, 64, 64, 32, CqMode::Ring, scope))
        .collect::<Result<Vec<_>, _>>()?;
    let descs: Vec<_> = qps.iter().map(|q| *q.device_queue().raw()).collect();
    let arr = descriptor_array(gpu, &descs)?;
    // One part of STREAM_PART float4 per block of the widest launch: 528 blocks stream
    // 132 MiB, beyond the H200's L2, before any block wraps within its own part.
    let input = gpu.device_buffer(16 * STREAM_PART as usize * max_blocks as usize)?;
    let output = gpu.device_buffer(4 * (max_blocks * THREADS) as usize)?;
    let pts = points();
    let runs = pts.len() * work.repetitions as usize;
    // Per run: first start, last end, cycles, ns (4 words), status (8 bytes).
    const SLOT: usize = 40;
    let mut init = vec![0u8; SLOT * runs];
    for r in 0..runs {
        init[SLOT * r..SLOT * r + 8].copy_from_slice(&u64::MAX.to_ne_bytes());
    }
    let clocks = gpu.device_buffer_from(&init)?;
    let functions = Build::ALL
        .iter()
        .zip(&modules)
        .map(|(b, m)| {
            let get = |c: Caller| {
                m.get(c.kernel()).cloned().ok_or_else(|| {
                    GpuError::Invalid(format!("no kernel {} in the {b:?} build", c.kernel()))
                })
            };
            Ok((get(Caller::Compute)?, get(Caller::Streaming)?))
        })
        .collect::<Result<Vec<_>, GpuError>>()?;
    // The sink watches the queues of the launches that send (the paper's 528 blocks):
    // the wide launch's points send nothing, and a shorter pass answers each waiting
    // send sooner.
    let refs: Vec<_> = qps.iter().take(BLOCKS as usize).collect();
    // The tight sink (as in the 2026-12-01 runs): no L1 invalidation on idle passes of
    // the four SMs it shares with the callers.
    let sink = Sink::start(gpu, &refs, SINK_RETIRE_TIGHT, 0, 4, 128)?;
    let mut outcome = Ok(());
    'reps: for rep in 0..work.repetitions as usize {
        for (i, &(caller, build, messages, wait, wide)) in pts.iter().enumerate() {
            let blocks = if wide { wide_blocks } else { BLOCKS };
            let slot = clocks.addr() + (SLOT * (rep * pts.len() + i)) as u64;
            let (fma, stream) = &functions[build_index(build)];
            let common = [
                KernelArg::U32(messages),
                KernelArg::U32(u32::from(wait)),
                KernelArg::U64(arr.addr()),
                KernelArg::U64(slot),
                KernelArg::U64(slot + 32),
            ];
            let launched = match caller {
                Caller::Compute => {
                    let mut args = vec![
                        KernelArg::U64(output.addr()),
                        // A float parameter is its four bytes.
                        KernelArg::U32(FMA_A.to_bits()),
                        KernelArg::U32(FMA_B.to_bits()),
                        KernelArg::U32(work.fma_iters),
                    ];
                    args.extend_from_slice(&common);
                    // SAFETY: ibgda_dormant_fma(float* out, float a, float b, u32 iters, u32
                    // msgs, u32 wait, const DeviceQueueDescriptor* qs, u64* clocks, int*
                    // status): `output`
                    // holds one float per thread of the launch, `arr` one descriptor per
                    // block (queue pairs alive to the end of this function), the clock
                    // words and status lie in this run's slot of `clocks`; the sink's stop
                    // synchronizes the context before anything is dropped.
                    unsafe { launch(gpu, fma, launch_config(blocks, THREADS), &args) }
                }
                Caller::Streaming => {
                    let mut args = vec![
                        KernelArg::U64(input.addr()),
                        KernelArg::U32(STREAM_PART - 1),
                        KernelArg::U64(output.addr()),
                        KernelArg::U32(work.stream_iters),
                    ];
                    args.extend_from_slice(&common);
                    // SAFETY: ibgda_dormant_stream(const float4* in, u32 mask, float* out,
                    // u32 iters, u32 msgs, u32 wait, const DeviceQueueDescriptor* qs, u64*
                    // clocks, int* status): `input` holds STREAM_PART float4 for each block
                    // of the widest launch (block b reads only its part, every index masked
                    // with STREAM_PART - 1), the rest as for the compute caller.
                    unsafe { launch(gpu, stream, launch_config(blocks, THREADS), &args) }
                }
            };
            let what = format!(
                "dormant {caller:?} {build:?} {messages} messages wait {wait} {blocks} blocks"
            );
            if let Err(e) = launched.and_then(|()| wait_stream(gpu, &what, HOST_WAIT_LIMIT)) {
                outcome = Err(e);
                break 'reps;
            }
        }
    }
    if let Err(e) = &outcome {
        if super::gpu_hung(e) {
            // The kernel may still run: leave everything it uses allocated.
            std::mem::forget(sink);
            std::mem::forget((qps, arr, input, output, clocks, modules));
            return Err(e.clone());
        }
    }
    let (stats, _) = sink.stop()?;
    outcome?;
    if stats.bad_wqes + stats.bad_doorbells != 0 {
        return Err(GpuError::Invalid(format!("dormant: sink {stats:?}")));
    }
    let o = gpu.read_device(&clocks)?;
    let mut result = Vec::new();
    for (i, &(caller, build, messages, wait, wide)) in pts.iter().enumerate() {
        let blocks = if wide { wide_blocks } else { BLOCKS };
        let mut ns = Vec::new();
        let mut mhz = Vec::new();
        for rep in 0..work.repetitions as usize {
            let at = SLOT * (rep * pts.len() + i);
            let status = word32(&o, at + 32)?;
            if status != 0 {
                return Err(GpuError::Invalid(format!(
                    "dormant {caller:?} {build:?} {messages} messages wait {wait} {blocks} blocks: status {status}"
                )));
            }
            ns.push(word64(&o, at + 8)?.saturating_sub(word64(&o, at)?));
            mhz.push(sm_mhz(word64(&o, at + 16)?, word64(&o, at + 24)?));
        }
        result.push(DormantPoint {
            caller,
            build,
            blocks,
            registers: report(&compiled[build_index(build)].log, caller, build)?.registers,
            messages,
            wait,
            ns,
            sm_mhz: mhz,
            loss: 0.0,
        });
    }
    set_losses(&mut result);
    Ok(result)
}

fn build_index(build: Build) -> usize {
    Build::ALL
        .iter()
        .position(|&b| b == build)
        .expect("every build is in Build::ALL")
}

/// Each point's loss against the plain build of its caller at the same launch, both at
/// their median repetition.
fn set_losses(points: &mut [DormantPoint]) {
    let typical = |p: &DormantPoint| Summary::of(&p.ns).p50;
    let plains: Vec<(Caller, u32, u64)> = points
        .iter()
        .filter(|p| p.build == Build::Plain)
        .map(|p| (p.caller, p.blocks, typical(p)))
        .collect();
    for p in points.iter_mut() {
        let plain = plains
            .iter()
            .find(|(c, b, _)| *c == p.caller && *b == p.blocks)
            .map_or(0, |&(.., t)| t);
        let t = typical(p);
        p.loss = if t == 0 || plain == 0 {
            0.0
        } else {
            1.0 - plain as f64 / t as f64
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_points_cover_the_figure() {
        let p = points();
        // Per caller: plain, then per build with code: dormant, 3 counts sending, 3 waiting;
        // then the streaming caller's wide launch in the three builds.
        assert_eq!(p.len(), 2 * (1 + 2 * (1 + 3 + 3)) + 3);
        for caller in Caller::ALL {
            let mine: Vec<_> = p.iter().filter(|x| x.0 == caller && !x.4).collect();
            assert_eq!(*mine[0], (caller, Build::Plain, 0, false, false));
            assert_eq!(mine.iter().filter(|x| x.1 == Build::Plain).count(), 1);
            for build in [Build::Inlined, Build::Call] {
                for m in MESSAGES {
                    for wait in [false, true] {
                        let n = mine
                            .iter()
                            .filter(|x| **x == &(caller, build, m, wait, false))
                            .count();
                        assert_eq!(
                            n,
                            usize::from(m > 0 || !wait),
                            "{caller:?} {build:?} {m} {wait}"
                        );
                    }
                }
            }
        }
        let wide: Vec<_> = p.iter().filter(|x| x.4).collect();
        assert_eq!(
            wide.iter().map(|x| (x.0, x.1, x.2)).collect::<Vec<_>>(),
            Build::ALL.map(|b| (Caller::Streaming, b, 0))
        );
    }

    #[test]
    fn losses_compare_with_the_plain_build_of_the_same_launch() {
        let point = |build, blocks, ns: u64| DormantPoint {
            caller: Caller::Streaming,
            build,
            blocks,
            registers: 0,
            messages: 0,
            wait: false,
            ns: vec![ns + 40, ns, ns + 10],
            sm_mhz: vec![],
            loss: f64::NAN,
        };
        let mut p = vec![
            point(Build::Plain, 528, 100),
            point(Build::Inlined, 528, 125),
            point(Build::Plain, 1056, 200),
            point(Build::Call, 1056, 250),
        ];
        set_losses(&mut p);
        // Medians: plain 110, inlined 135 (1 - 110/135); plain 210, call 260.
        for (x, want) in p
            .iter()
            .zip([0.0, 1.0 - 110.0 / 135.0, 0.0, 1.0 - 210.0 / 260.0])
        {
            assert!(
                (x.loss - want).abs() < 1e-12,
                "{} blocks {:?}: {}",
                x.blocks,
                x.build,
                x.loss
            );
        }
    }

    #[test]
    fn work_that_would_overflow_the_segment_bounds_is_refused() {
        assert!(Work::default().check().is_ok());
        let big = Work {
            fma_iters: u32::MAX / 16,
            ..Work::default()
        };
        let e = big.check().unwrap_err().to_string();
        assert!(e.contains("fma_iters = 268435455"), "{e}");
        assert!(Work {
            repetitions: 0,
            ..Work::default()
        }
        .check()
        .is_err());
    }

    #[test]
    fn residency_follows_the_register_file() {
        // 32 registers x 256 threads: 8 blocks fill the 2048 threads of an SM.
        assert_eq!(blocks_per_sm(32, 256), 8);
        // 33 registers round up to 40: 65536 / (40 * 256) = 6.4 -> 6.
        assert_eq!(blocks_per_sm(33, 256), 6);
        assert_eq!(blocks_per_sm(64, 256), 4);
        assert_eq!(blocks_per_sm(65, 256), 3);
        assert_eq!(blocks_per_sm(128, 256), 2);
        assert_eq!(blocks_per_sm(16, 32), 32);
        assert_eq!(blocks_per_sm(16, 0), 0);
    }
}
