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

/// CRC32C of `bytes` bound to a dataset and a position (format version 2):
/// the seed is the CRC32C of the dataset id's 8 little-endian bytes followed
/// by the position's 8, so a slot, page or row copied from *another build*
/// (another id) fails its check exactly like one copied to another position.
/// `dataset_id` is `None` for version-1 datasets, which have no id: then this
/// is [`crc_at`], version 1's seed.
pub fn crc_bound(dataset_id: Option<u64>, position: u64, bytes: &[u8]) -> u32 {
    match dataset_id {
        None => crc_at(position, bytes),
        Some(id) => {
            let mut seed = [0u8; 16];
            seed[..8].copy_from_slice(&id.to_le_bytes());
            seed[8..].copy_from_slice(&position.to_le_bytes());
            crc32c::crc32c_append(crc32c::crc32c(&seed), bytes)
        }
    }
}

/// A fresh dataset id: 64 random bits (never 0) from the OS-seeded SipHash
/// keys of `RandomState`, mixed with the time and process id. Two builds of
/// the same input get different ids, which is what makes a copied page
/// detectable; `BuildOptions::dataset_id` fixes it when a test needs
/// byte-identical rebuilds.
pub fn new_dataset_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    h.write_u128(t);
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.finish().max(1)
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
    /// Continue a checksum saved as `(value(), bytes())` (the scrubber's
    /// checkpoint resumes a file in the middle).
    pub fn resume(value: u32, bytes: u64) -> FileCrc {
        FileCrc { value, bytes }
    }
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
    fn dataset_id_changes_checksum() {
        // The v2 binding: same bytes, same position, another dataset -> another checksum;
        // no id (version 1) keeps version 1's position-only seed.
        let data = [7u8; 64];
        assert_ne!(crc_bound(Some(1), 5, &data), crc_bound(Some(2), 5, &data));
        assert_ne!(crc_bound(Some(1), 5, &data), crc_bound(Some(1), 6, &data));
        assert_eq!(crc_bound(None, 5, &data), crc_at(5, &data));
        assert_ne!(crc_bound(Some(0), 5, &data), crc_at(5, &data));
        assert_ne!(new_dataset_id(), new_dataset_id());
        assert_ne!(new_dataset_id(), 0);
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
        // Saved half-way and resumed: the same checksum.
        let mut a = FileCrc::default();
        a.update(&data[..4000]);
        let mut b = FileCrc::resume(a.value(), a.bytes());
        b.update(&data[4000..]);
        assert_eq!((b.value(), b.bytes()), (f.value(), f.bytes()));
    }
}
