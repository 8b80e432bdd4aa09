//! A token bucket over bytes: bounds the read rate of background work (the
//! scrubber) so it leaves the device to the foreground.
//!
//! Tokens refill at `rate` bytes per second up to `burst` bytes; taking more
//! than the bucket holds runs it into debt, and the caller waits until the
//! debt is repaid. Long-run throughput is therefore at most `rate` whatever
//! the request size, and a single request larger than `burst` is still
//! allowed (it just waits longer). The bucket starts empty so that even a
//! short run does not exceed the rate.
//!
//! Time is passed in (`now`), so the arithmetic is tested without clocks.

use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct TokenBucket {
    /// Bytes per second; 0 = unlimited.
    rate: u64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// `rate_bytes_per_s` = 0 means unlimited (every take is free).
    pub fn new(rate_bytes_per_s: u64, burst_bytes: u64, now: Instant) -> TokenBucket {
        TokenBucket { rate: rate_bytes_per_s, burst: burst_bytes.max(1) as f64, tokens: 0.0, last: now }
    }
    pub fn rate(&self) -> u64 {
        self.rate
    }
    /// Take `bytes` at time `now`; returns how long to wait before using them.
    pub fn take_at(&mut self, bytes: u64, now: Instant) -> Duration {
        if self.rate == 0 {
            return Duration::ZERO;
        }
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate as f64).min(self.burst);
        self.tokens -= bytes as f64;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate as f64)
        }
    }
    /// Take `bytes` now and sleep until they may be used.
    pub fn take(&mut self, bytes: u64) {
        let w = self.take_at(bytes, Instant::now());
        if !w.is_zero() {
            std::thread::sleep(w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_add_up_to_bytes_over_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1000, 500, t0);
        // Starts empty: 250 B at t0 waits 0.25 s.
        assert_eq!(b.take_at(250, t0), Duration::from_millis(250));
        // The caller slept 0.25 s: debt repaid, next 250 B waits 0.25 s again.
        let t1 = t0 + Duration::from_millis(250);
        assert_eq!(b.take_at(250, t1), Duration::from_millis(250));
        // Idle for 10 s: the bucket refills only to `burst` (500 B).
        let t2 = t1 + Duration::from_secs(10);
        assert_eq!(b.take_at(500, t2), Duration::ZERO);
        assert_eq!(b.take_at(1000, t2), Duration::from_secs(1));
    }

    #[test]
    fn zero_rate_is_unlimited() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(0, 1, t0);
        assert_eq!(b.take_at(u64::MAX / 2, t0), Duration::ZERO);
    }
}
