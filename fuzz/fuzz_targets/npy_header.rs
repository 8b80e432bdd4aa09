//! `.npy` headers (`flashgnn_format::npy::parse_header`): magic, versions
//! 1.0/2.0/3.0, the header dict (descr, fortran_order, shape, duplicate
//! keys). An accepted header has a representable data size and a data
//! offset inside the bytes given.
#![no_main]
use flashgnn_format::npy::parse_header;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = parse_header("labels.npy", data) {
        assert!(h.data_offset as usize <= data.len());
        assert!(h.data_bytes().is_some());
    }
});
