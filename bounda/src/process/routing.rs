//! Which process instance an event reaches (spec 55–58).

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
/// field names no instance (spec 56–57). A correlator that fails, or an id field that is neither
/// text, a number nor `null`, is an error: the runtime dead-letters that event for this process
/// only (spec 58).
pub fn instance_of<P: Process>(event: &RecordedEvent) -> anyhow::Result<Option<String>> {
    let main = <P::Aggregate as Aggregate>::NAME;
    if event.aggregate_type == main {
        return Ok(Some(event.aggregate_id.clone()));
    }
    if let Some(correlated) = P::correlate(event) {
        return correlated.map_err(|error| {
            anyhow!(
                "the correlator of process `{}` failed on `{}.{}`: {error:#}",
                P::NAME,
                event.aggregate_type,
                event.event_type
            )
        });
    }
    let field = <P::Aggregate as Aggregate>::ID_FIELD;
    match event.payload.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(id)) => Ok(Some(id.clone())),
        Some(Value::Number(id)) => Ok(Some(id.to_string())),
        Some(other) => bail!(
            "event `{}.{}` names its `{main}` in `{field}` with {other}, which is not an id",
            event.aggregate_type,
            event.event_type
        ),
    }
}
