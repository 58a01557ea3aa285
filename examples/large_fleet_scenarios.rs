//! Writes the large-fleet scenarios the coarse refresh's back-off was measured on
//! (docs/tuning.md, "A large fleet's refresh backs off once it settles") into a directory,
//! for `selcoord simulate --scenario <file>`:
//!
//! - `steady-<n>.toml`: a tenth of the fleet answers in about 10 ms, the rest in about 30 ms,
//!   an open loop of 2 requests per candidate a second for 40 s; nothing changes, so what a
//!   policy loses it loses learning the fleet and holding what it learned;
//! - `degrade-<n>.toml`: the same, and half of the fast tenth slows to about 200 ms with 70 %
//!   of its attempts failing from 10 s to 22 s;
//! - `hang-<n>.toml`: 30 s, with half of the fast tenth and a quarter of the slow candidates
//!   hanging from 8 s to 18 s (a caller timeout of 1 s, one retry).
//!
//! Each for 4,000 and 10,000 candidates.
//!
//! The directory is the first argument (default `./large-fleet-scenarios`):
//!
//! ```sh
//! cargo run --release --example large_fleet_scenarios -- /tmp/fleets
//! cargo run --release -- simulate --scenario /tmp/fleets/hang-10000.toml --seeds 7 --seed 4
//! ```

use std::fmt::Write as _;
use std::path::PathBuf;

/// The fleet and workload every scenario shares: `fast` of the `n` candidates at about 10 ms.
fn header(name: &str, n: usize, duration_s: u32, caller_timeout: bool) -> String {
    let fast = n / 10;
    let mut s = String::new();
    let _ = writeln!(s, "name = \"{name}\"");
    let _ = writeln!(
        s,
        "description = \"{n} candidates, a tenth fast; see examples/large_fleet_scenarios.rs\""
    );
    s.push_str("policies = [\"coordinator\", \"oracle\"]\nseries_bucket_s = 1.0\n\n");
    s.push_str("[workload]\nloop = \"open\"\n");
    let _ = writeln!(s, "rate_per_s = {}.0", 2 * n);
    let _ = writeln!(s, "duration_s = {duration_s}.0\nretries = 1");
    if caller_timeout {
        s.push_str("timeout_ms = 1000.0\n");
    }
    let _ = write!(
        s,
        "\n[[candidates]]\nid = \"fast\"\ncount = {fast}\nsuccess = 0.995\n\
         failure = \"transport\"\nfailure_ms = 5.0\n\
         duration_ms = {{ kind = \"lognormal\", mean = 10.0, sd = 3.0 }}\n\n\
         [[candidates]]\nid = \"slow\"\ncount = {}\nsuccess = 0.99\n\
         failure = \"transport\"\nfailure_ms = 5.0\n\
         duration_ms = {{ kind = \"lognormal\", mean = 30.0, sd = 8.0 }}\n",
        n - fast
    );
    s
}

/// A degrade of `candidate` at `at_s` with the override lines `overrides`, healed at `heal_s`.
fn spell(s: &mut String, candidate: &str, at_s: f64, heal_s: f64, overrides: &str) {
    let _ = write!(
        s,
        "\n[[timeline]]\nat_s = {at_s:?}\naction = \"degrade\"\ncandidate = \"{candidate}\"\n\
         {overrides}\n\n[[timeline]]\nat_s = {heal_s:?}\naction = \"heal\"\n\
         candidate = \"{candidate}\"\n"
    );
}

fn main() -> Result<(), String> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "large-fleet-scenarios".to_string()),
    );
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for n in [4_000usize, 10_000] {
        let fast = n / 10;
        let steady = header(&format!("steady-{n}"), n, 40, false);
        let mut degrade = header(&format!("degrade-{n}"), n, 40, false);
        for i in 0..fast / 2 {
            let slower =
                "success = 0.3\nduration_ms = { kind = \"lognormal\", mean = 200.0, sd = 30.0 }";
            spell(&mut degrade, &format!("fast-{i}"), 10.0, 22.0, slower);
        }
        let mut hang = header(&format!("hang-{n}"), n, 30, true);
        let hangs = "success = 0.0\nfailure = \"timeout\"\nfailure_ms = 60000.0";
        for i in 0..fast / 2 {
            spell(&mut hang, &format!("fast-{i}"), 8.0, 18.0, hangs);
        }
        // Every fourth slow candidate, spread over the fleet.
        for i in (0..n - fast).step_by(4) {
            spell(&mut hang, &format!("slow-{i}"), 8.0, 18.0, hangs);
        }
        for (name, text) in [("steady", steady), ("degrade", degrade), ("hang", hang)] {
            let path = dir.join(format!("{name}-{n}.toml"));
            std::fs::write(&path, text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            println!("{}", path.display());
        }
    }
    Ok(())
}
