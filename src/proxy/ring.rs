//! Descriptor rings in host memory (mapped for the GPU) and the two GPU-CPU handoff
//! protocols of the paper, as types.
//!
//! A ring is a [`DmaBuffer`] of `size` 16-byte slots followed by a control block:
//!
//! ```text
//! word 2·size + 0   consumed   descriptors the worker has read (release; producers acquire)
//! word 2·size + 1   completed  descriptors complete (executed and their CQEs seen, or failed)
//! word 2·size + 2   errors     descriptors that completed with a typed error
//! word 2·size + 3   first error code (RequestError::code), 0 if none
//! word 2·size + 8   reserve    the baseline protocol's reservation counter (own cache line)
//! ```
//!
//! **Baseline** ([`Baseline`]): any number of producers; each takes a slot with an atomic
//! add on the reservation counter, waits until the slot is free by reading the consumer's
//! host-resident progress (uncached: a PCIe read from a GPU), writes the operand word,
//! then publishes the control word with a system-scope release store.
//!
//! **Tuned** ([`Tuned`]): one producer per ring (its handle is unique and not `Clone`),
//! which keeps its head and a cached copy of the consumer's progress and re-reads the
//! progress only when the cache says the ring is full; the descriptor carries its own
//! validity (the lap epoch in each 8-byte word), so publishing is one 16-byte store with
//! no fence.
//!
//! The consumer (a worker) is the same for both: a slot of lap `l` is taken when both of
//! its words carry `Epoch::of_lap(l)`; progress is published (release) only after the
//! descriptors it covers have been copied out, so a producer never overwrites a slot the
//! consumer is still reading.

use core::fmt;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::descriptor::{words_valid, DescriptorError, Epoch, Request, RequestDescriptor};
use crate::memory::{DmaBuffer, DmaError};
use crate::queue::QueueBufferSpan;

mod sealed {
    pub trait Sealed {}
}

/// Which handoff protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum HandoffKind {
    /// Multi-producer: atomic reservation, uncached progress, system-scope release.
    Baseline = 0,
    /// One producer per ring, cached progress, validity in the descriptor.
    Tuned = 1,
}

/// A GPU-CPU handoff protocol (sealed: [`Baseline`] or [`Tuned`]).
pub trait Handoff: sealed::Sealed + Copy + fmt::Debug + Send + Sync + 'static {
    /// The protocol.
    const KIND: HandoffKind;
    /// Its name in reports and JSON (`baseline`, `tuned`); device kernels are suffixed with
    /// the tag type's name instead (`Baseline`, `Tuned`).
    const NAME: &'static str;
}

/// The paper's baseline handoff.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Baseline;
/// The paper's tuned handoff.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuned;

impl sealed::Sealed for Baseline {}
impl sealed::Sealed for Tuned {}
impl Handoff for Baseline {
    const KIND: HandoffKind = HandoffKind::Baseline;
    const NAME: &'static str = "baseline";
}
impl Handoff for Tuned {
    const KIND: HandoffKind = HandoffKind::Tuned;
    const NAME: &'static str = "tuned";
}

/// Memory a ring lives in, as 64-bit atomic words: [`DmaBuffer`] for real rings, loom's
/// atomics in the models (the protocol code below is the code the models run).
pub trait RingWords {
    /// Loads word `i`.
    fn load(&self, i: usize, order: Ordering) -> u64;
    /// Stores word `i`.
    fn store(&self, i: usize, value: u64, order: Ordering);
    /// Adds to word `i`, returning the old value.
    fn fetch_add(&self, i: usize, value: u64, order: Ordering) -> u64;
}

impl RingWords for DmaBuffer {
    fn load(&self, i: usize, order: Ordering) -> u64 {
        self.words()[i].load(order)
    }
    fn store(&self, i: usize, value: u64, order: Ordering) {
        self.words()[i].store(value, order)
    }
    fn fetch_add(&self, i: usize, value: u64, order: Ordering) -> u64 {
        self.words()[i].fetch_add(value, order)
    }
}

impl RingWords for [AtomicU64] {
    fn load(&self, i: usize, order: Ordering) -> u64 {
        self[i].load(order)
    }
    fn store(&self, i: usize, value: u64, order: Ordering) {
        self[i].store(value, order)
    }
    fn fetch_add(&self, i: usize, value: u64, order: Ordering) -> u64 {
        self[i].fetch_add(value, order)
    }
}

/// Where a ring's words are, for `size` slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingGeometry {
    size: u64,
}

/// The largest ring (slots).
pub const MAX_RING_SLOTS: u64 = 1 << 20;

/// Why a ring could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RingError {
    /// A slot count that is not a power of two in `2..=MAX_RING_SLOTS`.
    BadSize {
        /// The count asked for.
        slots: u64,
    },
    /// The buffer is smaller than the ring needs.
    BufferTooSmall {
        /// Its length.
        len: usize,
        /// Bytes needed.
        needed: usize,
    },
    /// The buffer is not zeroed (a stale slot could pass for a descriptor).
    NotZeroed {
        /// The first non-zero byte's word.
        word: usize,
    },
    /// The allocation failed.
    Memory(DmaError),
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadSize { slots } => write!(
                f,
                "{slots} ring slots: not a power of two in 2..={MAX_RING_SLOTS}"
            ),
            Self::BufferTooSmall { len, needed } => {
                write!(f, "ring buffer of {len} bytes, {needed} needed")
            }
            Self::NotZeroed { word } => write!(f, "ring buffer word {word} is not zero"),
            Self::Memory(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RingError {}

impl RingGeometry {
    /// The geometry of a ring of `slots` (a power of two, 2..=[`MAX_RING_SLOTS`]).
    pub fn new(slots: u64) -> Result<Self, RingError> {
        if !slots.is_power_of_two() || !(2..=MAX_RING_SLOTS).contains(&slots) {
            return Err(RingError::BadSize { slots });
        }
        Ok(Self { size: slots })
    }
    /// Slots.
    pub fn slots(&self) -> u64 {
        self.size
    }
    /// Words of the whole ring (slots and control block).
    pub fn words(&self) -> usize {
        2 * self.size as usize + 16
    }
    /// Bytes of the whole ring.
    pub fn bytes(&self) -> usize {
        self.words() * 8
    }
    fn slot(&self, index: u64) -> usize {
        2 * (index & (self.size - 1)) as usize
    }
    /// Word of the consumer's progress.
    pub fn consumed_word(&self) -> usize {
        2 * self.size as usize
    }
    /// Word of the completion counter.
    pub fn completed_word(&self) -> usize {
        2 * self.size as usize + 1
    }
    /// Word of the error counter.
    pub fn errors_word(&self) -> usize {
        2 * self.size as usize + 2
    }
    /// Word of the first error's code.
    pub fn first_error_word(&self) -> usize {
        2 * self.size as usize + 3
    }
    /// Word of the baseline reservation counter.
    pub fn reserve_word(&self) -> usize {
        2 * self.size as usize + 8
    }
    fn epoch(&self, index: u64) -> Epoch {
        Epoch::of_lap(index / self.size)
    }
}

fn with_epoch(d: RequestDescriptor, epoch: Epoch) -> [u64; 2] {
    let words = d.to_words();
    let set = |w: u64| {
        let v = u64::from_le_bytes(w.to_ne_bytes());
        u64::from_ne_bytes(((v & !0xff) | u64::from(epoch.get())).to_le_bytes())
    };
    [set(words[0]), set(words[1])]
}

/// The tuned producer's private state: its head and its cached copy of the consumer's
/// progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunedState {
    head: u64,
    cached_consumed: u64,
}

impl TunedState {
    /// Descriptors pushed.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Pushes `request` if the ring has room: `Ok(Some(index))`, or `Ok(None)` when full
    /// (after one re-read of the progress). The descriptor's two words are stored with
    /// release ordering (a GPU's single 16-byte store: on the host, ordering any payload
    /// written before it), each self-validating through its epoch byte.
    pub fn try_push<M: RingWords + ?Sized>(
        &mut self,
        memory: &M,
        g: RingGeometry,
        request: &Request,
    ) -> Result<Option<u64>, DescriptorError> {
        let index = self.head;
        let words = with_epoch(
            RequestDescriptor::encode(request, g.epoch(index))?,
            g.epoch(index),
        );
        // Wrapping: a progress word past the head (corrupted memory) reads as a full ring,
        // so the producer waits instead of overwriting or panicking.
        if index.wrapping_sub(self.cached_consumed) >= g.size {
            self.cached_consumed = memory.load(g.consumed_word(), Ordering::Acquire);
            if index.wrapping_sub(self.cached_consumed) >= g.size {
                return Ok(None);
            }
        }
        let slot = g.slot(index);
        memory.store(slot + 1, words[1], Ordering::Release);
        memory.store(slot, words[0], Ordering::Release);
        self.head = index + 1;
        Ok(Some(index))
    }
}

/// The baseline protocol's push: reserve with an atomic add, wait for the slot reading
/// the consumer's progress each time, write the operand word, publish the control word
/// with a release store. Encodes first, so a bad request takes no slot.
pub fn baseline_push<M: RingWords + ?Sized>(
    memory: &M,
    g: RingGeometry,
    request: &Request,
) -> Result<u64, DescriptorError> {
    RequestDescriptor::encode(request, Epoch::of_lap(0))?;
    let index = memory.fetch_add(g.reserve_word(), 1, Ordering::Relaxed);
    let words = with_epoch(
        RequestDescriptor::encode(request, g.epoch(index))?,
        g.epoch(index),
    );
    while index.wrapping_sub(memory.load(g.consumed_word(), Ordering::Acquire)) >= g.size {
        crate::sync::spin_wait();
    }
    let slot = g.slot(index);
    memory.store(slot + 1, words[1], Ordering::Relaxed);
    memory.store(slot, words[0], Ordering::Release);
    Ok(index)
}

/// The consumer's state: the next slot to read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConsumerState {
    tail: u64,
}

impl ConsumerState {
    /// Descriptors taken so far.
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// Takes the next descriptor if both of its words carry the current lap's epoch.
    pub fn poll<M: RingWords + ?Sized>(
        &mut self,
        memory: &M,
        g: RingGeometry,
    ) -> Option<(u64, RequestDescriptor)> {
        let slot = g.slot(self.tail);
        let epoch = g.epoch(self.tail);
        let control = memory.load(slot, Ordering::Acquire);
        let operand = memory.load(slot + 1, Ordering::Acquire);
        let words = [control, operand];
        if !words_valid(words, epoch) {
            return None;
        }
        let index = self.tail;
        self.tail += 1;
        Some((index, RequestDescriptor::from_words(words)))
    }

    /// Publishes the progress: every slot taken so far may be overwritten. Call only
    /// after the descriptors taken have been copied out (they are, by [`Self::poll`]).
    pub fn publish<M: RingWords + ?Sized>(&self, memory: &M, g: RingGeometry) {
        memory.store(g.consumed_word(), self.tail, Ordering::Release);
    }
}

/// A descriptor ring in host memory: owned by its two ends, and reached by nobody else.
/// The ring's slots and counters are written only by its producer(s) and its consumer
/// (whose handles are the only way to them), so a tuned ring has exactly one producer.
#[derive(Debug)]
pub struct RingMemory {
    buffer: DmaBuffer,
    geometry: RingGeometry,
    /// Live [`RingProducer`] handles (a baseline ring's producers are `Clone`): a ring
    /// handed to GPU producers, whose reservation counter is their own, must have no other.
    producers: AtomicUsize,
}

impl RingMemory {
    /// Where the ring is: the host address, and the device address when mapped into a GPU
    /// (what kernels get). Nothing can be accessed through it.
    pub fn span(&self) -> QueueBufferSpan {
        QueueBufferSpan {
            addr: self.buffer.addr(),
            device_addr: self.buffer.device_addr(),
            len: self.buffer.len(),
        }
    }

    /// Whether no slot or counter has been written yet (what a producer handed to a GPU,
    /// whose state starts at zero, needs).
    pub fn is_unused(&self) -> bool {
        self.buffer.words()[..self.geometry.words()]
            .iter()
            .all(|w| w.load(Ordering::Acquire) == 0)
    }

    /// The ring's words, for code standing in for its producer from outside its handle
    /// (a test playing a faulty GPU).
    ///
    /// # Safety
    ///
    /// The caller is the ring's only producer while it writes through the reference: no
    /// [`RingProducer`] of a tuned ring is live (dropped, or handed to a GPU that does not
    /// run), and it writes only slots, never the consumer's words.
    pub unsafe fn words_unchecked(&self) -> &[AtomicU64] {
        self.buffer.words()
    }
    /// The geometry.
    pub fn geometry(&self) -> RingGeometry {
        self.geometry
    }
    /// The consumer's published progress.
    pub fn consumed(&self) -> u64 {
        self.buffer
            .load(self.geometry.consumed_word(), Ordering::Acquire)
    }
    /// Descriptors complete (host-resident completion counter).
    pub fn completed(&self) -> u64 {
        self.buffer
            .load(self.geometry.completed_word(), Ordering::Acquire)
    }
    /// Descriptors that completed with an error.
    pub fn errors(&self) -> u64 {
        self.buffer
            .load(self.geometry.errors_word(), Ordering::Acquire)
    }
    /// The first error's code (0: none).
    pub fn first_error_code(&self) -> u64 {
        self.buffer
            .load(self.geometry.first_error_word(), Ordering::Acquire)
    }
}

/// The producer end of a ring of protocol `H`.
pub struct RingProducer<H: Handoff> {
    ring: Arc<RingMemory>,
    tuned: TunedState,
    _handoff: PhantomData<H>,
}

/// The consumer end of a ring: owned by exactly one worker.
#[derive(Debug)]
pub struct RingConsumer {
    ring: Arc<RingMemory>,
    state: ConsumerState,
}

/// Makes rings.
#[derive(Debug)]
pub struct ProxyRing;

impl ProxyRing {
    /// A ring of `slots` in fresh host memory, as its two ends.
    pub fn allocate<H: Handoff>(slots: u64) -> Result<(RingProducer<H>, RingConsumer), RingError> {
        let g = RingGeometry::new(slots)?;
        let buffer = DmaBuffer::zeroed(g.bytes(), 4096).map_err(RingError::Memory)?;
        Self::in_buffer(buffer, slots)
    }

    /// A ring of `slots` in `buffer` (zeroed; e.g. pinned host memory mapped into a GPU),
    /// moved in: the ring's ends are then the only handles to it.
    pub fn in_buffer<H: Handoff>(
        buffer: DmaBuffer,
        slots: u64,
    ) -> Result<(RingProducer<H>, RingConsumer), RingError> {
        let geometry = RingGeometry::new(slots)?;
        if buffer.len() < geometry.bytes() {
            return Err(RingError::BufferTooSmall {
                len: buffer.len(),
                needed: geometry.bytes(),
            });
        }
        if let Some(word) = buffer.words()[..geometry.words()]
            .iter()
            .position(|w| w.load(Ordering::Acquire) != 0)
        {
            return Err(RingError::NotZeroed { word });
        }
        let ring = Arc::new(RingMemory {
            buffer,
            geometry,
            producers: AtomicUsize::new(1),
        });
        Ok((
            RingProducer {
                ring: ring.clone(),
                tuned: TunedState::default(),
                _handoff: PhantomData,
            },
            RingConsumer {
                ring,
                state: ConsumerState::default(),
            },
        ))
    }
}

/// Why a push failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PushError {
    /// The request does not fit the descriptor format.
    Descriptor(DescriptorError),
    /// The ring is full (the consumer has not caught up).
    Full {
        /// Descriptors the ring holds.
        slots: u64,
    },
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Descriptor(e) => e.fmt(f),
            Self::Full { slots } => write!(f, "ring of {slots} slots is full"),
        }
    }
}

impl std::error::Error for PushError {}

impl<H: Handoff> RingProducer<H> {
    /// The ring.
    pub fn ring(&self) -> &Arc<RingMemory> {
        &self.ring
    }

    /// Whether this is the ring's only producer handle (no clone of a baseline producer
    /// is alive). A producer that is handed on by value while this holds stays the only
    /// one: a clone can be made only from a live handle.
    ///
    /// ```
    /// use ibgda::proxy::{Baseline, ProxyRing};
    /// let (producer, _consumer) = ProxyRing::allocate::<Baseline>(64)?;
    /// assert!(producer.is_sole_producer());
    /// let second = producer.clone();
    /// assert!(!producer.is_sole_producer());
    /// drop(second);
    /// assert!(producer.is_sole_producer());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_sole_producer(&self) -> bool {
        self.ring.producers.load(Ordering::Acquire) == 1
    }
}

impl<H: Handoff> Drop for RingProducer<H> {
    fn drop(&mut self) {
        self.ring.producers.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<H: Handoff> fmt::Debug for RingProducer<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RingProducer")
            .field("handoff", &H::NAME)
            .field("ring", &self.ring)
            .finish()
    }
}

impl RingProducer<Tuned> {
    /// Pushes one request, or [`PushError::Full`].
    pub fn try_push(&mut self, request: &Request) -> Result<u64, PushError> {
        let g = self.ring.geometry;
        self.tuned
            .try_push(&self.ring.buffer, g, request)
            .map_err(PushError::Descriptor)?
            .ok_or(PushError::Full { slots: g.size })
    }

    /// Pushes one request, waiting for room.
    pub fn push(&mut self, request: &Request) -> Result<u64, DescriptorError> {
        loop {
            match self.try_push(request) {
                Ok(i) => return Ok(i),
                Err(PushError::Descriptor(e)) => return Err(e),
                Err(PushError::Full { .. }) => crate::sync::spin_wait(),
            }
        }
    }

    /// Descriptors pushed.
    pub fn pushed(&self) -> u64 {
        self.tuned.head
    }
}

impl RingProducer<Baseline> {
    /// Pushes one request, waiting for room (a reserved slot cannot be given back).
    pub fn push(&self, request: &Request) -> Result<u64, DescriptorError> {
        baseline_push(&self.ring.buffer, self.ring.geometry, request)
    }
}

/// Baseline rings take any number of producers.
impl Clone for RingProducer<Baseline> {
    fn clone(&self) -> Self {
        self.ring.producers.fetch_add(1, Ordering::AcqRel);
        Self {
            ring: self.ring.clone(),
            tuned: TunedState::default(),
            _handoff: PhantomData,
        }
    }
}

impl RingConsumer {
    /// The ring.
    pub fn ring(&self) -> &Arc<RingMemory> {
        &self.ring
    }
    /// Takes the next complete descriptor, if any.
    pub fn poll(&mut self) -> Option<(u64, RequestDescriptor)> {
        self.state.poll(&self.ring.buffer, self.ring.geometry)
    }
    /// Descriptors taken.
    pub fn taken(&self) -> u64 {
        self.state.tail
    }
    /// Publishes the progress (every descriptor taken has been copied out).
    pub fn publish_progress(&self) {
        self.state.publish(&self.ring.buffer, self.ring.geometry);
    }
    /// Publishes the completion counter.
    pub fn publish_completed(&self, completed: u64) {
        let g = self.ring.geometry;
        self.ring
            .buffer
            .store(g.completed_word(), completed, Ordering::Release);
    }
    /// Records a descriptor that completed with an error (`code` nonzero).
    pub fn record_error(&self, code: u64) {
        let g = self.ring.geometry;
        let b = &self.ring.buffer;
        if b.load(g.errors_word(), Ordering::Relaxed) == 0 {
            b.store(g.first_error_word(), code, Ordering::Relaxed);
        }
        b.fetch_add(g.errors_word(), 1, Ordering::Release);
    }
}
