//! What a device and its ports can do: the HCA capabilities that matter to queues, and
//! the port attributes that matter to connections.

use core::fmt;

/// How the NIC orders the bytes of an 8-byte atomic's operand and result
/// (`atomic_req_8B_endianness_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicEndianness {
    /// Network order (big-endian), as InfiniBand defines atomics: mode 0.
    BigEndian,
    /// The host's order: mode 1.
    HostEndian,
}

/// The HCA capabilities queues depend on (from QUERY_HCA_CAP, general and atomic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCaps {
    /// CQE format version; this crate's CQE views are version 1 (`cqe_version`).
    pub cqe_version: u8,
    /// Whether DC WQEs may carry the 16-byte compact address vector
    /// (`compact_address_vector`).
    pub compact_address_vector: bool,
    /// log2 of the largest send queue in WQEBBs (`log_max_qp_sz`).
    pub log_max_qp_size: u8,
    /// log2 of the largest CQ in entries (`log_max_cq_sz`).
    pub log_max_cq_size: u8,
    /// The largest send WQE in bytes (`max_wqe_sz_sq`); inline data is bounded by it.
    pub max_send_wqe_bytes: u16,
    /// Whether RDMA atomics are supported (`atomic`).
    pub atomic: bool,
    /// Whether the InfiniBand atomics, compare-swap and fetch-add, are supported (bits 0
    /// and 1 of `atomic_operations`).
    pub standard_atomics: bool,
    /// Whether masked compare-swap and masked fetch-add, the extended atomics, are
    /// supported (bits 2 and 3 of `atomic_operations`).
    pub masked_atomics: bool,
    /// Operand sizes the QP supports for atomics, as a bitmask of bytes (`atomic_size_qp`:
    /// bit 2 = 4 bytes, bit 3 = 8 bytes).
    pub atomic_sizes: u16,
    /// Operand sizes DC supports for atomics (`atomic_size_dc`, the same encoding).
    pub atomic_sizes_dc: u16,
    /// The 8-byte atomic endianness mode.
    pub atomic_endianness: AtomicEndianness,
    /// Whether DC transport is supported (`dct`).
    pub dc: bool,
    /// log2 of the BlueFlame register size (`log_bf_reg_size`).
    pub log_bf_reg_size: u8,
}

impl DeviceCaps {
    /// The largest inline payload a WQE of one control segment, one remote address segment
    /// and an inline segment header can carry.
    pub fn max_inline(&self) -> usize {
        // ctrl (16) + raddr (16) + inline header (4)
        usize::from(self.max_send_wqe_bytes).saturating_sub(36)
    }
}

/// The MTU of a path (`IBV_MTU_*` values, also the PRM `mtu` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl Mtu {
    /// The MTU with PRM/verbs code `code`, if it is one.
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => Self::Mtu256,
            2 => Self::Mtu512,
            3 => Self::Mtu1024,
            4 => Self::Mtu2048,
            5 => Self::Mtu4096,
            _ => return None,
        })
    }
    /// The code.
    pub fn code(self) -> u8 {
        self as u8
    }
    /// The size in bytes.
    pub fn bytes(self) -> u32 {
        128 << self.code()
    }
}

/// The link layer of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkLayer {
    /// InfiniBand: paths by LID.
    InfiniBand,
    /// Ethernet (RoCE): paths by GID.
    Ethernet,
}

/// A 16-byte GID.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Gid(pub [u8; 16]);

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", pair[0], pair[1])?;
        }
        Ok(())
    }
}

/// The attributes of one port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortAttributes {
    /// The port number (1-based).
    pub port: u8,
    /// Its LID (InfiniBand).
    pub lid: u16,
    /// The active MTU.
    pub mtu: Mtu,
    /// The link layer.
    pub link_layer: LinkLayer,
    /// The GID table (index = GID index).
    pub gids: Vec<Gid>,
}
