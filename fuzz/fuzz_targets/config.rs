//! Config parsing never panics: any bytes give a config or a list of problems.
#![no_main]

use libfuzzer_sys::fuzz_target;
use selection_coordinator::Config;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(config) = Config::from_toml_str(text) {
            // A config that loads is valid, and builds a core.
            assert!(config.validate().is_ok());
            let _ = selection_coordinator::Core::new(config, std::time::Instant::now());
        }
        let _ = Config::from_json_str(text);
    }
});
