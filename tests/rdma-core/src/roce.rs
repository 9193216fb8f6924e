//! The RoCE oracle (`shim/roce.c`): rdma-core 56.1's `mlx5_create_ah` for an Ethernet port
//! (the GID type and the neighbour's MAC answered by the shim instead of sysfs and
//! netlink), and its `ibv_flow_label_to_udp_sport`.

/// An address handle's attributes on a RoCE port, and what the kernel would answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct RoceAh {
    /// Destination GID.
    pub dgid: [u8; 16],
    /// The MAC the neighbour lookup answers.
    pub mac: [u8; 6],
    /// Whether the source GID is RoCE v2 (else RoCE v1).
    pub roce_v2: u8,
    /// Source GID index.
    pub sgid_index: u8,
    /// GRH flow label (20 bits; 0 makes the provider draw a random UDP port).
    pub flow_label: u32,
    /// GRH hop limit.
    pub hop_limit: u8,
    /// GRH traffic class.
    pub traffic_class: u8,
    /// Service level.
    pub sl: u8,
    /// Static rate (`ibv_rate`).
    pub static_rate: u8,
}

extern "C" {
    fn ibgda_roce_create_ah(args: *const RoceAh, av: *mut u8) -> i32;
    fn ibgda_roce_flow_label_to_udp_sport(flow_label: u32) -> u16;
}

/// The 48-byte `mlx5_wqe_av` rdma-core's `mlx5_create_ah` builds for `args`.
pub fn create_ah(args: &RoceAh) -> Result<[u8; 48], i32> {
    let mut av = [0u8; 48];
    // SAFETY: `args` is a valid `#[repr(C)]` struct matching `struct ibgda_roce_ah`, and
    // `av` has the 48 bytes the shim copies.
    let rc = unsafe { ibgda_roce_create_ah(args, av.as_mut_ptr()) };
    if rc == 0 {
        Ok(av)
    } else {
        Err(rc)
    }
}

/// rdma-core's `ibv_flow_label_to_udp_sport`.
pub fn flow_label_to_udp_sport(flow_label: u32) -> u16 {
    // SAFETY: a pure function of an integer.
    unsafe { ibgda_roce_flow_label_to_udp_sport(flow_label) }
}
