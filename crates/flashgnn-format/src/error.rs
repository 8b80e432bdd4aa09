//! Errors for decoding untrusted bytes. Every variant names the file (or the
//! structure), the byte offset, the offending value and the bound it broke, so
//! a user can find the problem with a hex dump.

use std::fmt;

pub type Result<T, E = FormatError> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// A field read from disk is outside its allowed range.
    OutOfBounds {
        file: String,
        offset: u64,
        field: &'static str,
        value: u64,
        bound: String,
    },
    /// A checksum did not match.
    Checksum {
        file: String,
        offset: u64,
        what: String,
        stored: u32,
        computed: u32,
    },
    /// Magic bytes or version are not ours.
    BadMagic {
        file: String,
        found: String,
        expected: String,
    },
    UnsupportedVersion {
        file: String,
        found: u32,
        supported: u32,
    },
    /// Fewer bytes than the structure needs.
    Truncated {
        file: String,
        offset: u64,
        needed: u64,
        available: u64,
    },
    /// Anything else, with a full sentence.
    Invalid {
        file: String,
        message: String,
    },
}

impl FormatError {
    pub fn invalid(file: impl Into<String>, message: impl Into<String>) -> Self {
        FormatError::Invalid { file: file.into(), message: message.into() }
    }
    pub fn oob(
        file: impl Into<String>,
        offset: u64,
        field: &'static str,
        value: u64,
        bound: impl Into<String>,
    ) -> Self {
        FormatError::OutOfBounds { file: file.into(), offset, field, value, bound: bound.into() }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::OutOfBounds { file, offset, field, value, bound } => write!(
                f,
                "{file}: byte offset {offset}: {field} = {value} is out of bounds (must be {bound})"
            ),
            FormatError::Checksum { file, offset, what, stored, computed } => write!(
                f,
                "{file}: byte offset {offset}: checksum mismatch in {what} (stored {stored:#010x}, computed {computed:#010x}): the file is corrupt, or this part of it was written for another dataset"
            ),
            FormatError::BadMagic { file, found, expected } => write!(
                f,
                "{file}: byte offset 0: not a flashgnn file (magic {found:?}, expected {expected:?})"
            ),
            FormatError::UnsupportedVersion { file, found, supported } => write!(
                f,
                "{file}: format version {found} is not supported by this flashgnn (it reads versions {} to {supported}); rebuild the dataset or upgrade",
                crate::FORMAT_VERSION_MIN
            ),
            FormatError::Truncated { file, offset: _, needed, available } if available > needed => write!(
                f,
                "{file}: {} trailing bytes at byte offset {needed}: the file holds {available} bytes, {needed} expected",
                available - needed
            ),
            FormatError::Truncated { file, offset, needed, available } => write!(
                f,
                "{file}: truncated at byte offset {offset}: needed {needed} bytes, only {available} available"
            ),
            FormatError::Invalid { file, message } => write!(f, "{file}: {message}"),
        }
    }
}

impl std::error::Error for FormatError {}
