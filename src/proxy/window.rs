//! Registered windows: what a descriptor's small window indices name.
//!
//! A descriptor never carries an address. Local windows are registrations the worker
//! holds (kept alive while a posted WQE names them); remote windows are a peer's
//! registered regions, by address, length and rkey (the remote NIC enforces the key; the
//! table here bounds every access to the window so that a bad descriptor moves no byte).

use core::fmt;
use std::sync::Arc;

use super::descriptor::{LocalRef, RemoteRef, Request, MAX_PEERS, MAX_WINDOWS};
use crate::queue::Registered;
use crate::softnic::MemoryRegion;
use crate::wqe::{LKey, LocalBuffer, RKey, RemoteAddress, Sge};

/// A local registration usable as a window: its address range and its key.
pub trait LocalRegion: Registered {
    /// The address of the first byte.
    fn region_addr(&self) -> u64;
    /// Length in bytes.
    fn region_len(&self) -> u64;
}

impl LocalRegion for MemoryRegion {
    fn region_addr(&self) -> u64 {
        self.addr()
    }
    fn region_len(&self) -> u64 {
        self.len() as u64
    }
}

/// A local window: a registration the worker keeps alive.
#[derive(Clone)]
pub struct LocalWindow {
    addr: u64,
    len: u64,
    lkey: LKey,
    registration: Arc<dyn Registered>,
}

impl fmt::Debug for LocalWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalWindow")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .field("lkey", &self.lkey)
            .finish()
    }
}

impl LocalWindow {
    /// The whole of `region` as a window.
    pub fn new<R: LocalRegion>(region: R) -> Self {
        Self {
            addr: region.region_addr(),
            len: region.region_len(),
            lkey: region.lkey(),
            registration: Arc::new(region),
        }
    }
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The registration, to keep alive with a WQE that names it.
    pub fn registration(&self) -> Arc<dyn Registered> {
        self.registration.clone()
    }
    fn span(&self, offset: u64, len: u64) -> Option<u64> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        self.addr.checked_add(offset)
    }
}

/// A peer's window: remote memory by address, length and key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteWindow {
    addr: u64,
    len: u64,
    rkey: RKey,
}

impl RemoteWindow {
    /// A peer's registered region at `addr` of `len` bytes under `rkey` (as the peer
    /// advertised it; only the peer's NIC dereferences it, and checks the key).
    pub fn new(addr: u64, len: u64, rkey: RKey) -> Self {
        Self { addr, len, rkey }
    }
    /// The whole of a software-NIC region as a remote window.
    pub fn of(region: &MemoryRegion) -> Self {
        Self::new(region.addr(), region.len() as u64, region.rkey())
    }
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    fn at(&self, offset: u64, len: u64) -> Option<RemoteAddress> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        Some(RemoteAddress::new(
            self.addr.checked_add(offset)?,
            self.rkey,
        ))
    }
}

/// Which table a window index was looked up in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowSide {
    /// The worker's local windows.
    Local,
    /// A peer's windows.
    Remote {
        /// The peer.
        peer: u8,
    },
}

/// Why a decoded request does not fit the worker's tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WindowError {
    /// The peer index names no connection of this worker.
    NoSuchPeer {
        /// The peer.
        peer: u8,
        /// Peers the worker has.
        peers: usize,
    },
    /// The window index names no window.
    NoSuchWindow {
        /// Which table.
        side: WindowSide,
        /// The index.
        window: u8,
        /// Windows in the table.
        windows: usize,
    },
    /// The access leaves the window.
    OutOfWindow {
        /// Which table.
        side: WindowSide,
        /// The index.
        window: u8,
        /// Byte offset of the access.
        offset: u32,
        /// Its length.
        len: u32,
        /// The window's length.
        window_len: u64,
    },
    /// An atomic whose 8-byte operand is not 8-byte aligned in its window.
    Misaligned {
        /// The offset.
        offset: u32,
    },
    /// The ring's result slot is not inside the results window.
    NoResultSlot {
        /// The slot.
        slot: u64,
    },
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchPeer { peer, peers } => {
                write!(f, "peer {peer} does not exist (the worker has {peers})")
            }
            Self::NoSuchWindow {
                side,
                window,
                windows,
            } => write!(
                f,
                "{side:?} window {window} does not exist ({windows} windows)"
            ),
            Self::OutOfWindow {
                side,
                window,
                offset,
                len,
                window_len,
            } => write!(
                f,
                "{len} bytes at {offset} leave {side:?} window {window} of {window_len} bytes"
            ),
            Self::Misaligned { offset } => {
                write!(f, "atomic operand at offset {offset} is not 8-byte aligned")
            }
            Self::NoResultSlot { slot } => {
                write!(f, "result slot {slot} is outside the results window")
            }
        }
    }
}

impl std::error::Error for WindowError {}

/// Why [`Windows::new`] refused its tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WindowTableError {
    /// More peers than a descriptor can name.
    TooManyPeers {
        /// Peers given.
        peers: usize,
    },
    /// More windows in one table than a descriptor can name.
    TooManyWindows {
        /// Which table.
        side: WindowSide,
        /// Windows given.
        windows: usize,
    },
}

impl fmt::Display for WindowTableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyPeers { peers } => {
                write!(f, "{peers} peers exceed the descriptor's {MAX_PEERS}")
            }
            Self::TooManyWindows { side, windows } => write!(
                f,
                "{windows} {side:?} windows exceed the descriptor's {MAX_WINDOWS}"
            ),
        }
    }
}

impl std::error::Error for WindowTableError {}

/// The window tables of a proxy: local windows, each peer's windows, and the results
/// window where fetch-add and compare-swap results land (8 bytes per ring slot).
#[derive(Clone, Debug)]
pub struct Windows {
    local: Vec<LocalWindow>,
    remote: Vec<Vec<RemoteWindow>>,
}

/// A request resolved against the tables: the typed pieces of its WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// 8-byte inline WRITE.
    WriteInline8 {
        /// Destination.
        remote: RemoteAddress,
        /// The bytes to write.
        bytes: [u8; 8],
    },
    /// WRITE from local memory (local window `window`).
    Write {
        /// Destination.
        remote: RemoteAddress,
        /// Source.
        sge: Sge,
        /// The local window (kept alive with the WQE).
        window: u8,
    },
    /// READ into local memory (local window `window`).
    Read {
        /// Source.
        remote: RemoteAddress,
        /// Destination.
        sge: Sge,
        /// The local window.
        window: u8,
    },
    /// Fetch-add (signals too) with its result buffer.
    FetchAdd {
        /// The counter.
        remote: RemoteAddress,
        /// Where the old value lands.
        result: LocalBuffer,
        /// The addend.
        add: u64,
    },
    /// Compare-swap with its result buffer.
    CompareSwap {
        /// The word.
        remote: RemoteAddress,
        /// Where the old value lands.
        result: LocalBuffer,
        /// Compare value.
        compare: u64,
        /// Swap value.
        swap: u64,
    },
}

impl Windows {
    /// Tables of `local` windows and, per peer, its `remote` windows.
    pub fn new(
        local: Vec<LocalWindow>,
        remote: Vec<Vec<RemoteWindow>>,
    ) -> Result<Self, WindowTableError> {
        if remote.len() > MAX_PEERS {
            return Err(WindowTableError::TooManyPeers {
                peers: remote.len(),
            });
        }
        if local.len() > MAX_WINDOWS {
            return Err(WindowTableError::TooManyWindows {
                side: WindowSide::Local,
                windows: local.len(),
            });
        }
        for (peer, windows) in remote.iter().enumerate() {
            if windows.len() > MAX_WINDOWS {
                return Err(WindowTableError::TooManyWindows {
                    side: WindowSide::Remote { peer: peer as u8 },
                    windows: windows.len(),
                });
            }
        }
        Ok(Self { local, remote })
    }

    /// Peers in the table.
    pub fn peers(&self) -> usize {
        self.remote.len()
    }

    /// A local window.
    pub fn local(&self, window: u8) -> Option<&LocalWindow> {
        self.local.get(usize::from(window))
    }

    fn remote(&self, r: RemoteRef, len: u32) -> Result<RemoteAddress, WindowError> {
        let side = WindowSide::Remote { peer: r.peer };
        let windows = self
            .remote
            .get(usize::from(r.peer))
            .ok_or(WindowError::NoSuchPeer {
                peer: r.peer,
                peers: self.remote.len(),
            })?;
        let w = windows
            .get(usize::from(r.window))
            .ok_or(WindowError::NoSuchWindow {
                side,
                window: r.window,
                windows: windows.len(),
            })?;
        w.at(u64::from(r.offset), u64::from(len))
            .ok_or(WindowError::OutOfWindow {
                side,
                window: r.window,
                offset: r.offset,
                len,
                window_len: w.len,
            })
    }

    fn local_span(&self, l: LocalRef, len: u32) -> Result<(u64, LKey), WindowError> {
        let side = WindowSide::Local;
        let w = self
            .local
            .get(usize::from(l.window))
            .ok_or(WindowError::NoSuchWindow {
                side,
                window: l.window,
                windows: self.local.len(),
            })?;
        let addr = w
            .span(u64::from(l.offset), u64::from(len))
            .ok_or(WindowError::OutOfWindow {
                side,
                window: l.window,
                offset: l.offset,
                len,
                window_len: w.len,
            })?;
        Ok((addr, w.lkey))
    }

    /// Resolves `request` against the tables; an atomic's old value lands in `results`
    /// at byte `8 * slot`.
    pub fn resolve(
        &self,
        request: &Request,
        results: &LocalWindow,
        slot: u64,
    ) -> Result<Resolved, WindowError> {
        let result_slot = || {
            let offset = slot
                .checked_mul(8)
                .ok_or(WindowError::NoResultSlot { slot })?;
            let addr = results
                .span(offset, 8)
                .ok_or(WindowError::NoResultSlot { slot })?;
            Ok(LocalBuffer::new(addr, results.lkey))
        };
        let aligned = |r: RemoteRef| {
            if r.offset % 8 == 0 {
                Ok(())
            } else {
                Err(WindowError::Misaligned { offset: r.offset })
            }
        };
        let sge = |addr: u64, len: u32, lkey: LKey| {
            Sge::new(addr, len, lkey).map_err(|_| WindowError::OutOfWindow {
                side: WindowSide::Local,
                window: 0,
                offset: 0,
                len,
                window_len: 0,
            })
        };
        Ok(match *request {
            Request::WriteInline8 { dst, value } => Resolved::WriteInline8 {
                remote: self.remote(dst, 8)?,
                bytes: value.to_le_bytes(),
            },
            Request::Write { dst, src, len } => {
                let remote = self.remote(dst, len)?;
                let (addr, lkey) = self.local_span(src, len)?;
                Resolved::Write {
                    remote,
                    sge: sge(addr, len, lkey)?,
                    window: src.window,
                }
            }
            Request::Read { src, dst, len } => {
                let remote = self.remote(src, len)?;
                let (addr, lkey) = self.local_span(dst, len)?;
                Resolved::Read {
                    remote,
                    sge: sge(addr, len, lkey)?,
                    window: dst.window,
                }
            }
            Request::FetchAdd { dst, add } | Request::Signal { dst, add } => {
                aligned(dst)?;
                Resolved::FetchAdd {
                    remote: self.remote(dst, 8)?,
                    result: result_slot()?,
                    add,
                }
            }
            Request::CompareSwap { dst, compare, swap } => {
                aligned(dst)?;
                Resolved::CompareSwap {
                    remote: self.remote(dst, 8)?,
                    result: result_slot()?,
                    compare: u64::from(compare),
                    swap: u64::from(swap),
                }
            }
        })
    }
}
