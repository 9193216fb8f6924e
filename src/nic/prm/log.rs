//! A command log: every PRM command a device was sent, its input and output bytes, in a
//! line-oriented text format that this module writes, reads back and decodes with the
//! command decoders of [`prm`](super).
//!
//! The emulated ConnectX (`emu/`, `IBGDA_EMU_LOG=<file>`) writes one record per DEVX call
//! that carries a command (`mlx5dv_devx_general_cmd`, `mlx5dv_devx_obj_create`, `_modify`,
//! `_query`, and `_destroy` with the DESTROY command it sent for the object), so that the
//! command stream of any mlx5 program (ibgda's control plane, NVSHMEM's transport) can be
//! read as typed values and compared field by field.
//!
//! ```text
//! ibgda-command-log 1
//! command 1 device=mlx5_0 call=mlx5dv_devx_general_cmd errno=0
//!  in 01000000000000010000000000000000
//!  out 0000000000000000...
//! ```
//!
//! A record is a `command` line (sequence number, then `key=value` words without spaces)
//! and its ` in` and ` out` lines (lowercase hex). `errno` is the call's result: 0, or the
//! errno it failed with (`EREMOTEIO`, 121, when the firmware failed the command: the
//! output then holds its status and syndrome). Any other `key=value` word is an attribute
//! of the call that the command bytes do not carry (the emulator writes `uar_type=` for
//! `mlx5dv_devx_alloc_uar`), kept in [`CommandRecord::attributes`].
//!
//! ```
//! use ibgda::nic::prm::log::{self, CommandRecord, DecodedCommand};
//! use ibgda::nic::prm::{Command, DestroyQp, DestroyQpOutput, CommandOutput};
//!
//! let record = CommandRecord {
//!     seq: 1,
//!     device: "mlx5_0".into(),
//!     call: "mlx5dv_devx_obj_destroy".into(),
//!     errno: 0,
//!     attributes: Vec::new(),
//!     input: DestroyQp { uid: 0, qpn: 0x42 }.encode()?,
//!     output: DestroyQpOutput::default().encode()?,
//! };
//! let mut text = Vec::new();
//! log::write_header(&mut text)?;
//! log::write_record(&mut text, &record)?;
//! let records = log::parse(std::str::from_utf8(&text)?)?;
//! assert_eq!(records, vec![record]);
//! match records[0].decode().input {
//!     Ok(DecodedCommand::DestroyQp(c)) => assert_eq!(c.qpn, 0x42),
//!     other => panic!("{other:?}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::fmt;
use std::io::{self, Write};

use super::commands::{
    AllocUar, AllocUarOutput, Command, CommandOutput, CreateCq, CreateCqOutput, CreateDct,
    CreateDctOutput, CreateQp, CreateQpOutput, DeallocUar, DeallocUarOutput, DestroyCq,
    DestroyCqOutput, DestroyDct, DestroyDctOutput, DestroyQp, DestroyQpOutput, Init2RtrQp,
    Init2RtrQpOutput, Qp2Err, Qp2ErrOutput, Qp2Rst, Qp2RstOutput, QueryHcaCap, QueryHcaCapOutput,
    Rst2InitQp, Rst2InitQpOutput, Rtr2RtsQp, Rtr2RtsQpOutput,
};
use super::error::PrmError;
use super::opcode;

/// The first line of every log.
pub const HEADER: &str = "ibgda-command-log 1";

/// One command as a device received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandRecord {
    /// Its place in the log (1 for the first command).
    pub seq: u64,
    /// The device it was sent to (`mlx5_0`).
    pub device: String,
    /// The entry point that carried it (`mlx5dv_devx_obj_create`).
    pub call: String,
    /// 0, or the errno the call failed with.
    pub errno: i32,
    /// The call's other `key=value` words, in the order written (names and values hold no
    /// whitespace, names no `=`).
    pub attributes: Vec<(String, String)>,
    /// The command's input bytes.
    pub input: Vec<u8>,
    /// Its output bytes as the device left them.
    pub output: Vec<u8>,
}

/// Why a log could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogError {
    /// The first line is not [`HEADER`].
    Header {
        /// What it was.
        found: String,
    },
    /// A line that is not what the format has there.
    Line {
        /// Its number (1-based).
        line: usize,
        /// What was expected.
        expected: &'static str,
        /// The line.
        found: String,
    },
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Header { found } => {
                write!(
                    f,
                    "not a command log: first line {found:?}, expected {HEADER:?}"
                )
            }
            Self::Line {
                line,
                expected,
                found,
            } => write!(
                f,
                "command log line {line}: expected {expected}, found {found:?}"
            ),
        }
    }
}

impl std::error::Error for LogError {}

/// Writes the log's first line.
pub fn write_header(out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "{HEADER}")
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// Writes one record. Device and call names and attributes must hold no whitespace (they
/// are written as they are; a name with a space would not read back).
pub fn write_record(out: &mut impl Write, record: &CommandRecord) -> io::Result<()> {
    write!(
        out,
        "command {} device={} call={} errno={}",
        record.seq, record.device, record.call, record.errno
    )?;
    for (key, value) in &record.attributes {
        write!(out, " {key}={value}")?;
    }
    writeln!(out)?;
    writeln!(out, " in {}", hex(&record.input))?;
    writeln!(out, " out {}", hex(&record.output))
}

/// Reads every record of a log.
pub fn parse(text: &str) -> Result<Vec<CommandRecord>, LogError> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    match lines.next() {
        Some((_, HEADER)) => {}
        other => {
            return Err(LogError::Header {
                found: other.map(|(_, l)| l.to_owned()).unwrap_or_default(),
            })
        }
    }
    let bad = |line: usize, expected: &'static str, found: &str| LogError::Line {
        line,
        expected,
        found: found.to_owned(),
    };
    let mut records = Vec::new();
    while let Some((number, line)) = lines.next() {
        if line.is_empty() {
            continue;
        }
        let mut words = line.split(' ');
        if words.next() != Some("command") {
            return Err(bad(
                number,
                "`command <seq> device=.. call=.. errno=..`",
                line,
            ));
        }
        let seq = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| bad(number, "a sequence number after `command`", line))?;
        let (mut device, mut call, mut errno) = (None, None, None);
        let mut attributes = Vec::new();
        for word in words {
            match word.split_once('=') {
                Some(("device", v)) => device = Some(v.to_owned()),
                Some(("call", v)) => call = Some(v.to_owned()),
                Some(("errno", v)) => {
                    errno = Some(
                        v.parse()
                            .map_err(|_| bad(number, "a decimal errno after `errno=`", line))?,
                    )
                }
                Some((key, v)) if !key.is_empty() => {
                    attributes.push((key.to_owned(), v.to_owned()))
                }
                _ => return Err(bad(number, "`key=value` words", line)),
            }
        }
        let (Some(device), Some(call), Some(errno)) = (device, call, errno) else {
            return Err(bad(number, "device=, call= and errno=", line));
        };
        let mut bytes = |prefix: &str, expected: &'static str| {
            let (number, line) = lines.next().ok_or_else(|| bad(number + 1, expected, ""))?;
            line.strip_prefix(prefix)
                .and_then(unhex)
                .ok_or_else(|| bad(number, expected, line))
        };
        let input = bytes(" in ", "` in <hex>`")?;
        let output = bytes(" out ", "` out <hex>`")?;
        records.push(CommandRecord {
            seq,
            device,
            call,
            errno,
            attributes,
            input,
            output,
        });
    }
    Ok(records)
}

/// A command input decoded by its typed decoder.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodedCommand {
    /// QUERY_HCA_CAP.
    QueryHcaCap(QueryHcaCap),
    /// ALLOC_UAR.
    AllocUar(AllocUar),
    /// DEALLOC_UAR.
    DeallocUar(DeallocUar),
    /// CREATE_CQ.
    CreateCq(CreateCq),
    /// DESTROY_CQ.
    DestroyCq(DestroyCq),
    /// CREATE_QP.
    CreateQp(CreateQp),
    /// DESTROY_QP.
    DestroyQp(DestroyQp),
    /// RST2INIT_QP.
    Rst2InitQp(Rst2InitQp),
    /// INIT2RTR_QP.
    Init2RtrQp(Init2RtrQp),
    /// RTR2RTS_QP.
    Rtr2RtsQp(Rtr2RtsQp),
    /// 2ERR_QP.
    Qp2Err(Qp2Err),
    /// 2RST_QP.
    Qp2Rst(Qp2Rst),
    /// CREATE_DCT.
    CreateDct(CreateDct),
    /// DESTROY_DCT.
    DestroyDct(DestroyDct),
}

/// A command output decoded by its typed decoder (a failed command decodes to
/// [`PrmError::CommandError`] with its status and syndrome).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodedOutput {
    /// QUERY_HCA_CAP's capability page.
    QueryHcaCap(QueryHcaCapOutput),
    /// ALLOC_UAR's page.
    AllocUar(AllocUarOutput),
    /// DEALLOC_UAR.
    DeallocUar(DeallocUarOutput),
    /// CREATE_CQ's CQ number.
    CreateCq(CreateCqOutput),
    /// DESTROY_CQ.
    DestroyCq(DestroyCqOutput),
    /// CREATE_QP's QP number.
    CreateQp(CreateQpOutput),
    /// DESTROY_QP.
    DestroyQp(DestroyQpOutput),
    /// RST2INIT_QP.
    Rst2InitQp(Rst2InitQpOutput),
    /// INIT2RTR_QP.
    Init2RtrQp(Init2RtrQpOutput),
    /// RTR2RTS_QP.
    Rtr2RtsQp(Rtr2RtsQpOutput),
    /// 2ERR_QP.
    Qp2Err(Qp2ErrOutput),
    /// 2RST_QP.
    Qp2Rst(Qp2RstOutput),
    /// CREATE_DCT's DCT number.
    CreateDct(CreateDctOutput),
    /// DESTROY_DCT.
    DestroyDct(DestroyDctOutput),
}

/// A record's input and output, each decoded (or why not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The opcode (the first 16 bits of the input; 0 when it is shorter).
    pub opcode: u16,
    /// The input.
    pub input: Result<DecodedCommand, PrmError>,
    /// The output.
    pub output: Result<DecodedOutput, PrmError>,
}

/// What the decoders make of an opcode this module does not decode: the error names the
/// command ([`opcode::name`], `"unknown command"` when the PRM list here lacks it) and
/// carries the opcode.
fn unknown(opcode: u16) -> PrmError {
    PrmError::InvalidValue {
        command: opcode::name(opcode),
        field: "opcode (no decoder for this command)",
        value: opcode.into(),
    }
}

impl CommandRecord {
    /// The value of attribute `key` (the first, if written twice).
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The command's PRM name ([`opcode::name`]).
    pub fn name(&self) -> &'static str {
        opcode::name(self.opcode())
    }

    /// The opcode (the first 16 bits of the input; 0 when it is shorter).
    pub fn opcode(&self) -> u16 {
        match self.input.get(..2) {
            Some(b) => u16::from_be_bytes([b[0], b[1]]),
            None => 0,
        }
    }

    /// Decodes input and output with the command's typed decoders.
    pub fn decode(&self) -> Decoded {
        fn both<C: Command>(
            input: &[u8],
            output: &[u8],
            wrap_in: fn(C) -> DecodedCommand,
            wrap_out: fn(C::Output) -> DecodedOutput,
        ) -> (
            Result<DecodedCommand, PrmError>,
            Result<DecodedOutput, PrmError>,
        ) {
            (
                C::decode(input).map(wrap_in),
                C::Output::decode(output).map(wrap_out),
            )
        }
        let (i, o) = (self.input.as_slice(), self.output.as_slice());
        let opcode = self.opcode();
        let (input, output) = match opcode {
            opcode::QUERY_HCA_CAP => {
                let command = QueryHcaCap::decode(i);
                let output = match &command {
                    Ok(c) => {
                        QueryHcaCapOutput::decode(c.capability, o).map(DecodedOutput::QueryHcaCap)
                    }
                    Err(e) => Err(e.clone()),
                };
                (command.map(DecodedCommand::QueryHcaCap), output)
            }
            opcode::ALLOC_UAR => {
                both::<AllocUar>(i, o, DecodedCommand::AllocUar, DecodedOutput::AllocUar)
            }
            opcode::DEALLOC_UAR => {
                both::<DeallocUar>(i, o, DecodedCommand::DeallocUar, DecodedOutput::DeallocUar)
            }
            opcode::CREATE_CQ => {
                both::<CreateCq>(i, o, DecodedCommand::CreateCq, DecodedOutput::CreateCq)
            }
            opcode::DESTROY_CQ => {
                both::<DestroyCq>(i, o, DecodedCommand::DestroyCq, DecodedOutput::DestroyCq)
            }
            opcode::CREATE_QP => {
                both::<CreateQp>(i, o, DecodedCommand::CreateQp, DecodedOutput::CreateQp)
            }
            opcode::DESTROY_QP => {
                both::<DestroyQp>(i, o, DecodedCommand::DestroyQp, DecodedOutput::DestroyQp)
            }
            opcode::RST2INIT_QP => {
                both::<Rst2InitQp>(i, o, DecodedCommand::Rst2InitQp, DecodedOutput::Rst2InitQp)
            }
            opcode::INIT2RTR_QP => {
                both::<Init2RtrQp>(i, o, DecodedCommand::Init2RtrQp, DecodedOutput::Init2RtrQp)
            }
            opcode::RTR2RTS_QP => {
                both::<Rtr2RtsQp>(i, o, DecodedCommand::Rtr2RtsQp, DecodedOutput::Rtr2RtsQp)
            }
            opcode::QP_2ERR => both::<Qp2Err>(i, o, DecodedCommand::Qp2Err, DecodedOutput::Qp2Err),
            opcode::QP_2RST => both::<Qp2Rst>(i, o, DecodedCommand::Qp2Rst, DecodedOutput::Qp2Rst),
            opcode::CREATE_DCT => {
                both::<CreateDct>(i, o, DecodedCommand::CreateDct, DecodedOutput::CreateDct)
            }
            opcode::DESTROY_DCT => {
                both::<DestroyDct>(i, o, DecodedCommand::DestroyDct, DecodedOutput::DestroyDct)
            }
            other => (Err(unknown(other)), Err(unknown(other))),
        };
        Decoded {
            opcode,
            input,
            output,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::prm::{Qp2Err, Qp2Rst};

    fn record(input: Vec<u8>) -> CommandRecord {
        CommandRecord {
            seq: 3,
            device: "mlx5_0".into(),
            call: "mlx5dv_devx_alloc_uar".into(),
            errno: 0,
            attributes: vec![("uar_type".into(), "nc_dedicated".into())],
            input,
            output: vec![0; 16],
        }
    }

    #[test]
    fn attributes_are_written_after_errno_and_read_back() {
        let r = record(AllocUar.encode().unwrap());
        let mut text = Vec::new();
        write_header(&mut text).unwrap();
        write_record(&mut text, &r).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert_eq!(
            text.lines().nth(1),
            Some(
                "command 3 device=mlx5_0 call=mlx5dv_devx_alloc_uar errno=0 uar_type=nc_dedicated"
            )
        );
        let parsed = parse(&text).unwrap();
        assert_eq!(parsed, vec![r]);
        assert_eq!(parsed[0].attribute("uar_type"), Some("nc_dedicated"));
        assert_eq!(parsed[0].attribute("other"), None);
        assert_eq!(parsed[0].name(), "ALLOC_UAR");
    }

    #[test]
    fn a_malformed_command_line_is_a_typed_error_naming_its_line() {
        for (line, expected) in [
            (
                "command 1 device=a call=b errno=x",
                "a decimal errno after `errno=`",
            ),
            ("command 1 device=a call=b errno=0 =v", "`key=value` words"),
            (
                "command 1 device=a call=b errno=0 word",
                "`key=value` words",
            ),
            ("command 1 device=a errno=0", "device=, call= and errno="),
        ] {
            let text = format!("{HEADER}\n{line}\n in 00\n out 00\n");
            assert_eq!(
                parse(&text),
                Err(LogError::Line {
                    line: 2,
                    expected,
                    found: line.to_owned()
                }),
                "{line}"
            );
        }
    }

    #[test]
    fn recovery_transitions_decode_and_other_opcodes_are_named() {
        let err = record(Qp2Err { uid: 0, qpn: 0x12 }.encode().unwrap()).decode();
        assert_eq!(
            err.input,
            Ok(DecodedCommand::Qp2Err(Qp2Err { uid: 0, qpn: 0x12 }))
        );
        assert_eq!(err.output, Ok(DecodedOutput::Qp2Err(Qp2ErrOutput)));
        let rst = record(Qp2Rst { uid: 0, qpn: 0x13 }.encode().unwrap()).decode();
        assert_eq!(
            rst.input,
            Ok(DecodedCommand::Qp2Rst(Qp2Rst { uid: 0, qpn: 0x13 }))
        );
        // CREATE_SRQ (0x700): no decoder, named in the error.
        let srq = record(vec![0x07, 0x00, 0, 0]).decode();
        assert_eq!(srq.opcode, 0x700);
        assert_eq!(
            srq.input,
            Err(PrmError::InvalidValue {
                command: "CREATE_SRQ",
                field: "opcode (no decoder for this command)",
                value: 0x700,
            })
        );
        assert_eq!(opcode::name(0x0abc), "unknown command");
    }
}
