//! Which process instance an event reaches.

use anyhow::{anyhow, bail};
use serde_json::Value;

use crate::RecordedEvent;
use crate::aggregate::Aggregate;
use crate::process::Process;

/// The instance of `P` that `event` names, or `None` when it names none.
///
/// An event of the process's own aggregate names the instance by its aggregate id; another
/// aggregate's event by its handler's `#[correlate(..)]` function if it has one, else by its
/// payload field named after the main aggregate's id (`order_id`), where `null` or a missing
/// field names no instance. A correlator that fails or returns an empty id, or an id
/// field that is empty or neither text, a number nor `null`, is an error: the runtime
/// dead-letters that event for this process only. A correlator that panics has failed.
pub fn instance_of<P: Process>(event: &RecordedEvent) -> anyhow::Result<Option<String>> {
    let main = <P::Aggregate as Aggregate>::NAME;
    let what = || format!("`{}.{}`", event.aggregate_type, event.event_type);
    if event.aggregate_type == main {
        if event.aggregate_id.trim().is_empty() {
            bail!(
                "event {} has an empty aggregate id, which names no instance",
                what()
            );
        }
        return Ok(Some(event.aggregate_id.clone()));
    }
    // Another aggregate's event names its instance in its payload: one that does not read names
    // none that can be trusted, so it fails for this process rather than reaching none.
    event.readable()?;
    // A correlator is the user's code: a panic in it is its failure on this event, not the
    // runner's crash.
    let correlated = std::panic::catch_unwind(|| P::correlate(event)).unwrap_or_else(|panic| {
        let message = crate::error::panic_message(panic.as_ref());
        Some(Err(anyhow!("it panicked: {message}")))
    });
    if let Some(correlated) = correlated {
        return match correlated {
            Ok(Some(id)) if id.trim().is_empty() => Err(anyhow!(
                "the correlator of process `{}` returned an empty id for {}; return `None` for \
                 an event that names no instance",
                P::NAME,
                what()
            )),
            Ok(id) => Ok(id),
            Err(error) => Err(anyhow!(
                "the correlator of process `{}` failed on {}: {error:#}",
                P::NAME,
                what()
            )),
        };
    }
    let field = <P::Aggregate as Aggregate>::ID_FIELD;
    match event.payload.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(id)) if id.trim().is_empty() => bail!(
            "event {} names its `{main}` in `{field}` with an empty id; leave `{field}` out or \
             null when it names none",
            what()
        ),
        Some(Value::String(id)) => Ok(Some(id.clone())),
        Some(Value::Number(id)) => Ok(Some(id.to_string())),
        Some(other) => bail!(
            "event `{}.{}` names its `{main}` in `{field}` with {other}, which is not an id",
            event.aggregate_type,
            event.event_type
        ),
    }
}
