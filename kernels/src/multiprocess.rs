//! Ranks in processes of their own: one rank per process, each process owning its rank's
//! device (a [`SoftGpuNic`] on a fabric of its own), queue pairs and buffers on its GPU,
//! and a CUDA software NIC that executes its own queue pairs and nothing else, writing
//! peer ranks' memory directly (CUDA IPC mappings of their buffers: the stand-in for the
//! wire; across GPUs with peer access).
//!
//! A process:
//! 1. opens its device on a fabric whose queue numbers are its rank's range
//!    ([`rank_queue_numbers`], node LID [`rank_lid`]), connects its queue pairs and
//!    exchanges its windows over a bootstrap as the threads of one process do
//!    (`ibgda::nic::team`);
//! 2. describes what its peers' NICs need ([`rank_record`]: every registration with remote
//!    rights, with the [`IpcExport`] of its buffer, and every queue pair with its peer)
//!    and gathers every rank's over the bootstrap ([`exchange`]);
//! 3. maps every peer's buffers ([`remote_ranks`], with [`crate::ipc::Imports`]) and builds
//!    its NIC over its own objects and its peers' ([`crate::cudanic::process_nic_builder`]);
//! 4. at the end, drops its NIC and its mappings, then waits at a barrier for every rank to
//!    have done so ([`barrier`]) before its own buffers are freed: the contract of
//!    [`crate::ipc::Imports::import`].
//!
//! Records have a fixed, versioned big-endian encoding ([`RankRecord::encode`]); bytes that
//! are not one are a typed [`RecordError`], never a panic.

use core::fmt;
use std::collections::HashMap;
use std::sync::Arc;

use ibgda::memory::DeviceBuffer;
use ibgda::nic::team::{Bootstrap, BootstrapError};
use ibgda::nic::SoftGpuNic;
use ibgda::softnic::{Access, QpState};
use ibgda::wqe::Qpn;

use crate::gpu::GpuError;
use crate::ipc::{IpcDecodeError, IpcExport};

/// The most ranks a job of processes has: each rank's queue numbers are a range of 2^16
/// in the 24-bit space ([`rank_queue_numbers`]).
pub const MAX_RANKS: usize = 255;

/// Queue numbers each rank's range holds.
pub const QUEUE_NUMBERS_PER_RANK: u32 = 1 << 16;

/// The LID of rank `rank`'s node: 1 + rank.
pub fn rank_lid(rank: usize) -> Result<u16, RankError> {
    check_rank(rank)?;
    Ok(rank as u16 + 1)
}

/// The first queue number of rank `rank`'s fabric: 0x100 + rank * 2^16, so that the
/// queue pair numbers of different ranks never meet.
pub fn rank_queue_numbers(rank: usize) -> Result<Qpn, RankError> {
    check_rank(rank)?;
    let first = 0x100 + rank as u32 * QUEUE_NUMBERS_PER_RANK;
    Qpn::new(first).map_err(|_| RankError::TooManyRanks {
        rank,
        max: MAX_RANKS - 1,
    })
}

fn check_rank(rank: usize) -> Result<(), RankError> {
    if rank >= MAX_RANKS {
        return Err(RankError::TooManyRanks {
            rank,
            max: MAX_RANKS - 1,
        });
    }
    Ok(())
}

/// A registration with remote rights, as its rank's peers need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionRecord {
    /// The exporter's address of its first byte (what WQEs name).
    pub addr: u64,
    /// Its length.
    pub len: u64,
    /// Its local key.
    pub lkey: u32,
    /// Its remote key.
    pub rkey: u32,
    /// Its rights (`ibgda::softnic::Access` bits).
    pub access: u32,
    /// Where it starts in the exported buffer.
    pub offset: u64,
    /// The buffer it lies in.
    pub buffer: IpcExport,
}

/// A queue pair of a rank, as its peers' NICs check it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuePairRecord {
    /// Its number.
    pub qpn: u32,
    /// The queue pair INIT2RTR connected it to.
    pub peer: Option<u32>,
    /// The LID INIT2RTR named the peer at.
    pub peer_lid: Option<u16>,
    /// Whether it is in RTS.
    pub ready: bool,
}

/// What one rank tells the others: its rank, its node's LID, its registrations with
/// remote rights and its queue pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankRecord {
    /// The rank.
    pub rank: u32,
    /// Its node's LID.
    pub lid: u16,
    /// Registrations with remote rights.
    pub regions: Vec<RegionRecord>,
    /// Queue pairs.
    pub queue_pairs: Vec<QueuePairRecord>,
}

/// Why bytes are not a [`RankRecord`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordError {
    /// Fewer or more bytes than the header and counts say.
    Length {
        /// Bytes given.
        len: usize,
        /// Bytes expected.
        expected: usize,
    },
    /// Not the magic `IBGR`.
    Magic([u8; 4]),
    /// A version this crate does not read.
    Version(u8),
    /// A count above its limit.
    Count {
        /// What is counted.
        what: &'static str,
        /// The count.
        value: u64,
        /// The largest accepted.
        max: u64,
    },
    /// A field out of its range.
    Field {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The largest accepted.
        max: u64,
    },
    /// A buffer's export.
    Ipc(IpcDecodeError),
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Length { len, expected } => {
                write!(f, "a rank record of {len} bytes ({expected} expected)")
            }
            Self::Magic(m) => write!(f, "a rank record starting {m:02x?}, not IBGR"),
            Self::Version(v) => write!(f, "a rank record of version {v} (this reads {VERSION})"),
            Self::Count { what, value, max } => {
                write!(f, "a rank record of {value} {what} (at most {max})")
            }
            Self::Field { field, value, max } => {
                write!(f, "a rank record's {field} {value:#x} (at most {max:#x})")
            }
            Self::Ipc(e) => write!(f, "a rank record's buffer: {e}"),
        }
    }
}

impl std::error::Error for RecordError {}

/// Why ranks in processes could not be set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RankError {
    /// A rank past [`MAX_RANKS`].
    TooManyRanks {
        /// The rank.
        rank: usize,
        /// The largest rank.
        max: usize,
    },
    /// The bootstrap failed.
    Bootstrap(BootstrapError),
    /// A rank's record did not decode.
    Record {
        /// The rank that sent it.
        rank: usize,
        /// Why.
        error: RecordError,
    },
    /// The record gathered from rank `index` says it is another rank.
    WrongRank {
        /// Where it was gathered from.
        index: usize,
        /// What it says.
        says: u32,
    },
    /// Two ranks have one LID.
    DuplicateLid {
        /// The LID.
        lid: u16,
    },
    /// A region of a rank does not lie in the buffer it names.
    RegionOutsideBuffer {
        /// The rank.
        rank: usize,
        /// The region's address.
        addr: u64,
        /// Where it starts in the buffer.
        offset: u64,
        /// Its length.
        len: u64,
        /// The buffer's length.
        buffer_len: u64,
    },
    /// The GPU (an export, an import, the NIC).
    Gpu(GpuError),
}

impl fmt::Display for RankError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyRanks { rank, max } => write!(f, "rank {rank}: at most rank {max}"),
            Self::Bootstrap(e) => e.fmt(f),
            Self::Record { rank, error } => write!(f, "rank {rank}: {error}"),
            Self::WrongRank { index, says } => {
                write!(f, "the record of rank {index} says it is rank {says}")
            }
            Self::DuplicateLid { lid } => write!(f, "two ranks have LID {lid:#06x}"),
            Self::RegionOutsideBuffer {
                rank,
                addr,
                offset,
                len,
                buffer_len,
            } => write!(
                f,
                "rank {rank}: region {addr:#x} of {len} bytes at offset {offset:#x} of a \
                 {buffer_len}-byte buffer"
            ),
            Self::Gpu(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RankError {}

impl From<BootstrapError> for RankError {
    fn from(e: BootstrapError) -> Self {
        Self::Bootstrap(e)
    }
}

impl From<GpuError> for RankError {
    fn from(e: GpuError) -> Self {
        Self::Gpu(e)
    }
}

const MAGIC: [u8; 4] = *b"IBGR";
/// The encoding version written and read.
pub const VERSION: u8 = 1;
const HEADER: usize = 8 + 4 + 2 + 2 + 4 + 4;
const REGION: usize = 8 + 8 + 4 + 4 + 4 + 4 + 8 + IpcExport::LEN;
const QUEUE_PAIR: usize = 4 + 4 + 2 + 1 + 1;
/// The most registrations a record carries.
pub const MAX_REGIONS: usize = 4096;
/// The most queue pairs a record carries.
pub const MAX_QUEUE_PAIRS: usize = 1 << 16;
const NONE: u32 = u32::MAX;

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        // Callers check the total length first: every take is in bounds.
        let mut out = [0u8; N];
        out.copy_from_slice(&self.bytes[self.at..self.at + N]);
        self.at += N;
        out
    }
    fn u64(&mut self) -> u64 {
        u64::from_be_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.take())
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.take())
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
}

impl RankRecord {
    /// The encoding: `IBGR`, the version, 3 zero bytes; rank (4), LID (2), 2 zero bytes,
    /// the counts of regions and queue pairs (4 each); each region: address, length (8
    /// each), lkey, rkey, access (4 each), 4 zero bytes, offset (8), the buffer's
    /// [`IpcExport`]; each queue pair: QPN, peer (4 each, `0xffffffff` for none), peer LID
    /// (2), whether it has one, whether it is in RTS (1 each). Big-endian.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Vec::with_capacity(
            HEADER + self.regions.len() * REGION + self.queue_pairs.len() * QUEUE_PAIR,
        );
        o.extend_from_slice(&MAGIC);
        o.extend_from_slice(&[VERSION, 0, 0, 0]);
        o.extend_from_slice(&self.rank.to_be_bytes());
        o.extend_from_slice(&self.lid.to_be_bytes());
        o.extend_from_slice(&[0, 0]);
        o.extend_from_slice(&(self.regions.len() as u32).to_be_bytes());
        o.extend_from_slice(&(self.queue_pairs.len() as u32).to_be_bytes());
        for r in &self.regions {
            o.extend_from_slice(&r.addr.to_be_bytes());
            o.extend_from_slice(&r.len.to_be_bytes());
            o.extend_from_slice(&r.lkey.to_be_bytes());
            o.extend_from_slice(&r.rkey.to_be_bytes());
            o.extend_from_slice(&r.access.to_be_bytes());
            o.extend_from_slice(&[0; 4]);
            o.extend_from_slice(&r.offset.to_be_bytes());
            o.extend_from_slice(&r.buffer.encode());
        }
        for q in &self.queue_pairs {
            o.extend_from_slice(&q.qpn.to_be_bytes());
            o.extend_from_slice(&q.peer.unwrap_or(NONE).to_be_bytes());
            o.extend_from_slice(&q.peer_lid.unwrap_or(0).to_be_bytes());
            o.push(u8::from(q.peer_lid.is_some()));
            o.push(u8::from(q.ready));
        }
        o
    }

    /// Decodes [`encode`](Self::encode)'s bytes, checking the magic, version, counts
    /// (at most [`MAX_REGIONS`] and [`MAX_QUEUE_PAIRS`]), the exact length, 24-bit queue
    /// numbers, flags of 0 or 1, and every export.
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordError> {
        if bytes.len() < HEADER {
            return Err(RecordError::Length {
                len: bytes.len(),
                expected: HEADER,
            });
        }
        let mut r = Reader { bytes, at: 0 };
        let magic: [u8; 4] = r.take();
        if magic != MAGIC {
            return Err(RecordError::Magic(magic));
        }
        let version = r.u8();
        if version != VERSION {
            return Err(RecordError::Version(version));
        }
        let _: [u8; 3] = r.take();
        let rank = r.u32();
        let lid = r.u16();
        let _: [u8; 2] = r.take();
        let (n_regions, n_qps) = (r.u32() as usize, r.u32() as usize);
        if n_regions > MAX_REGIONS {
            return Err(RecordError::Count {
                what: "regions",
                value: n_regions as u64,
                max: MAX_REGIONS as u64,
            });
        }
        if n_qps > MAX_QUEUE_PAIRS {
            return Err(RecordError::Count {
                what: "queue pairs",
                value: n_qps as u64,
                max: MAX_QUEUE_PAIRS as u64,
            });
        }
        let expected = HEADER + n_regions * REGION + n_qps * QUEUE_PAIR;
        if bytes.len() != expected {
            return Err(RecordError::Length {
                len: bytes.len(),
                expected,
            });
        }
        let mut regions = Vec::with_capacity(n_regions);
        for _ in 0..n_regions {
            let (addr, len) = (r.u64(), r.u64());
            let (lkey, rkey, access) = (r.u32(), r.u32(), r.u32());
            let _: [u8; 4] = r.take();
            let offset = r.u64();
            let export: [u8; IpcExport::LEN] = r.take();
            regions.push(RegionRecord {
                addr,
                len,
                lkey,
                rkey,
                access,
                offset,
                buffer: IpcExport::decode(&export).map_err(RecordError::Ipc)?,
            });
        }
        let mut queue_pairs = Vec::with_capacity(n_qps);
        let flag = |field: &'static str, v: u8| -> Result<bool, RecordError> {
            match v {
                0 => Ok(false),
                1 => Ok(true),
                _ => Err(RecordError::Field {
                    field,
                    value: v.into(),
                    max: 1,
                }),
            }
        };
        let qpn = |field: &'static str, v: u32| -> Result<u32, RecordError> {
            Qpn::new(v)
                .map(|q| q.get())
                .map_err(|_| RecordError::Field {
                    field,
                    value: v.into(),
                    max: 0xff_ffff,
                })
        };
        for _ in 0..n_qps {
            let number = qpn("queue pair number", r.u32())?;
            let peer = match r.u32() {
                NONE => None,
                p => Some(qpn("peer queue pair number", p)?),
            };
            let peer_lid = r.u16();
            let has_lid = flag("peer LID flag", r.u8())?;
            let ready = flag("ready flag", r.u8())?;
            queue_pairs.push(QueuePairRecord {
                qpn: number,
                peer,
                peer_lid: has_lid.then_some(peer_lid),
                ready,
            });
        }
        Ok(Self {
            rank,
            lid,
            regions,
            queue_pairs,
        })
    }
}

/// Rank `rank`'s record of `device`: every registration with a remote right (its buffer
/// exported by `export`, each buffer once) and every queue pair, with the state its
/// commands left it in.
pub fn rank_record(
    rank: usize,
    device: &SoftGpuNic,
    export: &mut dyn FnMut(&DeviceBuffer) -> Result<IpcExport, GpuError>,
) -> Result<RankRecord, RankError> {
    check_rank(rank)?;
    let objects = device.gpu_objects();
    let remote = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let mut exported: Vec<(Arc<DeviceBuffer>, IpcExport)> = Vec::new();
    let mut regions = Vec::new();
    for r in objects
        .regions
        .iter()
        .filter(|r| r.access.intersects(remote))
    {
        let buffer = match exported.iter().find(|(b, _)| Arc::ptr_eq(b, &r.buffer)) {
            Some((_, e)) => *e,
            None => {
                let e = export(&r.buffer)?;
                exported.push((r.buffer.clone(), e));
                e
            }
        };
        regions.push(RegionRecord {
            addr: r.addr,
            len: r.len,
            lkey: r.lkey.0,
            rkey: r.rkey.0,
            access: r.access.bits(),
            offset: r.addr - r.buffer.addr(),
            buffer,
        });
    }
    let mut queue_pairs: Vec<QueuePairRecord> = objects
        .queue_pairs
        .iter()
        .map(|q| QueuePairRecord {
            qpn: q.qpn,
            peer: q.peer,
            peer_lid: q.peer_lid,
            ready: q.state == QpState::ReadyToSend,
        })
        .collect();
    queue_pairs.sort_by_key(|q| q.qpn);
    Ok(RankRecord {
        rank: rank as u32,
        lid: objects.lid,
        regions,
        queue_pairs,
    })
}

/// Every rank's record, by rank: `mine` gathered over `bootstrap`, each decoded and
/// checked to be its rank's, no two with one LID.
pub fn exchange(
    bootstrap: &dyn Bootstrap,
    mine: &RankRecord,
) -> Result<Vec<RankRecord>, RankError> {
    let all = bootstrap.all_gather(&mine.encode())?;
    let records = all
        .iter()
        .enumerate()
        .map(|(rank, b)| RankRecord::decode(b).map_err(|error| RankError::Record { rank, error }))
        .collect::<Result<Vec<_>, _>>()?;
    let mut lids = HashMap::new();
    for (index, r) in records.iter().enumerate() {
        if r.rank as usize != index {
            return Err(RankError::WrongRank {
                index,
                says: r.rank,
            });
        }
        if lids.insert(r.lid, index).is_some() {
            return Err(RankError::DuplicateLid { lid: r.lid });
        }
    }
    Ok(records)
}

/// A barrier over `bootstrap` (a gather of nothing): every rank has reached it when it
/// returns.
pub fn barrier(bootstrap: &dyn Bootstrap) -> Result<(), RankError> {
    bootstrap.all_gather(&[])?;
    Ok(())
}

/// A peer's registration as this process reaches it.
#[derive(Clone, Debug)]
pub struct RemoteRegion {
    /// What the peer said of it.
    pub record: RegionRecord,
    /// Its buffer, mapped into this process (exactly the exported buffer's bytes).
    pub buffer: Arc<DeviceBuffer>,
}

/// A peer rank as this process's NIC needs it.
#[derive(Clone, Debug)]
pub struct RemoteRank {
    /// The rank.
    pub rank: usize,
    /// Its node's LID.
    pub lid: u16,
    /// Its registrations with remote rights, over this process's mappings.
    pub regions: Vec<RemoteRegion>,
    /// Its queue pairs.
    pub queue_pairs: Vec<QueuePairRecord>,
}

/// Every rank of `records` but `me`, each of its buffers mapped with `import` (once per
/// buffer), each region checked to lie in its buffer and the mapping checked to be the
/// exported length.
pub fn remote_ranks(
    records: &[RankRecord],
    me: usize,
    import: &mut dyn FnMut(&IpcExport) -> Result<Arc<DeviceBuffer>, GpuError>,
) -> Result<Vec<RemoteRank>, RankError> {
    let mut out = Vec::new();
    for (rank, rec) in records.iter().enumerate().filter(|(r, _)| *r != me) {
        let mut mapped: Vec<(IpcExport, Arc<DeviceBuffer>)> = Vec::new();
        let mut regions = Vec::with_capacity(rec.regions.len());
        for r in &rec.regions {
            let fits = r
                .offset
                .checked_add(r.len)
                .is_some_and(|end| end <= r.buffer.len);
            if !fits || r.len == 0 {
                return Err(RankError::RegionOutsideBuffer {
                    rank,
                    addr: r.addr,
                    offset: r.offset,
                    len: r.len,
                    buffer_len: r.buffer.len,
                });
            }
            let buffer = match mapped.iter().find(|(e, _)| *e == r.buffer) {
                Some((_, b)) => b.clone(),
                None => {
                    let b = import(&r.buffer)?;
                    if b.len() as u64 != r.buffer.len {
                        return Err(RankError::Gpu(GpuError::Invalid(format!(
                            "rank {rank}: a mapping of {} bytes for a {}-byte buffer",
                            b.len(),
                            r.buffer.len
                        ))));
                    }
                    mapped.push((r.buffer, b.clone()));
                    b
                }
            };
            regions.push(RemoteRegion { record: *r, buffer });
        }
        out.push(RemoteRank {
            rank,
            lid: rec.lid,
            regions,
            queue_pairs: rec.queue_pairs.clone(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> RankRecord {
        RankRecord {
            rank: 3,
            lid: 4,
            regions: vec![RegionRecord {
                addr: 0x7f00_0000_1000,
                len: 4096,
                lkey: 0x4_0100,
                rkey: 0x4_0101,
                access: (Access::LOCAL_WRITE | Access::REMOTE_WRITE).bits(),
                offset: 0x1000,
                buffer: IpcExport {
                    handle: [9; 64],
                    offset: 0,
                    len: 8192,
                    gpu: 0,
                },
            }],
            queue_pairs: vec![
                QueuePairRecord {
                    qpn: 0x3_0100,
                    peer: Some(0x100),
                    peer_lid: Some(1),
                    ready: true,
                },
                QueuePairRecord {
                    qpn: 0x3_0101,
                    peer: None,
                    peer_lid: None,
                    ready: false,
                },
            ],
        }
    }

    #[test]
    fn records_round_trip() {
        let r = record();
        let bytes = r.encode();
        assert_eq!(bytes.len(), HEADER + REGION + 2 * QUEUE_PAIR);
        assert_eq!(RankRecord::decode(&bytes), Ok(r));
    }

    #[test]
    fn bytes_that_are_not_a_record_are_typed_errors() {
        let bytes = record().encode();
        assert_eq!(
            RankRecord::decode(&bytes[..bytes.len() - 1]),
            Err(RecordError::Length {
                len: bytes.len() - 1,
                expected: bytes.len()
            })
        );
        assert_eq!(
            RankRecord::decode(&bytes[..3]),
            Err(RecordError::Length {
                len: 3,
                expected: HEADER
            })
        );
        let mut b = bytes.clone();
        b[0] = b'X';
        assert_eq!(RankRecord::decode(&b), Err(RecordError::Magic(*b"XBGR")));
        let mut b = bytes.clone();
        b[4] = 2;
        assert_eq!(RankRecord::decode(&b), Err(RecordError::Version(2)));
        let mut b = bytes.clone();
        b[16..20].copy_from_slice(&5000u32.to_be_bytes());
        assert_eq!(
            RankRecord::decode(&b),
            Err(RecordError::Count {
                what: "regions",
                value: 5000,
                max: MAX_REGIONS as u64
            })
        );
        // The first queue pair's number past 24 bits; its ready flag 2.
        let qp = HEADER + REGION;
        let mut b = bytes.clone();
        b[qp..qp + 4].copy_from_slice(&0x100_0000u32.to_be_bytes());
        assert_eq!(
            RankRecord::decode(&b),
            Err(RecordError::Field {
                field: "queue pair number",
                value: 0x100_0000,
                max: 0xff_ffff
            })
        );
        let mut b = bytes;
        b[qp + 11] = 2;
        assert_eq!(
            RankRecord::decode(&b),
            Err(RecordError::Field {
                field: "ready flag",
                value: 2,
                max: 1
            })
        );
    }

    #[test]
    fn ranks_get_disjoint_queue_numbers_and_lids_up_to_the_limit() {
        assert_eq!(rank_lid(0), Ok(1));
        assert_eq!(rank_queue_numbers(0).map(Qpn::get), Ok(0x100));
        assert_eq!(rank_queue_numbers(1).map(Qpn::get), Ok(0x1_0100));
        let last = rank_queue_numbers(MAX_RANKS - 1)
            .expect("the last rank")
            .get();
        assert!(last + QUEUE_NUMBERS_PER_RANK - 1 <= 0xff_ffff);
        assert_eq!(
            rank_queue_numbers(MAX_RANKS),
            Err(RankError::TooManyRanks {
                rank: MAX_RANKS,
                max: MAX_RANKS - 1
            })
        );
        assert!(rank_lid(MAX_RANKS).is_err());
    }

    #[test]
    fn a_region_outside_its_buffer_is_refused_before_anything_is_mapped() {
        let mut a = record();
        a.rank = 0;
        let mut b = record();
        b.rank = 1;
        b.regions[0].offset = 8192 - 100;
        let mut imported = 0;
        let e = remote_ranks(&[a, b], 0, &mut |_| {
            imported += 1;
            Err(GpuError::Invalid("no GPU".into()))
        })
        .unwrap_err();
        assert_eq!(
            e,
            RankError::RegionOutsideBuffer {
                rank: 1,
                addr: 0x7f00_0000_1000,
                offset: 8192 - 100,
                len: 4096,
                buffer_len: 8192
            }
        );
        assert_eq!(imported, 0);
    }
}
