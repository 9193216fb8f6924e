//! The host build of the device API's planning and the device library's WQE builders
//! (`cuda/api_host.cpp`, compiled by `build.rs`): one call of an operation built into a
//! host ring, for the tests that compare every operation's WQEs with the Rust builders'
//! and execute them on the software NICs, without a GPU.

use ibgda::nic::{Backend, DeviceWindow, DeviceWindowPeer, MemoryRegion, Window};
use ibgda::queue::DeviceQueueDescriptor;
use ibgda::wqe::{Qpn, RingSize, WQEBB_BYTES};

use super::layouts::{ApiCall, DeviceComm, DeviceStatus, PUT_INLINE_MAX};

#[cfg(not(ibgda_no_host_engine))]
extern "C" {
    fn ibgda_api_host_build(
        comm: *const DeviceComm,
        windows: *const DeviceWindow,
        n_windows: u32,
        call: *const ApiCall,
        queue: *const DeviceQueueDescriptor,
        start: u64,
        wqebbs: *mut u32,
    ) -> i32;
}

/// Stand-in when the host build was left out (`IBGDA_SKIP_HOST_ENGINE=1`): every call
/// fails, so the tests fail rather than pass.
///
/// # Safety
///
/// None needed (it touches nothing); `unsafe` only to match the real declaration.
#[cfg(ibgda_no_host_engine)]
unsafe fn ibgda_api_host_build(
    _: *const DeviceComm,
    _: *const DeviceWindow,
    _: u32,
    _: *const ApiCall,
    _: *const DeviceQueueDescriptor,
    _: u64,
    _: *mut u32,
) -> i32 {
    i32::MIN
}

/// A send ring in host memory with the descriptor fields the builders read (QPN, size,
/// signal interval), 64-byte aligned.
#[derive(Debug)]
pub struct HostRing {
    blocks: Vec<[u128; 4]>,
    qpn: Qpn,
    size: RingSize,
    signal_interval: u32,
}

impl HostRing {
    /// A ring of `size` WQEBBs for queue `qpn`, a WQE crossing a multiple of
    /// `signal_interval` (at least 1) WQEBBs signaled, every byte `fill`.
    pub fn new(qpn: Qpn, size: RingSize, signal_interval: u32, fill: u8) -> Self {
        let mut ring = Self {
            blocks: vec![[0; 4]; size.wqebbs() as usize],
            qpn,
            size,
            signal_interval: signal_interval.max(1),
        };
        ring.fill(fill);
        ring
    }

    /// Sets every byte to `byte`.
    pub fn fill(&mut self, byte: u8) {
        let word = u128::from_ne_bytes([byte; 16]);
        self.blocks.iter_mut().for_each(|b| *b = [word; 4]);
    }

    /// The ring's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        self.blocks
            .iter()
            .flat_map(|b| b.iter().flat_map(|w| w.to_ne_bytes()))
            .collect()
    }

    /// The ring's size.
    pub fn size(&self) -> RingSize {
        self.size
    }

    fn descriptor(&mut self) -> DeviceQueueDescriptor {
        DeviceQueueDescriptor {
            sq_ring: self.blocks.as_mut_ptr() as u64,
            qpn: self.qpn.get(),
            log_sq_wqebbs: self.size.wqebbs().trailing_zeros(),
            max_inline: PUT_INLINE_MAX as u32,
            signal_interval: self.signal_interval,
            ..Default::default()
        }
    }
}

const _: () = assert!(core::mem::size_of::<[u128; 4]>() == WQEBB_BYTES);

/// A communicator's fields the planning reads: the scratch word for unfetched results and
/// the inline limit.
#[derive(Clone, Copy, Debug)]
pub struct HostComm {
    comm: DeviceComm,
}

impl HostComm {
    /// `n_peers` peers, `rank`'s view, results nobody reads to the first 8 bytes of
    /// `scratch`, puts of at most `inline_max` bytes inline.
    pub fn new<B: Backend>(
        n_peers: u32,
        rank: u32,
        scratch: &MemoryRegion<B>,
        inline_max: u32,
    ) -> Self {
        Self {
            comm: DeviceComm {
                scratch: scratch.addr(),
                scratch_lkey: scratch.lkey().0,
                n_peers,
                rank,
                inline_max: inline_max.min(PUT_INLINE_MAX as u32),
                doorbell_batch: 1,
                wait_ns: 1,
                ..Default::default()
            },
        }
    }

    /// The descriptor.
    pub fn device(&self) -> &DeviceComm {
        &self.comm
    }
}

/// Plans `call` over `windows` with the device API's own code built for the host and
/// builds its WQEs into `ring` from WQEBB counter `start` on; returns the WQEBBs built, or
/// the status the device would return (no byte of the ring changed).
///
/// # Safety
///
/// Every window's local side must be host memory of this process, readable for its
/// whole length and not written while the call runs (an inline put copies its payload
/// from there; nothing else of any window is dereferenced: remote addresses, keys and
/// result addresses are only encoded).
pub unsafe fn host_build(
    comm: &HostComm,
    windows: &[&Window],
    call: &ApiCall,
    ring: &mut HostRing,
    start: u64,
) -> Result<u32, DeviceStatus> {
    let tables: Vec<Vec<DeviceWindowPeer>> = windows.iter().map(|w| w.device_peers()).collect();
    let descriptors: Vec<DeviceWindow> = windows
        .iter()
        .zip(&tables)
        .map(|(w, t)| w.device_window(t.as_ptr() as u64))
        .collect();
    let n = u32::try_from(descriptors.len()).map_err(|_| DeviceStatus::BadPeer)?;
    let queue = ring.descriptor();
    let mut wqebbs = 0u32;
    // SAFETY: every pointer is to memory owned here or borrowed for the call: the
    // communicator, the window descriptors and their peer tables (each `n_peers` records,
    // alive in `tables`), the call, the ring (2^log_sq_wqebbs WQEBBs, written only at
    // slots masked into it) and the out-parameter. The planning reads a window's local
    // side only for an inline put, within the bounds it checked against the window's
    // length (the caller's contract makes that memory readable). Remote addresses and
    // result addresses are only written into WQE bytes.
    let status = unsafe {
        ibgda_api_host_build(
            comm.device(),
            descriptors.as_ptr(),
            n,
            call,
            &queue,
            start,
            &mut wqebbs,
        )
    };
    match DeviceStatus::from_code(status) {
        DeviceStatus::Ok => Ok(wqebbs),
        other => Err(other),
    }
}
