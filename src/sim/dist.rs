//! Distributions of durations and rates in scenario files, and sampling them.

use std::fmt;

use rand::{Rng, RngExt};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::input::Num;

/// A probability distribution of a duration or rate, sampled by the truth model.
///
/// In TOML either a number (a constant) or a table `{ kind = "...", ... }`.
#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    /// Always this value.
    Const(f64),
    /// Uniform between `min` and `max`.
    Uniform {
        /// Lower bound.
        min: f64,
        /// Upper bound.
        max: f64,
    },
    /// Normal, truncated at 0.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        sd: f64,
    },
    /// Log-normal with the given mean and standard deviation (of the values themselves).
    LogNormal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        sd: f64,
    },
    /// Exponential with the given mean.
    Exp {
        /// Mean.
        mean: f64,
    },
}

impl Dist {
    /// The mean of the distribution (after truncation at 0 for the normal, approximately).
    pub fn mean(&self) -> f64 {
        match *self {
            Dist::Const(v) => v,
            Dist::Uniform { min, max } => (min + max) / 2.0,
            Dist::Normal { mean, .. } | Dist::LogNormal { mean, .. } | Dist::Exp { mean } => mean,
        }
    }

    /// The probability that a sample (as [`sample`] draws it: never negative) is at most `x`.
    pub(crate) fn cdf(&self, x: f64) -> f64 {
        if x.is_nan() || x < 0.0 {
            return 0.0;
        }
        let p = match *self {
            Dist::Const(v) => f64::from(u8::from(v <= x)),
            Dist::Uniform { min, max } => {
                if max > min {
                    (x - min) / (max - min)
                } else {
                    f64::from(u8::from(min <= x))
                }
            }
            // Negative draws are taken as 0, so the mass below 0 sits at 0.
            Dist::Normal { mean, sd } => {
                if sd > 0.0 {
                    std_normal_cdf((x - mean) / sd)
                } else {
                    f64::from(u8::from(mean <= x))
                }
            }
            Dist::LogNormal { mean, sd } => {
                let s2 = (1.0 + (sd / mean).powi(2)).ln();
                if x == 0.0 {
                    0.0
                } else if s2 > 0.0 && s2.is_finite() {
                    std_normal_cdf((x.ln() - (mean.ln() - s2 / 2.0)) / s2.sqrt())
                } else {
                    f64::from(u8::from(mean <= x))
                }
            }
            Dist::Exp { mean } => {
                if mean > 0.0 {
                    1.0 - (-x / mean).exp()
                } else {
                    1.0
                }
            }
        };
        if p.is_finite() {
            p.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

/// The standard normal distribution function, from the complementary error function
/// ([`erfc`]).
fn std_normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// The complementary error function, by the Chebyshev fit of Numerical Recipes (`erfcc`):
/// fractional error below 1.2e-7 everywhere, plenty for odds compared with one another.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DistTable {
    kind: DistKind,
    #[serde(default, deserialize_with = "opt_time_ms")]
    value: Option<f64>,
    #[serde(default, deserialize_with = "opt_time_ms")]
    mean: Option<f64>,
    #[serde(default, deserialize_with = "opt_time_ms")]
    sd: Option<f64>,
    #[serde(default, deserialize_with = "opt_time_ms")]
    min: Option<f64>,
    #[serde(default, deserialize_with = "opt_time_ms")]
    max: Option<f64>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum DistKind {
    Const,
    Uniform,
    Normal,
    LogNormal,
    Exp,
}

/// A parameter of a distribution table, checked as it is read: an error then points at the
/// parameter (`sd = -1`) rather than at the whole table.
fn opt_time_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    time_ms("the value", f64::deserialize(d)?).map(Some)
}

pub(crate) fn non_negative<E: de::Error>(what: &str, v: f64) -> Result<f64, E> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(E::custom(format!(
            "{what} must be a finite number >= 0, got {}",
            Num(v)
        )))
    }
}

/// The largest time a scenario may give, milliseconds (about 11.6 days): a run reaches every
/// time it is given, so a typo of a few orders of magnitude would otherwise run for hours.
pub(crate) const MAX_MS: f64 = 1e9;

/// [`MAX_MS`] in seconds.
pub(crate) const MAX_S: f64 = MAX_MS / 1000.0;

/// `v` if it is at most `max` (`MAX_MS` or `MAX_S`, in `unit`), the longest time a scenario
/// may give.
pub(crate) fn at_most<E: de::Error>(what: &str, v: f64, max: f64, unit: &str) -> Result<f64, E> {
    if v <= max {
        Ok(v)
    } else {
        Err(E::custom(format!(
            "{what} must be at most {max:e} {unit} (about 11.6 days), got {}",
            Num(v)
        )))
    }
}

/// A distribution's parameter: a number of milliseconds from 0 to [`MAX_MS`].
pub(crate) fn time_ms<E: de::Error>(what: &str, v: f64) -> Result<f64, E> {
    at_most(what, non_negative(what, v)?, MAX_MS, "ms")
}

impl DistTable {
    fn into_dist<E: de::Error>(self) -> Result<Dist, E> {
        let need = |name: &str, v: Option<f64>| -> Result<f64, E> {
            match v {
                Some(v) => time_ms(name, v),
                None => Err(E::custom(format!("this distribution needs `{name}`"))),
            }
        };
        let (kind, uses): (&str, &[&str]) = match self.kind {
            DistKind::Const => ("const", &["value"]),
            DistKind::Uniform => ("uniform", &["min", "max"]),
            DistKind::Normal => ("normal", &["mean", "sd"]),
            DistKind::LogNormal => ("lognormal", &["mean", "sd"]),
            DistKind::Exp => ("exp", &["mean"]),
        };
        let unused: Vec<&str> = [
            ("value", self.value),
            ("mean", self.mean),
            ("sd", self.sd),
            ("min", self.min),
            ("max", self.max),
        ]
        .into_iter()
        .filter(|(name, v)| v.is_some() && !uses.contains(name))
        .map(|(name, _)| name)
        .collect();
        if !unused.is_empty() {
            return Err(E::custom(format!(
                "`kind = \"{kind}\"` does not use `{}`: drop it, or pick the kind that \
                 takes it (`{kind}` uses {})",
                unused.join("`, `"),
                uses.iter()
                    .map(|u| format!("`{u}`"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            )));
        }
        Ok(match self.kind {
            DistKind::Const => Dist::Const(need("value", self.value)?),
            DistKind::Uniform => {
                let (min, max) = (need("min", self.min)?, need("max", self.max)?);
                if max < min {
                    return Err(E::custom(format!(
                        "max ({}) is below min ({})",
                        Num(max),
                        Num(min)
                    )));
                }
                Dist::Uniform { min, max }
            }
            DistKind::Normal => Dist::Normal {
                mean: need("mean", self.mean)?,
                sd: need("sd", self.sd)?,
            },
            DistKind::LogNormal => {
                let mean = need("mean", self.mean)?;
                if mean <= 0.0 {
                    return Err(E::custom("a lognormal needs mean > 0"));
                }
                Dist::LogNormal {
                    mean,
                    sd: need("sd", self.sd)?,
                }
            }
            DistKind::Exp => Dist::Exp {
                mean: need("mean", self.mean)?,
            },
        })
    }
}

impl<'de> Deserialize<'de> for Dist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Dist;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number (constant) or a table { kind = \"const\" | \"uniform\" | \"normal\" | \"lognormal\" | \"exp\", ... }")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dist, E> {
                Ok(Dist::Const(time_ms("the value", v)?))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dist, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dist, E> {
                self.visit_f64(v as f64)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Dist, A::Error> {
                let t = DistTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                t.into_dist()
            }
        }
        d.deserialize_any(V)
    }
}

/// A sample from a distribution (never negative).
pub(crate) fn sample<R: Rng + ?Sized>(d: &Dist, rng: &mut R) -> f64 {
    let v = match *d {
        Dist::Const(v) => v,
        Dist::Uniform { min, max } => {
            if max > min {
                rng.random_range(min..max)
            } else {
                min
            }
        }
        Dist::Normal { mean, sd } => mean + sd * std_normal(rng),
        Dist::LogNormal { mean, sd } => {
            // Parameters of the underlying normal from the mean and sd of the values.
            let s2 = (1.0 + (sd / mean).powi(2)).ln();
            let mu = mean.ln() - s2 / 2.0;
            (mu + s2.sqrt() * std_normal(rng)).exp()
        }
        Dist::Exp { mean } => -mean * (1.0 - rng.random::<f64>()).ln(),
    };
    if v.is_finite() {
        v.max(0.0)
    } else {
        0.0
    }
}

/// Box-Muller; one of the pair is enough here.
fn std_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    use super::*;

    /// The distribution function agrees with the share of samples at or below a point.
    #[test]
    fn the_cdf_matches_the_samples() {
        let dists = [
            Dist::Const(5.0),
            Dist::Uniform { min: 2.0, max: 8.0 },
            Dist::Normal { mean: 3.0, sd: 4.0 },
            Dist::LogNormal {
                mean: 50.0,
                sd: 40.0,
            },
            Dist::Exp { mean: 10.0 },
        ];
        let mut rng = SmallRng::seed_from_u64(7);
        for d in &dists {
            let xs: Vec<f64> = (0..100_000).map(|_| sample(d, &mut rng)).collect();
            for x in [0.0, 1.0, 4.0, 5.0, 9.0, 30.0, 120.0] {
                let share = xs.iter().filter(|&&v| v <= x).count() as f64 / xs.len() as f64;
                let p = d.cdf(x);
                assert!(
                    (share - p).abs() < 0.01,
                    "{d:?} at {x}: cdf {p}, samples {share}"
                );
            }
        }
    }

    #[test]
    fn the_normal_cdf_is_accurate() {
        // Tabulated values of the standard normal distribution function.
        for (z, p) in [
            (0.0, 0.5),
            (1.0, 0.841_344_75),
            (-1.96, 0.024_997_9),
            (3.0, 0.998_650_1),
        ] {
            assert!((std_normal_cdf(z) - p).abs() < 1e-6, "{z}");
        }
        assert_eq!(Dist::Exp { mean: 1.0 }.cdf(-1.0), 0.0);
        assert_eq!(Dist::Exp { mean: 1.0 }.cdf(f64::NAN), 0.0);
    }
}
