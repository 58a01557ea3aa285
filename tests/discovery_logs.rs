//! What discovery logs when its fetcher fails at every turn. Its own test binary: `tracing`
//! caches per call site whether anyone listens, and another test of the same process hitting
//! the same warning first, with no subscriber, would hide it from the one installed here.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use selection_coordinator::discovery::{
    CandidateChange, Discovery, DiscoveryConfig, FetchError, Fetcher, Snapshot,
};
use selection_coordinator::{CandidateId, CandidateInfo};

/// A fetcher for a source that is down, met with an `unwrap`; counts its panics.
struct Panicking(Arc<AtomicUsize>);

impl Fetcher for Panicking {
    async fn fetch(&self, id: &CandidateId) -> Result<CandidateInfo, FetchError> {
        tokio::time::sleep(Duration::from_millis(10)).await;
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("the source is down ({id})");
    }
}

/// Counts the warnings discovery logs, noting each one's `panics` field with the fetcher's
/// panics so far.
struct Warnings {
    count: Arc<AtomicUsize>,
    panics: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<(u64, usize)>>>,
}

/// Reads the `panics` field of an event.
struct PanicsField(Option<u64>);

impl tracing::field::Visit for PanicsField {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == "panics" {
            self.0 = Some(value);
        }
    }
    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let m = event.metadata();
        if *m.level() == tracing::Level::WARN && m.target().contains("discovery") {
            self.count.fetch_add(1, Ordering::SeqCst);
            let mut field = PanicsField(None);
            event.record(&mut field);
            let panics = field.0.expect("the warning says how many panics");
            self.seen
                .lock()
                .unwrap()
                .push((panics, self.panics.load(Ordering::SeqCst)));
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// A fetcher that panics on every candidate is warned of at most once a minute, however many
/// fetches panic: each is counted as a failed fetch already. Each warning counts the panics
/// since the one before.
#[test]
fn fetcher_panics_are_warned_of_at_most_once_a_minute() {
    let warnings = Arc::new(AtomicUsize::new(0));
    let panics = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let _counting = tracing::subscriber::set_default(Warnings {
        count: warnings.clone(),
        panics: panics.clone(),
        seen: seen.clone(),
    });
    // The fetcher's panics are caught, and their reports would fill the test's output; any
    // other panic (a failed assertion) is reported as usual.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.to_string().contains("the source is down") {
            report(info);
        }
    }));
    System::new().block_on(async {
        tokio::time::pause();
        let all: Vec<CandidateId> = (0..50)
            .map(|i| CandidateId::new(format!("c{i:04}")))
            .collect();
        let config = DiscoveryConfig {
            interval_s: 10.0,
            idle_pause_s: None,
            ..DiscoveryConfig::default()
        };
        let addr = Discovery::new(
            config,
            all,
            Panicking(panics.clone()),
            |_: CandidateChange| {},
        )
        .unwrap()
        .with_seed(5)
        .start();
        tokio::time::sleep(Duration::from_secs(30)).await;
        let errors = addr.send(Snapshot).await.unwrap().stats.errors;
        assert!(errors >= 50, "every candidate's fetch failed: {errors}");
        assert_eq!(warnings.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(warnings.load(Ordering::SeqCst), 2);
    });
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], (1, 1), "the first panic is warned of at once");
    let (said, so_far) = seen[1];
    assert_eq!(
        said as usize,
        so_far - seen[0].1,
        "the second warning counts the panics since the first: {seen:?}"
    );
}
