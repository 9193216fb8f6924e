//! Memory the NIC can touch: send rings, doorbell records, CQ rings, registered buffers.
//!
//! A NIC (or the software NIC on another thread) reads and writes this memory while the
//! host does too, so it is never handed out as `&[u8]` or `&mut [u8]`: every access is an
//! atomic access to a 64-bit word (relaxed for data, acquire/release where a protocol
//! needs it). Racing relaxed atomics are defined behaviour, which makes every use of a
//! [`DmaBuffer`] sound whatever the other side does; the protocols on top (doorbell
//! records, owner bits) say when the bytes mean something. On x86-64 and AArch64 relaxed
//! 64-bit atomic loads and stores are plain loads and stores, so this costs nothing.
//!
//! Bytes keep their memory order: byte `i` of the buffer is byte `i % 8` of word `i / 8`
//! in native memory order, so a WQE written here is the exact byte sequence the NIC reads.

use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};
use std::alloc::{self, Layout};
use std::sync::Arc;

const WORD: usize = 8;

/// Who frees a buffer's memory.
enum Owner {
    /// Allocated here with this layout; freed on drop.
    Heap(Layout),
    /// Foreign memory (pinned host memory, a mapped device page); dropping the value
    /// releases it.
    Foreign(#[allow(dead_code)] Box<dyn Send + Sync>),
}

/// A zero-initialised, word-aligned buffer that both the host and a NIC may access
/// concurrently.
pub struct DmaBuffer {
    words: NonNull<AtomicU64>,
    len: usize,
    device_addr: Option<u64>,
    owner: Owner,
}

// SAFETY: the buffer is only ever accessed through `&AtomicU64`, which is `Sync`; the
// owner is `Send + Sync` (a layout, or a boxed `Send + Sync` value).
unsafe impl Send for DmaBuffer {}
// SAFETY: as above: shared access is atomic access.
unsafe impl Sync for DmaBuffer {}

/// Why a buffer could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaError {
    /// A length of zero, or not a multiple of 8 bytes.
    BadLength {
        /// The length asked for.
        len: usize,
    },
    /// An alignment that is not a power of two of at least 8 bytes.
    BadAlignment {
        /// The alignment asked for.
        align: usize,
    },
    /// The allocator refused.
    OutOfMemory {
        /// The length asked for.
        len: usize,
    },
    /// An access past the end of the buffer.
    OutOfBounds {
        /// First byte of the access.
        offset: usize,
        /// Length of the access.
        len: usize,
        /// The buffer's length.
        buffer_len: usize,
    },
}

impl fmt::Display for DmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadLength { len } => {
                write!(f, "buffer length {len} is zero or not a multiple of 8")
            }
            Self::BadAlignment { align } => {
                write!(f, "alignment {align} is not a power of two >= 8")
            }
            Self::OutOfMemory { len } => write!(f, "could not allocate {len} bytes"),
            Self::OutOfBounds {
                offset,
                len,
                buffer_len,
            } => {
                write!(
                    f,
                    "access of {len} bytes at {offset} exceeds the buffer's {buffer_len} bytes"
                )
            }
        }
    }
}

impl std::error::Error for DmaError {}

/// The host's page size (`sysconf(_SC_PAGESIZE)`: 4 KiB on x86-64, 4, 16 or 64 KiB on
/// Arm servers), or `None` where it cannot be read (or is not a power of two).
pub fn host_page_size() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `sysconf` has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(n).ok().filter(|n| n.is_power_of_two())
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

impl DmaBuffer {
    /// A zeroed buffer of `len` bytes (a multiple of 8) aligned to `align` (a power of two,
    /// at least 8). Rings want 4096 (a page), like the NIC's queue memory.
    pub fn zeroed(len: usize, align: usize) -> Result<Self, DmaError> {
        if len == 0 || len % WORD != 0 {
            return Err(DmaError::BadLength { len });
        }
        if !align.is_power_of_two() || align < WORD {
            return Err(DmaError::BadAlignment { align });
        }
        let layout =
            Layout::from_size_align(len, align).map_err(|_| DmaError::OutOfMemory { len })?;
        // SAFETY: the layout has a non-zero size (checked above).
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let words = NonNull::new(ptr.cast::<AtomicU64>()).ok_or(DmaError::OutOfMemory { len })?;
        Ok(Self {
            words,
            len,
            device_addr: None,
            owner: Owner::Heap(layout),
        })
    }

    /// A buffer over foreign memory: pinned host memory, memory mapped from a device's
    /// BAR that behaves as memory. Its safe methods load, store and compare-exchange any
    /// word, so it is never a register page (a NIC doorbell or UAR page, where a read or
    /// a read-modify-write has side effects or faults): map those as a [`RegisterPage`].
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for reads and writes of `len` bytes, 8-byte aligned, for as long
    /// as `owner` lives (it is dropped with the buffer); loads, stores and compare-exchanges
    /// of any word must behave as on ordinary memory; and every other access to that memory
    /// from this process must be atomic or come from a device. If the buffer is moved into
    /// something with one owner (queue memory, a descriptor ring, an index slot), nothing
    /// else may access the memory while that owner lives but the NIC that executes it: the
    /// owner's guarantees (no published WQE overwritten, no CQE forged) rest on it.
    pub unsafe fn from_raw(
        ptr: NonNull<u8>,
        len: usize,
        owner: Box<dyn Send + Sync>,
    ) -> Result<Self, DmaError> {
        check_raw_span(ptr.as_ptr() as u64, len)?;
        Ok(Self {
            words: ptr.cast(),
            len,
            device_addr: None,
            owner: Owner::Foreign(owner),
        })
    }

    /// A buffer over pinned host memory that is also mapped into a GPU at `device_addr`.
    ///
    /// # Safety
    ///
    /// As [`DmaBuffer::from_raw`], and `device_addr` must be the GPU's address of the same
    /// memory for as long as `owner` lives.
    pub unsafe fn from_raw_mapped(
        ptr: NonNull<u8>,
        len: usize,
        device_addr: u64,
        owner: Box<dyn Send + Sync>,
    ) -> Result<Self, DmaError> {
        // SAFETY: the caller's contract includes `from_raw`'s.
        let mut buffer = unsafe { Self::from_raw(ptr, len, owner) }?;
        buffer.device_addr = Some(device_addr);
        Ok(buffer)
    }

    /// `len` bytes of `buffer` from `offset`, as a buffer of their own that keeps `buffer`
    /// alive: the software NIC's view of a queue placed inside a UMEM at an offset. Not
    /// public: two views of one buffer share memory, which queue memory (a unique owner)
    /// must never do; the NIC's views are its capabilities, not owners.
    pub(crate) fn view(buffer: &Arc<Self>, offset: usize, len: usize) -> Result<Self, DmaError> {
        let out_of_bounds = DmaError::OutOfBounds {
            offset,
            len,
            buffer_len: buffer.len,
        };
        let end = offset.checked_add(len).ok_or(out_of_bounds)?;
        if end > buffer.len {
            return Err(out_of_bounds);
        }
        let start = buffer.as_ptr().wrapping_add(offset);
        let ptr = NonNull::new(start).ok_or(out_of_bounds)?;
        // SAFETY: `offset..offset + len` lies inside `buffer` (checked), whose memory the
        // owner (a clone of its `Arc`) keeps allocated for the view's life; the span is
        // word-aligned and whole words (checked by `from_raw`); every access to it is
        // atomic, as to all of `buffer`.
        let mut view = unsafe { Self::from_raw(ptr, len, Box::new(buffer.clone())) }?;
        view.device_addr = buffer.device_addr.map(|d| d + offset as u64);
        Ok(view)
    }

    /// The address GPU threads use for this buffer, if it is mapped into a GPU.
    pub fn device_addr(&self) -> Option<u64> {
        self.device_addr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the buffer is empty (never: buffers have at least 8 bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The buffer's virtual address, as a WQE names it.
    pub fn addr(&self) -> u64 {
        self.words.as_ptr() as u64
    }
    /// The raw pointer, for handing to a device.
    pub fn as_ptr(&self) -> *mut u8 {
        self.words.as_ptr().cast()
    }

    /// The buffer as words.
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: `words` points to `len / 8` initialised, aligned 64-bit words that live
        // as long as `self` (allocated here, or guaranteed by `from_raw`'s contract), and
        // are only accessed atomically.
        unsafe { core::slice::from_raw_parts(self.words.as_ptr(), self.len / WORD) }
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), DmaError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(DmaError::OutOfBounds {
                offset,
                len,
                buffer_len: self.len,
            }),
        }
    }

    /// The word at byte `offset` (a multiple of 8).
    pub fn word(&self, offset: usize) -> Result<&AtomicU64, DmaError> {
        self.check(offset, WORD)?;
        if offset % WORD != 0 {
            return Err(DmaError::BadAlignment {
                align: offset % WORD,
            });
        }
        Ok(&self.words()[offset / WORD])
    }

    /// Copies `dst.len()` bytes starting at `offset` out of the buffer, with relaxed
    /// atomic loads.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), DmaError> {
        self.check(offset, dst.len())?;
        copy_out(self.words(), offset, dst, Ordering::Relaxed);
        Ok(())
    }

    /// Copies `src` into the buffer at `offset`, with relaxed atomic stores (read-modify-
    /// write at partial words, so bytes outside the range are never changed).
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), DmaError> {
        self.check(offset, src.len())?;
        copy_in(self.words(), offset, src);
        Ok(())
    }

    /// Fills `len` bytes at `offset` with `byte`.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<(), DmaError> {
        self.check(offset, len)?;
        let chunk = [byte; 256];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk.len());
            copy_in(self.words(), offset + done, &chunk[..n]);
            done += n;
        }
        Ok(())
    }

    /// The whole buffer copied out (for tests and dumps).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len];
        copy_out(self.words(), 0, &mut v, Ordering::Relaxed);
        v
    }
}

impl Drop for DmaBuffer {
    fn drop(&mut self) {
        if let Owner::Heap(layout) = self.owner {
            // SAFETY: allocated in `zeroed` with exactly this layout, and dropped once.
            unsafe { alloc::dealloc(self.words.as_ptr().cast(), layout) }
        }
    }
}

impl fmt::Debug for DmaBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DmaBuffer")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len)
            .finish()
    }
}

/// A mapped register page (a NIC's UAR doorbell page, a BlueFlame register): written with
/// single aligned 64-bit stores, and never read or read-modify-written, because reads of
/// such registers have side effects or fault and a compare-exchange on one is meaningless.
/// Its only access is [`RegisterPage::store`].
pub struct RegisterPage {
    base: NonNull<AtomicU64>,
    len: usize,
    _owner: Box<dyn Send + Sync>,
}

// SAFETY: the page is only ever stored to through `&AtomicU64` (one store instruction per
// access, sound from any thread); the owner is `Send + Sync`.
unsafe impl Send for RegisterPage {}
// SAFETY: as above.
unsafe impl Sync for RegisterPage {}

impl RegisterPage {
    /// A register page of `len` bytes (a nonzero multiple of 8) mapped at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be a mapping, 8-byte aligned, of `len` bytes of device registers that
    /// accept aligned 64-bit stores, and stay mapped for as long as `owner` lives (it is
    /// dropped with the page). Storing to them must not change memory of this process
    /// (other than through the device's DMA, which the device's own protocol governs).
    pub unsafe fn from_raw(
        ptr: NonNull<u8>,
        len: usize,
        owner: Box<dyn Send + Sync>,
    ) -> Result<Self, DmaError> {
        check_raw_span(ptr.as_ptr() as u64, len)?;
        Ok(Self {
            base: ptr.cast(),
            len,
            _owner: owner,
        })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the page is empty (never: pages have at least 8 bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The page's virtual address.
    pub fn addr(&self) -> u64 {
        self.base.as_ptr() as u64
    }

    /// Stores `value` (its bytes in memory order) at byte `offset` (a multiple of 8, inside
    /// the page) as one 64-bit release store: everything this thread wrote before (the
    /// WQE, the doorbell record) is ordered before the register write.
    pub fn store(&self, offset: usize, value: [u8; 8]) -> Result<(), DmaError> {
        let in_bounds = offset.checked_add(WORD).is_some_and(|end| end <= self.len);
        if !in_bounds {
            return Err(DmaError::OutOfBounds {
                offset,
                len: WORD,
                buffer_len: self.len,
            });
        }
        if offset % WORD != 0 {
            return Err(DmaError::BadAlignment {
                align: offset % WORD,
            });
        }
        // SAFETY: `offset / 8` is a word inside the mapping (checked above), which is valid
        // and aligned for as long as `self` (the constructor's contract); the reference is
        // used for one store and never for a load.
        let word = unsafe { &*self.base.as_ptr().add(offset / WORD) };
        word.store(u64::from_ne_bytes(value), Ordering::Release);
        Ok(())
    }
}

impl fmt::Debug for RegisterPage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisterPage")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len)
            .finish()
    }
}

/// Memory on a GPU, which the host never reads or writes: queue memory of [`Gpu`]-placed
/// queues, handed to kernels (and to the CUDA software NIC) by address.
///
/// [`Gpu`]: crate::queue::Gpu
pub struct DeviceBuffer {
    addr: u64,
    len: usize,
    _owner: Box<dyn Send + Sync>,
}

impl DeviceBuffer {
    /// A device allocation of `len` bytes at device address `addr`.
    ///
    /// # Safety
    ///
    /// `addr` must be a device allocation of at least `len` bytes that stays allocated for
    /// as long as `owner` lives (it is dropped with the buffer). If the buffer is moved into
    /// queue memory, nothing else may access that memory while the queue lives but its GPU
    /// producers and the NIC that executes it.
    pub unsafe fn from_raw(addr: u64, len: usize, owner: Box<dyn Send + Sync>) -> Self {
        Self {
            addr,
            len,
            _owner: owner,
        }
    }
    /// The device address.
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .finish()
    }
}

/// A device register mapped into a GPU (a NIC's UAR doorbell, for GPU producers): a device
/// address GPU threads may only store to, with single aligned 64-bit stores. Unlike a
/// [`DeviceBuffer`] it is not memory: it cannot be registered for RDMA, copied from, or
/// used as queue memory other than a doorbell, and the host has no access to it at all.
pub struct DeviceRegister {
    addr: u64,
    len: usize,
    _owner: Box<dyn Send + Sync>,
}

impl DeviceRegister {
    /// A register of `len` bytes (a nonzero multiple of 8) at device address `addr`.
    ///
    /// # Safety
    ///
    /// `addr` must be the 8-byte aligned device address of `len` bytes of device registers
    /// mapped into the GPU, which accept aligned 64-bit stores from GPU threads and stay
    /// mapped for as long as `owner` lives (it is dropped with the register). Storing to
    /// them must change no memory (other than through the device's DMA, which the device's
    /// own protocol governs).
    pub unsafe fn from_raw(
        addr: u64,
        len: usize,
        owner: Box<dyn Send + Sync>,
    ) -> Result<Self, DmaError> {
        check_raw_span(addr, len)?;
        Ok(Self {
            addr,
            len,
            _owner: owner,
        })
    }
    /// The device address GPU threads store to.
    pub fn device_addr(&self) -> u64 {
        self.addr
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the register is empty (never: registers have at least 8 bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for DeviceRegister {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceRegister")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .finish()
    }
}

/// What every `from_raw` checks of the span it is handed: a non-zero length of whole words
/// (`BadLength`) at a word-aligned address (`BadAlignment` with the misalignment).
fn check_raw_span(addr: u64, len: usize) -> Result<(), DmaError> {
    if len == 0 || len % WORD != 0 {
        return Err(DmaError::BadLength { len });
    }
    let misalignment = (addr % WORD as u64) as usize;
    if misalignment != 0 {
        return Err(DmaError::BadAlignment {
            align: misalignment,
        });
    }
    Ok(())
}

/// Copies bytes out of words, starting `offset` bytes in.
pub(crate) fn copy_out(words: &[AtomicU64], offset: usize, dst: &mut [u8], order: Ordering) {
    let mut pos = 0;
    // Word-aligned: whole words with fixed-size copies (no call per word), then the tail.
    if offset % WORD == 0 {
        let first = offset / WORD;
        let count = dst.len() / WORD;
        let whole = &words[first..first + count];
        for (chunk, word) in dst.chunks_exact_mut(WORD).zip(whole) {
            chunk.copy_from_slice(&word.load(order).to_ne_bytes());
        }
        pos = count * WORD;
    }
    while pos < dst.len() {
        let at = offset + pos;
        let word = words[at / WORD].load(order).to_ne_bytes();
        let skip = at % WORD;
        let n = (WORD - skip).min(dst.len() - pos);
        dst[pos..pos + n].copy_from_slice(&word[skip..skip + n]);
        pos += n;
    }
}

/// Copies bytes into words, starting `offset` bytes in; partial words are merged with a
/// compare-exchange loop so that neighbouring bytes are never written.
pub(crate) fn copy_in(words: &[AtomicU64], offset: usize, src: &[u8]) {
    let mut pos = 0;
    // Word-aligned: whole words with plain stores, then the tail merged below.
    if offset % WORD == 0 {
        let first = offset / WORD;
        let count = src.len() / WORD;
        let whole = &words[first..first + count];
        for (chunk, word) in src.chunks_exact(WORD).zip(whole) {
            let bytes: [u8; WORD] = chunk.try_into().expect("chunks of WORD bytes");
            word.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
        }
        pos = count * WORD;
    }
    while pos < src.len() {
        let at = offset + pos;
        let skip = at % WORD;
        let n = (WORD - skip).min(src.len() - pos);
        let word = &words[at / WORD];
        if n == WORD {
            let mut bytes = [0u8; WORD];
            bytes.copy_from_slice(&src[pos..pos + WORD]);
            word.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
        } else {
            let mut mask = [0u8; WORD];
            let mut value = [0u8; WORD];
            mask[skip..skip + n].fill(0xff);
            value[skip..skip + n].copy_from_slice(&src[pos..pos + n]);
            let (mask, value) = (u64::from_ne_bytes(mask), u64::from_ne_bytes(value));
            let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                Some(old & !mask | value)
            });
        }
        pos += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_at_every_offset_and_length() {
        let buf = DmaBuffer::zeroed(64, 64).unwrap();
        for offset in 0..24 {
            for len in 0..=24 {
                buf.fill(0, 64, 0xaa).unwrap();
                let src: Vec<u8> = (0..len as u8)
                    .map(|i| i.wrapping_mul(37).wrapping_add(1))
                    .collect();
                buf.write(offset, &src).unwrap();
                let all = buf.to_vec();
                assert_eq!(&all[offset..offset + len], &src[..]);
                assert!(
                    all[..offset].iter().all(|&b| b == 0xaa),
                    "bytes before the range changed"
                );
                assert!(
                    all[offset + len..].iter().all(|&b| b == 0xaa),
                    "bytes after the range changed"
                );
                let mut back = vec![0; len];
                buf.read(offset, &mut back).unwrap();
                assert_eq!(back, src);
            }
        }
    }

    #[test]
    fn a_register_page_takes_aligned_in_bounds_stores_only() {
        // Ordinary memory standing in for the registers, so the stores can be observed.
        let backing = DmaBuffer::zeroed(64, 64).unwrap();
        let ptr = NonNull::new(backing.as_ptr()).unwrap();
        // SAFETY: `backing` outlives `page` (dropped at the end of the test, after it), is
        // 64 aligned bytes, and is only accessed atomically.
        let page = unsafe { RegisterPage::from_raw(ptr, 64, Box::new(())) }.unwrap();
        page.store(8, [1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        page.store(56, [0xff; 8]).unwrap();
        let mut expected = [0u8; 64];
        expected[8..16].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        expected[56..].fill(0xff);
        assert_eq!(backing.to_vec(), expected);
        assert_eq!(
            page.store(60, [0; 8]).unwrap_err(),
            DmaError::OutOfBounds {
                offset: 60,
                len: 8,
                buffer_len: 64
            }
        );
        assert_eq!(
            page.store(usize::MAX - 3, [0; 8]).unwrap_err(),
            DmaError::OutOfBounds {
                offset: usize::MAX - 3,
                len: 8,
                buffer_len: 64
            }
        );
        assert_eq!(
            page.store(4, [0; 8]).unwrap_err(),
            DmaError::BadAlignment { align: 4 }
        );
        assert_eq!(backing.to_vec(), expected, "refused stores wrote nothing");
        // SAFETY: as above; a zero length and a misaligned start are refused.
        let zero = unsafe { RegisterPage::from_raw(ptr, 0, Box::new(())) };
        assert_eq!(zero.unwrap_err(), DmaError::BadLength { len: 0 });
        let odd = NonNull::new(backing.as_ptr().wrapping_add(4)).unwrap();
        // SAFETY: as above.
        let misaligned = unsafe { RegisterPage::from_raw(odd, 8, Box::new(())) };
        assert_eq!(misaligned.unwrap_err(), DmaError::BadAlignment { align: 4 });
        drop(page);
    }

    #[test]
    fn bad_requests_are_typed_errors() {
        assert_eq!(
            DmaBuffer::zeroed(0, 64).unwrap_err(),
            DmaError::BadLength { len: 0 }
        );
        assert_eq!(
            DmaBuffer::zeroed(12, 64).unwrap_err(),
            DmaError::BadLength { len: 12 }
        );
        assert_eq!(
            DmaBuffer::zeroed(64, 3).unwrap_err(),
            DmaError::BadAlignment { align: 3 }
        );
        let buf = DmaBuffer::zeroed(64, 4096).unwrap();
        assert_eq!(buf.addr() % 4096, 0);
        assert_eq!(
            buf.write(60, &[0; 5]).unwrap_err(),
            DmaError::OutOfBounds {
                offset: 60,
                len: 5,
                buffer_len: 64
            }
        );
        assert_eq!(
            buf.read(usize::MAX, &mut [0; 2]).unwrap_err(),
            DmaError::OutOfBounds {
                offset: usize::MAX,
                len: 2,
                buffer_len: 64
            }
        );
        assert!(buf.word(4).is_err());
    }
}
