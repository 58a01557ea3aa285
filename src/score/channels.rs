//! The draw's channels (the sum-mode score, each mixture component, the uniform floor), the
//! share of each draw each carries, and the floor in force.

use super::components::{COUNT, UNIFORM};
use super::config::Mode;

/// What a channel's leaf value is made of.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ChannelKind {
    /// Sum mode: `score ^ exponent`.
    SumScore,
    /// Mixture mode: one component (index into [`super::Components::entries`]) raised to the
    /// exponent.
    Component(usize),
    /// Uniform: 1 for every drawable candidate.
    Uniform,
}

/// A channel of the draw: a kind and the share of each draw it carries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Channel {
    pub(crate) kind: ChannelKind,
    pub(crate) mass: f64,
}

/// Lays the channels out in `channels` (cleared first, so a layout that keeps its length
/// reuses the room): for `mode` and the component `weights`, with `floor` (in `[0, 1]`) of
/// every draw spread uniformly. The uniform channel is always there and always last (mass
/// possibly 0): it counts the drawable set and receives the mass of channels that are empty
/// over it. Which channels exist depends on the floor only at 1 (sum mode: uniform alone), so
/// any floor below 1 lays out the same channels as any other.
pub(crate) fn lay_out(mode: Mode, weights: &[f64; COUNT], floor: f64, channels: &mut Vec<Channel>) {
    channels.clear();
    let weight_sum: f64 = weights.iter().sum();
    let mut uniform_mass = floor;
    match mode {
        Mode::Sum => {
            if weight_sum > 0.0 && floor < 1.0 {
                channels.push(Channel {
                    kind: ChannelKind::SumScore,
                    mass: 1.0 - floor,
                });
            } else {
                uniform_mass = 1.0;
            }
        }
        Mode::Mixture => {
            if weight_sum > 0.0 {
                for (k, &wk) in weights.iter().enumerate() {
                    if wk <= 0.0 {
                        continue;
                    }
                    let mass = (1.0 - floor) * wk / weight_sum;
                    if k == UNIFORM {
                        uniform_mass += mass;
                    } else {
                        channels.push(Channel {
                            kind: ChannelKind::Component(k),
                            mass,
                        });
                    }
                }
            } else {
                uniform_mass = 1.0;
            }
        }
    }
    channels.push(Channel {
        kind: ChannelKind::Uniform,
        mass: uniform_mass,
    });
}

/// The floor in force: the config's `floor`, scaled down where it cannot try each candidate
/// once per `period_s` seconds. With `live` candidates and `decisions_per_s` draws a second,
/// the floor gives each candidate `r = floor * decisions_per_s / live` tries a second (a draw
/// over `n` of them gives each `floor / n`, and a candidate is in `n / live` of the draws on
/// average). Where `r * period_s` is below 1 the floor is scaled by it: a floor that reaches a
/// candidate less than once per `period_s` cannot bring a healed one back within that time
/// (the scheduled and heal probes do), yet costs its share of every draw. `period_s` 0, a
/// floor of 0 or 1, or no decisions yet: the config's floor.
pub(crate) fn floor_in_force(floor: f64, period_s: f64, decisions_per_s: f64, live: usize) -> f64 {
    if period_s <= 0.0 || floor <= 0.0 || floor >= 1.0 || decisions_per_s <= 0.0 || live == 0 {
        return floor;
    }
    let tries = floor * decisions_per_s / live as f64 * period_s;
    if tries < 1.0 {
        floor * tries
    } else {
        floor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_stays_where_it_reaches_each_candidate_often_enough() {
        // 200 draws a second over 8 candidates: each tried 0.25 times a second by the floor.
        assert_eq!(floor_in_force(0.01, 10.0, 200.0, 8), 0.01);
        // Off, or nothing to scale.
        assert_eq!(floor_in_force(0.01, 0.0, 30.0, 40), 0.01);
        assert_eq!(floor_in_force(0.0, 10.0, 30.0, 40), 0.0);
        assert_eq!(floor_in_force(1.0, 10.0, 30.0, 40), 1.0);
        assert_eq!(floor_in_force(0.01, 10.0, 0.0, 40), 0.01);
        assert_eq!(floor_in_force(0.01, 10.0, 30.0, 0), 0.01);
    }

    #[test]
    fn the_floor_shrinks_where_it_reaches_each_candidate_rarely() {
        // 30 draws a second over 40 candidates: one try per 133 s from a 1 % floor, so the
        // floor in force is 0.075 of it.
        let f = floor_in_force(0.01, 10.0, 30.0, 40);
        assert!((f - 0.01 * 0.075).abs() < 1e-12, "{f}");
        // It grows back with the traffic, continuously, to the full floor.
        let mut last = 0.0;
        for rate in [1.0, 10.0, 100.0, 399.0, 400.0, 1000.0] {
            let f = floor_in_force(0.01, 10.0, rate, 40);
            assert!(f >= last && f <= 0.01, "{rate}: {f}");
            last = f;
        }
        assert_eq!(floor_in_force(0.01, 10.0, 400.0, 40), 0.01);
    }

    #[test]
    fn a_lower_floor_keeps_the_layout_and_moves_the_mass() {
        let mut w = [0.0; COUNT];
        w[0] = 2.0;
        w[1] = 1.0;
        let mut a = Vec::new();
        lay_out(Mode::Sum, &w, 0.01, &mut a);
        let mut b = a.clone();
        let cap = b.capacity();
        lay_out(Mode::Sum, &w, 0.001, &mut b);
        assert_eq!(b.capacity(), cap);
        assert_eq!(
            a.iter().map(|c| c.kind).collect::<Vec<_>>(),
            b.iter().map(|c| c.kind).collect::<Vec<_>>()
        );
        assert_eq!(b[0].mass, 0.999);
        assert_eq!(b[1].mass, 0.001);
        for mode in [Mode::Sum, Mode::Mixture] {
            lay_out(mode, &w, 0.003, &mut b);
            let total: f64 = b.iter().map(|c| c.mass).sum();
            assert!((total - 1.0).abs() < 1e-12, "{mode:?}: {total}");
        }
    }
}
