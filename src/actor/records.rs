//! Fan-out of decision records to subscribers, each at its own sampling rate.
//!
//! The core builds records at the highest rate any subscriber asked for (none when nobody
//! listens, so the hot path pays nothing); each subscriber then keeps its own share with the
//! same deterministic accumulator the core uses.

use actix::Recipient;
use tokio::sync::mpsc;

use super::messages::Decision;
use crate::decision::DecisionRecord;

#[derive(Debug)]
enum Sink {
    Actor(Recipient<Decision>),
    Channel(mpsc::Sender<DecisionRecord>),
}

impl Sink {
    fn is_closed(&self) -> bool {
        match self {
            Sink::Actor(r) => !r.connected(),
            Sink::Channel(tx) => tx.is_closed(),
        }
    }
}

#[derive(Debug)]
struct Subscriber {
    sink: Sink,
    rate: f64,
    acc: f64,
}

/// What happened when records were published.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Published {
    /// Records a full subscriber could not take.
    pub(crate) dropped: u64,
    /// Whether a subscriber left (the core's record rate may change).
    pub(crate) left: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Subscribers {
    list: Vec<Subscriber>,
}

pub(crate) fn clamp_rate(rate: f64) -> f64 {
    if rate.is_finite() {
        rate.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

impl Subscribers {
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn add_actor(&mut self, r: Recipient<Decision>, rate: f64) {
        self.push(Sink::Actor(r), rate);
    }

    pub(crate) fn add_channel(&mut self, tx: mpsc::Sender<DecisionRecord>, rate: f64) {
        self.push(Sink::Channel(tx), rate);
    }

    fn push(&mut self, sink: Sink, rate: f64) {
        self.list.push(Subscriber {
            sink,
            rate: clamp_rate(rate),
            acc: 0.0,
        });
    }

    /// The rate the core must record at: the highest asked for, 0 with no subscriber.
    pub(crate) fn core_rate(&self) -> f64 {
        self.list.iter().map(|s| s.rate).fold(0.0, f64::max)
    }

    /// Removes subscribers that stopped listening. Returns whether any left.
    pub(crate) fn prune(&mut self) -> bool {
        let before = self.list.len();
        self.list.retain(|s| !s.sink.is_closed());
        self.list.len() != before
    }

    /// Offers one record (made at `core_rate`) to every subscriber.
    pub(crate) fn publish(&mut self, record: DecisionRecord, core_rate: f64) -> Published {
        let mut out = Published::default();
        if core_rate <= 0.0 {
            return out;
        }
        let mut record = Some(record);
        let n = self.list.len();
        let mut closed = Vec::new();
        for (i, s) in self.list.iter_mut().enumerate() {
            if s.sink.is_closed() {
                closed.push(i);
                continue;
            }
            s.acc += s.rate / core_rate;
            if s.acc < 1.0 - 1e-9 {
                continue;
            }
            s.acc = (s.acc - 1.0).max(0.0);
            // The last taker gets the record itself, the others a copy.
            let rec = if i + 1 == n {
                record.take()
            } else {
                record.clone()
            };
            let Some(rec) = rec else { continue };
            let sent = match &s.sink {
                Sink::Actor(r) => r.try_send(Decision(rec)).map_err(|e| match e {
                    actix::prelude::SendError::Full(_) => false,
                    actix::prelude::SendError::Closed(_) => true,
                }),
                Sink::Channel(tx) => tx.try_send(rec).map_err(|e| match e {
                    mpsc::error::TrySendError::Full(_) => false,
                    mpsc::error::TrySendError::Closed(_) => true,
                }),
            };
            match sent {
                Ok(()) => {}
                Err(false) => out.dropped += 1,
                Err(true) => closed.push(i),
            }
        }
        if !closed.is_empty() {
            let mut i = 0;
            self.list.retain(|_| {
                i += 1;
                !closed.contains(&(i - 1))
            });
            out.left = true;
        }
        out
    }
}
