//! Go durations in flags (`--leader-elect-lease-duration=15s`): any text must parse or give an
//! error; a parsed value must print back to text that parses to the same duration.
#![no_main]

use controller_manager::options::GoDuration;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match text.parse::<GoDuration>() {
        Ok(d) => {
            // Go's time.Duration range: an int64 of nanoseconds.
            assert!(
                d.get().as_nanos() <= i64::MAX as u128,
                "{text:?} beyond Go's range"
            );
            let printed = d.to_string();
            let again: GoDuration = printed
                .parse()
                .unwrap_or_else(|e| panic!("{text:?} printed as {printed:?} which fails: {e}"));
            assert_eq!(again, d, "{text:?} -> {printed:?}");
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
