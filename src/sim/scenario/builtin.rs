//! The built-in scenarios: the files of `scenarios/`, embedded.

/// The built-in scenarios, by name, embedded so the binary works from any directory.
pub const BUILTIN: [(&str, &str); 19] = [
    (
        "mongo-overload",
        include_str!("../../../scenarios/mongo-overload.toml"),
    ),
    (
        "capacity-overload",
        include_str!("../../../scenarios/capacity-overload.toml"),
    ),
    (
        "fast-shedders",
        include_str!("../../../scenarios/fast-shedders.toml"),
    ),
    ("recovery", include_str!("../../../scenarios/recovery.toml")),
    (
        "lassie-retrieval",
        include_str!("../../../scenarios/lassie-retrieval.toml"),
    ),
    (
        "livepeer-selection",
        include_str!("../../../scenarios/livepeer-selection.toml"),
    ),
    (
        "pairwise-deadlock",
        include_str!("../../../scenarios/pairwise-deadlock.toml"),
    ),
    (
        "large-fleet",
        include_str!("../../../scenarios/large-fleet.toml"),
    ),
    (
        "linkerd-spike",
        include_str!("../../../scenarios/linkerd-spike.toml"),
    ),
    ("c3-clop", include_str!("../../../scenarios/c3-clop.toml")),
    ("herd", include_str!("../../../scenarios/herd.toml")),
    ("knee", include_str!("../../../scenarios/knee.toml")),
    (
        "slow-link",
        include_str!("../../../scenarios/slow-link.toml"),
    ),
    (
        "bulk-transfer",
        include_str!("../../../scenarios/bulk-transfer.toml"),
    ),
    (
        "hanging-candidate",
        include_str!("../../../scenarios/hanging-candidate.toml"),
    ),
    (
        "hidden-capacity",
        include_str!("../../../scenarios/hidden-capacity.toml"),
    ),
    (
        "capacity-shift",
        include_str!("../../../scenarios/capacity-shift.toml"),
    ),
    (
        "fleet-lassie",
        include_str!("../../../scenarios/fleet-lassie.toml"),
    ),
    (
        "fleet-degrade",
        include_str!("../../../scenarios/fleet-degrade.toml"),
    ),
];
