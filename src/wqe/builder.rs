//! Typed WQE builders: one per operation, required fields in `new`, options as setters,
//! `build()` validates once and yields a [`Wqe`] that can be written to any ring of its
//! transport.
//!
//! The transport is a type parameter: `new` of an RC builder takes no target and `new` of
//! a DC builder requires one. The data of WRITE and READ is a typestate: a builder starts
//! in [`NoData`], which has no `build()`, and leaves it by naming its data ([`sge`],
//! [`gather`], [`inline`]) or by declaring that it has none ([`without_data`]). Fixed
//! shapes carry their DS as an associated constant.
//!
//! [`sge`]: RdmaWrite::sge
//! [`gather`]: RdmaWrite::gather
//! [`inline`]: RdmaWrite::inline
//! [`without_data`]: RdmaWrite::without_data
//!
//! ```
//! use ibgda::wqe::*;
//! // RC WRITE of one gather entry: control + remote address + data = 3 octowords.
//! assert_eq!(RdmaWrite::<Rc, Gather<1>>::DS, 3);
//! // DC WRITE with the full address vector: 3 more.
//! assert_eq!(RdmaWrite::<Dc<Full>, Gather<1>>::DS, 6);
//!
//! let target = CompactAddressVector { dct: 0x99, dc_key: 0x5623_ceaf, lid: 4, ..Default::default() }
//!     .encode()?;
//! let wqe = RdmaRead::new(target.at(RemoteAddress::new(0x7000, RKey(9))))
//!     .sge(Sge::new(0x1000, 64, LKey(2))?)
//!     .signaled()
//!     .build()?;
//! assert_eq!(wqe.ds(), 4);
//! # Ok::<(), WqeError>(())
//! ```
//!
//! A builder without data does not build:
//!
//! ```compile_fail,E0599
//! use ibgda::wqe::*;
//! let _ = RdmaWrite::<Rc>::new(RemoteAddress::new(0, RKey(0))).build();
//! ```
//!
//! nor does an empty gather list (a post-monomorphization check, so the compiler reports
//! it when it generates code):
//!
//! ```compile_fail,E0080
//! use ibgda::wqe::*;
//! let _ = RdmaWrite::new(RemoteAddress::new(0, RKey(0))).gather([]).build();
//! ```
//!
//! and a READ cannot be inline:
//!
//! ```compile_fail,E0599
//! use ibgda::wqe::*;
//! let _ = RdmaRead::<Rc>::new(RemoteAddress::new(0, RKey(0))).inline(&[1, 2, 3]);
//! ```

use core::marker::PhantomData;

use zerocopy::byteorder::big_endian::{U16, U32, U64};
use zerocopy::IntoBytes;

use super::address::{LKey, LocalBuffer, Qpn, RemoteAddress, Sge, WqeIndex, MAX_TRANSFER_BYTES};
use super::error::WqeError;
use super::opcode::{AtomicWidth, CompletionMode, ControlFlags, FenceMode, Opcode, Solicited};
use super::ring::{octoword, wqebbs_for_ds, WqeWriter};
use super::segment::{
    AtomicSegment, ControlSegment, MaskedCompareSwap4Segment, MaskedCompareSwap8Segment,
    MaskedFetchAdd4Segment, MaskedFetchAdd8Segment, INLINE_SEGMENT_FLAG, MAX_DS, OCTOWORD_BYTES,
};
#[cfg(test)]
use super::segment::{DataSegment, RemoteAddressSegment};
#[cfg(doc)]
use super::transport::DcAddress;
use super::transport::Rc;
use super::transport::{
    AnyDcTarget, AnyTransport, DciTransport, Destination, Sealed, Transport, TypedTransport,
};

/// Most gather or scatter entries one typed builder takes; a full-AV DC WQE still fits in
/// the 6-bit DS with this many.
pub const MAX_GATHER: usize = 16;

/// The inline header occupies the first 4 bytes of the octoword its payload starts in.
const INLINE_HEADER_BYTES: usize = 4;

/// A WQE that has been built and validated, ready to be written into a ring of its
/// transport. Only `build()` of a builder makes one.
#[derive(Clone, Copy, Debug, PartialEq)]
#[must_use = "a built WQE does nothing until it is written to a ring"]
pub struct Wqe<S: WqeSpec> {
    spec: S,
    ds: u8,
}

/// What a buildable WQE is: its transport, its size and how to encode it. Sealed;
/// implemented by the builders in their buildable states.
pub trait WqeSpec: Sealed + Copy {
    /// The transport of the queue the WQE can be posted to.
    type Transport: Transport;
    /// The opcode.
    fn opcode(&self) -> Opcode;
    /// Octowords the WQE occupies (may exceed 63 before validation).
    fn octowords(&self) -> usize;
    /// Inline payload bytes (0 without inline data).
    fn inline_len(&self) -> usize;
    /// Checks every run-time value; the typestates already rule out the rest.
    fn validate(&self) -> Result<(), WqeError>;
    /// Writes the WQE after its control segment has been written.
    fn encode_body(&self, writer: &mut WqeWriter<'_>);
    /// The control segment's opcode modifier, flags, stream id and immediate.
    fn control(&self) -> ControlTemplate;
    /// Visits every local buffer the NIC will read or write for this WQE (gather and
    /// scatter entries, an atomic's result buffer, a DUMP's buffer; not inline data).
    fn visit_local(&self, visit: &mut dyn FnMut(LocalSpan));
    /// The DC target the WQE addresses, if any.
    #[inline]
    fn target(&self) -> Option<AnyDcTarget> {
        None
    }
}

/// Local memory a WQE names: what must stay registered and alive until its completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocalSpan {
    /// Local virtual address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Local key.
    pub lkey: LKey,
}

impl From<&Sge> for LocalSpan {
    fn from(sge: &Sge) -> Self {
        Self {
            addr: sge.addr(),
            len: sge.len().into(),
            lkey: sge.lkey(),
        }
    }
}

/// The fields of a control segment that the WQE (not the queue) decides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControlTemplate {
    /// Opcode modifier.
    pub opmod: u8,
    /// Fence, completion and solicited flags.
    pub flags: ControlFlags,
    /// DCI stream channel id.
    pub stream_id: u16,
    /// Immediate data.
    pub imm: u32,
}

impl<S: WqeSpec> Wqe<S> {
    fn new(spec: S) -> Result<Self, WqeError> {
        spec.validate()?;
        // An erased target can hold any segment bytes; the encoders never make a bad one.
        if let Some(target) = spec.target() {
            target.validate()?;
        }
        let ds = spec.octowords();
        if ds > MAX_DS as usize {
            return Err(WqeError::TooManyOctowords {
                ds,
                max: MAX_DS as usize,
            });
        }
        Ok(Self { spec, ds: ds as u8 })
    }

    /// The WQE's size in octowords, control segment included.
    pub fn ds(&self) -> u8 {
        self.ds
    }
    /// The WQE's size in basic blocks.
    pub fn wqebbs(&self) -> u32 {
        wqebbs_for_ds(self.ds.into())
    }
    /// Inline payload bytes.
    pub fn inline_len(&self) -> usize {
        self.spec.inline_len()
    }
    /// The opcode.
    pub fn opcode(&self) -> Opcode {
        self.spec.opcode()
    }
    /// The builder it was made from.
    pub fn spec(&self) -> &S {
        &self.spec
    }

    /// The control segment this WQE gets at `index` on queue `qpn`.
    pub fn control_segment(&self, index: WqeIndex, qpn: Qpn) -> ControlSegment {
        let t = self.spec.control();
        ControlSegment {
            opmod_idx_opcode: U32::new(
                u32::from(t.opmod) << 24
                    | u32::from(index.0) << 8
                    | u32::from(self.opcode().byte()),
            ),
            qpn_ds: U32::new(qpn.get() << 8 | u32::from(self.ds)),
            signature: 0,
            dci_stream_channel_id: U16::new(t.stream_id),
            fm_ce_se: t.flags.byte(),
            imm: U32::new(t.imm),
        }
    }

    /// The control segment this WQE gets at `index` on queue `qpn` with the fields of
    /// `template` (the spec's own, or as a queue's signaling policy changed them), as the
    /// two words [`WqeWriter::put_octoword`] stores.
    #[inline(always)]
    pub(crate) fn control_octoword(
        &self,
        template: ControlTemplate,
        index: WqeIndex,
        qpn: Qpn,
    ) -> [u64; 2] {
        let opmod_idx_opcode = u32::from(template.opmod) << 24
            | u32::from(index.0) << 8
            | u32::from(self.opcode().byte());
        let qpn_ds = qpn.get() << 8 | u32::from(self.ds);
        // Bytes 8..16: signature (0), stream id, fm_ce_se, immediate.
        octoword(
            u64::from(opmod_idx_opcode) << 32 | u64::from(qpn_ds),
            u64::from(template.stream_id) << 40
                | u64::from(template.flags.byte()) << 32
                | u64::from(template.imm),
        )
    }

    /// Encodes the whole WQE. The writer must hold at least [`Wqe::wqebbs`] blocks.
    pub fn encode(&self, writer: &mut WqeWriter<'_>, index: WqeIndex, qpn: Qpn) {
        self.encode_with_control(
            writer,
            self.control_octoword(self.spec.control(), index, qpn),
        );
    }

    /// Encodes the WQE with `control` (from [`Wqe::control_octoword`]) as its control
    /// segment.
    #[inline(always)]
    pub(crate) fn encode_with_control(&self, writer: &mut WqeWriter<'_>, control: [u64; 2]) {
        debug_assert!(writer.capacity() >= self.wqebbs() as usize * 64);
        writer.put_octoword(control);
        self.spec.encode_body(writer);
        debug_assert_eq!(writer.position(), usize::from(self.ds) * OCTOWORD_BYTES);
    }
}

/// Shapes whose size is known from their type.
pub trait FixedShape: WqeSpec {
    /// Octowords, control segment included.
    const DS: u8;
    /// Basic blocks.
    const WQEBBS: u32 = wqebbs_for_ds(Self::DS as usize);
}

// ---------------------------------------------------------------------------------------
// Data typestates.

/// The initial data state of WRITE and READ builders: no data named yet, not buildable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoData;

/// Explicitly no data: a zero-length transfer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Empty;

/// `N` gather (WRITE) or scatter (READ) entries, known at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gather<const N: usize>(pub [Sge; N]);

/// An inline payload, copied into the WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inline<'a>(pub &'a [u8]);

/// Data chosen at run time: the erased form of the data typestates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnyData<'a> {
    /// No data.
    Empty,
    /// Gather or scatter entries (at least one, at most [`MAX_GATHER`]).
    Sges(&'a [Sge]),
    /// Inline payload (WRITE only).
    Inline(&'a [u8]),
}

/// A data state a WQE can be built with. Sealed.
pub trait Payload: Sealed + Copy {
    /// Visits the local entries (none for inline data).
    fn visit_local(&self, visit: &mut dyn FnMut(LocalSpan));
    /// Octowords of the data segments.
    fn octowords(&self) -> usize;
    /// Inline bytes.
    fn inline_len(&self) -> usize;
    /// Checks lengths.
    fn validate(&self) -> Result<(), WqeError>;
    /// Writes the data segments.
    fn encode(&self, writer: &mut WqeWriter<'_>);
}

/// Payloads a READ accepts: pointer entries or none, never inline (the erased
/// [`AnyData`] is checked at `build()`).
pub trait ReadPayload: Payload {
    /// Whether the payload is inline data.
    fn is_inline(&self) -> bool {
        false
    }
}

/// Payloads whose size is known from their type.
pub trait FixedPayload: Payload {
    /// Octowords of the data segments.
    const OCTOWORDS: usize;
}

impl Sealed for Empty {}
impl<const N: usize> Sealed for Gather<N> {}
impl Sealed for Inline<'_> {}
impl Sealed for AnyData<'_> {}

/// Writes a data pointer segment (`mlx5_wqe_data_seg`): byte count, lkey, address.
#[inline(always)]
fn put_data(byte_count: u32, lkey: LKey, addr: u64, writer: &mut WqeWriter<'_>) {
    writer.put_octoword(octoword(
        u64::from(byte_count) << 32 | u64::from(lkey.0),
        addr,
    ));
}

/// Writes the data pointer segment of one gather or scatter entry.
#[inline(always)]
fn put_sge(sge: &Sge, writer: &mut WqeWriter<'_>) {
    put_data(sge.len(), sge.lkey(), sge.addr(), writer);
}

/// The data pointer segment of `sge` as its layout (the byte-level form the octoword
/// writers are checked against).
#[cfg(test)]
fn data_segment(sge: &Sge) -> DataSegment {
    DataSegment {
        byte_count: U32::new(sge.len()),
        lkey: U32::new(sge.lkey().0),
        addr: U64::new(sge.addr()),
    }
}

fn validate_sges(sges: &[Sge]) -> Result<(), WqeError> {
    if sges.len() > MAX_GATHER {
        return Err(WqeError::FieldOutOfRange {
            field: "scatter/gather entries",
            value: sges.len() as u64,
            max: MAX_GATHER as u64,
        });
    }
    let total: u64 = sges.iter().map(|s| u64::from(s.len())).sum();
    if total > MAX_TRANSFER_BYTES {
        return Err(WqeError::TransferTooLong {
            len: total,
            max: MAX_TRANSFER_BYTES,
        });
    }
    Ok(())
}

#[inline(always)]
fn encode_sges(sges: &[Sge], writer: &mut WqeWriter<'_>) {
    for sge in sges {
        put_sge(sge, writer);
    }
}

/// Octowords an inline payload of `len` bytes occupies with its header; an empty payload
/// occupies none (rdma-core emits no inline segment for zero bytes).
pub const fn inline_octowords(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        (INLINE_HEADER_BYTES + len).div_ceil(OCTOWORD_BYTES)
    }
}

/// Writes an inline data segment: the 4-byte header (`mlx5_wqe_inl_data_seg`), the
/// payload, zeros to the octoword's end. Each octoword is assembled in registers from
/// loads of the payload (rdma-core's `memcpy` into the ring, without the byte buffer).
#[inline(always)]
fn encode_inline(payload: &[u8], writer: &mut WqeWriter<'_>) {
    if payload.is_empty() {
        return;
    }
    // Validated: at most 1004 bytes, so the count fits below the flag bit.
    let header = payload.len() as u32 | INLINE_SEGMENT_FLAG;
    // The stream is the header, then the payload: byte `i` of the stream (i >= 4) is
    // payload byte `i - 4`. Words are little-endian values (byte `k` in bits 8k..8k+8).
    let header_le = u64::from(u32::from_le_bytes(header.to_be_bytes()));
    let first = header_le | payload_window(payload, 0) << 32;
    writer.put_octoword([
        u64::from_le(first),
        u64::from_le(payload_window(payload, WORD_BYTES - INLINE_HEADER_BYTES)),
    ]);
    for k in 1..inline_octowords(payload.len()) {
        let at = k * OCTOWORD_BYTES - INLINE_HEADER_BYTES;
        writer.put_octoword([
            u64::from_le(payload_window(payload, at)),
            u64::from_le(payload_window(payload, at + WORD_BYTES)),
        ]);
    }
}

/// Bytes of a word.
const WORD_BYTES: usize = 8;

/// Payload bytes `start..start + 8` as a little-endian value, zeros past the payload's end.
#[inline(always)]
fn payload_window(payload: &[u8], start: usize) -> u64 {
    let len = payload.len();
    if let Some(bytes) = payload
        .get(start..)
        .and_then(|rest| rest.first_chunk::<8>())
    {
        return u64::from_le_bytes(*bytes);
    }
    if start >= len {
        return 0;
    }
    if let Some(last) = payload.last_chunk::<8>() {
        // The payload ends inside the window: its last 8 bytes, moved down so that byte
        // `start` comes first (1 to 7 bytes are past the end, so the shift is 8 to 56).
        return u64::from_le_bytes(*last) >> (8 * (start + WORD_BYTES - len));
    }
    // A payload under 8 bytes.
    payload[start..]
        .iter()
        .enumerate()
        .fold(0, |word, (i, &b)| word | u64::from(b) << (8 * i))
}

fn validate_inline(payload: &[u8]) -> Result<(), WqeError> {
    // The format's own ceiling; queues apply their configured maximum when writing.
    let max = usize::from(MAX_DS) * OCTOWORD_BYTES - INLINE_HEADER_BYTES;
    if payload.len() > max {
        return Err(WqeError::InlineTooLong {
            len: payload.len(),
            max,
        });
    }
    Ok(())
}

impl Payload for Empty {
    fn visit_local(&self, _: &mut dyn FnMut(LocalSpan)) {}
    #[inline]
    fn octowords(&self) -> usize {
        0
    }
    #[inline]
    fn inline_len(&self) -> usize {
        0
    }
    #[inline]
    fn validate(&self) -> Result<(), WqeError> {
        Ok(())
    }
    #[inline(always)]
    fn encode(&self, _: &mut WqeWriter<'_>) {}
}
impl ReadPayload for Empty {}
impl FixedPayload for Empty {
    const OCTOWORDS: usize = 0;
}

impl<const N: usize> Payload for Gather<N> {
    #[inline]
    fn visit_local(&self, visit: &mut dyn FnMut(LocalSpan)) {
        self.0.iter().for_each(|s| visit(s.into()));
    }
    #[inline]
    fn octowords(&self) -> usize {
        N
    }
    #[inline]
    fn inline_len(&self) -> usize {
        0
    }
    #[inline]
    fn validate(&self) -> Result<(), WqeError> {
        validate_sges(&self.0)
    }
    #[inline(always)]
    fn encode(&self, writer: &mut WqeWriter<'_>) {
        encode_sges(&self.0, writer);
    }
}
impl<const N: usize> ReadPayload for Gather<N> {}
impl<const N: usize> FixedPayload for Gather<N> {
    const OCTOWORDS: usize = N;
}

impl Payload for Inline<'_> {
    fn visit_local(&self, _: &mut dyn FnMut(LocalSpan)) {}
    #[inline]
    fn octowords(&self) -> usize {
        inline_octowords(self.0.len())
    }
    #[inline]
    fn inline_len(&self) -> usize {
        self.0.len()
    }
    #[inline]
    fn validate(&self) -> Result<(), WqeError> {
        validate_inline(self.0)
    }
    #[inline(always)]
    fn encode(&self, writer: &mut WqeWriter<'_>) {
        encode_inline(self.0, writer);
    }
}

impl ReadPayload for AnyData<'_> {
    fn is_inline(&self) -> bool {
        matches!(self, Self::Inline(_))
    }
}

impl Payload for AnyData<'_> {
    #[inline]
    fn visit_local(&self, visit: &mut dyn FnMut(LocalSpan)) {
        if let Self::Sges(sges) = self {
            sges.iter().for_each(|s| visit(s.into()));
        }
    }
    #[inline]
    fn octowords(&self) -> usize {
        match self {
            Self::Empty => 0,
            Self::Sges(s) => s.len(),
            Self::Inline(p) => inline_octowords(p.len()),
        }
    }
    #[inline]
    fn inline_len(&self) -> usize {
        match self {
            Self::Inline(p) => p.len(),
            _ => 0,
        }
    }
    #[inline]
    fn validate(&self) -> Result<(), WqeError> {
        match self {
            Self::Empty => Ok(()),
            Self::Sges([]) => Err(WqeError::InvalidCombination {
                what: "an empty entry list (use AnyData::Empty)",
            }),
            Self::Sges(s) => validate_sges(s),
            Self::Inline(p) => validate_inline(p),
        }
    }
    #[inline]
    fn encode(&self, writer: &mut WqeWriter<'_>) {
        match self {
            Self::Empty => {}
            Self::Sges(s) => encode_sges(s, writer),
            Self::Inline(p) => encode_inline(p, writer),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Common control options.

/// Options every WQE has: the `fm_ce_se` flags and, on DC, the stream id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Options {
    flags: ControlFlags,
    stream_id: u16,
}

macro_rules! control_setters {
    () => {
        /// Requests a CQE for this WQE (completion mode [`CompletionMode::Always`]).
        pub fn signaled(mut self) -> Self {
            self.options.flags.completion = CompletionMode::Always;
            self
        }
        /// Sets the completion mode.
        pub fn completion(mut self, mode: CompletionMode) -> Self {
            self.options.flags.completion = mode;
            self
        }
        /// Sets the fence mode.
        pub fn fence(mut self, mode: FenceMode) -> Self {
            self.options.flags.fence = mode;
            self
        }
        /// Raises a solicited event at the responder.
        pub fn solicited(mut self) -> Self {
            self.options.flags.solicited = Solicited::Yes;
            self
        }
    };
    (addressed) => {
        control_setters!();
        /// Sets the DCI stream channel id (DC only: WQEs that address a target).
        pub fn dci_stream(mut self, stream_id: u16) -> Self
        where
            T: DciTransport,
        {
            self.options.stream_id = stream_id;
            self
        }
    };
}

// ---------------------------------------------------------------------------------------
// RDMA WRITE (with or without immediate).

/// RDMA WRITE or WRITE_WITH_IMM: local data (gathered or inline) to remote memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RdmaWrite<'a, T: Transport = Rc, D = NoData> {
    options: Options,
    target: T::Target,
    remote: RemoteAddress,
    imm: Option<u32>,
    data: D,
    _payload: PhantomData<&'a [u8]>,
}

impl<'a, T: Transport> RdmaWrite<'a, T, NoData> {
    /// A WRITE to `to`: a [`RemoteAddress`] on RC, a [`DcAddress`] on DC.
    pub fn new<X: Destination<Transport = T>>(to: X) -> Self {
        let (target, remote) = to.split();
        Self {
            options: Options::default(),
            target,
            remote,
            imm: None,
            data: NoData,
            _payload: PhantomData,
        }
    }

    fn data<D>(self, data: D) -> RdmaWrite<'a, T, D> {
        RdmaWrite {
            options: self.options,
            target: self.target,
            remote: self.remote,
            imm: self.imm,
            data,
            _payload: PhantomData,
        }
    }

    /// Gathers from one local entry.
    pub fn sge(self, sge: Sge) -> RdmaWrite<'a, T, Gather<1>> {
        self.data(Gather([sge]))
    }
    /// Gathers from `N` local entries (1 to [`MAX_GATHER`], checked at compile time).
    pub fn gather<const N: usize>(self, sges: [Sge; N]) -> RdmaWrite<'a, T, Gather<N>> {
        const {
            assert!(
                N >= 1 && N <= MAX_GATHER,
                "a gather list has 1 to MAX_GATHER entries"
            )
        };
        self.data(Gather(sges))
    }
    /// Copies `payload` into the WQE. An empty payload encodes as a WRITE without data, as
    /// in rdma-core.
    pub fn inline(self, payload: &'a [u8]) -> RdmaWrite<'a, T, Inline<'a>> {
        self.data(Inline(payload))
    }
    /// A zero-length WRITE: no data segment.
    pub fn without_data(self) -> RdmaWrite<'a, T, Empty> {
        self.data(Empty)
    }
    /// Data chosen at run time.
    pub fn any_data(self, data: AnyData<'a>) -> RdmaWrite<'a, T, AnyData<'a>> {
        self.data(data)
    }
}

impl<'a, T: Transport, D> RdmaWrite<'a, T, D> {
    control_setters!(addressed);

    /// Makes this a WRITE_WITH_IMM carrying `imm` (written big-endian), which consumes a
    /// receive at the responder and completes there with the immediate.
    pub fn immediate(mut self, imm: u32) -> Self {
        self.imm = Some(imm);
        self
    }
}

impl<'a, T: Transport, D: Payload> RdmaWrite<'a, T, D> {
    /// Validates and finishes the WQE.
    pub fn build(self) -> Result<Wqe<Self>, WqeError> {
        Wqe::new(self)
    }
}

impl<T: Transport, D> Sealed for RdmaWrite<'_, T, D> {}
impl<T: Transport, D: Payload> WqeSpec for RdmaWrite<'_, T, D> {
    #[inline]
    fn target(&self) -> Option<AnyDcTarget> {
        T::erase_target(&self.target)
    }
    type Transport = T;
    #[inline]
    fn opcode(&self) -> Opcode {
        if self.imm.is_some() {
            Opcode::RdmaWriteImm
        } else {
            Opcode::RdmaWrite
        }
    }
    #[inline]
    fn octowords(&self) -> usize {
        1 + T::target_ds(&self.target) + 1 + self.data.octowords()
    }
    #[inline]
    fn inline_len(&self) -> usize {
        self.data.inline_len()
    }
    #[inline]
    fn validate(&self) -> Result<(), WqeError> {
        self.data.validate()
    }
    #[inline(always)]
    fn encode_body(&self, writer: &mut WqeWriter<'_>) {
        T::encode_target(&self.target, writer);
        put_remote(&self.remote, writer);
        self.data.encode(writer);
    }
    #[inline]
    fn visit_local(&self, visit: &mut dyn FnMut(LocalSpan)) {
        self.data.visit_local(visit);
    }
    #[inline]
    fn control(&self) -> ControlTemplate {
        ControlTemplate {
            opmod: 0,
            flags: self.options.flags,
            stream_id: self.options.stream_id,
            imm: self.imm.unwrap_or(0),
        }
    }
}
impl<T: TypedTransport, D: FixedPayload> FixedShape for RdmaWrite<'_, T, D> {
    const DS: u8 = (2 + T::TARGET_DS + D::OCTOWORDS) as u8;
}
impl<T: TypedTransport, D: FixedPayload> RdmaWrite<'_, T, D> {
    /// Octowords of this shape, control segment included.
    pub const DS: u8 = <Self as FixedShape>::DS;
}

/// Writes a remote address segment (`mlx5_wqe_raddr_seg`): address, rkey, zero.
#[inline(always)]
fn put_remote(remote: &RemoteAddress, writer: &mut WqeWriter<'_>) {
    writer.put_octoword(octoword(remote.addr, u64::from(remote.rkey.0) << 32));
}

/// The remote address segment as its layout (the byte-level form the octoword writers
/// are checked against).
#[cfg(test)]
fn remote_segment(remote: &RemoteAddress) -> RemoteAddressSegment {
    RemoteAddressSegment {
        raddr: U64::new(remote.addr),
        rkey: U32::new(remote.rkey.0),
        reserved: U32::ZERO,
    }
}

// ---------------------------------------------------------------------------------------
// RDMA READ.

/// RDMA READ: remote memory into local scatter entries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RdmaRead<'a, T: Transport = Rc, D = NoData> {
    options: Options,
    target: T::Target,
    remote: RemoteAddress,
    data: D,
    _payload: PhantomData<&'a [Sge]>,
}

impl<'a, T: Transport> RdmaRead<'a, T, NoData> {
    /// A READ from `to`: a [`RemoteAddress`] on RC, a [`DcAddress`] on DC.
    pub fn new<X: Destination<Transport = T>>(to: X) -> Self {
        let (target, remote) = to.split();
        Self {
            options: Options::default(),
            target,
            remote,
            data: NoData,
            _payload: PhantomData,
        }
    }

    fn data<D>(self, data: D) -> RdmaRead<'a, T, D> {
        RdmaRead {
            options: self.options,
            target: self.target,
            remote: self.remote,
            data,
            _payload: PhantomData,
        }
    }

    /// Scatters into one local entry.
    pub fn sge(self, sge: Sge) -> RdmaRead<'a, T, Gather<1>> {
        self.data(Gather([sge]))
    }
    /// Scatters into `N` local entries (1 to [`MAX_GATHER`], checked at compile time).
    pub fn gather<const N: usize>(self, sges: [Sge; N]) -> RdmaRead<'a, T, Gather<N>> {
        const {
            assert!(
                N >= 1 && N <= MAX_GATHER,
                "a scatter list has 1 to MAX_GATHER entries"
            )
        };
        self.data(Gather(sges))
    }
    /// A zero-length READ: no data segment.
    pub fn without_data(self) -> RdmaRead<'a, T, Empty> {
        self.data(Empty)
    }
    /// Data chosen at run time (inline data is refused at `build()`).
    pub fn any_data(self, data: AnyData<'a>) -> RdmaRead<'a, T, AnyData<'a>> {
        self.data(data)
    }
}

impl<'a, T: Transport, D> RdmaRead<'a, T, D> {
    control_setters!(addressed);
}

impl<'a, T: Transport, D: Payload> RdmaRead<'a, T, D>
where
    Self: WqeSpec,
{
    /// Validates and finishes the WQE.
    pub fn build(self) -> Result<Wqe<Self>, WqeError> {
        Wqe::new(self)
    }
}

impl<T: Transport, D> Sealed for RdmaRead<'_, T, D> {}
impl<T: Transport, D: ReadPayload> WqeSpec for RdmaRead<'_, T, D> {
    #[inline]
    fn target(&self) -> Option<AnyDcTarget> {
        T::erase_target(&self.target)
    }
    type Transport = T;
    #[inline]
    fn opcode(&self) -> Opcode {
        Opcode::RdmaRead
    }
    #[inline]
    fn octowords(&self) -> usize {
        1 + T::target_ds(&self.target) + 1 + self.data.octowords()
    }
    #[inline]
    fn inline_len(&self) -> usize {
        0
    }
    #[inline]
    fn validate(&self) -> Result<(), WqeError> {
        if self.data.is_inline() {
            return Err(WqeError::InvalidCombination {
                what: "an RDMA READ cannot carry inline data",
            });
        }
        self.data.validate()
    }
    #[inline(always)]
    fn encode_body(&self, writer: &mut WqeWriter<'_>) {
        T::encode_target(&self.target, writer);
        put_remote(&self.remote, writer);
        self.data.encode(writer);
    }
    #[inline]
    fn visit_local(&self, visit: &mut dyn FnMut(LocalSpan)) {
        self.data.visit_local(visit);
    }
    #[inline]
    fn control(&self) -> ControlTemplate {
        ControlTemplate {
            opmod: 0,
            flags: self.options.flags,
            stream_id: self.options.stream_id,
            imm: 0,
        }
    }
}
impl<T: TypedTransport, D: ReadPayload + FixedPayload> FixedShape for RdmaRead<'_, T, D> {
    const DS: u8 = (2 + T::TARGET_DS + D::OCTOWORDS) as u8;
}
impl<T: TypedTransport, D: ReadPayload + FixedPayload> RdmaRead<'_, T, D> {
    /// Octowords of this shape, control segment included.
    pub const DS: u8 = <Self as FixedShape>::DS;
}

// ---------------------------------------------------------------------------------------
// Atomics.

/// The operation of an atomic WQE: the standard 8-byte pair or one of the masked forms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// 8-byte compare-and-swap: if `*remote == compare` then `*remote = swap`.
    CompareSwap {
        /// Compare value.
        compare: u64,
        /// Swap value.
        swap: u64,
    },
    /// 8-byte fetch-and-add.
    FetchAdd {
        /// Addend.
        add: u64,
    },
    /// Masked compare-and-swap: if `(*remote ^ compare) & compare_mask == 0` then
    /// `*remote = (*remote & !swap_mask) | (swap & swap_mask)`.
    MaskedCompareSwap {
        /// Operand width.
        width: AtomicWidth,
        /// Swap value.
        swap: u64,
        /// Compare value.
        compare: u64,
        /// Bits of `swap` written.
        swap_mask: u64,
        /// Bits compared.
        compare_mask: u64,
    },
    /// Masked fetch-and-add: an add whose carries stop at the set bits of `field_boundary`.
    MaskedFetchAdd {
        /// Operand width.
        width: AtomicWidth,
        /// Addend.
        add: u64,
        /// Carry boundaries.
        field_boundary: u64,
    },
}

impl AtomicOp {
    /// The opcode.
    pub const fn opcode(&self) -> Opcode {
        match self {
            Self::CompareSwap { .. } => Opcode::AtomicCompareSwap,
            Self::FetchAdd { .. } => Opcode::AtomicFetchAdd,
            Self::MaskedCompareSwap { .. } => Opcode::AtomicMaskedCompareSwap,
            Self::MaskedFetchAdd { .. } => Opcode::AtomicMaskedFetchAdd,
        }
    }
    /// The opcode modifier.
    pub const fn opmod(&self) -> u8 {
        match self {
            Self::CompareSwap { .. } | Self::FetchAdd { .. } => 0,
            Self::MaskedCompareSwap { width, .. } | Self::MaskedFetchAdd { width, .. } => {
                width.opmod()
            }
        }
    }
    /// The operand size in bytes.
    pub const fn operand_bytes(&self) -> u32 {
        match self {
            Self::CompareSwap { .. } | Self::FetchAdd { .. } => 8,
            Self::MaskedCompareSwap { width, .. } | Self::MaskedFetchAdd { width, .. } => {
                width.bytes()
            }
        }
    }
    /// Octowords of the atomic segment(s).
    pub const fn octowords(&self) -> usize {
        match self {
            Self::MaskedCompareSwap {
                width: AtomicWidth::Eight,
                ..
            } => 2,
            _ => 1,
        }
    }

    #[inline]
    fn validate(&self) -> Result<(), WqeError> {
        let check = |what: &'static str, value: u64| {
            if value > u64::from(u32::MAX) {
                Err(WqeError::OperandTooWide {
                    what,
                    value,
                    max: u32::MAX.into(),
                })
            } else {
                Ok(())
            }
        };
        match *self {
            Self::MaskedCompareSwap {
                width: AtomicWidth::Four,
                swap,
                compare,
                swap_mask,
                compare_mask,
            } => {
                check("swap", swap)?;
                check("compare", compare)?;
                check("swap_mask", swap_mask)?;
                check("compare_mask", compare_mask)
            }
            Self::MaskedFetchAdd {
                width: AtomicWidth::Four,
                add,
                field_boundary,
            } => {
                check("add", add)?;
                check("field_boundary", field_boundary)
            }
            _ => Ok(()),
        }
    }

    #[inline]
    fn encode(&self, writer: &mut WqeWriter<'_>) {
        match *self {
            Self::CompareSwap { compare, swap } => writer.put(
                AtomicSegment {
                    swap_add: U64::new(swap),
                    compare: U64::new(compare),
                }
                .as_bytes(),
            ),
            Self::FetchAdd { add } => writer.put(
                AtomicSegment {
                    swap_add: U64::new(add),
                    compare: U64::ZERO,
                }
                .as_bytes(),
            ),
            Self::MaskedCompareSwap {
                width: AtomicWidth::Four,
                swap,
                compare,
                swap_mask,
                compare_mask,
            } => writer.put(
                MaskedCompareSwap4Segment {
                    swap: U32::new(swap as u32),
                    compare: U32::new(compare as u32),
                    swap_mask: U32::new(swap_mask as u32),
                    compare_mask: U32::new(compare_mask as u32),
                }
                .as_bytes(),
            ),
            Self::MaskedCompareSwap {
                width: AtomicWidth::Eight,
                swap,
                compare,
                swap_mask,
                compare_mask,
            } => {
                let seg = MaskedCompareSwap8Segment {
                    swap: U64::new(swap),
                    compare: U64::new(compare),
                    swap_mask: U64::new(swap_mask),
                    compare_mask: U64::new(compare_mask),
                };
                // Two octowords, written separately: a WQEBB boundary may fall between them.
                let bytes = seg.as_bytes();
                writer.put(&bytes[..OCTOWORD_BYTES]);
                writer.put(&bytes[OCTOWORD_BYTES..]);
            }
            Self::MaskedFetchAdd {
                width: AtomicWidth::Four,
                add,
                field_boundary,
            } => writer.put(
                MaskedFetchAdd4Segment {
                    add: U32::new(add as u32),
                    field_boundary: U32::new(field_boundary as u32),
                    reserved: [0; 8],
                }
                .as_bytes(),
            ),
            Self::MaskedFetchAdd {
                width: AtomicWidth::Eight,
                add,
                field_boundary,
            } => writer.put(
                MaskedFetchAdd8Segment {
                    add: U64::new(add),
                    field_boundary: U64::new(field_boundary),
                }
                .as_bytes(),
            ),
        }
    }
}

/// How many octowords an atomic's operation segments take: a type parameter of [`Atomic`]
/// so that fixed shapes know their DS. Sealed.
pub trait AtomicSegments: Sealed + Copy + core::fmt::Debug + PartialEq {
    /// Octowords, where the type tells.
    const FIXED: Option<usize>;
}

/// Compare-swap, fetch-add and the masked forms but the 8-byte masked compare-swap: one
/// octoword.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OneSegment;
/// The 8-byte masked compare-swap: two octowords.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TwoSegments;
/// Chosen at run time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AnySegments;

impl Sealed for OneSegment {}
impl Sealed for TwoSegments {}
impl Sealed for AnySegments {}
impl AtomicSegments for OneSegment {
    const FIXED: Option<usize> = Some(1);
}
impl AtomicSegments for TwoSegments {
    const FIXED: Option<usize> = Some(2);
}
impl AtomicSegments for AnySegments {
    const FIXED: Option<usize> = None;
}

/// An atomic WQE: control, target (DC), remote address, atomic segment(s), and the data
/// segment naming the local buffer that receives the remote operand's original value.
///
/// Remote addresses must be aligned to the operand size (checked at `build()`).
///
/// ```
/// use ibgda::wqe::*;
/// let remote = RemoteAddress::new(0x4000, RKey(5));
/// let result = LocalBuffer::new(0x1000, LKey(6));
/// let cas = Atomic::compare_swap(remote, result, 0, 1).signaled().build()?;
/// assert_eq!(cas.ds(), 4);
/// let masked = Atomic::masked_compare_swap_64(remote, result, 1, 0, !0, 0).build()?;
/// assert_eq!(masked.ds(), 5);
/// assert_eq!(Atomic::<Rc, TwoSegments>::DS, 5);
/// # Ok::<(), WqeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Atomic<T: Transport = Rc, S: AtomicSegments = OneSegment> {
    options: Options,
    target: T::Target,
    remote: RemoteAddress,
    result: LocalBuffer,
    op: AtomicOp,
    _segments: PhantomData<S>,
}

impl<T: Transport, S: AtomicSegments> Atomic<T, S> {
    fn with_op<X: Destination<Transport = T>>(to: X, result: LocalBuffer, op: AtomicOp) -> Self {
        let (target, remote) = to.split();
        Self {
            options: Options::default(),
            target,
            remote,
            result,
            op,
            _segments: PhantomData,
        }
    }
    control_setters!(addressed);

    /// The operation.
    pub fn op(&self) -> &AtomicOp {
        &self.op
    }

    /// Validates and finishes the WQE.
    pub fn build(self) -> Result<Wqe<Self>, WqeError> {
        Wqe::new(self)
    }
}

impl<T: Transport> Atomic<T, OneSegment> {
    /// 8-byte compare-and-swap at `to`; the original value lands in `result`.
    pub fn compare_swap<X: Destination<Transport = T>>(
        to: X,
        result: LocalBuffer,
        compare: u64,
        swap: u64,
    ) -> Self {
        Self::with_op(to, result, AtomicOp::CompareSwap { compare, swap })
    }
    /// 8-byte fetch-and-add at `to`; the original value lands in `result`.
    pub fn fetch_add<X: Destination<Transport = T>>(to: X, result: LocalBuffer, add: u64) -> Self {
        Self::with_op(to, result, AtomicOp::FetchAdd { add })
    }
    /// 4-byte masked compare-and-swap at `to`.
    pub fn masked_compare_swap_32<X: Destination<Transport = T>>(
        to: X,
        result: LocalBuffer,
        swap: u32,
        compare: u32,
        swap_mask: u32,
        compare_mask: u32,
    ) -> Self {
        let op = AtomicOp::MaskedCompareSwap {
            width: AtomicWidth::Four,
            swap: swap.into(),
            compare: compare.into(),
            swap_mask: swap_mask.into(),
            compare_mask: compare_mask.into(),
        };
        Self::with_op(to, result, op)
    }
    /// 4-byte masked fetch-and-add at `to`.
    pub fn masked_fetch_add_32<X: Destination<Transport = T>>(
        to: X,
        result: LocalBuffer,
        add: u32,
        field_boundary: u32,
    ) -> Self {
        let op = AtomicOp::MaskedFetchAdd {
            width: AtomicWidth::Four,
            add: add.into(),
            field_boundary: field_boundary.into(),
        };
        Self::with_op(to, result, op)
    }
    /// 8-byte masked fetch-and-add at `to`.
    pub fn masked_fetch_add_64<X: Destination<Transport = T>>(
        to: X,
        result: LocalBuffer,
        add: u64,
        field_boundary: u64,
    ) -> Self {
        Self::with_op(
            to,
            result,
            AtomicOp::MaskedFetchAdd {
                width: AtomicWidth::Eight,
                add,
                field_boundary,
            },
        )
    }
}

impl<T: Transport> Atomic<T, TwoSegments> {
    /// 8-byte masked compare-and-swap at `to` (two atomic octowords).
    pub fn masked_compare_swap_64<X: Destination<Transport = T>>(
        to: X,
        result: LocalBuffer,
        swap: u64,
        compare: u64,
        swap_mask: u64,
        compare_mask: u64,
    ) -> Self {
        let op = AtomicOp::MaskedCompareSwap {
            width: AtomicWidth::Eight,
            swap,
            compare,
            swap_mask,
            compare_mask,
        };
        Self::with_op(to, result, op)
    }
}

impl<T: Transport> Atomic<T, AnySegments> {
    /// An atomic whose operation is chosen at run time.
    pub fn any<X: Destination<Transport = T>>(to: X, result: LocalBuffer, op: AtomicOp) -> Self {
        Self::with_op(to, result, op)
    }
}

fn validate_atomic(remote: &RemoteAddress, op: &AtomicOp) -> Result<(), WqeError> {
    let align = u64::from(op.operand_bytes());
    if remote.addr % align != 0 {
        return Err(WqeError::MisalignedAtomic {
            opcode: op.opcode(),
            addr: remote.addr,
            align,
        });
    }
    op.validate()
}

fn encode_atomic(
    remote: &RemoteAddress,
    result: &LocalBuffer,
    op: &AtomicOp,
    writer: &mut WqeWriter<'_>,
) {
    put_remote(remote, writer);
    op.encode(writer);
    put_data(op.operand_bytes(), result.lkey, result.addr, writer);
}

impl<T: Transport, S: AtomicSegments> Sealed for Atomic<T, S> {}
impl<T: Transport, S: AtomicSegments> WqeSpec for Atomic<T, S> {
    #[inline]
    fn target(&self) -> Option<AnyDcTarget> {
        T::erase_target(&self.target)
    }
    type Transport = T;
    #[inline]
    fn opcode(&self) -> Opcode {
        self.op.opcode()
    }
    #[inline]
    fn octowords(&self) -> usize {
        1 + T::target_ds(&self.target) + 1 + self.op.octowords() + 1
    }
    #[inline]
    fn inline_len(&self) -> usize {
        0
    }
    #[inline]
    fn validate(&self) -> Result<(), WqeError> {
        validate_atomic(&self.remote, &self.op)
    }
    #[inline]
    fn encode_body(&self, writer: &mut WqeWriter<'_>) {
        T::encode_target(&self.target, writer);
        encode_atomic(&self.remote, &self.result, &self.op, writer);
    }
    #[inline]
    fn visit_local(&self, visit: &mut dyn FnMut(LocalSpan)) {
        visit(LocalSpan {
            addr: self.result.addr,
            len: self.op.operand_bytes().into(),
            lkey: self.result.lkey,
        });
    }
    #[inline]
    fn control(&self) -> ControlTemplate {
        ControlTemplate {
            opmod: self.op.opmod(),
            flags: self.options.flags,
            stream_id: self.options.stream_id,
            imm: 0,
        }
    }
}

impl<T: TypedTransport> FixedShape for Atomic<T, OneSegment> {
    const DS: u8 = (3 + T::TARGET_DS + 1) as u8;
}
impl<T: TypedTransport> FixedShape for Atomic<T, TwoSegments> {
    const DS: u8 = (3 + T::TARGET_DS + 2) as u8;
}
impl<T: TypedTransport> Atomic<T, OneSegment> {
    /// Octowords of this shape, control segment included.
    pub const DS: u8 = <Self as FixedShape>::DS;
}
impl<T: TypedTransport> Atomic<T, TwoSegments> {
    /// Octowords of this shape, control segment included.
    pub const DS: u8 = <Self as FixedShape>::DS;
}

// ---------------------------------------------------------------------------------------
// NOP and DUMP: local operations that carry no address, on any transport.

/// NOP: one basic block that completes without touching memory (for padding, and to
/// signal a completion that retires earlier unsignaled WQEs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Nop<T: Transport = Rc> {
    options: Options,
    _transport: PhantomData<T>,
}

impl<T: Transport> Nop<T> {
    /// A NOP.
    pub fn new() -> Self {
        Self {
            options: Options::default(),
            _transport: PhantomData,
        }
    }
    control_setters!();
    /// Validates and finishes the WQE.
    pub fn build(self) -> Result<Wqe<Self>, WqeError> {
        Wqe::new(self)
    }
}
impl<T: Transport> Default for Nop<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Transport> Sealed for Nop<T> {}
impl<T: Transport> WqeSpec for Nop<T> {
    type Transport = T;
    #[inline]
    fn opcode(&self) -> Opcode {
        Opcode::Nop
    }
    #[inline]
    fn octowords(&self) -> usize {
        1
    }
    #[inline]
    fn inline_len(&self) -> usize {
        0
    }
    #[inline]
    fn validate(&self) -> Result<(), WqeError> {
        Ok(())
    }
    #[inline(always)]
    fn encode_body(&self, _: &mut WqeWriter<'_>) {}
    fn visit_local(&self, _: &mut dyn FnMut(LocalSpan)) {}
    #[inline]
    fn control(&self) -> ControlTemplate {
        ControlTemplate {
            flags: self.options.flags,
            ..Default::default()
        }
    }
}
impl<T: Transport> FixedShape for Nop<T> {
    const DS: u8 = 1;
}

/// DUMP: the NIC reads a local buffer and discards it. With [`FenceMode::Fence`] it waits
/// for earlier READs and atomics, so its completion means their data has landed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dump<T: Transport = Rc> {
    options: Options,
    local: Sge,
    _transport: PhantomData<T>,
}

impl<T: Transport> Dump<T> {
    /// A DUMP of `local`.
    pub fn new(local: Sge) -> Self {
        Self {
            options: Options::default(),
            local,
            _transport: PhantomData,
        }
    }
    control_setters!();
    /// Validates and finishes the WQE.
    pub fn build(self) -> Result<Wqe<Self>, WqeError> {
        Wqe::new(self)
    }
}

impl<T: Transport> Sealed for Dump<T> {}
impl<T: Transport> WqeSpec for Dump<T> {
    type Transport = T;
    #[inline]
    fn opcode(&self) -> Opcode {
        Opcode::Dump
    }
    #[inline]
    fn octowords(&self) -> usize {
        2
    }
    #[inline]
    fn inline_len(&self) -> usize {
        0
    }
    #[inline]
    fn validate(&self) -> Result<(), WqeError> {
        Ok(())
    }
    #[inline]
    fn encode_body(&self, writer: &mut WqeWriter<'_>) {
        put_sge(&self.local, writer);
    }
    #[inline]
    fn visit_local(&self, visit: &mut dyn FnMut(LocalSpan)) {
        visit((&self.local).into());
    }
    #[inline]
    fn control(&self) -> ControlTemplate {
        ControlTemplate {
            flags: self.options.flags,
            ..Default::default()
        }
    }
}
impl<T: Transport> FixedShape for Dump<T> {
    const DS: u8 = 2;
}

// ---------------------------------------------------------------------------------------
// The erased WQE: everything chosen at run time.

/// A WQE description chosen entirely at run time: the erased form of the typed builders,
/// for code that decides the operation or transport dynamically (and for fuzzing).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnyWqe<'a> {
    /// The DC target, or `None` on RC (ignored for NOP and DUMP).
    pub target: Option<AnyDcTarget>,
    /// Control flags.
    pub flags: ControlFlags,
    /// DCI stream id (DC only).
    pub stream_id: u16,
    /// The operation.
    pub op: AnyOperation<'a>,
}

/// The operation of an [`AnyWqe`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AnyOperation<'a> {
    /// NOP.
    Nop,
    /// DUMP of a local buffer.
    Dump(Sge),
    /// WRITE, or WRITE_WITH_IMM when `imm` is set.
    Write {
        /// Remote memory.
        remote: RemoteAddress,
        /// Immediate.
        imm: Option<u32>,
        /// Local data.
        data: AnyData<'a>,
    },
    /// READ.
    Read {
        /// Remote memory.
        remote: RemoteAddress,
        /// Local scatter entries.
        data: AnyData<'a>,
    },
    /// An atomic.
    Atomic {
        /// Remote operand.
        remote: RemoteAddress,
        /// Local buffer for the original value.
        result: LocalBuffer,
        /// The operation.
        op: AtomicOp,
    },
}

impl<'a> AnyWqe<'a> {
    /// Validates and finishes the WQE.
    pub fn build(self) -> Result<Wqe<Self>, WqeError> {
        Wqe::new(self)
    }

    fn has_address(&self) -> bool {
        !matches!(self.op, AnyOperation::Nop | AnyOperation::Dump(_))
    }

    #[inline]
    fn target_ds(&self) -> usize {
        if self.has_address() {
            AnyTransport::target_ds(&self.target)
        } else {
            0
        }
    }
}

impl Sealed for AnyWqe<'_> {}
impl WqeSpec for AnyWqe<'_> {
    #[inline]
    fn target(&self) -> Option<AnyDcTarget> {
        if self.has_address() {
            self.target
        } else {
            None
        }
    }
    type Transport = AnyTransport;
    #[inline]
    fn opcode(&self) -> Opcode {
        match self.op {
            AnyOperation::Nop => Opcode::Nop,
            AnyOperation::Dump(_) => Opcode::Dump,
            AnyOperation::Write { imm: Some(_), .. } => Opcode::RdmaWriteImm,
            AnyOperation::Write { imm: None, .. } => Opcode::RdmaWrite,
            AnyOperation::Read { .. } => Opcode::RdmaRead,
            AnyOperation::Atomic { op, .. } => op.opcode(),
        }
    }
    #[inline]
    fn octowords(&self) -> usize {
        1 + self.target_ds()
            + match self.op {
                AnyOperation::Nop => 0,
                AnyOperation::Dump(_) => 1,
                AnyOperation::Write { data, .. } | AnyOperation::Read { data, .. } => {
                    1 + data.octowords()
                }
                AnyOperation::Atomic { op, .. } => 1 + op.octowords() + 1,
            }
    }
    #[inline]
    fn inline_len(&self) -> usize {
        match self.op {
            AnyOperation::Write { data, .. } => data.inline_len(),
            _ => 0,
        }
    }
    #[inline]
    fn validate(&self) -> Result<(), WqeError> {
        if self.stream_id != 0 && (self.target.is_none() || !self.has_address()) {
            return Err(WqeError::InvalidCombination {
                what: "a DCI stream id on a WQE without a DC target",
            });
        }
        match self.op {
            AnyOperation::Nop | AnyOperation::Dump(_) => Ok(()),
            AnyOperation::Write { data, .. } => data.validate(),
            AnyOperation::Read { data, .. } => {
                if let AnyData::Inline(_) = data {
                    return Err(WqeError::InvalidCombination {
                        what: "an RDMA READ cannot carry inline data",
                    });
                }
                data.validate()
            }
            AnyOperation::Atomic { remote, op, .. } => validate_atomic(&remote, &op),
        }
    }
    #[inline]
    fn encode_body(&self, writer: &mut WqeWriter<'_>) {
        if self.has_address() {
            AnyTransport::encode_target(&self.target, writer);
        }
        match self.op {
            AnyOperation::Nop => {}
            AnyOperation::Dump(sge) => put_sge(&sge, writer),
            AnyOperation::Write { remote, data, .. } | AnyOperation::Read { remote, data } => {
                put_remote(&remote, writer);
                data.encode(writer);
            }
            AnyOperation::Atomic { remote, result, op } => {
                encode_atomic(&remote, &result, &op, writer)
            }
        }
    }
    #[inline]
    fn visit_local(&self, visit: &mut dyn FnMut(LocalSpan)) {
        match self.op {
            AnyOperation::Nop => {}
            AnyOperation::Dump(sge) => visit((&sge).into()),
            AnyOperation::Write { data, .. } | AnyOperation::Read { data, .. } => {
                data.visit_local(visit)
            }
            AnyOperation::Atomic { result, op, .. } => visit(LocalSpan {
                addr: result.addr,
                len: op.operand_bytes().into(),
                lkey: result.lkey,
            }),
        }
    }
    #[inline]
    fn control(&self) -> ControlTemplate {
        ControlTemplate {
            opmod: match self.op {
                AnyOperation::Atomic { op, .. } => op.opmod(),
                _ => 0,
            },
            flags: self.flags,
            stream_id: self.stream_id,
            imm: match self.op {
                AnyOperation::Write { imm: Some(imm), .. } => imm,
                _ => 0,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wqe::{
        AnyAddress, Compact, CompactAddressVector, Dc, Full, LKey, RKey, Rc, MAX_SEGMENT_BYTES,
    };

    #[test]
    fn fixed_shapes_have_the_documented_ds() {
        // The recipes of the mlx5 facts sheet, table 1.10.
        assert_eq!(RdmaWrite::<Rc, Gather<1>>::DS, 3);
        assert_eq!(RdmaWrite::<Rc, Gather<2>>::DS, 4);
        assert_eq!(RdmaWrite::<Rc, Empty>::DS, 2);
        assert_eq!(RdmaRead::<Rc, Gather<1>>::DS, 3);
        assert_eq!(RdmaWrite::<Dc<Full>, Gather<1>>::DS, 6);
        assert_eq!(RdmaWrite::<Dc<Compact>, Gather<1>>::DS, 4);
        assert_eq!(<Atomic<Rc> as FixedShape>::DS, 4);
        assert_eq!(<Atomic<Dc<Compact>> as FixedShape>::DS, 5);
        assert_eq!(<Atomic<Dc<Full>> as FixedShape>::DS, 7);
        assert_eq!(<Nop as FixedShape>::DS, 1);
        assert_eq!(<Dump as FixedShape>::DS, 2);
        assert_eq!(<RdmaWrite<Dc<Full>, Gather<1>> as FixedShape>::WQEBBS, 2);
    }

    /// The octowords the encoders compute in registers are the bytes of the zerocopy
    /// layouts pinned against `mlx5dv.h`, field for field.
    #[test]
    fn octoword_segments_are_the_layouts_bytes() {
        fn bytes(words: [u64; 2]) -> [u8; 16] {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&words[0].to_ne_bytes());
            b[8..].copy_from_slice(&words[1].to_ne_bytes());
            b
        }
        fn written(put: impl FnOnce(&mut WqeWriter<'_>)) -> [u8; 64] {
            let mut block = [0u8; 64];
            put(&mut WqeWriter::new(&mut block, &mut []));
            block
        }
        let sge = Sge::new(0x0102_0304_0506_0708, 0x1a2b_3c4d, LKey(0x5e6f_7081)).unwrap();
        let block = written(|w| put_sge(&sge, w));
        assert_eq!(block[..16], *data_segment(&sge).as_bytes());
        let remote = RemoteAddress::new(0x1122_3344_5566_7788, RKey(0x99aa_bbcc));
        let block = written(|w| put_remote(&remote, w));
        assert_eq!(block[..16], *remote_segment(&remote).as_bytes());
        // Every control field distinct and non-zero in every byte it owns.
        let wqe = RdmaWrite::new(remote)
            .inline(&[7; 3])
            .immediate(0xdead_beef)
            .fence(FenceMode::StrongOrdering)
            .solicited()
            .signaled()
            .build()
            .unwrap();
        let (index, qpn) = (WqeIndex(0xa55a), Qpn::new(0x00c3_3c5a).unwrap());
        let template = ControlTemplate {
            opmod: 0x81,
            stream_id: 0x1234,
            ..wqe.spec().control()
        };
        let expected = ControlSegment {
            opmod_idx_opcode: U32::new(
                0x81 << 24 | 0xa55a << 8 | u32::from(Opcode::RdmaWriteImm.byte()),
            ),
            qpn_ds: U32::new(0x00c3_3c5a << 8 | u32::from(wqe.ds())),
            signature: 0,
            dci_stream_channel_id: U16::new(0x1234),
            fm_ce_se: template.flags.byte(),
            imm: U32::new(0xdead_beef),
        };
        assert_eq!(
            bytes(wqe.control_octoword(template, index, qpn)),
            *expected.as_bytes()
        );
        assert_eq!(
            bytes(wqe.control_octoword(wqe.spec().control(), index, qpn)),
            *wqe.control_segment(index, qpn).as_bytes()
        );
    }

    /// The inline stream (header, payload, zeros to the octoword's end) for every payload
    /// length up to 64 bytes, against the header and the payload copied byte by byte.
    #[test]
    fn inline_octowords_carry_header_payload_and_zero_padding() {
        let source: Vec<u8> = (0..64u8)
            .map(|i| i.wrapping_mul(29).wrapping_add(3))
            .collect();
        for len in 1..=source.len() {
            let payload = &source[..len];
            let mut block = [0xeeu8; 128];
            let mut writer = WqeWriter::new(&mut block, &mut []);
            encode_inline(payload, &mut writer);
            let written = writer.position();
            assert_eq!(written, inline_octowords(len) * OCTOWORD_BYTES, "len {len}");
            let mut expected = vec![0u8; written];
            expected[..4].copy_from_slice(&(len as u32 | INLINE_SEGMENT_FLAG).to_be_bytes());
            expected[4..4 + len].copy_from_slice(payload);
            assert_eq!(block[..written], expected[..], "len {len}");
            assert!(block[written..].iter().all(|&b| b == 0xee), "len {len}");
        }
    }

    #[test]
    fn inline_sizes_follow_rdma_core_rounding() {
        assert_eq!(inline_octowords(0), 0);
        assert_eq!(inline_octowords(1), 1);
        assert_eq!(inline_octowords(12), 1);
        assert_eq!(inline_octowords(13), 2);
        assert_eq!(inline_octowords(28), 2);
        assert_eq!(inline_octowords(29), 3);
    }

    #[test]
    fn runtime_ds_matches_fixed_ds_for_every_fixed_shape() {
        let sge = Sge::new(0x1000, 8, LKey(1)).unwrap();
        let remote = RemoteAddress::new(0x2000, RKey(2));
        let target = CompactAddressVector {
            dct: 7,
            ..Default::default()
        }
        .encode()
        .unwrap();
        let w = RdmaWrite::new(target.at(remote)).sge(sge).build().unwrap();
        assert_eq!(w.ds(), RdmaWrite::<Dc<Compact>, Gather<1>>::DS);
        let a = Atomic::fetch_add(remote, LocalBuffer::new(0x3000, LKey(1)), 1)
            .build()
            .unwrap();
        assert_eq!(a.ds(), <Atomic<Rc> as FixedShape>::DS);
    }

    #[test]
    fn bad_values_are_typed_errors() {
        let remote = RemoteAddress::new(0x2004, RKey(2));
        let result = LocalBuffer::new(0, LKey(0));
        assert_eq!(
            Atomic::fetch_add(remote, result, 1).build().unwrap_err(),
            WqeError::MisalignedAtomic {
                opcode: Opcode::AtomicFetchAdd,
                addr: 0x2004,
                align: 8
            }
        );
        let remote = RemoteAddress::new(0x2000, RKey(2));
        let op = AtomicOp::MaskedFetchAdd {
            width: AtomicWidth::Four,
            add: 1 << 32,
            field_boundary: 0,
        };
        let four = Atomic::any(
            AnyAddress {
                target: None,
                remote,
            },
            result,
            op,
        );
        assert_eq!(
            four.build().unwrap_err(),
            WqeError::OperandTooWide {
                what: "add",
                value: 1 << 32,
                max: u32::MAX.into()
            }
        );
        let payload = [0u8; 1005];
        assert_eq!(
            RdmaWrite::new(remote).inline(&payload).build().unwrap_err(),
            WqeError::InlineTooLong {
                len: 1005,
                max: 1004
            }
        );
        // 1004 bytes fit the format's inline ceiling but not DS once ctrl and raddr count.
        let payload = [0u8; 1004];
        assert_eq!(
            RdmaWrite::new(remote).inline(&payload).build().unwrap_err(),
            WqeError::TooManyOctowords { ds: 65, max: 63 }
        );
        assert_eq!(
            Sge::new(0, 0, LKey(0)),
            Err(WqeError::ZeroLength {
                what: "scatter/gather entry"
            })
        );
        assert_eq!(
            Sge::new(0, 0x8000_0000, LKey(0)),
            Err(WqeError::TransferTooLong {
                len: 0x8000_0000,
                max: MAX_SEGMENT_BYTES
            })
        );
        let big = Sge::new(0, 0x7fff_ffff, LKey(0)).unwrap();
        assert_eq!(
            RdmaWrite::new(remote)
                .gather([big, big])
                .build()
                .unwrap_err(),
            WqeError::TransferTooLong {
                len: 0xffff_fffe,
                max: MAX_TRANSFER_BYTES
            }
        );
        let read = RdmaRead::new(AnyAddress {
            target: None,
            remote,
        })
        .any_data(AnyData::Inline(&[1]));
        assert!(matches!(
            read.build(),
            Err(WqeError::InvalidCombination { .. })
        ));
    }
}
