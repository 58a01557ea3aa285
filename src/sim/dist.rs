//! Distributions of durations and rates in scenario files, and sampling them.

use std::fmt;

use rand::{Rng, RngExt};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DistTable {
    kind: DistKind,
    #[serde(default)]
    value: Option<f64>,
    #[serde(default)]
    mean: Option<f64>,
    #[serde(default)]
    sd: Option<f64>,
    #[serde(default)]
    min: Option<f64>,
    #[serde(default)]
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

pub(crate) fn non_negative<E: de::Error>(what: &str, v: f64) -> Result<f64, E> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(E::custom(format!(
            "{what} must be a finite number >= 0, got {v}"
        )))
    }
}

impl DistTable {
    fn into_dist<E: de::Error>(self) -> Result<Dist, E> {
        let need = |name: &str, v: Option<f64>| -> Result<f64, E> {
            match v {
                Some(v) => non_negative(name, v),
                None => Err(E::custom(format!("this distribution needs `{name}`"))),
            }
        };
        Ok(match self.kind {
            DistKind::Const => Dist::Const(need("value", self.value)?),
            DistKind::Uniform => {
                let (min, max) = (need("min", self.min)?, need("max", self.max)?);
                if max < min {
                    return Err(E::custom(format!("max ({max}) is below min ({min})")));
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
                Ok(Dist::Const(non_negative("the value", v)?))
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
