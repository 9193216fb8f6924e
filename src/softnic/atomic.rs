//! The arithmetic of the atomic operations, and their execution on a big-endian operand
//! in a [`DmaBuffer`].

use core::sync::atomic::Ordering;

use crate::memory::DmaBuffer;
use crate::wqe::{AtomicOp, AtomicWidth};

/// All ones in the operand's width.
const fn width_mask(width: AtomicWidth) -> u64 {
    match width {
        AtomicWidth::Four => u32::MAX as u64,
        AtomicWidth::Eight => u64::MAX,
    }
}

/// The operand's top bit.
const fn top_bit(width: AtomicWidth) -> u64 {
    match width {
        AtomicWidth::Four => 1 << 31,
        AtomicWidth::Eight => 1 << 63,
    }
}

/// The width of an atomic's operand.
pub(crate) const fn operand_width(op: &AtomicOp) -> AtomicWidth {
    match op {
        AtomicOp::CompareSwap { .. } | AtomicOp::FetchAdd { .. } => AtomicWidth::Eight,
        AtomicOp::MaskedCompareSwap { width, .. } | AtomicOp::MaskedFetchAdd { width, .. } => {
            *width
        }
    }
}

/// Masked fetch-add: `old + add` in `width` bits, where a set bit `i` of `field_boundary`
/// stops the carry out of bit `i` (bit `i` is the most significant bit of a field, and
/// the fields add independently, each wrapping). The carry out of the operand's top bit
/// is always discarded. `field_boundary = 0` is a plain wrapping add; all ones is XOR (the
/// encoding NVSHMEM uses for its atomic XOR).
///
/// ```
/// use ibgda::softnic::masked_fetch_add;
/// use ibgda::wqe::AtomicWidth;
/// // Two 16-bit fields in a 32-bit operand: the low field wraps without touching the high one.
/// assert_eq!(masked_fetch_add(0x0001_ffff, 1, 0x0000_8000, AtomicWidth::Four), 0x0001_0000);
/// assert_eq!(masked_fetch_add(0x0001_ffff, 1, 0, AtomicWidth::Four), 0x0002_0000);
/// assert_eq!(masked_fetch_add(0b1100, 0b1010, u64::MAX, AtomicWidth::Eight), 0b0110);
/// ```
pub fn masked_fetch_add(old: u64, add: u64, field_boundary: u64, width: AtomicWidth) -> u64 {
    let mask = width_mask(width);
    // The top bit of every field, the operand's own top bit included.
    let tops = (field_boundary | top_bit(width)) & mask;
    let (old, add) = (old & mask, add & mask);
    // With the top bits cleared, no field's sum carries out of its top bit: the carry out
    // of the bits below lands in the top bit position, where it is summed (XOR) with the
    // operands' top bits.
    let low = (old & !tops).wrapping_add(add & !tops);
    (low ^ ((old ^ add) & tops)) & mask
}

/// The value an atomic leaves in its operand, given the operand's original value `old`
/// (decoded from big-endian; a 4-byte operand in the low 32 bits). The result has the
/// operand's width.
///
/// ```
/// use ibgda::softnic::atomic_new_value;
/// use ibgda::wqe::{AtomicOp, AtomicWidth};
/// let cas = AtomicOp::CompareSwap { compare: 5, swap: 9 };
/// assert_eq!(atomic_new_value(&cas, 5), 9);
/// assert_eq!(atomic_new_value(&cas, 6), 6);
/// // Masked compare-swap: compare the low byte only, write the high nibble of it.
/// let masked = AtomicOp::MaskedCompareSwap {
///     width: AtomicWidth::Four,
///     swap: 0xa0,
///     compare: 0x34,
///     swap_mask: 0xf0,
///     compare_mask: 0xff,
/// };
/// assert_eq!(atomic_new_value(&masked, 0x1234), 0x12a4);
/// assert_eq!(atomic_new_value(&masked, 0x1235), 0x1235);
/// ```
pub fn atomic_new_value(op: &AtomicOp, old: u64) -> u64 {
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
            let mask = width_mask(width);
            let old = old & mask;
            if (old ^ compare) & compare_mask & mask == 0 {
                ((old & !swap_mask) | (swap & swap_mask)) & mask
            } else {
                old
            }
        }
        AtomicOp::MaskedFetchAdd {
            width,
            add,
            field_boundary,
        } => masked_fetch_add(old, add, field_boundary, width),
    }
}

/// Why an atomic could not be performed on a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NotAddressable;

/// Performs `op` on the big-endian operand at byte `offset` of `buffer` as one atomic
/// read-modify-write of the 64-bit word that holds it, and returns the original value.
/// `offset` must be aligned to the operand size (the caller checked the virtual address;
/// buffers are 8-byte aligned, so the offset is too); otherwise nothing is touched.
pub(crate) fn perform_atomic(
    buffer: &DmaBuffer,
    offset: usize,
    op: &AtomicOp,
) -> Result<u64, NotAddressable> {
    let width = operand_width(op);
    let size = width.bytes() as usize;
    if offset % size != 0 {
        return Err(NotAddressable);
    }
    let within = offset % 8;
    let word = buffer.word(offset - within).map_err(|_| NotAddressable)?;
    let mut original = 0u64;
    // The closure always returns `Some`, so the update always succeeds.
    let _ = word.fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
        let mut bytes = current.to_ne_bytes();
        let field = &mut bytes[within..within + size];
        let old = field.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
        let new = atomic_new_value(op, old);
        field.copy_from_slice(&new.to_be_bytes()[8 - size..]);
        original = old;
        Some(u64::from_ne_bytes(bytes))
    });
    Ok(original)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, bit by bit: a carry crosses from bit `i` to bit `i + 1` only if bit
    /// `i` of the boundary mask is clear.
    fn masked_add_reference(old: u64, add: u64, boundary: u64, bits: u32) -> u64 {
        let mut carry = 0u64;
        let mut result = 0u64;
        for i in 0..bits {
            let sum = (old >> i & 1) + (add >> i & 1) + carry;
            result |= (sum & 1) << i;
            carry = if boundary >> i & 1 == 1 { 0 } else { sum >> 1 };
        }
        result
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 16 } else { 4096 }))]
        #[test]
        fn masked_fetch_add_matches_the_bitwise_definition(
            old: u64, add: u64, boundary: u64, four: bool,
        ) {
            let (width, bits) = if four { (AtomicWidth::Four, 32) } else { (AtomicWidth::Eight, 64) };
            let mask = if four { u64::from(u32::MAX) } else { u64::MAX };
            prop_assert_eq!(
                masked_fetch_add(old, add, boundary, width),
                masked_add_reference(old & mask, add & mask, boundary & mask, bits)
            );
        }
    }

    #[test]
    fn masked_fetch_add_special_boundaries() {
        for (a, b) in [
            (0u64, 0u64),
            (u64::MAX, 1),
            (0x1234_5678_9abc_def0, 0x0fed_cba9_8765_4321),
        ] {
            assert_eq!(
                masked_fetch_add(a, b, 0, AtomicWidth::Eight),
                a.wrapping_add(b)
            );
            assert_eq!(masked_fetch_add(a, b, u64::MAX, AtomicWidth::Eight), a ^ b);
            assert_eq!(
                masked_fetch_add(a, b, 0, AtomicWidth::Four),
                (a as u32).wrapping_add(b as u32) as u64
            );
        }
        // Eight 8-bit lanes: every lane adds 0x01 and wraps on its own.
        let lanes = 0x8080_8080_8080_8080;
        assert_eq!(
            masked_fetch_add(
                0xff00_ff00_ff00_ff00,
                0x0101_0101_0101_0101,
                lanes,
                AtomicWidth::Eight
            ),
            0x0001_0001_0001_0001
        );
    }

    #[test]
    fn atomics_on_memory_are_big_endian_and_touch_only_their_operand() {
        let buffer = DmaBuffer::zeroed(32, 8).unwrap();
        buffer.fill(0, 32, 0xee).unwrap();
        buffer.write(8, &7u64.to_be_bytes()).unwrap();
        let old = perform_atomic(&buffer, 8, &AtomicOp::FetchAdd { add: 0x100 }).unwrap();
        assert_eq!(old, 7);
        let mut bytes = [0u8; 8];
        buffer.read(8, &mut bytes).unwrap();
        assert_eq!(bytes, 0x107u64.to_be_bytes());

        buffer.write(20, &0x0102_0304u32.to_be_bytes()).unwrap();
        let op = AtomicOp::MaskedFetchAdd {
            width: AtomicWidth::Four,
            add: 1,
            field_boundary: 0,
        };
        assert_eq!(perform_atomic(&buffer, 20, &op).unwrap(), 0x0102_0304);
        let all = buffer.to_vec();
        assert_eq!(all[20..24], 0x0102_0305u32.to_be_bytes());
        assert_eq!(all[16..20], [0xee; 4]);
        assert_eq!(all[24..32], [0xee; 8]);
        assert_eq!(all[..8], [0xee; 8]);

        assert_eq!(perform_atomic(&buffer, 2, &op), Err(NotAddressable));
        assert_eq!(perform_atomic(&buffer, 32, &op), Err(NotAddressable));
        assert_eq!(
            perform_atomic(&buffer, 4, &AtomicOp::FetchAdd { add: 1 }),
            Err(NotAddressable)
        );
    }
}
