//! The background engine: a thread that steps a fabric until told to stop.

use core::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::fabric::Fabric;

/// Idle steps spent spinning before the engine starts yielding its core.
const SPIN_STEPS: u32 = 64;
/// Idle steps spent yielding before the engine starts sleeping.
const YIELD_STEPS: u32 = 1024;
/// How long an idle engine sleeps between steps.
const IDLE_SLEEP: Duration = Duration::from_micros(50);

/// A running background engine. Dropping it (or calling [`EngineHandle::stop`]) stops the
/// thread and joins it.
#[derive(Debug)]
#[must_use = "dropping the handle stops the engine"]
pub struct EngineHandle {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EngineHandle {
    pub(crate) fn spawn(fabric: Fabric) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ibgda-softnic".into())
            .spawn(move || run(&fabric, &flag))
            .ok();
        Self { stop, thread }
    }

    /// Whether the thread is running (it could not be started if the OS refused).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for EngineHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run(fabric: &Fabric, stop: &AtomicBool) {
    let mut idle = 0u32;
    while !stop.load(Ordering::Acquire) {
        if fabric.step().made_progress() {
            idle = 0;
            continue;
        }
        idle = idle.saturating_add(1);
        if idle < SPIN_STEPS {
            core::hint::spin_loop();
        } else if idle < YIELD_STEPS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(IDLE_SLEEP);
        }
    }
}
