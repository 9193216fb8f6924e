//! Every kernel compiles to an sm_90 cubin through NVRTC (the pinned CUDA 13.0 wheels of
//! `scripts/cuda-wheels.sh`), each scope's doorbell and poll paths hold exactly the ordering
//! instructions its Rust `DEVICE_SEQUENCE` documents, the typed issue loop holds exactly
//! the raw baseline's, and the register and spill report of every kernel is printed.
//!
//! Without NVRTC these tests are ignored; with `IBGDA_REQUIRE_NVRTC=1` the build fails.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use ibgda::order::{device_sequence, ScopeKind};
use ibgda_kernels::gpu::CompileOptions;
use ibgda_kernels::nvrtc::{compile, nvrtc_version, resource_usage, Compiled, Program};
use ibgda_kernels::ptx::{kernel_orderings, ordering_of, parse_sequence};

fn compiled(p: Program) -> &'static Compiled {
    static CACHE: OnceLock<Vec<Compiled>> = OnceLock::new();
    let all = CACHE.get_or_init(|| {
        println!(
            "NVRTC {:?} from {:?}",
            nvrtc_version(),
            ibgda_kernels::nvrtc::load_nvrtc()
        );
        Program::ALL
            .iter()
            .map(|&p| compile(p, &CompileOptions::new()).unwrap_or_else(|e| panic!("{e}")))
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

/// NVRTC from 12.9 on may answer an identical compile from its on-disk JIT cache without
/// running ptxas, leaving the `-v` report out of the log; every compile must carry it.
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn an_identical_compile_again_still_reports_resources() {
    for round in 0..2 {
        let c =
            compile(Program::RawBaseline, &CompileOptions::new()).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !resource_usage(&c.log).is_empty(),
            "round {round}: no ptxas report in the log of NVRTC {:?} ({} bytes):\n{}",
            nvrtc_version(),
            c.log.len(),
            c.log
        );
    }
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
            "{}: no ptxas report in the log of NVRTC {:?} ({} bytes):\n{}",
            c.name,
            nvrtc_version(),
            c.log.len(),
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
        for k in [
            "post_thread",
            "post_thread_grouped",
            "post_warp",
            "post_warp_ahead",
            "post_batch",
        ] {
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
        // The occasional send: the scope's doorbell sequence in order, and nothing but the
        // scope's doorbell and poll instructions and the CQ doorbell-record store (its loads
        // and stores of the counters and the descriptor are plain).
        let occ = ordering_of(ptx, &format!("ibgda_occasional_send_{name}"))
            .expect("occasional send kernel");
        println!("{name:<20} {:<14} {}", "occasional", occ.join("; "));
        let mut rest = occ.iter();
        for want in &seq.doorbell {
            assert!(
                rest.any(|i| i == want),
                "{name}: the occasional send lacks {want} in the doorbell sequence's order: {occ:?}"
            );
        }
        let cq_dbrec = "st.relaxed.sys.global.b32".to_string();
        for i in &occ {
            assert!(
                seq.doorbell.contains(i) || seq.completion.contains(i) || *i == cq_dbrec,
                "{name}: the occasional send holds {i}, not of its scope: {occ:?}"
            );
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
/// as 64-bit acquire-release CAS of system scope (the data a queue placed before an atomic,
/// a put before its signal, is visible to an acquire of the atomic's value); no fence (the
/// acquire and release operations carry the ordering).
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
        "atom.acq_rel.sys.global.cas.b64",
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

/// The NIC-only program (what the emulated ConnectX compiles, `Gpu::open_softnic`) is
/// `ibgda_softnic` alone, compiled to exactly the PTX it has in the whole program: the same
/// engine, in a third of the compile.
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn the_nic_only_program_is_exactly_the_whole_programs_engine() {
    let whole = compiled(Program::Kernels);
    let t0 = std::time::Instant::now();
    let nic = compile(Program::SoftNic, &CompileOptions::new()).unwrap_or_else(|e| panic!("{e}"));
    println!("the NIC-only program compiled in {:?}", t0.elapsed());
    assert_eq!(&nic.cubin[..4], b"\x7fELF", "not an ELF cubin");
    let entries: Vec<String> = kernel_orderings(&nic.ptx)
        .into_iter()
        .map(|k| k.kernel)
        .collect();
    assert_eq!(entries, ["ibgda_softnic"]);
    assert_eq!(
        numbering_dropped(entry_body(&nic.ptx, "ibgda_softnic")),
        numbering_dropped(entry_body(&whole.ptx, "ibgda_softnic"))
    );
    assert_eq!(
        ordering_of(&nic.ptx, "ibgda_softnic"),
        ordering_of(&whole.ptx, "ibgda_softnic")
    );
}

/// `body` without the function's number in the module, which NVRTC puts in its local
/// depot's name and its labels (`__local_depot71`, `$L__BB71_3`).
fn numbering_dropped(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some((at, prefix)) = ["__local_depot", "$L__BB"]
        .iter()
        .filter_map(|p| rest.find(p).map(|i| (i, *p)))
        .min()
    {
        let end = at + prefix.len();
        out.push_str(&rest[..end]);
        rest = rest[end..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

/// The PTX text of entry `name`, from its `.entry` line to its closing brace.
fn entry_body<'a>(ptx: &'a str, name: &str) -> &'a str {
    let start = ptx
        .find(&format!(".entry {name}("))
        .unwrap_or_else(|| panic!("no entry {name}"));
    let open = start + ptx[start..].find('{').expect("a body");
    let mut depth = 0;
    for (i, c) in ptx[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &ptx[start..open + i + 1];
                }
            }
            _ => {}
        }
    }
    panic!("unterminated entry {name}")
}

/// Whether a body compares something with the scope kind `kind` and traps: `setp` against
/// the immediate, then `trap;`.
fn checks_scope(body: &str, kind: u32) -> bool {
    let compares = body
        .lines()
        .map(str::trim)
        .any(|l| l.starts_with("setp.") && l.trim_end_matches(';').ends_with(&format!(", {kind}")));
    compares && body.contains("trap;")
}

/// Every posting kernel of the device-library program checks the descriptor's scope
/// against its own instantiation (and traps on a mismatch): the exclusive producer where it
/// loads the queue, the shared protocol where it waits for room. The raw baseline has no
/// such check, and the issue loop's ordering stays the raw one's (checked above).
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn every_posting_kernel_traps_on_a_descriptor_of_another_scope() {
    let k = compiled(Program::Kernels);
    let mut checked = 0;
    for kind in gpu_scopes() {
        let scope = scope_name(kind);
        for base in [
            "doorbell_path",
            "poll_path",
            "issue_bench",
            "post_batch",
            "post_thread",
            "post_warp",
            "post_warp_ahead",
            "post_thread_grouped",
            "occasional_send",
        ] {
            let name = format!("ibgda_{base}_{scope}");
            assert!(
                checks_scope(entry_body(&k.ptx, &name), kind as u32),
                "{name}: no trap on a descriptor whose scope is not {scope} ({})",
                kind as u32
            );
            checked += 1;
        }
    }
    let raw = compiled(Program::RawBaseline);
    assert!(
        !raw.ptx.contains("trap;"),
        "the raw baseline gained a check"
    );
    println!("{checked} posting kernels check their descriptor's scope");
}

/// The user-kernel example's CUDA (examples/user_kernel/user_kernel.cu) compiles against
/// the device library through NVRTC, has one instance per scope it names, and each
/// instance checks the descriptor's scope.
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn the_user_kernel_example_compiles_against_the_device_library() {
    use ibgda::order::{GpuFence, GpuReleaseStore, OrderingScope};
    let source = include_str!("../../examples/user_kernel/user_kernel.cu");
    let c = ibgda_kernels::nvrtc::compile_source("user_kernel.cu", source, &CompileOptions::new())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&c.cubin[..4], b"\x7fELF", "not an ELF cubin");
    for (scope, kind) in [
        (GpuFence::NAME, GpuFence::KIND as u32),
        (GpuReleaseStore::NAME, GpuReleaseStore::KIND as u32),
    ] {
        let name = format!("put_get_add_{scope}");
        assert!(
            checks_scope(entry_body(&c.ptx, &name), kind),
            "{name}: no scope check"
        );
    }
    for u in resource_usage(&c.log) {
        println!("{u:?}");
        assert_eq!(u.spill_stores + u.spill_loads, 0, "{}: spills", u.kernel);
    }
}

/// A source that includes a header the device library does not provide, or holds a NUL,
/// is a typed compile error naming the program (never a panic).
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn user_sources_that_do_not_compile_are_typed_errors() {
    use ibgda_kernels::gpu::GpuError;
    let bad = ibgda_kernels::nvrtc::compile_source(
        "bad.cu",
        "#include \"nowhere.cuh\"\n",
        &CompileOptions::new(),
    );
    match bad {
        Err(GpuError::Compile { program, log }) => {
            assert_eq!(program, "bad.cu");
            assert!(log.contains("nowhere.cuh"), "{log}");
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
    let nul = ibgda_kernels::nvrtc::compile_source("nul.cu", "int a;\0", &CompileOptions::new());
    assert!(matches!(nul, Err(GpuError::Compile { .. })), "{nul:?}");
    let nul_name = ibgda_kernels::nvrtc::compile_source("n\0.cu", "", &CompileOptions::new());
    assert!(
        matches!(nul_name, Err(GpuError::Compile { .. })),
        "{nul_name:?}"
    );
}

/// The kernel the GPU test `a_user_kernel_posting_with_another_scope_traps` launches with
/// a GpuFence descriptor: its lying instance compares the descriptor's scope with
/// ThreadFence's kind (so it traps there), its honest one with GpuFence's.
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn a_kernel_posting_with_another_scope_compares_against_that_scope() {
    use ibgda::order::{GpuFence, OrderingScope, ThreadFence};
    let source = include_str!("cuda/lying_scope.cu");
    let c = ibgda_kernels::nvrtc::compile_source("lying_scope.cu", source, &CompileOptions::new())
        .unwrap_or_else(|e| panic!("{e}"));
    let honest = entry_body(&c.ptx, "honest_GpuFence");
    let lying = entry_body(&c.ptx, "lying_GpuFence");
    assert!(checks_scope(honest, GpuFence::KIND as u32));
    assert!(checks_scope(lying, ThreadFence::KIND as u32));
    assert!(!checks_scope(lying, GpuFence::KIND as u32));
}
