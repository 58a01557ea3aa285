//! `selcoord explain` over large candidate files: the time per candidate should not grow with
//! the file (each candidate's entry in the decision record is found by id, not by a scan).
//! Criterion reports the throughput in candidates per second at 6,000 and 60,000 candidates;
//! the two should be close.

use std::fmt::Write as _;
use std::process::Command;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn explain(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut group = c.benchmark_group("explain");
    group.sample_size(10);
    for n in [6_000usize, 60_000] {
        let path = dir.path().join(format!("candidates-{n}.toml"));
        let mut text = String::new();
        for i in 0..n {
            let _ = writeln!(text, "[[candidates]]\nid = \"c{i:05}\"");
        }
        std::fs::write(&path, text).expect("the candidates file is written");
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &path, |b, path| {
            b.iter(|| {
                let out = Command::new(env!("CARGO_BIN_EXE_selcoord"))
                    .args(["explain", "--config", "default", "--candidates"])
                    .arg(path)
                    .arg("--json")
                    .output()
                    .expect("selcoord runs");
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                out.stdout.len()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, explain);
criterion_main!(benches);
