//! The list of score components, in one place.
//!
//! [`score_components!`] below is the only list: it defines [`Components`], [`Weights`] (one
//! weight per component, apart from `tags`, which the `tag_weights` map weighs), their
//! `entries()`, the index constants, [`COUNT`] (the length of the per-component arrays such as
//! the model's `unused` flags), [`Config::component_weights`] and, through it, the weighted sum
//! [`super::ScoreModel::score`]. Adding a component is one line here, plus its formula.
//!
//! The order is fixed: it is the order of `entries()`, of the mixture mode's channels, of the
//! weights in a written config, and of every table that lists components.

use serde::{Deserialize, Serialize};

use super::config::Config;

/// Defines everything that lists the components. Each line: the index constant, the field,
/// and how it is weighed (`weight`: a field of [`Weights`] of the same name, with its doc;
/// `tags`: the sum of `tag_weights`), after the component's own doc.
macro_rules! score_components {
    ($(
        $(#[doc = $doc:literal])*
        $index:ident $field:ident: $kind:ident $(($($wdoc:literal),*))?;
    )*) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[repr(usize)]
        enum Index {
            $($index,)*
            COUNT,
        }

        $(
            #[doc = concat!("Index of `", stringify!($field), "` in [`Components::entries`].")]
            #[allow(dead_code)]
            pub(crate) const $index: usize = Index::$index as usize;
        )*

        /// How many components there are.
        pub(crate) const COUNT: usize = Index::COUNT as usize;

        /// One candidate's score components, each in `[0, 1]`.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct Components {
            $(
                $(#[doc = $doc])*
                pub $field: f64,
            )*
        }

        impl Components {
            /// `(name, value)` pairs in a fixed order (metrics, tables).
            pub fn entries(&self) -> [(&'static str, f64); COUNT] {
                [$((stringify!($field), self.$field),)*]
            }

            /// The values in the order of [`Components::entries`].
            #[inline]
            pub(crate) fn values(&self) -> [f64; COUNT] {
                [$(self.$field,)*]
            }
        }

        impl Config {
            /// The weight of each component, aligned with [`Components::entries`] (the tag
            /// component weighs the sum of the tag weights).
            pub fn component_weights(&self) -> [f64; COUNT] {
                [$(score_components!(@weight self $kind $field),)*]
            }
        }

        score_components!(@weights [] [] $($kind $field $(($($wdoc),*))?;)*);
    };

    (@weight $self:ident weight $field:ident) => { $self.weights.$field };
    (@weight $self:ident tags $field:ident) => { $self.tag_weights.values().sum() };

    // Collects the weighed components into `Weights`; `tags` has no field of its own.
    (@weights [$($acc:tt)*] [$($name:ident)*] weight $field:ident ($($wdoc:literal),*); $($rest:tt)*) => {
        score_components!(
            @weights [$($acc)* $(#[doc = $wdoc])* pub $field: f64,] [$($name)* $field] $($rest)*
        );
    };
    (@weights [$($acc:tt)*] [$($name:ident)*] tags $field:ident; $($rest:tt)*) => {
        score_components!(@weights [$($acc)*] [$($name)*] $($rest)*);
    };
    (@weights [$($acc:tt)*] [$($name:ident)*]) => {
        /// Weights of the scoring components. A weight of 0 switches a component off.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct Weights {
            $($acc)*
        }

        impl Weights {
            /// All zero.
            pub const ZERO: Weights = Weights {
                $($name: 0.0,)*
            };

            /// `(name, value)` for each weighed component, in a fixed order.
            pub fn entries(&self) -> [(&'static str, f64); [$(stringify!($name)),*].len()] {
                [$((stringify!($name), self.$name),)*]
            }
        }
    };
}

score_components! {
    /// Success EMA.
    SUCCESS success: weight("Success EMA.");
    /// Connect time score.
    CONNECT connect: weight("Connect time against the all-candidate average.");
    /// Time-to-first-byte score.
    TTFB ttfb: weight("Time to first byte against the all-candidate average.");
    /// Bandwidth score.
    BANDWIDTH bandwidth: weight("Bandwidth against the all-candidate average (higher is better).");
    /// 1 - overload error rate.
    OVERLOAD overload: weight("1 - overload error rate over the bucketed window.");
    /// Free capacity.
    LOAD load: weight("Free capacity: 1 - in_flight / limit.");
    /// Stake share.
    STAKE stake: weight("Stake share.");
    /// Price score.
    PRICE price: weight("exp(-price / price.exp_factor).");
    /// Tag score.
    TAGS tags: tags;
    /// Exploration (always 1).
    UNIFORM uniform: weight("Uniform exploration.");
    /// Expected time to a first byte, failed attempts included, against the all-candidate
    /// average: `exp(-(attempt_ms / success) / overall)`.
    TIME_TO_SUCCESS time_to_success: weight(
        "Expected time to a first byte per success, failed attempts included, against the",
        "all-candidate average (`exp(-(attempt_ms / success) / overall)`)."
    );
    /// Expected completion from server feedback: `exp(-r)`, `r` the reported queue plus this
    /// coordinator's attempts in flight plus one, times the reported service time, in average
    /// service times; `exp(-1)` for a candidate that never reported.
    FEEDBACK feedback: weight(
        "Expected completion from what the server reports (`exp(-r)`, `r` in average service",
        "times; `exp(-1)` without reports). Its main use is the factor `feedback.exponent`."
    );
}
