//! The big-endian bit-field core every PRM layout is declared in.
//!
//! The PRM (and rdma-core's `DEVX_SET`/`DEVX_GET`) number the bits of a structure from the
//! most significant bit of its first byte: bit 0 is `0x80` of byte 0, bit 8 is `0x80` of
//! byte 1, and a field of width `w` at offset `o` holds its most significant bit at `o`.
//! Fields wider than 64 bits (GIDs) are byte-aligned byte strings.

use super::error::PrmError;

/// One field of a PRM structure: where it is and how wide, fixed at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Field {
    /// The PRM structure the field is declared in (`"qpc"`, `"ads"`, `"create_qp_in"`, ...).
    pub structure: &'static str,
    /// The field's PRM name.
    pub name: &'static str,
    /// Bit offset from the most significant bit of the enclosing command or output.
    pub bit_offset: u32,
    /// Width in bits: 1 to 64 for integers, a multiple of 8 at a byte boundary for strings.
    pub bit_width: u32,
}

impl Field {
    /// A field of `structure` at `bit_offset` (relative to that structure), `bit_width` wide.
    pub const fn new(
        structure: &'static str,
        name: &'static str,
        bit_offset: u32,
        bit_width: u32,
    ) -> Self {
        Self {
            structure,
            name,
            bit_offset,
            bit_width,
        }
    }

    /// The same field seen from a structure that embeds its own at bit `base`.
    pub const fn within(self, base: u32) -> Self {
        Self {
            bit_offset: self.bit_offset + base,
            ..self
        }
    }

    /// The first bit after the field.
    pub const fn end(self) -> u32 {
        self.bit_offset + self.bit_width
    }

    /// The largest value an integer field holds (`u64::MAX` for 64-bit fields).
    pub const fn max(self) -> u64 {
        if self.bit_width >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bit_width) - 1
        }
    }

    /// Whether the field is a byte string (wider than 64 bits, byte-aligned).
    pub const fn is_bytes(self) -> bool {
        self.bit_width > 64
    }
}

/// A PRM structure: its name, size in bits and every field we read or write in it.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The PRM name (`"qpc"`, `"create_qp_in"`, ...).
    pub name: &'static str,
    /// Size in bits (a multiple of 32, as every PRM structure is).
    pub bits: u32,
    /// The fields, offsets relative to this structure, in increasing offset order.
    pub fields: &'static [Field],
}

impl Layout {
    /// Size in bytes.
    pub const fn bytes(&self) -> usize {
        (self.bits / 8) as usize
    }

    /// The field called `name`, if the layout declares it.
    pub fn field(&self, name: &str) -> Option<Field> {
        self.fields.iter().copied().find(|f| f.name == name)
    }

    /// Whether the layout is well formed: a whole number of dwords, every field non-empty,
    /// inside the structure, integer fields at most 64 bits and not crossing a dword boundary
    /// unless dword-aligned (as `DEVX_SET` requires), byte strings byte-aligned, fields in
    /// increasing order and never overlapping. Evaluated in `const` assertions.
    pub const fn is_well_formed(&self) -> bool {
        if self.bits == 0 || self.bits % 32 != 0 {
            return false;
        }
        let mut i = 0;
        let mut previous_end = 0;
        while i < self.fields.len() {
            let f = self.fields[i];
            if f.bit_width == 0 || f.bit_offset < previous_end || f.end() > self.bits {
                return false;
            }
            if f.bit_width > 64 {
                if f.bit_offset % 8 != 0 || f.bit_width % 8 != 0 {
                    return false;
                }
            } else if f.bit_width > 32 {
                if f.bit_offset % 32 != 0 || f.bit_width % 32 != 0 {
                    return false;
                }
            } else if f.bit_offset / 32 != (f.end() - 1) / 32 {
                return false;
            }
            previous_end = f.end();
            i += 1;
        }
        true
    }

    /// Whether `name` sits at `bit_offset` with `bit_width` in this layout (for pinning
    /// offsets measured elsewhere in `const` assertions).
    pub const fn has(&self, name: &str, bit_offset: u32, bit_width: u32) -> bool {
        let mut i = 0;
        while i < self.fields.len() {
            let f = self.fields[i];
            if const_str_eq(f.name, name) {
                return f.bit_offset == bit_offset && f.bit_width == bit_width;
            }
            i += 1;
        }
        false
    }
}

const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Writes fields into a zeroed command buffer, refusing values that do not fit.
#[derive(Debug)]
pub(crate) struct BitWriter {
    command: &'static str,
    bytes: Vec<u8>,
}

impl BitWriter {
    /// A zeroed buffer of `bytes` bytes for `command`.
    pub(crate) fn new(command: &'static str, bytes: usize) -> Self {
        Self {
            command,
            bytes: vec![0; bytes],
        }
    }

    /// Stores `value` in the integer `field`; a value wider than the field is an error.
    pub(crate) fn set(&mut self, field: Field, value: u64) -> Result<(), PrmError> {
        if field.is_bytes() || value > field.max() {
            return Err(PrmError::FieldOutOfRange {
                command: self.command,
                structure: field.structure,
                field: field.name,
                value,
                max: field.max(),
            });
        }
        put_bits(&mut self.bytes, field, value).ok_or(PrmError::FieldOutsideBuffer {
            command: self.command,
            field: field.name,
        })
    }

    /// Stores a boolean in a one-bit field.
    pub(crate) fn flag(&mut self, field: Field, value: bool) -> Result<(), PrmError> {
        self.set(field, u64::from(value))
    }

    /// Stores a byte string field (a GID) verbatim.
    pub(crate) fn set_bytes(&mut self, field: Field, value: &[u8]) -> Result<(), PrmError> {
        let start = (field.bit_offset / 8) as usize;
        let len = (field.bit_width / 8) as usize;
        let outside = PrmError::FieldOutsideBuffer {
            command: self.command,
            field: field.name,
        };
        if !field.is_bytes() || value.len() != len {
            return Err(outside);
        }
        let end = start.checked_add(len).ok_or(outside.clone())?;
        self.bytes
            .get_mut(start..end)
            .ok_or(outside)?
            .copy_from_slice(value);
        Ok(())
    }

    /// The finished command bytes.
    pub(crate) fn finish(self) -> Vec<u8> {
        self.bytes
    }
}

/// Reads fields from command or output bytes whose length has been checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BitReader<'a> {
    command: &'static str,
    bytes: &'a [u8],
}

impl<'a> BitReader<'a> {
    /// A reader over `bytes`, which must hold at least `min_bytes`.
    pub(crate) fn new(
        command: &'static str,
        bytes: &'a [u8],
        min_bytes: usize,
    ) -> Result<Self, PrmError> {
        if bytes.len() < min_bytes {
            return Err(PrmError::Truncated {
                command,
                len: bytes.len(),
                needed: min_bytes,
            });
        }
        Ok(Self { command, bytes })
    }

    /// The value of an integer field.
    pub(crate) fn get(&self, field: Field) -> Result<u64, PrmError> {
        if field.is_bytes() {
            return Err(PrmError::FieldOutsideBuffer {
                command: self.command,
                field: field.name,
            });
        }
        get_bits(self.bytes, field).ok_or(PrmError::Truncated {
            command: self.command,
            len: self.bytes.len(),
            needed: field.end().div_ceil(8) as usize,
        })
    }

    /// A field that the caller's type holds in fewer bits than the wire (never truncates:
    /// the field width is checked to fit `T` in the layout's const assertions).
    pub(crate) fn get_as<T: TryFrom<u64>>(&self, field: Field) -> Result<T, PrmError> {
        let value = self.get(field)?;
        T::try_from(value).map_err(|_| PrmError::FieldOutOfRange {
            command: self.command,
            structure: field.structure,
            field: field.name,
            value,
            max: field.max(),
        })
    }

    /// The value of a one-bit field.
    pub(crate) fn flag(&self, field: Field) -> Result<bool, PrmError> {
        Ok(self.get(field)? != 0)
    }

    /// The value of a byte-string field.
    pub(crate) fn get_bytes<const N: usize>(&self, field: Field) -> Result<[u8; N], PrmError> {
        let start = (field.bit_offset / 8) as usize;
        let end = start.checked_add(N).ok_or(PrmError::FieldOutsideBuffer {
            command: self.command,
            field: field.name,
        })?;
        if !field.is_bytes() || field.bit_width as usize != N * 8 {
            return Err(PrmError::FieldOutsideBuffer {
                command: self.command,
                field: field.name,
            });
        }
        let slice = self.bytes.get(start..end).ok_or(PrmError::Truncated {
            command: self.command,
            len: self.bytes.len(),
            needed: end,
        })?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        Ok(out)
    }

    /// Refuses set bits outside `fields` in the first `len` bytes: a command carrying
    /// something this decoder does not understand is malformed, not silently half-read.
    pub(crate) fn only(&self, len: usize, fields: &[Field]) -> Result<(), PrmError> {
        let mut known = vec![0u8; len];
        for field in fields {
            if field.end().div_ceil(8) as usize > len {
                continue;
            }
            for bit in field.bit_offset..field.end() {
                if let Some(byte) = known.get_mut((bit / 8) as usize) {
                    *byte |= 0x80 >> (bit % 8);
                }
            }
        }
        for (index, (&byte, &mask)) in self.bytes.iter().zip(known.iter()).enumerate() {
            let unknown = byte & !mask;
            if unknown != 0 {
                let bit = index as u32 * 8 + unknown.leading_zeros();
                return Err(PrmError::UnknownBits {
                    command: self.command,
                    bit_offset: bit,
                });
            }
        }
        Ok(())
    }
}

/// Writes `value` (already known to fit) into `field`; `None` when the buffer is too short.
fn put_bits(bytes: &mut [u8], field: Field, value: u64) -> Option<()> {
    let end_byte = field.end().div_ceil(8) as usize;
    if end_byte > bytes.len() {
        return None;
    }
    for i in 0..field.bit_width {
        let bit = (value >> (field.bit_width - 1 - i)) & 1;
        let position = field.bit_offset + i;
        let byte = bytes.get_mut((position / 8) as usize)?;
        let mask = 0x80u8 >> (position % 8);
        if bit == 1 {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
    Some(())
}

/// Reads an integer field; `None` when the buffer is too short.
fn get_bits(bytes: &[u8], field: Field) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..field.bit_width {
        let position = field.bit_offset + i;
        let byte = *bytes.get((position / 8) as usize)?;
        let bit = (byte >> (7 - position % 8)) & 1;
        value = (value << 1) | u64::from(bit);
    }
    Some(value)
}
