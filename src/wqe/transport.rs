//! Transports (RC, DC with either address-vector form) and the DC target a DC WQE carries.
//!
//! A DC WQE names its target in an address-vector segment right after the control segment;
//! an RC WQE never carries one. The transport is a type parameter of every builder, so a DC
//! WQE without a target, or an RC WQE with one, does not compile:
//!
//! ```compile_fail,E0271
//! use ibgda::wqe::{Dc, Compact, RdmaWrite, RemoteAddress, RKey};
//! // A DC write goes to a DcAddress (target and remote memory), not a bare RemoteAddress.
//! let _ = RdmaWrite::<Dc<Compact>>::new(RemoteAddress::new(0x1000, RKey(1)));
//! ```
//!
//! ```compile_fail,E0271
//! use ibgda::wqe::{CompactAddressVector, RdmaWrite, Rc, RemoteAddress, RKey};
//! let target = CompactAddressVector::default().encode().unwrap();
//! // An RC write cannot carry a target.
//! let _ = RdmaWrite::<Rc>::new(target.at(RemoteAddress::new(0x1000, RKey(1))));
//! ```

use core::fmt;
use core::marker::PhantomData;

use zerocopy::byteorder::big_endian::{U16, U32, U64};
use zerocopy::IntoBytes;

use super::address::{Qpn, RemoteAddress};
use super::error::WqeError;
use super::ring::WqeWriter;
use super::segment::{AddressVectorSegment, CompactAddressVectorSegment, EXTENDED_AV_FLAG};

mod sealed {
    pub trait Sealed {}
}
pub(crate) use sealed::Sealed;

/// The transport kind of a queue, known at run time (what the parser needs to know).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransportKind {
    /// Reliable connection: no address vector.
    Rc,
    /// Dynamically connected initiator: every RDMA or atomic WQE carries an address vector.
    Dc,
}

/// A transport: a type parameter of WQE builders and queues. Sealed.
pub trait Transport: Sealed + Copy + fmt::Debug + 'static {
    /// What a WQE of this transport carries to name its target: `()` for RC.
    type Target: Copy + fmt::Debug + PartialEq;

    /// Octowords the target occupies.
    fn target_ds(target: &Self::Target) -> usize;
    /// Writes the target's segment.
    fn encode_target(target: &Self::Target, writer: &mut WqeWriter<'_>);
    /// The transport kind, where the target tells it.
    fn kind_of(target: &Self::Target) -> TransportKind;
    /// The target as a run-time value (`None` on RC).
    fn erase_target(target: &Self::Target) -> Option<AnyDcTarget>;
}

/// A transport whose WQE shapes are fixed by its type: the DS of its target is a constant.
pub trait TypedTransport: Transport {
    /// The transport kind.
    const KIND: TransportKind;
    /// Octowords the target occupies (0 for RC, 1 for the compact AV, 3 for the full AV).
    const TARGET_DS: usize;
}

/// Reliable connection: the QP is connected to one remote QP; WQEs carry no address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rc;

/// Dynamically connected initiator, with address vectors of form `Av` ([`Compact`] or
/// [`Full`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Dc<Av: AvForm>(PhantomData<Av>);

/// A form of DC address vector. Sealed: [`Compact`] (16 B) or [`Full`] (48 B).
pub trait AvForm: Sealed + Copy + fmt::Debug + Default + PartialEq + Eq + 'static {
    /// The wire segment.
    type Segment: IntoBytes + zerocopy::Immutable + Copy + fmt::Debug + PartialEq + Eq;
    /// Octowords of the segment.
    const DS: usize;
    /// The segment as a target of either form.
    fn erase(segment: &Self::Segment) -> AnyDcTarget;
}

/// The compact 16-byte address vector (extended flag clear).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Compact;
/// The full 48-byte address vector (extended flag set), which every DC-capable HCA accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Full;

impl Sealed for Compact {}
impl Sealed for Full {}
impl AvForm for Compact {
    type Segment = CompactAddressVectorSegment;
    const DS: usize = 1;
    fn erase(segment: &Self::Segment) -> AnyDcTarget {
        AnyDcTarget::Compact(*segment)
    }
}
impl AvForm for Full {
    type Segment = AddressVectorSegment;
    const DS: usize = 3;
    fn erase(segment: &Self::Segment) -> AnyDcTarget {
        AnyDcTarget::Full(*segment)
    }
}

/// A validated DC target: the encoded address-vector segment of form `Av`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcTarget<Av: AvForm> {
    segment: Av::Segment,
}

impl<Av: AvForm> DcTarget<Av> {
    /// The encoded segment.
    pub fn segment(&self) -> &Av::Segment {
        &self.segment
    }
}

/// A DC target of either form, for code that chooses at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnyDcTarget {
    /// Compact 16-byte form.
    Compact(CompactAddressVectorSegment),
    /// Full 48-byte form.
    Full(AddressVectorSegment),
}

impl AnyDcTarget {
    /// Checks that the segment is the form its variant names, as the parser and the NIC
    /// read it: the extended flag (bit 31 of `dqp_dct`) clear on the compact form and set
    /// on the full form, and bits 30:24 clear. The encoders always produce such segments;
    /// raw segments put into this enum may not, and `build()` refuses them.
    pub fn validate(&self) -> Result<(), WqeError> {
        let (dqp_dct, extended) = match self {
            Self::Compact(s) => (s.dqp_dct.get(), false),
            Self::Full(s) => (s.dqp_dct.get(), true),
        };
        if (dqp_dct & EXTENDED_AV_FLAG != 0) != extended {
            return Err(WqeError::InvalidCombination {
                what: if extended {
                    "a full address vector without the extended flag"
                } else {
                    "a compact address vector with the extended flag"
                },
            });
        }
        let reserved = dqp_dct & 0x7f00_0000;
        if reserved != 0 {
            return Err(WqeError::FieldOutOfRange {
                field: "dqp_dct bits 30:24",
                value: reserved.into(),
                max: 0,
            });
        }
        Ok(())
    }
    /// Octowords of the segment.
    pub const fn ds(&self) -> usize {
        match self {
            Self::Compact(_) => Compact::DS,
            Self::Full(_) => Full::DS,
        }
    }
    /// The target DCT number.
    pub fn dct(&self) -> u32 {
        match self {
            Self::Compact(s) => s.dqp_dct.get() & Qpn::MAX,
            Self::Full(s) => s.dqp_dct.get() & Qpn::MAX,
        }
    }
    /// The DC access key.
    pub fn dc_key(&self) -> u64 {
        match self {
            Self::Compact(s) => s.dc_key.get(),
            Self::Full(s) => s.dc_key.get(),
        }
    }
}

impl From<DcTarget<Compact>> for AnyDcTarget {
    fn from(t: DcTarget<Compact>) -> Self {
        Self::Compact(t.segment)
    }
}
impl From<DcTarget<Full>> for AnyDcTarget {
    fn from(t: DcTarget<Full>) -> Self {
        Self::Full(t.segment)
    }
}

fn check_field(field: &'static str, value: u64, max: u64) -> Result<(), WqeError> {
    if value > max {
        Err(WqeError::FieldOutOfRange { field, value, max })
    } else {
        Ok(())
    }
}

/// The fields of a compact (16-byte) DC address vector: InfiniBand, LID-routed, no GRH.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CompactAddressVector {
    /// The remote DCT number.
    pub dct: u32,
    /// The DC access key the DCT was created with.
    pub dc_key: u64,
    /// Destination LID.
    pub lid: u16,
    /// Service level (4 bits).
    pub sl: u8,
    /// Static rate code (4 bits; 0 = port rate).
    pub static_rate: u8,
    /// Source path bits (7 bits).
    pub source_path_bits: u8,
    /// Force loopback.
    pub force_loopback: bool,
}

impl CompactAddressVector {
    /// Validates the fields and encodes the segment.
    pub fn encode(&self) -> Result<DcTarget<Compact>, WqeError> {
        let dct = Qpn::new(self.dct)?;
        check_field("sl", self.sl.into(), 0xf)?;
        check_field("static_rate", self.static_rate.into(), 0xf)?;
        check_field("source_path_bits", self.source_path_bits.into(), 0x7f)?;
        Ok(DcTarget {
            segment: CompactAddressVectorSegment {
                dc_key: U64::new(self.dc_key),
                dqp_dct: U32::new(dct.get()),
                stat_rate_sl: self.static_rate << 4 | self.sl,
                fl_mlid: u8::from(self.force_loopback) << 7 | self.source_path_bits,
                rlid: U16::new(self.lid),
            },
        })
    }
}

/// The global route header fields of a full address vector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Grh {
    /// Index of the source GID in the port's GID table.
    pub sgid_index: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Traffic class.
    pub traffic_class: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Destination GID.
    pub dgid: [u8; 16],
}

/// The link-layer part of a full address vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkAddress {
    /// InfiniBand: LID-routed, with an optional GRH.
    InfiniBand {
        /// Destination LID.
        lid: u16,
        /// Service level (4 bits).
        sl: u8,
        /// Static rate code (4 bits).
        static_rate: u8,
        /// Source path bits (7 bits).
        source_path_bits: u8,
        /// Force loopback.
        force_loopback: bool,
        /// Global route header, for routed (GID-addressed) subnets.
        grh: Option<Grh>,
    },
    /// RoCE v2: GID-addressed; the LID field carries the UDP source port.
    Roce {
        /// UDP source port.
        udp_source_port: u16,
        /// Service level (3 bits on RoCE).
        sl: u8,
        /// Static rate code (4 bits).
        static_rate: u8,
        /// Destination MAC.
        mac: [u8; 6],
        /// Global route header (always present on RoCE).
        grh: Grh,
    },
}

/// The fields of a full (48-byte) DC address vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FullAddressVector {
    /// The remote DCT number.
    pub dct: u32,
    /// The DC access key the DCT was created with.
    pub dc_key: u64,
    /// The link-layer address.
    pub link: LinkAddress,
}

impl FullAddressVector {
    /// Validates the fields and encodes the segment, as rdma-core's `mlx5_create_ah` and
    /// `mlx5dv_wr_set_dc_addr` lay it out.
    pub fn encode(&self) -> Result<DcTarget<Full>, WqeError> {
        let dct = Qpn::new(self.dct)?;
        let mut seg = AddressVectorSegment {
            dc_key: U64::new(self.dc_key),
            dqp_dct: U32::new(dct.get() | EXTENDED_AV_FLAG),
            ..Default::default()
        };
        let encode_grh = |seg: &mut AddressVectorSegment, grh: &Grh, present_bit: u32| {
            check_field("flow_label", grh.flow_label.into(), 0xf_ffff)?;
            seg.tclass = grh.traffic_class;
            seg.hop_limit = grh.hop_limit;
            seg.grh_gid_fl =
                U32::new(present_bit << 30 | u32::from(grh.sgid_index) << 20 | grh.flow_label);
            seg.rgid = grh.dgid;
            Ok::<(), WqeError>(())
        };
        match &self.link {
            LinkAddress::InfiniBand {
                lid,
                sl,
                static_rate,
                source_path_bits,
                force_loopback,
                grh,
            } => {
                check_field("sl", (*sl).into(), 0xf)?;
                check_field("static_rate", (*static_rate).into(), 0xf)?;
                check_field("source_path_bits", (*source_path_bits).into(), 0x7f)?;
                seg.stat_rate_sl = static_rate << 4 | sl;
                seg.fl_mlid = u8::from(*force_loopback) << 7 | source_path_bits;
                seg.rlid = U16::new(*lid);
                if let Some(grh) = grh {
                    encode_grh(&mut seg, grh, 1)?;
                }
            }
            LinkAddress::Roce {
                udp_source_port,
                sl,
                static_rate,
                mac,
                grh,
            } => {
                check_field("sl", (*sl).into(), 0x7)?;
                check_field("static_rate", (*static_rate).into(), 0xf)?;
                seg.stat_rate_sl = static_rate << 4 | sl << 1;
                seg.rlid = U16::new(*udp_source_port);
                seg.rmac = *mac;
                encode_grh(&mut seg, grh, 0)?;
            }
        }
        Ok(DcTarget { segment: seg })
    }
}

impl DcTarget<Full> {
    /// A target from an address vector the hardware control plane produced (the 48 bytes
    /// of `mlx5dv_ah.av`), patched with the DCT number, the extended flag and the access
    /// key, as `mlx5dv_wr_set_dc_addr` does.
    pub fn from_hardware_av(av: AddressVectorSegment, dct: Qpn, dc_key: u64) -> Self {
        let mut segment = av;
        segment.dqp_dct = U32::new(av.dqp_dct.get() | dct.get() | EXTENDED_AV_FLAG);
        segment.dc_key = U64::new(dc_key);
        Self { segment }
    }
}

/// Transports whose WQEs may carry a DCI stream id.
pub trait DciTransport: Transport {}
impl<Av: AvForm> DciTransport for Dc<Av> {}

/// Where an RDMA or atomic WQE goes: a [`RemoteAddress`] on RC, a [`DcAddress`] (target
/// and remote address) on DC, an [`AnyAddress`] when chosen at run time. The builders'
/// `new` takes one, and the destination decides the builder's transport.
pub trait Destination: Copy {
    /// The transport this destination belongs to.
    type Transport: Transport;
    /// The target part and the remote address.
    fn split(self) -> (<Self::Transport as Transport>::Target, RemoteAddress);
}

impl Destination for RemoteAddress {
    type Transport = Rc;
    fn split(self) -> ((), RemoteAddress) {
        ((), self)
    }
}

/// A DC destination: the DCT (with its address vector) and remote memory behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcAddress<Av: AvForm> {
    /// The target DCT.
    pub target: DcTarget<Av>,
    /// Remote memory at that target.
    pub remote: RemoteAddress,
}

impl<Av: AvForm> DcTarget<Av> {
    /// Remote memory `remote` at this target.
    pub fn at(self, remote: RemoteAddress) -> DcAddress<Av> {
        DcAddress {
            target: self,
            remote,
        }
    }
}

impl<Av: AvForm> Destination for DcAddress<Av> {
    type Transport = Dc<Av>;
    fn split(self) -> (DcTarget<Av>, RemoteAddress) {
        (self.target, self.remote)
    }
}

/// A destination whose transport is chosen at run time: no target for RC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnyAddress {
    /// The DC target, or `None` on RC.
    pub target: Option<AnyDcTarget>,
    /// Remote memory.
    pub remote: RemoteAddress,
}

impl Destination for AnyAddress {
    type Transport = AnyTransport;
    fn split(self) -> (Option<AnyDcTarget>, RemoteAddress) {
        (self.target, self.remote)
    }
}

impl Sealed for Rc {}
impl<Av: AvForm> Sealed for Dc<Av> {}

impl Transport for Rc {
    type Target = ();
    #[inline]
    fn target_ds(_: &()) -> usize {
        0
    }
    #[inline(always)]
    fn encode_target(_: &(), _: &mut WqeWriter<'_>) {}
    fn kind_of(_: &()) -> TransportKind {
        TransportKind::Rc
    }
    #[inline]
    fn erase_target(_: &()) -> Option<AnyDcTarget> {
        None
    }
}
impl TypedTransport for Rc {
    const KIND: TransportKind = TransportKind::Rc;
    const TARGET_DS: usize = 0;
}

impl<Av: AvForm> Transport for Dc<Av> {
    type Target = DcTarget<Av>;
    #[inline]
    fn target_ds(_: &DcTarget<Av>) -> usize {
        Av::DS
    }
    #[inline]
    fn encode_target(target: &DcTarget<Av>, writer: &mut WqeWriter<'_>) {
        writer.put(target.segment.as_bytes());
    }
    fn kind_of(_: &DcTarget<Av>) -> TransportKind {
        TransportKind::Dc
    }
    #[inline]
    fn erase_target(target: &DcTarget<Av>) -> Option<AnyDcTarget> {
        Some(Av::erase(&target.segment))
    }
}
impl<Av: AvForm> TypedTransport for Dc<Av> {
    const KIND: TransportKind = TransportKind::Dc;
    const TARGET_DS: usize = Av::DS;
}

/// The erased transport: the target (or its absence) is chosen at run time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AnyTransport;

impl Sealed for AnyTransport {}
impl Transport for AnyTransport {
    type Target = Option<AnyDcTarget>;
    #[inline]
    fn target_ds(target: &Option<AnyDcTarget>) -> usize {
        target.as_ref().map_or(0, AnyDcTarget::ds)
    }
    #[inline]
    fn encode_target(target: &Option<AnyDcTarget>, writer: &mut WqeWriter<'_>) {
        match target {
            None => {}
            Some(AnyDcTarget::Compact(s)) => writer.put(s.as_bytes()),
            Some(AnyDcTarget::Full(s)) => writer.put(s.as_bytes()),
        }
    }
    fn kind_of(target: &Option<AnyDcTarget>) -> TransportKind {
        if target.is_some() {
            TransportKind::Dc
        } else {
            TransportKind::Rc
        }
    }
    #[inline]
    fn erase_target(target: &Option<AnyDcTarget>) -> Option<AnyDcTarget> {
        *target
    }
}
