//! mlx5 PRM commands as typed values over big-endian bit-field layouts.
//!
//! Every command the control plane sends (QUERY_HCA_CAP, ALLOC_UAR / DEALLOC_UAR,
//! CREATE_CQ, CREATE_QP for RC and DCI, RST2INIT_QP / INIT2RTR_QP / RTR2RTS_QP, 2ERR_QP /
//! 2RST_QP (recovery), CREATE_DCT, DESTROY_CQ / QP / DCT) is a plain struct of typed fields with
//!
//! - `encode(&self) -> Result<Vec<u8>, PrmError>`: the exact bytes handed to DEVX; a value
//!   wider than its field is [`PrmError::FieldOutOfRange`], never truncated;
//! - `decode(&[u8]) -> Result<Self, PrmError>`: how the software NIC executes a command. A
//!   malformed command (short, wrong opcode, a bit set outside every understood field, an
//!   enum value with no meaning) is a typed error, never a panic.
//!
//! Outputs have both directions too: the software NIC encodes them, the control plane
//! decodes them, status byte and syndrome first, so a failed command becomes
//! [`PrmError::CommandError`] naming the command and its [`CommandStatus`].
//!
//! ```
//! use ibgda::nic::prm::*;
//!
//! let destroy = DestroyQp { uid: 0, qpn: 0x1234 };
//! let bytes = destroy.encode()?;
//! assert_eq!(bytes, [0x05, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 0]);
//! assert_eq!(DestroyQp::decode(&bytes)?, destroy);
//!
//! // A value wider than its field is refused, not truncated.
//! let too_big = DestroyQp { uid: 0, qpn: 1 << 24 };
//! assert!(matches!(too_big.encode(), Err(PrmError::FieldOutOfRange { field: "qpn", .. })));
//!
//! // A failed command's output names the command, its status and syndrome.
//! let failed = DestroyQpOutput::encode_failure(CommandStatus::BadResource, 0x0b2c_7f3e)?;
//! assert_eq!(
//!     DestroyQpOutput::decode(&failed),
//!     Err(PrmError::CommandError {
//!         command: "DESTROY_QP",
//!         status: CommandStatus::BadResource,
//!         syndrome: 0x0b2c_7f3e,
//!     })
//! );
//! # Ok::<(), PrmError>(())
//! ```
//!
//! Layouts follow the PRM's bit numbering (see [`bits`]); every field's offset and width is
//! declared once in [`layout`], checked for overlap and bounds in `const` assertions, pinned
//! against offsets measured on rdma-core 56.1's `mlx5_ifc.h`, and proved byte-exact against
//! rdma-core's own encoders by the differential tests in `tests/rdma-core`.

pub mod bits;
mod commands;
pub mod diff;
mod error;
pub mod layout;
pub mod log;
mod types;

pub use bits::{Field, Layout};
pub use commands::{
    check_status, AddressPath, AllocUar, AllocUarOutput, AtomicCaps, Command, CommandOutput,
    CqContext, CreateCq, CreateCqOutput, CreateDct, CreateDctOutput, CreateQp, CreateQpOutput,
    DctContext, DeallocUar, DeallocUarOutput, DestroyCq, DestroyCqOutput, DestroyDct,
    DestroyDctOutput, DestroyQp, DestroyQpOutput, GeneralCaps, Init2RtrQp, Init2RtrQpOutput,
    Qp2Err, Qp2ErrOutput, Qp2Rst, Qp2RstOutput, QpCreateContext, QueryHcaCap, QueryHcaCapOutput,
    RemoteAccess, Rst2InitQp, Rst2InitQpOutput, Rtr2RtsQp, Rtr2RtsQpOutput,
};
pub use error::{CommandStatus, PrmError};
pub use types::{
    AtomicEndianness, AtomicMode, CapabilityType, CqeSize, Mtu, PmState, ReceiveQueue, ServiceType,
};

/// QUERY_HCA_CAP's `op_mod`: the capability type in bits 15:1, current-or-maximum in bit 0.
pub mod op_mod {
    /// Bit 0 clear: the maximum values the device supports.
    pub const HCA_CAP_MAX: u16 = 0;
    /// Bit 0 set: the values currently in effect.
    pub const HCA_CAP_CURRENT: u16 = 1;
    /// Capability type 0: the general device capabilities (`cmd_hca_cap`).
    pub const HCA_CAP_GENERAL: u16 = 0x0 << 1;
    /// Capability type 3: the atomic capabilities (`atomic_caps`).
    pub const HCA_CAP_ATOMIC: u16 = 0x3 << 1;
}

/// PRM command opcodes (the first 16 bits of every command input).
pub mod opcode {
    /// QUERY_HCA_CAP.
    pub const QUERY_HCA_CAP: u16 = 0x100;
    /// CREATE_CQ.
    pub const CREATE_CQ: u16 = 0x400;
    /// DESTROY_CQ.
    pub const DESTROY_CQ: u16 = 0x401;
    /// CREATE_QP.
    pub const CREATE_QP: u16 = 0x500;
    /// DESTROY_QP.
    pub const DESTROY_QP: u16 = 0x501;
    /// RST2INIT_QP.
    pub const RST2INIT_QP: u16 = 0x502;
    /// INIT2RTR_QP.
    pub const INIT2RTR_QP: u16 = 0x503;
    /// RTR2RTS_QP.
    pub const RTR2RTS_QP: u16 = 0x504;
    /// 2ERR_QP (rdma-core's `MLX5_CMD_OP_2ERR_QP`).
    pub const QP_2ERR: u16 = 0x507;
    /// 2RST_QP (rdma-core's `MLX5_CMD_OP_2RST_QP`).
    pub const QP_2RST: u16 = 0x50a;
    /// CREATE_DCT.
    pub const CREATE_DCT: u16 = 0x710;
    /// DESTROY_DCT.
    pub const DESTROY_DCT: u16 = 0x711;
    /// ALLOC_UAR.
    pub const ALLOC_UAR: u16 = 0x802;
    /// DEALLOC_UAR.
    pub const DEALLOC_UAR: u16 = 0x803;

    /// The PRM name of `opcode` (`"CREATE_QP"`): the commands this module encodes and every
    /// other command rdma-core 56.1's `mlx5_ifc.h` names (so that a command log of another
    /// program names what it sent); `"unknown command"` otherwise.
    pub fn name(opcode: u16) -> &'static str {
        use super::{
            AllocUar, Command, CreateCq, CreateDct, CreateQp, DeallocUar, DestroyCq, DestroyDct,
            DestroyQp, Init2RtrQp, QueryHcaCap, Rst2InitQp, Rtr2RtsQp,
        };
        match opcode {
            QUERY_HCA_CAP => QueryHcaCap::NAME,
            CREATE_CQ => CreateCq::NAME,
            DESTROY_CQ => DestroyCq::NAME,
            CREATE_QP => CreateQp::NAME,
            DESTROY_QP => DestroyQp::NAME,
            RST2INIT_QP => Rst2InitQp::NAME,
            INIT2RTR_QP => Init2RtrQp::NAME,
            RTR2RTS_QP => Rtr2RtsQp::NAME,
            CREATE_DCT => CreateDct::NAME,
            DESTROY_DCT => DestroyDct::NAME,
            ALLOC_UAR => AllocUar::NAME,
            DEALLOC_UAR => DeallocUar::NAME,
            0x102 => "INIT_HCA",
            0x103 => "TEARDOWN_HCA",
            0x104 => "ENABLE_HCA",
            0x107 => "QUERY_PAGES",
            0x108 => "MANAGE_PAGES",
            0x109 => "SET_HCA_CAP",
            0x10a => "QUERY_ISSI",
            0x10b => "SET_ISSI",
            0x200 => "CREATE_MKEY",
            0x202 => "DESTROY_MKEY",
            0x301 => "CREATE_EQ",
            0x302 => "DESTROY_EQ",
            0x505 => "RTS2RTS_QP",
            0x506 => "SQERR2RTS_QP",
            QP_2ERR => "2ERR_QP",
            QP_2RST => "2RST_QP",
            0x50b => "QUERY_QP",
            0x50c => "SQD_RTS_QP",
            0x50e => "INIT2INIT_QP",
            0x600 => "CREATE_PSV",
            0x601 => "DESTROY_PSV",
            0x700 => "CREATE_SRQ",
            0x701 => "DESTROY_SRQ",
            0x705 => "CREATE_XRC_SRQ",
            0x706 => "DESTROY_XRC_SRQ",
            0x713 => "QUERY_DCT",
            0x717 => "CREATE_XRQ",
            0x718 => "DESTROY_XRQ",
            0x740 => "QUERY_ESW_FUNCTIONS",
            0x752 => "QUERY_ESW_VPORT_CONTEXT",
            0x754 => "QUERY_NIC_VPORT_CONTEXT",
            0x755 => "MODIFY_NIC_VPORT_CONTEXT",
            0x760 => "QUERY_ROCE_ADDRESS",
            0x771 => "ALLOC_Q_COUNTER",
            0x772 => "DEALLOC_Q_COUNTER",
            0x782 => "CREATE_SCHEDULING_ELEMENT",
            0x783 => "DESTROY_SCHEDULING_ELEMENT",
            0x800 => "ALLOC_PD",
            0x801 => "DEALLOC_PD",
            0x805 => "ACCESS_REG",
            0x806 => "ATTACH_TO_MCG",
            0x807 => "DETACH_FROM_MCG",
            0x80e => "ALLOC_XRCD",
            0x80f => "DEALLOC_XRCD",
            0x816 => "ALLOC_TRANSPORT_DOMAIN",
            0x817 => "DEALLOC_TRANSPORT_DOMAIN",
            0x827 => "ADD_VXLAN_UDP_DPORT",
            0x828 => "DELETE_VXLAN_UDP_DPORT",
            0x829 => "SET_L2_TABLE_ENTRY",
            0x82b => "DELETE_L2_TABLE_ENTRY",
            0x842 => "QUERY_LAG",
            0x900 => "CREATE_TIR",
            0x902 => "DESTROY_TIR",
            0x904 => "CREATE_SQ",
            0x905 => "MODIFY_SQ",
            0x906 => "DESTROY_SQ",
            0x908 => "CREATE_RQ",
            0x90a => "DESTROY_RQ",
            0x90c => "CREATE_RMP",
            0x90e => "DESTROY_RMP",
            0x912 => "CREATE_TIS",
            0x913 => "MODIFY_TIS",
            0x914 => "DESTROY_TIS",
            0x915 => "QUERY_TIS",
            0x916 => "CREATE_RQT",
            0x918 => "DESTROY_RQT",
            0x930 => "CREATE_FLOW_TABLE",
            0x931 => "DESTROY_FLOW_TABLE",
            0x932 => "QUERY_FLOW_TABLE",
            0x933 => "CREATE_FLOW_GROUP",
            0x934 => "DESTROY_FLOW_GROUP",
            0x936 => "SET_FLOW_TABLE_ENTRY",
            0x938 => "DELETE_FLOW_TABLE_ENTRY",
            0x939 => "CREATE_FLOW_COUNTER",
            0x93a => "DEALLOC_FLOW_COUNTER",
            0x93d => "ALLOC_PACKET_REFORMAT_CONTEXT",
            0x93e => "DEALLOC_PACKET_REFORMAT_CONTEXT",
            0x940 => "ALLOC_MODIFY_HEADER_CONTEXT",
            0x941 => "DEALLOC_MODIFY_HEADER_CONTEXT",
            0xa00 => "CREATE_GENERAL_OBJECT",
            0xa01 => "MODIFY_GENERAL_OBJECT",
            0xa02 => "QUERY_GENERAL_OBJECT",
            0xa03 => "DESTROY_GENERAL_OBJECT",
            0xa08 => "CREATE_UMEM",
            0xa0a => "DESTROY_UMEM",
            0xb00 => "SYNC_STEERING",
            _ => "unknown command",
        }
    }
}
