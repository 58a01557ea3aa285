//! Unit tests of the statistics and their overload window.

use super::*;

#[test]
fn window_forgets_old_buckets() {
    let mut w = ErrorWindow::default();
    for _ in 0..5 {
        w.record(0, 10, true);
    }
    w.record(3, 10, false);
    assert_eq!(w.counts(3, 10), (5, 6));
    assert_eq!(w.counts(9, 10), (5, 6));
    // Bucket 0 leaves the window at bucket 10.
    assert_eq!(w.counts(10, 10), (0, 1));
    assert_eq!(w.counts(13, 10), (0, 0));
    w.record(30, 10, true);
    assert_eq!(w.counts(30, 10), (1, 1));
}

/// `counts` against a plain scan of every bucket in the window.
#[test]
fn counts_match_a_plain_scan() {
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};
    let mut rng = SmallRng::seed_from_u64(7);
    for _ in 0..200 {
        let buckets = rng.random_range(1..=WINDOW_RING);
        let mut w = ErrorWindow::default();
        let mut log: Vec<(u64, bool)> = Vec::new();
        let mut b = rng.random_range(0..5u64);
        for _ in 0..rng.random_range(0..60) {
            b += rng.random_range(0..3u64);
            let e = rng.random_bool(0.3);
            w.record(b, buckets, e);
            log.push((b, e));
        }
        for at in b.saturating_sub(3)..b + 20 {
            // What the window holds: the records of the ring's last `buckets` buckets up to
            // its newest, and of those the ones inside the window seen from `at`.
            let newest = log.last().map(|x| x.0).unwrap_or(0);
            let kept = |x: u64| x + buckets as u64 > newest && x + buckets as u64 > at;
            let e = log.iter().filter(|(x, er)| kept(*x) && *er).count() as u32;
            let t = log.iter().filter(|(x, _)| kept(*x)).count() as u32;
            assert_eq!(w.counts(at, buckets), (e, t), "at {at}, buckets {buckets}");
        }
    }
}

#[test]
fn a_full_bucket_halves_and_keeps_its_ratio() {
    let mut w = ErrorWindow::default();
    for k in 0..200_000u32 {
        w.record(5, 10, k % 4 == 0);
    }
    let (e, t) = w.counts(5, 10);
    assert!(t > 30_000 && t <= u32::from(u16::MAX), "{t}");
    let ratio = e as f64 / t as f64;
    assert!((ratio - 0.25).abs() < 0.01, "{ratio}");
    // Restoring counts beyond 16 bits scales them together.
    let r = ErrorWindow::from_relative(&[(300_000, 1_000_000)], 5, 10);
    let (e, t) = r.counts(5, 10);
    assert!((e as f64 / t as f64 - 0.3).abs() < 0.001, "{e}/{t}");
}

#[test]
fn packing_round_trips() {
    let s = Stats {
        success: Some(0.5),
        ttfb_ms: Some(0.0),
        last_sample_s: Some(-3.0),
        consecutive_failures: 2,
        ejections: 1,
        ejected_until_s: Some(9.5),
        attempts: 7,
        successes: 5,
        overload_evidence: 0.25,
        ..Stats::default()
    };
    let mut w = s.clone();
    w.window.record(3, 10, true);
    assert_eq!(PackedStats::pack(&w).unpack(), w);
    assert_eq!(PackedStats::default().unpack(), Stats::default());
    let hostile = Stats {
        connect_ms: Some(f64::NAN),
        ..Stats::default()
    };
    assert_eq!(PackedStats::pack(&hostile).unpack().connect_ms, None);
    // The streak saturates at 16 bits, the ejection count at 8.
    let long = Stats {
        consecutive_failures: 100_000,
        ejections: 70_000,
        ..Stats::default()
    };
    let back = PackedStats::pack(&long).unpack();
    assert_eq!((back.consecutive_failures, back.ejections), (65_535, 255));
    // The lag sum keeps sixteenths, and hostile values read as 0.
    for (x, want) in [
        (-5.97, -6.0),
        (-5.9, -5.875),
        (2.5, 2.5),
        (f32::NAN, 0.0),
        (1e9, 127.0 / 16.0),
    ] {
        let s = Stats {
            attempt_lag: x,
            ..Stats::default()
        };
        assert_eq!(PackedStats::pack(&s).unpack().attempt_lag, want, "{x}");
    }
}

#[test]
fn ema_weights_newest_sample_by_alpha() {
    assert_eq!(ema(None, 10.0, 0.5), 10.0);
    assert_eq!(ema(Some(10.0), 20.0, 0.5), 15.0);
    assert!((ema(Some(10.0), 20.0, 0.2) - 12.0).abs() < 1e-12);
}
