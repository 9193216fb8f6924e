//! The data path: doorbell watching, WQE fetch and execution, responses and completions.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::cq::Syndrome;
use crate::memory::DmaBuffer;
use crate::queue::SendQueueNicAccess;
use crate::wqe::segment::{DataSegment, MAX_DS, OCTOWORD_BYTES, WQEBB_BYTES};
use crate::wqe::{
    parse_fetched_wqe, wqebbs_for_ds, AnyDcTarget, AtomicOp, Opcode, ParseError, ParsedData,
    ParsedOp, ParsedWqe, Qpn, RemoteAddress, Solicited, TransportKind, WqeIndex,
};

use super::atomic::perform_atomic;
use super::completion::{
    error_cqe, requester_cqe, responder_cqe, CqRefusal, CqState, ResponderCqe,
};
use super::counters::{CounterBlock, StepReport};
use super::fabric::{
    AsyncEvent, Cqn, DctNumber, DoorbellWatch, Effects, ErrorCause, FabricState, InFlight,
    LocalWrite, NodeId, NodeState, PeerPath, QpState, QueueId, ResponderState, SendQueueState,
    WaitingCqe,
};
use super::fault::{Fault, FLUSH_VENDOR_SYNDROME};
use super::region::{Access, KeyTable, Region};
use super::srq::SrqState;

/// The most bytes one WQE can occupy: 63 octowords.
const FETCH_CAPACITY: usize = MAX_DS as usize * OCTOWORD_BYTES;
/// Bytes a WRITE moves per copy.
const COPY_CHUNK: usize = 4096;
/// Bytes a WRITE of at most this length moves per copy (a smaller buffer to clear).
const SMALL_COPY_CHUNK: usize = 256;

/// Why [`FabricState::serve`] stopped executing a queue's WQEs in one borrow.
enum Served {
    /// Everything published ran and the wire drained.
    Drained,
    /// The step's WQE budget is spent.
    OutOfBudget,
    /// A CQ overran: its effects on other queues apply before anything else runs.
    Overrun,
}

/// What one WQE's execution may touch besides its own send queue.
struct Ctx<'a> {
    nodes: &'a [NodeState],
    lids: &'a HashMap<u16, NodeId>,
    gids: &'a HashMap<[u8; 16], NodeId>,
    responders: &'a mut BTreeMap<u32, ResponderState>,
    cqs: &'a mut BTreeMap<u32, CqState>,
    srqs: &'a mut BTreeMap<u32, SrqState>,
    effects: &'a mut Effects,
    counters: &'a CounterBlock,
    report: &'a mut StepReport,
    keys: KeyCache<'a>,
    /// The route of this borrow's RC queue, once found. It depends on the queue's peer
    /// (which only a command changes, under the fabric's lock, so not during the borrow)
    /// and on the responder's state: every change of a responder here forgets it.
    rc_route: Option<Route<'a>>,
}

/// The last region each key table of a node answered, for this borrow of the fabric: a
/// queue's WQEs mostly name the same few keys, so most lookups end here. The tables
/// cannot change while the borrow lasts (they are borrowed shared), so a remembered
/// answer is exactly what the table would give.
#[derive(Default)]
struct KeyCache<'a> {
    local: Option<KeyHit<'a>>,
    remote: Option<KeyHit<'a>>,
}

/// One remembered lookup: `key` in a table of `node` is `region`.
#[derive(Clone, Copy)]
struct KeyHit<'a> {
    node: &'a NodeState,
    key: u32,
    region: &'a Arc<Region>,
}

/// `key` in `table` (a table of `node`), through the remembered last answer.
fn look_up<'a>(
    last: &mut Option<KeyHit<'a>>,
    node: &'a NodeState,
    table: &'a KeyTable,
    key: u32,
) -> Option<&'a Arc<Region>> {
    if let Some(hit) = *last {
        if hit.key == key && core::ptr::eq(hit.node, node) {
            return Some(hit.region);
        }
    }
    let region = table.get(&key)?;
    *last = Some(KeyHit { node, key, region });
    Some(region)
}

/// A translated range of a region.
struct Span<'r> {
    region: &'r Arc<Region>,
    offset: usize,
    len: usize,
}

/// A successful WQE: what its CQE reports and the response still to land.
#[derive(Default)]
struct Done {
    byte_count: u32,
    response: Vec<LocalWrite>,
}

impl FabricState {
    /// One pass over every send queue in QPN order, at most `max_wqes` WQEs in all.
    pub(crate) fn step(&mut self, counters: &CounterBlock, max_wqes: u64) -> StepReport {
        let mut report = StepReport::default();
        let mut budget = max_wqes;
        let mut next = 0u32;
        while budget > 0 {
            let Some(qpn) = self.sqs.range(next..).next().map(|(&qpn, _)| qpn) else {
                break;
            };
            next = qpn.saturating_add(1);
            self.serve(qpn, counters, &mut report, &mut budget);
        }
        report
    }

    /// Observes one queue's doorbell and executes what it may.
    fn serve(
        &mut self,
        qpn: u32,
        counters: &CounterBlock,
        report: &mut StepReport,
        budget: &mut u64,
    ) {
        let Some(limit) = self.observe(qpn, counters, report) else {
            return;
        };
        if self.peer_not_ready(qpn) {
            return;
        }
        // One fetch buffer for every WQE of this pass (each fetch overwrites what it uses).
        let mut fetched = [0u8; FETCH_CAPACITY];
        loop {
            // Execute in one borrow of the queue until it drains, the budget ends, or a
            // CQ overran: that changes other queues, so it is applied before going on.
            let served = self.with_queue(qpn, counters, report, |sq, ctx| loop {
                let pending = limit.wrapping_sub(sq.consumer as u16);
                if pending == 0 {
                    // Everything published has executed: the wire drains.
                    settle(sq, ctx);
                    return Served::Drained;
                }
                if *budget == 0 {
                    return Served::OutOfBudget;
                }
                *budget -= 1;
                execute_next(sq, pending, ctx, &mut fetched);
                if !ctx.effects.overrun_cqs.is_empty() {
                    return Served::Overrun;
                }
            });
            self.apply_effects(counters, report);
            match served {
                Some(Served::Overrun) => continue,
                None | Some(Served::Drained | Served::OutOfBudget) => return,
            }
        }
    }

    /// Loads the doorbell, counts a change, and returns how far the queue may execute (the
    /// 16-bit index of the first unpublished WQEBB), or `None` if it may not run now.
    fn observe(
        &mut self,
        qpn: u32,
        counters: &CounterBlock,
        report: &mut StepReport,
    ) -> Option<u16> {
        let sq = self.sqs.get_mut(&qpn)?;
        // A queue pair in RESET has no send context: the NIC reads neither its doorbell nor
        // its record (rdma-core zeroes the record only after the 2RST command).
        if sq.state == QpState::Reset {
            return None;
        }
        // Queues are accepted only with memory doorbells (`Fabric::create_qp`).
        let doorbell = sq.memory.load_doorbell()?;
        let mut rung = false;
        if doorbell != sq.last_doorbell {
            sq.last_doorbell = doorbell;
            let bytes = doorbell.to_ne_bytes();
            let named = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) >> 8;
            if named == qpn {
                rung = true;
                report.doorbells += 1;
                CounterBlock::add(&counters.doorbells, 1);
            } else {
                report.foreign_doorbells += 1;
                CounterBlock::add(&counters.foreign_doorbells, 1);
            }
        }
        let limit = match sq.watch {
            DoorbellWatch::PollRecord => read_send_record(&sq.memory)?,
            DoorbellWatch::DoorbellOnly => {
                if rung {
                    sq.armed_limit = read_send_record(&sq.memory);
                }
                sq.armed_limit?
            }
        };
        // A queue made by command runs into its state check (a WQE before RTS is an
        // error); an unconnected queue of `Fabric::create_qp` waits.
        (sq.commanded || sq.state != QpState::Init).then_some(limit)
    }

    /// Whether an RC queue's peer is a queue pair made by command that is still in RESET or
    /// INIT: its packets would be dropped there and retransmitted, so the queue's next WQE
    /// waits (as the retries of the hardware would) until the peer reaches RTR.
    fn peer_not_ready(&self, qpn: u32) -> bool {
        let Some(sq) = self.sqs.get(&qpn) else {
            return false;
        };
        if sq.transport != TransportKind::Rc || sq.state != QpState::ReadyToSend {
            return false;
        }
        sq.peer
            .and_then(|peer| self.sqs.get(&peer))
            .is_some_and(|peer| {
                peer.commanded && matches!(peer.state, QpState::Reset | QpState::Init)
            })
    }

    /// Runs `f` on one send queue with everything else it may touch.
    fn with_queue<R>(
        &mut self,
        qpn: u32,
        counters: &CounterBlock,
        report: &mut StepReport,
        f: impl FnOnce(&mut SendQueueState, &mut Ctx<'_>) -> R,
    ) -> Option<R> {
        let FabricState {
            nodes,
            lids,
            gids,
            sqs,
            responders,
            cqs,
            srqs,
            effects,
            ..
        } = self;
        let sq = sqs.get_mut(&qpn)?;
        let mut ctx = Ctx {
            nodes,
            lids,
            gids,
            responders,
            cqs,
            srqs,
            effects,
            counters,
            report,
            keys: KeyCache::default(),
            rc_route: None,
        };
        Some(f(sq, &mut ctx))
    }

    /// CQs that overran: record the events and move every queue using them to error.
    fn apply_effects(&mut self, counters: &CounterBlock, report: &mut StepReport) {
        while !self.effects.overrun_cqs.is_empty() {
            let cqn = self.effects.overrun_cqs.remove(0);
            let cq = Cqn(cqn);
            self.events.push(AsyncEvent::CqError { cq });
            CounterBlock::add(&counters.async_events, 1);
            let users: Vec<u32> = self
                .cqs
                .get(&cqn)
                .map(|c| c.users.iter().copied().collect())
                .unwrap_or_default();
            for user in users {
                let Ok(number) = Qpn::new(user) else { continue };
                let queue = if self.sqs.contains_key(&user) {
                    QueueId::Qp(number)
                } else {
                    QueueId::Dct(DctNumber(number))
                };
                if self.fail_queue(user, cq, counters, report) {
                    self.events.push(AsyncEvent::QueueFatal { queue, cq });
                    CounterBlock::add(&counters.async_events, 1);
                }
            }
        }
    }

    /// Moves a queue to the error state because a CQ it uses failed; returns whether it
    /// was not in error before.
    fn fail_queue(
        &mut self,
        number: u32,
        cq: Cqn,
        counters: &CounterBlock,
        report: &mut StepReport,
    ) -> bool {
        let mut newly = false;
        if let Some(responder) = self.responders.get_mut(&number) {
            newly |= !responder.error;
            responder.error = true;
        }
        let send_side = self.with_queue(number, counters, report, |sq, ctx| {
            if sq.state == QpState::Error {
                return false;
            }
            // Earlier WQEs completed: their data lands and their CQEs go out if they can.
            settle(sq, ctx);
            sq.state = QpState::Error;
            sq.error = Some(ErrorCause::CompletionQueue { cq });
            true
        });
        newly | send_side.unwrap_or(false)
    }

    /// 2ERR_QP: moves a queue pair to the error state from any state (nothing happens to
    /// one already in error). Responses already in flight land and the signaled CQEs
    /// waiting for them are written first, as before a failed WQE; every WQE it executes
    /// from then on is flushed, signaled or not. Its receive side stops answering.
    pub(crate) fn modify_to_error(&mut self, qpn: u32, counters: &CounterBlock) {
        let mut report = StepReport::default();
        if let Some(responder) = self.responders.get_mut(&qpn) {
            responder.error = true;
        }
        self.with_queue(qpn, counters, &mut report, |sq, ctx| {
            if sq.state != QpState::Error {
                settle(sq, ctx);
                sq.state = QpState::Error;
                sq.error = Some(ErrorCause::Command);
            }
        });
        // The CQEs written may have overrun a CQ.
        self.apply_effects(counters, &mut report);
    }
}

/// The send counter of a doorbell record: bytes 4..8 big-endian, low 16 bits.
fn read_send_record(memory: &SendQueueNicAccess) -> Option<u16> {
    let word = memory.load_dbrec();
    let bytes = word.to_ne_bytes();
    Some(u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as u16)
}

/// Copies `dst.len()` bytes out of a ring starting at byte `start`, continuing at the
/// ring's start past its end. `dst` is never longer than the ring.
fn read_wrapped(ring: &SendQueueNicAccess, start: usize, dst: &mut [u8]) {
    let first = dst.len().min(ring.ring().len.saturating_sub(start));
    let (head, tail) = dst.split_at_mut(first);
    // Both ranges lie inside the ring (its length was checked when the queue was made);
    // if a read failed the bytes are zeroed, which parses as a malformed WQE.
    if ring.read_ring(start, head).is_err() {
        head.fill(0);
    }
    // Most WQEs do not wrap: no call for an empty tail.
    if !tail.is_empty() && ring.read_ring(0, tail).is_err() {
        tail.fill(0);
    }
}

/// Copies the WQE at the consumer counter out of the ring: its first basic block (the
/// control segment and what follows it there), then the octowords its DS claims beyond
/// that block (at most the ring's size). Returns the bytes of the WQE.
fn fetch(memory: &SendQueueNicAccess, consumer: u64, buffer: &mut [u8; FETCH_CAPACITY]) -> usize {
    let ring_len = memory.ring().len;
    let slots = memory.size().wqebbs() as usize;
    let start = (consumer as usize & (slots - 1)) * WQEBB_BYTES;
    // Slots are whole basic blocks of a ring of whole blocks, so the first block is one
    // run inside the ring: one copy for every WQE of up to four octowords.
    read_wrapped(memory, start, &mut buffer[..WQEBB_BYTES]);
    let ds = usize::from(buffer[7] & MAX_DS).max(1);
    let len = (ds * OCTOWORD_BYTES).min(ring_len);
    if len > WQEBB_BYTES {
        // The rest is read after the DS, from the same copy of the control segment, so
        // the parser sees one consistent WQE even if the host rewrites the slot meanwhile.
        read_wrapped(
            memory,
            (start + WQEBB_BYTES) % ring_len,
            &mut buffer[WQEBB_BYTES..len],
        );
    }
    len
}

/// Consumes the WQE at the consumer counter: executes it, or fails it, or flushes it.
/// `pending` is the number of published WQEBBs from the consumer counter on; `fetched`
/// is scratch space for the WQE's bytes.
fn execute_next(
    sq: &mut SendQueueState,
    pending: u16,
    ctx: &mut Ctx<'_>,
    fetched: &mut [u8; FETCH_CAPACITY],
) {
    let len = fetch(&sq.memory, sq.consumer, fetched);
    let opcode = fetched[3];
    let ds = fetched[7] & MAX_DS;
    let index = sq.consumer as u16;
    let wqebbs = wqebbs_for_ds(ds.into()).max(1);
    sq.consumer += u64::from(wqebbs.min(pending.into()));
    let seq = sq.executed;
    sq.executed += 1;
    // An injection applies to the WQE of its sequence number and is spent with it, whatever
    // happens to that WQE: the numbering restarts after 2RST_QP, the injection does not.
    let injected = sq
        .injected
        .filter(|(at, _)| *at == seq)
        .map(|(_, fault)| fault);
    if injected.is_some() {
        sq.injected = None;
    }
    let lose_completion = sq.dropped_completion == Some(seq);
    if lose_completion {
        sq.dropped_completion = None;
    }

    if sq.state == QpState::Error {
        flush(sq, index, opcode, ctx);
        return;
    }
    let outcome = if sq.state != QpState::ReadyToSend {
        Err(Fault::NotReadyToSend { state: sq.state })
    } else if let Some(fault) = injected {
        Err(fault)
    } else if wqebbs > u32::from(pending) {
        Err(Fault::Unpublished {
            wqebbs,
            published: pending,
        })
    } else {
        // Matched by reference: the parsed WQE is not moved out of the result (a copy of
        // the whole struct per WQE).
        match &parse_fetched_wqe(&fetched[..len], WqeIndex(index), sq.transport) {
            Err(e) => Err(Fault::MalformedWqe(*e)),
            Ok(wqe) if wqe.qpn != sq.qpn => Err(Fault::ForeignQpn { found: wqe.qpn }),
            Ok(wqe) => {
                if wqe.flags.fence.waits_for_reads() {
                    settle(sq, ctx);
                }
                let signaled = wqe.flags.completion.is_signaled() && !lose_completion;
                perform(sq, wqe, ctx).map(|done| (done, signaled))
            }
        }
    };
    match outcome {
        Ok((done, signaled)) => complete(sq, seq, index, opcode, done, signaled, ctx),
        Err(fault) => fail(sq, index, opcode, fault, ctx),
    }
}

/// Records a successful WQE: its response goes in flight, its CQE (if signaled) waits for
/// the responses it covers.
fn complete(
    sq: &mut SendQueueState,
    seq: u64,
    index: u16,
    opcode: u8,
    done: Done,
    signaled: bool,
    ctx: &mut Ctx<'_>,
) {
    ctx.report.wqes_executed += 1;
    CounterBlock::add(&ctx.counters.wqes_executed, 1);
    if !done.response.is_empty() {
        sq.in_flight.push_back(InFlight {
            seq,
            lands_at: seq + 1 + u64::from(sq.response_delay),
            writes: done.response,
        });
    }
    land(sq, ctx, false);
    if signaled {
        let cqe = requester_cqe(sq.qpn, opcode, index, done.byte_count);
        // With no CQE waiting before it and no response it covers still in flight, it
        // goes out now, as `write_waiting_cqes` would send it (without the queue).
        let covered_in_flight = sq.in_flight.front().is_some_and(|r| r.seq <= seq);
        if sq.waiting_cqes.is_empty() && !covered_in_flight {
            write_cqe(sq.cq, cqe, ctx);
            return;
        }
        sq.waiting_cqes.push_back(WaitingCqe { seq, cqe });
    }
    write_waiting_cqes(sq, ctx);
}

/// Fails a WQE: earlier work settles, the error CQE is written, the queue goes to error.
fn fail(sq: &mut SendQueueState, index: u16, opcode: u8, fault: Fault, ctx: &mut Ctx<'_>) {
    settle(sq, ctx);
    let cqe = error_cqe(
        sq.qpn,
        opcode,
        index,
        fault.syndrome() as u8,
        fault.vendor_syndrome(),
    );
    write_cqe(sq.cq, cqe, ctx);
    ctx.report.wqes_failed += 1;
    CounterBlock::add(&ctx.counters.wqes_failed, 1);
    sq.state = QpState::Error;
    sq.error = Some(ErrorCause::Wqe {
        fault,
        wqe_counter: index,
    });
    ctx.rc_route = None;
    if let Some(responder) = ctx.responders.get_mut(&sq.qpn) {
        responder.error = true;
    }
}

/// Flushes a WQE of a queue in error.
fn flush(sq: &mut SendQueueState, index: u16, opcode: u8, ctx: &mut Ctx<'_>) {
    let cqe = error_cqe(
        sq.qpn,
        opcode,
        index,
        Syndrome::WorkRequestFlushed as u8,
        FLUSH_VENDOR_SYNDROME,
    );
    write_cqe(sq.cq, cqe, ctx);
    ctx.report.wqes_flushed += 1;
    CounterBlock::add(&ctx.counters.wqes_flushed, 1);
}

/// Lands every response in flight and writes every waiting CQE.
fn settle(sq: &mut SendQueueState, ctx: &mut Ctx<'_>) {
    land(sq, ctx, true);
    write_waiting_cqes(sq, ctx);
}

/// Lands the responses that are due (or all of them).
fn land(sq: &mut SendQueueState, ctx: &mut Ctx<'_>, all: bool) {
    while sq
        .in_flight
        .front()
        .is_some_and(|r| all || r.lands_at <= sq.executed)
    {
        let Some(response) = sq.in_flight.pop_front() else {
            break;
        };
        let mut dropped = false;
        for write in &response.writes {
            dropped |= !place(&write.region, write.offset, &write.bytes);
        }
        count_landed(dropped, ctx);
    }
}

/// Places bytes of a response in a local region; returns whether they were written. The
/// region may have been deregistered while the response was in flight; its buffer is
/// still alive (the Arc), but the NIC no longer writes it.
fn place(region: &Region, offset: usize, bytes: &[u8]) -> bool {
    region.is_live() && region.buffer.write(offset, bytes).is_ok()
}

/// Counts one response landed (`dropped`: some of its bytes were not written).
fn count_landed(dropped: bool, ctx: &mut Ctx<'_>) {
    if dropped {
        CounterBlock::add(&ctx.counters.responses_dropped, 1);
    }
    ctx.report.responses_landed += 1;
}

/// Whether a response issued now lands at once: the queue delays none and none is in
/// flight before it (responses land in order). Such a response is placed directly, with
/// the effects [`land`] would have right after the WQE completes.
fn lands_at_once(sq: &SendQueueState) -> bool {
    sq.response_delay == 0 && sq.in_flight.is_empty()
}

/// Writes the waiting CQEs whose responses have all landed, in order.
fn write_waiting_cqes(sq: &mut SendQueueState, ctx: &mut Ctx<'_>) {
    while let Some(waiting) = sq.waiting_cqes.front() {
        if sq.in_flight.front().is_some_and(|r| r.seq <= waiting.seq) {
            break;
        }
        let Some(waiting) = sq.waiting_cqes.pop_front() else {
            break;
        };
        write_cqe(sq.cq, waiting.cqe, ctx);
    }
}

/// Writes a CQE to a CQ; returns whether it was written. An overrun is recorded for
/// [`FabricState::apply_effects`].
fn write_cqe(cqn: u32, cqe: [u8; 64], ctx: &mut Ctx<'_>) -> bool {
    let result = match ctx.cqs.get_mut(&cqn) {
        Some(cq) => cq.write(cqe),
        None => Err(CqRefusal::InError),
    };
    match result {
        Ok(()) => {
            ctx.report.cqes_written += 1;
            CounterBlock::add(&ctx.counters.cqes_written, 1);
            true
        }
        Err(refusal) => {
            if refusal == CqRefusal::Overrun {
                ctx.effects.overrun_cqs.push(cqn);
            }
            CounterBlock::add(&ctx.counters.cqes_dropped, 1);
            false
        }
    }
}

// ---------------------------------------------------------------------------------------
// Operations.

fn perform(sq: &SendQueueState, wqe: &ParsedWqe<'_>, ctx: &mut Ctx<'_>) -> Result<Done, Fault> {
    match wqe.op {
        ParsedOp::Nop => Ok(Done::default()),
        ParsedOp::Dump { local } => {
            check_length(sq, local.transfer_len())?;
            ctx.keys.local(local_node(sq, ctx)?, &local, false)?;
            Ok(Done::default())
        }
        // The data is passed by reference: a copy of the enum costs more than reading it.
        ParsedOp::Write { remote, ref data } => perform_write(sq, wqe, remote, data, ctx),
        ParsedOp::Read { remote, ref data } => perform_read(sq, wqe, remote, data, ctx),
        ParsedOp::Atomic { remote, op, result } => {
            perform_atomic_wqe(sq, wqe, remote, &op, &result, ctx)
        }
    }
}

fn check_length(sq: &SendQueueState, len: u64) -> Result<(), Fault> {
    if len > sq.max_message_bytes {
        return Err(Fault::MessageTooLong {
            len,
            max: sq.max_message_bytes,
        });
    }
    Ok(())
}

fn local_node<'a>(sq: &SendQueueState, ctx: &Ctx<'a>) -> Result<&'a NodeState, Fault> {
    ctx.nodes
        .get(sq.node.0 as usize)
        .ok_or(Fault::ResponderUnavailable { responder: sq.qpn })
}

impl<'a> KeyCache<'a> {
    /// A data segment's range through the local node's lkey table.
    fn local(
        &mut self,
        node: &'a NodeState,
        segment: &DataSegment,
        write: bool,
    ) -> Result<Span<'a>, Fault> {
        let lkey = segment.lkey.get();
        let addr = segment.addr.get();
        let len = segment.transfer_len();
        let region = look_up(&mut self.local, node, &node.local_keys, lkey)
            .ok_or(Fault::LocalKey { lkey })?;
        let bounds = Fault::LocalBounds { lkey, addr, len };
        let offset = region.translate(addr, len).ok_or(bounds)?;
        if write && !region.access.contains(Access::LOCAL_WRITE) {
            return Err(Fault::LocalWriteDenied { lkey });
        }
        Ok(Span {
            region,
            offset,
            len: usize::try_from(len).map_err(|_| bounds)?,
        })
    }

    /// A remote range through the responder node's rkey table.
    fn remote(
        &mut self,
        node: &'a NodeState,
        remote: RemoteAddress,
        len: u64,
        needed: Access,
    ) -> Result<Span<'a>, Fault> {
        let rkey = remote.rkey.0;
        let addr = remote.addr;
        let region = look_up(&mut self.remote, node, &node.remote_keys, rkey)
            .ok_or(Fault::RemoteKey { rkey })?;
        let bounds = Fault::RemoteBounds { rkey, addr, len };
        let offset = region.translate(addr, len).ok_or(bounds)?;
        if !region.access.contains(needed) {
            return Err(Fault::RemoteAccessDenied { rkey, needed });
        }
        Ok(Span {
            region,
            offset,
            len: usize::try_from(len).map_err(|_| bounds)?,
        })
    }
}

/// The responder an addressed WQE reaches (see [`route`]).
#[derive(Clone, Copy)]
struct Route<'a> {
    /// Its queue number.
    number: u32,
    /// The remote operations its context accepts (`rwe`, `rre`, `rae`).
    enabled: Access,
    /// Its node.
    node: &'a NodeState,
}

impl Route<'_> {
    /// Whether the responding queue accepts the operation; hardware answers a disabled
    /// one with a remote access error.
    fn check_enabled(&self, needed: Access) -> Result<(), Fault> {
        if self.enabled.contains(needed) {
            Ok(())
        } else {
            Err(Fault::ResponderAccessDisabled {
                responder: self.number,
                needed,
            })
        }
    }
}

/// The responder of an addressed WQE: the connected RC peer, or the DCT the address
/// vector names. One lookup of the responder serves the route, its rights and its node.
fn route<'a>(
    sq: &SendQueueState,
    wqe: &ParsedWqe<'_>,
    ctx: &mut Ctx<'a>,
) -> Result<Route<'a>, Fault> {
    if sq.transport == TransportKind::Rc {
        if let Some(found) = ctx.rc_route {
            return Ok(found);
        }
        let found = find_route(sq, wqe, ctx)?;
        ctx.rc_route = Some(found);
        return Ok(found);
    }
    find_route(sq, wqe, ctx)
}

/// [`route`] without the remembered RC route.
fn find_route<'a>(
    sq: &SendQueueState,
    wqe: &ParsedWqe<'_>,
    ctx: &Ctx<'a>,
) -> Result<Route<'a>, Fault> {
    let (number, responder) = match sq.transport {
        TransportKind::Rc => {
            let peer = sq
                .peer
                .ok_or(Fault::ResponderUnavailable { responder: sq.qpn })?;
            // A peer connected by INIT2RTR is reached by the path the command gave.
            match sq.peer_path {
                None => {}
                Some(PeerPath::Lid(_)) => {}
                Some(PeerPath::Roce(path)) => {
                    reach_by_gid(ctx, path.gid, path.mac)?;
                }
            }
            let responder = ctx
                .responders
                .get(&peer)
                .filter(|r| r.dc_key.is_none() && !r.error)
                .filter(|r| match sq.peer_path {
                    None => true,
                    Some(PeerPath::Lid(lid)) => ctx
                        .nodes
                        .get(r.node.0 as usize)
                        .is_some_and(|n| n.lid == lid && n.mac.is_none()),
                    Some(PeerPath::Roce(path)) => ctx.gids.get(&path.gid) == Some(&r.node),
                });
            (
                peer,
                responder.ok_or(Fault::ResponderUnavailable { responder: peer })?,
            )
        }
        TransportKind::Dc => {
            // The parser gives every addressed DC WQE a target.
            let target = wqe
                .target
                .ok_or(Fault::MalformedWqe(ParseError::MalformedSegment {
                    octoword: 1,
                    what: "DC WQE without an address vector",
                }))?;
            let ethernet = ctx
                .nodes
                .get(sq.node.0 as usize)
                .is_some_and(|n| n.mac.is_some());
            let node = match target {
                // RoCE: by the GID, through the MAC (the LID field is the UDP port).
                AnyDcTarget::Full(av) if ethernet => reach_by_gid(ctx, av.rgid, av.rmac)?,
                AnyDcTarget::Compact(av) => {
                    let lid = av.rlid.get();
                    *ctx.lids.get(&lid).ok_or(Fault::UnknownLid { lid })?
                }
                AnyDcTarget::Full(av) => {
                    let lid = av.rlid.get();
                    *ctx.lids.get(&lid).ok_or(Fault::UnknownLid { lid })?
                }
            };
            let dct = target.dct();
            let responder = ctx
                .responders
                .get(&dct)
                .filter(|r| r.dc_key.is_some() && r.node == node)
                .ok_or(Fault::UnknownDct { dct })?;
            if responder.dc_key != Some(target.dc_key()) {
                return Err(Fault::WrongDcKey { dct });
            }
            if responder.error {
                return Err(Fault::ResponderUnavailable { responder: dct });
            }
            (dct, responder)
        }
    };
    let node = ctx
        .nodes
        .get(responder.node.0 as usize)
        .ok_or(Fault::ResponderUnavailable { responder: number })?;
    Ok(Route {
        number,
        enabled: responder.enabled,
        node,
    })
}

/// The Ethernet node a RoCE packet to `gid` sent to `mac` reaches: the node that has the
/// GID, if `mac` is its MAC.
fn reach_by_gid(ctx: &Ctx<'_>, gid: [u8; 16], mac: [u8; 6]) -> Result<NodeId, Fault> {
    let node = *ctx.gids.get(&gid).ok_or(Fault::UnknownGid { gid })?;
    let owner_mac = ctx.nodes.get(node.0 as usize).and_then(|n| n.mac);
    if owner_mac != Some(mac) {
        return Err(Fault::WrongMac { mac });
    }
    Ok(node)
}

/// Stores bytes at a translated offset. Cannot fail: the range was translated through a
/// region, which lies inside its buffer.
fn store(buffer: &DmaBuffer, offset: usize, bytes: &[u8]) {
    let _ = buffer.write(offset, bytes);
}

fn perform_write(
    sq: &SendQueueState,
    wqe: &ParsedWqe<'_>,
    remote: RemoteAddress,
    data: &ParsedData<'_>,
    ctx: &mut Ctx<'_>,
) -> Result<Done, Fault> {
    let len = match data {
        ParsedData::Empty => 0,
        ParsedData::Pointers(segments) => segments.total_len(),
        ParsedData::Inline(payload) => payload.len() as u64,
    };
    check_length(sq, len)?;
    let local = local_node(sq, ctx)?;
    // The source of a one-entry gather, kept from its check for the copy.
    let mut single_source = None;
    if let ParsedData::Pointers(segments) = data {
        for segment in segments.iter() {
            let source = ctx.keys.local(local, segment, false)?;
            if segments.len() == 1 {
                single_source = Some(source);
            }
        }
    }
    let route = route(sq, wqe, ctx)?;
    let responder = route.number;
    let destination = match len {
        0 => None,
        _ => {
            route.check_enabled(Access::REMOTE_WRITE)?;
            Some(
                ctx.keys
                    .remote(route.node, remote, len, Access::REMOTE_WRITE)?,
            )
        }
    };
    let with_imm = wqe.opcode == Opcode::RdmaWriteImm;
    let receive_cq = if with_imm {
        Some(reserve_receive(responder, ctx)?)
    } else {
        None
    };

    // Every check passed: move the bytes.
    if let Some(destination) = destination {
        let target = &destination.region.buffer;
        match data {
            ParsedData::Empty => {}
            ParsedData::Inline(payload) => {
                let (head, tail) = payload.parts();
                store(target, destination.offset, head);
                if !tail.is_empty() {
                    store(target, destination.offset + head.len(), tail);
                }
            }
            ParsedData::Pointers(segments) => {
                // A bounce buffer no larger than needed: zeroing 4 KiB for a short
                // message would cost more than moving it.
                let mut small = [0u8; SMALL_COPY_CHUNK];
                let mut large;
                let chunk: &mut [u8] = if len <= SMALL_COPY_CHUNK as u64 {
                    &mut small
                } else {
                    large = [0u8; COPY_CHUNK];
                    &mut large
                };
                let mut at = destination.offset;
                for segment in segments.iter() {
                    let source = match single_source.take() {
                        Some(source) => source,
                        None => ctx.keys.local(local, segment, false)?,
                    };
                    let mut done = 0;
                    while done < source.len {
                        let n = (source.len - done).min(chunk.len());
                        let _ = source
                            .region
                            .buffer
                            .read(source.offset + done, &mut chunk[..n]);
                        store(target, at, &chunk[..n]);
                        done += n;
                        at += n;
                    }
                }
            }
        }
        CounterBlock::add(&ctx.counters.bytes_written, len);
    }
    if let Some(cq) = receive_cq {
        deliver_immediate(sq, wqe, responder, cq, len, ctx);
    }
    Ok(Done::default())
}

/// Checks that a responder can take a WRITE_WITH_IMM: a receive credit (or a receive WQE
/// in its SRQ), and room in its receive CQ. Returns that CQ.
fn reserve_receive(responder: u32, ctx: &mut Ctx<'_>) -> Result<u32, Fault> {
    let not_ready = Fault::ReceiverNotReady { responder };
    let state = ctx.responders.get(&responder).ok_or(not_ready)?;
    let receives = match state.srq {
        Some(srqn) => ctx.srqs.get(&srqn).map_or(0, |s| s.posted),
        None => state.credits,
    };
    if receives == 0 {
        return Err(not_ready);
    }
    let cqn = state.cq.ok_or(not_ready)?;
    let overrun = Fault::ResponderCqOverrun { responder };
    let cq = ctx.cqs.get_mut(&cqn).ok_or(overrun)?;
    match cq.room() {
        Ok(()) => Ok(cqn),
        Err(refusal) => {
            if refusal == CqRefusal::Overrun {
                cq.fail();
                ctx.effects.overrun_cqs.push(cqn);
            }
            Err(overrun)
        }
    }
}

/// Consumes a receive credit and writes the responder CQE of a WRITE_WITH_IMM.
fn deliver_immediate(
    sq: &SendQueueState,
    wqe: &ParsedWqe<'_>,
    responder: u32,
    cq: u32,
    len: u64,
    ctx: &mut Ctx<'_>,
) {
    let source_lid = ctx.nodes.get(sq.node.0 as usize).map_or(0, |n| n.lid);
    ctx.rc_route = None;
    let Some(state) = ctx.responders.get_mut(&responder) else {
        return;
    };
    // The CQE names the receive WQE consumed: the SRQ's next one, or the queue's own.
    let receive_counter = match state.srq.and_then(|srqn| ctx.srqs.get_mut(&srqn)) {
        Some(srq) => {
            srq.posted = srq.posted.saturating_sub(1);
            let index = srq.consumed as u16;
            srq.consumed = srq.consumed.wrapping_add(1);
            index
        }
        None => {
            state.credits = state.credits.saturating_sub(1);
            state.received as u16
        }
    };
    state.received = state.received.wrapping_add(1);
    let cqe = responder_cqe(&ResponderCqe {
        responder,
        source_qpn: sq.qpn,
        source_lid,
        imm: wqe.imm,
        byte_count: u32::try_from(len).unwrap_or(u32::MAX),
        receive_counter,
        solicited: wqe.flags.solicited == Solicited::Yes,
    });
    if write_cqe(cq, cqe, ctx) {
        CounterBlock::add(&ctx.counters.responder_cqes, 1);
    }
}

fn perform_read(
    sq: &SendQueueState,
    wqe: &ParsedWqe<'_>,
    remote: RemoteAddress,
    data: &ParsedData<'_>,
    ctx: &mut Ctx<'_>,
) -> Result<Done, Fault> {
    let segments = match data {
        ParsedData::Empty => None,
        ParsedData::Pointers(segments) => Some(segments),
        // The parser refuses inline data on a READ.
        ParsedData::Inline(_) => {
            return Err(Fault::MalformedWqe(ParseError::MalformedSegment {
                octoword: 2,
                what: "inline data on an RDMA READ",
            }))
        }
    };
    let len = segments.map_or(0, |s| s.total_len());
    check_length(sq, len)?;
    let local = local_node(sq, ctx)?;
    // The destination of a one-entry scatter, kept from its check for the landing.
    let mut single_destination = None;
    if let Some(segments) = segments {
        for segment in segments.iter() {
            let destination = ctx.keys.local(local, segment, true)?;
            if segments.len() == 1 {
                single_destination = Some(destination);
            }
        }
    }
    let route = route(sq, wqe, ctx)?;
    let mut response = Vec::new();
    if len > 0 {
        route.check_enabled(Access::REMOTE_READ)?;
        let source = ctx
            .keys
            .remote(route.node, remote, len, Access::REMOTE_READ)?;
        if let Some(segments) =
            segments.filter(|_| lands_at_once(sq) && source.len <= SMALL_COPY_CHUNK)
        {
            // The whole source is read before any byte lands (the ranges may overlap), as
            // for a response in flight; then it is placed segment by segment.
            let mut bytes = [0u8; SMALL_COPY_CHUNK];
            let bytes = &mut bytes[..source.len];
            let _ = source.region.buffer.read(source.offset, bytes);
            let mut at = 0;
            let mut dropped = false;
            for segment in segments.iter() {
                let destination = match single_destination.take() {
                    Some(destination) => destination,
                    None => ctx.keys.local(local, segment, true)?,
                };
                let end = at + destination.len;
                dropped |= !place(destination.region, destination.offset, &bytes[at..end]);
                at = end;
            }
            count_landed(dropped, ctx);
            CounterBlock::add(&ctx.counters.bytes_read, len);
            return Ok(Done {
                byte_count: u32::try_from(len).unwrap_or(u32::MAX),
                response,
            });
        }
        // The responder reads now; the bytes land locally when the response arrives.
        let mut at = source.offset;
        for segment in segments.iter().flat_map(|s| s.iter()) {
            let destination = ctx.keys.local(local, segment, true)?;
            let mut bytes = vec![0u8; destination.len];
            let _ = source.region.buffer.read(at, &mut bytes);
            at += destination.len;
            response.push(LocalWrite {
                region: destination.region.clone(),
                offset: destination.offset,
                bytes,
            });
        }
        CounterBlock::add(&ctx.counters.bytes_read, len);
    }
    Ok(Done {
        byte_count: u32::try_from(len).unwrap_or(u32::MAX),
        response,
    })
}

fn perform_atomic_wqe(
    sq: &SendQueueState,
    wqe: &ParsedWqe<'_>,
    remote: RemoteAddress,
    op: &AtomicOp,
    result: &DataSegment,
    ctx: &mut Ctx<'_>,
) -> Result<Done, Fault> {
    let size = op.operand_bytes();
    check_length(sq, size.into())?;
    let local = local_node(sq, ctx)?;
    // The parser checked that the result segment's length is the operand size.
    let destination = ctx.keys.local(local, result, true)?;
    let route = route(sq, wqe, ctx)?;
    route.check_enabled(Access::REMOTE_ATOMIC)?;
    let misaligned = Fault::MisalignedAtomic {
        addr: remote.addr,
        align: size,
    };
    if remote.addr % u64::from(size) != 0 {
        return Err(misaligned);
    }
    let operand = ctx
        .keys
        .remote(route.node, remote, size.into(), Access::REMOTE_ATOMIC)?;
    let original =
        perform_atomic(&operand.region.buffer, operand.offset, op).map_err(|_| misaligned)?;
    CounterBlock::add(&ctx.counters.atomics, 1);
    let original = original.to_be_bytes();
    let original = &original[8 - size as usize..];
    if lands_at_once(sq) {
        let dropped = !place(destination.region, destination.offset, original);
        count_landed(dropped, ctx);
        return Ok(Done {
            byte_count: size,
            response: Vec::new(),
        });
    }
    let bytes = original.to_vec();
    Ok(Done {
        byte_count: size,
        response: vec![LocalWrite {
            region: destination.region.clone(),
            offset: destination.offset,
            bytes,
        }],
    })
}
