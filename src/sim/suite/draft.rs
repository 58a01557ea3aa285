//! A generated scenario before it is text: the few fields the families vary, written out as
//! scenario TOML (`docs/scenarios.md`) so that a dump is the very text that ran.

use std::fmt::Write as _;

use crate::sim::Dist;

/// Rounds to 3 decimals so the files read well; the text is what runs, so nothing is lost.
pub(super) fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// A number as TOML: always with a decimal point or an exponent, so it parses as a float.
fn num(x: f64) -> String {
    format!("{:?}", r3(x))
}

fn dist(d: &Dist) -> String {
    match *d {
        Dist::Const(v) => num(v),
        Dist::Uniform { min, max } => {
            format!(
                "{{ kind = \"uniform\", min = {}, max = {} }}",
                num(min),
                num(max)
            )
        }
        Dist::Normal { mean, sd } => {
            format!(
                "{{ kind = \"normal\", mean = {}, sd = {} }}",
                num(mean),
                num(sd)
            )
        }
        Dist::LogNormal { mean, sd } => {
            format!(
                "{{ kind = \"lognormal\", mean = {}, sd = {} }}",
                num(mean),
                num(sd)
            )
        }
        Dist::Exp { mean } => format!("{{ kind = \"exp\", mean = {} }}", num(mean)),
    }
}

/// How requests arrive.
#[derive(Clone, Debug)]
pub(super) enum Arrivals {
    /// Poisson arrivals.
    Open { rate_per_s: f64, duration_s: f64 },
    /// Workers running requests back to back.
    Closed {
        workers: u32,
        operations: u32,
        think_ms: f64,
    },
}

/// The workload of a draft.
#[derive(Clone, Debug)]
pub(super) struct Load {
    pub(super) arrivals: Arrivals,
    pub(super) subset: u32,
    pub(super) retries: u32,
    pub(super) attempt_timeout_ms: Option<f64>,
}

/// One candidate entry.
#[derive(Clone, Debug)]
pub(super) struct Cand {
    pub(super) id: String,
    pub(super) count: u32,
    pub(super) present: bool,
    pub(super) success: f64,
    pub(super) failure: &'static str,
    pub(super) failure_ms: Dist,
    pub(super) connect_ms: Dist,
    pub(super) ttfb_ms: Dist,
    pub(super) capacity: Option<u32>,
    pub(super) overload_per_extra: f64,
    /// A queueing candidate: servers, service time, queue limit.
    pub(super) queue: Option<Queue>,
}

/// A queueing candidate's station (`docs/scenarios.md`, "Queueing candidates").
#[derive(Clone, Debug)]
pub(super) struct Queue {
    pub(super) servers: u32,
    pub(super) service_ms: Dist,
    pub(super) queue_limit: Option<u32>,
    /// Time-varying service: `(period_ms, factor)`, slow half of the periods.
    pub(super) slowdown: Option<(f64, f64)>,
}

impl Cand {
    /// The mean time to the first byte of a success without waiting, ms.
    pub(super) fn mean_ms(&self) -> f64 {
        let service = self.queue.as_ref().map_or(0.0, |q| q.service_ms.mean());
        self.connect_ms.mean() + self.ttfb_ms.mean() + service
    }
}

/// One timeline event; `None` fields are left out.
#[derive(Clone, Debug, Default)]
pub(super) struct Event {
    pub(super) at_s: f64,
    pub(super) action: &'static str,
    pub(super) candidate: String,
    pub(super) success: Option<f64>,
    pub(super) failure: Option<&'static str>,
    pub(super) failure_ms: Option<Dist>,
    pub(super) ttfb_ms: Option<Dist>,
    pub(super) service_ms: Option<Dist>,
    pub(super) servers: Option<u32>,
}

impl Event {
    /// An event with no overrides.
    pub(super) fn plain(at_s: f64, action: &'static str, candidate: &str) -> Self {
        Event {
            at_s,
            action,
            candidate: candidate.to_string(),
            ..Default::default()
        }
    }
}

/// A whole generated scenario.
#[derive(Clone, Debug)]
pub(super) struct Draft {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) load: Load,
    pub(super) candidates: Vec<Cand>,
    pub(super) timeline: Vec<Event>,
}

impl Draft {
    /// The scenario file: a header saying how to rerun it, then the TOML.
    pub(super) fn to_toml(&self, header: &str, policies: &[String]) -> String {
        let mut o = String::new();
        for line in header.lines() {
            let _ = writeln!(o, "# {line}");
        }
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        let _ = writeln!(o, "name = {}", q(&self.name));
        let _ = writeln!(o, "description = {}", q(&self.description));
        let list: Vec<String> = policies.iter().map(|p| q(p)).collect();
        let _ = writeln!(o, "policies = [{}]", list.join(", "));
        let _ = writeln!(o, "\n[workload]");
        match self.load.arrivals {
            Arrivals::Open {
                rate_per_s,
                duration_s,
            } => {
                let _ = writeln!(o, "loop = \"open\"");
                let _ = writeln!(o, "rate_per_s = {}", num(rate_per_s));
                let _ = writeln!(o, "duration_s = {}", num(duration_s));
            }
            Arrivals::Closed {
                workers,
                operations,
                think_ms,
            } => {
                let _ = writeln!(o, "loop = \"closed\"");
                let _ = writeln!(o, "workers = {workers}");
                let _ = writeln!(o, "operations = {operations}");
                let _ = writeln!(o, "think_ms = {}", num(think_ms));
            }
        }
        if self.load.subset > 0 {
            let _ = writeln!(o, "subset = {}", self.load.subset);
        }
        let _ = writeln!(o, "retries = {}", self.load.retries);
        if let Some(t) = self.load.attempt_timeout_ms {
            let _ = writeln!(o, "attempt_timeout_ms = {}", num(t));
        }
        for c in &self.candidates {
            let _ = writeln!(o, "\n[[candidates]]");
            let _ = writeln!(o, "id = {}", q(&c.id));
            if c.count > 1 {
                let _ = writeln!(o, "count = {}", c.count);
            }
            if !c.present {
                let _ = writeln!(o, "present = false");
            }
            let _ = writeln!(o, "success = {}", num(c.success));
            let _ = writeln!(o, "failure = {}", q(c.failure));
            let _ = writeln!(o, "failure_ms = {}", dist(&c.failure_ms));
            let _ = writeln!(o, "connect_ms = {}", dist(&c.connect_ms));
            let _ = writeln!(o, "ttfb_ms = {}", dist(&c.ttfb_ms));
            if let Some(cap) = c.capacity {
                let _ = writeln!(o, "capacity = {cap}");
                let _ = writeln!(o, "overload_per_extra = {}", num(c.overload_per_extra));
            }
            if let Some(q) = &c.queue {
                let _ = writeln!(o, "servers = {}", q.servers);
                let _ = writeln!(o, "service_ms = {}", dist(&q.service_ms));
                if let Some(l) = q.queue_limit {
                    let _ = writeln!(o, "queue_limit = {l}");
                }
                if let Some((period, factor)) = q.slowdown {
                    let _ = writeln!(
                        o,
                        "slowdown = {{ period_ms = {}, factor = {} }}",
                        num(period),
                        num(factor)
                    );
                }
            }
        }
        for e in &self.timeline {
            let _ = writeln!(o, "\n[[timeline]]");
            let _ = writeln!(o, "at_s = {}", num(e.at_s));
            let _ = writeln!(o, "action = {}", q(e.action));
            let _ = writeln!(o, "candidate = {}", q(&e.candidate));
            if let Some(s) = e.success {
                let _ = writeln!(o, "success = {}", num(s));
            }
            if let Some(f) = e.failure {
                let _ = writeln!(o, "failure = {}", q(f));
            }
            if let Some(d) = &e.failure_ms {
                let _ = writeln!(o, "failure_ms = {}", dist(d));
            }
            if let Some(d) = &e.ttfb_ms {
                let _ = writeln!(o, "ttfb_ms = {}", dist(d));
            }
            if let Some(d) = &e.service_ms {
                let _ = writeln!(o, "service_ms = {}", dist(d));
            }
            if let Some(n) = e.servers {
                let _ = writeln!(o, "servers = {n}");
            }
        }
        o
    }
}
