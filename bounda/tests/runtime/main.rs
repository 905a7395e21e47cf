//! The runtime's suite, in one binary: every app here lists what it runs (`only_listed`), so the
//! handlers of all these files share one registry without meeting. The tests whose apps take
//! in every registered handler (`registry`, `registry_clash`, `read_models`, `running`), the
//! tests of what is traced (`observability`: a thread's own `tracing` subscriber misses spans
//! when another thread's test made the callsite's interest "never"), and the simulation keep
//! binaries of their own.

#[path = "../support/mod.rs"]
mod support;

// Not in `support/mod.rs`: its builds register two processes of one name, which an app built
// without `only_listed` refuses; the other binaries build apps that way.
#[path = "../support/clinic.rs"]
mod clinic;

#[path = "../support/listed.rs"]
mod listed;

mod calendar;
mod changing_events;
mod cli;
mod commands;
mod dead_letters;
mod engine;
mod explain;
mod faults;
mod holds;
mod ingress;
mod instances;
mod limits;
mod metrics;
mod page;
mod pauses;
mod policies;
mod preflight;
mod preview;
mod process_dsl;
mod process_routing;
mod processes;
mod properties;
mod relay;
mod scheduler_from_state;
mod state_changes;
mod store_faults;
mod unreadable_rows;
