//! The control-plane suite's runner (`tests/nic_support`) under CI's requirement
//! (`IBGDA_REQUIRE_EMU=1`, which `scripts/test` sets): a case may be ignored only for the
//! kind of inapplicability the allow-list gives it, and everything else that makes a case
//! ignored (a device that does not open, an operation the backend reports unsupported, an
//! inapplicability the case is not listed with) fails the run, naming the case and the
//! reason. Without the requirement the same cases are reported ignored.

mod case_report;
mod nic_support;

use case_report::{Ran, Tally};
use ibgda::nic::NicError;
use nic_support::*;

const REQUIRED: Option<&str> = Some("IBGDA_REQUIRE_EMU=1");

fn passes<H: Harness>(_: &H) -> CaseResult {
    Ok(())
}

fn no_gpu<H: Harness>(_: &H) -> CaseResult {
    Err(CaseError::NotApplicable(
        NotApplicable::NoGpu,
        "this binary links no CUDA".into(),
    ))
}

fn infiniband_port<H: Harness>(_: &H) -> CaseResult {
    Err(CaseError::NotApplicable(
        NotApplicable::InfiniBandPort,
        "InfiniBand ports send no UDP".into(),
    ))
}

fn unsupported<H: Harness>(_: &H) -> CaseResult {
    Err(NicError::Unsupported {
        what: "DC targets on this backend".into(),
    }
    .into())
}

/// Cases named as the suite's, each ending as its function says (`nic_support`'s hardware
/// runner names `cases`; this binary never calls it).
fn cases<H: Harness>() -> Vec<Case<H>> {
    vec![
        // On the allow-list with this kind.
        Case {
            name: "gpu_placed_queues",
            run: no_gpu::<H>,
        },
        Case {
            name: "roce_rc_queue_pairs_get_their_own_udp_source_ports",
            run: infiniband_port::<H>,
        },
        // A kind of inapplicability the case is not listed with.
        Case {
            name: "rc_loopback_every_operation",
            run: no_gpu::<H>,
        },
        // Unsupported by the backend: never on the allow-list.
        Case {
            name: "dci_full_av_reaches_dct",
            run: unsupported::<H>,
        },
        Case {
            name: "teardown_in_any_drop_order",
            run: passes::<H>,
        },
    ]
}

#[test]
fn a_required_run_fails_every_ignore_the_allow_list_does_not_give() {
    let cases = cases::<SoftHarness>();
    let selected: Vec<&Case<SoftHarness>> = cases.iter().collect();
    assert_eq!(
        run_cases(&selected, || Ok(SoftHarness::new()), REQUIRED),
        Tally {
            passed: 1,
            failed: 2,
            ignored: 2
        }
    );
    assert_eq!(
        run_cases(&selected, || Ok(SoftHarness::new()), None),
        Tally {
            passed: 1,
            failed: 0,
            ignored: 4
        }
    );
}

#[test]
fn a_device_that_does_not_open_fails_every_case_of_a_required_run() {
    let cases = cases::<SoftHarness>();
    let selected: Vec<&Case<SoftHarness>> = cases.iter().collect();
    let no_device = || Err::<SoftHarness, _>("no RDMA device named `mlx5_0`".to_owned());
    assert_eq!(
        run_cases(&selected, no_device, REQUIRED),
        Tally {
            passed: 0,
            failed: 5,
            ignored: 0
        }
    );
    assert_eq!(
        run_cases(&selected, no_device, None),
        Tally {
            passed: 0,
            failed: 0,
            ignored: 5
        }
    );
}

#[test]
fn the_failure_names_the_case_the_setting_and_the_reason() {
    let mut tally = Tally::default();
    let line = tally.record(
        "rc_loopback_every_operation",
        Ran::Ignored {
            reason: "no RDMA device named `mlx5_0`".into(),
            allowed: false,
        },
        REQUIRED,
    );
    assert_eq!(
        line,
        "test rc_loopback_every_operation ... FAILED\n    IBGDA_REQUIRE_EMU=1 requires every \
         case to run (or be ignored for a reason its allow-list gives it), and \
         rc_loopback_every_operation was ignored: no RDMA device named `mlx5_0`"
    );
    let line = tally.record(
        "gpu_placed_queues",
        Ran::Ignored {
            reason: "this binary links no CUDA (NoGpu)".into(),
            allowed: true,
        },
        REQUIRED,
    );
    assert_eq!(
        line,
        "test gpu_placed_queues ... ignored, this binary links no CUDA (NoGpu)"
    );
    assert!(!line.contains("passed") && !line.contains(" ok"));
    assert_eq!(
        tally,
        Tally {
            passed: 0,
            failed: 1,
            ignored: 1
        }
    );
}

/// Every entry of the allow-list names a case of the suite, once.
#[test]
fn the_allow_list_names_cases_of_the_suite() {
    let suite = include_str!("nic_suite.rs");
    let mut seen = Vec::new();
    for (case, _) in ALLOWED_IGNORES {
        assert!(
            suite.contains(&format!("name: \"{case}\"")),
            "{case} is not a case of tests/nic_suite.rs"
        );
        assert!(!seen.contains(case), "{case} listed twice");
        seen.push(*case);
    }
}
