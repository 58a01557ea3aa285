//! Regional performance scores over HTTP (feature `http`).
//!
//! The document has the shape `{ "<candidate>": { "<REGION>": { "score": <number> } } }`
//! (Livepeer's leaderboard). [`PerfScores`] polls it every 10 minutes by default for one
//! region. A timeout, a non-200 answer, a body over the cap (1 MiB by default, enforced while
//! streaming) or malformed JSON keeps the previous scores and counts
//! [`METRIC_PERF_SCORE_ERRORS`]; nothing panics.
//!
//! The client is hyper 1's HTTP/1 connection API over a tokio `TcpStream` (hyper is already
//! in the dependency tree through the Prometheus exporter). It speaks plain `http://` only:
//! TLS would add a TLS stack to the build; put the document behind a local proxy or extend
//! the source if it is served over `https://`.

use std::collections::BTreeMap;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::{StatusCode, Uri};
use hyper_util::rt::TokioIo;

use super::{METRIC_PERF_SCORE_ERRORS, METRIC_PERF_SCORE_UPDATES};
use crate::vocab::CandidateId;

/// Scores of one region by candidate.
pub type Scores = BTreeMap<CandidateId, f64>;

/// The default body cap: 1 MiB.
pub const DEFAULT_MAX_BODY: usize = 1 << 20;

/// Why one fetch of the score document failed (the previous scores stay).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PerfScoreError {
    /// The URL cannot be used: not `http://host[:port]/path`.
    #[error("perf-score URL `{url}`: {problem}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong.
        problem: String,
    },
    /// No connection or no HTTP answer.
    #[error("perf-score server unreachable: {0}")]
    Connect(String),
    /// No complete answer within the timeout.
    #[error("perf-score fetch timed out after {0:?}")]
    Timeout(Duration),
    /// The server answered with another status than 200.
    #[error("perf-score server answered HTTP {0}")]
    Status(u16),
    /// The body is larger than the cap.
    #[error("perf-score document is larger than {limit} bytes")]
    TooLarge {
        /// The cap in bytes.
        limit: usize,
    },
    /// The body could not be read to its end.
    #[error("perf-score body unreadable: {0}")]
    Body(String),
    /// The body is not a JSON object of the expected shape.
    #[error("perf-score document malformed: {0}")]
    Malformed(String),
}

impl PerfScoreError {
    /// The `reason` label of the error metric.
    pub fn reason(&self) -> &'static str {
        match self {
            PerfScoreError::Url { .. } | PerfScoreError::Connect(_) => "connect",
            PerfScoreError::Timeout(_) => "timeout",
            PerfScoreError::Status(_) => "status",
            PerfScoreError::TooLarge { .. } => "too_large",
            PerfScoreError::Body(_) => "body",
            PerfScoreError::Malformed(_) => "malformed",
        }
    }
}

/// Where and how to fetch the score document.
#[derive(Clone, Debug)]
pub struct PerfScoreSource {
    uri: Uri,
    region: String,
    timeout: Duration,
    max_body: usize,
    interval: Duration,
}

impl PerfScoreSource {
    /// The shortest polling interval, 1 ms: [`PerfScoreSource::with_interval`] raises a
    /// shorter one (`Duration::ZERO` included) to it.
    pub const MIN_INTERVAL: Duration = Duration::from_millis(1);

    /// A source for `region` at `url` (`http://host[:port]/path`), with a 5 s timeout, a
    /// 1 MiB body cap and a 10 minute interval.
    pub fn new(url: &str, region: impl Into<String>) -> Result<Self, PerfScoreError> {
        let bad = |problem: &str| PerfScoreError::Url {
            url: url.to_string(),
            problem: problem.to_string(),
        };
        let uri: Uri = url.parse().map_err(|e| bad(&format!("{e}")))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => return Err(bad("https is not supported; use http:// (see docs)")),
            _ => return Err(bad("must start with http://")),
        }
        if uri.host().is_none_or(str::is_empty) {
            return Err(bad("has no host"));
        }
        Ok(PerfScoreSource {
            uri,
            region: region.into(),
            timeout: Duration::from_secs(5),
            max_body: DEFAULT_MAX_BODY,
            interval: Duration::from_secs(600),
        })
    }

    /// Sets the timeout for one whole fetch, connect to last byte (builder style).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the body cap in bytes (builder style).
    pub fn with_max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// Sets the polling interval (builder style), at least
    /// [`MIN_INTERVAL`](PerfScoreSource::MIN_INTERVAL). `Duration::MAX` polls at the start and
    /// then, in effect, never (tokio caps a period that long at about 30 years).
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval.max(Self::MIN_INTERVAL);
        self
    }

    /// The polling interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The region whose scores are read.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// Fetches and parses the document once.
    pub async fn fetch(&self) -> Result<Scores, PerfScoreError> {
        let body = tokio::time::timeout(self.timeout, self.get())
            .await
            .map_err(|_| PerfScoreError::Timeout(self.timeout))??;
        parse_scores(&body, &self.region)
    }

    async fn get(&self) -> Result<Vec<u8>, PerfScoreError> {
        let host = self.uri.host().unwrap_or_default();
        let port = self.uri.port_u16().unwrap_or(80);
        let stream = tokio::net::TcpStream::connect((connect_host(host), port))
            .await
            .map_err(|e| PerfScoreError::Connect(e.to_string()))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| PerfScoreError::Connect(e.to_string()))?;
        // The connection task ends when `sender` is dropped or the server closes.
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let path = self
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let authority = self
            .uri
            .authority()
            .map_or(host.to_string(), |a| a.to_string());
        let request = hyper::Request::get(path)
            .header(hyper::header::HOST, authority)
            .body(Empty::<Bytes>::new())
            .map_err(|e| PerfScoreError::Connect(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| PerfScoreError::Connect(e.to_string()))?;
        if response.status() != StatusCode::OK {
            return Err(PerfScoreError::Status(response.status().as_u16()));
        }
        let declared = response
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_body as u64) {
            return Err(PerfScoreError::TooLarge {
                limit: self.max_body,
            });
        }
        let mut body = response.into_body();
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| PerfScoreError::Body(e.to_string()))?;
            if let Some(data) = frame.data_ref() {
                if out.len() + data.len() > self.max_body {
                    return Err(PerfScoreError::TooLarge {
                        limit: self.max_body,
                    });
                }
                out.extend_from_slice(data);
            }
        }
        Ok(out)
    }
}

/// Reads one region's scores from the document. Candidates without that region, or whose
/// score is not a finite non-negative number, are left out; anything but a JSON object of
/// objects is malformed.
pub fn parse_scores(body: &[u8], region: &str) -> Result<Scores, PerfScoreError> {
    let doc: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| PerfScoreError::Malformed(e.to_string()))?;
    let candidates = doc
        .as_object()
        .ok_or_else(|| PerfScoreError::Malformed("top level is not an object".into()))?;
    let mut scores = Scores::new();
    for (id, regions) in candidates {
        let regions = regions.as_object().ok_or_else(|| {
            // A key of the document may be as long as the body: cut for the error (and log).
            let id = super::shortened(id, 64);
            PerfScoreError::Malformed(format!("`{id}` is not an object of regions"))
        })?;
        let score = regions
            .get(region)
            .and_then(|r| r.get("score"))
            .and_then(serde_json::Value::as_f64);
        if let Some(s) = score.filter(|s| s.is_finite() && *s >= 0.0) {
            scores.insert(CandidateId::new(id), s);
        }
    }
    Ok(scores)
}

/// The latest scores of a region, refreshed from a [`PerfScoreSource`].
#[derive(Debug)]
pub struct PerfScores {
    source: PerfScoreSource,
    scores: Scores,
    updates: u64,
    errors: u64,
}

impl PerfScores {
    /// No scores yet.
    pub fn new(source: PerfScoreSource) -> Self {
        PerfScores {
            source,
            scores: Scores::new(),
            updates: 0,
            errors: 0,
        }
    }

    /// Fetches once. On success the scores are replaced; on any error the previous scores
    /// stay and the error metric is counted.
    pub async fn refresh(&mut self) -> Result<&Scores, PerfScoreError> {
        match self.source.fetch().await {
            Ok(scores) => {
                self.scores = scores;
                self.updates += 1;
                metrics::counter!(METRIC_PERF_SCORE_UPDATES).increment(1);
                Ok(&self.scores)
            }
            Err(e) => {
                self.errors += 1;
                metrics::counter!(METRIC_PERF_SCORE_ERRORS, "reason" => e.reason()).increment(1);
                tracing::warn!(
                    url = %self.source.uri,
                    region = %self.source.region,
                    error = %e,
                    "perf scores kept from the previous fetch"
                );
                Err(e)
            }
        }
    }

    /// The current scores.
    pub fn scores(&self) -> &Scores {
        &self.scores
    }

    /// The region.
    pub fn region(&self) -> &str {
        self.source.region()
    }

    /// Successful fetches so far.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// Failed fetches so far.
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Refreshes now and then every interval, calling `on_update` after each successful
    /// fetch (for example to send [`SetPerfScores`](super::SetPerfScores) to discovery).
    /// Runs until the task is dropped.
    pub async fn run<F: FnMut(&str, &Scores)>(mut self, mut on_update: F) {
        let mut ticker = tokio::time::interval(self.source.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if self.refresh().await.is_ok() {
                on_update(&self.source.region, &self.scores);
            }
        }
    }
}

/// The host to resolve or connect to: `uri.host()` keeps the brackets of an IPv6 literal
/// (`[::1]`), which the resolver does not accept, so they are removed.
fn connect_host(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_literals_lose_their_brackets() {
        let uri: Uri = "http://[::1]:8080/scores".parse().unwrap();
        assert_eq!(connect_host(uri.host().unwrap()), "::1");
        assert_eq!(connect_host("127.0.0.1"), "127.0.0.1");
        assert_eq!(connect_host("scores.example.org"), "scores.example.org");
    }

    /// A malformed document's error names the offending key cut short: a key may be as
    /// long as the body (up to the 1 MiB cap), and the error reaches the log.
    #[test]
    fn a_malformed_documents_error_names_its_key_cut_short() {
        let body = format!("{{\"{}\": 1}}", "k".repeat(500_000));
        let e = parse_scores(body.as_bytes(), "FRA").unwrap_err();
        let text = e.to_string();
        assert!(text.len() < 200, "{} bytes", text.len());
        assert!(
            text.contains("kkk...` is not an object of regions"),
            "{text}"
        );
    }

    #[test]
    fn parses_one_region_and_skips_the_rest() {
        let body = br#"{
            "a": {"FRA": {"score": 0.9}, "LAX": {"score": 0.1}},
            "b": {"LAX": {"score": 0.5}},
            "c": {"FRA": {"score": "high"}},
            "d": {"FRA": {"score": -1}}
        }"#;
        let s = parse_scores(body, "FRA").unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[&CandidateId::new("a")], 0.9);
    }

    #[test]
    fn a_score_of_zero_is_kept() {
        let s = parse_scores(
            br#"{"a": {"FRA": {"score": 0}}, "b": {"FRA": {"score": 0.0}}}"#,
            "FRA",
        )
        .unwrap();
        assert_eq!(s.get(&CandidateId::new("a")), Some(&0.0));
        assert_eq!(s.get(&CandidateId::new("b")), Some(&0.0));
    }

    #[test]
    fn wrong_shapes_are_malformed() {
        for body in [&b"[1,2]"[..], b"{\"a\": 3}", b"{not json", b""] {
            let err = parse_scores(body, "FRA").unwrap_err();
            assert_eq!(err.reason(), "malformed", "{err}");
        }
    }

    #[test]
    fn urls_other_than_http_are_refused() {
        assert!(PerfScoreSource::new("http://127.0.0.1:8080/scores", "FRA").is_ok());
        for url in ["https://example.org/", "ftp://x/", "not a url", "/relative"] {
            let err = PerfScoreSource::new(url, "FRA").unwrap_err();
            assert!(matches!(err, PerfScoreError::Url { .. }), "{url}: {err}");
        }
    }
}
