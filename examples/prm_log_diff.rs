//! Compares two command logs (the emulated ConnectX's `IBGDA_EMU_LOG` format,
//! `ibgda::nic::prm::log`) field by field: which commands correspond (by opcode and the
//! role of their object), every field whose decoded value differs, the commands only one
//! log has, and the commands ibgda's decoder refuses.
//!
//! ```sh
//! cargo run -p ibgda --example prm_log_diff -- nvshmem.log ibgda.log
//! cargo run -p ibgda --example prm_log_diff -- --all nvshmem.log ibgda.log   # with QPNs, CQNs, ...
//! cargo run -p ibgda --example prm_log_diff -- --list nvshmem.log   # one line per command
//! ```
//!
//! `--list` prints every command of one log (sequence number, PRM name and opcode, the
//! role of its object, the entry point, errno, the call's attributes, and why ibgda's decoder refuses it if it
//! does): the last line is the last command the program sent.
//!
//! Exit status: 0 when the logs were read (whatever they differ in), 2 when an argument or
//! a log is wrong.

use std::process::ExitCode;

use ibgda::nic::prm::{diff, log};

const USAGE: &str = "usage: prm_log_diff [--all] A.log B.log | prm_log_diff --list A.log\n\
    --all: also list fields holding numbers the device assigned (QPN, CQN, UMEM id, ...)\n\
    --list: one line per command of one log";

fn read(path: &str) -> Result<Vec<log::CommandRecord>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    log::parse(&text).map_err(|e| format!("{path}: {e}"))
}

fn run(args: &[String]) -> Result<String, String> {
    let mut all = false;
    let mut list = false;
    let mut paths = Vec::new();
    for arg in args {
        match arg.as_str() {
            "--all" => all = true,
            "--list" => list = true,
            "-h" | "--help" => return Ok(USAGE.to_owned()),
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}\n{USAGE}")),
            path => paths.push(path),
        }
    }
    if list {
        let [a] = paths[..] else {
            return Err(format!(
                "--list takes one log, got {}\n{USAGE}",
                paths.len()
            ));
        };
        let mut text = String::new();
        for v in diff::view(&read(a)?) {
            let errno = v.field("errno").map_or(String::new(), |e| e.to_string());
            let attributes: String = v
                .fields
                .iter()
                .filter_map(|f| {
                    f.name
                        .strip_prefix("attribute ")
                        .map(|k| format!(" {k}={}", f.value))
                })
                .collect();
            text.push_str(&format!(
                "{:>5} {} (opcode {:#06x}) [{}] {} errno={}{}{}\n",
                v.seq,
                v.name,
                v.opcode,
                v.role,
                v.call,
                errno,
                attributes,
                v.refused.as_deref().map_or(String::new(), |r| format!(
                    " refused by ibgda's decoder: {r}"
                ))
            ));
        }
        return Ok(text);
    }
    let [a, b] = paths[..] else {
        return Err(format!("expected two logs, got {}\n{USAGE}", paths.len()));
    };
    let (ra, rb) = (read(a)?, read(b)?);
    Ok(diff::diff(&ra, &rb).report(a, b, all))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("prm_log_diff: {e}");
            ExitCode::from(2)
        }
    }
}
