//! One decision of one command on the current state of its instance, ready to commit.

use crate::Error;
use crate::aggregate::{Aggregate, Command, EventSet};
use crate::app::{App, Decided};
use crate::store::{Append, Metadata, NewEvent};

/// What a command decided, with the append that stores it (none for "already done").
#[derive(Debug)]
pub(crate) struct Decision {
    pub(crate) decided: Decided,
    pub(crate) append: Option<Append>,
}

/// Loads `command`'s instance, decides, and prepares the append at the version it saw. The
/// outer error is a failure; the inner one the command's rejection.
pub(crate) async fn decide<C: Command>(
    app: &App,
    command: &C,
    metadata: &Metadata,
) -> Result<Result<Decision, C::Rejection>, Error> {
    let aggregate = <C::Aggregate as Aggregate>::NAME;
    names_an_instance(command)?;
    let id = command.aggregate_id().to_owned();
    let loaded = app.load::<C::Aggregate>(&id).await?;
    let events = match command.decide(&loaded.state) {
        Ok(events) => events,
        Err(rejection) => return Ok(Err(rejection)),
    };
    let new_events = new_events(app, &events, metadata)?;
    let decided = Decided {
        aggregate_type: aggregate,
        aggregate_id: id.clone(),
        version: loaded.version + new_events.len() as u64,
        event_ids: new_events.iter().map(|event| event.id.clone()).collect(),
        event_types: events.iter().map(EventSet::type_name).collect(),
        position: None,
    };
    let append = (!new_events.is_empty()).then(|| Append {
        aggregate_type: aggregate.to_owned(),
        aggregate_id: id,
        expected_version: loaded.version,
        events: new_events,
    });
    Ok(Ok(Decision { decided, append }))
}

/// Refuses a command whose aggregate id is empty or blank: it would decide for no instance.
pub(crate) fn names_an_instance<C: Command>(command: &C) -> Result<(), Error> {
    if command.aggregate_id().trim().is_empty() {
        return Err(Error::EmptyAggregateId {
            command: C::NAME.to_owned(),
        });
    }
    Ok(())
}

/// Events ready to append: new ids, the clock's time, and `metadata` with each event's version.
pub(crate) fn new_events<E: EventSet>(
    app: &App,
    events: &[E],
    metadata: &Metadata,
) -> Result<Vec<NewEvent>, Error> {
    let now = app.clock().now();
    events
        .iter()
        .map(|event| {
            let payload = event.to_json().map_err(|source| Error::Encode {
                type_name: event.type_name().to_owned(),
                source,
            })?;
            Ok(NewEvent {
                id: app.next_id(),
                event_type: event.type_name().to_owned(),
                payload,
                timestamp: now,
                metadata: Metadata {
                    schema_version: event.schema_version(),
                    ..metadata.clone()
                },
            })
        })
        .collect()
}
