//! The actix `Coordinator` actor, its messages, permits and the async handle.
