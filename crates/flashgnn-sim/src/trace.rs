//! Streaming trace writer and reader (format: docs/trace.md, bytes:
//! `flashgnn_format::trace`). Both hold one block (at most 4096 records,
//! 256 KiB) plus one batch, so a trace larger than RAM is written and
//! replayed in bounded memory.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use flashgnn_format::trace::*;
use flashgnn_format::FormatError;

use crate::{Result, SimError};

pub struct TraceWriter {
    out: BufWriter<File>,
    path: String,
    block: Vec<u8>,
    in_block: usize,
    records: u64,
    batches: u64,
}

impl TraceWriter {
    /// Start the trace of a capture over the dataset `dataset_id` (`None`
    /// for a format version 1 dataset, which has no id: written as 0) stored
    /// in `page_size`-byte pages, at this crate's trace version; `params`
    /// (JSON text: fanouts, batch size, engine ...) rides in the header for
    /// the reports.
    pub fn start(path: &Path, dataset_id: Option<u64>, page_size: u32, params: String) -> Result<TraceWriter> {
        let h = TraceHeader { version: TRACE_VERSION, dataset_id: dataset_id.unwrap_or(0), page_size, params };
        TraceWriter::create(path, &h)
    }

    pub fn create(path: &Path, header: &TraceHeader) -> Result<TraceWriter> {
        let name = path.display().to_string();
        let f = File::create(path).map_err(|e| SimError::Io(format!("{name}: cannot create: {e}")))?;
        let mut out = BufWriter::with_capacity(1 << 20, f);
        out.write_all(&header.encode()).map_err(|e| SimError::Io(format!("{name}: write: {e}")))?;
        Ok(TraceWriter {
            out,
            path: name,
            block: Vec::with_capacity(BLOCK_RECORDS * RECORD_BYTES),
            in_block: 0,
            records: 0,
            batches: 0,
        })
    }

    /// Append one batch's reads (in issue order); numbers the batch.
    pub fn write_batch(&mut self, reads: &[TraceRead]) -> Result<()> {
        let b = self.batches as u32;
        for (k, r) in reads.iter().enumerate() {
            let mut r = *r;
            r.batch = b;
            r.index = k as u32;
            r.encode(&mut self.block);
            self.in_block += 1;
            self.records += 1;
            if self.in_block == BLOCK_RECORDS {
                self.flush_block()?;
            }
        }
        self.batches += 1;
        Ok(())
    }

    fn flush_block(&mut self) -> Result<()> {
        if self.in_block == 0 {
            return Ok(());
        }
        let h = encode_block_header(self.in_block as u32, &self.block);
        self.out
            .write_all(&h)
            .and_then(|_| self.out.write_all(&self.block))
            .map_err(|e| SimError::Io(format!("{}: write: {e}", self.path)))?;
        self.block.clear();
        self.in_block = 0;
        Ok(())
    }

    /// Seal the trace: last block, end block with totals, fsync. Returns
    /// (records, batches).
    pub fn finish(mut self) -> Result<(u64, u64)> {
        self.flush_block()?;
        let mut end = Vec::with_capacity(END_PAYLOAD);
        end.extend_from_slice(&self.records.to_le_bytes());
        end.extend_from_slice(&self.batches.to_le_bytes());
        end.extend_from_slice(&[0u8; 8]);
        let h = encode_block_header(0, &end);
        let io = |e: std::io::Error| SimError::Io(format!("{}: write: {e}", self.path));
        self.out.write_all(&h).map_err(io)?;
        self.out.write_all(&end).map_err(io)?;
        self.out.flush().map_err(io)?;
        self.out.get_ref().sync_all().map_err(io)?;
        Ok((self.records, self.batches))
    }
}

pub struct TraceReader {
    inp: BufReader<File>,
    pub path: String,
    pub header: TraceHeader,
    /// The trace's file table (`TraceHeader::files`): a record's `file` indexes it.
    pub files: Vec<String>,
    /// Byte offset of the next unread byte.
    pos: u64,
    block: Vec<TraceRead>,
    /// Byte offset of the current block's first record.
    block_at: u64,
    next_in_block: usize,
    /// A record of the next batch, read while finishing the previous one.
    pending: Option<TraceRead>,
    ended: bool,
    /// The end block's batch total and its offset.
    end_batches: (u64, u64),
    records: u64,
    batches: u64,
}

fn read_exact_at(inp: &mut BufReader<File>, buf: &mut [u8], path: &str, pos: u64) -> Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match inp.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(FormatError::Truncated {
                    file: path.into(),
                    offset: pos + got as u64,
                    needed: (buf.len() - got) as u64,
                    available: 0,
                }
                .into())
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(SimError::Io(format!("{path}: byte offset {}: read: {e}", pos + got as u64))),
        }
    }
    Ok(())
}

impl TraceReader {
    pub fn open(path: &Path) -> Result<TraceReader> {
        let name = path.display().to_string();
        // Regular files only: a FIFO or device is refused by name, never read for ever.
        let f = flashgnn_io::open_regular(path).map_err(|e| SimError::opening(&name, "cannot open", &e))?;
        let mut inp = BufReader::with_capacity(1 << 20, f);
        let mut fixed = [0u8; HEADER_FIXED];
        read_exact_at(&mut inp, &mut fixed, &name, 0)?;
        let n = TraceHeader::params_len(&fixed, &name)?;
        let mut params = vec![0u8; n];
        read_exact_at(&mut inp, &mut params, &name, HEADER_FIXED as u64)?;
        let header = TraceHeader::decode(&fixed, &params, &name)?;
        let files = header.files(&name)?;
        Ok(TraceReader {
            inp,
            path: name,
            header,
            files,
            pos: (HEADER_FIXED + n) as u64,
            block: Vec::new(),
            block_at: 0,
            next_in_block: 0,
            pending: None,
            ended: false,
            end_batches: (0, 0),
            records: 0,
            batches: 0,
        })
    }

    /// Records and batches read so far.
    pub fn totals(&self) -> (u64, u64) {
        (self.records, self.batches)
    }

    /// The next record and its byte offset.
    fn next_record(&mut self) -> Result<Option<(TraceRead, u64)>> {
        if self.next_in_block < self.block.len() {
            self.next_in_block += 1;
            let k = self.next_in_block - 1;
            return Ok(Some((self.block[k], self.block_at + (k * RECORD_BYTES) as u64)));
        }
        if self.ended {
            return Ok(None);
        }
        let at = self.pos;
        let mut h = [0u8; BLOCK_HEADER];
        read_exact_at(&mut self.inp, &mut h, &self.path, at)?;
        let (count, crc) = decode_block_header(&h, &self.path, at)?;
        self.pos += BLOCK_HEADER as u64;
        if count == 0 {
            let mut end = [0u8; END_PAYLOAD];
            read_exact_at(&mut self.inp, &mut end, &self.path, self.pos)?;
            check_block(&end, crc, &self.path, at)?;
            let records = u64::from_le_bytes(end[0..8].try_into().unwrap());
            let batches = u64::from_le_bytes(end[8..16].try_into().unwrap());
            if records != self.records {
                return Err(FormatError::oob(
                    self.path.clone(),
                    self.pos,
                    "end block record total",
                    records,
                    format!("== {} records read", self.records),
                )
                .into());
            }
            self.end_batches = (batches, self.pos + 8);
            self.pos += END_PAYLOAD as u64;
            let mut extra = [0u8; 1];
            if self.inp.read(&mut extra).map_err(|e| SimError::Io(format!("{}: {e}", self.path)))? != 0 {
                return Err(FormatError::Invalid {
                    file: self.path.clone(),
                    message: format!("bytes after the end block at offset {}", self.pos),
                }
                .into());
            }
            self.ended = true;
            return Ok(None);
        }
        let mut payload = vec![0u8; count as usize * RECORD_BYTES];
        read_exact_at(&mut self.inp, &mut payload, &self.path, self.pos)?;
        check_block(&payload, crc, &self.path, at)?;
        self.block.clear();
        for k in 0..count as usize {
            let off = self.pos + (k * RECORD_BYTES) as u64;
            let b = &payload[k * RECORD_BYTES..(k + 1) * RECORD_BYTES];
            self.block.push(TraceRead::decode_in(b, &self.path, off, self.files.len())?);
        }
        self.block_at = self.pos;
        self.pos += payload.len() as u64;
        self.records += count as u64;
        self.next_in_block = 1;
        Ok(Some((self.block[0], self.block_at)))
    }

    /// The next batch's reads (index 0, 1, ...), or None at the end block.
    /// Errors name the file and byte offset: a torn or corrupt trace is
    /// refused, never replayed in part silently.
    pub fn next_batch(&mut self) -> Result<Option<Vec<TraceRead>>> {
        let mut out: Vec<TraceRead> = Vec::new();
        if let Some(r) = self.pending.take() {
            out.push(r);
        }
        while let Some((r, rec_off)) = self.next_record()? {
            if let Some(first) = out.first() {
                if r.batch != first.batch {
                    if r.batch != first.batch + 1 || r.index != 0 {
                        return Err(FormatError::oob(
                            self.path.clone(),
                            rec_off,
                            "batch",
                            r.batch as u64,
                            format!("== {} or {} with index 0", first.batch, first.batch + 1),
                        )
                        .into());
                    }
                    self.pending = Some(r);
                    self.batches += 1;
                    return Ok(Some(out));
                }
                if r.index as usize != out.len() {
                    return Err(FormatError::oob(
                        self.path.clone(),
                        rec_off + 4,
                        "index",
                        r.index as u64,
                        format!("== {} (reads of a batch are numbered in order)", out.len()),
                    )
                    .into());
                }
            } else if r.batch as u64 != self.batches || r.index != 0 {
                return Err(FormatError::oob(
                    self.path.clone(),
                    rec_off,
                    "batch",
                    r.batch as u64,
                    format!("== {} with index 0", self.batches),
                )
                .into());
            }
            out.push(r);
        }
        if !out.is_empty() {
            self.batches += 1;
        }
        let (n, at) = self.end_batches;
        if n != self.batches {
            return Err(FormatError::oob(
                self.path.clone(),
                at,
                "end block batch total",
                n,
                format!("== {} batches read", self.batches),
            )
            .into());
        }
        Ok((!out.is_empty()).then_some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_reads(n: usize) -> Vec<TraceRead> {
        (0..n)
            .map(|i| TraceRead {
                file: (i % 3) as u8,
                kind: (i % 3) as u8,
                hop: (i % 2) as u8,
                offset: i as u64 * 4096,
                length: 4096,
                dep: if i == 0 { NO_DEP } else { (i - 1) as u32 },
                bytes_used: 100,
                items: 1,
                ..Default::default()
            })
            .collect()
    }

    fn write(path: &Path, batches: &[usize]) {
        let h = TraceHeader { version: TRACE_VERSION, dataset_id: 7, page_size: 4096, params: "{}".into() };
        let mut w = TraceWriter::create(path, &h).unwrap();
        for &n in batches {
            w.write_batch(&sample_reads(n)).unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn roundtrip_across_blocks() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.fgt");
        write(&p, &[3, 5000, 1, 4096]);
        let mut r = TraceReader::open(&p).unwrap();
        let mut sizes = Vec::new();
        while let Some(b) = r.next_batch().unwrap() {
            assert!(b.iter().enumerate().all(|(i, x)| x.index as usize == i && x.batch as usize == sizes.len()));
            sizes.push(b.len());
        }
        assert_eq!(sizes, vec![3, 5000, 1, 4096]);
        assert_eq!(r.totals(), (9100, 4));
    }

    #[test]
    fn corrupt_and_torn_traces_name_the_offset() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.fgt");
        write(&p, &[10, 10]);
        let good = std::fs::read(&p).unwrap();
        let first_block = HEADER_FIXED + 2;
        // A flipped byte inside a record: the block CRC fails at its header.
        let mut bad = good.clone();
        bad[first_block + BLOCK_HEADER + 70] ^= 0x40;
        std::fs::write(&p, &bad).unwrap();
        let mut r = TraceReader::open(&p).unwrap();
        let e = r.next_batch().unwrap_err().to_string();
        assert!(e.contains(&format!("byte offset {first_block}")) && e.contains("checksum"), "{e}");
        // Torn: cut inside the end block.
        std::fs::write(&p, &good[..good.len() - 5]).unwrap();
        let mut r = TraceReader::open(&p).unwrap();
        let mut err = None;
        for _ in 0..4 {
            match r.next_batch() {
                Err(e) => {
                    err = Some(e.to_string());
                    break;
                }
                Ok(None) => break,
                Ok(Some(_)) => {}
            }
        }
        let e = err.expect("a torn trace is refused");
        assert!(e.contains(&format!("byte offset {}", good.len() - 5)), "{e}");
    }
}
