//! Pages of `overflow.fg`: `check_overflow_page` (trailer CRC bound to the
//! dataset id, stored page number), then every neighbor id on the page as
//! the readers take them (`read_id`, checked against `num_nodes`). With the
//! fix-up byte set the page is sealed first (`seal_overflow_page`) and must
//! then be accepted.
#![no_main]
use flashgnn_format::layout::{check_overflow_page, seal_overflow_page};
use flashgnn_format::slot::read_id;
use flashgnn_fuzz::{draw_layout, fix_crc, Draw};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut d = Draw::new(data);
    let Some(l) = draw_layout(&mut d) else { return };
    let fix = fix_crc(&mut d);
    let page_no = d.u32() as u64;
    let mut page = d.rest.to_vec();
    if fix {
        page.resize(l.page_size as usize, 0);
        seal_overflow_page(&l, page_no, &mut page);
    }
    let r = check_overflow_page(&l, "overflow.fg", page_no, &page);
    if fix {
        assert!(r.is_ok() || page_no > u32::MAX as u64, "a sealed page is accepted: {r:?}");
    }
    if r.is_ok() && page.len() == l.page_size as usize {
        let w = l.id_bytes as usize;
        let per = l.overflow_ids_per_page() as usize;
        assert!(per * w + 8 <= page.len(), "ids and trailer fit the page");
        let out_of_range = (0..per).map(|j| read_id(&page[j * w..(j + 1) * w])).filter(|&id| id >= l.num_nodes).count();
        let _ = out_of_range;
    }
});
