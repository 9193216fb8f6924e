//! Readable dumps of WQEs for debugging: `Display` of a parsed WQE, and a hex dump of raw
//! octowords.

use core::fmt;

use super::opcode::{CompletionMode, FenceMode, Solicited};
use super::parse::{ParsedData, ParsedOp, ParsedWqe};
use super::segment::{DataSegment, OCTOWORD_BYTES};
use super::transport::AnyDcTarget;

fn pointer(f: &mut fmt::Formatter<'_>, label: &str, seg: &DataSegment) -> fmt::Result {
    writeln!(
        f,
        "  {label:<7} addr {:#018x} len {} lkey {:#010x}",
        seg.addr.get(),
        seg.transfer_len(),
        seg.lkey.get()
    )
}

impl fmt::Display for ParsedWqe<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "WQE {} {} qpn {:#08x} ds {} ({} WQEBB{})",
            self.index,
            self.opcode,
            self.qpn,
            self.ds,
            self.wqebbs(),
            if self.wqebbs() == 1 { "" } else { "s" }
        )?;
        if self.opmod != 0 {
            write!(f, " opmod {:#04x}", self.opmod)?;
        }
        match self.flags.completion {
            CompletionMode::OnError => f.write_str(" unsignaled")?,
            CompletionMode::OnFirstError => f.write_str(" cqe-on-first-error")?,
            CompletionMode::Always => f.write_str(" signaled")?,
            CompletionMode::AlwaysWithEvent => f.write_str(" signaled+event")?,
        }
        if self.flags.fence != FenceMode::None {
            write!(f, " fence:{:?}", self.flags.fence)?;
        }
        if self.flags.solicited == Solicited::Yes {
            f.write_str(" solicited")?;
        }
        if self.stream_id != 0 {
            write!(f, " stream {}", self.stream_id)?;
        }
        if self.imm != 0 {
            write!(f, " imm {:#010x}", self.imm)?;
        }
        writeln!(f)?;
        match &self.target {
            None => {}
            Some(t @ AnyDcTarget::Compact(s)) => writeln!(
                f,
                "  av16    dct {:#08x} key {:#018x} lid {} sl/rate {:#04x}",
                t.dct(),
                t.dc_key(),
                s.rlid.get(),
                s.stat_rate_sl
            )?,
            Some(t @ AnyDcTarget::Full(s)) => writeln!(
                f,
                "  av48    dct {:#08x} key {:#018x} lid {} sl/rate {:#04x} grh {:#010x} gid {:02x?}",
                t.dct(),
                t.dc_key(),
                s.rlid.get(),
                s.stat_rate_sl,
                s.grh_gid_fl.get(),
                s.rgid
            )?,
        }
        let remote = |f: &mut fmt::Formatter<'_>, r: &super::address::RemoteAddress| {
            writeln!(f, "  raddr   addr {:#018x} rkey {:#010x}", r.addr, r.rkey.0)
        };
        let data = |f: &mut fmt::Formatter<'_>, d: &ParsedData<'_>| match d {
            ParsedData::Empty => writeln!(f, "  (no data)"),
            ParsedData::Pointers(segs) => segs.iter().try_for_each(|s| pointer(f, "data", s)),
            ParsedData::Inline(p) => {
                let bytes = p.to_vec();
                let shown = &bytes[..bytes.len().min(32)];
                writeln!(
                    f,
                    "  inline  {} bytes: {:02x?}{}",
                    bytes.len(),
                    shown,
                    if bytes.len() > shown.len() {
                        " ..."
                    } else {
                        ""
                    }
                )
            }
        };
        match &self.op {
            ParsedOp::Nop => Ok(()),
            ParsedOp::Dump { local } => pointer(f, "dump", local),
            ParsedOp::Write { remote: r, data: d } | ParsedOp::Read { remote: r, data: d } => {
                remote(f, r)?;
                data(f, d)
            }
            ParsedOp::Atomic {
                remote: r,
                op,
                result,
            } => {
                remote(f, r)?;
                writeln!(f, "  atomic  {op:x?}")?;
                pointer(f, "result", result)
            }
        }
    }
}

/// A hex dump of bytes, one octoword per line with its offset: for looking at raw WQEs.
pub struct Octowords<'a>(pub &'a [u8]);

impl fmt::Display for Octowords<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, chunk) in self.0.chunks(OCTOWORD_BYTES).enumerate() {
            write!(f, "{:04x}:", i * OCTOWORD_BYTES)?;
            for (j, b) in chunk.iter().enumerate() {
                if j % 4 == 0 {
                    f.write_str(" ")?;
                }
                write!(f, "{b:02x}")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
