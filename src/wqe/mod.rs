//! The mlx5 send-WQE wire format: segment layouts, opcodes, typed builders, the ring
//! writer, the parser and a readable dump.
//!
//! A send WQE is a run of 16-byte segments ("octowords") starting with a control segment,
//! stored in a ring of 64-byte basic blocks (WQEBBs). Everything here is byte-exact with
//! rdma-core's mlx5 provider; the differential tests in `tests/rdma-core` prove it.
//!
//! ```
//! use ibgda::wqe::*;
//! let payload = 0xfeed_f00d_u64.to_be_bytes();
//! let wqe = RdmaWrite::new(RemoteAddress::new(0x10_0000, RKey(0x77)))
//!     .inline(&payload)
//!     .signaled()
//!     .build()?;
//! let mut memory = vec![0u8; 64 * 64];
//! let mut ring = SendRing::new(&mut memory, WqeLimits::default())?;
//! ring.write(WqeIndex(63), Qpn::new(0x1234)?, &wqe)?;
//! let parsed = parse_wqe(&memory, WqeIndex(63), TransportKind::Rc).expect("just written");
//! println!("{parsed}");
//! assert!(matches!(parsed.op, ParsedOp::Write { data: ParsedData::Inline(p), .. } if p.eq_bytes(&payload)));
//! # Ok::<(), WqeError>(())
//! ```

mod address;
mod builder;
mod dump;
mod error;
mod opcode;
mod parse;
mod ring;
pub mod segment;
mod transport;

pub use address::{
    LKey, LocalBuffer, Qpn, RKey, RemoteAddress, Sge, WqeIndex, MAX_SEGMENT_BYTES,
    MAX_TRANSFER_BYTES,
};
pub use builder::{
    inline_octowords, AnyData, AnyOperation, AnySegments, AnyWqe, Atomic, AtomicOp, AtomicSegments,
    ControlTemplate, Dump, Empty, FixedPayload, FixedShape, Gather, Inline, LocalSpan, NoData, Nop,
    OneSegment, Payload, RdmaRead, RdmaWrite, ReadPayload, TwoSegments, Wqe, WqeSpec, MAX_GATHER,
};
pub use dump::Octowords;
pub use error::WqeError;
pub use opcode::{AtomicWidth, CompletionMode, ControlFlags, FenceMode, Opcode, Solicited};
pub use parse::{
    parse_fetched_wqe, parse_wqe, DataSegments, InlinePayload, ParseError, ParsedData, ParsedOp,
    ParsedWqe,
};
pub use ring::{wqebbs_for_ds, RingSize, SendRing, WqeLimits, WqeWriter};
pub use segment::{OCTOWORD_BYTES, WQEBB_BYTES};
pub use transport::{
    AnyAddress, AnyDcTarget, AnyTransport, AvForm, Compact, CompactAddressVector, Dc, DcAddress,
    DcTarget, DciTransport, Destination, Full, FullAddressVector, Grh, LinkAddress, Rc, Transport,
    TransportKind, TypedTransport,
};
