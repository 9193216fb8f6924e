//! Typed errors of PRM command encoding, decoding and execution.

use core::fmt;

/// A command's completion status byte (the first byte of every command output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommandStatus {
    /// 0x00: the command succeeded.
    Ok,
    /// 0x01: internal firmware error.
    InternalError,
    /// 0x02: the opcode is not supported.
    BadOpcode,
    /// 0x03: a parameter is invalid.
    BadParameter,
    /// 0x04: the device is in a state that does not accept the command.
    BadSystemState,
    /// 0x05: the resource named by the command does not exist.
    BadResource,
    /// 0x06: the resource is busy.
    ResourceBusy,
    /// 0x08: a limit was exceeded.
    LimitExceeded,
    /// 0x09: the resource is in a state that does not accept the command.
    BadResourceState,
    /// 0x0a: an index is out of range.
    BadIndex,
    /// 0x0f: the device has no free resources of the kind.
    NoResources,
    /// 0x10: the QP is in a state that does not accept the transition.
    BadQpState,
    /// 0x30: a malformed packet.
    BadPacket,
    /// 0x40: bad size of outstanding CQEs.
    BadOutstandingCqeSize,
    /// 0x50: the input length is wrong for the opcode.
    BadInputLength,
    /// 0x51: the output length is wrong for the opcode.
    BadOutputLength,
    /// A status value the PRM does not name.
    Other(u8),
}

impl CommandStatus {
    /// Decodes the status byte.
    pub const fn from_byte(status: u8) -> Self {
        match status {
            0x00 => Self::Ok,
            0x01 => Self::InternalError,
            0x02 => Self::BadOpcode,
            0x03 => Self::BadParameter,
            0x04 => Self::BadSystemState,
            0x05 => Self::BadResource,
            0x06 => Self::ResourceBusy,
            0x08 => Self::LimitExceeded,
            0x09 => Self::BadResourceState,
            0x0a => Self::BadIndex,
            0x0f => Self::NoResources,
            0x10 => Self::BadQpState,
            0x30 => Self::BadPacket,
            0x40 => Self::BadOutstandingCqeSize,
            0x50 => Self::BadInputLength,
            0x51 => Self::BadOutputLength,
            other => Self::Other(other),
        }
    }

    /// The status byte.
    pub const fn byte(self) -> u8 {
        match self {
            Self::Ok => 0x00,
            Self::InternalError => 0x01,
            Self::BadOpcode => 0x02,
            Self::BadParameter => 0x03,
            Self::BadSystemState => 0x04,
            Self::BadResource => 0x05,
            Self::ResourceBusy => 0x06,
            Self::LimitExceeded => 0x08,
            Self::BadResourceState => 0x09,
            Self::BadIndex => 0x0a,
            Self::NoResources => 0x0f,
            Self::BadQpState => 0x10,
            Self::BadPacket => 0x30,
            Self::BadOutstandingCqeSize => 0x40,
            Self::BadInputLength => 0x50,
            Self::BadOutputLength => 0x51,
            Self::Other(other) => other,
        }
    }
}

impl fmt::Display for CommandStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::Ok => "ok",
            Self::InternalError => "internal error",
            Self::BadOpcode => "bad opcode",
            Self::BadParameter => "bad parameter",
            Self::BadSystemState => "bad system state",
            Self::BadResource => "bad resource",
            Self::ResourceBusy => "resource busy",
            Self::LimitExceeded => "limit exceeded",
            Self::BadResourceState => "bad resource state",
            Self::BadIndex => "bad index",
            Self::NoResources => "no resources",
            Self::BadQpState => "bad QP state",
            Self::BadPacket => "bad packet",
            Self::BadOutstandingCqeSize => "bad size of outstanding CQEs",
            Self::BadInputLength => "bad input length",
            Self::BadOutputLength => "bad output length",
            Self::Other(_) => "unnamed status",
        };
        write!(f, "{text} (0x{:02x})", self.byte())
    }
}

/// Why a PRM command could not be encoded, decoded, or why the NIC refused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrmError {
    /// A field value does not fit its width in the layout.
    FieldOutOfRange {
        /// The command (`"CREATE_QP"`, ...).
        command: &'static str,
        /// The PRM structure holding the field.
        structure: &'static str,
        /// The field.
        field: &'static str,
        /// The value given (or found).
        value: u64,
        /// The largest value the field (or the decoded type) holds.
        max: u64,
    },
    /// The bytes are shorter than the command's layout.
    Truncated {
        /// The command.
        command: &'static str,
        /// Bytes given.
        len: usize,
        /// Bytes the layout needs.
        needed: usize,
    },
    /// The opcode is not the one this decoder handles.
    WrongOpcode {
        /// The command the decoder handles.
        command: &'static str,
        /// The opcode found.
        found: u16,
        /// The opcode expected.
        expected: u16,
    },
    /// A field holds a value with no meaning for this command (an enum value the PRM does
    /// not define, an op_mod this command does not take).
    InvalidValue {
        /// The command.
        command: &'static str,
        /// The field.
        field: &'static str,
        /// The value found.
        value: u64,
    },
    /// A bit outside every field this decoder understands is set.
    UnknownBits {
        /// The command.
        command: &'static str,
        /// The first such bit, counted from the most significant bit of byte 0.
        bit_offset: u32,
    },
    /// A field descriptor does not fit the buffer (an internal layout mistake).
    FieldOutsideBuffer {
        /// The command.
        command: &'static str,
        /// The field.
        field: &'static str,
    },
    /// The NIC completed the command with a non-zero status.
    CommandError {
        /// The command.
        command: &'static str,
        /// The status, decoded.
        status: CommandStatus,
        /// The firmware's syndrome, identifying the precise check that failed.
        syndrome: u32,
    },
}

impl fmt::Display for PrmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FieldOutOfRange {
                command,
                structure,
                field,
                value,
                max,
            } => write!(
                f,
                "{command}: {structure}.{field} = {value:#x} does not fit (max {max:#x})"
            ),
            Self::Truncated {
                command,
                len,
                needed,
            } => write!(f, "{command}: {len} bytes, the layout needs {needed}"),
            Self::WrongOpcode {
                command,
                found,
                expected,
            } => write!(
                f,
                "{command}: opcode {found:#06x}, expected {expected:#06x}"
            ),
            Self::InvalidValue {
                command,
                field,
                value,
            } => write!(f, "{command}: {field} = {value:#x} has no defined meaning"),
            Self::UnknownBits {
                command,
                bit_offset,
            } => write!(
                f,
                "{command}: bit {bit_offset:#x} is set but belongs to no field this decoder understands"
            ),
            Self::FieldOutsideBuffer { command, field } => {
                write!(f, "{command}: field {field} lies outside the command buffer")
            }
            Self::CommandError {
                command,
                status,
                syndrome,
            } => write!(
                f,
                "{command} failed: status {status}, syndrome {syndrome:#010x}"
            ),
        }
    }
}

impl std::error::Error for PrmError {}
