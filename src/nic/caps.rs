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
    /// log2 of the largest message in bytes (`log_max_msg`): INIT2RTR's `log_msg_max` may
    /// not exceed it.
    pub log_max_msg: u8,
    /// log2 of the RDMA reads and atomics an RC queue pair may have outstanding as
    /// requester (`log_max_ra_req_qp`): RTR2RTS's `log_sra_max` may not exceed it.
    pub log_max_ra_req_qp: u8,
    /// log2 of the RDMA reads and atomics an RC queue pair may serve at once as responder
    /// (`log_max_ra_res_qp`): INIT2RTR's `log_rra_max` may not exceed it.
    pub log_max_ra_res_qp: u8,
    /// The same for a DC initiator as requester (`log_max_ra_req_dc`).
    pub log_max_ra_req_dc: u8,
    /// The same for a DC target as responder (`log_max_ra_res_dc`).
    pub log_max_ra_res_dc: u8,
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

impl Gid {
    /// The RoCE GID of an IPv4 address: the IPv4-mapped IPv6 address `::ffff:a.b.c.d`.
    pub const fn from_ipv4(address: [u8; 4]) -> Self {
        let [a, b, c, d] = address;
        Self([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d])
    }

    /// The link-local GID of an interface with MAC `mac` (`fe80::/64` with the modified
    /// EUI-64 interface id: the universal/local bit flipped, `ff:fe` in the middle), the
    /// GID the kernel puts at index 0 of every RoCE port.
    pub const fn link_local(mac: [u8; 6]) -> Self {
        let [m0, m1, m2, m3, m4, m5] = mac;
        Self([
            0xfe,
            0x80,
            0,
            0,
            0,
            0,
            0,
            0,
            m0 ^ 2,
            m1,
            m2,
            0xff,
            0xfe,
            m3,
            m4,
            m5,
        ])
    }

    /// Whether every byte is zero (an unpopulated GID table entry).
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    /// Whether it is an IPv4-mapped address (`::ffff:0:0/96`).
    pub fn is_ipv4_mapped(&self) -> bool {
        self.0[..10] == [0; 10] && self.0[10..12] == [0xff, 0xff]
    }

    /// Whether it is link-local: `fe80::/10`, or for an IPv4-mapped GID `169.254.0.0/16`
    /// (the scopes perftest's GID choice calls link-local).
    pub fn is_link_local(&self) -> bool {
        if self.is_ipv4_mapped() {
            self.0[12] == 169 && self.0[13] == 254
        } else {
            self.0[0] == 0xfe && self.0[1] & 0xc0 == 0x80
        }
    }

    /// Whether it is a multicast address (`ff00::/8`, or IPv4 `224.0.0.0/4`).
    pub fn is_multicast(&self) -> bool {
        if self.is_ipv4_mapped() {
            self.0[12] & 0xf0 == 0xe0
        } else {
            self.0[0] == 0xff
        }
    }
}

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

/// What a GID table entry is for (verbs' `ibv_gid_type`; rdma-core's sysfs file
/// `ports/<port>/gid_attrs/types/<index>` shows `IB/RoCE v1` or `RoCE v2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GidType {
    /// An InfiniBand GID.
    InfiniBand,
    /// A RoCE v1 GID: the GRH travels directly in an Ethernet frame (ethertype 0x8915).
    RoceV1,
    /// A RoCE v2 GID: the packet travels in UDP (port 4791) over IPv4 or IPv6, routable.
    RoceV2,
}

impl GidType {
    /// The text rdma-core's sysfs shows for entries of this type.
    pub const fn sysfs_name(self) -> &'static str {
        match self {
            Self::InfiniBand | Self::RoceV1 => "IB/RoCE v1",
            Self::RoceV2 => "RoCE v2",
        }
    }
}

/// One entry of a port's GID table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GidEntry {
    /// The GID (zero where the entry is not populated).
    pub gid: Gid,
    /// Its type.
    pub kind: GidType,
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
    /// The GID table (position = GID index).
    pub gids: Vec<GidEntry>,
}

impl PortAttributes {
    /// The GID this port's queues send from and advertise, with its table index: on
    /// InfiniBand the entry at index 0 (the port GID); on Ethernet the RoCE v2 entry
    /// perftest would choose (see [`roce_v2_source`](Self::roce_v2_source)).
    pub fn source_gid(&self) -> Option<(u8, Gid)> {
        match self.link_layer {
            LinkLayer::InfiniBand => {
                Some((0, self.gids.first().map(|e| e.gid).unwrap_or_default()))
            }
            LinkLayer::Ethernet => self.roce_v2_source(),
        }
    }

    /// The RoCE v2 GID to send from, as perftest chooses a GID when given none
    /// (`get_best_gid_index` in `perftest_communication.c`: an address of the preferred
    /// family, IPv4 by default, first, then one that is not link-local, then RoCE v2 over
    /// v1; the lowest index among equals), among RoCE v2 entries only. rdma-core's own
    /// `ibv_rc_pingpong` chooses nothing (on RoCE its `-g` index must be given); NVSHMEM and
    /// NCCL (`ib_get_gid_index`, defaults `IB_ROCE_VERSION_NUM=2` and address family IPv4)
    /// land on the same entry of a table the kernel filled. `None` when the port has no
    /// populated RoCE v2 entry (or none whose index fits a GID index byte).
    pub fn roce_v2_source(&self) -> Option<(u8, Gid)> {
        let score = |gid: &Gid| {
            100 * u32::from(gid.is_ipv4_mapped()) + 10 * u32::from(!gid.is_link_local())
        };
        let mut best: Option<(u32, u8, Gid)> = None;
        for (index, entry) in self.gids.iter().enumerate() {
            let Ok(index) = u8::try_from(index) else {
                break;
            };
            if entry.kind != GidType::RoceV2 || entry.gid.is_zero() {
                continue;
            }
            let s = score(&entry.gid);
            if best.is_none_or(|(b, _, _)| s > b) {
                best = Some((s, index, entry.gid));
            }
        }
        best.map(|(_, index, gid)| (index, gid))
    }
}
