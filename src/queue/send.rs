//! The send queue: its ring, producer index, doorbell record and doorbell, and the
//! reservation / write / publish protocol of a CPU producer.

use core::fmt;
use core::marker::PhantomData;
use core::num::NonZeroU32;
use std::sync::Arc;

use super::memory::SendQueueMemory;
use super::placement::{Host, Placement};
use crate::order::{HostBarrier, OrderingScope, ValidFor};
use crate::wqe::{
    AnyWqe, CompletionMode, LKey, LocalSpan, Nop, Qpn, RingSize, Transport, TransportKind,
    TypedTransport, Wqe, WqeError, WqeIndex, WqeLimits, WqeSpec, WqeWriter, WQEBB_BYTES,
};

/// 64-bit ring words per basic block.
const WORDS_PER_WQEBB: usize = WQEBB_BYTES / 8;

/// Local memory the NIC may access, registered with it: kept registered and alive while a
/// posted WQE names it. Implemented by the library's own region handles (the software
/// NIC's memory regions, the control plane's registrations on every backend).
///
/// The checked `post` methods trust an implementation to keep what its WQEs name alive,
/// so a value of this trait is a keep-alive claim, and only a real registration may make
/// one:
///
/// ```compile_fail,E0200
/// use ibgda::queue::Registered;
/// use ibgda::wqe::LKey;
/// struct Forged;
/// impl Registered for Forged { // a claim naming a key it does not keep registered
///     fn lkey(&self) -> LKey { LKey(0x1234) }
///     fn covers(&self, _: u64, _: u64) -> bool { true }
/// }
/// ```
///
/// # Safety
///
/// An implementation is a live memory registration, or keeps one alive: for as long as
/// the value lives, the NIC that executes the queues it is posted to must accept local key
/// [`lkey`](Self::lkey) for every byte [`covers`](Self::covers) says yes to, and that memory
/// must stay allocated (not freed or reused). Dropping the value may end the registration.
pub unsafe trait Registered: Send + Sync + 'static {
    /// The local key.
    fn lkey(&self) -> LKey;
    /// Whether `[addr, addr + len)` lies inside the registration.
    fn covers(&self, addr: u64, len: u64) -> bool;
}

/// When the queue rings the doorbell for published WQEs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DoorbellPolicy {
    /// After every `n` published WQEs (1: every WQE).
    Every(NonZeroU32),
    /// Only when the caller asks ([`SendQueue::ring_doorbell`]).
    Explicit,
}

impl Default for DoorbellPolicy {
    fn default() -> Self {
        Self::Every(NonZeroU32::MIN)
    }
}

/// How a send queue is run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendQueueConfig {
    /// Limits on posted WQEs.
    pub limits: WqeLimits,
    /// Unsignaled WQEBBs allowed in a row before the queue signals a WQE itself; `None`
    /// means half the ring. At most half the ring, so that a full ring always holds a
    /// signaled WQE whose completion frees slots.
    pub max_unsignaled_wqebbs: Option<u32>,
    /// Doorbell batching.
    pub doorbell: DoorbellPolicy,
}

/// Why a WQE could not be posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostError {
    /// Not enough free slots: completions must retire earlier WQEs first.
    Full {
        /// WQEBBs needed.
        needed: u32,
        /// WQEBBs free.
        free: u32,
    },
    /// The WQE breaks the queue's limits or does not fit the ring.
    Wqe(WqeError),
    /// A local buffer of the WQE is not covered by the registrations passed with it.
    UncoveredLocalMemory {
        /// The buffer.
        span: LocalSpan,
    },
    /// A WQE does not fit in what is left of its reservation.
    ReservationExhausted {
        /// WQEBBs the WQE needs.
        needed: u32,
        /// WQEBBs left in the reservation.
        left: u32,
    },
    /// An erased WQE's target does not match the queue's transport.
    TransportMismatch {
        /// The queue's transport.
        queue: TransportKind,
    },
}

impl From<WqeError> for PostError {
    fn from(e: WqeError) -> Self {
        Self::Wqe(e)
    }
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full { needed, free } => {
                write!(f, "send queue full: {needed} WQEBBs needed, {free} free")
            }
            Self::Wqe(e) => e.fmt(f),
            Self::UncoveredLocalMemory { span } => write!(
                f,
                "local buffer {:#x}+{} (lkey {:#x}) is not covered by the registrations given",
                span.addr, span.len, span.lkey.0
            ),
            Self::ReservationExhausted { needed, left } => {
                write!(
                    f,
                    "WQE of {needed} WQEBBs does not fit the {left} left in its reservation"
                )
            }
            Self::TransportMismatch { queue } => {
                write!(f, "WQE target does not match the {queue:?} queue")
            }
        }
    }
}

impl std::error::Error for PostError {}

/// Identifies a posted WQE; complete once a completion covers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket {
    pub(crate) qpn: Qpn,
    pub(crate) end: u64,
}

impl Ticket {
    /// The queue it was posted to.
    pub fn qpn(&self) -> Qpn {
        self.qpn
    }
    /// The producer counter (in WQEBBs) just after the WQE.
    pub fn end(&self) -> u64 {
        self.end
    }
}

/// `SlotRecord::start` of a slot where no WQE starts (free, or inside a larger WQE):
/// never a WQE's start, which is below the producer counter.
const NO_WQE: u64 = u64::MAX;

/// What the producer recorded of the WQE written starting at one slot.
#[derive(Clone, Copy, Debug)]
struct SlotRecord {
    /// Its producer counter, or [`NO_WQE`].
    start: u64,
    /// Its size in WQEBBs.
    wqebbs: u32,
}

/// What a CPU producer tracks about its ring. All counters are free-running WQEBB counts.
///
/// Invariant: for every counter `q` in `[retired, producer)`, `slots[q & mask].start == q`
/// exactly when a published WQE starts at `q` (each write tags its first slot with its
/// counter and clears the tags of its other slots; the published WQEs tile that range, and
/// no reservation reaches a slot of it again before it is retired). A completion's WQE is
/// therefore found in one lookup, whatever the NIC writes.
struct ProducerState {
    /// Next free WQEBB.
    producer: u64,
    /// Announced to the NIC up to here.
    rung: u64,
    /// Every WQEBB before this is free again.
    retired: u64,
    /// WQEBBs since the last signaled WQE.
    unsignaled: u32,
    /// WQEs published since the last doorbell.
    unannounced: u32,
    /// The WQE written starting at each slot.
    slots: Box<[SlotRecord]>,
    /// Registrations kept alive for the WQE starting at each slot.
    keep_alive: Box<[Option<KeepAlive>]>,
    /// Slots of `keep_alive` holding registrations (retirement skips the walk when 0).
    kept: usize,
    /// Bytes 0..8 of the last WQE's control segment, as the native word whose memory bytes
    /// they are: the doorbell value.
    last_ctrl: u64,
}

impl ProducerState {
    /// Keeps `keep` for the WQE starting at `slot`, releasing what a forgotten reservation
    /// may have left there.
    #[inline(always)]
    fn keep(&mut self, slot: usize, keep: Option<KeepAlive>) {
        if keep.is_none() && self.kept == 0 {
            return; // nothing to keep, and every slot is empty (the usual case)
        }
        let entry = &mut self.keep_alive[slot];
        let kept_now = usize::from(keep.is_some());
        let old = core::mem::replace(entry, keep);
        self.kept = self.kept + kept_now - usize::from(old.is_some());
    }

    /// Releases the registrations kept for the WQE starting at `slot`.
    #[inline(always)]
    fn release(&mut self, slot: usize) {
        if self.keep_alive[slot].take().is_some() {
            self.kept -= 1;
        }
    }
}

/// A send queue of transport `T`, placed in `P`, ordered by scope `S`.
///
/// On the host (`P = Host`, `S = HostBarrier`) a CPU thread posts through `&mut self`:
/// [`SendQueue::post`] or the explicit [`SendQueue::reserve`] / [`Reservation::write`] /
/// [`Reservation::publish`] steps. A queue whose scope belongs to a GPU producer has no
/// posting methods at all; its ring is only ever written by device code.
pub struct SendQueue<
    T: Transport,
    P: Placement = Host,
    S: OrderingScope + ValidFor<P> = HostBarrier,
> {
    qpn: Qpn,
    memory: SendQueueMemory<P>,
    config: SendQueueConfig,
    max_unsignaled: u32,
    state: ProducerState,
    scope: S,
    _types: PhantomData<(T, P)>,
}

impl<T: Transport, P: Placement, S: OrderingScope + ValidFor<P>> fmt::Debug for SendQueue<T, P, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendQueue")
            .field("qpn", &self.qpn)
            .field("wqebbs", &self.memory.size().wqebbs())
            .field("scope", &S::NAME)
            .field("producer", &self.state.producer)
            .field("rung", &self.state.rung)
            .field("retired", &self.state.retired)
            .finish()
    }
}

impl<T: Transport, P: Placement, S: OrderingScope + ValidFor<P>> SendQueue<T, P, S> {
    /// A send queue over `memory` for queue pair `qpn`, ordered by `scope`.
    pub fn new(
        qpn: Qpn,
        memory: SendQueueMemory<P>,
        config: SendQueueConfig,
        scope: S,
    ) -> Result<Self, WqeError> {
        let wqebbs = memory.size().wqebbs();
        let half = (wqebbs / 2).max(1);
        let max_unsignaled = config.max_unsignaled_wqebbs.unwrap_or(half);
        if max_unsignaled == 0 || max_unsignaled > half {
            return Err(WqeError::FieldOutOfRange {
                field: "max_unsignaled_wqebbs",
                value: max_unsignaled.into(),
                max: half.into(),
            });
        }
        config.limits.validate()?;
        let slots = wqebbs as usize;
        Ok(Self {
            qpn,
            memory,
            config,
            max_unsignaled,
            state: ProducerState {
                producer: 0,
                rung: 0,
                retired: 0,
                unsignaled: 0,
                unannounced: 0,
                slots: vec![
                    SlotRecord {
                        start: NO_WQE,
                        wqebbs: 0
                    };
                    slots
                ]
                .into_boxed_slice(),
                keep_alive: (0..slots).map(|_| None).collect(),
                kept: 0,
                last_ctrl: 0,
            },
            scope,
            _types: PhantomData,
        })
    }

    /// The queue pair number.
    pub fn qpn(&self) -> Qpn {
        self.qpn
    }
    /// The ring's size.
    pub fn size(&self) -> RingSize {
        self.memory.size()
    }
    /// The queue's memory.
    pub fn memory(&self) -> &SendQueueMemory<P> {
        &self.memory
    }
    /// The ordering scope.
    pub fn scope(&self) -> S {
        self.scope
    }
    /// The configuration.
    pub fn config(&self) -> &SendQueueConfig {
        &self.config
    }
    /// WQEBBs free for reservation.
    pub fn free_wqebbs(&self) -> u32 {
        self.memory.size().wqebbs() - (self.state.producer - self.state.retired) as u32
    }
    /// The producer counter: the next free WQEBB (free-running).
    pub fn producer(&self) -> u64 {
        self.state.producer
    }
    /// The retirement counter: every WQEBB before it has completed (free-running).
    pub fn retired(&self) -> u64 {
        self.state.retired
    }
    /// Whether every WQE up to `ticket` has completed.
    pub fn is_complete(&self, ticket: Ticket) -> bool {
        self.state.retired >= ticket.end
    }
    /// Whether every posted WQE has completed.
    pub fn is_idle(&self) -> bool {
        self.state.retired == self.state.producer
    }
    /// The end of the last signaled WQE: a completion will come for everything before it.
    pub fn signaled_through(&self) -> u64 {
        self.state.producer - u64::from(self.state.unsignaled)
    }

    /// Whether the WQEs after the last signaled one are still waiting for a later signaled
    /// WQE to retire them.
    pub fn has_unsignaled_tail(&self) -> bool {
        self.state.unsignaled > 0
    }

    /// Retires every WQE up to and including the one starting at `wqe_counter` (a CQE's
    /// 16-bit WQE index). Returns the new retirement counter, or `None` if no posted,
    /// unretired WQE starts there: the NIC's memory is not trusted.
    ///
    /// The WQE must be one the producer published: it starts inside `[retired, producer)`
    /// and its first slot carries its counter (see [`ProducerState`]'s invariant). Tags
    /// left in slots past the producer (by a reservation that was never published, even one
    /// `mem::forget`-ten) lie outside that range and are never trusted, and a counter in
    /// the middle of a WQE finds no tag.
    pub(crate) fn retire_through(&mut self, wqe_counter: u16) -> Option<u64> {
        let mask = u64::from(self.memory.size().wqebbs() - 1);
        let st = &mut self.state;
        let delta = wqe_counter.wrapping_sub(st.retired as u16);
        let start = st.retired.checked_add(u64::from(delta))?;
        if start >= st.producer {
            return None;
        }
        let record = st.slots[(start & mask) as usize];
        if record.start != start {
            return None;
        }
        // A published WQE: it ends at or before the producer.
        let end = start + u64::from(record.wqebbs);
        debug_assert!(end <= st.producer);
        // Release the registrations of the WQEs retired (published WQEs tile the range,
        // so stepping by their sizes visits each first slot).
        let mut at = st.retired;
        while st.kept > 0 && at < end {
            let slot = (at & mask) as usize;
            st.release(slot);
            at += u64::from(st.slots[slot].wqebbs).max(1);
        }
        st.retired = end;
        Some(end)
    }

    /// Starts the ring over after the NIC reset the queue pair (2RST_QP), which restarts
    /// the NIC's send counter (and so the next WQE index) at 0. Every WQE must be retired.
    /// The free-running counters skip ahead to the next multiple of 2^16 instead of going
    /// back to 0: a multiple of 2^16 has WQE index 0, and (rings being at most 2^15
    /// WQEBBs) slot 0, so the post path derives indices as before at no cost, and every
    /// ticket issued before stays complete. Returns the new counter, or `None` if the
    /// queue is not idle or the counter cannot move on.
    pub(crate) fn restart(&mut self) -> Option<u64> {
        if !self.is_idle() {
            return None;
        }
        const INDEX_PERIOD: u64 = 1 << 16;
        let st = &mut self.state;
        let next = st
            .producer
            .checked_next_multiple_of(INDEX_PERIOD.max(u64::from(self.memory.size().wqebbs())))?;
        st.producer = next;
        st.rung = next;
        st.retired = next;
        st.unsignaled = 0;
        st.unannounced = 0;
        st.last_ctrl = 0;
        for slot in st.slots.iter_mut() {
            *slot = SlotRecord {
                start: NO_WQE,
                wqebbs: 0,
            };
        }
        for kept in st.keep_alive.iter_mut() {
            *kept = None;
        }
        st.kept = 0;
        Some(next)
    }

    /// The WQEBBs `wqe` occupies under the queue's limits, if `left` of them are available.
    #[inline(always)]
    fn fit<W: WqeSpec>(&self, wqe: &Wqe<W>, left: u32) -> Result<u32, PostError> {
        let wqebbs = self.config.limits.check(wqe, self.memory.size())?;
        if wqebbs > left {
            return Err(PostError::ReservationExhausted {
                needed: wqebbs,
                left,
            });
        }
        Ok(wqebbs)
    }
}

impl<T: Transport> SendQueue<T, Host, HostBarrier> {
    /// Encodes `wqe` straight into the ring at free-running WQEBB `at` (inside the free
    /// slots; the caller checked that `wqebbs`, its size under the queue's limits, fits),
    /// applying the signaling policy, and records it. Nothing is published.
    #[inline(always)]
    fn write_at<W: WqeSpec>(
        &mut self,
        at: u64,
        wqebbs: u32,
        wqe: &Wqe<W>,
        keep: Option<KeepAlive>,
    ) {
        let size = self.memory.size();
        let index = WqeIndex::from_counter(at);
        let st = &mut self.state;
        // Signal at least every `max_unsignaled` WQEBBs so a full ring always holds a
        // signaled WQE.
        let mut control = wqe.spec().control();
        if control.flags.completion.is_signaled() || st.unsignaled + wqebbs > self.max_unsignaled {
            control.flags.completion = CompletionMode::Always;
            st.unsignaled = 0;
        } else {
            st.unsignaled += wqebbs;
        }
        let control = wqe.control_octoword(control, index, self.qpn);
        // The ring's words are `size`'s (checked when the memory was made) and the WQE no
        // larger than the ring (the caller's check): it lands in its own slots.
        let slot = size.slot(index);
        let mut writer = WqeWriter::ring(
            self.memory.ring_buffer().words(),
            slot * WORDS_PER_WQEBB,
            wqebbs,
        );
        wqe.encode_with_control(&mut writer, control);
        let mask = size.wqebbs() as usize - 1;
        st.slots[slot] = SlotRecord { start: at, wqebbs };
        for inner in 1..wqebbs as usize {
            st.slots[(slot + inner) & mask].start = NO_WQE;
        }
        st.keep(slot, keep);
        st.last_ctrl = control[0];
    }

    /// Reserves `wqebbs` slots for this thread to fill, or [`PostError::Full`].
    ///
    /// The reservation borrows the queue, so reservations are published in the order they
    /// were made by construction. Dropping an unpublished reservation gives its slots
    /// back untouched by the NIC.
    pub fn reserve(&mut self, wqebbs: u32) -> Result<Reservation<'_, T>, PostError> {
        let free = self.free_wqebbs();
        if wqebbs > free {
            return Err(PostError::Full {
                needed: wqebbs,
                free,
            });
        }
        let start = self.state.producer;
        let saved = (self.state.unsignaled, self.state.last_ctrl);
        Ok(Reservation {
            queue: self,
            start,
            end: start + u64::from(wqebbs),
            cursor: start,
            wqes: 0,
            saved,
            published: false,
        })
    }

    /// Posts one WQE whose local buffers all lie in `registrations` (checked), which stay
    /// alive until a completion covers the WQE. Rings the doorbell per the queue's policy.
    ///
    /// ```
    /// # use ibgda::queue::*; use ibgda::wqe::*; use ibgda::order::HostBarrier;
    /// let memory = SendQueueMemory::allocate(RingSize::new(64)?).unwrap();
    /// let mut sq = SendQueue::<Rc>::new(Qpn::new(7)?, memory, SendQueueConfig::default(), HostBarrier)?;
    /// let payload = 42u64.to_be_bytes();
    /// let wqe = RdmaWrite::new(RemoteAddress::new(0x1000, RKey(1))).inline(&payload).build()?;
    /// let ticket = sq.post(&wqe, &[]).unwrap(); // inline data names no local memory
    /// assert_eq!(ticket.end(), 1);
    /// assert_eq!(sq.memory().dbrec_bytes()[4..8], [0, 0, 0, 1]);
    /// # Ok::<(), WqeError>(())
    /// ```
    #[inline(always)]
    pub fn post<W: WqeSpec<Transport = T>>(
        &mut self,
        wqe: &Wqe<W>,
        registrations: &[Arc<dyn Registered>],
    ) -> Result<Ticket, PostError> {
        let keep = covering(wqe, registrations)?;
        self.post_one(wqe, keep)
    }

    /// Reserves, writes and publishes one WQE: [`SendQueue::reserve`],
    /// [`Reservation::write`] and [`Reservation::publish`] without the reservation.
    #[inline(always)]
    fn post_one<W: WqeSpec>(
        &mut self,
        wqe: &Wqe<W>,
        keep: Option<KeepAlive>,
    ) -> Result<Ticket, PostError> {
        let free = self.free_wqebbs();
        let needed = wqe.wqebbs();
        if needed > free {
            return Err(PostError::Full { needed, free });
        }
        let wqebbs = self.fit(wqe, needed)?;
        let at = self.state.producer;
        self.write_at(at, wqebbs, wqe, keep);
        Ok(self.publish_through(at + u64::from(wqebbs), 1))
    }

    /// Publishes everything before `end`, `wqes` WQEs new, and rings the doorbell if the
    /// queue's policy says so.
    #[inline(always)]
    fn publish_through(&mut self, end: u64, wqes: u32) -> Ticket {
        self.state.producer = end;
        if wqes > 0 {
            self.state.unannounced += wqes;
            if let DoorbellPolicy::Every(n) = self.config.doorbell {
                if self.state.unannounced >= n.get() {
                    self.announce();
                }
            }
        }
        Ticket { qpn: self.qpn, end }
    }

    /// Posts one WQE without checking or keeping its local memory.
    ///
    /// # Safety
    ///
    /// Every local buffer the WQE names must stay registered with the NIC, allocated and
    /// otherwise unused by this process (for buffers the NIC writes) until a completion
    /// covers the WQE. A real NIC reads and writes those buffers by DMA.
    pub unsafe fn post_unchecked<W: WqeSpec<Transport = T>>(
        &mut self,
        wqe: &Wqe<W>,
    ) -> Result<Ticket, PostError> {
        self.post_one(wqe, None)
    }

    /// Posts an erased WQE after checking that its target matches this queue's transport.
    pub fn post_erased(
        &mut self,
        wqe: &Wqe<AnyWqe<'_>>,
        registrations: &[Arc<dyn Registered>],
    ) -> Result<Ticket, PostError>
    where
        T: TypedTransport,
    {
        check_erased_target::<T>(wqe.spec())?;
        let keep = covering(wqe, registrations)?;
        self.post_one(wqe, keep)
    }

    /// Posts a signaled NOP if the last posted WQE is unsignaled, so that a completion will
    /// retire everything posted; returns the ticket that covers everything.
    pub fn signal_tail(&mut self) -> Result<Option<Ticket>, PostError> {
        if self.state.unsignaled == 0 {
            return Ok(None);
        }
        let nop = Nop::<T>::new().signaled().build()?;
        self.post_one(&nop, None).map(Some)
    }

    /// Posts a signaled NOP (one WQEBB) whatever came before it: recovery's, whose
    /// completion or flush retires everything posted.
    pub(crate) fn post_signaled_nop(&mut self) -> Result<Ticket, PostError> {
        let nop = Nop::<T>::new().signaled().build()?;
        self.post_one(&nop, None)
    }

    /// Announces every published WQE to the NIC: the host barrier, the doorbell record
    /// (big-endian next free WQEBB), a write flush, the 8-byte doorbell, a write flush.
    /// Does nothing if nothing new was published.
    #[inline]
    pub fn ring_doorbell(&mut self) {
        if self.state.rung != self.state.producer {
            self.announce();
        }
    }

    /// Announces everything published (something was published since the last doorbell).
    #[inline(always)]
    fn announce(&mut self) {
        let st = &mut self.state;
        self.memory
            .announce(st.producer, st.last_ctrl.to_ne_bytes());
        st.rung = st.producer;
        st.unannounced = 0;
    }
}

fn check_erased_target<T: TypedTransport>(wqe: &AnyWqe<'_>) -> Result<(), PostError> {
    use crate::wqe::{AnyDcTarget, AnyOperation, AvForm, Compact, Full};
    let addressed = !matches!(wqe.op, AnyOperation::Nop | AnyOperation::Dump(_));
    let expected_ds = T::TARGET_DS;
    let ok = match (T::KIND, &wqe.target) {
        (TransportKind::Rc, None) => wqe.stream_id == 0,
        (TransportKind::Rc, Some(_)) => !addressed && wqe.stream_id == 0,
        (TransportKind::Dc, None) => !addressed,
        (TransportKind::Dc, Some(AnyDcTarget::Compact(_))) => {
            !addressed || expected_ds == Compact::DS
        }
        (TransportKind::Dc, Some(AnyDcTarget::Full(_))) => !addressed || expected_ds == Full::DS,
    };
    if ok {
        Ok(())
    } else {
        Err(PostError::TransportMismatch { queue: T::KIND })
    }
}

/// Registrations a posted WQE keeps alive until its completion.
pub(crate) type KeepAlive = Box<[Arc<dyn Registered>]>;

/// The registrations covering every local buffer of `wqe`, to keep alive with it, or the
/// first buffer none of them covers.
#[inline(always)]
pub(crate) fn covering<W: WqeSpec>(
    wqe: &Wqe<W>,
    registrations: &[Arc<dyn Registered>],
) -> Result<Option<KeepAlive>, PostError> {
    let mut uncovered = None;
    let mut keep: Vec<Arc<dyn Registered>> = Vec::new();
    wqe.spec().visit_local(&mut |span| match registrations
        .iter()
        .find(|r| r.lkey() == span.lkey && r.covers(span.addr, span.len))
    {
        Some(r) if !keep.iter().any(|k| Arc::ptr_eq(k, r)) => keep.push(r.clone()),
        Some(_) => {}
        None => uncovered = uncovered.or(Some(span)),
    });
    match uncovered {
        Some(span) => Err(PostError::UncoveredLocalMemory { span }),
        None if keep.is_empty() => Ok(None),
        None => Ok(Some(keep.into_boxed_slice())),
    }
}

/// Slots reserved on a host send queue, to be filled with WQEs in order and published.
///
/// Publishing consumes the reservation, so it cannot be used afterwards:
///
/// ```compile_fail,E0382
/// # use ibgda::queue::*; use ibgda::wqe::*; use ibgda::order::HostBarrier;
/// let memory = SendQueueMemory::allocate(RingSize::new(8).unwrap()).unwrap();
/// let mut sq = SendQueue::<Rc>::new(Qpn::new(1).unwrap(), memory, Default::default(), HostBarrier).unwrap();
/// let nop = Nop::<Rc>::new().build().unwrap();
/// let mut r = sq.reserve(2).unwrap();
/// r.write(&nop).unwrap();
/// let _ticket = r.publish();
/// r.write(&nop).unwrap(); // the reservation was moved into publish
/// ```
#[must_use = "a reservation holds slots until it is published or dropped"]
pub struct Reservation<'q, T: Transport> {
    queue: &'q mut SendQueue<T, Host, HostBarrier>,
    start: u64,
    end: u64,
    cursor: u64,
    wqes: u32,
    /// The producer's signaling run and doorbell value before this reservation, restored
    /// if it is dropped unpublished.
    saved: (u32, u64),
    published: bool,
}

impl<T: Transport> Reservation<'_, T> {
    /// WQEBBs reserved and not yet written.
    pub fn remaining(&self) -> u32 {
        (self.end - self.cursor) as u32
    }

    /// Writes a WQE into the next reserved slots. Its local memory is the caller's to keep
    /// alive: use [`SendQueue::post`] for checked posting.
    ///
    /// # Safety
    ///
    /// As [`SendQueue::post_unchecked`].
    pub unsafe fn write_unchecked<W: WqeSpec<Transport = T>>(
        &mut self,
        wqe: &Wqe<W>,
    ) -> Result<(), PostError> {
        self.write_raw(wqe, None)
    }

    /// Writes a WQE whose local buffers lie in `registrations` into the next reserved
    /// slots.
    pub fn write<W: WqeSpec<Transport = T> + NoLocalMemory>(
        &mut self,
        wqe: &Wqe<W>,
    ) -> Result<(), PostError> {
        self.write_raw(wqe, None)
    }

    /// Writes a WQE whose local buffers lie in `registrations` into the next reserved
    /// slots, keeping those registrations alive until the WQE completes.
    pub fn write_registered<W: WqeSpec<Transport = T>>(
        &mut self,
        wqe: &Wqe<W>,
        registrations: &[Arc<dyn Registered>],
    ) -> Result<(), PostError> {
        let keep = covering(wqe, registrations)?;
        self.write_raw(wqe, keep)
    }

    /// Encodes straight into the ring's next reserved slots, applying the signaling
    /// policy.
    fn write_raw<W: WqeSpec>(
        &mut self,
        wqe: &Wqe<W>,
        keep: Option<KeepAlive>,
    ) -> Result<(), PostError> {
        let wqebbs = self.queue.fit(wqe, self.remaining())?;
        self.queue.write_at(self.cursor, wqebbs, wqe, keep);
        self.cursor += u64::from(wqebbs);
        self.wqes += 1;
        Ok(())
    }

    /// Publishes the WQEs written, in order, and rings the doorbell if the queue's policy
    /// says so. Unwritten reserved slots are given back. Returns the ticket of the last
    /// WQE (which covers all of them).
    pub fn publish(mut self) -> Ticket {
        self.published = true;
        self.queue.publish_through(self.cursor, self.wqes)
    }
}

impl<T: Transport> Drop for Reservation<'_, T> {
    fn drop(&mut self) {
        if !self.published {
            // Nothing was published: forget what was written. The NIC reads only up to
            // the doorbell record, which never covered these slots.
            let q = &mut *self.queue;
            (q.state.unsignaled, q.state.last_ctrl) = self.saved;
            let mask = (q.memory.size().wqebbs() - 1) as u64;
            let mut at = self.start;
            while at < self.cursor {
                let slot = (at & mask) as usize;
                let step = u64::from(q.state.slots[slot].wqebbs.max(1));
                q.state.slots[slot].start = NO_WQE;
                q.state.release(slot);
                at += step;
            }
        }
    }
}

/// WQE shapes whose local memory needs no registration check (NOP, and WRITEs whose data is
/// inline); the others are written with [`Reservation::write_registered`].
pub trait NoLocalMemory {}
impl<T: Transport> NoLocalMemory for Nop<T> {}
impl<T: Transport> NoLocalMemory for crate::wqe::RdmaWrite<'_, T, crate::wqe::Inline<'_>> {}
impl<T: Transport> NoLocalMemory for crate::wqe::RdmaWrite<'_, T, crate::wqe::Empty> {}
impl<T: Transport> NoLocalMemory for crate::wqe::RdmaRead<'_, T, crate::wqe::Empty> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wqe::{
        Atomic, CompactAddressVector, Dc, Full, FullAddressVector, LinkAddress, LocalBuffer, RKey,
        Rc, RdmaRead, RdmaWrite, RemoteAddress, SendRing, Sge,
    };

    /// Local memory the NIC may touch, for WQEs that name some: covers everything.
    struct Everything;
    // SAFETY: these tests play the NIC themselves: nothing executes the WQEs, so nothing
    // reaches memory through the key.
    unsafe impl Registered for Everything {
        fn lkey(&self) -> LKey {
            LKey(0x42)
        }
        fn covers(&self, _: u64, _: u64) -> bool {
            true
        }
    }

    /// A queue of `wqebbs` slots whose counters all stand at `counter`, as if that many
    /// WQEBBs had been posted and completed, so a test reaches the 16-bit wrap quickly.
    fn queue_at<T: Transport>(wqebbs: usize, counter: u64) -> SendQueue<T> {
        let memory = SendQueueMemory::allocate(RingSize::new(wqebbs).unwrap()).unwrap();
        let mut sq = SendQueue::new(
            Qpn::new(0x00ab_cdef).unwrap(),
            memory,
            SendQueueConfig::default(),
            HostBarrier,
        )
        .unwrap();
        let st = &mut sq.state;
        (st.producer, st.rung, st.retired) = (counter, counter, counter);
        sq
    }

    /// Posts `wqe` and checks the whole ring against the byte encoder's output: the ring
    /// before the post with [`SendRing::write`] of the same WQE at the same index, so the
    /// WQE's octowords are the encoder's and no other byte changed. Then checks the
    /// doorbell record and doorbell, and retires the WQE through its completion.
    fn post_and_compare<T: Transport, W: WqeSpec<Transport = T>>(
        sq: &mut SendQueue<T>,
        wqe: &Wqe<W>,
        seen: &mut Placements,
    ) {
        let at = sq.producer();
        let index = WqeIndex::from_counter(at);
        let mut expected = sq.memory().ring_bytes();
        SendRing::new(&mut expected, WqeLimits::default())
            .unwrap()
            .write(index, sq.qpn(), wqe)
            .unwrap();
        let registrations: [Arc<dyn Registered>; 1] = [Arc::new(Everything)];
        let ticket = sq.post(wqe, &registrations).unwrap();
        let wqebbs = u64::from(wqe.wqebbs());
        assert_eq!(ticket.end(), at + wqebbs);
        assert_eq!(sq.memory().ring_bytes(), expected, "WQE at counter {at}");
        let slot = sq.size().slot(index);
        let ring_wqebbs = sq.size().wqebbs() as usize;
        let start = slot * WQEBB_BYTES;
        assert_eq!(
            sq.memory().doorbell_bytes().unwrap(),
            expected[start..start + 8],
            "the doorbell is bytes 0..8 of the control segment"
        );
        let record = (((at + wqebbs) & 0xffff) as u32).to_be_bytes();
        assert_eq!(sq.memory().dbrec_bytes()[4..], record);
        seen.record(slot, wqebbs as usize, ring_wqebbs, index.0);
        // Every WQE is signaled: its completion retires exactly it.
        assert_eq!(sq.retire_through(index.0), Some(at + wqebbs));
        assert!(sq.is_idle());
    }

    /// Which placements a run reached.
    #[derive(Default)]
    struct Placements {
        ending_at_the_ring_end: usize,
        wrapping: usize,
        index_wrapping: usize,
    }

    impl Placements {
        fn record(&mut self, slot: usize, wqebbs: usize, ring_wqebbs: usize, index: u16) {
            if slot + wqebbs == ring_wqebbs {
                self.ending_at_the_ring_end += 1;
            }
            if slot + wqebbs > ring_wqebbs {
                self.wrapping += 1;
            }
            if usize::from(index) + wqebbs > 1 << 16 {
                self.index_wrapping += 1;
            }
        }
    }

    /// The ring writer stores exactly the byte encoder's bytes (which the rdma-core oracle
    /// tests compare with the provider's), for every shape with a segment of its own (the
    /// control, remote address, data, inline and atomic segments and both DC address
    /// vectors), at every slot of the ring: WQEs that end exactly at the ring's end, that
    /// wrap to its start (segments by words and by bytes in the wrapped block), and across
    /// the 16-bit WQE index's wrap.
    #[test]
    fn ring_writes_are_the_byte_encoders_bytes_at_the_end_across_the_wrap_and_the_index_wrap() {
        let payload: Vec<u8> = (0..=255u8).map(|b| b.wrapping_mul(151) ^ 0x5a).collect();
        let remote = RemoteAddress::new(0x1122_3344_5566_7788, RKey(0x99aa_bbcc));
        let sge =
            |n: u64| Sge::new(0x7000_0000 + n * 0x1000, 0x100 + n as u32, LKey(0x42)).unwrap();
        let result = LocalBuffer::new(0x8000_0000, LKey(0x42));
        // From below the 16-bit wrap to past it; a ring of 8 slots sees every slot. A round
        // is 13 WQEBBs (1, 1, 2, 4, 2, 1, 1, 1), so from 42 below the wrap the fourth
        // round's third WQE (2 blocks) straddles it.
        let start = (1 << 16) - 42;
        let mut rc = queue_at::<Rc>(8, start);
        let mut seen = Placements::default();
        let rounds = if cfg!(miri) { 6 } else { 12 };
        for round in 0..rounds {
            // 1, 1, 2, 4, 1 and 1 WQEBBs: the sizes cycle through every slot.
            for len in [8usize, 13, 61, 200] {
                let wqe = RdmaWrite::new(remote)
                    .inline(&payload[round..round + len])
                    .signaled()
                    .build()
                    .unwrap();
                post_and_compare(&mut rc, &wqe, &mut seen);
            }
            let gather = RdmaWrite::new(remote)
                .gather([sge(1), sge(2), sge(3)])
                .immediate(0xfeed_0000 + round as u32)
                .signaled()
                .build()
                .unwrap();
            post_and_compare(&mut rc, &gather, &mut seen);
            let read = RdmaRead::new(remote)
                .sge(sge(4))
                .signaled()
                .build()
                .unwrap();
            post_and_compare(&mut rc, &read, &mut seen);
            let atomic = Atomic::fetch_add(RemoteAddress::new(0x9000, RKey(7)), result, 5)
                .signaled()
                .build()
                .unwrap();
            post_and_compare(&mut rc, &atomic, &mut seen);
            let nop = Nop::<Rc>::new().signaled().build().unwrap();
            post_and_compare(&mut rc, &nop, &mut seen);
        }
        assert!(rc.producer() > 1 << 16, "{}", rc.producer());

        // DC: the address vector is written as bytes, and with the full one the atomic
        // segment lands in the second block, at the ring's start when the WQE wraps.
        let compact = CompactAddressVector {
            dct: 0x77,
            dc_key: 0x5623_ceaf,
            lid: 4,
            ..Default::default()
        }
        .encode()
        .unwrap();
        let full = FullAddressVector {
            dct: 0x78,
            dc_key: 0x0102_0304_0506_0708,
            link: LinkAddress::InfiniBand {
                lid: 9,
                sl: 3,
                static_rate: 2,
                source_path_bits: 1,
                force_loopback: false,
                grh: None,
            },
        }
        .encode()
        .unwrap();
        let mut dc_compact = queue_at::<Dc<crate::wqe::Compact>>(4, start);
        let mut dc_full = queue_at::<Dc<Full>>(4, start + 1);
        for round in 0..if cfg!(miri) { 6 } else { 12 } {
            let write = RdmaWrite::new(compact.at(remote))
                .inline(&payload[round..round + 40])
                .signaled()
                .build()
                .unwrap();
            post_and_compare(&mut dc_compact, &write, &mut seen);
            let atomic = Atomic::fetch_add(full.at(RemoteAddress::new(0x9000, RKey(7))), result, 3)
                .signaled()
                .build()
                .unwrap();
            post_and_compare(&mut dc_full, &atomic, &mut seen);
            let write = RdmaWrite::new(full.at(remote))
                .sge(sge(5))
                .signaled()
                .build()
                .unwrap();
            post_and_compare(&mut dc_full, &write, &mut seen);
        }
        assert!(
            seen.ending_at_the_ring_end > 0,
            "no WQE ended at the ring's end"
        );
        assert!(seen.wrapping > 0, "no WQE wrapped");
        assert!(
            seen.index_wrapping > 0,
            "no WQE crossed the 16-bit index wrap"
        );
    }

    /// The queue's signaling policy raises the completion mode of the WQE it signals in
    /// the ring itself (and in the doorbell value, bytes 0..8, which do not hold it).
    #[test]
    fn the_signaling_policy_marks_the_wqe_in_the_ring() {
        let mut sq = queue_at::<Rc>(8, 0);
        let payload = [3u8; 8];
        let wqe = RdmaWrite::new(RemoteAddress::new(0x1000, RKey(1)))
            .inline(&payload)
            .build()
            .unwrap();
        // Half the ring (4 WQEBBs) unsignaled in a row at most: the 5th WQE is signaled.
        for n in 0..5u64 {
            sq.post(&wqe, &[]).unwrap();
            let ring = sq.memory().ring_bytes();
            let fm_ce_se = ring[n as usize * WQEBB_BYTES + 11];
            let expected = if n == 4 { 0x08 } else { 0x00 };
            assert_eq!(fm_ce_se, expected, "WQE {n}");
        }
        assert_eq!(sq.signaled_through(), 5);
    }

    /// A reservation forgotten after writing two one-block WQEs leaves their start tags;
    /// a two-block WQE published over the same slots clears the tag inside it, so a CQE
    /// naming its second block is stray, and one naming its first retires it.
    #[test]
    fn tags_left_by_a_forgotten_reservation_never_retire() {
        let mut sq = queue_at::<Rc>(8, 0);
        let nop = Nop::<Rc>::new().build().unwrap();
        let mut reservation = sq.reserve(2).unwrap();
        reservation.write(&nop).unwrap();
        reservation.write(&nop).unwrap();
        core::mem::forget(reservation);
        // Past the producer: nothing was published.
        assert_eq!(sq.retire_through(0), None);
        assert_eq!(sq.retire_through(1), None);
        let payload = [9u8; 40];
        let two_blocks = RdmaWrite::new(RemoteAddress::new(0x1000, RKey(1)))
            .inline(&payload)
            .signaled()
            .build()
            .unwrap();
        assert_eq!(two_blocks.wqebbs(), 2);
        sq.post(&two_blocks, &[]).unwrap();
        assert_eq!(sq.retire_through(1), None, "the middle of the WQE");
        assert_eq!(sq.retired(), 0);
        assert_eq!(sq.retire_through(0), Some(2));
        // A completion for a WQE already retired (a stale counter) is stray too.
        assert_eq!(sq.retire_through(0), None);
    }
}
