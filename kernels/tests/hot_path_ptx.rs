//! The exclusive producer's posting path compiles to the PTX it compiled to before the
//! device waits took run-time deadlines (`tests/ptx/hot_path.golden`, recorded with the
//! pinned NVRTC of `scripts/cuda-wheels.sh` from the device library of commit b38d512,
//! whose waits were bounded by a compile-time spin limit that compiled to nothing by
//! default; re-recorded once for the descriptor's added `wait_ns`, which renumbered PTX
//! virtual registers and changed no instruction). Every queue-pair wait now reads
//! `%globaltimer` only after its first failed check, so nothing of a deadline lies on the
//! posting path. `tests/cuda/hot_path.cu` holds, per scope:
//! - `exclusive_post_<S>`: one post and its doorbell, no wait; its whole body must be the
//!   same, registers included;
//! - `issue_loop_<S>`: the benchmark's issue loop (post between two clock reads, then a
//!   wait for the completion); what lies between the clock reads must be the same
//!   instructions, register numbers and labels left out (the wait after them changed).
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

const GOLDEN: &str = "tests/ptx/hot_path.golden";

fn scopes() -> impl Iterator<Item = String> {
    ScopeKind::ALL
        .into_iter()
        .filter(|k| *k != ScopeKind::HostBarrier)
        .map(|k| format!("{k:?}"))
}

/// The lines of an entry's body (after its parameter list), trimmed, without blank lines
/// and comments.
fn body_lines(ptx: &str, name: &str) -> Vec<String> {
    let start = ptx
        .find(&format!(".entry {name}("))
        .unwrap_or_else(|| panic!("no entry {name}"));
    let params_end = start + ptx[start..].find(')').expect("a parameter list");
    let open = params_end + ptx[params_end..].find('{').expect("a body");
    let mut depth = 0;
    let mut end = None;
    for (i, c) in ptx[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    end = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let end = end.unwrap_or_else(|| panic!("unterminated entry {name}"));
    ptx[open + 1..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with(".loc"))
        .map(str::to_string)
        .collect()
}

/// A PTX line with register numbers (`%rd12` -> `%rd`) and label numbers
/// (`$L__BB3_7` -> `$L__BB`) left out.
fn without_numbers(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c != '%' && c != '$' {
            continue;
        }
        while let Some(&n) = chars.peek() {
            if n.is_ascii_alphabetic() || n == '_' {
                out.push(n);
                chars.next();
            } else {
                break;
            }
        }
        while chars
            .peek()
            .is_some_and(|n| n.is_ascii_digit() || *n == '_')
        {
            chars.next();
        }
    }
    out
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
fn the_posting_path_compiles_to_the_ptx_it_had_before_run_time_deadlines() {
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

#[test]
fn numbers_are_left_out_of_registers_and_labels_only() {
    assert_eq!(
        without_numbers("add.s64 %rd12, %rd3, 64; @%p1 bra $L__BB3_7;"),
        "add.s64 %rd, %rd, 64; @%p bra $L__BB;"
    );
    assert_eq!(
        without_numbers("ld.param.u64 %rd1, [k_param_0+40];"),
        "ld.param.u64 %rd, [k_param_0+40];"
    );
}
