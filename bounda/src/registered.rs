//! The marks `#[command]` and `#[policy]` leave on what they register: supertraits of
//! `Command` and `Policy`, so a command or policy the binary does not register does not compile.

/// Written by `#[command]`: the command registered itself, so every app of the binary can run
/// it when it is scheduled. A supertrait of `Command`, so a command without `#[command]` does not
/// compile.
#[diagnostic::on_unimplemented(
    message = "command `{Self}` is not registered",
    label = "add `#[command]` above this `impl Command for {Self}`",
    note = "`#[command]` registers the command, so an app can run it when it comes due after a delay"
)]
pub trait CommandRegistered {}

/// The bound on a command's aggregate that carries the registration check: it holds for any
/// aggregate of a registered command `C`. Checked where the impl names its aggregate
/// (`type Aggregate = ..`), so a command without `#[command]` is one error, there, rather than
/// one per item that names `Self` as a command (`Decision<Self>`).
pub trait AggregateOfRegistered<C: ?Sized> {}

impl<A: ?Sized, C: CommandRegistered + ?Sized> AggregateOfRegistered<C> for A {}

/// Written by `#[policy]`: the policy registered itself, so every app of the binary runs it. A
/// supertrait of `Policy`, so a policy without `#[policy]` does not compile.
#[diagnostic::on_unimplemented(
    message = "policy `{Self}` is not registered",
    label = "add `#[policy]` above this `impl Policy for {Self}`",
    note = "`#[policy]` registers the policy, so every app built in this binary runs it"
)]
pub trait PolicyRegistered {}
