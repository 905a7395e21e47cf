//! A command stored to run later: its scheduler entry, validated now so that what would fail
//! when it runs fails at once.

use serde::{Deserialize, Serialize};

use crate::aggregate::Command;
use crate::app::App;
use crate::app::cause::Cause;
use crate::store::ScheduledEntry;
use crate::{Error, Instant};

/// The context a scheduled command keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ScheduledContext {
    /// The command's id, also its idempotency key.
    pub(crate) command_id: String,
    /// Where it came from.
    pub(crate) cause: Cause,
}

/// The scheduler entry of `command`, id `command_id` (also its key, so the same command is
/// scheduled once), to run at `execute_at` under `cause`. A command type the app cannot run, or
/// a payload that does not read back, is refused now.
pub(crate) fn scheduled_entry<C: Command>(
    app: &App,
    command: &C,
    command_id: String,
    cause: Cause,
    execute_at: Instant,
) -> Result<ScheduledEntry, Error> {
    if !app.knows_command(C::NAME) {
        return Err(Error::UnknownCommand {
            command: C::NAME.to_owned(),
        });
    }
    let payload = serde_json::to_value(command)
        .and_then(|json| serde_json::from_value::<C>(json.clone()).map(|_| json))
        .map_err(|source| Error::Encode {
            type_name: C::NAME.to_owned(),
            source,
        })?;
    let context = ScheduledContext {
        command_id: command_id.clone(),
        cause,
    };
    let context = serde_json::to_value(&context).map_err(|source| Error::Encode {
        type_name: C::NAME.to_owned(),
        source,
    })?;
    Ok(ScheduledEntry {
        context,
        ..ScheduledEntry::new(
            command_id,
            C::NAME,
            command.aggregate_id(),
            payload,
            execute_at,
        )
    })
}
