//! The discrete-event simulator: scenarios, truth models, baseline policies, reports.
