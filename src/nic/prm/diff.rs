//! Two command logs compared field by field: which commands correspond, and every field
//! whose value differs.
//!
//! Each record's input is read field by field from its raw bytes through the layouts of
//! [`layout`](super::layout) (the fields the control plane sets and the ones it leaves zero,
//! [`layout::qpc_other`](super::layout::qpc_other) and the like), not through the strict
//! decoders: a command of another program may set bits this crate never does, and those
//! are the differences wanted. A set bit no layout names is reported per dword of the
//! structure it lies in (`qpc+0x70 undeclared`), and a command without a layout here by its
//! PRM name and opcode, every set bit of it undeclared.
//!
//! Commands are paired by what they do, not by position: the opcode and the role of the
//! object they act on (a CQ by the queue that uses it: the send CQ of an RC queue pair or of
//! a DC initiator, a receive CQ, a DC target's CQ; a queue pair by its service type; a state
//! transition by the queue pair it moves; QUERY_HCA_CAP by its `op_mod`), the n-th command
//! of a kind in one log with the n-th of that kind in the other.
//!
//! ```
//! use ibgda::nic::prm::diff::{self, Role};
//! use ibgda::nic::prm::log::CommandRecord;
//! use ibgda::nic::prm::{Command, DestroyQp};
//!
//! let record = |seq, qpn| CommandRecord {
//!     seq,
//!     device: "mlx5_0".into(),
//!     call: "mlx5dv_devx_obj_destroy".into(),
//!     errno: 0,
//!     attributes: Vec::new(),
//!     input: DestroyQp { uid: 0, qpn }.encode().unwrap(),
//!     output: vec![0; 16],
//! };
//! let result = diff::diff(&[record(1, 0x42)], &[record(1, 0x43)]);
//! assert_eq!(result.pairs.len(), 1);
//! let pair = &result.pairs[0];
//! // A queue pair neither log created: its role is unknown.
//! assert_eq!(pair.role, Role::Unknown);
//! assert_eq!(pair.differences.len(), 1);
//! assert_eq!(pair.differences[0].field, "qpn");
//! assert!(pair.differences[0].object_number);
//! ```

use core::fmt;
use std::collections::HashMap;

use super::bits::Layout;
use super::layout::{
    ads, ads_other, alloc_uar_in, cqc, cqc_other, create_cq_in, create_dct_in, dctc,
    dealloc_uar_in, destroy_cq_in, destroy_dct_in, destroy_qp_in, mbox_in, modify_qp_in,
    qp_2err_in, qp_2rst_in, qpc, qpc_other, query_hca_cap_in, CREATE_CQ_CQC, CREATE_DCT_DCTC,
    QPC_PRIMARY_ADDRESS_PATH, QPC_SECONDARY_ADDRESS_PATH, QP_COMMAND_QPC,
};
use super::log::CommandRecord;
use super::opcode;

/// What a command acts on, as far as its log tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// A QUERY_HCA_CAP of this `op_mod`.
    Capability(u16),
    /// A UAR page.
    Uar,
    /// An RC queue pair.
    Rc,
    /// A DC initiator.
    Dci,
    /// A queue pair of another service type (`qpc.st`).
    OtherQp(u8),
    /// A DC target.
    Dct,
    /// A CQ, by the queue that uses it.
    Cq(CqUse),
    /// An object this log does not show being created.
    Unknown,
    /// A command that acts on no object this module tracks.
    None,
}

/// What a CQ is used for, from the commands that name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CqUse {
    /// The send CQ (`cqn_snd`) of an RC queue pair.
    RcSend,
    /// The send CQ of a DC initiator.
    DciSend,
    /// The send CQ of a queue pair of another service type.
    OtherSend,
    /// Only a receive CQ (`cqn_rcv` of a queue pair with a receive queue).
    Receive,
    /// The CQ of a DC target.
    DcTarget,
    /// No command of the log names it.
    Unused,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Capability(op_mod) => write!(f, "op_mod {op_mod:#x}"),
            Self::Uar => f.write_str("UAR"),
            Self::Rc => f.write_str("RC"),
            Self::Dci => f.write_str("DCI"),
            Self::OtherQp(st) => write!(f, "QP of st {st:#x}"),
            Self::Dct => f.write_str("DCT"),
            Self::Cq(CqUse::RcSend) => f.write_str("send CQ of an RC QP"),
            Self::Cq(CqUse::DciSend) => f.write_str("send CQ of a DCI"),
            Self::Cq(CqUse::OtherSend) => f.write_str("send CQ of another QP"),
            Self::Cq(CqUse::Receive) => f.write_str("receive CQ"),
            Self::Cq(CqUse::DcTarget) => f.write_str("CQ of a DCT"),
            Self::Cq(CqUse::Unused) => f.write_str("CQ no queue names"),
            Self::Unknown => f.write_str("object not created in this log"),
            Self::None => f.write_str("-"),
        }
    }
}

/// A field's value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    /// An integer field (byte strings up to 16 bytes, GIDs, as one big-endian number).
    Int(u128),
    /// A text value (the entry point, a call attribute).
    Text(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(v) if *v < 10 => write!(f, "{v}"),
            Self::Int(v) => write!(f, "{v:#x}"),
            Self::Text(t) => f.write_str(t),
        }
    }
}

/// One field of a command as read from its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldValue {
    /// Its name: the path through the command (`qpc.primary_address_path.rlid`), a pseudo
    /// field (`errno`, `call`, `input bytes`, `status`, `syndrome`, `attribute uar_type`), or
    /// the dword of undeclared bits (`qpc+0x70 undeclared`).
    pub name: String,
    /// Its value.
    pub value: Value,
    /// Whether the value is a number the device assigned (a QPN, a CQN, a UMEM id, a PD, a
    /// UAR page): such values differ between any two runs.
    pub object_number: bool,
}

/// One command as the diff sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandView {
    /// Its place in its log.
    pub seq: u64,
    /// The opcode.
    pub opcode: u16,
    /// The PRM name ([`opcode::name`]).
    pub name: &'static str,
    /// The entry point that carried it.
    pub call: String,
    /// The role of its object.
    pub role: Role,
    /// Whether a layout here describes the opcode (otherwise every set bit is undeclared).
    pub described: bool,
    /// Every field, in layout order; undeclared dwords only where a bit is set.
    pub fields: Vec<FieldValue>,
    /// Why this crate's strict decoder refuses the input (the software NIC would refuse it
    /// the same way), if it does.
    pub refused: Option<String>,
}

impl CommandView {
    /// The value of field `name`, if the view has it.
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .map(|f| &f.value)
    }
}

/// A field whose values differ between the two commands of a pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// The field's name ([`FieldValue::name`]).
    pub field: String,
    /// Its value in the first log's command (`None`: the command has no such field).
    pub a: Option<Value>,
    /// Its value in the second log's command.
    pub b: Option<Value>,
    /// Whether it is a number the device assigned ([`FieldValue::object_number`]).
    pub object_number: bool,
}

/// Two corresponding commands, or a command only one log has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    /// The opcode.
    pub opcode: u16,
    /// The role of the object.
    pub role: Role,
    /// Which command of this opcode and role it is in each log (1 for the first).
    pub occurrence: usize,
    /// The first log's command.
    pub a: Option<CommandView>,
    /// The second log's command.
    pub b: Option<CommandView>,
    /// Every differing field (empty unless both commands are there).
    pub differences: Vec<Difference>,
}

/// The comparison of two logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDiff {
    /// Every command of both logs, paired: the first log's in its order (each with its
    /// partner), then the second log's commands without one.
    pub pairs: Vec<Pair>,
}

impl LogDiff {
    /// Pairs with both commands.
    pub fn paired(&self) -> impl Iterator<Item = &Pair> {
        self.pairs.iter().filter(|p| p.a.is_some() && p.b.is_some())
    }

    /// Commands only the first log has.
    pub fn only_a(&self) -> impl Iterator<Item = &CommandView> {
        self.pairs
            .iter()
            .filter(|p| p.b.is_none())
            .filter_map(|p| p.a.as_ref())
    }

    /// Commands only the second log has.
    pub fn only_b(&self) -> impl Iterator<Item = &CommandView> {
        self.pairs
            .iter()
            .filter(|p| p.a.is_none())
            .filter_map(|p| p.b.as_ref())
    }

    /// The text report: a summary, every pair with a difference and its differing fields
    /// (object numbers only when `object_numbers`), the commands only one log has, and
    /// every command this crate's decoder refuses. `a` and `b` name the logs.
    pub fn report(&self, a: &str, b: &str, object_numbers: bool) -> String {
        use fmt::Write;
        let mut out = String::new();
        let count = |f: fn(&Pair) -> bool| self.pairs.iter().filter(|p| f(p)).count();
        let in_a = count(|p| p.a.is_some());
        let in_b = count(|p| p.b.is_some());
        let shown = |d: &&Difference| object_numbers || !d.object_number;
        let differing = self
            .paired()
            .filter(|p| p.differences.iter().any(|d| shown(&d)))
            .count();
        let _ = writeln!(out, "A: {a} ({in_a} commands)");
        let _ = writeln!(out, "B: {b} ({in_b} commands)");
        let _ = writeln!(
            out,
            "{} paired ({differing} with differences{}), {} only in A, {} only in B",
            self.paired().count(),
            if object_numbers {
                ""
            } else {
                " other than object numbers"
            },
            self.only_a().count(),
            self.only_b().count(),
        );
        let width = self
            .pairs
            .iter()
            .flat_map(|p| p.differences.iter())
            .map(|d| d.field.len())
            .max()
            .unwrap_or(0);
        for pair in self.paired() {
            let (Some(ca), Some(cb)) = (&pair.a, &pair.b) else {
                continue;
            };
            let differences: Vec<&Difference> = pair.differences.iter().filter(shown).collect();
            let hidden = pair.differences.len() - differences.len();
            if differences.is_empty() {
                continue;
            }
            let _ = writeln!(
                out,
                "\n{} [{}] #{}: A seq {} ({}), B seq {} ({})",
                ca.name, pair.role, pair.occurrence, ca.seq, ca.call, cb.seq, cb.call
            );
            for d in differences {
                let show = |v: &Option<Value>| v.as_ref().map_or("-".to_owned(), Value::to_string);
                let _ = writeln!(
                    out,
                    "    {:width$}  A {:>18}  B {:>18}",
                    d.field,
                    show(&d.a),
                    show(&d.b)
                );
            }
            if hidden > 0 {
                let _ = writeln!(out, "    ({hidden} object numbers differ too)");
            }
        }
        for (label, views) in [
            ("A", self.only_a().collect::<Vec<_>>()),
            ("B", self.only_b().collect()),
        ] {
            if views.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\nonly in {label}:");
            for v in views {
                let _ = writeln!(
                    out,
                    "    seq {} {} (opcode {:#06x}) [{}] ({}){}",
                    v.seq,
                    v.name,
                    v.opcode,
                    v.role,
                    v.call,
                    if v.described {
                        ""
                    } else {
                        ", no layout here: its set bits are listed as undeclared"
                    }
                );
            }
        }
        let refused: Vec<(&str, &CommandView)> = self
            .pairs
            .iter()
            .flat_map(|p| [("A", p.a.as_ref()), ("B", p.b.as_ref())])
            .filter_map(|(l, v)| v.map(|v| (l, v)))
            .filter(|(_, v)| v.refused.is_some())
            .collect();
        if !refused.is_empty() {
            let _ = writeln!(
                out,
                "\nrefused by ibgda's decoder (the software NIC refuses them too):"
            );
            for (label, v) in refused {
                let _ = writeln!(
                    out,
                    "    {label} seq {} {}: {}",
                    v.seq,
                    v.name,
                    v.refused.as_deref().unwrap_or_default()
                );
            }
        }
        out
    }
}

/// A PRM structure inside a command input, its fields named with `prefix`.
struct Region {
    prefix: &'static str,
    structure: &'static str,
    base: u32,
    bits: u32,
    layouts: &'static [Layout],
}

const fn region(
    prefix: &'static str,
    base: u32,
    layouts: &'static [Layout],
    structure: &'static str,
) -> Region {
    Region {
        prefix,
        structure,
        base,
        bits: layouts[0].bits,
        layouts,
    }
}

const QPC: &[Layout] = &[qpc::LAYOUT, qpc_other::LAYOUT];
const ADS: &[Layout] = &[ads::LAYOUT, ads_other::LAYOUT];
const CQC: &[Layout] = &[cqc::LAYOUT, cqc_other::LAYOUT];

/// The QP context and both address paths of a QP command.
fn qp_context(regions: &mut Vec<Region>) {
    regions.push(region("qpc.", QP_COMMAND_QPC, QPC, "qpc"));
    regions.push(region(
        "qpc.primary_address_path.",
        QP_COMMAND_QPC + QPC_PRIMARY_ADDRESS_PATH,
        ADS,
        "qpc.primary_address_path",
    ));
    regions.push(region(
        "qpc.secondary_address_path.",
        QP_COMMAND_QPC + QPC_SECONDARY_ADDRESS_PATH,
        ADS,
        "qpc.secondary_address_path",
    ));
}

/// The structures of a command input, outermost first; `None` for an opcode no layout here
/// describes.
fn regions(op: u16) -> Option<Vec<Region>> {
    let top = |layout: &'static [Layout], name| vec![region("", 0, layout, name)];
    Some(match op {
        opcode::QUERY_HCA_CAP => top(&[query_hca_cap_in::LAYOUT], "query_hca_cap_in"),
        opcode::ALLOC_UAR => top(&[alloc_uar_in::LAYOUT], "alloc_uar_in"),
        opcode::DEALLOC_UAR => top(&[dealloc_uar_in::LAYOUT], "dealloc_uar_in"),
        opcode::DESTROY_CQ => top(&[destroy_cq_in::LAYOUT], "destroy_cq_in"),
        opcode::DESTROY_QP => top(&[destroy_qp_in::LAYOUT], "destroy_qp_in"),
        opcode::DESTROY_DCT => top(&[destroy_dct_in::LAYOUT], "destroy_dct_in"),
        opcode::QP_2ERR => top(&[qp_2err_in::LAYOUT], "qp_2err_in"),
        opcode::QP_2RST => top(&[qp_2rst_in::LAYOUT], "qp_2rst_in"),
        opcode::CREATE_CQ => {
            let mut r = top(&[create_cq_in::LAYOUT], "create_cq_in");
            r.push(region("cqc.", CREATE_CQ_CQC, CQC, "cqc"));
            r
        }
        opcode::CREATE_QP => {
            let mut r = top(&[super::layout::create_qp_in::LAYOUT], "create_qp_in");
            qp_context(&mut r);
            r
        }
        // RST2INIT, INIT2RTR, RTR2RTS, RTS2RTS, SQERR2RTS, SQD_RTS, INIT2INIT: one layout.
        opcode::RST2INIT_QP
        | opcode::INIT2RTR_QP
        | opcode::RTR2RTS_QP
        | 0x505
        | 0x506
        | 0x50c
        | 0x50e => {
            let mut r = top(&[modify_qp_in::LAYOUT], "modify_qp_in");
            qp_context(&mut r);
            r
        }
        opcode::CREATE_DCT => {
            let mut r = top(&[create_dct_in::LAYOUT], "create_dct_in");
            r.push(region("dctc.", CREATE_DCT_DCTC, &[dctc::LAYOUT], "dctc"));
            r
        }
        _ => return None,
    })
}

/// Field names whose values are numbers the device assigns.
const OBJECT_NUMBERS: [&str; 16] = [
    "qpn",
    "cqn",
    "dctn",
    "uar",
    "uar_page",
    "pd",
    "srqn_rmpn_xrqn",
    "srqn_xrqn",
    "cqn_snd",
    "cqn_rcv",
    "remote_qpn",
    "dbr_umem_id",
    "wq_umem_id",
    "cq_umem_id",
    "xrcd",
    "counter_set_id",
];

/// Bit `bit` of `bytes` (0 past the end).
fn bit(bytes: &[u8], bit: u32) -> u128 {
    bytes
        .get((bit / 8) as usize)
        .map_or(0, |b| u128::from((b >> (7 - bit % 8)) & 1))
}

/// The field of `width` bits (at most 128) at `offset`; bits past the end read 0.
fn read(bytes: &[u8], offset: u32, width: u32) -> u128 {
    (offset..offset.saturating_add(width.min(128))).fold(0, |v, b| (v << 1) | bit(bytes, b))
}

/// The fields of one command input, in layout order, then its undeclared set bits.
fn input_fields(input: &[u8]) -> (bool, Vec<FieldValue>) {
    let op = read(input, 0, 16) as u16;
    let (described, regions) = match regions(op) {
        Some(r) => (true, r),
        None => (
            false,
            vec![Region {
                prefix: "",
                structure: opcode::name(op),
                base: 0,
                bits: mbox_in::LAYOUT.bits,
                layouts: &[mbox_in::LAYOUT],
            }],
        ),
    };
    let total_bits = regions
        .iter()
        .map(|r| r.base + r.bits)
        .max()
        .unwrap_or(0)
        .max(
            u32::try_from(input.len())
                .unwrap_or(u32::MAX / 8)
                .saturating_mul(8),
        );
    let mut covered = vec![0u8; total_bits.div_ceil(8) as usize];
    let mut fields = Vec::new();
    for r in &regions {
        for layout in r.layouts {
            for f in layout.fields {
                let at = r.base + f.bit_offset;
                for b in at..at + f.bit_width {
                    if let Some(byte) = covered.get_mut((b / 8) as usize) {
                        *byte |= 0x80 >> (b % 8);
                    }
                }
                fields.push(FieldValue {
                    name: format!("{}{}", r.prefix, f.name),
                    value: Value::Int(read(input, at, f.bit_width)),
                    object_number: OBJECT_NUMBERS.contains(&f.name),
                });
            }
        }
    }
    // Undeclared bits, per dword of the innermost structure holding it.
    for dword in 0..total_bits.div_ceil(32) {
        let start = dword * 32;
        let value = read(input, start, 32) as u32;
        let known = read(&covered, start, 32) as u32;
        let unknown = value & !known;
        if unknown == 0 {
            continue;
        }
        let inner = regions
            .iter()
            .filter(|r| r.base <= start && start < r.base + r.bits)
            .max_by_key(|r| r.base);
        let name = match inner {
            Some(r) => format!("{}+{:#x} undeclared", r.structure, (start - r.base) / 8),
            None => format!("input+{:#x} undeclared", start / 8),
        };
        fields.push(FieldValue {
            name,
            value: Value::Int(unknown.into()),
            object_number: false,
        });
    }
    (described, fields)
}

/// The number a successful create command's output returns (`cqn`, `qpn`, `dctn`, `uar`:
/// bits 0x48..0x60 of every one of them).
fn created(record: &CommandRecord) -> Option<u32> {
    let ok = record.errno == 0 && record.output.len() >= 16 && record.output[0] == 0;
    ok.then(|| read(&record.output, 0x48, 24) as u32)
}

/// The object number a command acts on (bits 0x48..0x60 of the destroy and modify
/// commands).
fn target(record: &CommandRecord) -> u32 {
    read(&record.input, 0x48, 24) as u32
}

/// The role of every record's object.
fn roles(records: &[CommandRecord]) -> Vec<Role> {
    let qpc = |r: &CommandRecord, f: super::bits::Field| {
        read(&r.input, QP_COMMAND_QPC + f.bit_offset, f.bit_width)
    };
    let mut qps: HashMap<u32, Role> = HashMap::new();
    let mut dcts: HashMap<u32, ()> = HashMap::new();
    let mut uars: HashMap<u32, ()> = HashMap::new();
    let mut cqs: HashMap<u32, CqUse> = HashMap::new();
    for r in records {
        match (r.opcode(), created(r)) {
            (opcode::CREATE_CQ, Some(cqn)) => {
                cqs.insert(cqn, CqUse::Unused);
            }
            (opcode::CREATE_DCT, Some(dctn)) => {
                dcts.insert(dctn, ());
            }
            (opcode::ALLOC_UAR, Some(uar)) => {
                uars.insert(uar, ());
            }
            _ => {}
        }
    }
    // A send CQ's use outranks a receive CQ's; a DC target's CQ outranks a receive CQ's.
    let mut mark = |cqn: u32, use_: CqUse| {
        if let Some(current) = cqs.get_mut(&cqn) {
            let rank = |u: CqUse| match u {
                CqUse::RcSend | CqUse::DciSend | CqUse::OtherSend => 3,
                CqUse::DcTarget => 2,
                CqUse::Receive => 1,
                CqUse::Unused => 0,
            };
            if rank(use_) > rank(*current) {
                *current = use_;
            }
        }
    };
    for r in records {
        match r.opcode() {
            opcode::CREATE_QP => {
                let st = qpc(r, qpc::ST) as u8;
                let role = match st {
                    0x0 => Role::Rc,
                    0x5 => Role::Dci,
                    other => Role::OtherQp(other),
                };
                let send = match role {
                    Role::Rc => CqUse::RcSend,
                    Role::Dci => CqUse::DciSend,
                    _ => CqUse::OtherSend,
                };
                let (snd, rcv) = (qpc(r, qpc::CQN_SND) as u32, qpc(r, qpc::CQN_RCV) as u32);
                mark(snd, send);
                // rq_type 3: no receive queue, cqn_rcv means nothing.
                if qpc(r, qpc::RQ_TYPE) != 3 {
                    mark(rcv, CqUse::Receive);
                }
                if let Some(qpn) = created(r) {
                    qps.insert(qpn, role);
                }
            }
            opcode::CREATE_DCT => {
                let f = dctc::CQN;
                mark(
                    read(&r.input, CREATE_DCT_DCTC + f.bit_offset, f.bit_width) as u32,
                    CqUse::DcTarget,
                );
            }
            _ => {}
        }
    }
    records
        .iter()
        .map(|r| {
            let op = r.opcode();
            match op {
                opcode::QUERY_HCA_CAP => {
                    Role::Capability(read(&r.input, mbox_in::OP_MOD.bit_offset, 16) as u16)
                }
                opcode::ALLOC_UAR => Role::Uar,
                opcode::DEALLOC_UAR => {
                    if uars.contains_key(&target(r)) {
                        Role::Uar
                    } else {
                        Role::Unknown
                    }
                }
                opcode::CREATE_CQ => created(r)
                    .and_then(|cqn| cqs.get(&cqn).copied())
                    .map_or(Role::Cq(CqUse::Unused), Role::Cq),
                opcode::DESTROY_CQ => cqs.get(&target(r)).copied().map_or(Role::Unknown, Role::Cq),
                opcode::CREATE_QP => match qpc(r, qpc::ST) as u8 {
                    0x0 => Role::Rc,
                    0x5 => Role::Dci,
                    other => Role::OtherQp(other),
                },
                opcode::CREATE_DCT => Role::Dct,
                opcode::DESTROY_DCT | 0x712..=0x714 => {
                    if dcts.contains_key(&target(r)) {
                        Role::Dct
                    } else {
                        Role::Unknown
                    }
                }
                0x501..=0x50e => qps.get(&target(r)).copied().unwrap_or(Role::Unknown),
                _ => Role::None,
            }
        })
        .collect()
}

/// Every record of a log as the diff sees it.
pub fn view(records: &[CommandRecord]) -> Vec<CommandView> {
    records
        .iter()
        .zip(roles(records))
        .map(|(r, role)| {
            let (described, mut fields) = input_fields(&r.input);
            let pseudo = |name: &str, value: Value| FieldValue {
                name: name.to_owned(),
                value,
                object_number: false,
            };
            fields.push(pseudo("call", Value::Text(r.call.clone())));
            fields.push(pseudo("errno", Value::Int(r.errno.unsigned_abs().into())));
            fields.push(pseudo("input bytes", Value::Int(r.input.len() as u128)));
            if r.output.len() >= 8 {
                fields.push(pseudo("status", Value::Int(read(&r.output, 0, 8))));
                fields.push(pseudo("syndrome", Value::Int(read(&r.output, 0x20, 32))));
            }
            for (key, value) in &r.attributes {
                fields.push(pseudo(
                    &format!("attribute {key}"),
                    Value::Text(value.clone()),
                ));
            }
            CommandView {
                seq: r.seq,
                opcode: r.opcode(),
                name: r.name(),
                call: r.call.clone(),
                role,
                described,
                fields,
                refused: r.decode().input.err().map(|e| e.to_string()),
            }
        })
        .collect()
}

/// The fields of `a` and `b` whose values differ (a field one of them lacks compares as 0
/// when it is an undeclared dword, which a view lists only when a bit is set).
fn differences(a: &CommandView, b: &CommandView) -> Vec<Difference> {
    let mut names: Vec<&FieldValue> = a.fields.iter().collect();
    for f in &b.fields {
        if !a.fields.iter().any(|g| g.name == f.name) {
            names.push(f);
        }
    }
    names
        .into_iter()
        .filter_map(|f| {
            let get = |v: &CommandView| {
                v.field(&f.name)
                    .cloned()
                    .or_else(|| f.name.ends_with(" undeclared").then_some(Value::Int(0)))
            };
            let (va, vb) = (get(a), get(b));
            (va != vb).then(|| Difference {
                field: f.name.clone(),
                a: va,
                b: vb,
                object_number: f.object_number,
            })
        })
        .collect()
}

/// Pairs the commands of two logs and lists every differing field.
pub fn diff(a: &[CommandRecord], b: &[CommandRecord]) -> LogDiff {
    let (va, vb) = (view(a), view(b));
    // The n-th command of each (opcode, role) in the second log, by that key.
    let mut by_key: HashMap<(u16, Role), Vec<usize>> = HashMap::new();
    for (i, v) in vb.iter().enumerate() {
        by_key.entry((v.opcode, v.role)).or_default().push(i);
    }
    let mut taken = vec![false; vb.len()];
    let mut seen: HashMap<(u16, Role), usize> = HashMap::new();
    let mut pairs = Vec::new();
    for v in &va {
        let key = (v.opcode, v.role);
        let n = seen.entry(key).or_insert(0);
        *n += 1;
        let partner = by_key.get(&key).and_then(|list| list.get(*n - 1)).copied();
        if let Some(j) = partner {
            if let Some(t) = taken.get_mut(j) {
                *t = true;
            }
        }
        let b_view = partner.and_then(|j| vb.get(j)).cloned();
        let differences = b_view.as_ref().map_or_else(Vec::new, |w| differences(v, w));
        pairs.push(Pair {
            opcode: v.opcode,
            role: v.role,
            occurrence: *n,
            a: Some(v.clone()),
            b: b_view,
            differences,
        });
    }
    let mut seen_b: HashMap<(u16, Role), usize> = HashMap::new();
    for (j, v) in vb.iter().enumerate() {
        let n = seen_b.entry((v.opcode, v.role)).or_insert(0);
        *n += 1;
        if !taken.get(j).copied().unwrap_or(true) {
            pairs.push(Pair {
                opcode: v.opcode,
                role: v.role,
                occurrence: *n,
                a: None,
                b: Some(v.clone()),
                differences: Vec::new(),
            });
        }
    }
    LogDiff { pairs }
}

#[cfg(test)]
#[path = "diff_tests.rs"]
mod tests;
