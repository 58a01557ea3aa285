//! A coordinator's name on every series it records: a recorder that adds the label and hands
//! everything on to the recorder in force, so several coordinators in one process keep their
//! series apart.

use metrics::{
    Counter, Gauge, Histogram, Key, KeyName, Label, Metadata, Recorder, SharedString, Unit,
};

/// The label every series of a named coordinator carries.
pub const COORDINATOR_LABEL: &str = "coordinator";

/// Adds `coordinator="<name>"` to every key and records through `inner`.
struct Named<'a> {
    inner: &'a dyn Recorder,
    label: &'a Label,
}

impl Named<'_> {
    fn key(&self, key: &Key) -> Key {
        key.with_extra_labels(vec![self.label.clone()])
    }
}

impl Recorder for Named<'_> {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_counter(key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_gauge(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_histogram(key, unit, description);
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        self.inner.register_counter(&self.key(key), metadata)
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        self.inner.register_gauge(&self.key(key), metadata)
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        self.inner.register_histogram(&self.key(key), metadata)
    }
}

/// Runs `f` with every series it records labelled `coordinator = label`'s value (`None`: as
/// they are), through whichever recorder is in force at the call.
pub(crate) fn recording_as<T>(label: Option<&Label>, f: impl FnOnce() -> T) -> T {
    match label {
        None => f(),
        Some(label) => {
            metrics::with_recorder(|inner| metrics::with_local_recorder(&Named { inner, label }, f))
        }
    }
}

/// The `coordinator` label for `name`, sanitized as a candidate label is.
pub(crate) fn coordinator_label(name: &str) -> Label {
    Label::new(COORDINATOR_LABEL, super::sanitize_label(name))
}
