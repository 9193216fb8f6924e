//! The test binaries that run their cases themselves (harness = false): the selection of
//! cases from the command line, each outcome and the summary line in libtest's format, so
//! that `cargo test` output reads the same.

use std::process::ExitCode;

/// How one case ended: `Ok(None)` passed, `Ok(Some(why))` could not run here, `Err(why)`
/// failed.
pub type CaseResult = Result<Option<String>, String>;

/// How one case ended, for [`Tally::record`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ran {
    /// It passed.
    Passed,
    /// It could not run here. `allowed`: the reason is on the run's allow-list (the case
    /// cannot apply to what the run tests, by its nature), which a required run accepts.
    Ignored { reason: String, allowed: bool },
    /// It failed.
    Failed(String),
}

/// The counts of a run; [`Tally::record`] prints each outcome as libtest does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub passed: usize,
    pub failed: usize,
    pub ignored: usize,
}

impl Tally {
    /// Records and prints how `case` ended, and returns the text printed. When `required`
    /// names the setting that demands every case run (`IBGDA_REQUIRE_EMU=1`), a case
    /// ignored for a reason not on the allow-list fails, the text naming the case, the
    /// setting and the reason.
    pub fn record(&mut self, case: &str, ran: Ran, required: Option<&str>) -> String {
        let line = match (ran, required) {
            (Ran::Passed, _) => {
                self.passed += 1;
                format!("test {case} ... ok")
            }
            (Ran::Ignored { reason, .. }, None)
            | (
                Ran::Ignored {
                    reason,
                    allowed: true,
                },
                Some(_),
            ) => {
                self.ignored += 1;
                format!("test {case} ... ignored, {reason}")
            }
            (
                Ran::Ignored {
                    reason,
                    allowed: false,
                },
                Some(setting),
            ) => {
                self.failed += 1;
                format!(
                    "test {case} ... FAILED\n    {setting} requires every case to run (or be \
                     ignored for a reason its allow-list gives it), and {case} was ignored: \
                     {reason}"
                )
            }
            (Ran::Failed(why), _) => {
                self.failed += 1;
                format!("test {case} ... FAILED\n    {why}")
            }
        };
        println!("{line}");
        line
    }

    /// Prints the summary line and returns the exit code it gives.
    pub fn finish(self) -> ExitCode {
        summary(self.passed, self.failed, self.ignored)
    }
}

/// `Some("NAME=1")` when the environment variable `name` is `1`: the run requires every
/// case to run (CI), for [`Tally::record`].
#[allow(dead_code)] // not every binary including this module reads one
pub fn required(name: &str) -> Option<String> {
    std::env::var(name)
        .is_ok_and(|v| v == "1")
        .then(|| format!("{name}=1"))
}

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
    let mut tally = Tally::default();
    for case in selected {
        let case_name = name(case);
        let ran = if let Some(reason) = elsewhere(case) {
            Ran::Ignored {
                reason,
                allowed: true,
            }
        } else {
            match run(case) {
                Ok(None) => Ran::Passed,
                Ok(Some(reason)) => Ran::Ignored {
                    reason,
                    allowed: false,
                },
                Err(why) => Ran::Failed(why),
            }
        };
        tally.record(case_name, ran, required);
    }
    tally.finish()
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
