//! Every probe of the host runs on a thread of its own under a time limit, so that no
//! driver call can hang the doctor: a probe records what it found as it goes, and when the
//! limit passes the doctor reports what was found so far and which step never returned
//! (the thread is left behind; the process exits without waiting for it). A panicking
//! probe is reported the same way, with its message.

use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::Duration;

/// What a probe found, filled in as it runs, and the step it is in.
#[derive(Debug)]
pub struct Progress<T> {
    facts: Mutex<(T, &'static str)>,
}

impl<T> Progress<T> {
    /// Enters `step` (reported if the probe never comes back from it).
    pub fn step(&self, step: &'static str) {
        self.facts.lock().unwrap_or_else(PoisonError::into_inner).1 = step;
    }

    /// Records what a step found.
    pub fn record(&self, write: impl FnOnce(&mut T)) {
        write(&mut self.facts.lock().unwrap_or_else(PoisonError::into_inner).0);
    }
}

/// How a probe ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It returned.
    Finished,
    /// It was still in `step` when the limit passed.
    TimedOut {
        /// The step.
        step: &'static str,
        /// The limit.
        limit: Duration,
    },
    /// It panicked in `step`.
    Panicked {
        /// The step.
        step: &'static str,
        /// The panic's message.
        message: String,
    },
}

impl Ending {
    /// Why the probe stopped early, for a row: `None` when it finished.
    pub fn reason(&self) -> Option<String> {
        match self {
            Self::Finished => None,
            Self::TimedOut { step, limit } => Some(format!(
                "{step} did not return within {} s (the call is left running)",
                limit.as_secs_f64()
            )),
            Self::Panicked { step, message } => Some(format!("{step} panicked: {message}")),
        }
    }
}

/// Runs `probe` on its own thread with `initial` facts; returns the facts it recorded and
/// how it ended, after at most `limit`.
pub fn run<T, F>(initial: T, limit: Duration, probe: F) -> (T, Ending)
where
    T: Clone + Send + 'static,
    F: FnOnce(&Progress<T>) + Send + 'static,
{
    let progress = Arc::new(Progress {
        facts: Mutex::new((initial, "starting")),
    });
    let (done, finished) = mpsc::channel();
    let worker = progress.clone();
    let spawned = std::thread::Builder::new()
        .name("ibgda-doctor-probe".into())
        .spawn(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                probe(&worker);
            }));
            let _ = done.send(outcome.err().map(|payload| panic_message(&*payload)));
        });
    let ending = match spawned {
        Err(e) => Ending::Panicked {
            step: "starting",
            message: format!("no thread for the probe: {e}"),
        },
        Ok(_) => match finished.recv_timeout(limit) {
            Ok(None) => Ending::Finished,
            Ok(Some(message)) => Ending::Panicked {
                step: current_step(&progress),
                message,
            },
            Err(mpsc::RecvTimeoutError::Timeout) => Ending::TimedOut {
                step: current_step(&progress),
                limit,
            },
            Err(mpsc::RecvTimeoutError::Disconnected) => Ending::Panicked {
                step: current_step(&progress),
                message: "the probe thread ended without reporting".into(),
            },
        },
    };
    let facts = progress
        .facts
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .0
        .clone();
    (facts, ending)
}

fn current_step<T>(progress: &Progress<T>) -> &'static str {
    progress
        .facts
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .1
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_finished_probe_returns_everything_it_recorded() {
        let (facts, ending) = run(Vec::new(), Duration::from_secs(5), |p| {
            p.step("one");
            p.record(|v: &mut Vec<u32>| v.push(1));
            p.step("two");
            p.record(|v| v.push(2));
        });
        assert_eq!(facts, [1, 2]);
        assert_eq!(ending, Ending::Finished);
        assert_eq!(ending.reason(), None);
    }

    #[test]
    fn a_hanging_probe_is_cut_off_at_the_limit_naming_its_step() {
        let start = Instant::now();
        let (facts, ending) = run(0u32, Duration::from_millis(200), |p| {
            p.record(|n| *n = 7);
            p.step("a call that never returns");
            std::thread::sleep(Duration::from_secs(3600));
        });
        let elapsed = start.elapsed();
        assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
        assert_eq!(facts, 7);
        assert_eq!(
            ending,
            Ending::TimedOut {
                step: "a call that never returns",
                limit: Duration::from_millis(200)
            }
        );
        assert!(ending
            .reason()
            .unwrap()
            .contains("a call that never returns did not return within 0.2 s"));
    }

    #[test]
    fn a_panicking_probe_is_reported_with_its_message() {
        let (facts, ending) = run(0u32, Duration::from_secs(5), |p| {
            p.record(|n| *n = 3);
            p.step("cuInit");
            panic!("the driver library has no cuInit");
        });
        assert_eq!(facts, 3);
        assert_eq!(
            ending,
            Ending::Panicked {
                step: "cuInit",
                message: "the driver library has no cuInit".into()
            }
        );
    }
}
