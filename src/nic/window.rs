//! Windows: memory a kernel may reach on every peer, named by a window, a peer and an
//! offset, never by an address.
//!
//! A [`Window`] is made only from what the control plane made and what peers sent: the
//! local side from a [`MemoryRegion`] of this process (its address, length and local key,
//! kept registered as long as the window lives), each peer's side from the
//! [`WindowEndpoint`] that peer encoded from *its* registration and sent over any bootstrap
//! (the connection encoding's kind 3, [`connection`](super::connection)). Nothing else
//! builds one, so an address and key a kernel reaches through a window are always those of
//! a real registration; an offset outside it is refused before a WQE exists
//! ([`Window::remote`], [`Window::local`], and the same checks on the device).
//!
//! Kernels receive a window as a [`DeviceWindow`] (by value) over a table of
//! [`DeviceWindowPeer`] records in device memory, both `#[repr(C)]`, whose C form is
//! generated into the kernels crate's layout header.

use core::fmt;
use core::mem::{offset_of, size_of};
use std::sync::Arc;

use static_assertions::const_assert_eq;

use super::backend::Backend;
use super::connection::{ConnectionError, Endpoint};
use super::device::MemoryRegion;
use crate::queue::Registered;
use crate::wqe::{LKey, LocalBuffer, RKey, RemoteAddress, Sge, WqeError};

const KIND_WINDOW: u8 = 3;

/// What a peer needs to reach one of this process's registrations through a window: the
/// window's id (every process registers the same windows under the same ids), the
/// registration's first byte, its length and its remote key.
///
/// Encoded (connection encoding version 1, kind 3, 32 bytes): magic, version, kind,
/// reserved (2), window id (4), rkey (4), address (8), length (8), big-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowEndpoint {
    /// The window id.
    pub id: u32,
    /// The address of the registration's first byte (a device address for GPU memory).
    pub addr: u64,
    /// Its length in bytes (at least 1; `addr + len` does not overflow).
    pub len: u64,
    /// Its remote key.
    pub rkey: RKey,
}

impl WindowEndpoint {
    fn check(&self) -> Result<(), ConnectionError> {
        if self.len == 0 {
            return Err(ConnectionError::Field {
                field: "window length (0: a window holds at least one byte)",
                value: 0,
                max: u64::MAX - self.addr,
            });
        }
        if self.addr.checked_add(self.len).is_none() {
            return Err(ConnectionError::Field {
                field: "window length (its end overflows the address space)",
                value: self.len,
                max: u64::MAX - self.addr,
            });
        }
        Ok(())
    }
}

impl Endpoint for WindowEndpoint {
    const KIND: u8 = KIND_WINDOW;
    const LEN: usize = 32;

    fn encode(&self) -> Result<Vec<u8>, ConnectionError> {
        self.check()?;
        let mut out = super::connection::header(KIND_WINDOW);
        out.extend_from_slice(&self.id.to_be_bytes());
        out.extend_from_slice(&self.rkey.0.to_be_bytes());
        out.extend_from_slice(&self.addr.to_be_bytes());
        out.extend_from_slice(&self.len.to_be_bytes());
        debug_assert_eq!(out.len(), Self::LEN);
        Ok(out)
    }

    fn decode(bytes: &[u8]) -> Result<Self, ConnectionError> {
        super::connection::check_header(bytes, KIND_WINDOW, Self::LEN)?;
        let u32_at = |at: usize| {
            u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let u64_at = |at: usize| (u64::from(u32_at(at)) << 32) | u64::from(u32_at(at + 4));
        let endpoint = Self {
            id: u32_at(8),
            rkey: RKey(u32_at(12)),
            addr: u64_at(16),
            len: u64_at(24),
        };
        endpoint.check()?;
        Ok(endpoint)
    }
}

impl<B: Backend> MemoryRegion<B> {
    /// The endpoint of this registration as window `id`, for the peers.
    pub fn window_endpoint(&self, id: u32) -> WindowEndpoint {
        WindowEndpoint {
            id,
            addr: self.addr(),
            len: self.len() as u64,
            rkey: self.rkey(),
        }
    }
}

/// Why a window cannot be made, or an offset is not in it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WindowError {
    /// A peer's endpoint is for another window.
    WrongWindow {
        /// The peer (its index in the endpoint list).
        peer: usize,
        /// The id its endpoint carries.
        found: u32,
        /// This window's id.
        expected: u32,
    },
    /// A window with no peer.
    NoPeers,
    /// More peers than a device window holds.
    TooManyPeers {
        /// Peers given.
        peers: usize,
        /// The most a window holds.
        max: usize,
    },
    /// A peer index out of range.
    Peer {
        /// The index.
        peer: usize,
        /// How many peers the window has.
        peers: usize,
    },
    /// `len` bytes at `offset` do not fit the `window_len` bytes of the window's side.
    Bounds {
        /// The offset.
        offset: u64,
        /// The length.
        len: u64,
        /// The length of that side of the window.
        window_len: u64,
    },
    /// An address or a length a WQE cannot carry.
    Wqe(WqeError),
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WrongWindow {
                peer,
                found,
                expected,
            } => write!(
                f,
                "peer {peer} sent the endpoint of window {found}, not of window {expected}"
            ),
            Self::NoPeers => f.write_str("a window needs at least one peer (itself included)"),
            Self::TooManyPeers { peers, max } => {
                write!(f, "{peers} peers, but a window holds at most {max}")
            }
            Self::Peer { peer, peers } => {
                write!(f, "peer {peer} of a window of {peers} peers")
            }
            Self::Bounds {
                offset,
                len,
                window_len,
            } => write!(
                f,
                "{len} bytes at offset {offset} do not fit a {window_len}-byte window"
            ),
            Self::Wqe(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for WindowError {}

impl From<WqeError> for WindowError {
    fn from(e: WqeError) -> Self {
        Self::Wqe(e)
    }
}

/// Whether `len` bytes at `offset` lie in a side of `window_len` bytes (no overflow: a
/// wrapped sum must not pass).
pub fn window_fits(offset: u64, len: u64, window_len: u64) -> bool {
    offset <= window_len && len <= window_len - offset
}

fn fits(offset: u64, len: u64, window_len: u64) -> Result<(), WindowError> {
    if window_fits(offset, len, window_len) {
        Ok(())
    } else {
        Err(WindowError::Bounds {
            offset,
            len,
            window_len,
        })
    }
}

/// The local side of a window: one registration of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalWindow {
    /// The address of the registration's first byte.
    pub addr: u64,
    /// Its length.
    pub len: u64,
    /// Its local key.
    pub lkey: LKey,
}

/// Memory a kernel may reach on every peer: this process's registration (read as put
/// sources, written by gets and atomic results) and each peer's, by peer index.
///
/// Not `Clone`: it keeps the local registration alive, and device tables made from it
/// borrow it.
pub struct Window {
    id: u32,
    local: LocalWindow,
    peers: Vec<WindowEndpoint>,
    _registration: Arc<dyn Registered>,
}

impl fmt::Debug for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Window")
            .field("id", &self.id)
            .field("local", &self.local)
            .field("peers", &self.peers)
            .finish()
    }
}

impl Window {
    /// The most peers a window holds (a rank id on the device is 16 bits).
    pub const MAX_PEERS: usize = 1 << 16;

    /// Window `id` over `region` (this process's side) and the endpoints every peer sent
    /// for the same window, indexed by peer (this process's own endpoint at its own rank,
    /// for loopback). Each endpoint must carry `id`.
    pub fn new<B: Backend>(
        region: &MemoryRegion<B>,
        id: u32,
        peers: Vec<WindowEndpoint>,
    ) -> Result<Self, WindowError> {
        if peers.is_empty() {
            return Err(WindowError::NoPeers);
        }
        if peers.len() > Self::MAX_PEERS {
            return Err(WindowError::TooManyPeers {
                peers: peers.len(),
                max: Self::MAX_PEERS,
            });
        }
        if let Some((peer, e)) = peers.iter().enumerate().find(|(_, e)| e.id != id) {
            return Err(WindowError::WrongWindow {
                peer,
                found: e.id,
                expected: id,
            });
        }
        Ok(Self {
            id,
            local: LocalWindow {
                addr: region.addr(),
                len: region.len() as u64,
                lkey: region.lkey(),
            },
            peers,
            _registration: region.registered(),
        })
    }

    /// The window id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// This process's side.
    pub fn local_side(&self) -> LocalWindow {
        self.local
    }

    /// Every peer's side, by peer index.
    pub fn peers(&self) -> &[WindowEndpoint] {
        &self.peers
    }

    /// How many peers the window has.
    pub fn n_peers(&self) -> usize {
        self.peers.len()
    }

    /// `len` bytes at `offset` of `peer`'s side, as a WQE names them.
    pub fn remote(&self, peer: usize, offset: u64, len: u64) -> Result<RemoteAddress, WindowError> {
        let p = self.peers.get(peer).ok_or(WindowError::Peer {
            peer,
            peers: self.peers.len(),
        })?;
        fits(offset, len, p.len)?;
        Ok(RemoteAddress::new(p.addr + offset, p.rkey))
    }

    /// `len` bytes at `offset` of this process's side, as a gather or scatter entry.
    pub fn local(&self, offset: u64, len: u32) -> Result<Sge, WindowError> {
        fits(offset, len.into(), self.local.len)?;
        Ok(Sge::new(self.local.addr + offset, len, self.local.lkey)?)
    }

    /// The 8 bytes at `offset` of this process's side, as an atomic's result buffer.
    pub fn local_result(&self, offset: u64) -> Result<LocalBuffer, WindowError> {
        fits(offset, 8, self.local.len)?;
        Ok(LocalBuffer::new(self.local.addr + offset, self.local.lkey))
    }

    /// The records of the device table: one per peer.
    pub fn device_peers(&self) -> Vec<DeviceWindowPeer> {
        self.peers
            .iter()
            .map(|p| DeviceWindowPeer {
                base: p.addr,
                len: p.len,
                rkey: p.rkey.0,
                reserved: 0,
            })
            .collect()
    }

    /// The descriptor kernels take, over a device copy of [`Window::device_peers`] at
    /// `peer_table` (made by the code that owns the GPU memory, which must keep it alive
    /// and unchanged while kernels use the descriptor).
    pub fn device_window(&self, peer_table: u64) -> DeviceWindow {
        DeviceWindow {
            peers: peer_table,
            local_base: self.local.addr,
            local_len: self.local.len,
            // At most MAX_PEERS (checked at creation): fits in 32 bits.
            n_peers: self.peers.len() as u32,
            lkey: self.local.lkey.0,
            id: self.id,
            reserved: 0,
        }
    }
}

/// One peer's side of a window as a kernel reads it (an entry of the device table).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct DeviceWindowPeer {
    /// Address of the peer's first byte.
    pub base: u64,
    /// Its length.
    pub len: u64,
    /// Its remote key.
    pub rkey: u32,
    /// Reserved; zero.
    pub reserved: u32,
}

const_assert_eq!(size_of::<DeviceWindowPeer>(), 24);
const_assert_eq!(offset_of!(DeviceWindowPeer, base), 0);
const_assert_eq!(offset_of!(DeviceWindowPeer, len), 8);
const_assert_eq!(offset_of!(DeviceWindowPeer, rkey), 16);

/// A window as a kernel receives it (by value): this process's side and the device
/// address of the peers' table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct DeviceWindow {
    /// Device address of `n_peers` [`DeviceWindowPeer`] records.
    pub peers: u64,
    /// Address of this process's first byte.
    pub local_base: u64,
    /// Its length.
    pub local_len: u64,
    /// Peers in the table.
    pub n_peers: u32,
    /// This process's local key.
    pub lkey: u32,
    /// The window id.
    pub id: u32,
    /// Reserved; zero.
    pub reserved: u32,
}

const_assert_eq!(size_of::<DeviceWindow>(), 40);
const_assert_eq!(offset_of!(DeviceWindow, peers), 0);
const_assert_eq!(offset_of!(DeviceWindow, local_base), 8);
const_assert_eq!(offset_of!(DeviceWindow, local_len), 16);
const_assert_eq!(offset_of!(DeviceWindow, n_peers), 24);
const_assert_eq!(offset_of!(DeviceWindow, lkey), 28);
const_assert_eq!(offset_of!(DeviceWindow, id), 32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_checked_without_overflow() {
        assert!(window_fits(0, 64, 64));
        assert!(window_fits(64, 0, 64));
        assert!(window_fits(56, 8, 64));
        assert!(!window_fits(57, 8, 64));
        assert!(!window_fits(65, 0, 64));
        assert!(!window_fits(u64::MAX, 2, 64));
        assert!(!window_fits(8, u64::MAX - 4, 64));
    }

    #[test]
    fn endpoints_round_trip_and_bad_ones_are_typed_errors() {
        let e = WindowEndpoint {
            id: 7,
            addr: 0x7000_0000_1000,
            len: 4096,
            rkey: RKey(0x1234),
        };
        let bytes = e.encode().expect("encodes");
        assert_eq!(bytes.len(), WindowEndpoint::LEN);
        assert_eq!(&bytes[..6], b"IBGD\x01\x03");
        assert_eq!(WindowEndpoint::decode(&bytes), Ok(e));
        let mut zero = bytes.clone();
        zero[24..32].fill(0);
        assert!(matches!(
            WindowEndpoint::decode(&zero),
            Err(ConnectionError::Field { value: 0, .. })
        ));
        let mut wraps = bytes.clone();
        wraps[16..24].copy_from_slice(&u64::MAX.to_be_bytes());
        assert!(WindowEndpoint::decode(&wraps).is_err());
        let mut rc = bytes.clone();
        rc[5] = 1;
        assert!(matches!(
            WindowEndpoint::decode(&rc),
            Err(ConnectionError::Kind {
                found: 1,
                expected: 3
            })
        ));
        assert!(WindowEndpoint::decode(&bytes[..31]).is_err());
        assert!(WindowEndpoint { len: 0, ..e }.encode().is_err());
    }
}
