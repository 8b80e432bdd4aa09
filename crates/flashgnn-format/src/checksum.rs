//! Checksums. CRC32C (hardware accelerated on x86 and ARM) everywhere: per
//! slot, per overflow page, per feature row, per header page and per file.
//!
//! Per-structure checksums are *seeded with the structure's position* (node id
//! or page number), so a slot or page copied to the wrong place fails its check
//! even though its bytes are internally consistent (the "swapped pages" case).

/// CRC32C of `bytes`, seeded with a 64-bit position.
pub fn crc_at(position: u64, bytes: &[u8]) -> u32 {
    let seed = crc32c::crc32c(&position.to_le_bytes());
    crc32c::crc32c_append(seed, bytes)
}

/// Plain CRC32C, used for whole files (streamed through [`FileCrc`]).
pub fn crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// Streaming whole-file checksum.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileCrc {
    value: u32,
    bytes: u64,
}

impl FileCrc {
    pub fn update(&mut self, data: &[u8]) {
        self.value = crc32c::crc32c_append(self.value, data);
        self.bytes += data.len() as u64;
    }
    pub fn value(&self) -> u32 {
        self.value
    }
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_changes_checksum() {
        // Proves that identical bytes at two positions get different checksums,
        // which is what makes swapped slots/pages detectable.
        let data = [7u8; 64];
        assert_ne!(crc_at(1, &data), crc_at(2, &data));
        assert_eq!(crc_at(5, &data), crc_at(5, &data));
    }

    #[test]
    fn streaming_equals_one_shot() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut f = FileCrc::default();
        for chunk in data.chunks(777) {
            f.update(chunk);
        }
        assert_eq!(f.value(), crc(&data));
        assert_eq!(f.bytes(), data.len() as u64);
    }
}
