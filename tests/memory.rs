//! Memory held by the core, measured with a counting allocator: bytes per candidate (with
//! statistics) and per waiting request, and no allocation on the decision path once warm.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use selection_coordinator::score::Stats;
use selection_coordinator::{
    CandidateInfo, Config, Core, Event, Grant, Limits, Next, Outcome, Request,
};

/// Counts this thread's live bytes and allocation calls (per thread, so tests running in
/// parallel do not see each other's allocations).
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static CALLS: Cell<usize> = const { Cell::new(0) };
}

fn note(delta: isize, call: bool) {
    // `try_with`: the allocator also runs while thread-locals are being torn down.
    let _ = LIVE.try_with(|l| l.set(l.get() + delta));
    if call {
        let _ = CALLS.try_with(|c| c.set(c.get() + 1));
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize, true);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as isize), false);
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize, true);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as isize - layout.size() as isize, true);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    LIVE.with(|l| l.get())
}

fn calls() -> usize {
    CALLS.with(|c| c.get())
}

fn stats(rng: &mut SmallRng) -> Stats {
    Stats {
        success: Some(rng.random_range(0.5..1.0)),
        connect_ms: Some(rng.random_range(5.0..80.0)),
        ttfb_ms: Some(rng.random_range(20.0..400.0)),
        bandwidth_bps: Some(rng.random_range(1e5..1e8)),
        last_sample_s: Some(0.0),
        attempts: 20,
        successes: 18,
        ..Stats::default()
    }
}

/// The targets. Per candidate the core keeps a 256-byte slot (packed statistics, the learned
/// components, flags), the public `CandidateInfo` apart from it (120 bytes), its load fit, a
/// 4-byte id index entry, the draw trees' leaves and the vectors' growth slack.
const CANDIDATE_LIMIT: f64 = 512.0;
const WAITING_LIMIT: f64 = 128.0;

#[test]
fn bytes_per_candidate_with_statistics() {
    const N: usize = 10_000;
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(1);
    // Counted from before the ids are made: everything the core keeps (ids, info, statistics,
    // cached components, trees, the id index) is in the difference.
    let before = live();
    let mut core = Core::new(Config::default(), now).unwrap();
    for i in 0..N {
        let s = stats(&mut rng);
        core.add_with_stats(
            CandidateInfo::new(format!("candidate-{i:05}")),
            s,
            now,
            &mut rng,
        )
        .unwrap();
    }
    // Every candidate scored once and the all-candidate averages set, as in service.
    let mut t = now;
    for k in 0..1_000u32 {
        t += Duration::from_millis(1);
        cycle(&mut core, t, &mut rng, k);
    }
    let after = live();
    let per = (after - before) as f64 / N as f64;
    println!("bytes per candidate: {per:.1} ({N} candidates with statistics)");
    println!(
        "  of which CandidateInfo {} B (kept apart from the 256-byte slot)",
        std::mem::size_of::<CandidateInfo>(),
    );
    assert_eq!(core.candidate_count(), N);
    assert!(
        per <= CANDIDATE_LIMIT,
        "{per:.1} bytes per candidate, over the {CANDIDATE_LIMIT} limit"
    );
}

#[test]
fn bytes_per_waiting_request() {
    const WAITING: usize = 100_000;
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(2);
    let limits = Limits {
        global: 1,
        max_waiting: WAITING,
        ..Limits::default()
    };
    let mut core = Core::new(Config::default(), now)
        .unwrap()
        .with_limits(limits)
        .unwrap();
    for i in 0..10 {
        core.add_candidate(CandidateInfo::new(format!("c{i}")), now, &mut rng)
            .unwrap();
    }
    // The one slot is taken, so every later request waits.
    core.ready(Request::any(), now, &mut rng).unwrap();
    assert!(matches!(core.poll_event(), Some(Event::Granted(_))));
    let before = live();
    for _ in 0..WAITING {
        core.ready(Request::any(), now, &mut rng).unwrap();
    }
    let after = live();
    assert_eq!(core.waiting(), WAITING);
    assert!(core.poll_event().is_none(), "nothing granted or rejected");
    let per = (after - before) as f64 / WAITING as f64;
    println!("bytes per waiting request: {per:.1} ({WAITING} waiting, eligible = all)");
    assert!(
        per <= WAITING_LIMIT,
        "{per:.1} bytes per waiting request, over the {WAITING_LIMIT} limit"
    );
}

fn cycle(core: &mut Core, now: Instant, rng: &mut SmallRng, k: u32) {
    core.ready(Request::any(), now, rng).unwrap();
    let Some(Event::Granted(Grant { attempt, .. })) = core.poll_event() else {
        panic!("an unlimited core grants at once");
    };
    let ms = 10.0 + (k % 7) as f64;
    core.outcome(
        attempt,
        Outcome::success_with(ms, 3.0 * ms, 65_536, 10.0 * ms),
        now,
    )
    .unwrap();
    core.done(attempt, Next::Finish, now, rng).unwrap();
}

#[test]
fn a_warm_decision_allocates_nothing() {
    let now = Instant::now();
    let mut rng = SmallRng::seed_from_u64(3);
    let mut core = Core::new(Config::default(), now).unwrap();
    for i in 0..1_000 {
        let s = stats(&mut rng);
        core.add_with_stats(CandidateInfo::new(format!("c{i}")), s, now, &mut rng)
            .unwrap();
    }
    let mut t = now;
    for k in 0..2_000 {
        t += Duration::from_micros(10);
        cycle(&mut core, t, &mut rng, k);
    }
    let before = calls();
    // 10,000 decisions over 100 ms: the decision path (ready, grant, outcome, done) and the
    // one coarse refresh that falls inside (the default period is 100 ms), which allocates
    // nothing either once warm.
    for k in 0..10_000 {
        t += Duration::from_micros(10);
        cycle(&mut core, t, &mut rng, k);
    }
    let allocations = calls() - before;
    println!("allocations in 10,000 warm decisions: {allocations}");
    assert_eq!(allocations, 0, "the decision path allocated");
}
