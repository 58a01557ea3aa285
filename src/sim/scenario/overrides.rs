//! The candidate-level checks, shared by a scenario's candidates and the candidates its
//! timeline's degrades make: a degrade is refused when the candidate it leaves would be
//! refused in `[[candidates]]`, and an entry whose fields its action ignores is refused.

use std::collections::HashMap;

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::input::Num;
use crate::sim::dist::MAX_MS;
use crate::sim::truth::transfer_ms;

/// A candidate the checks refuse: the field at fault (a path under the candidate), the
/// fields the problem involves (the one at fault first), and what to fix.
#[derive(Debug)]
pub(super) struct Problem {
    pub(super) field: &'static str,
    pub(super) involved: &'static [&'static str],
    pub(super) message: String,
}

fn problem(field: &'static str, involved: &'static [&'static str], message: String) -> Problem {
    Problem {
        field,
        involved,
        message,
    }
}

/// The checks serde cannot make alone on one candidate, with `bytes` per request.
pub(super) fn check_candidate(c: &CandidateSpec, bytes: u64) -> Result<(), Problem> {
    let transfer = c
        .bandwidth_mbps
        .map_or(0.0, |mbps| transfer_ms(bytes, mbps));
    if transfer > MAX_MS {
        return Err(problem(
            "bandwidth_mbps",
            &["bandwidth_mbps"],
            format!(
                "{bytes} bytes at {} Mbit/s take {transfer:.3e} ms, past the {MAX_MS:e} ms a \
                 run can reach: raise the bandwidth or lower workload.bytes",
                Num(c.bandwidth_mbps.unwrap_or_default())
            ),
        ));
    }
    let queue_field = [
        ("servers", c.servers.is_some()),
        ("queue_limit", c.queue_limit.is_some()),
        ("slowdown", c.slowdown.is_some()),
    ]
    .into_iter()
    .find(|f| f.1);
    if let (Some((field, _)), None) = (queue_field, &c.service_ms) {
        let involved: &'static [&'static str] = match field {
            "servers" => &["servers"],
            "queue_limit" => &["queue_limit"],
            _ => &["slowdown"],
        };
        return Err(problem(
            field,
            involved,
            format!("`{field}` describes a queue: give the candidate a `service_ms` too"),
        ));
    }
    if c.knee.is_some() && c.service_ms.is_some() {
        return Err(problem(
            "knee",
            &["knee", "service_ms"],
            "`knee` is for a candidate without a queue (a queue's latency grows with load by \
             itself): drop `knee` or `service_ms`"
                .into(),
        ));
    }
    if c.knee.is_some_and(|k| !k.is_active()) {
        return Err(problem(
            "knee",
            &["knee"],
            "this `knee` changes no latency: give it an `exp` above 1 (growth past `start`) or \
             a `scale` above 0 (growth from the first attempt), or drop it"
                .into(),
        ));
    }
    if let (Some(service), Some(slow)) = (&c.service_ms, c.slowdown) {
        let slow_ms = service.mean() * slow.factor;
        if slow_ms > MAX_MS {
            return Err(problem(
                "slowdown.factor",
                &["slowdown.factor", "service_ms"],
                format!(
                    "a slow period serves in {slow_ms:.3e} ms (service_ms's mean {} ms x \
                     factor {}), past the {MAX_MS:e} ms a run can reach: lower the factor to \
                     at most {:.3e}",
                    Num(service.mean()),
                    Num(slow.factor),
                    MAX_MS / service.mean()
                ),
            ));
        }
    }
    Ok(())
}

/// The override fields `ev` sets, in the order of the docs.
fn overrides(ev: &TimelineEvent) -> Vec<&'static str> {
    [
        ("success", ev.success.is_some()),
        ("failure", ev.failure.is_some()),
        ("failure_ms", ev.failure_ms.is_some()),
        ("ttfb_ms", ev.ttfb_ms.is_some()),
        ("capacity", ev.capacity.is_some()),
        ("connect_ms", ev.connect_ms.is_some()),
        ("duration_ms", ev.duration_ms.is_some()),
        ("bandwidth_mbps", ev.bandwidth_mbps.is_some()),
        ("overload_per_extra", ev.overload_per_extra.is_some()),
        ("servers", ev.servers.is_some()),
        ("service_ms", ev.service_ms.is_some()),
        ("queue_limit", ev.queue_limit.is_some()),
        ("slowdown", ev.slowdown.is_some()),
        ("knee", ev.knee.is_some()),
    ]
    .into_iter()
    .filter_map(|(f, set)| set.then_some(f))
    .collect()
}

/// `c` as a degrade `ev` leaves it (as `Truth::degrade` changes the truth).
fn apply(c: &mut CandidateSpec, ev: &TimelineEvent) {
    if let Some(s) = ev.success {
        c.success = s;
    }
    if let Some(f) = ev.failure {
        c.failure = f;
    }
    if let Some(d) = &ev.failure_ms {
        c.failure_ms = d.clone();
    }
    if let Some(d) = &ev.ttfb_ms {
        c.ttfb_ms = Some(d.clone());
    }
    if let Some(n) = ev.capacity {
        c.capacity = Some(n);
    }
    if let Some(d) = &ev.connect_ms {
        c.connect_ms = d.clone();
    }
    if let Some(d) = &ev.duration_ms {
        c.duration_ms = d.clone();
    }
    if let Some(b) = ev.bandwidth_mbps {
        c.bandwidth_mbps = Some(b);
    }
    if let Some(o) = ev.overload_per_extra {
        c.overload_per_extra = o;
    }
    if let Some(n) = ev.servers {
        c.servers = Some(n);
    }
    if let Some(d) = &ev.service_ms {
        c.service_ms = Some(d.clone());
    }
    if let Some(l) = ev.queue_limit {
        c.queue_limit = Some(l);
    }
    if let Some(s) = ev.slowdown {
        c.slowdown = Some(s);
    }
    if let Some(k) = ev.knee {
        c.knee = Some(k);
    }
}

/// Checks the timeline in time order (as the engine runs it): a join, leave or heal carries
/// no override, a degrade at least one, and the candidate each degrade leaves (degrades add
/// up until a heal) passes [`check_candidate`]. Errors: the entry's field path (under
/// `timeline[i]`) and what to fix.
pub(super) fn check_timeline(sc: &Scenario) -> Result<(), (String, String)> {
    let ids = sc.expanded();
    let base: HashMap<&str, usize> = ids.iter().map(|(id, s)| (id.as_str(), *s)).collect();
    let mut order: Vec<usize> = (0..sc.timeline.len()).collect();
    order.sort_by(|&a, &b| sc.timeline[a].at_s.total_cmp(&sc.timeline[b].at_s));
    let mut now: HashMap<&str, CandidateSpec> = HashMap::new();
    for i in order {
        let ev = &sc.timeline[i];
        let set = overrides(ev);
        let action = match ev.action {
            Action::Degrade => "degrade",
            Action::Heal => "heal",
            Action::Join => "join",
            Action::Leave => "leave",
        };
        if ev.action != Action::Degrade {
            if let Some(field) = set.first() {
                return Err((
                    format!("timeline[{i}].{field}"),
                    format!(
                        "`action = \"{action}\"` ignores `{field}` (only a degrade changes a \
                         candidate's truth): drop `{}` or make the entry a degrade",
                        set.join("`, `")
                    ),
                ));
            }
            if ev.action == Action::Heal {
                now.remove(ev.candidate.get_ref().as_str());
            }
            continue;
        }
        if set.is_empty() {
            return Err((
                format!("timeline[{i}].action"),
                "a degrade with no override changes nothing: give it at least one of `success`, \
                 `failure`, `failure_ms`, `ttfb_ms`, `capacity`, `connect_ms`, `duration_ms`, \
                 `bandwidth_mbps`, `overload_per_extra`, `servers`, `service_ms`, \
                 `queue_limit`, `slowdown`, `knee`, or drop the entry"
                    .into(),
            ));
        }
        // An unknown candidate is reported on its own, after this check.
        let name = ev.candidate.get_ref().as_str();
        let Some(&spec) = base.get(name) else {
            continue;
        };
        let c = now
            .entry(name)
            .or_insert_with(|| sc.candidates[spec].clone());
        apply(c, ev);
        if let Err(p) = check_candidate(c, sc.workload.bytes) {
            // The entry's own field at fault, else one it sets that the problem involves.
            let field = p
                .involved
                .iter()
                .find(|f| set.contains(&f.split('.').next().unwrap_or(f)))
                .copied()
                .unwrap_or(p.field);
            return Err((
                format!("timeline[{i}].{field}"),
                format!("after this degrade, candidate `{name}`: {}", p.message),
            ));
        }
    }
    Ok(())
}
