//! The benchmark programs compile to sm_90 cubins through NVRTC, and the dormant-cost
//! callers' registers from ptxas (paper section 4.3.2, Table 14) hold what the benchmark
//! claims for them, with the default options and with the run's (every wait bounded):
//! - the plain callers and both builds with the send neither spill nor use a stack frame;
//! - the send inlined (compiled in, dormant) adds at most [`MAX_EXTRA_REGISTERS`]
//!   registers to either caller and leaves its blocks per SM at 256 threads unchanged
//!   (measured with NVRTC 13.0: compute 29 -> 32, 8 blocks per SM; streaming 43 -> 45, 5):
//!   the device library's warp-entered occasional send branches only on warp votes, keeps
//!   the queue's counters in memory and its CQ poll out of line;
//! - behind a call the send costs no more than inlined: registers at most the inlined
//!   build's, the same blocks per SM (NVRTC 13.0: compute 32, streaming 45). Uncapped, the
//!   callee gets only registers that nothing live across the call holds (compute 40,
//!   streaming 54); the call build is compiled with each caller capped at the inlined
//!   build's count (`__maxnreg__`, `experiments::dormant::compile_call`), and the cap
//!   must cost no stack and no spill (checked above for every build).
//!
//! The paper's mini-gda went from 29 to 32 registers.
//!
//! Without NVRTC these tests are ignored; with `IBGDA_REQUIRE_NVRTC=1` the build fails.

use ibgda_kernels::experiments::bench_options;
use ibgda_kernels::experiments::dormant::{registers_with, Build, Caller, DormantRegisters};
use ibgda_kernels::gpu::CompileOptions;
use ibgda_kernels::nvrtc::{compile, resource_usage, Program};

/// The most registers the inlined, dormant send may add to a caller.
const MAX_EXTRA_REGISTERS: u32 = 4;

fn find(all: &[DormantRegisters], caller: Caller, build: Build) -> &DormantRegisters {
    all.iter()
        .find(|r| r.caller == caller && r.build == build)
        .unwrap_or_else(|| panic!("no report for {caller:?} {build:?}"))
}

#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn dormant_communication_code_keeps_the_callers_registers_and_residency() {
    let run_options = bench_options().unwrap_or_else(|e| panic!("{e}"));
    for (what, options) in [
        ("default options", CompileOptions::new()),
        ("the run's options", run_options),
    ] {
        let all = registers_with(&options).unwrap_or_else(|e| panic!("{e}"));
        check_registers(what, &all);
    }
}

fn check_registers(what: &str, all: &[DormantRegisters]) {
    println!("{what}:");
    println!(
        "{:<10} {:<8} {:>5} {:>6} {:>9} {:>9} {:>13}",
        "caller", "build", "regs", "stack", "spill-st", "spill-ld", "blocks/SM@256"
    );
    for r in all {
        println!(
            "{:<10} {:<8} {:>5} {:>6} {:>9} {:>9} {:>13}",
            format!("{:?}", r.caller),
            format!("{:?}", r.build),
            r.registers,
            r.stack_bytes,
            r.spill_stores,
            r.spill_loads,
            r.blocks_per_sm
        );
    }
    for caller in Caller::ALL {
        let plain = find(all, caller, Build::Plain);
        let inlined = find(all, caller, Build::Inlined);
        let call = find(all, caller, Build::Call);
        for r in [plain, inlined, call] {
            assert_eq!(
                (r.stack_bytes, r.spill_stores, r.spill_loads),
                (0, 0, 0),
                "{what}: {caller:?} {:?}: stack or spills",
                r.build
            );
        }
        assert!(
            inlined.registers <= plain.registers + MAX_EXTRA_REGISTERS,
            "{what}: {caller:?}: the send inlined adds {} registers to {} (limit \
             {MAX_EXTRA_REGISTERS})",
            inlined.registers.saturating_sub(plain.registers),
            plain.registers
        );
        assert!(
            call.registers <= inlined.registers,
            "{what}: {caller:?}: {} registers behind a call, {} inlined",
            call.registers,
            inlined.registers
        );
        for r in [inlined, call] {
            assert_eq!(
                r.blocks_per_sm, plain.blocks_per_sm,
                "{what}: {caller:?} {:?}: {} registers allow {} blocks/SM, the plain \
                 kernel's {} allow {}",
                r.build, r.registers, r.blocks_per_sm, plain.registers, plain.blocks_per_sm
            );
        }
    }
}

#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn the_experiment_kernels_compile_for_every_scope() {
    let c = compile(Program::BenchExperiments, &CompileOptions::new())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&c.cubin[..4], b"\x7fELF");
    let usage = resource_usage(&c.log);
    for scope in [
        "Unordered",
        "GpuFence",
        "GpuFencedDbrec",
        "GpuReleaseStore",
        "ThreadFence",
        "SystemReleaseStore",
        "SystemFence",
    ] {
        for k in ["bench_rate", "bench_completion"] {
            let name = format!("ibgda_{k}_{scope}");
            let u = usage
                .iter()
                .find(|u| u.kernel == name)
                .unwrap_or_else(|| panic!("{name} missing"));
            println!(
                "{name:<40} {:>4} registers, {} B stack",
                u.registers, u.stack_bytes
            );
            // No stack either: the shared protocol's out-of-line poll takes the queue by
            // value (by reference it put the descriptor in local memory, 80 bytes that
            // every posting path read its fields from).
            assert_eq!(
                (u.stack_bytes, u.spill_stores, u.spill_loads),
                (0, 0, 0),
                "{name}: stack or spills"
            );
        }
    }
    assert!(
        usage
            .iter()
            .any(|u| u.kernel == "ibgda_bench_rate_selfsink_GpuFence"),
        "the one-launch (profiler) rate kernel is missing"
    );
}

/// DOCA GPUNetIO's device verbs, from the pinned nvidia-nvshmem-cu13 wheel's headers
/// (`scripts/peer-headers.sh`), compile with NVRTC for sm_90 into the peer program, with
/// this project's C library shim; the ordering instructions of its issue loop are printed
/// beside ibgda's GpuFence loop (DOCA's is Table 4's "GPU-scope fence" row).
#[test]
#[cfg_attr(
    not(all(ibgda_nvrtc, ibgda_peers)),
    ignore = "NVRTC or the peer headers not installed: run scripts/cuda-wheels.sh and scripts/peer-headers.sh"
)]
fn doca_device_verbs_compile_with_nvrtc_on_ibgda_queues() {
    use ibgda_kernels::experiments::peers::compile_doca;
    use ibgda_kernels::ptx::ordering_of;
    let c = compile_doca(&CompileOptions::new()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&c.cubin[..4], b"\x7fELF");
    let usage = resource_usage(&c.log);
    for k in ["ibgda_peer_doca_setup", "ibgda_peer_doca_issue"] {
        let u = usage
            .iter()
            .find(|u| u.kernel == k)
            .unwrap_or_else(|| panic!("{k} missing:\n{}", c.log));
        println!(
            "{k:<28} {:>4} registers, {} B stack",
            u.registers, u.stack_bytes
        );
    }
    let doca = ordering_of(&c.ptx, "ibgda_peer_doca_issue").expect("DOCA issue loop");
    println!("DOCA issue loop ordering: {}", doca.join("; "));
    let ours = compile(Program::Kernels, &CompileOptions::new()).unwrap_or_else(|e| panic!("{e}"));
    let mine = ordering_of(&ours.ptx, "ibgda_issue_bench_GpuFence").expect("ibgda issue loop");
    println!("ibgda GpuFence issue loop ordering: {}", mine.join("; "));
    // DOCA rings with an MMIO store after a GPU-scope release fence, as ibgda's GpuFence.
    for want in ["st.mmio.relaxed.sys.global.b64", "fence.release.gpu"] {
        assert!(
            doca.iter().any(|i| i.starts_with(want)),
            "DOCA's issue loop lacks {want}: {doca:?}"
        );
    }
}
