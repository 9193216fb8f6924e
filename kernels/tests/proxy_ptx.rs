//! The proxy program compiles to an sm_90 cubin through NVRTC, its device encoders equal
//! the Rust encoder (the program `static_assert`s them against generated words), each
//! handoff protocol and the CPU-assisted doorbell compile to exactly the ordering
//! instructions their documentation names, and a push that finds room runs the PTX it ran
//! before the ring's waits took a run-time deadline (`tests/ptx/proxy_push.golden`).
//!
//! Without NVRTC these tests are ignored; with `IBGDA_REQUIRE_NVRTC=1` the build fails.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::mem::offset_of;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use ibgda::proxy::{Baseline, Tuned};
use ibgda_kernels::gpu::CompileOptions;
use ibgda_kernels::nvrtc::{nvrtc_version, resource_usage, Compiled};
use ibgda_kernels::proxy::{compile, handoff_kernel, DeviceProxyRing};
use ibgda_kernels::ptx::{clock_free_paths, entry_body, ordering_of, without_numbers};

fn proxy() -> &'static Compiled {
    static CACHE: OnceLock<Compiled> = OnceLock::new();
    CACHE.get_or_init(|| compile(&CompileOptions::new()).unwrap_or_else(|e| panic!("{e}")))
}

fn ordering(kernel: &str) -> Vec<String> {
    ordering_of(&proxy().ptx, kernel).unwrap_or_else(|| panic!("{kernel} missing"))
}

#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn the_proxy_program_compiles_with_every_kernel() {
    let c = proxy();
    assert_eq!(&c.cubin[..4], b"\x7fELF");
    let usage = resource_usage(&c.log);
    for u in &usage {
        println!(
            "{:<44} {:>4} regs {:>4} stack {:>3}/{:>3} spills",
            u.kernel, u.registers, u.stack_bytes, u.spill_stores, u.spill_loads
        );
    }
    for k in [
        "ibgda_proxy_push_Baseline",
        "ibgda_proxy_push_Tuned",
        "ibgda_proxy_enqueue_Baseline",
        "ibgda_proxy_enqueue_Tuned",
        "ibgda_proxy_rate_Baseline",
        "ibgda_proxy_rate_Tuned",
        "ibgda_proxy_probe",
        "ibgda_assisted_doorbell_path_SystemReleaseStore",
        "ibgda_assisted_doorbell_path_SystemFence",
        "ibgda_assisted_post_SystemReleaseStore",
        "ibgda_assisted_post_SystemFence",
    ] {
        assert!(usage.iter().any(|u| u.kernel == k), "{k} missing");
    }
    // The launchers find their instances by these names.
    for base in [
        "ibgda_proxy_push",
        "ibgda_proxy_enqueue",
        "ibgda_proxy_rate",
    ] {
        for k in [
            handoff_kernel::<Baseline>(base),
            handoff_kernel::<Tuned>(base),
        ] {
            assert!(
                usage.iter().any(|u| u.kernel == k),
                "launcher name {k} missing"
            );
        }
    }
}

/// Tuned: one 16-byte relaxed system-scope store, and the acquire re-read of the progress
/// only on the path where the cached copy says full. No fence, no atomic.
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn tuned_push_is_one_16_byte_store() {
    let push = ordering("ibgda_proxy_push_Tuned");
    println!("tuned push: {}", push.join("; "));
    assert_eq!(
        push,
        ["ld.acquire.sys.global.b64", "st.relaxed.sys.global.v2.b64"]
    );
}

/// Baseline: the device atomic reservation, the acquire read of the host-resident
/// progress, the operand word, then the control word with a system-scope release.
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn baseline_push_reserves_reads_progress_and_releases_at_system_scope() {
    let push = ordering("ibgda_proxy_push_Baseline");
    println!("baseline push: {}", push.join("; "));
    assert_eq!(
        push,
        [
            "atom.global.add.u64",
            "ld.acquire.sys.global.b64",
            "st.relaxed.sys.global.b64",
            "st.release.sys.global.b64"
        ]
    );
}

/// The CPU-assisted doorbell: one system-scope release store of the index to the host
/// slot, in place of the scope's doorbell record and MMIO doorbell (no `.mmio` store at
/// all), while the scope's CQ side stays (checked on the posting kernel).
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn the_assisted_doorbell_publishes_an_index_and_never_rings_mmio() {
    for scope in ["SystemReleaseStore", "SystemFence"] {
        let path = ordering(&format!("ibgda_assisted_doorbell_path_{scope}"));
        println!("{scope:<20} assisted doorbell: {}", path.join("; "));
        assert_eq!(path, ["st.release.sys.global.b32"], "{scope}");
        let post = ordering(&format!("ibgda_assisted_post_{scope}"));
        println!("{scope:<20} assisted post: {}", post.join("; "));
        assert!(
            !post.iter().any(|i| i.contains(".mmio")),
            "{scope}: {post:?}"
        );
        assert!(post.iter().any(|i| i == "st.release.sys.global.b32"));
    }
    // The CQ loads are the scope's own.
    let post = ordering("ibgda_assisted_post_SystemReleaseStore");
    assert!(post.iter().any(|i| i == "ld.acquire.sys.global.b64"));
    let post = ordering("ibgda_assisted_post_SystemFence");
    assert!(post.iter().any(|i| i == "ld.volatile.global.b64"));
}

const PUSH_GOLDEN: &str = "tests/ptx/proxy_push.golden";
const PUSH_KERNELS: [&str; 2] = ["ibgda_proxy_push_Tuned", "ibgda_proxy_push_Baseline"];
const DEFAULT_BUILD: &str = "default build";
/// The build whose ring waits were bounded at compile time (`IBGDA_SPIN_LIMIT_NS`, as the
/// experiments and the GPU tests compiled the proxy program before the bound moved into
/// the ring's descriptor).
const BOUNDED_BUILD: &str = "IBGDA_SPIN_LIMIT_NS build";

fn body(ptx: &str, kernel: &str) -> Vec<String> {
    entry_body(ptx, kernel).unwrap_or_else(|| panic!("no entry {kernel}"))
}

/// The golden text: the NVRTC version, then per push kernel and build a
/// `== kernel (build)` line and its whole body.
fn render_push(default: &str, bounded: &str) -> String {
    let (major, minor) = nvrtc_version().unwrap_or_else(|e| panic!("{e}"));
    let mut out = format!("nvrtc {major}.{minor}\n");
    for k in PUSH_KERNELS {
        for (build, ptx) in [(DEFAULT_BUILD, default), (BOUNDED_BUILD, bounded)] {
            let _ = writeln!(out, "== {k} ({build})");
            for l in body(ptx, k) {
                let _ = writeln!(out, "{l}");
            }
        }
    }
    out
}

fn push_sections(text: &str) -> HashMap<String, Vec<String>> {
    let mut out = HashMap::new();
    let mut current: Option<String> = None;
    for line in text.lines().skip(1) {
        match line.strip_prefix("== ") {
            Some(name) => {
                out.insert(name.to_string(), Vec::new());
                current = Some(name.to_string());
            }
            None => {
                if let Some(lines) = current.as_ref().and_then(|c| out.get_mut(c)) {
                    lines.push(line.to_string());
                }
            }
        }
    }
    out
}

fn fast_paths(body: &[String], kernel: &str) -> Vec<Vec<String>> {
    let paths = clock_free_paths(body, 64).unwrap_or_else(|| panic!("{kernel}: no paths"));
    assert!(!paths.is_empty(), "{kernel}: no path reads no clock");
    paths
}

/// A line's opcode, past a predicate guard (`@%p1 bra ...` -> `bra`).
fn opcode(line: &str) -> &str {
    let mut tokens = line.split_whitespace();
    let first = tokens.next().unwrap_or("");
    let op = if first.starts_with('@') {
        tokens.next().unwrap_or("")
    } else {
        first
    };
    op.trim_end_matches(';')
}

/// Whether a line is a memory or ordering instruction other than a parameter read.
fn is_memory(line: &str) -> bool {
    let op = opcode(line);
    (op.starts_with("ld.") && !op.starts_with("ld.param"))
        || op.starts_with("st.")
        || op.starts_with("atom.")
        || op.starts_with("red.")
        || op.starts_with("fence")
        || op.starts_with("membar")
}

/// A path's instructions for an order-free comparison: numbers left out, branches left
/// out (the path is the control flow), and each comparison named by the pair it belongs
/// to (`setp.lt` and `setp.ge` test one condition; which the compiler emits follows the
/// branch's sense).
fn canonical(path: &[String]) -> HashMap<String, i32> {
    let mut out = HashMap::new();
    for l in path {
        let op = opcode(l);
        if op == "bra" || op.starts_with("bra.") {
            continue;
        }
        let mut n = without_numbers(l)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if op.starts_with("setp.") {
            for (a, b) in [(".ge.", ".lt."), (".le.", ".gt."), (".ne.", ".eq.")] {
                n = n.replacen(a, b, 1);
            }
        }
        *out.entry(n).or_insert(0) += 1;
    }
    out
}

/// `a - b` of two counted sets: what `a` holds more of.
fn more(a: &HashMap<String, i32>, b: &HashMap<String, i32>) -> Vec<String> {
    let mut out: Vec<String> = a
        .iter()
        .flat_map(|(l, &n)| {
            std::iter::repeat_n(
                l.clone(),
                (n - b.get(l).copied().unwrap_or(0)).max(0) as usize,
            )
        })
        .collect();
    out.sort();
    out
}

/// The push kernels' fast paths (every path that reads no clock: the ring had room at the
/// first look) against the golden PTX recorded before the ring's waits took their bound
/// from the descriptor (`DeviceProxyRing::wait_ns`):
/// - against the build whose waits were bounded at compile time, each fast path is the
///   same instructions in the same order (register and label numbers left out), but for
///   the one read of the ring's `wait_ns` parameter, which NVRTC places at the entry;
/// - against the default build, whose waits were unbounded (their bound compiled to
///   nothing), the same memory and ordering instructions in the same order, and the same
///   instructions but for that parameter read and one `mov.u64 %rd, 0` (the deadline's
///   start, 0 until a failed check reads the clock): what the compile-time bound added
///   when it was on.
///
/// `IBGDA_BLESS=1` re-records the golden file from the sources as they are (both builds).
#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn a_push_that_finds_room_runs_the_ptx_it_ran_before_ring_deadlines() {
    let now = &proxy().ptx;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(PUSH_GOLDEN);
    if std::env::var("IBGDA_BLESS").is_ok_and(|v| v == "1") {
        let bounded = compile(
            &CompileOptions::new()
                .spin_limit(Duration::from_secs(20))
                .expect("a nonzero limit"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, render_push(now, &bounded.ptx)).expect("write the golden PTX");
        return;
    }
    let golden =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (major, minor) = nvrtc_version().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        golden.lines().next(),
        Some(format!("nvrtc {major}.{minor}").as_str()),
        "{} was recorded with another NVRTC: it compares only under the pinned one \
         (scripts/cuda-wheels.sh)",
        path.display()
    );
    let sections = push_sections(&golden);
    let wait_offset = offset_of!(DeviceProxyRing, wait_ns);
    for k in PUSH_KERNELS {
        let section = |build: &str| {
            sections
                .get(&format!("{k} ({build})"))
                .unwrap_or_else(|| panic!("{}: no {k} ({build})", path.display()))
        };
        let wait_read = format!("[{k}_param_0+{wait_offset}]");
        let is_wait_read = |l: &str| l.starts_with("ld.param") && l.contains(&wait_read);
        let now_paths = fast_paths(&body(now, k), k);

        // Against the bounded build: in order, but for the bound's parameter read.
        let ordered = |paths: &[Vec<String>]| {
            let mut v: Vec<Vec<String>> = paths
                .iter()
                .map(|p| {
                    p.iter()
                        .filter(|l| !is_wait_read(l))
                        .map(|l| without_numbers(l))
                        .collect()
                })
                .collect();
            v.sort();
            v
        };
        let bounded = fast_paths(section(BOUNDED_BUILD), k);
        assert_eq!(
            ordered(&now_paths),
            ordered(&bounded),
            "{k}: a fast path is not the bounded build's"
        );
        for p in &now_paths {
            assert_eq!(
                p.iter().filter(|l| is_wait_read(l)).count(),
                1,
                "{k}: the ring's bound is read once"
            );
        }

        // Against the default (unbounded) build.
        let default = fast_paths(section(DEFAULT_BUILD), k);
        assert_eq!(now_paths.len(), default.len(), "{k}: fast paths");
        let memory = |p: &[String]| -> Vec<String> {
            p.iter()
                .filter(|l| is_memory(l))
                .map(|l| without_numbers(l))
                .collect()
        };
        let allowed = [
            format!("ld.param.u64 %rd, {wait_read};"),
            "mov.u64 %rd, 0;".to_string(),
        ];
        for (i, p) in now_paths.iter().enumerate() {
            let c = canonical(p);
            let twin = default
                .iter()
                .filter(|d| memory(d) == memory(p))
                .min_by_key(|d| {
                    let cd = canonical(d);
                    more(&c, &cd).len() + more(&cd, &c).len()
                })
                .unwrap_or_else(|| {
                    panic!("{k}: fast path {i} has memory instructions no earlier path had")
                });
            let cd = canonical(twin);
            let (added, dropped) = (more(&c, &cd), more(&cd, &c));
            println!(
                "{k} fast path {i}: {} instructions ({} before); added {added:?}, dropped {dropped:?}",
                p.len(),
                twin.len()
            );
            assert!(dropped.is_empty(), "{k}: fast path {i} lost {dropped:?}");
            let mut budget = allowed.to_vec();
            for a in &added {
                let at = budget
                    .iter()
                    .position(|b| b == a)
                    .unwrap_or_else(|| panic!("{k}: fast path {i} gained {a:?}"));
                budget.remove(at);
            }
        }
    }
}
