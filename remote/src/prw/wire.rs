//! A zero-copy protobuf wire-format reader.
//!
//! prost's derived decoders copy every `string` into a fresh `String`; remote write is mostly
//! strings, so the hot path reads fields with this reader instead and keeps label bytes borrowed
//! from the decompressed buffer until they are interned once per request. The prost messages in
//! [`super::proto_v1`]/[`super::proto_v2`] remain the schema of record: tests decode the same bytes
//! with both and require the same result.
//!
//! Reference: <https://protobuf.dev/programming-guides/encoding/> (varints, tags, wire types).

use std::fmt;

/// A protobuf wire type (the low three bits of a field tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireType {
    /// 0: int32, int64, uint32, uint64, sint*, bool, enum.
    Varint,
    /// 1: fixed64, sfixed64, double.
    Fixed64,
    /// 2: string, bytes, embedded messages, packed repeated fields.
    Len,
    /// 5: fixed32, sfixed32, float.
    Fixed32,
    /// 3: a (deprecated) group, skipped with its contents.
    Group,
}

impl fmt::Display for WireType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WireType::Varint => "varint",
            WireType::Fixed64 => "64-bit",
            WireType::Len => "length-delimited",
            WireType::Fixed32 => "32-bit",
            WireType::Group => "group",
        })
    }
}

/// One field's payload, borrowed from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value<'a> {
    /// A varint, undecoded as to signedness (int64 is the two's complement bit pattern).
    Varint(u64),
    /// Eight little-endian bytes as a `u64` (a double is `f64::from_bits`).
    Fixed64(u64),
    /// Four little-endian bytes.
    Fixed32(u32),
    /// A length-delimited payload.
    Len(&'a [u8]),
    /// A group (proto2), already skipped up to its end tag. No remote-write field is a group;
    /// protobuf still requires skipping one that appears as an unknown field.
    Group,
}

impl Value<'_> {
    /// The wire type this value was encoded with.
    pub(crate) fn wire_type(&self) -> WireType {
        match self {
            Value::Varint(_) => WireType::Varint,
            Value::Fixed64(_) => WireType::Fixed64,
            Value::Fixed32(_) => WireType::Fixed32,
            Value::Len(_) => WireType::Len,
            Value::Group => WireType::Group,
        }
    }
}

/// Why bytes are not a valid protobuf encoding. The caller adds the field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WireError {
    /// The input ended inside a field.
    Truncated,
    /// A varint longer than ten bytes or overflowing 64 bits.
    VarintOverflow,
    /// A tag with field number 0 or above 2^29-1.
    BadFieldNumber(u64),
    /// Wire types 6 and 7 (undefined), or an end-group tag without its start.
    UnsupportedWireType(u8),
    /// Groups nested deeper than [`MAX_GROUP_DEPTH`].
    GroupTooDeep,
    /// A group closed by the end tag of another field.
    GroupMismatch,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => f.write_str("message truncated"),
            WireError::VarintOverflow => f.write_str("varint overflows 64 bits"),
            WireError::BadFieldNumber(n) => write!(f, "invalid field number {n}"),
            WireError::UnsupportedWireType(t) => write!(f, "unsupported wire type {t}"),
            WireError::GroupTooDeep => write!(f, "groups nested deeper than {MAX_GROUP_DEPTH}"),
            WireError::GroupMismatch => f.write_str("group closed by another field's end tag"),
        }
    }
}

/// A field-level decoding failure: bad wire bytes, or a known field with the wrong wire type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FieldError {
    /// The bytes are not a protobuf encoding.
    Wire(WireError),
    /// A field of the schema arrived with another wire type (e.g. a string field as a varint).
    WireType {
        /// The field number.
        field: u32,
        /// The wire type found.
        got: WireType,
        /// The wire type the schema declares.
        want: WireType,
    },
    /// A string field that is not valid UTF-8.
    Utf8 {
        /// The field number.
        field: u32,
    },
}

impl From<WireError> for FieldError {
    fn from(e: WireError) -> Self {
        FieldError::Wire(e)
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldError::Wire(e) => e.fmt(f),
            FieldError::WireType { field, got, want } => {
                write!(f, "field {field} has wire type {got}, expected {want}")
            }
            FieldError::Utf8 { field } => write!(f, "field {field} is not valid UTF-8"),
        }
    }
}

/// The error for a field with an unexpected wire type.
#[inline]
pub(crate) fn wrong_type(field: u32, got: &Value<'_>, want: WireType) -> FieldError {
    FieldError::WireType { field, got: got.wire_type(), want }
}

/// A [`crate::Error::Protobuf`] for a failure at `path` (e.g. `timeseries[3].samples[0]`).
#[cold]
pub(crate) fn at(path: impl fmt::Display, e: impl fmt::Display) -> crate::Error {
    crate::Error::Protobuf(format!("{path}: {e}"))
}

/// Largest field number protobuf allows.
const MAX_FIELD_NUMBER: u64 = (1 << 29) - 1;

/// Deepest nesting of groups skipped (prost's default recursion limit).
pub(crate) const MAX_GROUP_DEPTH: usize = 100;

/// Iterates the fields of one message, in wire order.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over the encoding of one message.
    #[inline]
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    /// The bytes of a length-delimited field whose one-byte tag is `tag`, if the message goes
    /// on with that tag and a length of one or two varint bytes that the message holds; else
    /// `None`, having read nothing. A fast path for the repeated fields senders write most,
    /// which [`Reader::next_field`] decodes the same way, only slower.
    #[inline(always)]
    pub(crate) fn len_field_short(&mut self, tag: u8) -> Option<&'a [u8]> {
        let (len, rest) = match self.buf {
            [t, l, rest @ ..] if *t == tag && *l < 0x80 => (usize::from(*l), rest),
            [t, l0, l1, rest @ ..] if *t == tag && *l1 < 0x80 => {
                (usize::from(l0 & 0x7f) | usize::from(*l1) << 7, rest)
            }
            _ => return None,
        };
        let (field, rest) = rest.split_at_checked(len)?;
        self.buf = rest;
        Some(field)
    }

    /// The next `(field number, value)`, or `None` at the end of the message.
    #[inline(always)]
    pub(crate) fn next_field(&mut self) -> Result<Option<(u32, Value<'a>)>, WireError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let (field, wire_type) = self.tag()?;
        let value = match wire_type {
            0 => Value::Varint(self.varint()?),
            1 => Value::Fixed64(u64::from_le_bytes(self.array::<8>()?)),
            2 => {
                let len = self.varint()?;
                let len = usize::try_from(len).map_err(|_| WireError::Truncated)?;
                Value::Len(self.take(len)?)
            }
            3 => {
                self.skip_group(field, 1)?;
                Value::Group
            }
            5 => Value::Fixed32(u32::from_le_bytes(self.array::<4>()?)),
            other => return Err(WireError::UnsupportedWireType(other)),
        };
        Ok(Some((field, value)))
    }

    /// Reads a field tag: `(field number, wire type)`.
    #[inline(always)]
    fn tag(&mut self) -> Result<(u32, u8), WireError> {
        let tag = self.varint()?;
        let field = tag >> 3;
        if field == 0 || field > MAX_FIELD_NUMBER {
            return Err(WireError::BadFieldNumber(field));
        }
        // `field` fits: it is at most MAX_FIELD_NUMBER.
        Ok((field as u32, (tag & 7) as u8))
    }

    /// Skips the contents of group `field` through its end tag.
    fn skip_group(&mut self, field: u32, depth: usize) -> Result<(), WireError> {
        if depth > MAX_GROUP_DEPTH {
            return Err(WireError::GroupTooDeep);
        }
        loop {
            if self.buf.is_empty() {
                return Err(WireError::Truncated);
            }
            let (inner, wire_type) = self.tag()?;
            match wire_type {
                0 => {
                    self.varint()?;
                }
                1 => {
                    self.take(8)?;
                }
                2 => {
                    let len = usize::try_from(self.varint()?).map_err(|_| WireError::Truncated)?;
                    self.take(len)?;
                }
                3 => self.skip_group(inner, depth + 1)?,
                4 if inner == field => return Ok(()),
                4 => return Err(WireError::GroupMismatch),
                5 => {
                    self.take(4)?;
                }
                other => return Err(WireError::UnsupportedWireType(other)),
            }
        }
    }

    /// Reads one varint (for packed repeated fields, whose payload is a run of varints).
    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64, WireError> {
        // Fast paths: most varints in remote write are tags and lengths of one byte, or of
        // two (a series of 128 bytes or more).
        match self.buf {
            [b, rest @ ..] if *b < 0x80 => {
                self.buf = rest;
                Ok(u64::from(*b))
            }
            [b0, b1, rest @ ..] if *b1 < 0x80 => {
                self.buf = rest;
                Ok(u64::from(b0 & 0x7f) | u64::from(*b1) << 7)
            }
            [_, ..] => self.varint_slow(),
            [] => Err(WireError::Truncated),
        }
    }

    fn varint_slow(&mut self) -> Result<u64, WireError> {
        let mut value: u64 = 0;
        for (i, &b) in self.buf.iter().enumerate().take(10) {
            // The tenth byte may only contribute bit 63.
            if i == 9 && b > 1 {
                return Err(WireError::VarintOverflow);
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                self.buf = self.buf.get(i + 1..).unwrap_or_default();
                return Ok(value);
            }
        }
        if self.buf.len() >= 10 { Err(WireError::VarintOverflow) } else { Err(WireError::Truncated) }
    }

    /// True when every byte has been consumed.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    #[inline]
    fn take(&mut self, len: usize) -> Result<&'a [u8], WireError> {
        if len > self.buf.len() {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.buf.split_at(len);
        self.buf = rest;
        Ok(head)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let bytes = self.take(N)?;
        bytes.try_into().map_err(|_| WireError::Truncated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(buf: &[u8]) -> Result<Vec<(u32, Value<'_>)>, WireError> {
        let mut r = Reader::new(buf);
        let mut out = Vec::new();
        while let Some(f) = r.next_field()? {
            out.push(f);
        }
        Ok(out)
    }

    #[test]
    fn reads_each_wire_type() {
        // field 1 varint 150, field 2 fixed64 1.0, field 3 bytes "ab", field 4 fixed32 7
        let mut buf = vec![0x08, 0x96, 0x01, 0x11];
        buf.extend_from_slice(&1.0f64.to_le_bytes());
        buf.extend_from_slice(&[0x1a, 2, b'a', b'b', 0x25, 7, 0, 0, 0]);
        assert_eq!(
            fields(&buf).unwrap(),
            vec![
                (1, Value::Varint(150)),
                (2, Value::Fixed64(1.0f64.to_bits())),
                (3, Value::Len(b"ab")),
                (4, Value::Fixed32(7)),
            ]
        );
    }

    #[test]
    fn unknown_groups_are_skipped() {
        // field 1 start-group { field 2 varint 5, field 3 start-group { } end 3 } end 1, field 4 varint 1
        let buf = [0x0b, 0x10, 0x05, 0x1b, 0x1c, 0x0c, 0x20, 0x01];
        assert_eq!(fields(&buf).unwrap(), vec![(1, Value::Group), (4, Value::Varint(1))]);
        let mut deep = vec![0x0b; MAX_GROUP_DEPTH + 1];
        deep.extend(vec![0x0c; MAX_GROUP_DEPTH + 1]);
        assert_eq!(fields(&deep).unwrap_err(), WireError::GroupTooDeep);
    }

    #[test]
    fn negative_int64_is_a_ten_byte_varint() {
        let mut buf = vec![0x10];
        buf.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(fields(&buf).unwrap(), vec![(2, Value::Varint(u64::MAX))]);
    }

    #[test]
    fn rejects_malformed_input() {
        let cases: &[(&[u8], WireError)] = &[
            (&[0x08], WireError::Truncated),
            (&[0x08, 0x80], WireError::Truncated),
            (&[0x0a, 5, b'a'], WireError::Truncated),
            (&[0x09, 1, 2, 3], WireError::Truncated),
            (&[0x00, 1], WireError::BadFieldNumber(0)),
            (&[0x0b], WireError::Truncated),
            (&[0x0b, 0x14], WireError::GroupMismatch),
            (&[0x0c], WireError::UnsupportedWireType(4)),
            (&[0x0e], WireError::UnsupportedWireType(6)),
            (&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02], WireError::VarintOverflow),
            (
                &[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                WireError::VarintOverflow,
            ),
            // A length that does not fit in memory.
            (&[0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], WireError::Truncated),
        ];
        for (buf, want) in cases {
            assert_eq!(fields(buf).unwrap_err(), *want, "{buf:x?}");
        }
    }
}
