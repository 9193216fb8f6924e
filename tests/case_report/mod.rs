//! The summary line of the test binaries that run their cases themselves (harness =
//! false), in libtest's format, so that `cargo test` output reads the same.

use std::process::ExitCode;

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
