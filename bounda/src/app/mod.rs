//! The app: a store, a clock and ids, and the commands dispatched on them.

mod catch_up;
mod cause;
mod command_run;
mod decide;
mod dispatch;
mod dispatcher;
mod engine;
mod failing;
mod failure;
mod fold;
mod holds;
mod ingest;
mod ingress_letters;
mod instances;
mod lag;
mod letter_requests;
pub(crate) mod letters;
mod letters_bulk;
pub mod metrics;
mod missing;
mod outcome;
mod pauses;
mod policy;
mod policy_run;
pub(crate) mod ports;
mod preflight;
pub(crate) mod processes;
pub(crate) mod reaction;
mod read_models;
mod rebuild;
pub(crate) mod registry;
mod relay_lag;
mod relay_run;
pub(crate) mod relays;
mod runner;
mod schedule;
mod shapes;
mod sources;
mod start;
mod subscriber;
mod telemetry;
mod worker;

use std::sync::Arc;

use crate::preview::calls::PortCalls;

pub use crate::answer::{Answer, Decided, Scheduled};
pub use catch_up::CaughtUp;
pub use cause::Cause;
pub use dispatch::{DispatchOptions, Dispatched};
pub use fold::{Loaded, fold};
pub use instances::InstancePage;
pub use lag::{Ahead, Failing, HeldEvents, Lag, Limited, SubscriberLag};
pub use letters::{DeadLetters, Retried};
pub use letters_bulk::{BulkOutcome, BulkReport, Pace};
pub use outcome::{DispatchError, RejectionRecord};
pub use policy::Policy;
pub use ports::PortDecl;
pub use preflight::{EventProblem, OrphanEntries, Preflight, UnreadableEntry};
pub use processes::{
    Drift, LostMoment, PROCESSES, PendingDeadline, ProcessInstance, ProcessStatus, Rearm,
    RezonedDeadline, StateProblem, UnreadableState,
};
pub use reaction::Reaction;
pub use rebuild::{REBUILD_SLICE, RebuildProgress};
pub use runner::shutdown_signal;

use std::collections::HashMap;

use policy::{CommandEntry, CommandRunner, PolicyEntry, PolicyRunner};
use ports::Ports;
use processes::{ProcessEntry, ProcessRunner};

use crate::aggregate::{Aggregate, Command};
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::ids::{IdGenerator, UuidV7};
use crate::store::{LimitKind, Store};
use crate::{Error, RecordedEvent};

/// The subscriber all policies share.
pub const POLICIES: &str = "policies";
pub use relay_lag::{PublishedTo, RelayLag};
pub use relays::RELAYS;

/// A running bounda application. Cheap to clone: clones share everything.
#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    config: Config,
    policies: Vec<Arc<dyn PolicyRunner>>,
    commands: HashMap<&'static str, Arc<dyn CommandRunner>>,
    processes: Vec<Arc<dyn ProcessRunner>>,
    read_models: Vec<Arc<dyn read_models::ReadModelRunner>>,
    relays: Vec<Arc<crate::relay::Relay>>,
    /// The commands other services may send, by the name they arrive under.
    accepted: HashMap<String, &'static str>,
    /// Where a preview records what its relays would publish, instead of publishing.
    relays_recorded: Option<PortCalls>,
    /// Where commands from other services arrive from, run beside the workers.
    sources: Vec<Arc<dyn Source>>,
    /// The read models whose table cannot take this build's declaration, with why: the app
    /// does not run until they are rebuilt.
    refused_read_models: std::sync::Mutex<Vec<(&'static str, String)>>,
    /// The app's ports, by type.
    ports: Ports,
    /// Set when the app is shutting down: passes stop between attempts.
    stopping: std::sync::atomic::AtomicBool,
    /// Due deadlines held back for the process runner, by entry: the moment waited for (epoch
    /// ms) and the rounds waited so far.
    waiting: std::sync::Mutex<HashMap<String, (i64, u32)>>,
    /// Subscribers whose pass failed, by name: failures in a row, when to try again, and why.
    paused: std::sync::Mutex<HashMap<String, runner::Paused>>,
    /// Passes of `App::run` that moved something, to tell a failing app that still gets
    /// somewhere from one that does not.
    moves: std::sync::atomic::AtomicU64,
    /// The name this runner puts before its claims' ids.
    runner: Option<String>,
    /// The shapes of the event types of the app's aggregates, which reads bring events up to.
    shapes: shapes::Shapes,
    /// Whether this app has made its checks before its first pass (`start.rs`).
    started: std::sync::atomic::AtomicBool,
    /// The entries that disagreed with their state at the last survey, and when it was made:
    /// `lag` reuses a recent count rather than survey every instance on each read.
    drifted: std::sync::Mutex<Option<(std::time::Instant, u64)>>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Builds an [`App`].
pub struct AppBuilder {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    config: Config,
    policies: Vec<Arc<dyn PolicyRunner>>,
    commands: HashMap<&'static str, Arc<dyn CommandRunner>>,
    processes: Vec<Arc<dyn ProcessRunner>>,
    read_models: Vec<Arc<dyn read_models::ReadModelRunner>>,
    relays: Vec<Arc<crate::relay::Relay>>,
    accepted: HashMap<String, &'static str>,
    relays_recorded: Option<PortCalls>,
    sources: Vec<Arc<dyn Source>>,
    ports: Ports,
    /// What `build` will refuse, found while registering.
    refused: Vec<String>,
    /// Whether only the processes and policies given by name run, not every one the binary
    /// registers.
    only_listed: bool,
    /// Whether the app only reads its store: its build writes nothing.
    reading_only: bool,
    /// The processes, policies and commands added so far, so each is added once.
    added: std::collections::HashSet<std::any::TypeId>,
    /// The policies' and processes' names, with the Rust type of each: names are inbox keys.
    reactions: HashMap<&'static str, &'static str>,
    /// The name this runner puts before its claims' ids.
    runner: Option<String>,
    /// The shapes of the event types of the aggregates added so far.
    shapes: shapes::Shapes,
}

impl std::fmt::Debug for AppBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl AppBuilder {
    /// The store the app will run on.
    pub fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// Reads time from `clock` instead of the system clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> AppBuilder {
        self.clock = clock;
        self
    }

    /// Takes new ids from `ids` instead of UUID v7.
    pub fn ids(mut self, ids: Arc<dyn IdGenerator>) -> AppBuilder {
        self.ids = ids;
        self
    }

    /// Names this runner (a machine, a process) in the claims it takes: each claim's id is
    /// `<name>/<id>`, so whoever reads the store can tell which runner holds a run. A name is
    /// letters, digits, `-`, `_`, `.` or `:`; `build` refuses another.
    pub fn runner_name(mut self, name: impl Into<String>) -> AppBuilder {
        let name = name.into();
        let plain = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
        if !plain {
            self.refused.push(format!(
                "the runner name `{name}` is not letters, digits, `-`, `_`, `.` or `:`: choose one like `worker-1`"
            ));
        }
        self.runner = Some(name);
        self
    }

    /// Uses `config` instead of the defaults (or of a configuration given before).
    pub fn config(mut self, config: Config) -> AppBuilder {
        self.config = config;
        self
    }

    /// Changes the configuration given so far (the defaults, or one a service read from its
    /// file and flags): for a setting the app's own code owns, such as a process's lifetime.
    pub fn configure(mut self, change: impl FnOnce(&mut Config)) -> AppBuilder {
        change(&mut self.config);
        self
    }

    /// Runs only the processes, policies and commands given with [`process`](Self::process),
    /// [`policy`](Self::policy) and [`command`](Self::command), instead of every one in the
    /// binary: for a test of one reaction, or a binary that splits its reactions between apps.
    /// List the commands its reactions schedule too; a scheduled command the app does not have
    /// is a dead letter.
    pub fn only_listed(mut self) -> AppBuilder {
        self.only_listed = true;
        self
    }

    /// An app that only reads its store: its build starts no checkpoint and makes no read
    /// model's table, so it builds on a store opened read-only (an operator's `lag`, `check`,
    /// `explain` on a backup). Whatever it would write fails as the store refuses it.
    pub fn reading_only(mut self) -> AppBuilder {
        self.reading_only = true;
        self
    }

    /// Whether `T` was added before; marks it added.
    fn seen<T: 'static>(&mut self) -> bool {
        !self.added.insert(std::any::TypeId::of::<T>())
    }

    /// Takes reaction name `name` for type `T`; a name another type has is refused, naming
    /// both.
    fn name_reaction<T: 'static>(&mut self, name: &'static str) {
        let type_name = std::any::type_name::<T>();
        if let Some(other) = self.reactions.insert(name, type_name) {
            self.refused.push(format!(
                "two reactions are named `{name}`: `{other}` and `{type_name}`; policy, process and relay names are inbox keys and must differ: rename one, or build with `.only_listed()` and list the ones this app runs"
            ));
        }
    }

    /// Adds policy `P`. Every `#[policy]` of the binary is added when the app is built, unless
    /// [`only_listed`](Self::only_listed) says otherwise; adding one twice adds it once.
    pub fn policy<P: Policy>(mut self) -> AppBuilder {
        if self.seen::<P>() {
            return self;
        }
        self.name_reaction::<P>(P::NAME);
        self.shapes
            .add::<<P::Event as crate::aggregate::Event>::Aggregate>();
        match PolicyEntry::<P>::new() {
            Ok(entry) => self.policies.push(Arc::new(entry)),
            Err(message) => self.refused.push(message),
        }
        self
    }

    /// Adds `relay`, which publishes the events it selects to its sink from the first time it
    /// runs on the store: see [`relay`](crate::relay). Its name is refused when a policy or
    /// process has it.
    pub fn relay(mut self, relay: crate::relay::Relay) -> AppBuilder {
        self.name_reaction::<crate::relay::Relay>(relay.name());
        self.relays.push(Arc::new(relay));
        self
    }

    /// Takes the commands `ingress` lists from other services
    /// ([`App::ingest`](crate::App::ingest)), each listed in the app as
    /// [`command`](Self::command) lists it. A name given twice is refused when the app is built.
    pub fn ingress(mut self, ingress: Ingress) -> AppBuilder {
        for accepted in ingress.accepted {
            self = (accepted.register)(self);
            match self.accepted.get(&accepted.name) {
                Some(other) if *other != accepted.command => self.refused.push(format!(
                    "the ingress takes two commands under the name `{}`: `{other}` and `{}`; give \
                     one another name",
                    accepted.name, accepted.command
                )),
                _ => {
                    self.accepted.insert(accepted.name, accepted.command);
                }
            }
        }
        self
    }

    /// Takes commands from `source` (a broker's consumer) while the app runs
    /// ([`App::run`](crate::App::run) runs it beside the workers, and stops it with them), each
    /// decided once by the ingress. `lag` names it with what waits there. Its name is unique
    /// among the app's sources.
    pub fn consume(mut self, source: impl Source) -> AppBuilder {
        let name = source.name();
        if self.sources.iter().any(|other| other.name() == name) {
            self.refused.push(format!(
                "two sources of commands are named `{name}`: give each consumer its own name"
            ));
        }
        self.sources.push(Arc::new(source));
        self
    }

    /// Records what the relays would publish in the app's [`PortCalls`](crate::preview::PortCalls)
    /// (added as a port if the app has none) instead of publishing it: a preview of a deploy
    /// tells no broker.
    pub(crate) fn recording_relays(mut self) -> AppBuilder {
        let calls = match self.ports.get::<PortCalls>() {
            Ok(calls) => calls.clone(),
            Err(_) => {
                let calls = PortCalls::default();
                self.ports.insert(calls.clone());
                calls
            }
        };
        self.relays_recorded = Some(calls);
        self
    }

    /// Gives handlers `port`, found by its type with `cx.port::<T>()`: a notifier, a payment
    /// gateway, a clock of the outside world. Register a trait object as `Arc<dyn Trait>`.
    pub fn port<T: Send + Sync + 'static>(mut self, port: T) -> AppBuilder {
        self.ports.insert(port);
        self
    }

    /// Adds process `P`. Every `#[process]` of the binary is added when the app is built,
    /// unless [`only_listed`](Self::only_listed) says otherwise; adding one twice adds it once.
    pub fn process<P: crate::process::Process>(mut self) -> AppBuilder {
        if !self.seen::<P>() {
            self.name_reaction::<P>(<P as crate::process::ProcessState>::NAME);
            self.shapes
                .add::<<P as crate::process::ProcessState>::Aggregate>();
            // An event of another aggregate the process takes is brought up too, whether or
            // not the app has a command of that aggregate.
            for shapes in <P as crate::process::ProcessState>::DECLARED_SHAPES
                .iter()
                .chain(<P as crate::process::Process>::HANDLED_SHAPES)
            {
                self.shapes.add_shapes(shapes);
            }
            self.processes.push(Arc::new(ProcessEntry::<P>::new()));
        }
        self
    }

    /// Adds read model `R`. Every `#[read_model]` of the binary is added when the app is built,
    /// unless [`only_listed`](Self::only_listed) says otherwise; adding one twice adds it once.
    /// Two read models with one name are refused.
    pub fn read_model<R: crate::read_model::Projections>(mut self) -> AppBuilder {
        if self.seen::<R>() {
            return self;
        }
        if let Some(other) = self
            .read_models
            .iter()
            .find(|model| model.name() == R::NAME)
        {
            self.refused.push(format!(
                "two read models are named `{}`: `{}` and `{}`; a read model's name is its table's and its checkpoint's: rename one",
                R::NAME,
                other.type_name(),
                std::any::type_name::<R>()
            ));
            return self;
        }
        for shapes in R::SHAPES {
            self.shapes.add_shapes(shapes);
        }
        self.read_models
            .push(Arc::new(read_models::ReadModelEntry::<R>::new()));
        self
    }

    /// Lets reactions send `C` with a delay, and the scheduled worker run it. Every `#[command]`
    /// of the binary is added when the app is built, unless [`only_listed`](Self::only_listed);
    /// a generic command is listed here for each of its types. Two command types with one name
    /// are refused, since a scheduled command is found by its name.
    pub fn command<C: Command>(mut self) -> AppBuilder {
        if self.seen::<C>() {
            return self;
        }
        let type_name = std::any::type_name::<C>();
        self.shapes.add::<C::Aggregate>();
        match self.commands.entry(C::NAME) {
            std::collections::hash_map::Entry::Occupied(entry) => {
                let other = entry.get().type_name();
                self.refused.push(format!(
                    "two commands are named `{}`: `{other}` and `{type_name}`; a scheduled command is found by its name: give one another `NAME`, or build with `.only_listed()` and list the ones this app runs",
                    C::NAME
                ));
            }
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(Arc::new(CommandEntry::<C>::new()));
            }
        }
        self
    }

    /// The app, with every `#[process]`, `#[policy]` and `#[command]` of the binary unless
    /// [`only_listed`](Self::only_listed). A crate the binary never refers to is not linked, so
    /// its registrations are not there: refer to it from the binary, if only with
    /// `use my_crate as _;`.
    ///
    /// Refuses two policies or processes with one name, two commands with one name (naming
    /// both types), a process or policy whose declared ports (`ports = [..]`) it was not given,
    /// and an invalid configuration. The first time policies run on a store, their
    /// checkpoint starts at the head of the log: a policy reacts only to events stored after it
    /// starts; an existing checkpoint is kept.
    pub async fn build(mut self) -> Result<App, Error> {
        for registration in registry::all() {
            if !self.only_listed {
                self = (registration.add)(self);
            }
        }
        let mut refused = self.refused;
        if let Err(error) = self.config.validate() {
            refused.push(error.to_string());
        }
        for (key, _) in self.config.limits.all() {
            let known = match key.kind {
                LimitKind::Process => self.processes.iter().any(|p| p.name() == key.name),
                LimitKind::Policy => self.policies.iter().any(|p| p.name() == key.name),
                LimitKind::Command => self.commands.contains_key(key.name.as_str()),
                LimitKind::Relay => self.relays.iter().any(|r| r.name() == key.name),
                LimitKind::Ingress => self.sources.iter().any(|s| s.name() == key.name),
            };
            if !known {
                refused.push(format!(
                    "the configuration's `limits` name {key}, which this app does not run: \
                     correct the name, or remove the limit"
                ));
            }
        }
        // Limits are counted by the store, for every runner on it: one that counts none cannot
        // run an app that has them.
        if !self.config.limits.is_empty()
            && let Err(lacking) = self.store.capabilities().limits()
        {
            refused.push(format!(
                "the configuration has `limits`, and {lacking}: remove the limits, or run the \
                 app on a store that counts them"
            ));
        }
        // Arrived commands are answered from the store's record of their keys.
        if !self.sources.is_empty()
            && let Err(lacking) = self.store.capabilities().ingress()
        {
            let names: Vec<String> = self.sources.iter().map(|source| source.name()).collect();
            refused.push(format!(
                "the app takes commands from other services ({}), and {lacking}: run it on a \
                 store that keeps them",
                names.join(", ")
            ));
        }
        // The ports each process and policy declares it reads are the app's (a missing one
        // would otherwise fail its handlers one instance at a time).
        let declared = self.processes.iter().map(|process| process.declared());
        let declared = declared.chain(self.policies.iter().map(|policy| policy.declared()));
        for declared in declared {
            let missing = declared.missing(&self.ports);
            if !missing.is_empty() {
                let names: Vec<String> = missing.iter().map(|name| format!("`{name}`")).collect();
                refused.push(format!(
                    "{} `{}` reads {} {}, which the app was not given: give {} with `.port(..)` \
                     when building the app",
                    declared.kind,
                    declared.name,
                    if names.len() == 1 { "port" } else { "ports" },
                    names.join(", "),
                    if names.len() == 1 { "it" } else { "them" },
                ));
            }
        }
        if !refused.is_empty() {
            return Err(Error::Configuration {
                message: refused.join("; "),
            });
        }
        for (subscriber, present) in [
            (POLICIES, !self.policies.is_empty()),
            (processes::PROCESSES, !self.processes.is_empty()),
            (relays::RELAYS, !self.relays.is_empty()),
        ] {
            if present && !self.reading_only && self.store.checkpoint(subscriber).await?.is_none() {
                let head = self.store.head().await?;
                self.store.move_checkpoint(subscriber, None, head).await?;
            }
        }
        let refused_read_models = match self.reading_only {
            true => Vec::new(),
            false => App::ensure_read_models(self.store.as_ref(), &self.read_models).await?,
        };
        Ok(App {
            inner: Arc::new(Inner {
                store: self.store,
                clock: self.clock,
                ids: self.ids,
                config: self.config,
                policies: self.policies,
                commands: self.commands,
                processes: self.processes,
                read_models: self.read_models,
                relays: self.relays,
                accepted: self.accepted,
                relays_recorded: self.relays_recorded,
                sources: self.sources,
                refused_read_models: std::sync::Mutex::new(refused_read_models),
                ports: self.ports,
                stopping: std::sync::atomic::AtomicBool::new(false),
                waiting: std::sync::Mutex::new(HashMap::new()),
                paused: std::sync::Mutex::new(HashMap::new()),
                moves: std::sync::atomic::AtomicU64::new(0),
                runner: self.runner,
                shapes: self.shapes,
                started: std::sync::atomic::AtomicBool::new(false),
                drifted: std::sync::Mutex::new(None),
            }),
        })
    }
}

impl App {
    /// An app on `store`, with the system clock, UUID v7 ids and the default configuration.
    pub fn builder(store: impl Store) -> AppBuilder {
        App::builder_shared(Arc::new(store))
    }

    /// An app on a store other apps may share (a web process and a worker on one file).
    pub fn builder_shared(store: Arc<dyn Store>) -> AppBuilder {
        AppBuilder {
            store,
            clock: Arc::new(SystemClock),
            ids: Arc::new(UuidV7),
            config: Config::default(),
            policies: Vec::new(),
            commands: HashMap::new(),
            processes: Vec::new(),
            read_models: Vec::new(),
            relays: Vec::new(),
            accepted: HashMap::new(),
            relays_recorded: None,
            sources: Vec::new(),
            ports: Ports::default(),
            refused: Vec::new(),
            only_listed: false,
            reading_only: false,
            added: std::collections::HashSet::new(),
            reactions: HashMap::new(),
            runner: None,
            shapes: shapes::Shapes::default(),
        }
    }

    /// How long a claim lasts: twice the longest handler time limit configured.
    pub(crate) fn lease(&self) -> crate::Duration {
        let config = self.config();
        let longest = config
            .overrides
            .keys()
            .map(|aggregate| config.for_aggregate(aggregate))
            .flat_map(|s| {
                [
                    s.commands_timeout,
                    s.policies_timeout,
                    s.processes_handler_timeout,
                ]
            })
            .chain([
                config.commands.timeout,
                config.policies.timeout,
                config.processes.handler_timeout,
            ])
            .max()
            .unwrap_or(crate::Duration::ZERO);
        longest.checked_mul(2).unwrap_or(crate::Duration::MAX)
    }

    /// The port of type `T`; a port the app was not given is a configuration error, never
    /// retried.
    pub fn port<T: Send + Sync + 'static>(&self) -> Result<&T, Error> {
        self.inner.ports.get::<T>()
    }

    /// The app's ports.
    pub(crate) fn ports(&self) -> &ports::Ports {
        &self.inner.ports
    }

    /// The deadlines held back for the process runner.
    pub(crate) fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, (i64, u32)>> {
        self.inner
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The registered processes.
    pub(crate) fn processes(&self) -> impl Iterator<Item = &Arc<dyn ProcessRunner>> {
        self.inner.processes.iter()
    }

    /// The registered policies.
    pub(crate) fn policies(&self) -> impl Iterator<Item = &Arc<dyn PolicyRunner>> {
        self.inner.policies.iter()
    }

    /// The runner of command type `name`, if registered.
    pub(crate) fn command_runner(&self, name: &str) -> Option<&Arc<dyn CommandRunner>> {
        self.inner.commands.get(name)
    }

    /// Whether the scheduled worker can run command type `name`.
    pub(crate) fn knows_command(&self, name: &str) -> bool {
        self.inner.commands.contains_key(name)
    }

    /// The store.
    pub fn store(&self) -> &dyn Store {
        &*self.inner.store
    }

    /// The store's limits: an app whose configuration has limits runs only on a store that
    /// counts them (its building refuses another), so this refuses only an app without.
    pub(crate) fn limit_store(
        &self,
    ) -> Result<&dyn crate::store::LimitStore, crate::store::StoreError> {
        self.store().capabilities().limits()
    }

    /// Commits `writes`; once they are on the file, counts the letters they filed.
    pub(crate) async fn commit(
        &self,
        writes: &crate::store::WriteSet,
    ) -> Result<crate::store::Committed, crate::store::CommitError> {
        self.commit_all(&mut [writes.clone()])
            .await
            .pop()
            .unwrap_or_else(|| Ok(crate::store::Committed::default()))
    }

    /// The store, to share with another app on the same database.
    pub fn store_arc(&self) -> Arc<dyn Store> {
        Arc::clone(&self.inner.store)
    }

    /// The clock.
    pub fn clock(&self) -> &dyn Clock {
        &*self.inner.clock
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// A new id.
    pub fn next_id(&self) -> String {
        self.inner.ids.next_id()
    }

    /// The id of a new claim: a new id, after the runner's name if it has one.
    pub(crate) fn claim_id(&self) -> String {
        match &self.inner.runner {
            Some(runner) => format!("{runner}/{}", self.next_id()),
            None => self.next_id(),
        }
    }

    /// The events of aggregate instance `id`, oldest first, each brought up to today's name
    /// and shape where its upcasts read it (the store keeps what was written).
    pub async fn events_of<A: Aggregate>(&self, id: &str) -> Result<Vec<RecordedEvent>, Error> {
        // Read ahead with the run's wave, when it was and no snapshot cut the stream short.
        let mut events = match engine::read_ahead::take(A::NAME, id) {
            Some(tail) if tail.snapshot.is_none() => tail.events,
            _ => self.store().read_stream(A::NAME, id).await?,
        };
        for event in &mut events {
            self.inner.shapes.bring_up(event);
        }
        Ok(events)
    }

    /// Aggregate instance `id`, folded from its events.
    pub async fn load<A: Aggregate>(&self, id: &str) -> Result<Loaded<A>, Error> {
        fold(&self.events_of::<A>(id).await?)
    }
}

// The app's sources of commands and the list of what they may send: defined here, with the
// app that holds them and that a source is handed, and re-exported from `ingress`.

/// Which commands other services may send, by the name each arrives under.
#[derive(Default)]
pub struct Ingress {
    pub(crate) accepted: Vec<Accepted>,
}

/// One name a command is taken under.
pub(crate) struct Accepted {
    /// The name it arrives under: its `NAME`, or a CloudEvents type.
    pub(crate) name: String,
    /// Its `NAME`, by which the app runs it.
    pub(crate) command: &'static str,
    /// Lists it in the app.
    pub(crate) register: fn(AppBuilder) -> AppBuilder,
}

impl std::fmt::Debug for Ingress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<(&str, &str)> = self
            .accepted
            .iter()
            .map(|a| (a.name.as_str(), a.command))
            .collect();
        f.debug_struct("Ingress").field("accepted", &names).finish()
    }
}

impl Ingress {
    /// Takes no command yet.
    pub fn new() -> Ingress {
        Ingress::default()
    }

    /// Takes command `C` under its own name, `C::NAME`.
    pub fn command<C: Command>(self) -> Ingress {
        self.command_as::<C>(C::NAME)
    }

    /// Takes command `C` under `name` too: the CloudEvents type another service publishes it
    /// as (`com.example.stock.reserve.v1`).
    pub fn command_as<C: Command>(mut self, name: &str) -> Ingress {
        self.accepted.push(Accepted {
            name: name.to_owned(),
            command: C::NAME,
            register: |builder| builder.command::<C>(),
        });
        self
    }
}

/// Where commands from other services arrive from, run by the app beside its workers
/// ([`AppBuilder::consume`](crate::AppBuilder::consume)): a broker's consumer, such as
/// `bounda_nats::CommandConsumer`. Before it takes each message it waits for
/// [`App::ingress_permit`](crate::App::ingress_permit) (the source's limit, if it has one); it
/// hands the message to [`App::ingest`](crate::App::ingest) and acknowledges it once that
/// answered; `lag` asks it what waits.
#[async_trait::async_trait]
pub trait Source: Send + Sync + 'static {
    /// Its name, for `lag`, letters, logs and pauses (`nats:PAYMENTS/shop`).
    fn name(&self) -> String;

    /// Takes commands into `app` until `stop` completes, waiting meanwhile while an operator
    /// has paused it (`pause ingress NAME`). A broker out of reach is waited for, said in a
    /// warning with its cause.
    async fn run(&self, app: &crate::App, stop: futures_util::future::BoxFuture<'static, ()>);

    /// What waits to be taken now.
    async fn behind(&self) -> anyhow::Result<crate::ingress::behind::Behind>;
}

/// The futures of the public API are `Send`: an app's calls can run on any runtime thread, and a
/// guard held across a store call would break that. Checked when the crate's tests compile.
#[cfg(test)]
#[allow(dead_code, reason = "compiled, never run")]
mod send_checks {
    use super::{App, AppBuilder};
    use crate::store::LetterFilter;

    fn send<T: Send>(_: T) {}

    async fn app_futures(app: &App, builder: AppBuilder, filter: &LetterFilter) {
        send(builder.build());
        send(app.run());
        send(app.lag());
        send(app.next_due_at());
        send(app.pending_deadlines());
        send(app.parked_behind("p", "i"));
        send(app.unreadable_states());
        send(app.dead_letters().list(filter));
        send(app.dead_letters().count(filter));
        send(app.dead_letters().get("l"));
        send(app.dead_letters().discard("l"));
        send(app.dead_letters().retry("l"));
    }

    async fn test_app_futures(app: &crate::testing::TestApp, builder: AppBuilder) {
        send(crate::testing::TestApp::new(builder));
        send(app.lag());
        send(app.advance(crate::seconds(1)));
        send(app.run_until_idle());
    }
}
