//! The test binaries that run their cases themselves (harness = false): the selection of
//! cases from the command line, each outcome and the summary line in libtest's format, so
//! that `cargo test` output reads the same.

use std::process::ExitCode;

/// How one case ended: `Ok(None)` passed, `Ok(Some(why))` could not run here, `Err(why)`
/// failed.
pub type CaseResult = Result<Option<String>, String>;

/// Runs the cases the command line selects (`--list` lists them; each argument not
/// starting with `-` keeps the cases whose name contains it), printing each outcome as
/// libtest does. A case that cannot run is ignored, unless `required` names the setting
/// that demands it (`IBGDA_REQUIRE_EMU=1`): then it fails. Returns the summary's exit code.
#[allow(dead_code)] // not every binary including this module runs its cases through it
pub fn run_selected<T>(
    title: &str,
    cases: &[T],
    name: impl Fn(&T) -> &str,
    required: Option<&str>,
    run: impl FnMut(&T) -> CaseResult,
) -> ExitCode {
    run_selected_where(title, cases, name, required, |_| None, run)
}

/// [`run_selected`], where `elsewhere` names the cases that belong on another kind of
/// host (a GPU machine, or one without a GPU) and why: those are reported ignored with
/// that reason and not run, even when `required` is set (it demands what every host of
/// the run has, such as the emulator, not another machine).
#[allow(dead_code)] // not every binary including this module runs its cases through it
pub fn run_selected_where<T>(
    title: &str,
    cases: &[T],
    name: impl Fn(&T) -> &str,
    required: Option<&str>,
    elsewhere: impl Fn(&T) -> Option<String>,
    mut run: impl FnMut(&T) -> CaseResult,
) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for case in cases {
            println!("{}: test", name(case));
        }
        return ExitCode::SUCCESS;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let selected: Vec<&T> = cases
        .iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| name(c).contains(f.as_str())))
        .collect();
    println!("{title}");
    println!("\nrunning {} tests", selected.len());
    let (mut passed, mut failed, mut ignored) = (0, 0, 0);
    for case in selected {
        let case_name = name(case);
        if let Some(reason) = elsewhere(case) {
            ignored += 1;
            println!("test {case_name} ... ignored, {reason}");
            continue;
        }
        match (run(case), required) {
            (Ok(None), _) => {
                passed += 1;
                println!("test {case_name} ... ok");
            }
            (Ok(Some(reason)), None) => {
                ignored += 1;
                println!("test {case_name} ... ignored, {reason}");
            }
            (Ok(Some(reason)), Some(setting)) => {
                failed += 1;
                println!("test {case_name} ... FAILED\n    {setting} but {reason}");
            }
            (Err(why), _) => {
                failed += 1;
                println!("test {case_name} ... FAILED\n    {why}");
            }
        }
    }
    summary(passed, failed, ignored)
}

/// Prints libtest's summary line for the counts and returns the exit code they give.
pub fn summary(passed: usize, failed: usize, ignored: usize) -> ExitCode {
    let verdict = if failed == 0 { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {verdict}. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; 0 filtered out\n"
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
