//! The commands: typed inputs and outputs with exact encoders and strict decoders.

use super::bits::{BitReader, BitWriter, Field};
use super::error::{CommandStatus, PrmError};
use super::layout::{
    ads, alloc_uar_in, alloc_uar_out, atomic_caps, cmd_hca_cap, cqc, create_cq_in, create_cq_out,
    create_dct_in, create_dct_out, create_qp_in, create_qp_out, dctc, dealloc_uar_in,
    destroy_cq_in, destroy_dct_in, destroy_qp_in, mbox_in, mbox_out, modify_qp_in, qp_2err_in,
    qp_2rst_in, qpc, query_hca_cap_in, CREATE_CQ_CQC, CREATE_DCT_DCTC, QPC_PRIMARY_ADDRESS_PATH,
    QP_COMMAND_QPC, QUERY_HCA_CAP_OUT_BITS, QUERY_HCA_CAP_OUT_CAPABILITY,
};
use super::types::{
    AtomicEndianness, AtomicMode, CapabilityType, CqeSize, Mtu, PmState, ReceiveQueue, ServiceType,
};
use super::{op_mod, opcode};

/// A PRM command input: its name, opcode, size, the fields it may carry, and both codecs.
pub trait Command: Sized {
    /// The PRM name (`"CREATE_QP"`), used in every error about it.
    const NAME: &'static str;
    /// The opcode.
    const OPCODE: u16;
    /// The input size in bytes.
    const INPUT_BYTES: usize;
    /// Every field the command may set, at its bit offset in the input. Any other set bit
    /// makes [`Command::decode`] fail with [`PrmError::UnknownBits`].
    const FIELDS: &'static [Field];
    /// The command's output.
    type Output: CommandOutput;

    /// The exact input bytes; a value wider than its field is an error, never truncated.
    fn encode(&self) -> Result<Vec<u8>, PrmError>;

    /// Parses input bytes (as the software NIC does to execute them). Never panics.
    fn decode(bytes: &[u8]) -> Result<Self, PrmError>;
}

/// A PRM command output.
pub trait CommandOutput: Sized {
    /// The command this is the output of.
    const COMMAND: &'static str;
    /// The output size in bytes.
    const OUTPUT_BYTES: usize;

    /// The output bytes of a successful command (status 0, syndrome 0).
    fn encode(&self) -> Result<Vec<u8>, PrmError>;

    /// Parses output bytes: status and syndrome first, so a failed command is
    /// [`PrmError::CommandError`] naming [`Self::COMMAND`]; never panics.
    fn decode(bytes: &[u8]) -> Result<Self, PrmError>;

    /// The output bytes of a failed command, as the NIC writes them.
    fn encode_failure(status: CommandStatus, syndrome: u32) -> Result<Vec<u8>, PrmError> {
        let mut w = BitWriter::new(Self::COMMAND, Self::OUTPUT_BYTES);
        w.set(mbox_out::STATUS, u64::from(status.byte()))?;
        w.set(mbox_out::SYNDROME, u64::from(syndrome))?;
        Ok(w.finish())
    }
}

/// Checks an output's length and status; a non-zero status is [`PrmError::CommandError`].
pub fn check_status(command: &'static str, bytes: &[u8]) -> Result<(), PrmError> {
    let r = BitReader::new(command, bytes, mbox_out::LAYOUT.bytes())?;
    let status: u8 = r.get_as(mbox_out::STATUS)?;
    let syndrome: u32 = r.get_as(mbox_out::SYNDROME)?;
    if status != 0 {
        return Err(PrmError::CommandError {
            command,
            status: CommandStatus::from_byte(status),
            syndrome,
        });
    }
    Ok(())
}

/// Starts an input: opcode, uid and op_mod in the common header.
fn header(
    command: &'static str,
    bytes: usize,
    opcode: u16,
    uid: u16,
    op_mod: u16,
) -> Result<BitWriter, PrmError> {
    let mut w = BitWriter::new(command, bytes);
    w.set(mbox_in::OPCODE, u64::from(opcode))?;
    w.set(mbox_in::UID, u64::from(uid))?;
    w.set(mbox_in::OP_MOD, u64::from(op_mod))?;
    Ok(w)
}

/// Opens an input for decoding: length, opcode, no unknown bits; returns the reader.
fn open<'a, C: Command>(bytes: &'a [u8]) -> Result<BitReader<'a>, PrmError> {
    let r = BitReader::new(C::NAME, bytes, C::INPUT_BYTES)?;
    let found: u16 = r.get_as(mbox_in::OPCODE)?;
    if found != C::OPCODE {
        return Err(PrmError::WrongOpcode {
            command: C::NAME,
            found,
            expected: C::OPCODE,
        });
    }
    r.only(C::INPUT_BYTES, C::FIELDS)?;
    Ok(r)
}

/// A field of the `qpc` inside a QP command.
const fn q(field: Field) -> Field {
    field.within(QP_COMMAND_QPC)
}

/// A field of the primary address path inside a QP command.
const fn p(field: Field) -> Field {
    field.within(QP_COMMAND_QPC + QPC_PRIMARY_ADDRESS_PATH)
}

/// A field of the `cqc` inside CREATE_CQ.
const fn c(field: Field) -> Field {
    field.within(CREATE_CQ_CQC)
}

/// A field of the `dctc` inside CREATE_DCT.
const fn d(field: Field) -> Field {
    field.within(CREATE_DCT_DCTC)
}

/// A field of the capability union inside QUERY_HCA_CAP's output.
const fn cap(field: Field) -> Field {
    field.within(QUERY_HCA_CAP_OUT_CAPABILITY)
}

macro_rules! object_output {
    ($(#[$meta:meta])* $name:ident, $command:literal, $layout:ident, $field:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name {
            #[doc = concat!("The object number the NIC assigned (24 bits).")]
            pub $field: u32,
        }

        impl CommandOutput for $name {
            const COMMAND: &'static str = $command;
            const OUTPUT_BYTES: usize = $layout::LAYOUT.bytes();

            fn encode(&self) -> Result<Vec<u8>, PrmError> {
                let mut w = BitWriter::new(Self::COMMAND, Self::OUTPUT_BYTES);
                w.set($layout::OBJECT, u64::from(self.$field))?;
                Ok(w.finish())
            }

            fn decode(bytes: &[u8]) -> Result<Self, PrmError> {
                check_status(Self::COMMAND, bytes)?;
                let r = BitReader::new(Self::COMMAND, bytes, Self::OUTPUT_BYTES)?;
                Ok(Self { $field: r.get_as($layout::OBJECT)? })
            }
        }
    };
}

macro_rules! empty_output {
    ($(#[$meta:meta])* $name:ident, $command:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name;

        impl CommandOutput for $name {
            const COMMAND: &'static str = $command;
            const OUTPUT_BYTES: usize = mbox_out::LAYOUT.bytes();

            fn encode(&self) -> Result<Vec<u8>, PrmError> {
                Ok(BitWriter::new(Self::COMMAND, Self::OUTPUT_BYTES).finish())
            }

            fn decode(bytes: &[u8]) -> Result<Self, PrmError> {
                check_status(Self::COMMAND, bytes)?;
                Ok(Self)
            }
        }
    };
}

object_output!(
    /// CREATE_CQ's output: the CQ number.
    CreateCqOutput, "CREATE_CQ", create_cq_out, cqn
);
object_output!(
    /// CREATE_QP's output: the QP number.
    CreateQpOutput, "CREATE_QP", create_qp_out, qpn
);
object_output!(
    /// CREATE_DCT's output: the DCT number.
    CreateDctOutput, "CREATE_DCT", create_dct_out, dctn
);
object_output!(
    /// ALLOC_UAR's output: the UAR page index.
    AllocUarOutput, "ALLOC_UAR", alloc_uar_out, uar
);
empty_output!(
    /// DEALLOC_UAR's output.
    DeallocUarOutput, "DEALLOC_UAR"
);
empty_output!(
    /// DESTROY_CQ's output.
    DestroyCqOutput, "DESTROY_CQ"
);
empty_output!(
    /// DESTROY_QP's output.
    DestroyQpOutput, "DESTROY_QP"
);
empty_output!(
    /// DESTROY_DCT's output.
    DestroyDctOutput, "DESTROY_DCT"
);
empty_output!(
    /// RST2INIT_QP's output.
    Rst2InitQpOutput, "RST2INIT_QP"
);
empty_output!(
    /// INIT2RTR_QP's output.
    Init2RtrQpOutput, "INIT2RTR_QP"
);
empty_output!(
    /// RTR2RTS_QP's output.
    Rtr2RtsQpOutput, "RTR2RTS_QP"
);
empty_output!(
    /// 2ERR_QP's output.
    Qp2ErrOutput, "2ERR_QP"
);
empty_output!(
    /// 2RST_QP's output.
    Qp2RstOutput, "2RST_QP"
);

// ---------------------------------------------------------------------------------------
// QUERY_HCA_CAP

/// QUERY_HCA_CAP: read one capability page of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueryHcaCap {
    /// Which capability page (op_mod bits 15:1).
    pub capability: CapabilityType,
    /// The current values (op_mod bit 0 = 1) rather than the maximum ones.
    pub current: bool,
    /// Query another function (`other_function`).
    pub other_function: bool,
    /// That function's id (`function_id`).
    pub function_id: u16,
}

impl QueryHcaCap {
    /// The current values of `capability` on this function.
    pub const fn current(capability: CapabilityType) -> Self {
        Self {
            capability,
            current: true,
            other_function: false,
            function_id: 0,
        }
    }
}

impl Command for QueryHcaCap {
    const NAME: &'static str = "QUERY_HCA_CAP";
    const OPCODE: u16 = opcode::QUERY_HCA_CAP;
    const INPUT_BYTES: usize = query_hca_cap_in::LAYOUT.bytes();
    const FIELDS: &'static [Field] = &[
        query_hca_cap_in::OPCODE,
        query_hca_cap_in::OP_MOD,
        query_hca_cap_in::OTHER_FUNCTION,
        query_hca_cap_in::FUNCTION_ID,
    ];
    type Output = QueryHcaCapOutput;

    fn encode(&self) -> Result<Vec<u8>, PrmError> {
        let kind = match self.capability {
            CapabilityType::General => op_mod::HCA_CAP_GENERAL,
            CapabilityType::Atomic => op_mod::HCA_CAP_ATOMIC,
        };
        let current = if self.current {
            op_mod::HCA_CAP_CURRENT
        } else {
            op_mod::HCA_CAP_MAX
        };
        let op_mod = u64::from(kind | current);
        let mut w = BitWriter::new(Self::NAME, Self::INPUT_BYTES);
        w.set(query_hca_cap_in::OPCODE, u64::from(Self::OPCODE))?;
        w.set(query_hca_cap_in::OP_MOD, op_mod)?;
        w.flag(query_hca_cap_in::OTHER_FUNCTION, self.other_function)?;
        w.set(query_hca_cap_in::FUNCTION_ID, u64::from(self.function_id))?;
        Ok(w.finish())
    }

    fn decode(bytes: &[u8]) -> Result<Self, PrmError> {
        let r = open::<Self>(bytes)?;
        let op_mod = r.get(query_hca_cap_in::OP_MOD)?;
        Ok(Self {
            capability: CapabilityType::from_wire(Self::NAME, op_mod >> 1)?,
            current: op_mod & 1 == 1,
            other_function: r.flag(query_hca_cap_in::OTHER_FUNCTION)?,
            function_id: r.get_as(query_hca_cap_in::FUNCTION_ID)?,
        })
    }
}

/// The general device capabilities that matter to GPU-initiated queues (`cmd_hca_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GeneralCaps {
    /// `qp_data_in_order`: the QP data-in-order attribute is supported.
    pub qp_data_in_order: bool,
    /// `log_max_srq_sz`.
    pub log_max_srq_sz: u8,
    /// `log_max_qp_sz`: the largest SQ/RQ, log2 of WQEBBs.
    pub log_max_qp_sz: u8,
    /// `log_max_qp`.
    pub log_max_qp: u8,
    /// `log_max_cq_sz`: the largest CQ, log2 of CQEs.
    pub log_max_cq_sz: u8,
    /// `log_max_cq`.
    pub log_max_cq: u8,
    /// `log_max_ra_req_dc`: outstanding RDMA reads/atomics a DCI may issue (log2).
    pub log_max_ra_req_dc: u8,
    /// `log_max_ra_res_dc`: outstanding RDMA reads/atomics a DCT may serve (log2).
    pub log_max_ra_res_dc: u8,
    /// `log_max_ra_req_qp`: outstanding RDMA reads/atomics an RC QP may issue (log2).
    pub log_max_ra_req_qp: u8,
    /// `log_max_ra_res_qp`: outstanding RDMA reads/atomics an RC QP may serve (log2).
    pub log_max_ra_res_qp: u8,
    /// `end_pad`.
    pub end_pad: bool,
    /// `port_type`: 0 InfiniBand, 1 Ethernet.
    pub port_type: u8,
    /// `num_ports`.
    pub num_ports: u8,
    /// `log_max_msg`: the largest message, log2 of bytes.
    pub log_max_msg: u8,
    /// `cqe_version`: GPU-initiated queues need 1.
    pub cqe_version: u8,
    /// `compact_address_vector`: DC address vectors may omit the GRH part.
    pub compact_address_vector: bool,
    /// `dct`: DC transport supported.
    pub dct: bool,
    /// `atomic`: atomic operations supported (the atomic page says which).
    pub atomic: bool,
    /// `rc`: RC transport supported.
    pub rc: bool,
    /// `uar_4k`: 4 KiB UAR pages.
    pub uar_4k: bool,
    /// `umem_uid_0`: UMEM may be registered with uid 0.
    pub umem_uid_0: bool,
    /// `log_bf_reg_size`: BlueFlame register size, log2 of bytes.
    pub log_bf_reg_size: u8,
    /// `max_wqe_sz_sq`: the largest send WQE in bytes (bounds inline data).
    pub max_wqe_sz_sq: u16,
    /// `max_wqe_sz_sq_dc`: the largest DC send WQE in bytes.
    pub max_wqe_sz_sq_dc: u16,
    /// `log_max_pd`.
    pub log_max_pd: u8,
}

/// The atomic capabilities (`atomic_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicCaps {
    /// `atomic_req_8B_endianness_mode`: how 8-byte atomic results are returned.
    pub endianness_mode: AtomicEndianness,
    /// `supported_atomic_req_8B_endianness_mode_1`: host-endian mode may be selected.
    pub host_endianness_supported: bool,
    /// `atomic_operations`: bit mask of supported operations.
    pub atomic_operations: u16,
    /// `atomic_size_qp`: bit mask of supported operand sizes on RC QPs.
    pub atomic_size_qp: u16,
    /// `atomic_size_dc`: bit mask of supported operand sizes on DC.
    pub atomic_size_dc: u16,
}

impl Default for AtomicCaps {
    fn default() -> Self {
        Self {
            endianness_mode: AtomicEndianness::BigEndian,
            host_endianness_supported: false,
            atomic_operations: 0,
            atomic_size_qp: 0,
            atomic_size_dc: 0,
        }
    }
}

/// QUERY_HCA_CAP's output: one capability page, decoded by its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueryHcaCapOutput {
    /// The general page.
    General(GeneralCaps),
    /// The atomic page.
    Atomic(AtomicCaps),
}

const GENERAL_CAPS_FIELDS: [Field; 25] = [
    cmd_hca_cap::QP_DATA_IN_ORDER,
    cmd_hca_cap::LOG_MAX_SRQ_SZ,
    cmd_hca_cap::LOG_MAX_QP_SZ,
    cmd_hca_cap::LOG_MAX_QP,
    cmd_hca_cap::LOG_MAX_CQ_SZ,
    cmd_hca_cap::LOG_MAX_CQ,
    cmd_hca_cap::LOG_MAX_RA_REQ_DC,
    cmd_hca_cap::LOG_MAX_RA_RES_DC,
    cmd_hca_cap::LOG_MAX_RA_REQ_QP,
    cmd_hca_cap::LOG_MAX_RA_RES_QP,
    cmd_hca_cap::END_PAD,
    cmd_hca_cap::PORT_TYPE,
    cmd_hca_cap::NUM_PORTS,
    cmd_hca_cap::LOG_MAX_MSG,
    cmd_hca_cap::CQE_VERSION,
    cmd_hca_cap::COMPACT_ADDRESS_VECTOR,
    cmd_hca_cap::DCT,
    cmd_hca_cap::ATOMIC,
    cmd_hca_cap::RC,
    cmd_hca_cap::UAR_4K,
    cmd_hca_cap::UMEM_UID_0,
    cmd_hca_cap::LOG_BF_REG_SIZE,
    cmd_hca_cap::MAX_WQE_SZ_SQ,
    cmd_hca_cap::MAX_WQE_SZ_SQ_DC,
    cmd_hca_cap::LOG_MAX_PD,
];

impl GeneralCaps {
    fn values(&self) -> [u64; 25] {
        [
            u64::from(self.qp_data_in_order),
            u64::from(self.log_max_srq_sz),
            u64::from(self.log_max_qp_sz),
            u64::from(self.log_max_qp),
            u64::from(self.log_max_cq_sz),
            u64::from(self.log_max_cq),
            u64::from(self.log_max_ra_req_dc),
            u64::from(self.log_max_ra_res_dc),
            u64::from(self.log_max_ra_req_qp),
            u64::from(self.log_max_ra_res_qp),
            u64::from(self.end_pad),
            u64::from(self.port_type),
            u64::from(self.num_ports),
            u64::from(self.log_max_msg),
            u64::from(self.cqe_version),
            u64::from(self.compact_address_vector),
            u64::from(self.dct),
            u64::from(self.atomic),
            u64::from(self.rc),
            u64::from(self.uar_4k),
            u64::from(self.umem_uid_0),
            u64::from(self.log_bf_reg_size),
            u64::from(self.max_wqe_sz_sq),
            u64::from(self.max_wqe_sz_sq_dc),
            u64::from(self.log_max_pd),
        ]
    }

    fn read(r: &BitReader<'_>) -> Result<Self, PrmError> {
        let g = |f: Field| r.get_as::<u8>(cap(f));
        let b = |f: Field| r.flag(cap(f));
        Ok(Self {
            qp_data_in_order: b(cmd_hca_cap::QP_DATA_IN_ORDER)?,
            log_max_srq_sz: g(cmd_hca_cap::LOG_MAX_SRQ_SZ)?,
            log_max_qp_sz: g(cmd_hca_cap::LOG_MAX_QP_SZ)?,
            log_max_qp: g(cmd_hca_cap::LOG_MAX_QP)?,
            log_max_cq_sz: g(cmd_hca_cap::LOG_MAX_CQ_SZ)?,
            log_max_cq: g(cmd_hca_cap::LOG_MAX_CQ)?,
            log_max_ra_req_dc: g(cmd_hca_cap::LOG_MAX_RA_REQ_DC)?,
            log_max_ra_res_dc: g(cmd_hca_cap::LOG_MAX_RA_RES_DC)?,
            log_max_ra_req_qp: g(cmd_hca_cap::LOG_MAX_RA_REQ_QP)?,
            log_max_ra_res_qp: g(cmd_hca_cap::LOG_MAX_RA_RES_QP)?,
            end_pad: b(cmd_hca_cap::END_PAD)?,
            port_type: g(cmd_hca_cap::PORT_TYPE)?,
            num_ports: g(cmd_hca_cap::NUM_PORTS)?,
            log_max_msg: g(cmd_hca_cap::LOG_MAX_MSG)?,
            cqe_version: g(cmd_hca_cap::CQE_VERSION)?,
            compact_address_vector: b(cmd_hca_cap::COMPACT_ADDRESS_VECTOR)?,
            dct: b(cmd_hca_cap::DCT)?,
            atomic: b(cmd_hca_cap::ATOMIC)?,
            rc: b(cmd_hca_cap::RC)?,
            uar_4k: b(cmd_hca_cap::UAR_4K)?,
            umem_uid_0: b(cmd_hca_cap::UMEM_UID_0)?,
            log_bf_reg_size: g(cmd_hca_cap::LOG_BF_REG_SIZE)?,
            max_wqe_sz_sq: r.get_as(cap(cmd_hca_cap::MAX_WQE_SZ_SQ))?,
            max_wqe_sz_sq_dc: r.get_as(cap(cmd_hca_cap::MAX_WQE_SZ_SQ_DC))?,
            log_max_pd: g(cmd_hca_cap::LOG_MAX_PD)?,
        })
    }
}

impl QueryHcaCapOutput {
    /// The output size in bytes: the header and the 4 KiB capability page.
    pub const OUTPUT_BYTES: usize = (QUERY_HCA_CAP_OUT_BITS / 8) as usize;

    /// The output bytes of a successful query.
    pub fn encode(&self) -> Result<Vec<u8>, PrmError> {
        let mut w = BitWriter::new("QUERY_HCA_CAP", Self::OUTPUT_BYTES);
        match self {
            Self::General(caps) => {
                for (field, value) in GENERAL_CAPS_FIELDS.iter().zip(caps.values()) {
                    w.set(cap(*field), value)?;
                }
            }
            Self::Atomic(caps) => {
                w.set(
                    cap(atomic_caps::ATOMIC_REQ_8B_ENDIANNESS_MODE),
                    caps.endianness_mode.wire(),
                )?;
                w.flag(
                    cap(atomic_caps::SUPPORTED_ATOMIC_REQ_8B_ENDIANNESS_MODE_1),
                    caps.host_endianness_supported,
                )?;
                w.set(
                    cap(atomic_caps::ATOMIC_OPERATIONS),
                    u64::from(caps.atomic_operations),
                )?;
                w.set(
                    cap(atomic_caps::ATOMIC_SIZE_QP),
                    u64::from(caps.atomic_size_qp),
                )?;
                w.set(
                    cap(atomic_caps::ATOMIC_SIZE_DC),
                    u64::from(caps.atomic_size_dc),
                )?;
            }
        }
        Ok(w.finish())
    }

    /// Parses the output of a query of `capability`: status first, then the page. Bits the
    /// decoder does not read are ignored (a real device sets many).
    pub fn decode(capability: CapabilityType, bytes: &[u8]) -> Result<Self, PrmError> {
        check_status("QUERY_HCA_CAP", bytes)?;
        let r = BitReader::new("QUERY_HCA_CAP", bytes, Self::OUTPUT_BYTES)?;
        Ok(match capability {
            CapabilityType::General => Self::General(GeneralCaps::read(&r)?),
            CapabilityType::Atomic => Self::Atomic(AtomicCaps {
                endianness_mode: AtomicEndianness::from_wire(
                    "QUERY_HCA_CAP",
                    r.get(cap(atomic_caps::ATOMIC_REQ_8B_ENDIANNESS_MODE))?,
                )?,
                host_endianness_supported: r
                    .flag(cap(atomic_caps::SUPPORTED_ATOMIC_REQ_8B_ENDIANNESS_MODE_1))?,
                atomic_operations: r.get_as(cap(atomic_caps::ATOMIC_OPERATIONS))?,
                atomic_size_qp: r.get_as(cap(atomic_caps::ATOMIC_SIZE_QP))?,
                atomic_size_dc: r.get_as(cap(atomic_caps::ATOMIC_SIZE_DC))?,
            }),
        })
    }

    /// Fails with [`PrmError::CommandError`] when the output reports a failure, naming
    /// QUERY_HCA_CAP; the failure bytes as the NIC writes them otherwise.
    pub fn encode_failure(status: CommandStatus, syndrome: u32) -> Result<Vec<u8>, PrmError> {
        let mut w = BitWriter::new("QUERY_HCA_CAP", Self::OUTPUT_BYTES);
        w.set(mbox_out::STATUS, u64::from(status.byte()))?;
        w.set(mbox_out::SYNDROME, u64::from(syndrome))?;
        Ok(w.finish())
    }
}

impl CommandOutput for QueryHcaCapOutput {
    const COMMAND: &'static str = "QUERY_HCA_CAP";
    const OUTPUT_BYTES: usize = QueryHcaCapOutput::OUTPUT_BYTES;

    fn encode(&self) -> Result<Vec<u8>, PrmError> {
        QueryHcaCapOutput::encode(self)
    }

    /// Decodes the general page; use [`QueryHcaCapOutput::decode`] for another page.
    fn decode(bytes: &[u8]) -> Result<Self, PrmError> {
        QueryHcaCapOutput::decode(CapabilityType::General, bytes)
    }
}

// ---------------------------------------------------------------------------------------
// ALLOC_UAR / DEALLOC_UAR

/// ALLOC_UAR: allocate a UAR page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AllocUar;

impl Command for AllocUar {
    const NAME: &'static str = "ALLOC_UAR";
    const OPCODE: u16 = opcode::ALLOC_UAR;
    const INPUT_BYTES: usize = alloc_uar_in::LAYOUT.bytes();
    const FIELDS: &'static [Field] = &[alloc_uar_in::OPCODE];
    type Output = AllocUarOutput;

    fn encode(&self) -> Result<Vec<u8>, PrmError> {
        let mut w = BitWriter::new(Self::NAME, Self::INPUT_BYTES);
        w.set(alloc_uar_in::OPCODE, u64::from(Self::OPCODE))?;
        Ok(w.finish())
    }

    fn decode(bytes: &[u8]) -> Result<Self, PrmError> {
        open::<Self>(bytes)?;
        Ok(Self)
    }
}

/// A command whose input is the common header and one object number: the DESTROY
/// commands, and 2ERR_QP / 2RST_QP (which name the queue pair as every modify command does).
macro_rules! object_command {
    ($(#[$meta:meta])* $name:ident, $command:literal, $opcode:expr, $layout:ident, $field:ident, $output:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name {
            /// The user context id (`uid`; DEVX fills it in from the context).
            pub uid: u16,
            /// The object to release (24 bits).
            pub $field: u32,
        }

        impl Command for $name {
            const NAME: &'static str = $command;
            const OPCODE: u16 = $opcode;
            const INPUT_BYTES: usize = $layout::LAYOUT.bytes();
            const FIELDS: &'static [Field] = &[$layout::OPCODE, $layout::UID, $layout::OBJECT];
            type Output = $output;

            fn encode(&self) -> Result<Vec<u8>, PrmError> {
                let mut w = BitWriter::new(Self::NAME, Self::INPUT_BYTES);
                w.set($layout::OPCODE, u64::from(Self::OPCODE))?;
                w.set($layout::UID, u64::from(self.uid))?;
                w.set($layout::OBJECT, u64::from(self.$field))?;
                Ok(w.finish())
            }

            fn decode(bytes: &[u8]) -> Result<Self, PrmError> {
                let r = open::<Self>(bytes)?;
                Ok(Self {
                    uid: r.get_as($layout::UID)?,
                    $field: r.get_as($layout::OBJECT)?,
                })
            }
        }
    };
}

/// DEALLOC_UAR: release a UAR page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeallocUar {
    /// The UAR page index (24 bits).
    pub uar: u32,
}

impl Command for DeallocUar {
    const NAME: &'static str = "DEALLOC_UAR";
    const OPCODE: u16 = opcode::DEALLOC_UAR;
    const INPUT_BYTES: usize = dealloc_uar_in::LAYOUT.bytes();
    const FIELDS: &'static [Field] = &[dealloc_uar_in::OPCODE, dealloc_uar_in::OBJECT];
    type Output = DeallocUarOutput;

    fn encode(&self) -> Result<Vec<u8>, PrmError> {
        let mut w = BitWriter::new(Self::NAME, Self::INPUT_BYTES);
        w.set(dealloc_uar_in::OPCODE, u64::from(Self::OPCODE))?;
        w.set(dealloc_uar_in::OBJECT, u64::from(self.uar))?;
        Ok(w.finish())
    }

    fn decode(bytes: &[u8]) -> Result<Self, PrmError> {
        let r = open::<Self>(bytes)?;
        Ok(Self {
            uar: r.get_as(dealloc_uar_in::OBJECT)?,
        })
    }
}

object_command!(
    /// DESTROY_CQ.
    DestroyCq, "DESTROY_CQ", opcode::DESTROY_CQ, destroy_cq_in, cqn, DestroyCqOutput
);
object_command!(
    /// DESTROY_QP.
    DestroyQp, "DESTROY_QP", opcode::DESTROY_QP, destroy_qp_in, qpn, DestroyQpOutput
);
object_command!(
    /// DESTROY_DCT.
    DestroyDct, "DESTROY_DCT", opcode::DESTROY_DCT, destroy_dct_in, dctn, DestroyDctOutput
);
object_command!(
    /// 2ERR_QP: moves a queue pair to the error state from any state; the NIC completes
    /// every outstanding WQE with a flush error.
    Qp2Err, "2ERR_QP", opcode::QP_2ERR, qp_2err_in, qpn, Qp2ErrOutput
);
object_command!(
    /// 2RST_QP: moves a queue pair to RESET from any state; the NIC forgets its send and
    /// receive progress (indices restart at 0) and writes no completions.
    Qp2Rst, "2RST_QP", opcode::QP_2RST, qp_2rst_in, qpn, Qp2RstOutput
);

// ---------------------------------------------------------------------------------------
// CREATE_CQ

/// The CQ context of CREATE_CQ (`cqc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CqContext {
    /// `dbr_umem_valid`: `dbr_addr` is an offset into the UMEM `dbr_umem_id`.
    pub dbr_umem_valid: bool,
    /// `dbr_umem_id`: the UMEM holding the doorbell record.
    pub dbr_umem_id: u32,
    /// `dbr_addr`: the doorbell record's address (or UMEM offset); 8-byte aligned.
    pub dbr_addr: u64,
    /// `cqe_sz`.
    pub cqe_size: CqeSize,
    /// `cc`: collapsed CQ (every CQE written to entry 0).
    pub collapsed: bool,
    /// `oi`: overrun ignore (the NIC never stops on a full CQ).
    pub overrun_ignore: bool,
    /// `log_cq_size` (5 bits).
    pub log_cq_size: u8,
    /// `uar_page` (24 bits): the UAR used to arm the CQ.
    pub uar_page: u32,
    /// `c_eqn` (8 bits): the completion EQ.
    pub c_eqn: u8,
    /// `log_page_size` (5 bits, 4 KiB units; 0 lets firmware deduce it from the UMEM).
    pub log_page_size: u8,
    /// `page_offset` (6 bits).
    pub page_offset: u8,
}

/// CREATE_CQ with its buffer in a UMEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CreateCq {
    /// `uid`.
    pub uid: u16,
    /// The CQ context.
    pub cqc: CqContext,
    /// `cq_umem_offset`: where the CQE buffer starts in the UMEM.
    pub cq_umem_offset: u64,
    /// `cq_umem_id`: the UMEM holding the CQE buffer.
    pub cq_umem_id: u32,
    /// `cq_umem_valid`: the buffer is given by UMEM (not a PAS list).
    pub cq_umem_valid: bool,
}

impl Command for CreateCq {
    const NAME: &'static str = "CREATE_CQ";
    const OPCODE: u16 = opcode::CREATE_CQ;
    const INPUT_BYTES: usize = create_cq_in::LAYOUT.bytes();
    const FIELDS: &'static [Field] = &[
        create_cq_in::OPCODE,
        create_cq_in::UID,
        c(cqc::DBR_UMEM_VALID),
        c(cqc::CQE_SZ),
        c(cqc::CC),
        c(cqc::OI),
        c(cqc::DBR_UMEM_ID),
        c(cqc::PAGE_OFFSET),
        c(cqc::LOG_CQ_SIZE),
        c(cqc::UAR_PAGE),
        c(cqc::C_EQN),
        c(cqc::LOG_PAGE_SIZE),
        c(cqc::DBR_ADDR),
        create_cq_in::CQ_UMEM_OFFSET,
        create_cq_in::CQ_UMEM_ID,
        create_cq_in::CQ_UMEM_VALID,
    ];
    type Output = CreateCqOutput;

    fn encode(&self) -> Result<Vec<u8>, PrmError> {
        let x = &self.cqc;
        if x.dbr_addr % 8 != 0 {
            return Err(PrmError::InvalidValue {
                command: Self::NAME,
                field: "dbr_addr (must be 8-byte aligned)",
                value: x.dbr_addr,
            });
        }
        let mut w = header(Self::NAME, Self::INPUT_BYTES, Self::OPCODE, self.uid, 0)?;
        w.flag(c(cqc::DBR_UMEM_VALID), x.dbr_umem_valid)?;
        w.set(c(cqc::CQE_SZ), x.cqe_size.wire())?;
        w.flag(c(cqc::CC), x.collapsed)?;
        w.flag(c(cqc::OI), x.overrun_ignore)?;
        w.set(c(cqc::DBR_UMEM_ID), u64::from(x.dbr_umem_id))?;
        w.set(c(cqc::PAGE_OFFSET), u64::from(x.page_offset))?;
        w.set(c(cqc::LOG_CQ_SIZE), u64::from(x.log_cq_size))?;
        w.set(c(cqc::UAR_PAGE), u64::from(x.uar_page))?;
        w.set(c(cqc::C_EQN), u64::from(x.c_eqn))?;
        w.set(c(cqc::LOG_PAGE_SIZE), u64::from(x.log_page_size))?;
        w.set(c(cqc::DBR_ADDR), x.dbr_addr)?;
        w.set(create_cq_in::CQ_UMEM_OFFSET, self.cq_umem_offset)?;
        w.set(create_cq_in::CQ_UMEM_ID, u64::from(self.cq_umem_id))?;
        w.flag(create_cq_in::CQ_UMEM_VALID, self.cq_umem_valid)?;
        Ok(w.finish())
    }

    fn decode(bytes: &[u8]) -> Result<Self, PrmError> {
        let r = open::<Self>(bytes)?;
        let dbr_addr = r.get(c(cqc::DBR_ADDR))?;
        if dbr_addr % 8 != 0 {
            return Err(PrmError::InvalidValue {
                command: Self::NAME,
                field: "dbr_addr (must be 8-byte aligned)",
                value: dbr_addr,
            });
        }
        Ok(Self {
            uid: r.get_as(create_cq_in::UID)?,
            cqc: CqContext {
                dbr_umem_valid: r.flag(c(cqc::DBR_UMEM_VALID))?,
                dbr_umem_id: r.get_as(c(cqc::DBR_UMEM_ID))?,
                dbr_addr,
                cqe_size: CqeSize::from_wire(Self::NAME, r.get(c(cqc::CQE_SZ))?)?,
                collapsed: r.flag(c(cqc::CC))?,
                overrun_ignore: r.flag(c(cqc::OI))?,
                log_cq_size: r.get_as(c(cqc::LOG_CQ_SIZE))?,
                uar_page: r.get_as(c(cqc::UAR_PAGE))?,
                c_eqn: r.get_as(c(cqc::C_EQN))?,
                log_page_size: r.get_as(c(cqc::LOG_PAGE_SIZE))?,
                page_offset: r.get_as(c(cqc::PAGE_OFFSET))?,
            },
            cq_umem_offset: r.get(create_cq_in::CQ_UMEM_OFFSET)?,
            cq_umem_id: r.get_as(create_cq_in::CQ_UMEM_ID)?,
            cq_umem_valid: r.flag(create_cq_in::CQ_UMEM_VALID)?,
        })
    }
}

// ---------------------------------------------------------------------------------------
// CREATE_QP

/// The QP context CREATE_QP carries (the `qpc` fields set at creation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QpCreateContext {
    /// `st`: RC or DCI.
    pub service_type: ServiceType,
    /// `isolate_vl_tc`.
    pub isolate_vl_tc: bool,
    /// `pm_state`.
    pub pm_state: PmState,
    /// `pd` (24 bits): the protection domain number.
    pub pd: u32,
    /// `log_sq_size` (4 bits): log2 of the SQ's WQEBBs.
    pub log_sq_size: u8,
    /// `ts_format` (2 bits): CQE timestamp format.
    pub ts_format: u8,
    /// `uar_page` (24 bits): the UAR the doorbell is rung through.
    pub uar_page: u32,
    /// `user_index` (24 bits): reported in CQEs (cqe_version 1).
    pub user_index: u32,
    /// `log_page_size` (5 bits, 4 KiB units; 0 lets firmware deduce it from the UMEM).
    pub log_page_size: u8,
    /// `cqn_snd` (24 bits).
    pub cqn_snd: u32,
    /// `page_offset` (6 bits).
    pub page_offset: u8,
    /// `cqn_rcv` (24 bits).
    pub cqn_rcv: u32,
    /// `dbr_addr`: the doorbell record's address (or offset into `dbr_umem_id`).
    pub dbr_addr: u64,
    /// `rq_type` with `log_rq_size`, `log_rq_stride` or `srqn_rmpn_xrqn`.
    pub receive: ReceiveQueue,
    /// `dbr_umem_valid`: `dbr_addr` is an offset into the UMEM `dbr_umem_id`.
    pub dbr_umem_valid: bool,
    /// `dbr_umem_id`.
    pub dbr_umem_id: u32,
}

/// CREATE_QP for an RC QP or a DCI, with its work queue in a UMEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CreateQp {
    /// `uid`.
    pub uid: u16,
    /// `opt_param_mask`.
    pub opt_param_mask: u32,
    /// The QP context.
    pub qpc: QpCreateContext,
    /// `wq_umem_offset`: where the work queue starts in the UMEM.
    pub wq_umem_offset: u64,
    /// `wq_umem_id`: the UMEM holding the work queue.
    pub wq_umem_id: u32,
    /// `wq_umem_valid`: the work queue is given by UMEM (not a PAS list).
    pub wq_umem_valid: bool,
}

impl Command for CreateQp {
    const NAME: &'static str = "CREATE_QP";
    const OPCODE: u16 = opcode::CREATE_QP;
    const INPUT_BYTES: usize = create_qp_in::LAYOUT.bytes();
    const FIELDS: &'static [Field] = &[
        create_qp_in::OPCODE,
        create_qp_in::UID,
        create_qp_in::OPT_PARAM_MASK,
        q(qpc::ST),
        q(qpc::ISOLATE_VL_TC),
        q(qpc::PM_STATE),
        q(qpc::PD),
        q(qpc::LOG_RQ_SIZE),
        q(qpc::LOG_RQ_STRIDE),
        q(qpc::LOG_SQ_SIZE),
        q(qpc::TS_FORMAT),
        q(qpc::UAR_PAGE),
        q(qpc::USER_INDEX),
        q(qpc::LOG_PAGE_SIZE),
        q(qpc::CQN_SND),
        q(qpc::PAGE_OFFSET),
        q(qpc::CQN_RCV),
        q(qpc::DBR_ADDR),
        q(qpc::RQ_TYPE),
        q(qpc::SRQN_RMPN_XRQN),
        q(qpc::DBR_UMEM_VALID),
        q(qpc::DBR_UMEM_ID),
        create_qp_in::WQ_UMEM_OFFSET,
        create_qp_in::WQ_UMEM_ID,
        create_qp_in::WQ_UMEM_VALID,
    ];
    type Output = CreateQpOutput;

    fn encode(&self) -> Result<Vec<u8>, PrmError> {
        let x = &self.qpc;
        let mut w = header(Self::NAME, Self::INPUT_BYTES, Self::OPCODE, self.uid, 0)?;
        w.set(create_qp_in::OPT_PARAM_MASK, u64::from(self.opt_param_mask))?;
        w.set(q(qpc::ST), x.service_type.wire())?;
        w.flag(q(qpc::ISOLATE_VL_TC), x.isolate_vl_tc)?;
        w.set(q(qpc::PM_STATE), x.pm_state.wire())?;
        w.set(q(qpc::PD), u64::from(x.pd))?;
        w.set(q(qpc::LOG_SQ_SIZE), u64::from(x.log_sq_size))?;
        w.set(q(qpc::TS_FORMAT), u64::from(x.ts_format))?;
        w.set(q(qpc::UAR_PAGE), u64::from(x.uar_page))?;
        w.set(q(qpc::USER_INDEX), u64::from(x.user_index))?;
        w.set(q(qpc::LOG_PAGE_SIZE), u64::from(x.log_page_size))?;
        w.set(q(qpc::CQN_SND), u64::from(x.cqn_snd))?;
        w.set(q(qpc::PAGE_OFFSET), u64::from(x.page_offset))?;
        w.set(q(qpc::CQN_RCV), u64::from(x.cqn_rcv))?;
        w.set(q(qpc::DBR_ADDR), x.dbr_addr)?;
        w.set(q(qpc::RQ_TYPE), x.receive.rq_type())?;
        match x.receive {
            ReceiveQueue::Regular {
                log_rq_size,
                log_rq_stride,
            } => {
                w.set(q(qpc::LOG_RQ_SIZE), u64::from(log_rq_size))?;
                w.set(q(qpc::LOG_RQ_STRIDE), u64::from(log_rq_stride))?;
            }
            ReceiveQueue::Srq { srqn } => w.set(q(qpc::SRQN_RMPN_XRQN), u64::from(srqn))?,
            ReceiveQueue::ZeroSize => {}
        }
        w.flag(q(qpc::DBR_UMEM_VALID), x.dbr_umem_valid)?;
        w.set(q(qpc::DBR_UMEM_ID), u64::from(x.dbr_umem_id))?;
        w.set(create_qp_in::WQ_UMEM_OFFSET, self.wq_umem_offset)?;
        w.set(create_qp_in::WQ_UMEM_ID, u64::from(self.wq_umem_id))?;
        w.flag(create_qp_in::WQ_UMEM_VALID, self.wq_umem_valid)?;
        Ok(w.finish())
    }

    fn decode(bytes: &[u8]) -> Result<Self, PrmError> {
        let r = open::<Self>(bytes)?;
        let log_rq_size: u8 = r.get_as(q(qpc::LOG_RQ_SIZE))?;
        let log_rq_stride: u8 = r.get_as(q(qpc::LOG_RQ_STRIDE))?;
        let srqn: u32 = r.get_as(q(qpc::SRQN_RMPN_XRQN))?;
        let rq_type = r.get(q(qpc::RQ_TYPE))?;
        // Each receive kind owns its fields; a field of another kind set is malformed.
        let unused = |field: Field, value: u64| -> Result<(), PrmError> {
            if value == 0 {
                Ok(())
            } else {
                Err(PrmError::InvalidValue {
                    command: Self::NAME,
                    field: field.name,
                    value,
                })
            }
        };
        let receive = match rq_type {
            0 => {
                unused(qpc::SRQN_RMPN_XRQN, u64::from(srqn))?;
                ReceiveQueue::Regular {
                    log_rq_size,
                    log_rq_stride,
                }
            }
            1 | 3 => {
                unused(qpc::LOG_RQ_SIZE, u64::from(log_rq_size))?;
                unused(qpc::LOG_RQ_STRIDE, u64::from(log_rq_stride))?;
                if rq_type == 1 {
                    ReceiveQueue::Srq { srqn }
                } else {
                    unused(qpc::SRQN_RMPN_XRQN, u64::from(srqn))?;
                    ReceiveQueue::ZeroSize
                }
            }
            other => {
                return Err(PrmError::InvalidValue {
                    command: Self::NAME,
                    field: "rq_type",
                    value: other,
                })
            }
        };
        Ok(Self {
            uid: r.get_as(create_qp_in::UID)?,
            opt_param_mask: r.get_as(create_qp_in::OPT_PARAM_MASK)?,
            qpc: QpCreateContext {
                service_type: ServiceType::from_wire(Self::NAME, r.get(q(qpc::ST))?)?,
                isolate_vl_tc: r.flag(q(qpc::ISOLATE_VL_TC))?,
                pm_state: PmState::from_wire(Self::NAME, r.get(q(qpc::PM_STATE))?)?,
                pd: r.get_as(q(qpc::PD))?,
                log_sq_size: r.get_as(q(qpc::LOG_SQ_SIZE))?,
                ts_format: r.get_as(q(qpc::TS_FORMAT))?,
                uar_page: r.get_as(q(qpc::UAR_PAGE))?,
                user_index: r.get_as(q(qpc::USER_INDEX))?,
                log_page_size: r.get_as(q(qpc::LOG_PAGE_SIZE))?,
                cqn_snd: r.get_as(q(qpc::CQN_SND))?,
                page_offset: r.get_as(q(qpc::PAGE_OFFSET))?,
                cqn_rcv: r.get_as(q(qpc::CQN_RCV))?,
                dbr_addr: r.get(q(qpc::DBR_ADDR))?,
                receive,
                dbr_umem_valid: r.flag(q(qpc::DBR_UMEM_VALID))?,
                dbr_umem_id: r.get_as(q(qpc::DBR_UMEM_ID))?,
            },
            wq_umem_offset: r.get(create_qp_in::WQ_UMEM_OFFSET)?,
            wq_umem_id: r.get_as(create_qp_in::WQ_UMEM_ID)?,
            wq_umem_valid: r.flag(create_qp_in::WQ_UMEM_VALID)?,
        })
    }
}

// ---------------------------------------------------------------------------------------
// The QP state transitions

/// Remote access the responder allows (`rre`, `rwe`, `rae`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RemoteAccess {
    /// `rre`: remote RDMA read.
    pub read: bool,
    /// `rwe`: remote RDMA write.
    pub write: bool,
    /// `rae`: remote atomics.
    pub atomic: bool,
}

impl RemoteAccess {
    /// Read, write and atomics all allowed.
    pub const ALL: Self = Self {
        read: true,
        write: true,
        atomic: true,
    };
}

/// The primary address path INIT2RTR sets (an `ads`): InfiniBand (LID) or RoCE (GID, MAC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AddressPath {
    /// `fl`: force loopback (no address needed).
    pub force_loopback: bool,
    /// `pkey_index` (16 bits).
    pub pkey_index: u16,
    /// `grh`: a global route header is sent (RoCE always; IB across subnets).
    pub grh: bool,
    /// `rlid` (16 bits): the remote LID (InfiniBand).
    pub rlid: u16,
    /// `src_addr_index` (8 bits): the local GID table index.
    pub src_addr_index: u8,
    /// `stat_rate` (4 bits): static rate limit (0 = port rate).
    pub stat_rate: u8,
    /// `hop_limit` (8 bits).
    pub hop_limit: u8,
    /// `tclass` (8 bits): the GRH traffic class.
    pub tclass: u8,
    /// `flow_label` (20 bits).
    pub flow_label: u32,
    /// `rgid_rip`: the remote GID (or IP for RoCE v2), 16 bytes as on the wire.
    pub rgid: [u8; 16],
    /// `dscp` (6 bits, RoCE).
    pub dscp: u8,
    /// `udp_sport` (16 bits, RoCE v2 source port; 0 lets the NIC choose).
    pub udp_sport: u16,
    /// `eth_prio` (3 bits, RoCE).
    pub eth_prio: u8,
    /// `sl` (4 bits): the InfiniBand service level.
    pub sl: u8,
    /// `vhca_port_num` (8 bits): the port, from 1.
    pub vhca_port_num: u8,
    /// `rmac_47_32` and `rmac_31_0`: the next hop's MAC (RoCE), as on the wire.
    pub rmac: [u8; 6],
}

impl AddressPath {
    /// An InfiniBand path: the peer's LID and the service level, no GRH.
    pub const fn infiniband(vhca_port_num: u8, rlid: u16, sl: u8) -> Self {
        Self {
            force_loopback: false,
            pkey_index: 0,
            grh: false,
            rlid,
            src_addr_index: 0,
            stat_rate: 0,
            hop_limit: 0,
            tclass: 0,
            flow_label: 0,
            rgid: [0; 16],
            dscp: 0,
            udp_sport: 0,
            eth_prio: 0,
            sl,
            vhca_port_num,
            rmac: [0; 6],
        }
    }

    /// A RoCE path: the peer's GID and next-hop MAC, the local GID index, the GRH's
    /// `hop_limit`, and the RoCE v2 UDP source port (0 on RoCE v1). `grh` stays clear: on
    /// Ethernet every packet carries a GRH and the bit is reserved (rdma-core's
    /// `mlx5_create_ah`, the kernel's `mlx5_set_path`, NVSHMEM and DOCA all leave it 0).
    pub const fn roce(
        vhca_port_num: u8,
        rgid: [u8; 16],
        rmac: [u8; 6],
        src_addr_index: u8,
        hop_limit: u8,
        udp_sport: u16,
    ) -> Self {
        Self {
            force_loopback: false,
            pkey_index: 0,
            grh: false,
            rlid: 0,
            src_addr_index,
            stat_rate: 0,
            hop_limit,
            tclass: 0,
            flow_label: 0,
            rgid,
            dscp: 0,
            udp_sport,
            eth_prio: 0,
            sl: 0,
            vhca_port_num,
            rmac,
        }
    }
}

/// RST2INIT_QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rst2InitQp {
    /// `uid`.
    pub uid: u16,
    /// `qpn` (24 bits).
    pub qpn: u32,
    /// `opt_param_mask`.
    pub opt_param_mask: u32,
    /// `pm_state`.
    pub pm_state: PmState,
    /// `primary_address_path.vhca_port_num` (8 bits).
    pub vhca_port_num: u8,
    /// `primary_address_path.pkey_index` (16 bits).
    pub pkey_index: u16,
    /// `rre`, `rwe`, `rae` (RC responders).
    pub access: RemoteAccess,
    /// `atomic_mode`.
    pub atomic_mode: AtomicMode,
    /// `dc_access_key` (DCIs: the key targets check).
    pub dc_access_key: u64,
}

fn modify_header(
    command: &'static str,
    opcode: u16,
    uid: u16,
    qpn: u32,
    opt_param_mask: u32,
) -> Result<BitWriter, PrmError> {
    let mut w = header(command, modify_qp_in::LAYOUT.bytes(), opcode, uid, 0)?;
    w.set(modify_qp_in::QPN, u64::from(qpn))?;
    w.set(modify_qp_in::OPT_PARAM_MASK, u64::from(opt_param_mask))?;
    Ok(w)
}

impl Command for Rst2InitQp {
    const NAME: &'static str = "RST2INIT_QP";
    const OPCODE: u16 = opcode::RST2INIT_QP;
    const INPUT_BYTES: usize = modify_qp_in::LAYOUT.bytes();
    const FIELDS: &'static [Field] = &[
        modify_qp_in::OPCODE,
        modify_qp_in::UID,
        modify_qp_in::QPN,
        modify_qp_in::OPT_PARAM_MASK,
        q(qpc::PM_STATE),
        p(ads::PKEY_INDEX),
        p(ads::VHCA_PORT_NUM),
        q(qpc::ATOMIC_MODE),
        q(qpc::RRE),
        q(qpc::RWE),
        q(qpc::RAE),
        q(qpc::DC_ACCESS_KEY),
    ];
    type Output = Rst2InitQpOutput;

    fn encode(&self) -> Result<Vec<u8>, PrmError> {
        let mut w = modify_header(
            Self::NAME,
            Self::OPCODE,
            self.uid,
            self.qpn,
            self.opt_param_mask,
        )?;
        w.set(q(qpc::PM_STATE), self.pm_state.wire())?;
        w.set(p(ads::PKEY_INDEX), u64::from(self.pkey_index))?;
        w.set(p(ads::VHCA_PORT_NUM), u64::from(self.vhca_port_num))?;
        w.set(q(qpc::ATOMIC_MODE), self.atomic_mode.wire())?;
        w.flag(q(qpc::RRE), self.access.read)?;
        w.flag(q(qpc::RWE), self.access.write)?;
        w.flag(q(qpc::RAE), self.access.atomic)?;
        w.set(q(qpc::DC_ACCESS_KEY), self.dc_access_key)?;
        Ok(w.finish())
    }

    fn decode(bytes: &[u8]) -> Result<Self, PrmError> {
        let r = open::<Self>(bytes)?;
        Ok(Self {
            uid: r.get_as(modify_qp_in::UID)?,
            qpn: r.get_as(modify_qp_in::QPN)?,
            opt_param_mask: r.get_as(modify_qp_in::OPT_PARAM_MASK)?,
            pm_state: PmState::from_wire(Self::NAME, r.get(q(qpc::PM_STATE))?)?,
            vhca_port_num: r.get_as(p(ads::VHCA_PORT_NUM))?,
            pkey_index: r.get_as(p(ads::PKEY_INDEX))?,
            access: RemoteAccess {
                read: r.flag(q(qpc::RRE))?,
                write: r.flag(q(qpc::RWE))?,
                atomic: r.flag(q(qpc::RAE))?,
            },
            atomic_mode: AtomicMode::from_wire(Self::NAME, r.get(q(qpc::ATOMIC_MODE))?)?,
            dc_access_key: r.get(q(qpc::DC_ACCESS_KEY))?,
        })
    }
}

/// INIT2RTR_QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Init2RtrQp {
    /// `uid`.
    pub uid: u16,
    /// `qpn` (24 bits).
    pub qpn: u32,
    /// `opt_param_mask`.
    pub opt_param_mask: u32,
    /// `mtu`.
    pub mtu: Mtu,
    /// `log_msg_max` (5 bits): the largest message, log2 of bytes.
    pub log_msg_max: u8,
    /// `remote_qpn` (24 bits, RC).
    pub remote_qpn: u32,
    /// `next_rcv_psn` (24 bits, RC): the peer's first PSN.
    pub next_rcv_psn: u32,
    /// `min_rnr_nak` (5 bits, RC): the RNR NAK timer this responder advertises.
    pub min_rnr_nak: u8,
    /// `log_rra_max` (3 bits, RC): outstanding RDMA reads/atomics served, log2.
    pub log_rra_max: u8,
    /// The primary address path.
    pub path: AddressPath,
}

const ADDRESS_PATH_FIELDS: [Field; 17] = [
    p(ads::FL),
    p(ads::PKEY_INDEX),
    p(ads::GRH),
    p(ads::RLID),
    p(ads::SRC_ADDR_INDEX),
    p(ads::STAT_RATE),
    p(ads::HOP_LIMIT),
    p(ads::TCLASS),
    p(ads::FLOW_LABEL),
    p(ads::RGID_RIP),
    p(ads::DSCP),
    p(ads::UDP_SPORT),
    p(ads::ETH_PRIO),
    p(ads::SL),
    p(ads::VHCA_PORT_NUM),
    p(ads::RMAC_47_32),
    p(ads::RMAC_31_0),
];

impl AddressPath {
    fn write(&self, w: &mut BitWriter) -> Result<(), PrmError> {
        w.flag(p(ads::FL), self.force_loopback)?;
        w.set(p(ads::PKEY_INDEX), u64::from(self.pkey_index))?;
        w.flag(p(ads::GRH), self.grh)?;
        w.set(p(ads::RLID), u64::from(self.rlid))?;
        w.set(p(ads::SRC_ADDR_INDEX), u64::from(self.src_addr_index))?;
        w.set(p(ads::STAT_RATE), u64::from(self.stat_rate))?;
        w.set(p(ads::HOP_LIMIT), u64::from(self.hop_limit))?;
        w.set(p(ads::TCLASS), u64::from(self.tclass))?;
        w.set(p(ads::FLOW_LABEL), u64::from(self.flow_label))?;
        w.set_bytes(p(ads::RGID_RIP), &self.rgid)?;
        w.set(p(ads::DSCP), u64::from(self.dscp))?;
        w.set(p(ads::UDP_SPORT), u64::from(self.udp_sport))?;
        w.set(p(ads::ETH_PRIO), u64::from(self.eth_prio))?;
        w.set(p(ads::SL), u64::from(self.sl))?;
        w.set(p(ads::VHCA_PORT_NUM), u64::from(self.vhca_port_num))?;
        let [m0, m1, m2, m3, m4, m5] = self.rmac;
        w.set(p(ads::RMAC_47_32), u64::from(u16::from_be_bytes([m0, m1])))?;
        w.set(
            p(ads::RMAC_31_0),
            u64::from(u32::from_be_bytes([m2, m3, m4, m5])),
        )?;
        Ok(())
    }

    fn read(r: &BitReader<'_>) -> Result<Self, PrmError> {
        let high: u16 = r.get_as(p(ads::RMAC_47_32))?;
        let low: u32 = r.get_as(p(ads::RMAC_31_0))?;
        let [m0, m1] = high.to_be_bytes();
        let [m2, m3, m4, m5] = low.to_be_bytes();
        Ok(Self {
            force_loopback: r.flag(p(ads::FL))?,
            pkey_index: r.get_as(p(ads::PKEY_INDEX))?,
            grh: r.flag(p(ads::GRH))?,
            rlid: r.get_as(p(ads::RLID))?,
            src_addr_index: r.get_as(p(ads::SRC_ADDR_INDEX))?,
            stat_rate: r.get_as(p(ads::STAT_RATE))?,
            hop_limit: r.get_as(p(ads::HOP_LIMIT))?,
            tclass: r.get_as(p(ads::TCLASS))?,
            flow_label: r.get_as(p(ads::FLOW_LABEL))?,
            rgid: r.get_bytes(p(ads::RGID_RIP))?,
            dscp: r.get_as(p(ads::DSCP))?,
            udp_sport: r.get_as(p(ads::UDP_SPORT))?,
            eth_prio: r.get_as(p(ads::ETH_PRIO))?,
            sl: r.get_as(p(ads::SL))?,
            vhca_port_num: r.get_as(p(ads::VHCA_PORT_NUM))?,
            rmac: [m0, m1, m2, m3, m4, m5],
        })
    }
}

const INIT2RTR_FIELDS: [Field; 27] = {
    let head = [
        modify_qp_in::OPCODE,
        modify_qp_in::UID,
        modify_qp_in::QPN,
        modify_qp_in::OPT_PARAM_MASK,
        q(qpc::MTU),
        q(qpc::LOG_MSG_MAX),
        q(qpc::REMOTE_QPN),
        q(qpc::LOG_RRA_MAX),
        q(qpc::MIN_RNR_NAK),
        q(qpc::NEXT_RCV_PSN),
    ];
    let mut all = [head[0]; 27];
    let mut i = 0;
    while i < head.len() {
        all[i] = head[i];
        i += 1;
    }
    let mut j = 0;
    while j < ADDRESS_PATH_FIELDS.len() {
        all[head.len() + j] = ADDRESS_PATH_FIELDS[j];
        j += 1;
    }
    all
};

impl Command for Init2RtrQp {
    const NAME: &'static str = "INIT2RTR_QP";
    const OPCODE: u16 = opcode::INIT2RTR_QP;
    const INPUT_BYTES: usize = modify_qp_in::LAYOUT.bytes();
    const FIELDS: &'static [Field] = &INIT2RTR_FIELDS;
    type Output = Init2RtrQpOutput;

    fn encode(&self) -> Result<Vec<u8>, PrmError> {
        let mut w = modify_header(
            Self::NAME,
            Self::OPCODE,
            self.uid,
            self.qpn,
            self.opt_param_mask,
        )?;
        w.set(q(qpc::MTU), self.mtu.wire())?;
        w.set(q(qpc::LOG_MSG_MAX), u64::from(self.log_msg_max))?;
        w.set(q(qpc::REMOTE_QPN), u64::from(self.remote_qpn))?;
        w.set(q(qpc::LOG_RRA_MAX), u64::from(self.log_rra_max))?;
        w.set(q(qpc::MIN_RNR_NAK), u64::from(self.min_rnr_nak))?;
        w.set(q(qpc::NEXT_RCV_PSN), u64::from(self.next_rcv_psn))?;
        self.path.write(&mut w)?;
        Ok(w.finish())
    }

    fn decode(bytes: &[u8]) -> Result<Self, PrmError> {
        let r = open::<Self>(bytes)?;
        Ok(Self {
            uid: r.get_as(modify_qp_in::UID)?,
            qpn: r.get_as(modify_qp_in::QPN)?,
            opt_param_mask: r.get_as(modify_qp_in::OPT_PARAM_MASK)?,
            mtu: Mtu::from_wire(Self::NAME, r.get(q(qpc::MTU))?)?,
            log_msg_max: r.get_as(q(qpc::LOG_MSG_MAX))?,
            remote_qpn: r.get_as(q(qpc::REMOTE_QPN))?,
            next_rcv_psn: r.get_as(q(qpc::NEXT_RCV_PSN))?,
            min_rnr_nak: r.get_as(q(qpc::MIN_RNR_NAK))?,
            log_rra_max: r.get_as(q(qpc::LOG_RRA_MAX))?,
            path: AddressPath::read(&r)?,
        })
    }
}

/// RTR2RTS_QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rtr2RtsQp {
    /// `uid`.
    pub uid: u16,
    /// `qpn` (24 bits).
    pub qpn: u32,
    /// `opt_param_mask`.
    pub opt_param_mask: u32,
    /// `log_ack_req_freq` (4 bits).
    pub log_ack_req_freq: u8,
    /// `log_sra_max` (3 bits): outstanding RDMA reads/atomics issued, log2.
    pub log_sra_max: u8,
    /// `retry_count` (3 bits).
    pub retry_count: u8,
    /// `rnr_retry` (3 bits; 7 = infinite).
    pub rnr_retry: u8,
    /// `next_send_psn` (24 bits): this QP's first PSN.
    pub next_send_psn: u32,
    /// `primary_address_path.ack_timeout` (5 bits): 4.096 us * 2^ack_timeout.
    pub ack_timeout: u8,
}

impl Command for Rtr2RtsQp {
    const NAME: &'static str = "RTR2RTS_QP";
    const OPCODE: u16 = opcode::RTR2RTS_QP;
    const INPUT_BYTES: usize = modify_qp_in::LAYOUT.bytes();
    const FIELDS: &'static [Field] = &[
        modify_qp_in::OPCODE,
        modify_qp_in::UID,
        modify_qp_in::QPN,
        modify_qp_in::OPT_PARAM_MASK,
        p(ads::ACK_TIMEOUT),
        q(qpc::LOG_ACK_REQ_FREQ),
        q(qpc::LOG_SRA_MAX),
        q(qpc::RETRY_COUNT),
        q(qpc::RNR_RETRY),
        q(qpc::NEXT_SEND_PSN),
    ];
    type Output = Rtr2RtsQpOutput;

    fn encode(&self) -> Result<Vec<u8>, PrmError> {
        let mut w = modify_header(
            Self::NAME,
            Self::OPCODE,
            self.uid,
            self.qpn,
            self.opt_param_mask,
        )?;
        w.set(p(ads::ACK_TIMEOUT), u64::from(self.ack_timeout))?;
        w.set(q(qpc::LOG_ACK_REQ_FREQ), u64::from(self.log_ack_req_freq))?;
        w.set(q(qpc::LOG_SRA_MAX), u64::from(self.log_sra_max))?;
        w.set(q(qpc::RETRY_COUNT), u64::from(self.retry_count))?;
        w.set(q(qpc::RNR_RETRY), u64::from(self.rnr_retry))?;
        w.set(q(qpc::NEXT_SEND_PSN), u64::from(self.next_send_psn))?;
        Ok(w.finish())
    }

    fn decode(bytes: &[u8]) -> Result<Self, PrmError> {
        let r = open::<Self>(bytes)?;
        Ok(Self {
            uid: r.get_as(modify_qp_in::UID)?,
            qpn: r.get_as(modify_qp_in::QPN)?,
            opt_param_mask: r.get_as(modify_qp_in::OPT_PARAM_MASK)?,
            log_ack_req_freq: r.get_as(q(qpc::LOG_ACK_REQ_FREQ))?,
            log_sra_max: r.get_as(q(qpc::LOG_SRA_MAX))?,
            retry_count: r.get_as(q(qpc::RETRY_COUNT))?,
            rnr_retry: r.get_as(q(qpc::RNR_RETRY))?,
            next_send_psn: r.get_as(q(qpc::NEXT_SEND_PSN))?,
            ack_timeout: r.get_as(p(ads::ACK_TIMEOUT))?,
        })
    }
}

// ---------------------------------------------------------------------------------------
// CREATE_DCT

/// The DC target context (`dctc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DctContext {
    /// `user_index` (24 bits).
    pub user_index: u32,
    /// `cqn` (24 bits): the CQ receiving the target's completions.
    pub cqn: u32,
    /// `atomic_mode`.
    pub atomic_mode: AtomicMode,
    /// `rre`, `rwe`, `rae`.
    pub access: RemoteAccess,
    /// `min_rnr_nak` (5 bits).
    pub min_rnr_nak: u8,
    /// `srqn_xrqn` (24 bits): the SRQ receives come from.
    pub srqn: u32,
    /// `pd` (24 bits).
    pub pd: u32,
    /// `tclass` (8 bits).
    pub tclass: u8,
    /// `flow_label` (20 bits).
    pub flow_label: u32,
    /// `dc_access_key`: initiators must present it.
    pub dc_access_key: u64,
    /// `mtu`.
    pub mtu: Mtu,
    /// `port` (8 bits), from 1.
    pub port: u8,
    /// `pkey_index` (16 bits).
    pub pkey_index: u16,
    /// `my_addr_index` (8 bits): the local GID index.
    pub my_addr_index: u8,
    /// `hop_limit` (8 bits).
    pub hop_limit: u8,
    /// `eth_prio` (3 bits).
    pub eth_prio: u8,
    /// `dscp` (6 bits).
    pub dscp: u8,
}

/// CREATE_DCT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CreateDct {
    /// `uid`.
    pub uid: u16,
    /// The target context.
    pub dctc: DctContext,
}

impl Command for CreateDct {
    const NAME: &'static str = "CREATE_DCT";
    const OPCODE: u16 = opcode::CREATE_DCT;
    const INPUT_BYTES: usize = create_dct_in::LAYOUT.bytes();
    const FIELDS: &'static [Field] = &[
        create_dct_in::OPCODE,
        create_dct_in::UID,
        d(dctc::USER_INDEX),
        d(dctc::CQN),
        d(dctc::ATOMIC_MODE),
        d(dctc::RRE),
        d(dctc::RWE),
        d(dctc::RAE),
        d(dctc::MIN_RNR_NAK),
        d(dctc::SRQN_XRQN),
        d(dctc::PD),
        d(dctc::TCLASS),
        d(dctc::FLOW_LABEL),
        d(dctc::DC_ACCESS_KEY),
        d(dctc::MTU),
        d(dctc::PORT),
        d(dctc::PKEY_INDEX),
        d(dctc::MY_ADDR_INDEX),
        d(dctc::HOP_LIMIT),
        d(dctc::ETH_PRIO),
        d(dctc::DSCP),
    ];
    type Output = CreateDctOutput;

    fn encode(&self) -> Result<Vec<u8>, PrmError> {
        let x = &self.dctc;
        let mut w = header(Self::NAME, Self::INPUT_BYTES, Self::OPCODE, self.uid, 0)?;
        w.set(d(dctc::USER_INDEX), u64::from(x.user_index))?;
        w.set(d(dctc::CQN), u64::from(x.cqn))?;
        w.set(d(dctc::ATOMIC_MODE), x.atomic_mode.wire())?;
        w.flag(d(dctc::RRE), x.access.read)?;
        w.flag(d(dctc::RWE), x.access.write)?;
        w.flag(d(dctc::RAE), x.access.atomic)?;
        w.set(d(dctc::MIN_RNR_NAK), u64::from(x.min_rnr_nak))?;
        w.set(d(dctc::SRQN_XRQN), u64::from(x.srqn))?;
        w.set(d(dctc::PD), u64::from(x.pd))?;
        w.set(d(dctc::TCLASS), u64::from(x.tclass))?;
        w.set(d(dctc::FLOW_LABEL), u64::from(x.flow_label))?;
        w.set(d(dctc::DC_ACCESS_KEY), x.dc_access_key)?;
        w.set(d(dctc::MTU), x.mtu.wire())?;
        w.set(d(dctc::PORT), u64::from(x.port))?;
        w.set(d(dctc::PKEY_INDEX), u64::from(x.pkey_index))?;
        w.set(d(dctc::MY_ADDR_INDEX), u64::from(x.my_addr_index))?;
        w.set(d(dctc::HOP_LIMIT), u64::from(x.hop_limit))?;
        w.set(d(dctc::ETH_PRIO), u64::from(x.eth_prio))?;
        w.set(d(dctc::DSCP), u64::from(x.dscp))?;
        Ok(w.finish())
    }

    fn decode(bytes: &[u8]) -> Result<Self, PrmError> {
        let r = open::<Self>(bytes)?;
        Ok(Self {
            uid: r.get_as(create_dct_in::UID)?,
            dctc: DctContext {
                user_index: r.get_as(d(dctc::USER_INDEX))?,
                cqn: r.get_as(d(dctc::CQN))?,
                atomic_mode: AtomicMode::from_wire(Self::NAME, r.get(d(dctc::ATOMIC_MODE))?)?,
                access: RemoteAccess {
                    read: r.flag(d(dctc::RRE))?,
                    write: r.flag(d(dctc::RWE))?,
                    atomic: r.flag(d(dctc::RAE))?,
                },
                min_rnr_nak: r.get_as(d(dctc::MIN_RNR_NAK))?,
                srqn: r.get_as(d(dctc::SRQN_XRQN))?,
                pd: r.get_as(d(dctc::PD))?,
                tclass: r.get_as(d(dctc::TCLASS))?,
                flow_label: r.get_as(d(dctc::FLOW_LABEL))?,
                dc_access_key: r.get(d(dctc::DC_ACCESS_KEY))?,
                mtu: Mtu::from_wire(Self::NAME, r.get(d(dctc::MTU))?)?,
                port: r.get_as(d(dctc::PORT))?,
                pkey_index: r.get_as(d(dctc::PKEY_INDEX))?,
                my_addr_index: r.get_as(d(dctc::MY_ADDR_INDEX))?,
                hop_limit: r.get_as(d(dctc::HOP_LIMIT))?,
                eth_prio: r.get_as(d(dctc::ETH_PRIO))?,
                dscp: r.get_as(d(dctc::DSCP))?,
            },
        })
    }
}

// Every field a command carries lies inside its input; none overlaps another.
const fn fields_fit(fields: &[Field], bytes: usize) -> bool {
    let mut i = 0;
    while i < fields.len() {
        if fields[i].end() as usize > bytes * 8 {
            return false;
        }
        let mut j = 0;
        while j < fields.len() {
            if i != j
                && fields[i].bit_offset < fields[j].end()
                && fields[j].bit_offset < fields[i].end()
            {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

const _: () = {
    assert!(fields_fit(QueryHcaCap::FIELDS, QueryHcaCap::INPUT_BYTES));
    assert!(fields_fit(AllocUar::FIELDS, AllocUar::INPUT_BYTES));
    assert!(fields_fit(DeallocUar::FIELDS, DeallocUar::INPUT_BYTES));
    assert!(fields_fit(DestroyCq::FIELDS, DestroyCq::INPUT_BYTES));
    assert!(fields_fit(DestroyQp::FIELDS, DestroyQp::INPUT_BYTES));
    assert!(fields_fit(DestroyDct::FIELDS, DestroyDct::INPUT_BYTES));
    assert!(fields_fit(Qp2Err::FIELDS, Qp2Err::INPUT_BYTES));
    assert!(fields_fit(Qp2Rst::FIELDS, Qp2Rst::INPUT_BYTES));
    assert!(Qp2Err::INPUT_BYTES == 16 && Qp2Rst::INPUT_BYTES == 16);
    assert!(fields_fit(CreateCq::FIELDS, CreateCq::INPUT_BYTES));
    assert!(fields_fit(CreateQp::FIELDS, CreateQp::INPUT_BYTES));
    assert!(fields_fit(Rst2InitQp::FIELDS, Rst2InitQp::INPUT_BYTES));
    assert!(fields_fit(Init2RtrQp::FIELDS, Init2RtrQp::INPUT_BYTES));
    assert!(fields_fit(Rtr2RtsQp::FIELDS, Rtr2RtsQp::INPUT_BYTES));
    assert!(fields_fit(CreateDct::FIELDS, CreateDct::INPUT_BYTES));
    assert!(fields_fit(&GENERAL_CAPS_FIELDS, 0x1000));
    assert!(CreateQp::INPUT_BYTES == 272);
    assert!(CreateCq::INPUT_BYTES == 272);
    assert!(CreateDct::INPUT_BYTES == 128);
    assert!(Rst2InitQp::INPUT_BYTES == 272);
};
