//! RoCE v2 addressing: the UDP source port of a connection, and the destination MAC of a
//! link-local GID.
//!
//! A RoCE v2 packet is a UDP datagram to port 4791; its *source* port is free, and
//! switches hash it (with the addresses) to pick one of several equal-cost paths (ECMP).
//! Linux's RDMA drivers derive it from the GRH flow label, and a connection without one
//! gets a flow label hashed from its two QPNs (`rdma_calc_flow_label` and
//! `rdma_flow_label_to_udp_sport` in `include/rdma/ib_verbs.h`, which the kernel asks every
//! RoCE v2 driver to follow; rdma-core's `ibv_flow_label_to_udp_sport` is the same
//! conversion). The control plane does the same for each RC queue pair it connects, unless
//! told to use a fixed port ([`UdpSourcePort::Fixed`]; NVSHMEM uses 49152 for every queue
//! pair).

use core::fmt;
use core::ops::RangeInclusive;

use super::caps::{Gid, GidEntry, GidType};

/// The UDP source ports RoCE v2 uses (`IB_ROCE_UDP_ENCAP_VALID_PORT_MIN` to `_MAX`).
pub const UDP_SOURCE_PORTS: RangeInclusive<u16> = 0xc000..=0xffff;

/// The 20-bit flow label of a connection between queue pairs `local_qpn` and `remote_qpn`
/// that has none of its own, as Linux computes it (`rdma_calc_flow_label`): the product of
/// the two numbers folded to 20 bits, the same at both ends.
pub const fn flow_label(local_qpn: u32, remote_qpn: u32) -> u32 {
    let mut v = local_qpn as u64 * remote_qpn as u64;
    v ^= v >> 20;
    v ^= v >> 40;
    (v & 0xf_ffff) as u32
}

/// The RoCE v2 UDP source port of flow label `flow_label` (`rdma_flow_label_to_udp_sport`,
/// rdma-core's `ibv_flow_label_to_udp_sport`): its low 14 bits, XOR its high 6, in
/// [`UDP_SOURCE_PORTS`].
pub const fn udp_source_port(flow_label: u32) -> u16 {
    let low = flow_label & 0x3fff;
    let high = flow_label & 0xf_c000;
    ((low ^ (high >> 14)) | *UDP_SOURCE_PORTS.start() as u32) as u16
}

/// How an RC queue pair on a RoCE v2 port chooses its UDP source port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum UdpSourcePort {
    /// Hashed from the two QPNs as Linux does ([`flow_label`], [`udp_source_port`]), so
    /// that the queue pairs between two hosts spread over the fabric's equal-cost paths.
    #[default]
    Spread,
    /// This port for the queue pair, in [`UDP_SOURCE_PORTS`] (all on one path if every
    /// queue pair uses the same, as NVSHMEM's 49152 does).
    Fixed(u16),
}

impl UdpSourcePort {
    /// The port for the connection of `local_qpn` to `remote_qpn`.
    pub fn for_connection(self, local_qpn: u32, remote_qpn: u32) -> u16 {
        match self {
            Self::Spread => udp_source_port(flow_label(local_qpn, remote_qpn)),
            Self::Fixed(port) => port,
        }
    }
}

impl fmt::Display for UdpSourcePort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Spread => f.write_str("spread (hashed from the QPNs)"),
            Self::Fixed(port) => write!(f, "fixed {port}"),
        }
    }
}

/// The MAC of the interface a link-local GID (`fe80::/64`, modified EUI-64 interface id)
/// belongs to: the reverse of [`Gid::link_local`], as rdma-core's address resolution
/// (`get_link_local_mac_ipv6` in `libibverbs/neigh.c`) and the kernel's
/// (`rdma_get_ll_mac`) derive it without asking the network. `None` for other GIDs, whose
/// MAC only a neighbour lookup (ARP, IPv6 neighbour discovery) gives.
pub fn link_local_mac(gid: &Gid) -> Option<[u8; 6]> {
    let g = &gid.0;
    if g[..8] != [0xfe, 0x80, 0, 0, 0, 0, 0, 0] {
        return None;
    }
    Some([g[8] ^ 2, g[9], g[10], g[13], g[14], g[15]])
}

/// The GID table Linux builds for a RoCE port whose network interface has MAC `mac` and
/// IPv4 addresses `ipv4`, as rdma-core's sysfs shows it: for the link-local IPv6 address
/// (from the MAC) and then each IPv4 address (as `::ffff:a.b.c.d`), one `IB/RoCE v1`
/// entry followed by one `RoCE v2` entry. A ConnectX port with one IPv4 address has its
/// RoCE v2 IPv4 GID at index 3, the index NCCL and NVSHMEM users are told to set.
pub fn kernel_gid_table(mac: [u8; 6], ipv4: &[[u8; 4]]) -> Vec<GidEntry> {
    core::iter::once(Gid::link_local(mac))
        .chain(ipv4.iter().map(|a| Gid::from_ipv4(*a)))
        .flat_map(|gid| [GidType::RoceV1, GidType::RoceV2].map(|kind| GidEntry { gid, kind }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_local_gids_and_macs_are_each_others_inverse() {
        let mac = [0x02, 0x1b, 0x21, 0xa4, 0x55, 0x6e];
        let gid = Gid::link_local(mac);
        // fe80::1b:21ff:fea4:556e (the U/L bit of 02 flipped to 00).
        assert_eq!(
            gid.0,
            [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x1b, 0x21, 0xff, 0xfe, 0xa4, 0x55, 0x6e]
        );
        assert!(gid.is_link_local() && !gid.is_ipv4_mapped());
        assert_eq!(link_local_mac(&gid), Some(mac));
        assert_eq!(link_local_mac(&Gid::from_ipv4([10, 0, 0, 1])), None);
    }

    #[test]
    fn the_kernel_table_puts_the_ipv4_roce_v2_gid_at_index_3_and_that_is_the_one_chosen() {
        use crate::nic::{LinkLayer, Mtu, PortAttributes};
        let mac = [0x02, 0, 0, 0, 0, 0x01];
        let table = kernel_gid_table(mac, &[[192, 168, 1, 7]]);
        let kinds: Vec<&str> = table.iter().map(|e| e.kind.sysfs_name()).collect();
        assert_eq!(kinds, ["IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"]);
        let port = PortAttributes {
            port: 1,
            lid: 0,
            mtu: Mtu::Mtu4096,
            link_layer: LinkLayer::Ethernet,
            gids: table.clone(),
        };
        assert_eq!(
            port.source_gid(),
            Some((3, Gid::from_ipv4([192, 168, 1, 7])))
        );
        // Without an IP address only the link-local RoCE v2 entry is left; without RoCE v2
        // entries, none.
        let mut port = PortAttributes {
            gids: kernel_gid_table(mac, &[]),
            ..port
        };
        assert_eq!(port.source_gid(), Some((1, Gid::link_local(mac))));
        port.gids.retain(|e| e.kind == GidType::RoceV1);
        assert_eq!(port.source_gid(), None);
    }

    #[test]
    fn the_flow_label_is_symmetric_and_its_port_is_in_range() {
        // Worked by hand: 0x1234 * 0x5678 = 0x06260060; >> 20 = 0x62; xor: 0x06260002;
        // masked to 20 bits: 0x60002. Port: 0x0002 ^ (0x60000 >> 14 = 0x18) = 0x1a,
        // | 0xc000.
        assert_eq!(flow_label(0x1234, 0x5678), 0x6_0002);
        assert_eq!(flow_label(0x5678, 0x1234), 0x6_0002);
        assert_eq!(udp_source_port(0x6_0002), 0xc01a);
        for (a, b) in [(0, 0), (0xff_ffff, 0xff_ffff), (1, 0x100)] {
            assert!(UDP_SOURCE_PORTS.contains(&udp_source_port(flow_label(a, b))));
        }
        assert_eq!(UdpSourcePort::Fixed(49152).for_connection(1, 2), 49152);
    }
}
