//! Send rings: power-of-two arrays of 64-byte basic blocks, and the wrap-aware writer and
//! reader a WQE is encoded through and parsed from.
//!
//! A WQE starts at a basic block and occupies `ceil(ds / 4)` consecutive blocks, which
//! continue at block 0 when they pass the ring's end. Segments are 16-byte aligned and the
//! ring is a multiple of 64 bytes, so a segment is never split; only an inline payload is
//! (rdma-core splits its copy at `qend` the same way).

use core::sync::atomic::{AtomicU64, Ordering};

use super::address::{Qpn, WqeIndex};
use super::builder::{Wqe, WqeSpec};
use super::error::WqeError;
use super::segment::{OCTOWORDS_PER_WQEBB, OCTOWORD_BYTES, WQEBB_BYTES};
use crate::memory::copy_in;

/// The number of basic blocks a WQE of `ds` octowords occupies.
pub const fn wqebbs_for_ds(ds: usize) -> u32 {
    ds.div_ceil(OCTOWORDS_PER_WQEBB) as u32
}

/// The size of a send ring in WQEBBs: a power of two from 1 to 2^15.
///
/// The upper bound keeps the 16-bit WQE index and CQE `wqe_counter` unambiguous: a ring
/// holds at most half of the index space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RingSize {
    log2: u8,
}

impl RingSize {
    /// The smallest ring: one basic block.
    pub const MIN_WQEBBS: usize = 1;
    /// The largest ring: 32,768 basic blocks (2 MiB).
    pub const MAX_WQEBBS: usize = 1 << 15;

    /// A ring of `wqebbs` basic blocks.
    ///
    /// ```
    /// use ibgda::wqe::{RingSize, WqeError};
    /// assert_eq!(RingSize::new(256).unwrap().wqebbs(), 256);
    /// assert_eq!(RingSize::new(96), Err(WqeError::RingSizeNotPowerOfTwo { wqebbs: 96 }));
    /// ```
    pub const fn new(wqebbs: usize) -> Result<Self, WqeError> {
        if wqebbs < Self::MIN_WQEBBS || wqebbs > Self::MAX_WQEBBS {
            return Err(WqeError::RingSizeOutOfRange {
                wqebbs,
                min: Self::MIN_WQEBBS,
                max: Self::MAX_WQEBBS,
            });
        }
        if !wqebbs.is_power_of_two() {
            return Err(WqeError::RingSizeNotPowerOfTwo { wqebbs });
        }
        Ok(Self {
            log2: wqebbs.trailing_zeros() as u8,
        })
    }

    /// The ring size for memory of `len` bytes.
    pub const fn for_bytes(len: usize) -> Result<Self, WqeError> {
        if len % WQEBB_BYTES != 0 {
            // The next whole number of WQEBBs; near usize::MAX there is none, so the one
            // below (a public const fn must not overflow on any input).
            let expected = match (len / WQEBB_BYTES + 1).checked_mul(WQEBB_BYTES) {
                Some(next) => next,
                None => len - len % WQEBB_BYTES,
            };
            return Err(WqeError::RingBytesMismatch { len, expected });
        }
        Self::new(len / WQEBB_BYTES)
    }

    /// Basic blocks in the ring.
    pub const fn wqebbs(self) -> u32 {
        1 << self.log2
    }
    /// Bytes in the ring.
    pub const fn bytes(self) -> usize {
        (self.wqebbs() as usize) * WQEBB_BYTES
    }
    /// The slot (block number within the ring) of a WQE index.
    pub const fn slot(self, index: WqeIndex) -> usize {
        (index.0 as usize) & (self.wqebbs() as usize - 1)
    }
}

/// Limits a queue puts on the WQEs posted to it, beyond the format's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WqeLimits {
    /// Largest inline payload in bytes.
    pub max_inline: usize,
    /// Largest WQE in basic blocks.
    pub max_wqebbs: u32,
}

impl WqeLimits {
    /// The Linux driver's ceiling on a send WQE: 16 basic blocks (`MLX5_SEND_WQE_MAX_WQEBBS`).
    pub const MAX_WQEBBS: u32 = 16;

    /// No limits beyond the WQE format's: 16 WQEBBs, inline up to what fits in DS.
    pub const FORMAT: Self = Self {
        max_inline: usize::MAX,
        max_wqebbs: Self::MAX_WQEBBS,
    };

    /// Checks that a queue can run with these limits: at least one and at most
    /// [`WqeLimits::MAX_WQEBBS`] basic blocks per WQE (a one-block NOP must always fit,
    /// since queues pad and signal with them).
    pub fn validate(&self) -> Result<(), WqeError> {
        if self.max_wqebbs > Self::MAX_WQEBBS {
            return Err(WqeError::WqeTooLarge {
                wqebbs: self.max_wqebbs,
                max: Self::MAX_WQEBBS,
            });
        }
        if self.max_wqebbs == 0 {
            return Err(WqeError::FieldBelowMinimum {
                field: "max_wqebbs",
                value: 0,
                min: 1,
            });
        }
        Ok(())
    }

    /// Checks a built WQE against these limits and against a ring's size.
    #[inline]
    pub fn check<S: WqeSpec>(&self, wqe: &Wqe<S>, ring: RingSize) -> Result<u32, WqeError> {
        if wqe.inline_len() > self.max_inline {
            return Err(WqeError::InlineTooLong {
                len: wqe.inline_len(),
                max: self.max_inline,
            });
        }
        let wqebbs = wqe.wqebbs();
        if wqebbs > self.max_wqebbs {
            return Err(WqeError::WqeTooLarge {
                wqebbs,
                max: self.max_wqebbs,
            });
        }
        if wqebbs > ring.wqebbs() {
            return Err(WqeError::RingTooSmall {
                ring_wqebbs: ring.wqebbs(),
                wqe_wqebbs: wqebbs,
            });
        }
        Ok(wqebbs)
    }
}

impl Default for WqeLimits {
    fn default() -> Self {
        Self::FORMAT
    }
}

/// Where one WQE's bytes go: its basic blocks in a byte buffer (from the first to the
/// ring's end, `head`, and from the ring's start, `tail`, if it wraps), or straight into
/// the 64-bit words of a queue's ring.
///
/// Writing is sequential. The writer's capacity is exactly the WQE's blocks, and the WQE
/// shapes never write more than their DS, which is at most the blocks' size.
pub struct WqeWriter<'r> {
    target: WriteTarget<'r>,
    pos: usize,
}

enum WriteTarget<'r> {
    /// Bytes, split at the ring's end.
    Bytes {
        head: &'r mut [u8],
        tail: &'r mut [u8],
    },
    /// The words of a whole ring (a power-of-two count), the WQE starting at word `first`
    /// and continuing at word 0 past the end; `capacity` bytes long.
    Ring {
        words: &'r [AtomicU64],
        mask: usize,
        first: usize,
        capacity: usize,
        /// The WQE's first basic block (every WQE has one; a block never straddles the
        /// ring's end), so that segments written into it are plain stores at fixed offsets.
        head: &'r [AtomicU64; WORDS_PER_WQEBB],
    },
}

/// The basic block of `words` starting at word `start` (a multiple of 8 inside the ring).
#[inline(always)]
fn block_at(words: &[AtomicU64], start: usize) -> &[AtomicU64; WORDS_PER_WQEBB] {
    words[start..start + WORDS_PER_WQEBB]
        .try_into()
        .expect("a range of WORDS_PER_WQEBB words")
}

impl<'r> WqeWriter<'r> {
    /// A writer over the blocks of one WQE, split at the ring's end.
    pub(crate) fn new(head: &'r mut [u8], tail: &'r mut [u8]) -> Self {
        debug_assert!(head.len() % WQEBB_BYTES == 0 && tail.len() % WQEBB_BYTES == 0);
        Self {
            target: WriteTarget::Bytes { head, tail },
            pos: 0,
        }
    }

    /// A writer that stores a WQE of `wqebbs` blocks straight into `ring`, the words of
    /// a whole ring (a power-of-two count, as every [`RingSize`] has), at word `first` (the
    /// first word of a basic block),
    /// continuing at the ring's start where it passes the end. Every store is a relaxed
    /// 64-bit atomic store, as every write to memory a NIC reads is; nothing is staged.
    /// Word indices are taken modulo the ring's length and checked against it, so a writer
    /// never stores outside `ring` whatever its arguments (a bad one fails a bounds check,
    /// it never writes elsewhere).
    #[inline(always)]
    pub(crate) fn ring(ring: &'r [AtomicU64], first: usize, wqebbs: u32) -> Self {
        debug_assert!(ring.len().is_power_of_two());
        debug_assert!(wqebbs as usize * WORDS_PER_WQEBB <= ring.len());
        debug_assert_eq!(first % WORDS_PER_WQEBB, 0);
        Self {
            target: WriteTarget::Ring {
                words: ring,
                mask: ring.len().wrapping_sub(1),
                first,
                capacity: wqebbs as usize * WQEBB_BYTES,
                head: block_at(ring, first),
            },
            pos: 0,
        }
    }

    /// Bytes the writer can hold.
    pub fn capacity(&self) -> usize {
        match &self.target {
            WriteTarget::Bytes { head, tail } => head.len() + tail.len(),
            WriteTarget::Ring { capacity, .. } => *capacity,
        }
    }

    /// Bytes written so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Appends one 16-byte segment given as two native words whose memory bytes are the
    /// segment's wire bytes (see [`octoword`]). Callers are at an octoword boundary, so a
    /// segment never crosses the ring's end. Into a ring this is two word stores.
    #[inline(always)]
    pub(crate) fn put_octoword(&mut self, segment: [u64; 2]) {
        debug_assert_eq!(self.pos % OCTOWORD_BYTES, 0);
        match &mut self.target {
            WriteTarget::Ring {
                words,
                mask,
                first,
                capacity,
                head,
            } => {
                // Within the WQE's blocks: the shapes never write past their DS.
                debug_assert!(self.pos + OCTOWORD_BYTES <= *capacity);
                let wqebb = self.pos / WQEBB_BYTES;
                let block = if wqebb == 0 {
                    *head
                } else {
                    // Later blocks continue at the ring's start past its end.
                    block_at(words, (*first + wqebb * WORDS_PER_WQEBB) & *mask)
                };
                // The octoword's pair of words within its block (0..4).
                let pair = self.pos % WQEBB_BYTES / OCTOWORD_BYTES;
                block[2 * pair].store(segment[0], Ordering::Relaxed);
                block[2 * pair + 1].store(segment[1], Ordering::Relaxed);
                self.pos += OCTOWORD_BYTES;
            }
            WriteTarget::Bytes { .. } => {
                let mut bytes = [0u8; OCTOWORD_BYTES];
                bytes[..WORD_BYTES].copy_from_slice(&segment[0].to_ne_bytes());
                bytes[WORD_BYTES..].copy_from_slice(&segment[1].to_ne_bytes());
                self.put(&bytes);
            }
        }
    }

    /// Appends bytes. Callers append whole segments, so a call never crosses the ring's end
    /// in the middle of an octoword; inline payloads are the one byte stream that may.
    /// Inlined so that a segment of fixed size is copied with fixed-size moves instead of a
    /// call to `memcpy` per segment.
    #[inline(always)]
    pub(crate) fn put(&mut self, bytes: &[u8]) {
        let start = self.pos;
        let end = start + bytes.len();
        match &mut self.target {
            WriteTarget::Bytes { head, tail } => {
                let split = head.len();
                if end <= split {
                    head[start..end].copy_from_slice(bytes);
                } else if start >= split {
                    tail[start - split..end - split].copy_from_slice(bytes);
                } else {
                    let (first, second) = bytes.split_at(split - start);
                    head[start..].copy_from_slice(first);
                    tail[..second.len()].copy_from_slice(second);
                }
            }
            WriteTarget::Ring {
                words,
                first,
                capacity,
                ..
            } => {
                assert!(end <= *capacity, "a WQE writes past its blocks");
                let ring_bytes = words.len() * WORD_BYTES;
                let offset = (*first * WORD_BYTES + start) % ring_bytes;
                let before_end = bytes.len().min(ring_bytes - offset);
                copy_in(words, offset, &bytes[..before_end]);
                copy_in(words, 0, &bytes[before_end..]);
            }
        }
        self.pos = end;
    }
}

/// Bytes of a ring word.
const WORD_BYTES: usize = 8;
/// Ring words per basic block.
const WORDS_PER_WQEBB: usize = WQEBB_BYTES / WORD_BYTES;

/// A 16-byte segment made of two big-endian 64-bit halves (bytes 0..8 and 8..16 of the
/// segment, most significant byte first), as the two native words whose memory bytes are
/// exactly those: what [`WqeWriter::put_octoword`] takes. Computed in registers, so a
/// segment reaches the ring without passing through a byte buffer.
#[inline(always)]
pub(crate) const fn octoword(high: u64, low: u64) -> [u64; 2] {
    [high.to_be(), low.to_be()]
}

/// A send ring over borrowed memory, for writing WQEs at chosen indices.
///
/// Queues own their rings (see [`crate::queue`]); this view is the plain form the encoder,
/// the oracle tests and the fuzzers use.
///
/// ```
/// use ibgda::wqe::{parse_wqe, LKey, Qpn, RKey, RdmaWrite, RemoteAddress, SendRing, Sge,
///                  TransportKind, WqeIndex, WqeLimits};
/// let mut memory = vec![0u8; 4 * 64];
/// let mut ring = SendRing::new(&mut memory, WqeLimits::default())?;
/// let wqe = RdmaWrite::new(RemoteAddress::new(0x2000, RKey(7)))
///     .sge(Sge::new(0x1000, 8, LKey(3))?)
///     .signaled()
///     .build()?;
/// let blocks = ring.write(WqeIndex(5), Qpn::new(0x42)?, &wqe)?;
/// assert_eq!(blocks, 1);
/// let parsed = parse_wqe(&memory, WqeIndex(5), TransportKind::Rc).unwrap();
/// assert_eq!(parsed.qpn, 0x42);
/// # Ok::<(), ibgda::wqe::WqeError>(())
/// ```
pub struct SendRing<'m> {
    bytes: &'m mut [u8],
    size: RingSize,
    limits: WqeLimits,
}

impl<'m> SendRing<'m> {
    /// A ring over `bytes`, whose length must be a power-of-two number of WQEBBs.
    pub fn new(bytes: &'m mut [u8], limits: WqeLimits) -> Result<Self, WqeError> {
        let size = RingSize::for_bytes(bytes.len())?;
        Ok(Self {
            bytes,
            size,
            limits,
        })
    }

    /// The ring's size.
    pub fn size(&self) -> RingSize {
        self.size
    }

    /// The limits WQEs are checked against.
    pub fn limits(&self) -> WqeLimits {
        self.limits
    }

    /// The ring's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes
    }

    /// A writer over `wqebbs` blocks starting at the slot of `index`, wrapping at the end.
    /// `wqebbs` must not exceed the ring.
    pub(crate) fn blocks(&mut self, index: WqeIndex, wqebbs: u32) -> WqeWriter<'_> {
        let start = self.size.slot(index) * WQEBB_BYTES;
        let len = wqebbs as usize * WQEBB_BYTES;
        debug_assert!(len <= self.bytes.len());
        let (before, from_start) = self.bytes.split_at_mut(start);
        if len <= from_start.len() {
            WqeWriter::new(&mut from_start[..len], &mut [])
        } else {
            let wrapped = len - from_start.len();
            WqeWriter::new(from_start, &mut before[..wrapped])
        }
    }

    /// Encodes `wqe` at `index` for queue `qpn` and returns the WQEBBs it occupies.
    ///
    /// Fails, writing nothing, if the WQE breaks the ring's limits or does not fit in it.
    pub fn write<S: WqeSpec>(
        &mut self,
        index: WqeIndex,
        qpn: Qpn,
        wqe: &Wqe<S>,
    ) -> Result<u32, WqeError> {
        let wqebbs = self.limits.check(wqe, self.size)?;
        let mut writer = self.blocks(index, wqebbs);
        wqe.encode(&mut writer, index, qpn);
        Ok(wqebbs)
    }
}

/// Read access to the bytes of a ring for the parser: octowords counted from a WQE's
/// first block, wrapping at the ring's end.
#[derive(Clone, Copy)]
pub(crate) struct WqeReader<'r> {
    ring: &'r [u8],
    start: usize,
}

impl<'r> WqeReader<'r> {
    pub(crate) fn new(ring: &'r [u8], size: RingSize, index: WqeIndex) -> Self {
        debug_assert_eq!(ring.len(), size.bytes());
        Self {
            ring,
            start: size.slot(index) * WQEBB_BYTES,
        }
    }

    /// A reader over one WQE already copied out of its ring (a whole number of octowords).
    pub(crate) fn fetched(wqe: &'r [u8]) -> Self {
        debug_assert!(!wqe.is_empty() && wqe.len() % OCTOWORD_BYTES == 0);
        Self {
            ring: wqe,
            start: 0,
        }
    }

    /// The byte offset in the ring of octoword `k` of the WQE.
    #[inline(always)]
    fn offset(&self, k: usize) -> usize {
        wrap(self.start + k * OCTOWORD_BYTES, self.ring.len())
    }

    /// Octoword `k` of the WQE. Never out of bounds: the offset wraps modulo the ring, which
    /// is a whole number of octowords.
    #[inline(always)]
    pub(crate) fn octoword(&self, k: usize) -> &'r [u8; OCTOWORD_BYTES] {
        let off = self.offset(k);
        self.ring[off..off + OCTOWORD_BYTES]
            .try_into()
            .expect("ring length is a multiple of 16")
    }

    /// `count` consecutive octowords starting at `k`, as at most two contiguous runs split
    /// at the ring's end. `count` octowords must not exceed the ring.
    #[inline(always)]
    pub(crate) fn octowords(&self, k: usize, count: usize) -> (&'r [u8], &'r [u8]) {
        self.bytes(k * OCTOWORD_BYTES, count * OCTOWORD_BYTES)
    }

    /// `len` bytes starting `from` bytes into the WQE, split at the ring's end. `len` must
    /// not exceed the ring.
    #[inline(always)]
    pub(crate) fn bytes(&self, from: usize, len: usize) -> (&'r [u8], &'r [u8]) {
        let off = wrap(self.start + from, self.ring.len());
        let first = len.min(self.ring.len() - off);
        (&self.ring[off..off + first], &self.ring[..len - first])
    }
}

/// `offset % len` without the division when `offset` is already inside (`len > 0`): a
/// fetched WQE is never read past its end, and a ring wraps at most once per segment, so
/// the division is the rare case, not the per-octoword one.
#[inline]
fn wrap(offset: usize, len: usize) -> usize {
    if offset < len {
        offset
    } else {
        offset % len
    }
}
