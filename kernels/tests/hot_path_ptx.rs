//! The posting paths compile to the PTX recorded in `tests/ptx/hot_path.golden` (with the
//! pinned NVRTC of `scripts/cuda-wheels.sh`). `tests/cuda/hot_path.cu` holds, per scope:
//! - `exclusive_post_<S>`: one post and its doorbell, no wait; its whole body must be the
//!   same, registers included;
//! - `issue_loop_<S>`: the benchmark's issue loop (post between two clock reads, then a
//!   wait for the completion); what lies between the clock reads must be the same
//!   instructions, register numbers and labels left out (the wait after them changed);
//! - `thread_post_<S>`, `grouped_post_<S>`, `warp_post_<S>`: the shared protocol's posts
//!   (per thread, per thread with the lanes calling together grouped, per warp), which
//!   wait for room when short of it and for the publication frontier; each whole body
//!   must be the same, registers included.
//!
//! The exclusive sections are the PTX of the device library before its waits took
//! run-time deadlines (commit b38d512, whose waits were bounded by a compile-time spin
//! limit that compiled to nothing by default; re-recorded once for the descriptor's added
//! `wait_ns`, which renumbered PTX virtual registers and changed no instruction): every
//! queue-pair wait reads `%globaltimer` only after its first failed check, so nothing of a
//! deadline lies on the exclusive posting path. The shared sections were recorded later,
//! from the library with deadlines (they pin it from then on). Their paths that read no
//! clock are not the pre-deadline library's (a88eb1c; 60 of each post's GpuReleaseStore
//! paths compared one by one): most hold one more `mov.u64 %rd, 0` (a lazily
//! started deadline's start, set ahead of the wait); the per-thread and per-warp posts also
//! a `setp.lt.s32` and a `selp.b32` that carry the frontier wait's possible deadline status
//! to the caller, some one more `mov.u32 %r, 0`; the grouped post one or two more
//! register moves (`mov.u32`).
//!
//! A deliberate change of the posting path re-records the file:
//! `IBGDA_BLESS=1 cargo test --release -p ibgda-kernels --test hot_path_ptx`.
//!
//! Without NVRTC these tests are ignored; with `IBGDA_REQUIRE_NVRTC=1` the build fails.

use std::fmt::Write as _;
use std::path::Path;

use ibgda::order::ScopeKind;
use ibgda_kernels::gpu::CompileOptions;
use ibgda_kernels::nvrtc::{compile_source, nvrtc_version};
use ibgda_kernels::ptx::{entry_body, without_numbers};

const GOLDEN: &str = "tests/ptx/hot_path.golden";

/// The shared protocol's posting kernels of `tests/cuda/hot_path.cu`, each pinned whole.
const SHARED: [&str; 3] = ["thread_post", "grouped_post", "warp_post"];

fn scopes() -> impl Iterator<Item = String> {
    ScopeKind::ALL
        .into_iter()
        .filter(|k| *k != ScopeKind::HostBarrier)
        .map(|k| format!("{k:?}"))
}

fn body_lines(ptx: &str, name: &str) -> Vec<String> {
    entry_body(ptx, name).unwrap_or_else(|| panic!("no entry {name}"))
}

/// The lines from the first read of `%clock64` to the next one, numbers left out.
fn between_clock_reads(lines: &[String], name: &str) -> Vec<String> {
    let clocks: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains("%clock64"))
        .map(|(i, _)| i)
        .collect();
    assert!(
        clocks.len() >= 2,
        "{name}: {} clock reads, 2 expected",
        clocks.len()
    );
    lines[clocks[0]..=clocks[1]]
        .iter()
        .map(|l| without_numbers(l))
        .collect()
}

/// The golden text: the NVRTC version, then per kernel a `== name` line and its lines.
fn render(ptx: &str) -> String {
    let (major, minor) = nvrtc_version().unwrap_or_else(|e| panic!("{e}"));
    let mut out = format!("nvrtc {major}.{minor}\n");
    for s in scopes() {
        let post = format!("exclusive_post_{s}");
        let _ = writeln!(out, "== {post}");
        for l in body_lines(ptx, &post) {
            let _ = writeln!(out, "{l}");
        }
        let issue = format!("issue_loop_{s}");
        let _ = writeln!(out, "== {issue} (between the clock reads)");
        for l in between_clock_reads(&body_lines(ptx, &issue), &issue) {
            let _ = writeln!(out, "{l}");
        }
        for shared in SHARED {
            let post = format!("{shared}_{s}");
            let _ = writeln!(out, "== {post}");
            for l in body_lines(ptx, &post) {
                let _ = writeln!(out, "{l}");
            }
        }
    }
    out
}

fn sections(text: &str) -> Vec<(&str, Vec<&str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in text.lines() {
        match line.strip_prefix("== ") {
            Some(name) => out.push((name, Vec::new())),
            None => {
                if let Some((_, lines)) = out.last_mut() {
                    lines.push(line);
                }
            }
        }
    }
    out
}

#[test]
#[cfg_attr(
    not(ibgda_nvrtc),
    ignore = "NVRTC not installed: run scripts/cuda-wheels.sh"
)]
fn the_posting_paths_compile_to_the_recorded_ptx() {
    let c = compile_source(
        "hot_path.cu",
        include_str!("cuda/hot_path.cu"),
        &CompileOptions::new(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let now = render(&c.ptx);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN);
    if std::env::var("IBGDA_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &now).expect("write the golden PTX");
        return;
    }
    let golden =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (golden_version, now_version) = (golden.lines().next(), now.lines().next());
    assert_eq!(
        golden_version,
        now_version,
        "{} was recorded with another NVRTC: it compares only under the pinned one \
         (scripts/cuda-wheels.sh)",
        path.display()
    );
    let (before, after) = (sections(&golden), sections(&now));
    assert_eq!(
        before.iter().map(|s| s.0).collect::<Vec<_>>(),
        after.iter().map(|s| s.0).collect::<Vec<_>>(),
        "the golden file's kernels"
    );
    for ((name, was), (_, is)) in before.iter().zip(&after) {
        println!("{name}: {} PTX lines before, {} now", was.len(), is.len());
        if was != is {
            let first = was
                .iter()
                .zip(is)
                .position(|(a, b)| a != b)
                .unwrap_or(was.len().min(is.len()));
            panic!(
                "{name}: the PTX changed at line {} (before: {:?}, now: {:?}); if the change \
                 is deliberate, re-record with IBGDA_BLESS=1",
                first + 1,
                was.get(first),
                is.get(first)
            );
        }
    }
}
