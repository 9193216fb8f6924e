//! Enumerated PRM field values, each with its wire encoding.

use super::error::PrmError;

macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $name:ident : $field:literal { $( $(#[$vmeta:meta])* $variant:ident = $value:expr, )* }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
        }

        impl $name {
            /// Every value, in wire order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),*];

            /// The wire value.
            pub const fn wire(self) -> u64 {
                match self {
                    $( Self::$variant => $value, )*
                }
            }

            /// The value for a wire value; an undefined one is an error naming `command`.
            pub fn from_wire(command: &'static str, value: u64) -> Result<Self, PrmError> {
                match value {
                    $( v if v == $value => Ok(Self::$variant), )*
                    _ => Err(PrmError::InvalidValue { command, field: $field, value }),
                }
            }
        }
    };
}

wire_enum! {
    /// `qpc.st`: the QP service type (the QP kinds the control plane creates).
    ServiceType: "st" {
        /// Reliable connected (0x0).
        Rc = 0x0,
        /// DC initiator (0x5).
        Dci = 0x5,
    }
}

wire_enum! {
    /// `qpc.pm_state`: the path-migration state.
    PmState: "pm_state" {
        /// Armed (0x0).
        Armed = 0x0,
        /// Rearm (0x1).
        Rearm = 0x1,
        /// Migrated (0x3): no alternate path, what every GPU library sets.
        Migrated = 0x3,
    }
}

wire_enum! {
    /// `qpc.mtu` / `dctc.mtu`: the path MTU.
    Mtu: "mtu" {
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
}

wire_enum! {
    /// `qpc.atomic_mode` / `dctc.atomic_mode`: the largest atomic the responder executes.
    AtomicMode: "atomic_mode" {
        /// 0: not requested (no extended atomics).
        NotSet = 0,
        /// 1: InfiniBand-compatible atomics.
        IbCompatible = 1,
        /// 2: ConnectX-specific atomics.
        ConnectX = 2,
        /// 3: up to 8 bytes (what NVSHMEM sets).
        UpTo8Bytes = 3,
        /// 4: up to 16 bytes.
        UpTo16Bytes = 4,
        /// 5: up to 32 bytes.
        UpTo32Bytes = 5,
        /// 6: up to 64 bytes.
        UpTo64Bytes = 6,
        /// 7: up to 128 bytes.
        UpTo128Bytes = 7,
        /// 8: up to 256 bytes.
        UpTo256Bytes = 8,
    }
}

wire_enum! {
    /// `cqc.cqe_sz`: the CQE size.
    CqeSize: "cqe_sz" {
        /// 64-byte CQEs (0).
        Bytes64 = 0,
        /// 128-byte CQEs (1).
        Bytes128 = 1,
    }
}

wire_enum! {
    /// QUERY_HCA_CAP's capability type (op_mod bits 15:1).
    CapabilityType: "op_mod" {
        /// The general device capabilities (`cmd_hca_cap`).
        General = 0x0,
        /// The atomic capabilities (`atomic_caps`).
        Atomic = 0x3,
    }
}

wire_enum! {
    /// `atomic_caps.atomic_req_8B_endianness_mode`: how the NIC returns 8-byte atomic results.
    AtomicEndianness: "atomic_req_8B_endianness_mode" {
        /// 0: results in big-endian (network) order.
        BigEndian = 0,
        /// 1: results in host order.
        HostEndian = 1,
        /// 2: a value the PRM reserves, reported as found.
        Reserved2 = 2,
        /// 3: a value the PRM reserves, reported as found.
        Reserved3 = 3,
    }
}

/// `qpc.rq_type` and what goes with it: the QP's receive side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReceiveQueue {
    /// rq_type 0: a regular RQ of `2^log_rq_size` entries of `16 << log_rq_stride` bytes.
    Regular {
        /// `qpc.log_rq_size` (4 bits).
        log_rq_size: u8,
        /// `qpc.log_rq_stride` (3 bits): stride is `16 << log_rq_stride` bytes.
        log_rq_stride: u8,
    },
    /// rq_type 1: receives come from a shared receive queue (NVSHMEM's choice).
    Srq {
        /// `qpc.srqn_rmpn_xrqn` (24 bits).
        srqn: u32,
    },
    /// rq_type 3: no receive queue at all (DOCA's choice; DCIs never receive).
    ZeroSize,
}

impl ReceiveQueue {
    /// The `rq_type` wire value.
    pub const fn rq_type(self) -> u64 {
        match self {
            Self::Regular { .. } => 0,
            Self::Srq { .. } => 1,
            Self::ZeroSize => 3,
        }
    }
}
