//! Every kernel compiles to an sm_90 cubin through NVRTC (the pinned CUDA 13.0 wheels of
//! `scripts/cuda-wheels.sh`), each scope's doorbell and poll paths hold exactly the ordering
//! instructions its Rust `DEVICE_SEQUENCE` documents, the typed issue loop holds exactly
//! the raw baseline's, and the register and spill report of every kernel is printed.
//!
//! Without NVRTC these tests are ignored; with `IBGDA_REQUIRE_NVRTC=1` the build fails.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use ibgda::order::{device_sequence, ScopeKind};
use ibgda_kernels::nvrtc::{compile, resource_usage, Compiled, Program};
use ibgda_kernels::ptx::{kernel_orderings, ordering_of, parse_sequence};

fn compiled(p: Program) -> &'static Compiled {
    static CACHE: OnceLock<Vec<Compiled>> = OnceLock::new();
    let all = CACHE.get_or_init(|| {
        Program::ALL
            .iter()
            .map(|&p| compile(p, &[]).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    });
    &all[Program::ALL
        .iter()
        .position(|&q| q == p)
        .expect("known program")]
}

fn scope_name(kind: ScopeKind) -> String {
    format!("{kind:?}")
}

fn gpu_scopes() -> impl Iterator<Item = ScopeKind> {
    ScopeKind::ALL
        .into_iter()
        .filter(|k| *k != ScopeKind::HostBarrier)
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn every_program_compiles_to_an_sm90_cubin_and_reports_resources() {
    for p in Program::ALL {
        let c = compiled(p);
        assert_eq!(&c.cubin[..4], b"\x7fELF", "{}: not an ELF cubin", c.name);
        assert!(
            c.ptx.contains(".target sm_90"),
            "{}: PTX not for sm_90",
            c.name
        );
        let usage = resource_usage(&c.log);
        assert!(
            !usage.is_empty(),
            "{}: no ptxas report in the log:\n{}",
            c.name,
            c.log
        );
        println!("{}: {} kernels", c.name, usage.len());
        println!(
            "  {:<40} {:>5} {:>6} {:>7} {:>7}",
            "kernel", "regs", "stack", "spill-st", "spill-ld"
        );
        for u in &usage {
            println!(
                "  {:<40} {:>5} {:>6} {:>7} {:>7}",
                u.kernel, u.registers, u.stack_bytes, u.spill_stores, u.spill_loads
            );
        }
    }
    let kernels = resource_usage(&compiled(Program::Kernels).log);
    for kind in gpu_scopes() {
        for k in [
            "doorbell_path",
            "poll_path",
            "issue_bench",
            "post_batch",
            "post_thread",
            "post_warp",
        ] {
            let name = format!("ibgda_{k}_{}", scope_name(kind));
            assert!(kernels.iter().any(|u| u.kernel == name), "{name} missing");
        }
    }
    for k in [
        "ibgda_build_requests",
        "ibgda_sink",
        "ibgda_softnic",
        "ibgda_nic_requests_GpuFence",
        "ibgda_nic_requests_GpuReleaseStore",
        "ibgda_nic_requests_ThreadFence",
    ] {
        assert!(kernels.iter().any(|u| u.kernel == k), "{k} missing");
    }
    // The doorbell path is straight-line register code: no stack, no spills.
    for u in kernels
        .iter()
        .filter(|u| u.kernel.starts_with("ibgda_doorbell_path_"))
    {
        assert_eq!(
            (u.stack_bytes, u.spill_stores, u.spill_loads),
            (0, 0, 0),
            "{}",
            u.kernel
        );
    }
}

#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn each_scope_compiles_to_exactly_its_documented_ptx() {
    let ptx = &compiled(Program::Kernels).ptx;
    let raw = &compiled(Program::RawBaseline).ptx;
    println!("{:<20} {:<14} ordering instructions (PTX)", "scope", "path");
    for kind in gpu_scopes() {
        let name = scope_name(kind);
        let seq = parse_sequence(device_sequence(kind));
        // Doorbell path: exactly the documented sequence, in order.
        let db =
            ordering_of(ptx, &format!("ibgda_doorbell_path_{name}")).expect("doorbell path kernel");
        println!("{name:<20} {:<14} {}", "doorbell", db.join("; "));
        assert_eq!(
            db, seq.doorbell,
            "{name}: doorbell path PTX differs from DEVICE_SEQUENCE"
        );
        // Poll path: the documented CQE load and acquire, and the CQ doorbell record
        // (consumer index) store of ring mode; nothing else.
        let poll = ordering_of(ptx, &format!("ibgda_poll_path_{name}")).expect("poll path kernel");
        println!("{name:<20} {:<14} {}", "poll", poll.join("; "));
        let mut want = seq.completion.clone();
        want.push("st.relaxed.sys.global.b32".into());
        assert_eq!(
            sorted(poll),
            sorted(want),
            "{name}: poll path PTX differs from DEVICE_SEQUENCE"
        );
        // The typed issue loop and the hand-written one: the same ordering instructions.
        let typed =
            ordering_of(ptx, &format!("ibgda_issue_bench_{name}")).expect("issue bench kernel");
        let hand = ordering_of(raw, &format!("ibgda_raw_issue_{name}")).expect("raw kernel");
        println!("{name:<20} {:<14} {}", "issue (typed)", typed.join("; "));
        println!("{name:<20} {:<14} {}", "issue (raw)", hand.join("; "));
        assert_eq!(
            sorted(typed),
            sorted(hand),
            "{name}: typed and raw issue loops differ in ordering"
        );
        // Shared paths: the scope's doorbell instructions appear (inventory printed).
        for k in ["post_thread", "post_warp", "post_batch"] {
            let inv = ordering_of(ptx, &format!("ibgda_{k}_{name}")).expect("shared kernel");
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for i in &inv {
                *counts.entry(i.as_str()).or_default() += 1;
            }
            println!("{name:<20} {k:<14} {counts:?}");
            for i in &seq.doorbell {
                assert!(inv.contains(i), "{name}: {k} lacks {i}");
            }
        }
    }
    // No scope borrows another's instructions: each doorbell path differs from the rest.
    let paths: Vec<Vec<String>> = gpu_scopes()
        .map(|k| {
            ordering_of(ptx, &format!("ibgda_doorbell_path_{}", scope_name(k))).unwrap_or_default()
        })
        .collect();
    for (i, a) in paths.iter().enumerate() {
        for b in &paths[i + 1..] {
            assert_ne!(a, b, "two scopes compile to the same doorbell path");
        }
    }
    assert!(kernel_orderings(ptx).len() >= 44);
}

/// The CUDA software NIC's kernel: doorbells, doorbell records and CQ consumer indices
/// read with acquire loads, each CQE's last word written with a release store, atomics
/// as 64-bit CAS; no fence (the acquire and release operations carry the ordering).
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn the_cuda_nic_orders_through_acquire_loads_and_release_cqe_stores() {
    let ptx = &compiled(Program::Kernels).ptx;
    let inv = ordering_of(ptx, "ibgda_softnic").expect("ibgda_softnic");
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for i in &inv {
        *counts.entry(i.as_str()).or_default() += 1;
    }
    println!("ibgda_softnic: {counts:?}");
    for want in [
        "ld.acquire.sys.global.b64",
        "st.release.sys.global.b64",
        "atom.cas.b64",
    ] {
        assert!(counts.contains_key(want), "ibgda_softnic lacks {want}");
    }
    for i in counts.keys() {
        assert!(
            !i.starts_with("fence") && !i.starts_with("membar"),
            "ibgda_softnic holds a fence: {i}"
        );
        assert!(
            !i.contains(".relaxed") || i.starts_with("atom"),
            "ibgda_softnic holds a relaxed access: {i}"
        );
    }
}
