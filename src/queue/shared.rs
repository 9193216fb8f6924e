//! A send queue shared by several CPU threads: atomic reservation, in-order publication,
//! one doorbell per batch, and a cooperative group mode in which one reservation and one
//! doorbell serve many producers.
//!
//! The protocol (the CPU form of NVSHMEM's reserve / ready-head / post):
//! 1. *Reserve*: a compare-exchange advances `reserved` by the WQE's WQEBBs unless that
//!    would pass `retired + ring size` (then [`PostError::Full`]).
//! 2. *Write*: the thread owns its slots exclusively and encodes into them.
//! 3. *Publish*: it waits until `ready` reaches its first slot (everything before it is
//!    published), then stores its end into `ready` with release. Publication is therefore
//!    in reservation order, and `ready` only covers fully written WQEs.
//! 4. *Doorbell*: the publisher rings if nobody reserved after it, or if its WQEs cross a
//!    batch boundary. Ringing takes the doorbell lock, reads `ready` (acquire), and if it
//!    passed what was last rung, writes the doorbell record, then the doorbell. The lock
//!    keeps doorbell-record values monotonic; late ringers cover earlier publishers.
//! 5. *Retire*: the completion poller advances `retired` (release) past completed WQEs.
//!
//! The counters are [`PublicationCounters`]; the loom models in `tests/loom_publication.rs`
//! check the protocol on them.

use core::fmt;
use core::marker::PhantomData;
use std::sync::atomic::AtomicU8;
use std::sync::{Arc, PoisonError};

use super::memory::{CompletionQueueMemory, SendQueueMemory};
use super::pair::{CompletionError, PollError, Polled};
use super::send::{covering, KeepAlive, PostError, Registered, Ticket};
use crate::cq::{Completion, CompletionQueue, CqMode};
use crate::sync::{spin_wait, AtomicU64, Mutex, MutexGuard, Ordering};
use crate::wqe::{
    CompletionMode, Nop, Qpn, RingSize, Transport, Wqe, WqeIndex, WqeLimits, WqeSpec, WqeWriter,
    WQEBB_BYTES,
};

/// The counters of the shared publication protocol, all free-running WQEBB counts.
#[derive(Debug)]
pub struct PublicationCounters {
    reserved: AtomicU64,
    ready: AtomicU64,
    retired: AtomicU64,
    capacity: u64,
}

impl PublicationCounters {
    /// Counters for a ring of `capacity` WQEBBs, all at zero.
    pub fn new(capacity: u64) -> Self {
        Self {
            reserved: AtomicU64::new(0),
            ready: AtomicU64::new(0),
            retired: AtomicU64::new(0),
            capacity,
        }
    }

    /// Reserves `wqebbs`: the first reserved WQEBB, or the free count if they do not fit.
    ///
    /// `reserved` is loaded before `retired`; a thread preempted between the two loads can
    /// find `retired` past the `reserved` it holds (others reserved, published and retired
    /// meanwhile). Then its `reserved` is stale: the in-flight count is computed with
    /// wrapping arithmetic, and a count larger than the ring means "reload and retry",
    /// never a free count.
    pub fn reserve(&self, wqebbs: u64) -> Result<u64, u64> {
        let mut start = self.reserved.load(Ordering::Relaxed);
        loop {
            let retired = self.retired.load(Ordering::Acquire);
            let in_flight = start.wrapping_sub(retired);
            if in_flight > self.capacity {
                // Stale `start`: the acquire load of `retired` saw a retirement that came
                // after a newer reservation, so reloading `reserved` sees at least that.
                start = self.reserved.load(Ordering::Relaxed);
                spin_wait();
                continue;
            }
            let free = self.capacity - in_flight;
            if wqebbs > free {
                return Err(free);
            }
            match self.reserved.compare_exchange(
                start,
                start.wrapping_add(wqebbs),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(start),
                Err(now) => start = now,
            }
        }
    }

    /// Publishes `[start, end)` after everything before it: waits for `ready == start`,
    /// then stores `end` with release.
    pub fn publish(&self, start: u64, end: u64) {
        while self.ready.load(Ordering::Acquire) != start {
            spin_wait();
        }
        self.ready.store(end, Ordering::Release);
    }

    /// Everything published (acquire: the WQEs before it are fully written).
    pub fn ready(&self) -> u64 {
        self.ready.load(Ordering::Acquire)
    }

    /// Everything reserved.
    pub fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::Acquire)
    }

    /// Everything retired.
    pub fn retired(&self) -> u64 {
        self.retired.load(Ordering::Acquire)
    }

    /// Frees every WQEBB before `to` (one poller at a time).
    pub fn retire(&self, to: u64) {
        self.retired.store(to, Ordering::Release);
    }
}

/// Doorbell state, behind the doorbell lock.
#[derive(Debug)]
struct DoorbellState {
    rung: u64,
}

/// Completion state, behind the completion lock.
struct CompletionState {
    cq: CompletionQueue,
    keep_alive: Box<[Option<KeepAlive>]>,
    first_error: Option<CompletionError>,
}

/// How a shared send queue is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedQueueConfig {
    /// Limits on posted WQEs.
    pub limits: WqeLimits,
    /// A WQE whose WQEBBs cross a multiple of this is signaled (at most half the ring).
    pub signal_interval: u32,
    /// A publisher rings the doorbell when its WQEs cross a multiple of this many WQEBBs
    /// (or when nobody reserved after it).
    pub doorbell_batch: u32,
    /// How the NIC fills the CQ.
    pub cq_mode: CqMode,
}

impl SharedQueueConfig {
    /// Defaults for a ring of `size`: signal every half ring, ring every 32 WQEBBs.
    pub fn for_ring(size: RingSize) -> Self {
        Self {
            limits: WqeLimits::default(),
            signal_interval: (size.wqebbs() / 2).max(1),
            doorbell_batch: 32.min(size.wqebbs()),
            cq_mode: CqMode::Ring,
        }
    }
}

/// A send queue (with its completion queue) that many CPU threads post to through `&self`.
pub struct SharedSendQueue<T: Transport> {
    qpn: Qpn,
    memory: SendQueueMemory,
    config: SharedQueueConfig,
    counters: PublicationCounters,
    /// Size in WQEBBs of the WQE starting at each slot.
    wqe_wqebbs: Box<[AtomicU8]>,
    doorbell: Mutex<DoorbellState>,
    completion: Mutex<CompletionState>,
    _transport: PhantomData<T>,
}

impl<T: Transport> fmt::Debug for SharedSendQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedSendQueue")
            .field("qpn", &self.qpn)
            .field("counters", &self.counters)
            .finish()
    }
}

fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    // A panic while holding these locks leaves consistent state (every update is a
    // single assignment), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T: Transport> SharedSendQueue<T> {
    /// A shared queue pair over host memory.
    pub fn new(
        qpn: Qpn,
        sq: SendQueueMemory,
        cq: CompletionQueueMemory,
        config: SharedQueueConfig,
    ) -> Result<Self, crate::wqe::WqeError> {
        let wqebbs = sq.size().wqebbs();
        let half = (wqebbs / 2).max(1);
        if config.signal_interval == 0 || config.signal_interval > half {
            return Err(crate::wqe::WqeError::FieldOutOfRange {
                field: "signal_interval",
                value: config.signal_interval.into(),
                max: half.into(),
            });
        }
        config.limits.validate()?;
        if config.doorbell_batch == 0 {
            return Err(crate::wqe::WqeError::ZeroLength {
                what: "doorbell batch",
            });
        }
        let slots = wqebbs as usize;
        Ok(Self {
            qpn,
            counters: PublicationCounters::new(wqebbs.into()),
            wqe_wqebbs: (0..slots).map(|_| AtomicU8::new(0)).collect(),
            doorbell: Mutex::new(DoorbellState { rung: 0 }),
            completion: Mutex::new(CompletionState {
                cq: CompletionQueue::new(cq, config.cq_mode),
                keep_alive: (0..slots).map(|_| None).collect(),
                first_error: None,
            }),
            memory: sq,
            config,
            _transport: PhantomData,
        })
    }

    /// The queue pair number.
    pub fn qpn(&self) -> Qpn {
        self.qpn
    }
    /// The queue's memory.
    pub fn memory(&self) -> &SendQueueMemory {
        &self.memory
    }
    /// The protocol counters.
    pub fn counters(&self) -> &PublicationCounters {
        &self.counters
    }

    /// Reserves `wqebbs` slots for the calling thread.
    pub fn reserve(&self, wqebbs: u32) -> Result<SharedReservation<'_, T>, PostError> {
        let start = self
            .counters
            .reserve(wqebbs.into())
            .map_err(|free| PostError::Full {
                needed: wqebbs,
                free: free as u32,
            })?;
        let end = start + u64::from(wqebbs);
        Ok(SharedReservation {
            queue: self,
            start,
            end,
            cursor: start,
            keep: Vec::new(),
            published: false,
        })
    }

    /// Reserves `parts × wqebbs_per_part` slots for a group of producers: each part is
    /// written by one member (from any thread), and the last member to finish publishes
    /// the whole group with one doorbell.
    pub fn reserve_group(
        &self,
        parts: u32,
        wqebbs_per_part: u32,
    ) -> Result<GroupReservation<'_, T>, PostError> {
        let total = parts
            .checked_mul(wqebbs_per_part)
            .filter(|&t| t > 0)
            .ok_or(PostError::Wqe(crate::wqe::WqeError::ZeroLength {
                what: "group reservation",
            }))?;
        let start = self
            .counters
            .reserve(total.into())
            .map_err(|free| PostError::Full {
                needed: total,
                free: free as u32,
            })?;
        Ok(GroupReservation {
            queue: self,
            start,
            wqebbs_per_part,
            parts,
            finished: std::sync::atomic::AtomicU32::new(0),
            claimed: (0..parts)
                .map(|_| std::sync::atomic::AtomicBool::new(false))
                .collect(),
            keep: Mutex::new(Vec::new()),
        })
    }

    /// Posts one WQE whose local buffers lie in `registrations`.
    pub fn post<W: WqeSpec<Transport = T>>(
        &self,
        wqe: &Wqe<W>,
        registrations: &[Arc<dyn Registered>],
    ) -> Result<Ticket, PostError> {
        let mut r = self.reserve(wqe.wqebbs())?;
        r.write_registered(wqe, registrations)?;
        Ok(r.publish())
    }

    /// Writes `wqe`, whose local buffers must lie in `registrations`, at `at` of a
    /// reservation ending at `end`: the next free WQEBB of the reservation, and the
    /// registrations to keep alive with the WQE (recorded at publication).
    fn write_covered<W: WqeSpec>(
        &self,
        at: u64,
        end: u64,
        wqe: &Wqe<W>,
        registrations: &[Arc<dyn Registered>],
    ) -> Result<(u64, Option<(u64, KeepAlive)>), PostError> {
        let keep = covering(wqe, registrations)?;
        let wqebbs = self.write_at(at, end - at, wqe)?;
        Ok((at + u64::from(wqebbs), keep.map(|k| (at, k))))
    }

    /// Encodes `wqe` at `at` (inside the caller's reservation, `left` WQEBBs remaining);
    /// returns its WQEBBs.
    fn write_at<W: WqeSpec>(&self, at: u64, left: u64, wqe: &Wqe<W>) -> Result<u32, PostError> {
        let size = self.memory.size();
        let wqebbs = self.config.limits.check(wqe, size)?;
        if u64::from(wqebbs) > left {
            return Err(PostError::ReservationExhausted {
                needed: wqebbs,
                left: left as u32,
            });
        }
        let index = WqeIndex::from_counter(at);
        // A WQE whose blocks cross a multiple of the interval is signaled.
        let mut control = wqe.spec().control();
        let interval = u64::from(self.config.signal_interval);
        if (at + u64::from(wqebbs)) / interval > at / interval {
            control.flags.completion = CompletionMode::Always;
        }
        // Straight into the reserved slots, which this producer owns until it publishes
        // them: the ring's words are `size`'s and the WQE no larger than the ring (checked
        // above), so it lands in its own slots.
        let slot = size.slot(index);
        let mut writer = WqeWriter::ring(
            self.memory.ring_buffer().words(),
            slot * (WQEBB_BYTES / 8),
            wqebbs,
        );
        wqe.encode_with_control(&mut writer, wqe.control_octoword(control, index, self.qpn));
        self.wqe_wqebbs[slot].store(wqebbs as u8, std::sync::atomic::Ordering::Relaxed);
        Ok(wqebbs)
    }

    /// Fills `[from, to)` with unsignaled one-block NOPs (for slots a producer reserved and
    /// did not use), unless a NOP there must be signaled by the interval rule.
    fn pad_with_nops(&self, from: u64, to: u64) {
        let Ok(nop) = Nop::<T>::new().build() else {
            return;
        };
        let mut at = from;
        while at < to {
            // One block fits in any non-empty remainder of a reservation.
            if self.write_at(at, to - at, &nop).is_err() {
                return;
            }
            at += 1;
        }
    }

    /// Publishes `[start, end)` in order and rings per the batching rule.
    fn publish_range(&self, start: u64, end: u64) {
        self.counters.publish(start, end);
        let batch = u64::from(self.config.doorbell_batch);
        let crosses = end / batch > start / batch;
        if crosses || self.counters.reserved() == end {
            self.ring_doorbell();
        }
    }

    /// Announces everything published: under the doorbell lock, the doorbell record and
    /// an 8-byte doorbell carrying the next free index and the QPN.
    pub fn ring_doorbell(&self) {
        let mut state = lock(&self.doorbell);
        let target = self.counters.ready();
        if target <= state.rung {
            return;
        }
        // A doorbell value of the GPU libraries' form: the next free index and the QPN (a
        // shared queue has no single "last WQE" to take the control prefix from).
        let mut value = [0u8; 8];
        value[..4].copy_from_slice(&((target as u32 & 0xffff) << 8).to_be_bytes());
        value[4..].copy_from_slice(&(self.qpn.get() << 8).to_be_bytes());
        self.memory.announce(target, value);
        state.rung = target;
    }

    /// Consumes one CQE (one poller at a time; others wait for the lock) and retires the
    /// slots it covers.
    pub fn poll(&self) -> Result<Option<Polled>, PollError> {
        let mut state = lock(&self.completion);
        let Some(result) = state.cq.poll() else {
            return Ok(None);
        };
        let completion = result.map_err(PollError::Malformed)?;
        let stray = PollError::Stray {
            qpn: completion.qpn(),
            wqe_counter: completion.wqe_counter(),
        };
        if completion.qpn() != self.qpn.get() {
            return Err(stray);
        }
        let (counter, error) = match completion {
            Completion::Requester(c) => (c.wqe_counter, None),
            Completion::Error(e) if e.requester => (
                e.wqe_counter,
                Some(CompletionError {
                    qpn: e.qpn,
                    wqe_index: e.wqe_counter,
                    syndrome: e.syndrome,
                    syndrome_byte: e.syndrome_byte,
                    vendor_syndrome: e.vendor_syndrome,
                    status: e.status(),
                }),
            ),
            Completion::Responder(r) => return Ok(Some(Polled::Received(r))),
            Completion::Error(_) => return Err(stray),
        };
        let retired = self.retire_through(&mut state, counter).ok_or(stray)?;
        if let Some(error) = error {
            state.first_error.get_or_insert(error);
            return Err(PollError::Completion(error));
        }
        let send_opcode = match completion {
            Completion::Requester(c) => c.send_opcode,
            _ => 0,
        };
        let byte_count = match completion {
            Completion::Requester(c) => c.byte_count,
            _ => 0,
        };
        Ok(Some(Polled::Sent {
            wqe_counter: counter,
            retired,
            send_opcode,
            byte_count,
        }))
    }

    /// Retires every WQE up to and including the one starting at `wqe_counter`, if a
    /// published WQE starts there: walking the published WQEs from `retired` by their
    /// recorded sizes must land on it, and it must end within the published prefix (sizes
    /// recorded past it belong to reservations still being written, or never published).
    fn retire_through(&self, state: &mut CompletionState, wqe_counter: u16) -> Option<u64> {
        use std::sync::atomic::Ordering::Relaxed;
        let retired = self.counters.retired();
        let published = self.counters.ready();
        let start = retired.checked_add(u64::from(wqe_counter.wrapping_sub(retired as u16)))?;
        if start >= published {
            return None;
        }
        let mask = u64::from(self.memory.size().wqebbs() - 1);
        let mut at = retired;
        let end = loop {
            let len = u64::from(self.wqe_wqebbs[(at & mask) as usize].load(Relaxed));
            let next = at.checked_add(len).filter(|&n| len > 0 && n <= published)?;
            if at == start {
                break next;
            }
            if next > start {
                return None; // `start` lies inside a WQE
            }
            at = next;
        };
        let mut at = retired;
        while at < end {
            let slot = (at & mask) as usize;
            let step = self.wqe_wqebbs[slot].swap(0, Relaxed);
            state.keep_alive[slot] = None;
            at += u64::from(step);
        }
        self.counters.retire(end);
        Some(end)
    }

    fn keep(&self, slot_counter: u64, keep: KeepAlive) {
        let mask = u64::from(self.memory.size().wqebbs() - 1);
        lock(&self.completion).keep_alive[(slot_counter & mask) as usize] = Some(keep);
    }

    /// The first error a completion reported.
    pub fn first_error(&self) -> Option<CompletionError> {
        lock(&self.completion).first_error
    }

    /// Whether every WQE up to `ticket` has completed.
    pub fn is_complete(&self, ticket: Ticket) -> bool {
        self.counters.retired() >= ticket.end
    }
}

/// Slots one thread reserved on a [`SharedSendQueue`]. Publishing consumes it; dropping it
/// unpublished fills what is left with NOPs and publishes, so the threads after it are
/// never blocked.
#[must_use = "a reservation blocks later publishers until it is published or dropped"]
pub struct SharedReservation<'q, T: Transport> {
    queue: &'q SharedSendQueue<T>,
    start: u64,
    end: u64,
    cursor: u64,
    keep: Vec<(u64, KeepAlive)>,
    published: bool,
}

impl<T: Transport> SharedReservation<'_, T> {
    /// WQEBBs reserved and not yet written.
    pub fn remaining(&self) -> u32 {
        (self.end - self.cursor) as u32
    }

    /// Writes a WQE whose local buffers lie in `registrations`.
    pub fn write_registered<W: WqeSpec<Transport = T>>(
        &mut self,
        wqe: &Wqe<W>,
        registrations: &[Arc<dyn Registered>],
    ) -> Result<(), PostError> {
        let (next, keep) = self
            .queue
            .write_covered(self.cursor, self.end, wqe, registrations)?;
        self.keep.extend(keep);
        self.cursor = next;
        Ok(())
    }

    /// Writes a WQE without checking or keeping its local memory.
    ///
    /// # Safety
    ///
    /// As [`super::SendQueue::post_unchecked`]: the local buffers must stay registered and
    /// alive until a completion covers the WQE.
    pub unsafe fn write_unchecked<W: WqeSpec<Transport = T>>(
        &mut self,
        wqe: &Wqe<W>,
    ) -> Result<(), PostError> {
        let n = self
            .queue
            .write_at(self.cursor, self.end - self.cursor, wqe)?;
        self.cursor += u64::from(n);
        Ok(())
    }

    /// Publishes (after every earlier reservation), padding unused slots with NOPs, and
    /// rings per the batching rule.
    pub fn publish(mut self) -> Ticket {
        self.finish()
    }

    fn finish(&mut self) -> Ticket {
        self.published = true;
        let q = self.queue;
        q.pad_with_nops(self.cursor, self.end);
        for (at, keep) in self.keep.drain(..) {
            q.keep(at, keep);
        }
        q.publish_range(self.start, self.end);
        Ticket {
            qpn: q.qpn,
            end: self.end,
        }
    }
}

impl<T: Transport> Drop for SharedReservation<'_, T> {
    fn drop(&mut self) {
        if !self.published {
            self.finish();
        }
    }
}

/// One reservation serving a group of producers: [`GroupReservation::part`] hands member
/// `i` its own slots; the last member to finish publishes the group with one doorbell.
pub struct GroupReservation<'q, T: Transport> {
    queue: &'q SharedSendQueue<T>,
    start: u64,
    wqebbs_per_part: u32,
    parts: u32,
    finished: std::sync::atomic::AtomicU32,
    claimed: Box<[std::sync::atomic::AtomicBool]>,
    keep: Mutex<Vec<(u64, KeepAlive)>>,
}

impl<'q, T: Transport> GroupReservation<'q, T> {
    /// The number of parts.
    pub fn parts(&self) -> u32 {
        self.parts
    }

    /// Part `i` (each index once: a second claim of the same index, or an index out of
    /// range, is `None`).
    pub fn part(&self, i: u32) -> Option<GroupPart<'_, 'q, T>> {
        let claimed = self.claimed.get(i as usize)?;
        if claimed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return None;
        }
        let start = self.start + u64::from(i) * u64::from(self.wqebbs_per_part);
        Some(GroupPart {
            group: self,
            cursor: start,
            end: start + u64::from(self.wqebbs_per_part),
            done: false,
        })
    }

    fn member_done(&self) {
        let before = self
            .finished
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        if before + 1 == self.parts {
            let q = self.queue;
            for (at, keep) in lock(&self.keep).drain(..) {
                q.keep(at, keep);
            }
            q.publish_range(
                self.start,
                self.start + u64::from(self.parts) * u64::from(self.wqebbs_per_part),
            );
        }
    }
}

impl<T: Transport> Drop for GroupReservation<'_, T> {
    fn drop(&mut self) {
        // Parts nobody claimed are padded and finished, so the group still publishes.
        for i in 0..self.parts {
            if let Some(part) = self.part(i) {
                drop(part);
            }
        }
    }
}

/// One member's slots in a [`GroupReservation`].
pub struct GroupPart<'g, 'q, T: Transport> {
    group: &'g GroupReservation<'q, T>,
    cursor: u64,
    end: u64,
    done: bool,
}

impl<T: Transport> GroupPart<'_, '_, T> {
    /// Writes a WQE whose local buffers lie in `registrations` into this part.
    pub fn write_registered<W: WqeSpec<Transport = T>>(
        &mut self,
        wqe: &Wqe<W>,
        registrations: &[Arc<dyn Registered>],
    ) -> Result<(), PostError> {
        let (next, keep) =
            self.group
                .queue
                .write_covered(self.cursor, self.end, wqe, registrations)?;
        lock(&self.group.keep).extend(keep);
        self.cursor = next;
        Ok(())
    }

    /// Finishes this member's part (padding with NOPs); the last member publishes.
    pub fn finish(mut self) {
        self.complete();
    }

    fn complete(&mut self) {
        self.done = true;
        self.group.queue.pad_with_nops(self.cursor, self.end);
        self.group.member_done();
    }
}

impl<T: Transport> Drop for GroupPart<'_, '_, T> {
    fn drop(&mut self) {
        if !self.done {
            self.complete();
        }
    }
}
