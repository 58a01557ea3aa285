//! A config's A/B arms and shadows: their validation, and whether two configs draw alike.

use super::config::Config;
use crate::error::Problem;

/// The most A/B arms a config may have.
pub const MAX_ARMS: usize = 256;
/// The most shadow policies a config may have.
pub const MAX_SHADOWS: usize = 64;

impl Config {
    /// Arms and shadows: unique names, usable shares and samples, valid configs, no nesting.
    pub(super) fn validate_variants(&self, problems: &mut Vec<Problem>) {
        let mut names = std::collections::BTreeSet::new();
        let mut check = |path: String, name: &str, config: &Config, problems: &mut Vec<Problem>| {
            if name.trim().is_empty() {
                problems.push(Problem::new(&format!("{path}.name"), "must not be empty"));
            } else if !names.insert(name.to_string()) {
                problems.push(Problem::new(
                    &format!("{path}.name"),
                    format!("`{name}` is used twice; arm and shadow names must be unique"),
                ));
            }
            if !config.arms.is_empty() || !config.shadows.is_empty() {
                problems.push(Problem::new(
                    &format!("{path}.config"),
                    "an arm's or shadow's config cannot have arms or shadows of its own",
                ));
            }
            // Ejection and a strict price limit act on the candidates themselves (a slot out
            // of every draw), which is the top level's to decide; an arm or shadow can only
            // draw differently over them.
            if config.ejection.enabled && !self.ejection.enabled {
                problems.push(Problem::new(
                    &format!("{path}.config.ejection.enabled"),
                    "ejection is learned with the top-level [ejection] settings, which are off; \
                     enable it at the top level (an arm or shadow may then switch it off for \
                     its own draws)",
                ));
            }
            if config.price.max.is_some() && !config.price.ignore_max_if_none_pass {
                problems.push(Problem::new(
                    &format!("{path}.config.price.ignore_max_if_none_pass"),
                    "a strict maximum price is the top level's alone (it takes candidates out \
                     of every draw); in an arm or shadow the maximum price is ignored when no \
                     candidate passes: set true here, or set the strict maximum at the top level",
                ));
            }
            if let Err(e) = config.validate() {
                for p in e.problems {
                    let sub = if p.path.is_empty() {
                        format!("{path}.config")
                    } else {
                        format!("{path}.config.{}", p.path)
                    };
                    problems.push(Problem::new(&sub, p.message));
                }
            }
        };
        for (i, arm) in self.arms.iter().enumerate() {
            let path = format!("arms[{i}]");
            if !(arm.share.is_finite() && arm.share >= 0.0) {
                problems.push(Problem::new(
                    &format!("{path}.share"),
                    format!("must be a finite number >= 0, got {}", arm.share),
                ));
            }
            check(path, &arm.name, &arm.config, problems);
        }
        let shares: f64 = self.arms.iter().map(|a| a.share).sum();
        if !self.arms.is_empty() && shares <= 0.0 && self.arms.iter().all(|a| a.share >= 0.0) {
            problems.push(Problem::new(
                "arms",
                "the shares sum to 0: no arm would get traffic",
            ));
        } else if shares.is_infinite() && self.arms.iter().all(|a| a.share.is_finite()) {
            problems.push(Problem::new(
                "arms",
                "the shares sum past what a float holds: scale them down (only their ratios \
                 matter)",
            ));
        }
        if self.arms.len() > MAX_ARMS {
            problems.push(Problem::new(
                "arms",
                format!(
                    "{} arms; at most {MAX_ARMS} (a request records its arm in a byte)",
                    self.arms.len()
                ),
            ));
        }
        if self.shadows.len() > MAX_SHADOWS {
            problems.push(Problem::new(
                "shadows",
                format!(
                    "{} shadows; at most {MAX_SHADOWS} (a decision records them in a 64-bit mask)",
                    self.shadows.len()
                ),
            ));
        }
        for (i, shadow) in self.shadows.iter().enumerate() {
            let path = format!("shadows[{i}]");
            if !(shadow.sample > 0.0 && shadow.sample <= 1.0) {
                problems.push(Problem::new(
                    &format!("{path}.sample"),
                    format!("must be in (0, 1], got {}", shadow.sample),
                ));
            }
            check(path, &shadow.name, &shadow.config, problems);
        }
    }

    /// Whether two configs draw alike (everything but arms, shadows and the preset name).
    pub fn draws_like(&self, other: &Config) -> bool {
        let strip = |c: &Config| Config {
            preset: None,
            arms: Vec::new(),
            shadows: Vec::new(),
            ..c.clone()
        };
        strip(self) == strip(other)
    }
}
