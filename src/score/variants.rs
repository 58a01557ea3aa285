//! A config's A/B arms and shadows: their validation, and whether two configs draw alike.

use super::config::Config;
use crate::error::Problem;

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
        if !self.arms.is_empty() && self.arms.iter().map(|a| a.share).sum::<f64>() <= 0.0 {
            problems.push(Problem::new(
                "arms",
                "the shares sum to 0: no arm would get traffic",
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
