//! `--cloud-config` of the fake cloud: any bytes must give a cloud or a clear error, never a panic.
#![no_main]

use cloud_controllers::cloud::fake::FakeCloud;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = FakeCloud::from_config(data) {
        // Rendering the message must not panic either (it quotes input and line numbers).
        let _ = e.to_string();
    }
});
