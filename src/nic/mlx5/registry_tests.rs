//! The registry of UAR pages mapped into the GPU under concurrent mapping and unmapping of
//! one page: the driver (a model here) refuses a page that is still registered, so a page
//! must never be mapped again while its last mapping is being unmapped.

use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::devx::{Mapped, PageRegistry};
use crate::nic::gpu_access::{DoorbellMapping, IoMapping};

/// The driver's table of registered host ranges, as `cuMemHostRegister` keeps it, and a
/// count of unregistrations begun (for a thread to act while one is in progress).
#[derive(Debug, Default)]
struct Driver {
    registered: Mutex<HashSet<usize>>,
    unmaps_begun: Mutex<u32>,
    unmap_begins: Condvar,
}

#[derive(Debug)]
struct Registration {
    driver: Arc<Driver>,
    start: usize,
}

// SAFETY: a model: the "device address" is the host address, for the test only.
unsafe impl IoMapping for Registration {
    fn device_addr(&self) -> u64 {
        self.start as u64
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        *self.driver.unmaps_begun.lock().unwrap() += 1;
        self.driver.unmap_begins.notify_all();
        // Unregistering takes a while; the page is registered until it returns.
        std::thread::sleep(Duration::from_millis(20));
        self.driver.registered.lock().unwrap().remove(&self.start);
    }
}

impl Driver {
    /// `cuMemHostRegister`: refused while the page is registered ("already registered").
    fn register(self: &Arc<Self>, start: usize) -> Result<Box<dyn IoMapping>, String> {
        if !self.registered.lock().unwrap().insert(start) {
            return Err(format!("page {start:#x} is already registered"));
        }
        Ok(Box::new(Registration {
            driver: self.clone(),
            start,
        }))
    }

    /// Waits until more than `seen` unregistrations have begun.
    fn wait_for_unmap(&self, seen: u32) {
        let mut begun = self.unmaps_begun.lock().unwrap();
        while *begun <= seen {
            begun = self.unmap_begins.wait(begun).unwrap();
        }
    }
}

fn map(driver: &Arc<Driver>, page: usize) -> impl FnOnce() -> Result<Mapped, String> + '_ {
    move || {
        driver.register(page).map(|m| {
            (
                m,
                Box::new(()) as Box<dyn Send + Sync>,
                DoorbellMapping::IoMemory,
            )
        })
    }
}

#[test]
fn a_page_mapped_while_its_last_mapping_is_being_unmapped_waits_for_it() {
    let registry: &'static PageRegistry = Box::leak(Box::new(PageRegistry::new()));
    let driver = Arc::new(Driver::default());
    const PAGE: usize = 0x7f00_0000_0000;
    for round in 0..5 {
        let page = registry.acquire(PAGE, map(&driver, PAGE)).unwrap();
        std::thread::scope(|s| {
            // Another queue's doorbell on the same page, made while this one's teardown
            // unmaps the page.
            let mapper = s.spawn(|| {
                driver.wait_for_unmap(round);
                registry.acquire(PAGE, map(&driver, PAGE))
            });
            drop(page);
            let again = mapper.join().unwrap();
            assert!(again.is_ok(), "round {round}: {:?}", again.err());
            drop(again);
        });
    }
    assert_eq!(registry.mapped(), 0, "the last use unmapped the page");
    assert!(driver.registered.lock().unwrap().is_empty());
}

#[test]
fn doorbells_of_one_page_share_one_mapping_until_the_last_goes() {
    let registry: &'static PageRegistry = Box::leak(Box::new(PageRegistry::new()));
    let driver = Arc::new(Driver::default());
    let first = registry.acquire(0x1000, map(&driver, 0x1000)).unwrap();
    let second = registry
        .acquire(0x1000, || Err("mapped again".to_owned()))
        .unwrap();
    assert_eq!(registry.mapped(), 1);
    drop(first);
    assert_eq!(registry.mapped(), 1, "still used");
    assert!(driver.registered.lock().unwrap().contains(&0x1000));
    drop(second);
    assert_eq!(registry.mapped(), 0);
    assert!(driver.registered.lock().unwrap().is_empty());
}
