//! Opcodes, opcode modifiers and the typed values of the control segment's `fm_ce_se` byte.

use core::fmt;

/// A send WQE opcode (bits 7:0 of the control segment's first word).
///
/// Every opcode the mlx5 send queue defines is named so that a dump and the parser can
/// say what they saw; the builders and the software NIC implement the RDMA subset
/// ([`Opcode::is_built_here`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// No operation: occupies slots, completes, touches no memory.
    Nop = 0x00,
    /// SEND with invalidate.
    SendInvalidate = 0x01,
    /// RDMA WRITE.
    RdmaWrite = 0x08,
    /// RDMA WRITE with immediate.
    RdmaWriteImm = 0x09,
    /// SEND.
    Send = 0x0a,
    /// SEND with immediate.
    SendImm = 0x0b,
    /// TCP segmentation offload (Ethernet QPs).
    Tso = 0x0e,
    /// Cross-queue wait ("core direct").
    Wait = 0x0f,
    /// RDMA READ.
    RdmaRead = 0x10,
    /// 8-byte compare-and-swap.
    AtomicCompareSwap = 0x11,
    /// 8-byte fetch-and-add.
    AtomicFetchAdd = 0x12,
    /// Masked compare-and-swap; operand size in the opcode modifier.
    AtomicMaskedCompareSwap = 0x14,
    /// Masked fetch-and-add; operand size in the opcode modifier.
    AtomicMaskedFetchAdd = 0x15,
    /// Fast memory registration.
    Fmr = 0x19,
    /// Local invalidate.
    LocalInvalidate = 0x1b,
    /// Configuration command.
    ConfigCmd = 0x1f,
    /// Set PSV (signature offload).
    SetPsv = 0x20,
    /// DUMP: the NIC reads a local buffer; with a fence it orders earlier READs and atomics.
    Dump = 0x23,
    /// User memory registration.
    Umr = 0x25,
    /// Tag matching.
    TagMatching = 0x28,
    /// Flow table access.
    FlowTableAccess = 0x2c,
    /// Memory-to-memory offload.
    Mmo = 0x2f,
}

impl Opcode {
    /// The opcode for a raw byte, or `None` if mlx5 defines no such send opcode.
    pub const fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            0x00 => Self::Nop,
            0x01 => Self::SendInvalidate,
            0x08 => Self::RdmaWrite,
            0x09 => Self::RdmaWriteImm,
            0x0a => Self::Send,
            0x0b => Self::SendImm,
            0x0e => Self::Tso,
            0x0f => Self::Wait,
            0x10 => Self::RdmaRead,
            0x11 => Self::AtomicCompareSwap,
            0x12 => Self::AtomicFetchAdd,
            0x14 => Self::AtomicMaskedCompareSwap,
            0x15 => Self::AtomicMaskedFetchAdd,
            0x19 => Self::Fmr,
            0x1b => Self::LocalInvalidate,
            0x1f => Self::ConfigCmd,
            0x20 => Self::SetPsv,
            0x23 => Self::Dump,
            0x25 => Self::Umr,
            0x28 => Self::TagMatching,
            0x2c => Self::FlowTableAccess,
            0x2f => Self::Mmo,
            _ => return None,
        })
    }

    /// The raw opcode byte.
    pub const fn byte(self) -> u8 {
        self as u8
    }

    /// Whether this crate builds, parses and executes WQEs of this opcode.
    pub const fn is_built_here(self) -> bool {
        matches!(
            self,
            Self::Nop
                | Self::RdmaWrite
                | Self::RdmaWriteImm
                | Self::RdmaRead
                | Self::AtomicCompareSwap
                | Self::AtomicFetchAdd
                | Self::AtomicMaskedCompareSwap
                | Self::AtomicMaskedFetchAdd
                | Self::Dump
        )
    }

    /// The rdma-core name of the opcode (`MLX5_OPCODE_*` without the prefix).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Nop => "NOP",
            Self::SendInvalidate => "SEND_INVAL",
            Self::RdmaWrite => "RDMA_WRITE",
            Self::RdmaWriteImm => "RDMA_WRITE_IMM",
            Self::Send => "SEND",
            Self::SendImm => "SEND_IMM",
            Self::Tso => "TSO",
            Self::Wait => "WAIT",
            Self::RdmaRead => "RDMA_READ",
            Self::AtomicCompareSwap => "ATOMIC_CS",
            Self::AtomicFetchAdd => "ATOMIC_FA",
            Self::AtomicMaskedCompareSwap => "ATOMIC_MASKED_CS",
            Self::AtomicMaskedFetchAdd => "ATOMIC_MASKED_FA",
            Self::Fmr => "FMR",
            Self::LocalInvalidate => "LOCAL_INVAL",
            Self::ConfigCmd => "CONFIG_CMD",
            Self::SetPsv => "SET_PSV",
            Self::Dump => "DUMP",
            Self::Umr => "UMR",
            Self::TagMatching => "TAG_MATCHING",
            Self::FlowTableAccess => "FLOW_TBL_ACCESS",
            Self::Mmo => "MMO",
        }
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Operand width of a masked atomic, carried in the opcode modifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicWidth {
    /// 4-byte operand: opcode modifier 0x08.
    Four,
    /// 8-byte operand: opcode modifier 0x09.
    Eight,
}

impl AtomicWidth {
    /// The opcode modifier that selects this width on masked atomics.
    pub const fn opmod(self) -> u8 {
        match self {
            Self::Four => 0x08,
            Self::Eight => 0x09,
        }
    }
    /// The width for an opcode modifier of a masked atomic, if it is one.
    pub const fn from_opmod(opmod: u8) -> Option<Self> {
        match opmod {
            0x08 => Some(Self::Four),
            0x09 => Some(Self::Eight),
            _ => None,
        }
    }
    /// The operand size in bytes.
    pub const fn bytes(self) -> u32 {
        match self {
            Self::Four => 4,
            Self::Eight => 8,
        }
    }
}

/// Fence mode (bits 7:5 of `fm_ce_se`): what the NIC waits for before executing this WQE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FenceMode {
    /// No fence.
    #[default]
    None = 0,
    /// Initiator small fence: wait for earlier local operations that change memory keys.
    InitiatorSmall = 1,
    /// Fence: wait until earlier RDMA READs and atomics on this queue have completed.
    Fence = 2,
    /// Strong ordering.
    StrongOrdering = 3,
    /// Small and fence: what rdma-core's `IBV_SEND_FENCE` sets (0x80).
    SmallAndFence = 4,
}

impl FenceMode {
    const SHIFT: u8 = 5;

    /// The mode for the 3-bit field value, or `None` for the reserved values 5..=7.
    pub const fn from_bits(bits: u8) -> Option<Self> {
        Some(match bits {
            0 => Self::None,
            1 => Self::InitiatorSmall,
            2 => Self::Fence,
            3 => Self::StrongOrdering,
            4 => Self::SmallAndFence,
            _ => return None,
        })
    }

    /// Whether the NIC waits for earlier READs and atomics before this WQE.
    pub const fn waits_for_reads(self) -> bool {
        matches!(
            self,
            Self::Fence | Self::StrongOrdering | Self::SmallAndFence
        )
    }
}

/// Completion mode (bits 3:2 of `fm_ce_se`): when the WQE produces a CQE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CompletionMode {
    /// Unsignaled: a CQE only if the WQE fails.
    #[default]
    OnError = 0,
    /// A CQE on the first error only.
    OnFirstError = 1,
    /// Signaled: always a CQE (`MLX5_WQE_CTRL_CQ_UPDATE`).
    Always = 2,
    /// Always a CQE and an event-queue entry.
    AlwaysWithEvent = 3,
}

impl CompletionMode {
    const SHIFT: u8 = 2;

    /// The mode for the 2-bit field value.
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 3 {
            0 => Self::OnError,
            1 => Self::OnFirstError,
            2 => Self::Always,
            _ => Self::AlwaysWithEvent,
        }
    }

    /// Whether a successful WQE with this mode produces a CQE.
    pub const fn is_signaled(self) -> bool {
        matches!(self, Self::Always | Self::AlwaysWithEvent)
    }
}

/// Whether the WQE raises a solicited event at the responder (bit 1 of `fm_ce_se`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Solicited {
    /// No solicited event.
    #[default]
    No,
    /// Solicited event (`MLX5_WQE_CTRL_SOLICITED`).
    Yes,
}

/// The decoded `fm_ce_se` byte of a control segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ControlFlags {
    /// Fence mode.
    pub fence: FenceMode,
    /// Completion mode.
    pub completion: CompletionMode,
    /// Solicited event.
    pub solicited: Solicited,
}

impl ControlFlags {
    const SOLICITED_BIT: u8 = 0x02;
    /// Bits 4 and 0: no source defines them; the parser rejects them set.
    pub const RESERVED_BITS: u8 = 0x11;

    /// The encoded byte.
    pub const fn byte(self) -> u8 {
        ((self.fence as u8) << FenceMode::SHIFT)
            | ((self.completion as u8) << CompletionMode::SHIFT)
            | match self.solicited {
                Solicited::No => 0,
                Solicited::Yes => Self::SOLICITED_BIT,
            }
    }

    /// Decodes a byte, or `None` if it holds a reserved fence mode or reserved bits.
    pub const fn from_byte(byte: u8) -> Option<Self> {
        if byte & Self::RESERVED_BITS != 0 {
            return None;
        }
        let Some(fence) = FenceMode::from_bits(byte >> FenceMode::SHIFT) else {
            return None;
        };
        Some(Self {
            fence,
            completion: CompletionMode::from_bits(byte >> CompletionMode::SHIFT),
            solicited: if byte & Self::SOLICITED_BIT != 0 {
                Solicited::Yes
            } else {
                Solicited::No
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_defined_opcode_round_trips_and_nothing_else_decodes() {
        for byte in 0..=u8::MAX {
            match Opcode::from_byte(byte) {
                Some(op) => assert_eq!(op.byte(), byte),
                None => {
                    assert!(![0x00, 0x08, 0x09, 0x10, 0x11, 0x12, 0x14, 0x15, 0x23].contains(&byte))
                }
            }
        }
    }

    #[test]
    fn control_flags_match_rdma_core_constants() {
        // MLX5_WQE_CTRL_CQ_UPDATE = 0x08, MLX5_WQE_CTRL_SOLICITED = 0x02,
        // MLX5_WQE_CTRL_FENCE = 4 << 5, MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE = 1 << 5.
        let signaled = ControlFlags {
            completion: CompletionMode::Always,
            ..Default::default()
        };
        assert_eq!(signaled.byte(), 0x08);
        let solicited = ControlFlags {
            solicited: Solicited::Yes,
            ..Default::default()
        };
        assert_eq!(solicited.byte(), 0x02);
        let fence = ControlFlags {
            fence: FenceMode::SmallAndFence,
            ..Default::default()
        };
        assert_eq!(fence.byte(), 0x80);
        let small = ControlFlags {
            fence: FenceMode::InitiatorSmall,
            ..Default::default()
        };
        assert_eq!(small.byte(), 0x20);
    }

    #[test]
    fn control_flags_decode_every_valid_byte_and_reject_the_rest() {
        for byte in 0..=u8::MAX {
            match ControlFlags::from_byte(byte) {
                Some(flags) => assert_eq!(flags.byte(), byte),
                None => assert!(byte & ControlFlags::RESERVED_BITS != 0 || byte >> 5 > 4),
            }
        }
    }
}
