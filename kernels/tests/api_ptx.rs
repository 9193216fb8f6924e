//! The device API (`cuda/ibgda_api.cuh`) compiles to an sm_90 cubin through NVRTC for every
//! scope, in the per-thread and the warp-cooperative form of every operation
//! (`cuda/api_kernels.cu`), and its PTX holds what each scope orders with:
//!
//! - every posting kernel holds the scope's doorbell sequence and its CQ load and acquire
//!   (the wait for room and the flush poll the CQ), and traps on a descriptor of another
//!   scope;
//! - `wait_signal` is one `ld.acquire.sys` of the signal word and nothing else that
//!   orders (the acquire is what makes the data before the signal visible);
//! - the kernels that do not post through the scope's path compare no scope.
//!
//! Without NVRTC these tests are ignored; with `IBGDA_REQUIRE_NVRTC=1` the build fails.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use ibgda::order::{device_sequence, ScopeKind};
use ibgda_kernels::gpu::CompileOptions;
use ibgda_kernels::nvrtc::{compile_api_kernels, resource_usage, Compiled};
use ibgda_kernels::ptx::{ordering_of, parse_sequence};

/// Every scope's program, compiled in parallel (one NVRTC program per scope).
fn api(kind: ScopeKind) -> &'static Compiled {
    static C: OnceLock<Vec<(ScopeKind, Compiled)>> = OnceLock::new();
    let all = C.get_or_init(|| {
        std::thread::scope(|s| {
            let jobs: Vec<_> = gpu_scopes()
                .map(|k| {
                    s.spawn(move || {
                        let name = format!("{k:?}");
                        let c = compile_api_kernels(Some(&name), &CompileOptions::new())
                            .unwrap_or_else(|e| panic!("{name}: {e}"));
                        (k, c)
                    })
                })
                .collect();
            jobs.into_iter()
                .map(|j| j.join().expect("compile thread"))
                .collect()
        })
    });
    &all.iter().find(|(k, _)| *k == kind).expect("a GPU scope").1
}

fn gpu_scopes() -> impl Iterator<Item = ScopeKind> {
    ScopeKind::ALL
        .into_iter()
        .filter(|k| *k != ScopeKind::HostBarrier)
}

/// Every function definition of a PTX module (`.entry` or `.func`), by name, with its
/// text from the header to the closing brace (declarations skipped).
fn definitions(ptx: &str) -> std::collections::HashMap<String, String> {
    let lines: Vec<&str> = ptx.lines().collect();
    let mut out = std::collections::HashMap::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim();
        let header = l.starts_with(".visible .entry")
            || l.starts_with(".entry")
            || l.starts_with(".func")
            || l.starts_with(".visible .func")
            || l.starts_with(".weak .func");
        if !header {
            i += 1;
            continue;
        }
        let name = l
            .split(|c: char| c.is_whitespace() || c == '(')
            .rfind(|t| !t.is_empty())
            .unwrap_or("")
            .to_string();
        let mut j = i;
        let mut text = String::new();
        let mut depth = 0i32;
        let mut opened = false;
        while j < lines.len() {
            let t = lines[j];
            text.push_str(t);
            text.push('\n');
            if !opened && t.trim_end().ends_with(';') && !t.contains('{') {
                break; // a declaration
            }
            for c in t.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            j += 1;
            if opened && depth == 0 {
                out.insert(name.clone(), text.clone());
                break;
            }
        }
        i = j.max(i + 1);
    }
    out
}

/// The text of entry `name` and of every function it reaches through calls.
fn reachable_text(ptx: &str, name: &str) -> String {
    let defs = definitions(ptx);
    let mut text = String::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![name.to_string()];
    while let Some(f) = todo.pop() {
        if !seen.insert(f.clone()) {
            continue;
        }
        let body = defs
            .get(&f)
            .unwrap_or_else(|| panic!("no definition of {f}"));
        todo.extend(calls(body).into_iter().filter(|c| defs.contains_key(c)));
        text.push_str(body);
    }
    text
}

fn calls(body: &str) -> Vec<String> {
    let lines: Vec<&str> = body.lines().map(str::trim).collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if !l.starts_with("call") {
            continue;
        }
        // The callee is the first identifier after the return list, on this line or the
        // next (NVRTC's layout).
        let joined = format!("{} {}", l, lines.get(i + 1).copied().unwrap_or(""));
        let mut bare = String::new();
        let mut parens = 0;
        for c in joined["call".len()..].chars() {
            match c {
                '(' => parens += 1,
                ')' => parens -= 1,
                _ if parens == 0 => bare.push(c),
                _ => {}
            }
        }
        if let Some(t) = bare
            .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
            .skip(1)
            .find(|t| t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '$'))
        {
            out.push(t.to_string());
        }
    }
    out
}

fn checks_scope(text: &str, kind: u32) -> bool {
    let compares = text
        .lines()
        .map(str::trim)
        .any(|l| l.starts_with("setp.") && l.trim_end_matches(';').ends_with(&format!(", {kind}")));
    compares && text.contains("trap;")
}

#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn every_operation_compiles_for_every_scope_to_an_sm90_cubin() {
    println!(
        "  {:<40} {:>5} {:>6} {:>7} {:>7}",
        "kernel", "regs", "stack", "spill-st", "spill-ld"
    );
    for kind in gpu_scopes() {
        let c = api(kind);
        assert_eq!(&c.cubin[..4], b"\x7fELF", "not an ELF cubin");
        assert!(c.ptx.contains(".target sm_90"));
        let usage = resource_usage(&c.log);
        for u in &usage {
            println!(
                "  {:<40} {:>5} {:>6} {:>7} {:>7}",
                u.kernel, u.registers, u.stack_bytes, u.spill_stores, u.spill_loads
            );
        }
        for k in [
            "calls_thread",
            "calls_warp",
            "wait_signal",
            "flush",
            "wait_counter",
            "signal_order",
        ] {
            let name = format!("ibgda_api_{k}_{kind:?}");
            assert!(usage.iter().any(|u| u.kernel == name), "{name} missing");
        }
    }
}

#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn posting_kernels_hold_their_scopes_doorbell_and_completion_sequences() {
    for kind in gpu_scopes() {
        let ptx = &api(kind).ptx;
        let seq = parse_sequence(device_sequence(kind));
        for k in ["calls_thread", "calls_warp", "flush", "wait_counter"] {
            let name = format!("ibgda_api_{k}_{kind:?}");
            let inv = ordering_of(ptx, &name).unwrap_or_else(|| panic!("{name}"));
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for i in &inv {
                *counts.entry(i.as_str()).or_default() += 1;
            }
            println!("{name:<40} {counts:?}");
            for i in seq.doorbell.iter().chain(&seq.completion) {
                assert!(inv.contains(i), "{name} lacks {i} of its scope's sequence");
            }
            assert!(
                checks_scope(&reachable_text(ptx, &name), kind as u32),
                "{name}: no trap on a descriptor whose scope is not {kind:?}"
            );
        }
    }
}

#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn wait_signal_is_one_acquire_load_of_system_scope() {
    for kind in gpu_scopes() {
        let ptx = &api(kind).ptx;
        let name = format!("ibgda_api_wait_signal_{kind:?}");
        let inv = ordering_of(ptx, &name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(
            inv,
            ["ld.acquire.sys.global.b64"],
            "{name}: the signal wait orders with exactly one acquire load"
        );
    }
}

/// The README's "Writing a kernel" example compiles against the device API through NVRTC
/// and instantiates its kernels for the scope it names.
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn the_put_signal_example_compiles_against_the_device_api() {
    let source = include_str!("../../examples/put_signal/put_signal.cu");
    let c = ibgda_kernels::nvrtc::compile_source("put_signal.cu", source, &CompileOptions::new())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&c.cubin[..4], b"\x7fELF");
    for k in ["send_GpuReleaseStore", "receive_GpuReleaseStore"] {
        let inv = ordering_of(&c.ptx, k).unwrap_or_else(|| panic!("{k} missing"));
        println!("{k}: {inv:?}");
    }
    let send = ordering_of(&c.ptx, "send_GpuReleaseStore").expect("send");
    let seq = parse_sequence(device_sequence(ScopeKind::GpuReleaseStore));
    for i in &seq.doorbell {
        assert!(send.contains(i), "send lacks {i}");
    }
    let receive = ordering_of(&c.ptx, "receive_GpuReleaseStore").expect("receive");
    assert_eq!(receive, ["ld.acquire.sys.global.b64"]);
}
