//! Connection information as plain values with a fixed, versioned byte encoding, and an
//! exchange of them over TCP.
//!
//! Any bootstrap (MPI, torch.distributed, a TCP socket, a file) can carry the bytes.
//! Every encoding starts with a 4-byte magic `IBGD`, a version byte and a kind byte; all
//! numbers are big-endian. Version 1:
//!
//! | kind | bytes | fields |
//! |---|---|---|
//! | 1, [`RcEndpoint`] | 36 | magic, version, kind, reserved (2), QPN (4), PSN (4), LID (2), MTU code, link layer (0 IB, 1 Ethernet), GID (16) |
//! | 2, [`DcEndpoint`] | 88 | magic, version, kind, reserved (2), DCT number (4), access key (8), LID (2), MTU code, link layer, GID (16), address vector (48) |
//! | 3, [`WindowEndpoint`](super::WindowEndpoint) | 32 | magic, version, kind, reserved (2), window id (4), rkey (4), address (8), length (8) |
//!
//! Decoding checks every field (24-bit numbers, the MTU code, the link layer, reserved
//! bytes zero) and the exact length: bytes that are not an endpoint are a typed
//! [`ConnectionError`], never a panic.

use core::fmt;
use std::io::{Read, Write};

use zerocopy::{FromBytes, IntoBytes};

use super::caps::{Gid, LinkLayer, Mtu};
use crate::wqe::segment::AddressVectorSegment;
use crate::wqe::{Compact, CompactAddressVector, DcTarget, Full, Qpn, WqeError};

/// The magic every encoding starts with.
pub const MAGIC: [u8; 4] = *b"IBGD";
/// The encoding version this crate writes and reads.
pub const VERSION: u8 = 1;
const KIND_RC: u8 = 1;
const KIND_DC: u8 = 2;
const HEADER: usize = 8;
/// The largest value of 24-bit numbers (QPN, DCT number, PSN).
const MAX_24: u32 = 0xff_ffff;

/// Why bytes are not connection information, or could not be exchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionError {
    /// The bytes have the wrong length for their kind.
    Length {
        /// Bytes given.
        len: usize,
        /// Bytes the kind has.
        expected: usize,
    },
    /// The bytes do not start with the magic.
    Magic {
        /// The first four bytes (as many as there were).
        found: [u8; 4],
    },
    /// A version this crate does not read.
    Version {
        /// The version byte.
        found: u8,
    },
    /// Another kind of endpoint than asked for.
    Kind {
        /// The kind byte.
        found: u8,
        /// The kind asked for.
        expected: u8,
    },
    /// A field out of its range.
    Field {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// A socket operation failed.
    Io {
        /// The operation.
        operation: &'static str,
        /// The error's kind.
        kind: std::io::ErrorKind,
    },
}

impl fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Length { len, expected } => {
                write!(f, "{len} bytes, but this endpoint encoding has {expected}")
            }
            Self::Magic { found } => write!(f, "bytes start with {found:02x?}, not \"IBGD\""),
            Self::Version { found } => {
                write!(
                    f,
                    "encoding version {found}; this build reads version {VERSION}"
                )
            }
            Self::Kind { found, expected } => {
                write!(f, "endpoint kind {found}, expected kind {expected}")
            }
            Self::Field { field, value, max } => {
                write!(f, "field {field} is {value:#x}, at most {max:#x}")
            }
            Self::Io { operation, kind } => write!(f, "{operation} failed: {kind}"),
        }
    }
}

impl std::error::Error for ConnectionError {}

fn field(field: &'static str, value: u64, max: u64) -> Result<(), ConnectionError> {
    if value > max {
        Err(ConnectionError::Field { field, value, max })
    } else {
        Ok(())
    }
}

/// Connection information with a fixed byte encoding.
pub trait Endpoint: Sized {
    /// The kind byte.
    const KIND: u8;
    /// The encoded length.
    const LEN: usize;
    /// The encoding (`LEN` bytes). Fails if a field is out of range.
    fn encode(&self) -> Result<Vec<u8>, ConnectionError>;
    /// Decodes `bytes` (exactly `LEN` of them), checking every field.
    fn decode(bytes: &[u8]) -> Result<Self, ConnectionError>;
}

pub(super) fn check_header(bytes: &[u8], kind: u8, len: usize) -> Result<(), ConnectionError> {
    let mut found = [0u8; 4];
    let head = bytes.len().min(4);
    found[..head].copy_from_slice(&bytes[..head]);
    if found != MAGIC {
        return Err(ConnectionError::Magic { found });
    }
    if bytes.len() < HEADER {
        return Err(ConnectionError::Length {
            len: bytes.len(),
            expected: len,
        });
    }
    if bytes[4] != VERSION {
        return Err(ConnectionError::Version { found: bytes[4] });
    }
    if bytes[5] != kind {
        return Err(ConnectionError::Kind {
            found: bytes[5],
            expected: kind,
        });
    }
    if bytes.len() != len {
        return Err(ConnectionError::Length {
            len: bytes.len(),
            expected: len,
        });
    }
    field(
        "reserved",
        u16::from_be_bytes([bytes[6], bytes[7]]).into(),
        0,
    )
}

pub(super) fn header(kind: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[VERSION, kind, 0, 0]);
    out
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn link_layer_code(link: LinkLayer) -> u8 {
    match link {
        LinkLayer::InfiniBand => 0,
        LinkLayer::Ethernet => 1,
    }
}

fn decode_link(code: u8) -> Result<LinkLayer, ConnectionError> {
    match code {
        0 => Ok(LinkLayer::InfiniBand),
        1 => Ok(LinkLayer::Ethernet),
        other => Err(ConnectionError::Field {
            field: "link_layer",
            value: other.into(),
            max: 1,
        }),
    }
}

fn decode_mtu(code: u8) -> Result<Mtu, ConnectionError> {
    Mtu::from_code(code).ok_or(ConnectionError::Field {
        field: "mtu",
        value: code.into(),
        max: Mtu::Mtu4096.code().into(),
    })
}

/// What a peer needs to connect an RC queue pair to this one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RcEndpoint {
    /// The queue pair number (24 bits).
    pub qpn: u32,
    /// The first packet sequence number it sends with (24 bits): the peer's expected PSN.
    pub psn: u32,
    /// The port's LID (InfiniBand).
    pub lid: u16,
    /// The port's active MTU.
    pub mtu: Mtu,
    /// The port's link layer.
    pub link_layer: LinkLayer,
    /// The GID (RoCE, or routed InfiniBand).
    pub gid: Gid,
}

impl Endpoint for RcEndpoint {
    const KIND: u8 = KIND_RC;
    const LEN: usize = 36;

    fn encode(&self) -> Result<Vec<u8>, ConnectionError> {
        field("qpn", self.qpn.into(), MAX_24.into())?;
        field("psn", self.psn.into(), MAX_24.into())?;
        let mut out = header(KIND_RC);
        out.extend_from_slice(&self.qpn.to_be_bytes());
        out.extend_from_slice(&self.psn.to_be_bytes());
        out.extend_from_slice(&self.lid.to_be_bytes());
        out.push(self.mtu.code());
        out.push(link_layer_code(self.link_layer));
        out.extend_from_slice(&self.gid.0);
        debug_assert_eq!(out.len(), Self::LEN);
        Ok(out)
    }

    fn decode(bytes: &[u8]) -> Result<Self, ConnectionError> {
        check_header(bytes, KIND_RC, Self::LEN)?;
        let qpn = be_u32(bytes, 8);
        let psn = be_u32(bytes, 12);
        field("qpn", qpn.into(), MAX_24.into())?;
        field("psn", psn.into(), MAX_24.into())?;
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&bytes[20..36]);
        Ok(Self {
            qpn,
            psn,
            lid: be_u16(bytes, 16),
            mtu: decode_mtu(bytes[18])?,
            link_layer: decode_link(bytes[19])?,
            gid: Gid(gid),
        })
    }
}

/// What an initiator needs to reach a DC target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcEndpoint {
    /// The DCT number (24 bits).
    pub dct: u32,
    /// The DC access key the target checks.
    pub access_key: u64,
    /// The port's LID (InfiniBand).
    pub lid: u16,
    /// The port's active MTU.
    pub mtu: Mtu,
    /// The port's link layer.
    pub link_layer: LinkLayer,
    /// The port's GID.
    pub gid: Gid,
    /// The full address vector to reach the target (the 48 bytes an address handle gives,
    /// without the DCT number and key, which [`DcEndpoint::full_target`] patches in).
    pub address_vector: AddressVectorSegment,
}

impl DcEndpoint {
    /// The target as a full (48-byte) address vector, with the DCT number, the extended
    /// flag and the access key set.
    pub fn full_target(&self) -> Result<DcTarget<Full>, WqeError> {
        Ok(DcTarget::from_hardware_av(
            self.address_vector,
            Qpn::new(self.dct)?,
            self.access_key,
        ))
    }

    /// The target as a compact (16-byte) address vector: InfiniBand, LID-routed, no GRH.
    /// Only for devices with `compact_address_vector` and an InfiniBand link.
    pub fn compact_target(&self) -> Result<DcTarget<Compact>, WqeError> {
        if self.link_layer != LinkLayer::InfiniBand {
            return Err(WqeError::FieldOutOfRange {
                field: "link_layer (compact AV needs InfiniBand)",
                value: 1,
                max: 0,
            });
        }
        CompactAddressVector {
            dct: self.dct,
            dc_key: self.access_key,
            lid: self.lid,
            ..Default::default()
        }
        .encode()
    }
}

impl Endpoint for DcEndpoint {
    const KIND: u8 = KIND_DC;
    const LEN: usize = 88;

    fn encode(&self) -> Result<Vec<u8>, ConnectionError> {
        field("dct", self.dct.into(), MAX_24.into())?;
        let mut out = header(KIND_DC);
        out.extend_from_slice(&self.dct.to_be_bytes());
        out.extend_from_slice(&self.access_key.to_be_bytes());
        out.extend_from_slice(&self.lid.to_be_bytes());
        out.push(self.mtu.code());
        out.push(link_layer_code(self.link_layer));
        out.extend_from_slice(&self.gid.0);
        out.extend_from_slice(self.address_vector.as_bytes());
        debug_assert_eq!(out.len(), Self::LEN);
        Ok(out)
    }

    fn decode(bytes: &[u8]) -> Result<Self, ConnectionError> {
        check_header(bytes, KIND_DC, Self::LEN)?;
        let dct = be_u32(bytes, 8);
        field("dct", dct.into(), MAX_24.into())?;
        let mut key = [0u8; 8];
        key.copy_from_slice(&bytes[12..20]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&bytes[24..40]);
        let address_vector =
            AddressVectorSegment::read_from_bytes(&bytes[40..88]).map_err(|_| {
                ConnectionError::Length {
                    len: bytes.len(),
                    expected: Self::LEN,
                }
            })?;
        Ok(Self {
            dct,
            access_key: u64::from_be_bytes(key),
            lid: be_u16(bytes, 20),
            mtu: decode_mtu(bytes[22])?,
            link_layer: decode_link(bytes[23])?,
            gid: Gid(gid),
            address_vector,
        })
    }
}

/// The largest encoding any endpoint has (the frame limit of [`exchange`]).
pub const MAX_ENCODED: usize = 256;

fn io(operation: &'static str) -> impl Fn(std::io::Error) -> ConnectionError {
    move |e| ConnectionError::Io {
        operation,
        kind: e.kind(),
    }
}

/// Sends `local` over `stream` and receives the peer's endpoint of the same kind. Each side
/// writes a 2-byte big-endian length and the encoding, then reads the peer's; both sides
/// may call it at once (the frames fit in any socket buffer).
///
/// ```
/// use std::net::{TcpListener, TcpStream};
/// use ibgda::nic::{connection, Gid, LinkLayer, Mtu, RcEndpoint};
/// let listener = TcpListener::bind("127.0.0.1:0")?;
/// let addr = listener.local_addr()?;
/// let ep = |qpn| RcEndpoint { qpn, psn: 7, lid: 1, mtu: Mtu::Mtu4096,
///                             link_layer: LinkLayer::InfiniBand, gid: Gid::default() };
/// let peer = std::thread::spawn(move || {
///     let (mut s, _) = listener.accept().unwrap();
///     connection::exchange(&mut s, &ep(0x200)).unwrap()
/// });
/// let mut s = TcpStream::connect(addr)?;
/// assert_eq!(connection::exchange(&mut s, &ep(0x100))?.qpn, 0x200);
/// assert_eq!(peer.join().unwrap().qpn, 0x100);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn exchange<E: Endpoint, S: Read + Write>(
    stream: &mut S,
    local: &E,
) -> Result<E, ConnectionError> {
    let bytes = local.encode()?;
    let mut frame = Vec::with_capacity(bytes.len() + 2);
    // Encodings are at most MAX_ENCODED bytes, so the length fits in two bytes.
    frame.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
    frame.extend_from_slice(&bytes);
    stream.write_all(&frame).map_err(io("send endpoint"))?;
    stream.flush().map_err(io("send endpoint"))?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).map_err(io("receive length"))?;
    let len = usize::from(u16::from_be_bytes(len));
    if len > MAX_ENCODED {
        return Err(ConnectionError::Field {
            field: "frame length",
            value: len as u64,
            max: MAX_ENCODED as u64,
        });
    }
    let mut peer = vec![0u8; len];
    stream
        .read_exact(&mut peer)
        .map_err(io("receive endpoint"))?;
    E::decode(&peer)
}
