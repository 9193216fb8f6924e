//! The software mlx5 NIC: a CPU engine that executes real send-WQE bytes.
//!
//! A [`Fabric`] holds nodes (one per simulated host port, addressed by LID), their memory
//! regions and key spaces, queue pairs (RC and DC initiators), DC targets and completion
//! queues. It cannot trap MMIO, so it watches the memory a host (or a GPU) posts through,
//! laid out exactly as [`crate::queue`]'s memory conventions say: the send ring, the send
//! doorbell record, the 8-byte doorbell, the CQ ring and the CQ doorbell record. It fetches
//! each published WQE out of the ring, parses it with [`parse_fetched_wqe`], checks keys,
//! bounds and rights, moves the bytes, and writes CQEs with the owner bit, as the hardware
//! would. It is a test and development target, never a claim about NIC timing.
//!
//! Every byte the NIC reads from rings, records and doorbells is untrusted: WQEs go
//! through the parser, every address through the memory-region table with checked
//! arithmetic, so whatever a ring holds the engine never panics and never touches memory
//! outside a registered region (or the queue memory it was given). All memory is accessed
//! through [`DmaBuffer`]'s atomics; this module has no `unsafe`.
//!
//! # Doorbells
//!
//! Per send queue, every step loads the 8-byte doorbell (acquire). A changed value whose
//! bytes 4..7 name this queue (`qpn << 8 | ds`, big-endian) counts as a doorbell; a
//! changed value naming another queue is ignored and counted as a foreign doorbell. What
//! bounds the work is the send doorbell record (acquire load; bytes 4..8 big-endian, the
//! 16-bit index of the next free WQEBB): every WQE from the queue's consumer counter up to
//! it is executed. With [`DoorbellWatch::PollRecord`] (the default) the record is read on
//! every step, so a doorbell rung with an unchanged value is not missed; with
//! [`DoorbellWatch::DoorbellOnly`] the record is read only when a doorbell for this queue
//! arrives, so nothing runs without one. An RC queue executes nothing until it is
//! connected (it is in [`QpState::Init`]); WQEs posted before that wait. A queue pair
//! made by PRM command ([`crate::nic::SoftNic`]) starts in [`QpState::Reset`] and moves
//! only by the RST2INIT, INIT2RTR, RTR2RTS, 2ERR and 2RST commands, as hardware does; a
//! WQE published in INIT or RTR fails with [`Fault::NotReadyToSend`] and the queue goes to
//! error. A queue whose RC peer (made by command) is still in RESET or INIT does not
//! execute its next WQE until the peer reaches RTR: the hardware's retransmissions until
//! the peer is ready, without their limit.
//!
//! In RESET a queue pair made by command reads neither doorbell nor record. 2ERR_QP
//! (from any state) lands the responses in flight, writes the CQEs waiting for them, and
//! puts the queue in [`QpState::Error`]: every WQE not yet executed is then flushed, one
//! flush CQE each, signaled or not. 2RST_QP (from any state) forgets the queue's progress
//! (the next WQE it executes is at index 0), drops responses in flight and the CQEs
//! waiting for them, forgets the RC peer and the receive side's credits and rights, and
//! writes no CQE; CQEs already written stay.
//!
//! # RoCE
//!
//! A node is InfiniBand ([`Fabric::add_node`], addressed by LID) or Ethernet
//! ([`Fabric::add_ethernet_node`]: a MAC, and the GIDs of its port, addressed by GID).
//! RoCE paths (an RC queue pair's INIT2RTR path, a DC WQE's full address vector) reach the
//! node that has the destination GID, and only if the next-hop MAC is that node's; a GID
//! no node has is [`Fault::UnknownGid`], a wrong MAC [`Fault::WrongMac`] (both transport
//! retries exceeded, as a packet to nobody ends on hardware). [`Fabric::resolve_mac`]
//! answers the MAC of a GID as an address handle's resolution does.
//!
//! # Execution
//!
//! Operations: NOP, DUMP (checks and reads a local buffer), WRITE, WRITE_WITH_IMM, READ,
//! compare-swap, fetch-add, masked compare-swap and masked fetch-add of 4 and 8 bytes.
//! Addresses are virtual addresses (`DmaBuffer::addr() + offset`), translated only through
//! the region the key names. A zero-length WRITE or READ touches no memory and validates
//! no rkey (InfiniBand's rule for zero-length RDMA).
//!
//! **Atomics** operate on a **big-endian** operand in remote memory (network order, as
//! InfiniBand atomics are) and return the original value to the local buffer big-endian,
//! in the operand's width (4 or 8 bytes). The read-modify-write is one atomic operation on
//! the 64-bit word holding the operand, so it is atomic with respect to other NIC atomics
//! and to host atomics on that word. The new value is [`atomic_new_value`]:
//! - compare-swap: `if old == compare { swap } else { old }`;
//! - fetch-add: `old + add` (wrapping);
//! - masked compare-swap: `if (old ^ compare) & compare_mask == 0 { (old & !swap_mask) |
//!   (swap & swap_mask) } else { old }`;
//! - masked fetch-add: [`masked_fetch_add`], an addition in which a set bit `i` of
//!   `field_boundary` stops the carry out of bit `i` (bit `i` is the top bit of a field):
//!   `field_boundary = 0` is a plain add, all ones is XOR.
//!
//! **Fences and response delay.** READ and atomic responses land in local memory after
//! [`QpConfig::response_delay`] more WQEs of the same queue have executed (0, the default:
//! at once, before the WQE's own CQE). Until then the local destination holds its old
//! bytes, and a later WRITE gathering from it sends the old bytes. A WQE whose fence mode
//! [`waits_for_reads`](crate::wqe::FenceMode::waits_for_reads) first lands every
//! outstanding response. A CQE is never written before the data of the WQEs it covers
//! (its own and every earlier WQE's) has landed: a signaled CQE waits for the responses
//! issued up to it. When a queue has executed everything published, all its responses
//! land (the wire drains when the queue idles), so a poller never waits forever.
//!
//! **Signaling**: a successful WQE writes a CQE only if its completion mode is signaled
//! ([`CompletionMode::is_signaled`](crate::wqe::CompletionMode::is_signaled)); a failed
//! WQE always writes an error CQE.
//!
//! # CQEs
//!
//! A requester CQE is zero except: `byte_cnt` (bytes placed in local memory: the READ
//! length, the operand size of an atomic, 0 otherwise; rdma-core reads it only for READ),
//! `sop_drop_qpn = send opcode << 24 | QPN`, `wqe_counter` = the WQE's first WQEBB index,
//! and `op_own = 0 << 4 | owner`. A WRITE_WITH_IMM consumes a receive credit at the
//! responder ([`Fabric::post_receives`]) and writes a responder CQE to the responder's
//! receive CQ: opcode 1 (`RESP_WR_IMM`), `imm_inval_pkey` = the immediate as the WQE
//! carries it, `byte_cnt` = message length, `sop_drop_qpn` = the responder's queue number,
//! `flags_rqpn` = the requester's QPN, `slid` = the requester's LID, `wqe_counter` = the
//! responder's receive counter, the solicited bit if the WQE asked for it.
//!
//! CQEs are written as the conventions say: bytes 0..56 first, then bytes 56..64 (with the
//! owner bit `(producer_index / entries) & 1`) as one 64-bit release store. In
//! [`CqMode::Collapsed`] every CQE goes to entry 0 (the owner bit follows the same
//! formula). In [`CqMode::Ring`] a CQE that would make `producer - consumer` (the consumer
//! index from the CQ doorbell record) reach the ring size is an overrun: it is not written,
//! the CQ enters an error state and writes nothing more, every queue using it goes to the
//! error state, and [`AsyncEvent`]s are recorded ([`Fabric::async_events`]). Collapsed
//! CQs ignore overrun (as NVSHMEM creates them).
//!
//! # Faults
//!
//! Apart from the faults below, a completion can be lost ([`Fabric::drop_completion`]):
//! the WQE executes as usual and no CQE is written for it, which only a later CQE covers
//! or the waiter's deadline ends (the NIC reports nothing). An injected fault and a lost
//! completion each apply to one WQE and are spent with it (a queue pair reset by 2RST_QP
//! numbers its WQEs from 0 again, but does not meet them again).
//!
//! Checks run in this order (local checks segment by segment); the first failing one
//! decides the error CQE. Vendor syndromes are this NIC's own (the hardware's are not
//! documented); they tell causes with the same syndrome apart:
//!
//! | check | fault | syndrome | vendor |
//! |---|---|---|---|
//! | the WQE's DS extends past the doorbell record | [`Fault::Unpublished`] | LOCAL_QP_OP 0x02 | 0x03 |
//! | the parser rejects the WQE | [`Fault::MalformedWqe`] | LOCAL_QP_OP 0x02 | 0x01 |
//! | the control segment names another QPN | [`Fault::ForeignQpn`] | LOCAL_QP_OP 0x02 | 0x02 |
//! | a QP made by command is not in RTS | [`Fault::NotReadyToSend`] | LOCAL_QP_OP 0x02 | 0x04 |
//! | a fault injected on this WQE ([`Fabric::inject_fault`]) | [`Fault::Injected`] | as injected | as injected |
//! | message longer than `max_message_bytes` | [`Fault::MessageTooLong`] | LOCAL_LENGTH 0x01 | 0x10 |
//! | unknown lkey | [`Fault::LocalKey`] | LOCAL_PROT 0x04 | 0x20 |
//! | local range outside the region | [`Fault::LocalBounds`] | LOCAL_PROT 0x04 | 0x21 |
//! | local write without `LOCAL_WRITE` | [`Fault::LocalWriteDenied`] | LOCAL_PROT 0x04 | 0x22 |
//! | DC: no node with the AV's LID | [`Fault::UnknownLid`] | TRANSPORT_RETRY_EXC 0x15 | 0x50 |
//! | DC: no such DCT on that node | [`Fault::UnknownDct`] | TRANSPORT_RETRY_EXC 0x15 | 0x51 |
//! | DC: wrong DC key | [`Fault::WrongDcKey`] | TRANSPORT_RETRY_EXC 0x15 | 0x52 |
//! | responder gone or in error | [`Fault::ResponderUnavailable`] | TRANSPORT_RETRY_EXC 0x15 | 0x53 |
//! | RoCE: no node has the path's destination GID | [`Fault::UnknownGid`] | TRANSPORT_RETRY_EXC 0x15 | 0x54 |
//! | RoCE: the next-hop MAC is not that node's | [`Fault::WrongMac`] | TRANSPORT_RETRY_EXC 0x15 | 0x55 |
//! | atomic not aligned to its size | [`Fault::MisalignedAtomic`] | REMOTE_INVAL_REQ 0x12 | 0x30 |
//! | unknown rkey | [`Fault::RemoteKey`] | REMOTE_ACCESS 0x13 | 0x40 |
//! | remote range outside the region | [`Fault::RemoteBounds`] | REMOTE_ACCESS 0x13 | 0x41 |
//! | missing remote right | [`Fault::RemoteAccessDenied`] | REMOTE_ACCESS 0x13 | 0x42 |
//! | the responding queue's context disables it (`rwe`, `rre`, `rae`) | [`Fault::ResponderAccessDisabled`] | REMOTE_ACCESS 0x13 | 0x43 |
//! | WRITE_WITH_IMM without a receive credit | [`Fault::ReceiverNotReady`] | RNR_RETRY_EXC 0x16 | 0x60 |
//! | responder's receive CQ overruns | [`Fault::ResponderCqOverrun`] | REMOTE_OP 0x14 | 0x70 |
//!
//! A failed WQE changes no memory (every check runs before any byte moves). Its error CQE
//! (opcode 13, `REQ_ERR`) carries the syndrome, the vendor syndrome, `send opcode << 24 |
//! QPN` (the opcode byte as the control segment has it) and the WQE's index; earlier
//! responses land and earlier signaled CQEs are written first. The queue then is in
//! [`QpState::Error`]: every later WQE, signaled or not, completes with an error CQE of
//! syndrome WR_FLUSH_ERR (0x05), vendor syndrome 0, its own index and opcode byte, read
//! from its control segment (its size from the DS, at least one WQEBB), as hardware
//! flushes. Requester-detected errors do not move the responder to error (hardware also
//! does so for an RC remote access violation; not modelled).
//!
//! # Engines
//!
//! [`Fabric::step`] is one deterministic pass over all send queues in QPN order;
//! [`Fabric::step_limited`] stops after a number of WQEs (to observe intermediate states);
//! [`Fabric::run_until_idle`] steps until nothing happens. [`Fabric::spawn_engine`] runs
//! steps on a background thread until its [`EngineHandle`] is dropped. [`Fabric::counters`]
//! can be read at any time without waiting for the engine.
//!
//! [`parse_fetched_wqe`]: crate::wqe::parse_fetched_wqe
//! [`DmaBuffer`]: crate::memory::DmaBuffer

mod atomic;
pub(crate) mod completion;
mod counters;
mod engine;
mod error;
mod execute;
mod fabric;
mod fault;
mod objects;
mod queues;
mod region;
mod srq;

pub use crate::cq::CqMode;
pub use atomic::{atomic_new_value, masked_fetch_add};
pub use counters::{Counters, StepReport};
pub use engine::EngineHandle;
pub use error::SoftNicError;
pub use fabric::{
    AsyncEvent, Census, Cqn, DctConfig, DctNumber, DoorbellWatch, ErrorCause, Fabric, NodeId,
    PeerPath, QpConfig, QpState, QpStatus, QueueId, ReceiveConfig, RocePath,
    DEFAULT_MAX_MESSAGE_BYTES,
};
pub use fault::{Fault, FLUSH_VENDOR_SYNDROME};
pub(crate) use objects::{CommandedQp, ObjectRefusal, Transition};
pub use queues::QueuePairSpec;
pub use region::{Access, MemoryRegion};
