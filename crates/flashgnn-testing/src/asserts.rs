//! Assertions on messages: the tests hold every error to naming what went
//! wrong (file, byte offset, field, value, bound).

/// Asserts that `message` contains every one of `parts`, naming the first
/// missing one and showing the whole message.
#[track_caller]
pub fn assert_mentions(message: &str, parts: &[&str]) {
    for p in parts {
        assert!(message.contains(p), "{p:?} missing from the message: {message}");
    }
}
