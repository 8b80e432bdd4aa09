//! The simulator's TOML config (`flashgnn_sim::Config::parse`): TOML syntax,
//! the typed structure, and `check` (zero, negative, NaN, huge values). The
//! input is the config text, optionally followed by a NUL and `field=value`
//! override lines (the `--set`/`--sweep` path, `set_field`). An accepted
//! config's derived rates must be finite and positive.
#![no_main]
use flashgnn_sim::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (toml, sets) = text.split_once('\0').unwrap_or((text, ""));
    let overrides: Vec<(String, String)> =
        sets.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    if let Ok(c) = Config::parse(toml, "ssd.toml", &overrides) {
        for r in [c.pcie_bytes_per_s(), c.channel_bytes_per_s()] {
            assert!(r.is_finite() && r > 0.0, "rate {r}");
        }
        let _ = (c.dram_cache_pages(), c.dies_per_channel());
    }
});
