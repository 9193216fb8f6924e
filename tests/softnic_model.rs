//! Random sequences of operations (WRITEs, READs, every atomic, NOPs, wrong keys, in- and
//! out-of-bounds addresses, random signaling, doorbells at random points) on the software
//! NIC match a plain reference model of both nodes' memory and of the CQEs.
//!
//! The model is written here from the documented semantics, not from the NIC's code:
//! byte arrays for memory, big-endian atomic operands, a bit-by-bit masked add, the check
//! order (local range, rkey, remote range), the first error and the flushes after it.

mod softnic_support;

use ibgda::wqe::*;
use proptest::prelude::*;
use softnic_support::*;

const REGION: u64 = 256;
const WRONG_RKEY: u32 = 0x0bad_0bad;

#[derive(Clone, Debug)]
enum Op {
    WriteInline {
        remote: u64,
        data: Vec<u8>,
    },
    WritePointer {
        local: u64,
        remote: u64,
        len: u32,
    },
    WriteEmpty,
    Read {
        local: u64,
        remote: u64,
        len: u32,
    },
    Atomic {
        local: u64,
        remote: u64,
        op: AtomicOp,
    },
    Nop,
    WrongRkey {
        remote: u64,
    },
    /// Not a WQE: publish, ring, run the NIC, and compare with the model.
    Doorbell,
}

#[derive(Clone, Debug)]
struct Step {
    op: Op,
    signaled: bool,
}

/// A region offset. Without faults every access of up to 64 bytes fits; with faults
/// some accesses reach past the region's end or start.
fn offset(faults: bool) -> BoxedStrategy<u64> {
    if faults {
        prop_oneof![
            12 => 0..REGION - 64,
            3 => REGION - 64..REGION,
            1 => REGION - 16..REGION + 64,
            1 => Just(u64::MAX - 3),
        ]
        .boxed()
    } else {
        (0..REGION - 64).boxed()
    }
}

/// An offset aligned to `size`, past the region now and then with faults.
fn aligned(size: u64, faults: bool) -> BoxedStrategy<u64> {
    let inside = (0..REGION / size).prop_map(move |k| k * size);
    if faults {
        prop_oneof![
            15 => inside,
            1 => (REGION / size..REGION / size + 4).prop_map(move |k| k * size),
        ]
        .boxed()
    } else {
        inside.boxed()
    }
}

fn atomic() -> impl Strategy<Value = (AtomicOp, u64)> {
    // Compare values are often zero, and the remote region's second half starts zeroed,
    // so that compare-swaps succeed as well as fail.
    let compare64 = || prop_oneof![Just(0u64), any::<u64>()];
    let compare32 = || prop_oneof![Just(0u64), any::<u32>().prop_map(u64::from)];
    let word32 = || any::<u32>().prop_map(u64::from);
    prop_oneof![
        (compare64(), any::<u64>())
            .prop_map(|(compare, swap)| (AtomicOp::CompareSwap { compare, swap }, 8)),
        any::<u64>().prop_map(|add| (AtomicOp::FetchAdd { add }, 8)),
        (word32(), compare32(), word32(), word32()).prop_map(|(swap, compare, sm, cm)| (
            AtomicOp::MaskedCompareSwap {
                width: AtomicWidth::Four,
                swap,
                compare,
                swap_mask: sm,
                compare_mask: cm
            },
            4
        )),
        (any::<u64>(), compare64(), any::<u64>(), any::<u64>()).prop_map(
            |(swap, compare, sm, cm)| (
                AtomicOp::MaskedCompareSwap {
                    width: AtomicWidth::Eight,
                    swap,
                    compare,
                    swap_mask: sm,
                    compare_mask: cm
                },
                8
            )
        ),
        (word32(), word32()).prop_map(|(add, fb)| (
            AtomicOp::MaskedFetchAdd {
                width: AtomicWidth::Four,
                add,
                field_boundary: fb
            },
            4
        )),
        (any::<u64>(), any::<u64>()).prop_map(|(add, fb)| (
            AtomicOp::MaskedFetchAdd {
                width: AtomicWidth::Eight,
                add,
                field_boundary: fb
            },
            8
        )),
    ]
}

fn op(faults: bool) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (offset(faults), prop::collection::vec(any::<u8>(), 1..=12))
            .prop_map(|(remote, data)| Op::WriteInline { remote, data }),
        3 => (offset(faults), offset(faults), 1u32..=40)
            .prop_map(|(local, remote, len)| Op::WritePointer { local, remote, len }),
        1 => Just(Op::WriteEmpty),
        3 => (offset(faults), offset(faults), 1u32..=40)
            .prop_map(|(local, remote, len)| Op::Read { local, remote, len }),
        4 => (atomic(), offset(faults)).prop_flat_map(move |((op, size), local)| {
            aligned(size, faults).prop_map(move |remote| Op::Atomic { local, remote, op })
        }),
        1 => Just(Op::Nop),
        // Without faults this is one more NOP.
        1 => aligned(8, faults).prop_map(move |remote| if faults {
            Op::WrongRkey { remote }
        } else {
            Op::Nop
        }),
        2 => Just(Op::Doorbell),
    ]
}

/// Half the sequences never fault, so that long runs of successes are checked too.
fn steps() -> impl Strategy<Value = Vec<Step>> {
    any::<bool>().prop_flat_map(|faults| {
        prop::collection::vec(
            (op(faults), any::<bool>()).prop_map(|(op, signaled)| Step { op, signaled }),
            1..48,
        )
    })
}

// ---------------------------------------------------------------------------------------
// The reference model.

fn width_bits(width: AtomicWidth) -> u32 {
    match width {
        AtomicWidth::Four => 32,
        AtomicWidth::Eight => 64,
    }
}

/// The new operand value, straight from the definitions.
fn reference_atomic(op: &AtomicOp, old: u64) -> u64 {
    match *op {
        AtomicOp::CompareSwap { compare, swap } => {
            if old == compare {
                swap
            } else {
                old
            }
        }
        AtomicOp::FetchAdd { add } => old.wrapping_add(add),
        AtomicOp::MaskedCompareSwap {
            width,
            swap,
            compare,
            swap_mask,
            compare_mask,
        } => {
            let bits = width_bits(width);
            let mut new = old;
            let matches = (0..bits)
                .all(|i| compare_mask >> i & 1 == 0 || (old >> i & 1) == (compare >> i & 1));
            if matches {
                for i in 0..bits {
                    if swap_mask >> i & 1 == 1 {
                        new = (new & !(1 << i)) | (swap & (1 << i));
                    }
                }
            }
            new
        }
        AtomicOp::MaskedFetchAdd {
            width,
            add,
            field_boundary,
        } => {
            let mut carry = 0;
            let mut out = 0;
            for i in 0..width_bits(width) {
                let sum = (old >> i & 1) + (add >> i & 1) + carry;
                out |= (sum & 1) << i;
                carry = if field_boundary >> i & 1 == 1 {
                    0
                } else {
                    sum >> 1
                };
            }
            out
        }
    }
}

struct Model {
    a: Vec<u8>,
    b: Vec<u8>,
    failed: bool,
    cqes: Vec<[u8; 64]>,
    counter: u16,
    qpn: u32,
}

/// The buffer offset of `len` bytes at region offset `offset`, if inside the region.
fn inside(offset: u64, len: u64) -> Option<usize> {
    let end = offset.checked_add(len)?;
    (end <= REGION).then(|| GUARD_LEN + offset as usize)
}

impl Model {
    fn error(&mut self, opcode: u8, index: u16, syndrome: u8, vendor: u8) {
        self.cqes
            .push(err_cqe(self.qpn, opcode, index, syndrome, vendor, 0));
        self.failed = true;
    }

    /// Applies one WQE; returns nothing, records CQEs.
    fn apply(&mut self, step: &Step, opcode: u8, blocks: u16) {
        let index = self.counter;
        self.counter = self.counter.wrapping_add(blocks);
        if self.failed {
            self.cqes.push(flush_cqe(self.qpn, opcode, index, 0));
            return;
        }
        let mut byte_cnt = 0;
        match &step.op {
            Op::WriteInline { remote, data } => {
                let Some(r) = inside(*remote, data.len() as u64) else {
                    return self.error(opcode, index, 0x13, 0x41);
                };
                self.b[r..r + data.len()].copy_from_slice(data);
            }
            Op::WritePointer { local, remote, len } => {
                let len = u64::from(*len);
                let Some(l) = inside(*local, len) else {
                    return self.error(opcode, index, 0x04, 0x21);
                };
                let Some(r) = inside(*remote, len) else {
                    return self.error(opcode, index, 0x13, 0x41);
                };
                let data = self.a[l..l + len as usize].to_vec();
                self.b[r..r + len as usize].copy_from_slice(&data);
            }
            Op::WriteEmpty | Op::Nop => {}
            Op::Read { local, remote, len } => {
                let len = u64::from(*len);
                let Some(l) = inside(*local, len) else {
                    return self.error(opcode, index, 0x04, 0x21);
                };
                let Some(r) = inside(*remote, len) else {
                    return self.error(opcode, index, 0x13, 0x41);
                };
                let data = self.b[r..r + len as usize].to_vec();
                self.a[l..l + len as usize].copy_from_slice(&data);
                byte_cnt = len as u32;
            }
            Op::Atomic { local, remote, op } => {
                let size = op.operand_bytes() as usize;
                let Some(l) = inside(*local, size as u64) else {
                    return self.error(opcode, index, 0x04, 0x21);
                };
                let Some(r) = inside(*remote, size as u64) else {
                    return self.error(opcode, index, 0x13, 0x41);
                };
                let old = self.b[r..r + size]
                    .iter()
                    .fold(0u64, |acc, &x| acc << 8 | u64::from(x));
                let new = reference_atomic(op, old);
                for k in 0..size {
                    self.b[r + k] = (new >> (8 * (size - 1 - k))) as u8;
                    self.a[l + k] = (old >> (8 * (size - 1 - k))) as u8;
                }
                byte_cnt = size as u32;
            }
            Op::WrongRkey { .. } => return self.error(opcode, index, 0x13, 0x40),
            Op::Doorbell => unreachable!(),
        }
        if step.signaled {
            self.cqes
                .push(req_cqe(self.qpn, opcode, index, byte_cnt, 0));
        }
    }
}

// ---------------------------------------------------------------------------------------
// The test.

fn post(pair: &mut RcPair, step: &Step) -> (u16, u8, u16) {
    let b = &pair.b.area.region;
    let a = &pair.a.area.region;
    let mode = if step.signaled {
        CompletionMode::Always
    } else {
        CompletionMode::OnError
    };
    macro_rules! go {
        ($builder:expr) => {{
            let wqe = $builder.completion(mode).build().unwrap();
            let (opcode, blocks) = (wqe.opcode().byte(), wqe.wqebbs() as u16);
            (pair.a.sq.post(&wqe), opcode, blocks)
        }};
    }
    match &step.op {
        Op::WriteInline { remote, data } => go!(RdmaWrite::new(b.remote(*remote)).inline(data)),
        Op::WritePointer { local, remote, len } => {
            go!(RdmaWrite::new(b.remote(*remote)).sge(a.sge(*local, *len).unwrap()))
        }
        Op::WriteEmpty => go!(RdmaWrite::new(b.remote(0)).without_data()),
        Op::Read { local, remote, len } => {
            go!(RdmaRead::new(b.remote(*remote)).sge(a.sge(*local, *len).unwrap()))
        }
        Op::Atomic { local, remote, op } => {
            go!(Atomic::any(b.remote(*remote), a.local(*local), *op))
        }
        Op::Nop => go!(Nop::<Rc>::new()),
        Op::WrongRkey { remote } => go!(RdmaWrite::new(RemoteAddress::new(
            b.addr_at(*remote),
            RKey(WRONG_RKEY)
        ))
        .inline(&[1, 2, 3, 4])),
        Op::Doorbell => unreachable!(),
    }
}

fn check(pair: &mut RcPair, model: &Model, seen: &mut Vec<[u8; 64]>) -> Result<(), TestCaseError> {
    pair.a.sq.submit();
    pair.fabric.run_until_idle();
    seen.extend(pair.a.cq.drain());
    prop_assert_eq!(&seen[..], &model.cqes[..]);
    prop_assert_eq!(pair.a.area.image(), model.a.clone());
    prop_assert_eq!(pair.b.area.image(), model.b.clone());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn random_operations_match_the_reference_model(steps in steps()) {
        let mut pair = RcPair::new(&Setup {
            ring_wqebbs: 128,
            cq_entries: 128,
            region_len: REGION as usize,
            ..Setup::default()
        });
        prop_assume!(pair.b.area.region.rkey().0 != WRONG_RKEY);
        pair.b.area.set(128, &[0; 128]);
        let mut model = Model {
            a: pair.a.area.image(),
            b: pair.b.area.image(),
            failed: false,
            cqes: Vec::new(),
            counter: 0,
            qpn: pair.a.qpn.get(),
        };
        let mut seen = Vec::new();
        for step in &steps {
            if let Op::Doorbell = step.op {
                check(&mut pair, &model, &mut seen)?;
                continue;
            }
            let (index, opcode, blocks) = post(&mut pair, step);
            prop_assert_eq!(index, model.counter);
            model.apply(step, opcode, blocks);
        }
        check(&mut pair, &model, &mut seen)?;
        let counters = pair.fabric.counters();
        prop_assert_eq!(
            counters.wqes_executed + counters.wqes_failed + counters.wqes_flushed,
            steps.iter().filter(|s| !matches!(s.op, Op::Doorbell)).count() as u64
        );
    }
}
