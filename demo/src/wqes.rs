//! `ibgda-demo wqes`: builds one WQE of every kind, writes each into a small ring where it
//! wraps past the end, dumps the raw octowords, and parses them back.

use std::io::Write;

use ibgda::wqe::*;

fn show<S: WqeSpec>(
    out: &mut impl Write,
    title: &str,
    wqe: &Wqe<S>,
    transport: TransportKind,
    index: WqeIndex,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut memory = vec![0u8; 4 * WQEBB_BYTES];
    let mut ring = SendRing::new(&mut memory, WqeLimits::default())?;
    let wqebbs = ring.write(index, Qpn::new(0x00_0123)?, wqe)?;
    let parsed = parse_wqe(&memory, index, transport).map_err(|e| format!("{title}: {e}"))?;
    writeln!(
        out,
        "== {title}: DS {}, {wqebbs} WQEBB(s), at index {index} of a 4-block ring",
        wqe.ds()
    )?;
    write!(out, "{}", Octowords(&memory))?;
    writeln!(out, "{parsed}")?;
    Ok(())
}

/// Builds, dumps and parses one WQE of every kind.
pub fn dump_every_kind() -> Result<(), Box<dyn std::error::Error>> {
    let remote = RemoteAddress::new(0x7f00_0000_1000, RKey(0x0000_2222));
    let local = Sge::new(0x7f00_0000_8000, 64, LKey(0x0000_1111))?;
    let result = LocalBuffer::new(0x7f00_0000_9000, LKey(0x0000_1111));
    let payload = 0x0102_0304_0506_0708u64.to_be_bytes();
    let full = FullAddressVector {
        dct: 0x00_0abc,
        dc_key: 0x5623_ceaf,
        link: LinkAddress::InfiniBand {
            lid: 7,
            sl: 3,
            static_rate: 0,
            source_path_bits: 0,
            force_loopback: false,
            grh: None,
        },
    }
    .encode()?;
    let compact = CompactAddressVector {
        dct: 0x00_0abc,
        dc_key: 0x5623_ceaf,
        lid: 7,
        sl: 3,
        ..Default::default()
    }
    .encode()?;
    let rc = TransportKind::Rc;
    let dc = TransportKind::Dc;
    let i = WqeIndex(0xffff);
    let out = &mut std::io::stdout().lock();

    show(
        out,
        "RC RDMA WRITE, 8 B inline",
        &RdmaWrite::new(remote).inline(&payload).signaled().build()?,
        rc,
        i,
    )?;
    show(
        out,
        "RC RDMA WRITE, one pointer",
        &RdmaWrite::new(remote).sge(local).build()?,
        rc,
        i,
    )?;
    show(
        out,
        "RC RDMA WRITE_WITH_IMM",
        &RdmaWrite::new(remote)
            .sge(local)
            .immediate(0xcafe)
            .build()?,
        rc,
        i,
    )?;
    show(
        out,
        "RC RDMA READ",
        &RdmaRead::new(remote).sge(local).signaled().build()?,
        rc,
        i,
    )?;
    show(
        out,
        "RC compare-swap",
        &Atomic::compare_swap(remote, result, 1, 2).build()?,
        rc,
        i,
    )?;
    show(
        out,
        "RC fetch-add",
        &Atomic::fetch_add(remote, result, 1).build()?,
        rc,
        i,
    )?;
    show(
        out,
        "RC masked compare-swap, 4 B",
        &Atomic::masked_compare_swap_32(remote, result, 1, 2, !0, !0).build()?,
        rc,
        i,
    )?;
    show(
        out,
        "RC masked fetch-add, 4 B",
        &Atomic::masked_fetch_add_32(remote, result, 1, 0).build()?,
        rc,
        i,
    )?;
    show(
        out,
        "RC masked compare-swap, 8 B",
        &Atomic::masked_compare_swap_64(remote, result, 1, 2, !0, !0).build()?,
        rc,
        i,
    )?;
    show(
        out,
        "RC masked fetch-add, 8 B",
        &Atomic::masked_fetch_add_64(remote, result, 1, 0).build()?,
        rc,
        i,
    )?;
    show(
        out,
        "DC RDMA WRITE, full AV, 8 B inline",
        &RdmaWrite::new(full.at(remote)).inline(&payload).build()?,
        dc,
        i,
    )?;
    show(
        out,
        "DC RDMA READ, compact AV",
        &RdmaRead::new(compact.at(remote)).sge(local).build()?,
        dc,
        i,
    )?;
    show(
        out,
        "DC fetch-add, compact AV",
        &Atomic::fetch_add(compact.at(remote), result, 1).build()?,
        dc,
        i,
    )?;
    show(out, "NOP", &Nop::<Rc>::new().signaled().build()?, rc, i)?;
    show(
        out,
        "DUMP with fence",
        &Dump::<Rc>::new(local).fence(FenceMode::Fence).build()?,
        rc,
        i,
    )?;
    Ok(())
}
