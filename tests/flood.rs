//! A flood through the real actor: 1,000,000 `Ready` against `max_waiting` = 100,000 while the
//! only slots are held. Exactly the excess is rejected with `QueueFull`, and memory (measured by
//! a counting allocator in this test binary) stays under a stated bound and stops growing once
//! the queue is full.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use actix::prelude::*;
use futures::future::join_all;
use selection_coordinator::actor::{Answer, Coordinator, GetState, Permit, Ready};
use selection_coordinator::{CandidateInfo, Config, Limits, Rejection, Request};

/// Counts live heap bytes and their high-water mark.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const READIES: usize = 1_000_000;
const MAX_WAITING: usize = 100_000;
const SLOTS: u32 = 10;
/// Ready messages in flight at once (the flood's sender awaits each batch).
const BATCH: usize = 2_000;
/// The stated bound: a fixed allowance plus 1 KiB per request the queue may hold.
const BASE_BYTES: usize = 32 << 20;
const PER_WAITING_BYTES: usize = 1 << 10;
const BOUND: usize = BASE_BYTES + MAX_WAITING * PER_WAITING_BYTES;
/// The last Readies over which the heap must not grow at all (containers that grow by doubling
/// have settled by then; a leak of even a byte per rejected request would show).
const FLAT_OVER: usize = 400_000;

#[derive(Default)]
struct Sink {
    held: Vec<Permit>,
    rejected: Vec<(Rejection, u64)>,
}

impl Actor for Sink {
    type Context = Context<Self>;
}

impl Handler<Answer> for Sink {
    type Result = ();
    fn handle(&mut self, answer: Answer, _: &mut Context<Self>) {
        match answer {
            // Held to the end: the slots stay busy and the queue fills.
            Answer::Granted(p) => self.held.push(p),
            Answer::Rejected { reason, .. } => {
                match self.rejected.iter_mut().find(|r| r.0 == reason) {
                    Some(r) => r.1 += 1,
                    None => self.rejected.push((reason, 1)),
                }
            }
        }
    }
}

#[derive(Message)]
#[rtype(result = "(usize, Vec<(Rejection, u64)>)")]
struct Count;

impl Handler<Count> for Sink {
    type Result = MessageResult<Count>;
    fn handle(&mut self, _: Count, _: &mut Context<Self>) -> Self::Result {
        MessageResult((self.held.len(), self.rejected.clone()))
    }
}

#[actix::test]
async fn a_flood_is_bounded_by_max_waiting() {
    let limits = Limits {
        global: SLOTS,
        max_waiting: MAX_WAITING,
        ..Limits::default()
    };
    let c = Coordinator::with_seed(Config::default(), limits, 3)
        .unwrap()
        .with_candidate(CandidateInfo::new("a"))
        .unwrap()
        .with_candidate(CandidateInfo::new("b"))
        .unwrap()
        .with_mailbox_capacity(BATCH)
        .start();
    let sink = Sink::default().start();
    let start_live = LIVE.load(Ordering::Relaxed);

    let mut live_when_full = 0;
    let mut live_before_last = 0;
    let mut sent = 0;
    while sent < READIES {
        let batch: Vec<_> = (0..BATCH)
            .map(|_| c.send(Ready::new(Request::any(), sink.clone().recipient())))
            .collect();
        for r in join_all(batch).await {
            r.unwrap().unwrap();
        }
        sent += BATCH;
        if sent == READIES - FLAT_OVER {
            live_before_last = LIVE.load(Ordering::Relaxed);
        }
        if sent == 2 * MAX_WAITING {
            // Let the sink take what was delivered so far.
            sink.send(Count).await.unwrap();
            live_when_full = LIVE.load(Ordering::Relaxed);
        }
    }
    let (granted, rejected) = sink.send(Count).await.unwrap();
    let s = c.send(GetState).await.unwrap();
    let live_at_end = LIVE.load(Ordering::Relaxed);
    let peak = PEAK.load(Ordering::Relaxed);
    let queue_full = rejected
        .iter()
        .find(|r| r.0 == Rejection::QueueFull)
        .map_or(0, |r| r.1);

    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    println!(
        "flood: {READIES} Ready, max_waiting {MAX_WAITING}, {SLOTS} slots: granted {granted}, \
         waiting {}, rejected {rejected:?}",
        s.waiting
    );
    println!(
        "heap: {:.1} MiB at start, {:.1} MiB with the queue full (after {} Ready), {:.1} MiB \
         {FLAT_OVER} Ready before the end, {:.1} MiB at the end, peak {:.1} MiB; bound {:.1} MiB \
         ({} MiB + 1 KiB per waiting request)",
        mib(start_live),
        mib(live_when_full),
        2 * MAX_WAITING,
        mib(live_before_last),
        mib(live_at_end),
        mib(peak),
        mib(BOUND),
        BASE_BYTES >> 20
    );

    assert_eq!(granted, SLOTS as usize);
    assert_eq!(s.waiting, MAX_WAITING);
    assert_eq!(queue_full, (READIES - MAX_WAITING - granted) as u64);
    assert_eq!(rejected.len(), 1, "QueueFull is the only reason");
    assert_eq!(
        s.counters.rejections[1], queue_full,
        "the core counted them as QueueFull"
    );
    assert!(peak < BOUND, "peak {peak} bytes over the bound {BOUND}");
    // Bounded, not merely under a large number: the last 400,000 rejected Readies left
    // nothing behind (allowing 64 KiB of noise, under a byte per request).
    assert!(
        live_at_end <= live_before_last + (64 << 10),
        "heap grew from {live_before_last} to {live_at_end} bytes over the last {FLAT_OVER} Ready"
    );
}
