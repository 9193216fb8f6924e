//! Ranks: the seam between the processes of a job (or threads standing in for them on one
//! machine) and the control plane. A [`Bootstrap`] says which rank this is, how many there
//! are, and gathers every rank's bytes; over it, [`connect_rc`] connects an RC queue pair
//! from this rank to every rank (itself included) and [`exchange_window`] makes a
//! [`Window`] from every rank's registration. The same code runs whether the ranks are
//! threads of one process ([`LocalBootstrap`]), processes on hosts reached over TCP
//! ([`TcpBootstrap`]), or any launcher that implements the trait (MPI, torch.distributed).
//!
//! ```
//! use ibgda::nic::team::{Bootstrap, LocalBootstrap};
//! let ranks = LocalBootstrap::group(3);
//! let gathered = std::thread::scope(|s| {
//!     let jobs: Vec<_> = ranks
//!         .iter()
//!         .map(|b| s.spawn(move || b.all_gather(&[b.rank() as u8 * 10]).unwrap()))
//!         .collect();
//!     jobs.into_iter().map(|j| j.join().unwrap()).collect::<Vec<_>>()
//! });
//! assert!(gathered.iter().all(|g| g == &vec![vec![0], vec![10], vec![20]]));
//! ```

use core::fmt;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Barrier, Mutex, PoisonError};
use std::time::Duration;

use super::backend::Backend;
use super::connection::{ConnectionError, Endpoint, RcEndpoint};
use super::device::{MemoryRegion, ProtectionDomain, QueueAllocator, QueuePlacement, QueueSpec};
use super::error::NicError;
use super::window::{Window, WindowEndpoint, WindowError};
use crate::order::{GpuThread, OrderingScope, ValidFor};
use crate::queue::{ProducerStateMemory, QueuePair};
use crate::wqe::Rc;

/// Why a bootstrap collective failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BootstrapError {
    /// A socket operation failed.
    Io {
        /// The operation.
        operation: &'static str,
        /// The error's kind.
        kind: std::io::ErrorKind,
    },
    /// A peer sent something that is not the protocol's.
    Protocol(String),
}

impl fmt::Display for BootstrapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { operation, kind } => write!(f, "bootstrap: {operation} failed: {kind}"),
            Self::Protocol(what) => write!(f, "bootstrap: {what}"),
        }
    }
}

impl std::error::Error for BootstrapError {}

/// Which rank this is, how many there are, and a collective that gathers every rank's
/// bytes. Every rank calls the collectives in the same order.
pub trait Bootstrap: Send + Sync {
    /// This rank (0-based).
    fn rank(&self) -> usize;
    /// How many ranks there are.
    fn size(&self) -> usize;
    /// Every rank's `bytes`, by rank.
    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError>;
}

struct LocalShared {
    size: usize,
    barrier: Barrier,
    slots: Mutex<Vec<Vec<u8>>>,
}

/// The ranks of a group of threads of one process (R ranks emulated on one machine). A
/// collective waits for every rank of the group: a thread that never calls it (it
/// panicked) leaves the others waiting, as a rank of a job that dies does.
pub struct LocalBootstrap {
    rank: usize,
    shared: Arc<LocalShared>,
}

impl fmt::Debug for LocalBootstrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalBootstrap")
            .field("rank", &self.rank)
            .field("size", &self.shared.size)
            .finish()
    }
}

impl LocalBootstrap {
    /// `size` ranks, one per thread that will use it.
    pub fn group(size: usize) -> Vec<Self> {
        let shared = Arc::new(LocalShared {
            size,
            barrier: Barrier::new(size),
            slots: Mutex::new(vec![Vec::new(); size]),
        });
        (0..size)
            .map(|rank| Self {
                rank,
                shared: shared.clone(),
            })
            .collect()
    }
}

impl Bootstrap for LocalBootstrap {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.shared.size
    }
    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let lock = || {
            self.shared
                .slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        lock()[self.rank] = bytes.to_vec();
        // Everyone has written; then everyone has read before anyone writes again.
        self.shared.barrier.wait();
        let all = lock().clone();
        self.shared.barrier.wait();
        Ok(all)
    }
}

/// The ranks of processes reached over TCP: rank 0 listens at an address every rank
/// knows, the others connect to it; rank 0 relays each collective.
///
/// Frames are a 4-byte big-endian length then the bytes; a rank announces itself with its
/// rank and the group size (two 4-byte words) when it connects.
#[derive(Debug)]
pub struct TcpBootstrap {
    rank: usize,
    size: usize,
    /// Rank 0: the stream of every other rank, by rank (index 0 unused). Others: the
    /// stream to rank 0.
    streams: Mutex<Vec<Option<TcpStream>>>,
}

/// The longest frame a [`TcpBootstrap`] accepts.
pub const MAX_FRAME: usize = 64 << 20;

fn io(operation: &'static str) -> impl Fn(std::io::Error) -> BootstrapError {
    move |e| BootstrapError::Io {
        operation,
        kind: e.kind(),
    }
}

fn send_frame(s: &mut TcpStream, bytes: &[u8]) -> Result<(), BootstrapError> {
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|&l| l as usize <= MAX_FRAME)
        .ok_or_else(|| BootstrapError::Protocol(format!("a frame of {} bytes", bytes.len())))?;
    s.write_all(&len.to_be_bytes()).map_err(io("send"))?;
    s.write_all(bytes).map_err(io("send"))?;
    s.flush().map_err(io("send"))
}

fn receive_frame(s: &mut TcpStream) -> Result<Vec<u8>, BootstrapError> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).map_err(io("receive"))?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(BootstrapError::Protocol(format!(
            "a frame of {len} bytes (at most {MAX_FRAME})"
        )));
    }
    let mut out = vec![0u8; len];
    s.read_exact(&mut out).map_err(io("receive"))?;
    Ok(out)
}

impl TcpBootstrap {
    /// Rank `rank` of `size`: rank 0 accepts the others on `listener`; the others connect
    /// to `root`. Every socket operation waits at most `timeout`.
    pub fn new(
        rank: usize,
        size: usize,
        root: SocketAddr,
        listener: Option<TcpListener>,
        timeout: Duration,
    ) -> Result<Self, BootstrapError> {
        if size == 0 || rank >= size {
            return Err(BootstrapError::Protocol(format!("rank {rank} of {size}")));
        }
        let word = |v: usize| (v as u32).to_be_bytes();
        let mut streams: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
        if rank == 0 {
            let listener = listener.ok_or_else(|| {
                BootstrapError::Protocol("rank 0 needs the listener the others connect to".into())
            })?;
            // Every rank joins within `timeout` of this call, or this fails.
            listener
                .set_nonblocking(true)
                .map_err(io("set the listener non-blocking"))?;
            let start = std::time::Instant::now();
            let accept = || loop {
                match listener.accept() {
                    Ok((s, _)) => return s.set_nonblocking(false).map(|()| s),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if start.elapsed() >= timeout {
                            return Err(std::io::Error::from(std::io::ErrorKind::TimedOut));
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(e) => return Err(e),
                }
            };
            for _ in 1..size {
                let mut s = accept().map_err(io("accept"))?;
                s.set_read_timeout(Some(timeout))
                    .map_err(io("set a timeout"))?;
                let hello = receive_frame(&mut s)?;
                let (r, n) = match hello[..] {
                    [a, b, c, d, e, f, g, h] => (
                        u32::from_be_bytes([a, b, c, d]) as usize,
                        u32::from_be_bytes([e, f, g, h]) as usize,
                    ),
                    _ => return Err(BootstrapError::Protocol("a malformed hello".into())),
                };
                if n != size || r == 0 || r >= size || streams[r].is_some() {
                    return Err(BootstrapError::Protocol(format!(
                        "rank {r} of {n} joined a group of {size}"
                    )));
                }
                streams[r] = Some(s);
            }
        } else {
            let mut s = TcpStream::connect_timeout(&root, timeout).map_err(io("connect"))?;
            s.set_read_timeout(Some(timeout))
                .map_err(io("set a timeout"))?;
            let mut hello = word(rank).to_vec();
            hello.extend_from_slice(&word(size));
            send_frame(&mut s, &hello)?;
            streams[0] = Some(s);
        }
        Ok(Self {
            rank,
            size,
            streams: Mutex::new(streams),
        })
    }
}

impl Bootstrap for TcpBootstrap {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        let missing = || BootstrapError::Protocol("a rank's stream is missing".into());
        if self.rank == 0 {
            let mut all = vec![bytes.to_vec()];
            for s in streams.iter_mut().skip(1) {
                all.push(receive_frame(s.as_mut().ok_or_else(missing)?)?);
            }
            let mut packed = Vec::new();
            for part in &all {
                packed.extend_from_slice(&(part.len() as u32).to_be_bytes());
                packed.extend_from_slice(part);
            }
            for s in streams.iter_mut().skip(1) {
                send_frame(s.as_mut().ok_or_else(missing)?, &packed)?;
            }
            Ok(all)
        } else {
            let s = streams[0].as_mut().ok_or_else(missing)?;
            send_frame(s, bytes)?;
            let packed = receive_frame(s)?;
            let mut all = Vec::with_capacity(self.size);
            let mut at = 0;
            while at < packed.len() {
                let len_bytes: [u8; 4] = packed
                    .get(at..at + 4)
                    .and_then(|b| b.try_into().ok())
                    .ok_or_else(|| BootstrapError::Protocol("a truncated gather".into()))?;
                let len = u32::from_be_bytes(len_bytes) as usize;
                let part = packed
                    .get(at + 4..at + 4 + len)
                    .ok_or_else(|| BootstrapError::Protocol("a truncated gather".into()))?;
                all.push(part.to_vec());
                at += 4 + len;
            }
            if all.len() != self.size {
                return Err(BootstrapError::Protocol(format!(
                    "a gather of {} parts for {} ranks",
                    all.len(),
                    self.size
                )));
            }
            Ok(all)
        }
    }
}

/// Why ranks could not be connected.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TeamError {
    /// The bootstrap failed.
    Bootstrap(BootstrapError),
    /// The control plane failed.
    Nic(NicError),
    /// A peer's endpoint did not decode.
    Connection(ConnectionError),
    /// A window could not be made.
    Window(WindowError),
}

impl fmt::Display for TeamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bootstrap(e) => e.fmt(f),
            Self::Nic(e) => e.fmt(f),
            Self::Connection(e) => write!(f, "a peer's endpoint: {e}"),
            Self::Window(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for TeamError {}

impl From<BootstrapError> for TeamError {
    fn from(e: BootstrapError) -> Self {
        Self::Bootstrap(e)
    }
}
impl From<NicError> for TeamError {
    fn from(e: NicError) -> Self {
        Self::Nic(e)
    }
}
impl From<ConnectionError> for TeamError {
    fn from(e: ConnectionError) -> Self {
        Self::Connection(e)
    }
}
impl From<WindowError> for TeamError {
    fn from(e: WindowError) -> Self {
        Self::Window(e)
    }
}

/// Connects an RC queue pair from this rank to every rank, itself included (a queue pair
/// connected to itself), for GPU producers with `scope`: creates one per peer in `pd` with
/// memory from `allocator`, gathers every rank's endpoints, and connects this rank's queue
/// pair to peer `p` with `p`'s endpoint for this rank. `state` gives each queue pair its
/// producer state. Returns them by peer.
pub fn connect_rc<B, P, S>(
    bootstrap: &dyn Bootstrap,
    pd: &ProtectionDomain<B>,
    spec: QueueSpec,
    allocator: &dyn QueueAllocator<P>,
    mut state: impl FnMut() -> Result<ProducerStateMemory<P>, NicError>,
    scope: S,
) -> Result<Vec<QueuePair<Rc, P, S>>, TeamError>
where
    B: Backend,
    P: QueuePlacement,
    S: OrderingScope<Producer = GpuThread> + ValidFor<P>,
{
    let (me, size) = (bootstrap.rank(), bootstrap.size());
    let pending = (0..size)
        .map(|_| pd.create_rc_in(spec, allocator))
        .collect::<Result<Vec<_>, _>>()?;
    let mut mine = Vec::with_capacity(size * RcEndpoint::LEN);
    for p in &pending {
        mine.extend_from_slice(&p.endpoint().encode()?);
    }
    let all = bootstrap.all_gather(&mine)?;
    let mut queues = Vec::with_capacity(size);
    for (peer, pending) in pending.into_iter().enumerate() {
        let theirs = all
            .get(peer)
            .and_then(|b| b.get(me * RcEndpoint::LEN..(me + 1) * RcEndpoint::LEN))
            .ok_or(ConnectionError::Length {
                len: all.get(peer).map_or(0, Vec::len),
                expected: size * RcEndpoint::LEN,
            })?;
        let remote = RcEndpoint::decode(theirs)?;
        queues.push(pending.connect_device(&remote, state()?, scope)?);
    }
    Ok(queues)
}

/// Window `id` over `region`, with every rank's registration for the same window
/// (gathered over `bootstrap`).
pub fn exchange_window<B: Backend>(
    bootstrap: &dyn Bootstrap,
    region: &MemoryRegion<B>,
    id: u32,
) -> Result<Window, TeamError> {
    let all = bootstrap.all_gather(&region.window_endpoint(id).encode()?)?;
    let peers = all
        .iter()
        .map(|b| WindowEndpoint::decode(b))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Window::new(region, id, peers)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_ranks_gather_in_rank_order() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let root = listener.local_addr().expect("addr");
        let t = Duration::from_secs(10);
        let mut listener = Some(listener);
        let joined: Vec<_> = std::thread::scope(|s| {
            let jobs: Vec<_> = (0..3)
                .map(|rank| {
                    let l = if rank == 0 { listener.take() } else { None };
                    s.spawn(move || {
                        let b = TcpBootstrap::new(rank, 3, root, l, t).expect("join");
                        let first = b.all_gather(&[rank as u8; 3]).expect("gather");
                        let second = b.all_gather(&vec![7u8; rank]).expect("gather");
                        (first, second)
                    })
                })
                .collect();
            jobs.into_iter().map(|j| j.join().expect("rank")).collect()
        });
        for (first, second) in joined {
            assert_eq!(first, vec![vec![0; 3], vec![1; 3], vec![2; 3]]);
            assert_eq!(second, vec![vec![], vec![7], vec![7, 7]]);
        }
    }

    #[test]
    fn a_rank_that_never_joins_is_a_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let root = listener.local_addr().expect("addr");
        let e = TcpBootstrap::new(0, 2, root, Some(listener), Duration::from_millis(50))
            .expect_err("nobody joins");
        assert_eq!(
            e,
            BootstrapError::Io {
                operation: "accept",
                kind: std::io::ErrorKind::TimedOut
            }
        );
    }

    #[test]
    fn a_bad_group_is_a_typed_error() {
        let root: SocketAddr = "127.0.0.1:9".parse().expect("addr");
        assert!(matches!(
            TcpBootstrap::new(3, 3, root, None, Duration::from_millis(10)),
            Err(BootstrapError::Protocol(_))
        ));
        assert!(matches!(
            TcpBootstrap::new(0, 2, root, None, Duration::from_millis(10)),
            Err(BootstrapError::Protocol(_))
        ));
    }
}
