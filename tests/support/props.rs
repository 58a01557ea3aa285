//! Property-test settings shared by the property tests (the crate's own unit tests include
//! this file too).
//!
//! Every property test runs its cases from one fixed seed, so each run checks the same inputs
//! and a failure reproduces on any machine. To explore other inputs, set
//! `PROPTEST_RNG_SEED=<n>` (and `PROPTEST_CASES=<n>` for more cases); a failure found that way
//! is saved to the test's `.proptest-regressions` file and replayed first from then on.

use proptest::test_runner::{Config, RngSeed};

/// The seed the property tests run from unless `PROPTEST_RNG_SEED` names another.
pub const SEED: u64 = 0x5E1E_C7ED;

/// A config running `cases` cases (unless `PROPTEST_CASES` says otherwise) from [`SEED`]
/// (unless `PROPTEST_RNG_SEED` says otherwise).
pub fn config(cases: u32) -> Config {
    // The default reads PROPTEST_* from the environment.
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(SEED);
    }
    config
}
