//! The operation and the DC target a software-NIC fuzz recipe names, shared by the proptest suite
//! (`tests/softnic_fuzz.rs`) and the cargo-fuzz target (`fuzz/src/softnic.rs`, which
//! includes this file by path: the fuzz crate is a workspace of its own).

use ibgda::wqe::{
    AnyData, AnyDcTarget, AnyOperation, AtomicOp, AtomicWidth, CompactAddressVector,
    FullAddressVector, LinkAddress, LocalBuffer, RemoteAddress, Sge,
};

/// `kind % 9` picks: NOP, DUMP (of the first SGE, else NOP), gathered WRITE, inline WRITE
/// of `payload`, WRITE with immediate `words[0]`, READ, compare-swap, masked compare-swap
/// and masked fetch-add or fetch-add (8 or 4 bytes, or masked or not, by `words[3]`'s bit
/// 0); the atomics' operands are `words`.
pub fn recipe_operation<'a>(
    kind: u8,
    words: [u64; 4],
    remote: RemoteAddress,
    result: LocalBuffer,
    sges: &'a [Sge],
    payload: &'a [u8],
) -> AnyOperation<'a> {
    let [w0, w1, w2, w3] = words;
    let four = |v: u64| v & 0xffff_ffff;
    let data = if sges.is_empty() {
        AnyData::Empty
    } else {
        AnyData::Sges(sges)
    };
    match kind % 9 {
        0 => AnyOperation::Nop,
        1 => sges
            .first()
            .map_or(AnyOperation::Nop, |&s| AnyOperation::Dump(s)),
        2 => AnyOperation::Write {
            remote,
            imm: None,
            data,
        },
        3 => AnyOperation::Write {
            remote,
            imm: None,
            data: AnyData::Inline(payload),
        },
        4 => AnyOperation::Write {
            remote,
            imm: Some(w0 as u32),
            data,
        },
        5 => AnyOperation::Read { remote, data },
        6 => AnyOperation::Atomic {
            remote,
            result,
            op: AtomicOp::CompareSwap {
                compare: w0,
                swap: w1,
            },
        },
        7 => AnyOperation::Atomic {
            remote,
            result,
            op: if w3 & 1 == 0 {
                AtomicOp::MaskedCompareSwap {
                    width: AtomicWidth::Eight,
                    swap: w0,
                    compare: w1,
                    swap_mask: w2,
                    compare_mask: w3,
                }
            } else {
                AtomicOp::MaskedCompareSwap {
                    width: AtomicWidth::Four,
                    swap: four(w0),
                    compare: four(w1),
                    swap_mask: four(w2),
                    compare_mask: four(w3),
                }
            },
        },
        _ => AnyOperation::Atomic {
            remote,
            result,
            op: if w3 & 1 == 0 {
                AtomicOp::MaskedFetchAdd {
                    width: AtomicWidth::Eight,
                    add: w0,
                    field_boundary: w1,
                }
            } else {
                AtomicOp::FetchAdd { add: w0 }
            },
        },
    }
}

/// The DC target a recipe names: a full (InfiniBand, no GRH) or compact address vector for
/// DCT `dct` with key `dc_key` at LID `lid`, or `None` if the encoder refuses it.
pub fn recipe_target(full: bool, lid: u16, dct: u32, dc_key: u64) -> Option<AnyDcTarget> {
    Some(if full {
        FullAddressVector {
            dct,
            dc_key,
            link: LinkAddress::InfiniBand {
                lid,
                sl: 0,
                static_rate: 0,
                source_path_bits: 0,
                force_loopback: false,
                grh: None,
            },
        }
        .encode()
        .ok()?
        .into()
    } else {
        CompactAddressVector {
            dct,
            dc_key,
            lid,
            ..Default::default()
        }
        .encode()
        .ok()?
        .into()
    })
}
