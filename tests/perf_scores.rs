//! The HTTP perf-score source against a real HTTP server on loopback.
#![cfg(feature = "http")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use selection_coordinator::discovery::perf_scores::{PerfScoreError, PerfScoreSource, PerfScores};
use selection_coordinator::discovery::{METRIC_PERF_SCORE_ERRORS, METRIC_PERF_SCORE_UPDATES};
use selection_coordinator::CandidateId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the server answers next.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Good,
    Changed,
    Slow,
    Malformed,
    /// A declared length over the cap.
    Oversized,
    /// No length, streamed until close: the cap must hold while reading.
    OversizedStream,
    Error500,
}

fn ok(body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// The document [`Mode::Good`] serves.
const GOOD: &[u8] =
    br#"{"a":{"FRA":{"score":0.9},"LAX":{"score":0.2}},"b":{"FRA":{"score":0.4}},"c":{"LAX":{"score":1}}}"#;

fn response(mode: Mode) -> (Vec<u8>, Option<Duration>) {
    match mode {
        Mode::Good => (ok(GOOD), None),
        Mode::Changed => (ok(br#"{"a":{"FRA":{"score":0.1}}}"#), None),
        Mode::Slow => (ok(b"{}"), Some(Duration::from_secs(5))),
        Mode::Malformed => (ok(b"{\"a\": {\"FRA\": "), None),
        Mode::Oversized => (ok(&vec![b' '; (1 << 20) + 1]), None),
        Mode::OversizedStream => {
            let mut r = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n".to_vec();
            r.extend(std::iter::repeat_n(b' ', 3 << 20));
            (r, None)
        }
        Mode::Error500 => (
            b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\nconnection: close\r\n\r\noops"
                .to_vec(),
            None,
        ),
    }
}

/// A tiny HTTP/1.1 server on 127.0.0.1:0 answering according to `mode`; returns its URL.
async fn serve(mode: Arc<Mutex<Mode>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let mode = *mode.lock().unwrap();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                assert!(buf.starts_with(b"GET /scores HTTP/1.1\r\n"));
                let (bytes, delay) = response(mode);
                if let Some(d) = delay {
                    // Real time: the client's fetch timeout must race a real socket, which a
                    // paused clock would skip past while bytes are still in flight.
                    tokio::time::sleep(d).await;
                }
                let _ = sock.write_all(&bytes).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    format!("http://{addr}/scores")
}

type Metrics = Vec<(
    metrics_util::CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
)>;

/// Sums a counter over the series matching `label` in one snapshot (snapshots drain).
fn counter(snapshot: &Metrics, name: &str, label: Option<&str>) -> u64 {
    snapshot
        .iter()
        .filter(|(k, ..)| {
            k.key().name() == name && label.is_none_or(|l| k.key().labels().any(|x| x.value() == l))
        })
        .map(|(.., v)| match v {
            DebugValue::Counter(c) => *c,
            _ => 0,
        })
        .sum()
}

#[tokio::test]
async fn a_good_document_gives_the_region_scores() {
    let url = serve(Arc::new(Mutex::new(Mode::Good))).await;
    let scores = PerfScoreSource::new(&url, "FRA")
        .unwrap()
        .fetch()
        .await
        .unwrap();
    assert_eq!(scores.len(), 2, "c has no FRA score");
    assert_eq!(scores[&CandidateId::new("a")], 0.9);
    assert_eq!(scores[&CandidateId::new("b")], 0.4);
}

/// Whether an error is the one a case expects.
type Expect = fn(&PerfScoreError) -> bool;

#[tokio::test]
async fn every_failure_keeps_the_previous_scores_and_counts_an_error() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _guard = metrics::set_default_local_recorder(&recorder);

    let mode = Arc::new(Mutex::new(Mode::Good));
    let url = serve(mode.clone()).await;
    // Long enough for the 3 MiB stream to reach its cut on a loaded machine, short enough for
    // the slow server (5 s) to time out.
    let source = PerfScoreSource::new(&url, "FRA")
        .unwrap()
        .with_timeout(Duration::from_secs(2));
    let mut scores = PerfScores::new(source);
    scores.refresh().await.unwrap();
    let good = scores.scores().clone();
    assert_eq!(good.len(), 2);

    let cases: [(Mode, &str, Expect); 5] = [
        (Mode::Slow, "timeout", |e| {
            matches!(e, PerfScoreError::Timeout(_))
        }),
        (Mode::Malformed, "malformed", |e| {
            matches!(e, PerfScoreError::Malformed(_))
        }),
        (Mode::Oversized, "too_large", |e| {
            matches!(e, PerfScoreError::TooLarge { .. })
        }),
        (Mode::OversizedStream, "too_large", |e| {
            matches!(e, PerfScoreError::TooLarge { .. })
        }),
        (Mode::Error500, "status", |e| {
            matches!(e, PerfScoreError::Status(500))
        }),
    ];
    for (k, (m, reason, expected)) in cases.iter().enumerate() {
        *mode.lock().unwrap() = *m;
        let err = scores.refresh().await.unwrap_err();
        assert!(expected(&err), "{m:?}: {err}");
        assert_eq!(err.reason(), *reason);
        assert_eq!(scores.scores(), &good, "{m:?} replaced the scores");
        assert_eq!(scores.errors(), k as u64 + 1);
    }
    let snapshot: Metrics = snapshotter.snapshot().into_vec();
    assert_eq!(counter(&snapshot, METRIC_PERF_SCORE_ERRORS, None), 5);
    assert_eq!(
        counter(&snapshot, METRIC_PERF_SCORE_ERRORS, Some("too_large")),
        2
    );
    assert_eq!(
        counter(&snapshot, METRIC_PERF_SCORE_ERRORS, Some("timeout")),
        1
    );
    assert_eq!(counter(&snapshot, METRIC_PERF_SCORE_UPDATES, None), 1);

    // The server recovers: the next refresh replaces the scores.
    *mode.lock().unwrap() = Mode::Changed;
    scores.refresh().await.unwrap();
    assert_eq!(scores.scores().len(), 1);
    assert_eq!(scores.scores()[&CandidateId::new("a")], 0.1);
    assert_eq!(scores.updates(), 2);
}

#[tokio::test]
async fn an_unreachable_server_is_an_error_not_a_crash() {
    // Bind then drop a listener: the port is closed.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let mut scores = PerfScores::new(
        PerfScoreSource::new(&format!("http://127.0.0.1:{port}/scores"), "FRA").unwrap(),
    );
    let err = scores.refresh().await.unwrap_err();
    assert_eq!(err.reason(), "connect", "{err}");
    assert!(scores.scores().is_empty());
}

#[tokio::test]
async fn run_polls_every_interval() {
    let mode = Arc::new(Mutex::new(Mode::Good));
    let url = serve(mode.clone()).await;
    // Real time with a short interval: a paused clock would let the fetch timeout fire while
    // the loopback socket is still delivering.
    let source = PerfScoreSource::new(&url, "FRA")
        .unwrap()
        .with_interval(Duration::from_millis(100));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(PerfScores::new(source).run(move |region, s| {
        let _ = tx.send((region.to_string(), s.len()));
    }));
    let wait = Duration::from_secs(5);
    let first = tokio::time::timeout(wait, rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first, ("FRA".to_string(), 2));
    *mode.lock().unwrap() = Mode::Changed;
    let mut latest = first;
    while latest.1 != 1 {
        latest = tokio::time::timeout(wait, rx.recv())
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(latest, ("FRA".to_string(), 1));
    task.abort();
}

#[tokio::test]
async fn a_document_exactly_at_the_body_cap_is_read() {
    let url = serve(Arc::new(Mutex::new(Mode::Good))).await;
    let source = PerfScoreSource::new(&url, "FRA").unwrap();
    let at_cap = source.clone().with_max_body(GOOD.len()).fetch().await;
    assert_eq!(at_cap.map(|s| s.len()), Ok(2));
    let over = source.with_max_body(GOOD.len() - 1).fetch().await;
    assert_eq!(
        over,
        Err(PerfScoreError::TooLarge {
            limit: GOOD.len() - 1
        })
    );
}

#[tokio::test]
async fn run_calls_back_only_after_a_successful_fetch() {
    let mode = Arc::new(Mutex::new(Mode::Error500));
    let url = serve(mode.clone()).await;
    // Real time, as in `run_polls_every_interval`.
    let source = PerfScoreSource::new(&url, "FRA")
        .unwrap()
        .with_interval(Duration::from_millis(20));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(PerfScores::new(source).run(move |_, s| {
        let _ = tx.send(s.len());
    }));
    // Many failed fetches: none is passed on.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rx.try_recv().ok(), None, "a failed fetch was passed on");
    *mode.lock().unwrap() = Mode::Good;
    let first = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap();
    assert_eq!(first, Some(2));
    task.abort();
}
