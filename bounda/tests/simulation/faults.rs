//! What the domain must keep through commits and port calls failing on purpose, checked by the
//! simulation as invariants: nothing doubled, and at the end nothing lost.

use std::collections::HashSet;

use bounda::store::{LetterFilter, LetterKind, LetterStatus};
use bounda::{App, ProcessStatus};

use super::domain::{self, Watch};

/// What commits failing on purpose must not break: nothing doubled (an acknowledgement per
/// payment at most, a ping per chain link), and at the end, with the
/// faults stopped, nothing lost (every payment acknowledged or lettered, every link's ping sent
/// or lettered, every event of a running instance handled).
pub async fn fault_checks(app: &App, end: bool) -> Result<(), String> {
    let store = app.store();
    let now = app.clock().now();
    let letters = app
        .dead_letters()
        .list(&LetterFilter::default())
        .await
        .map_err(|e| e.to_string())?;
    let accounts: std::collections::BTreeSet<String> = store
        .read_all(0, 100_000)
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|e| e.aggregate_type == "Account")
        .map(|e| e.aggregate_id)
        .collect();
    for account in accounts {
        let events = store
            .read_stream("Account", &account)
            .await
            .map_err(|e| e.to_string())?;
        // Each acknowledgement names the payment it acknowledges as its cause.
        let mut acknowledged = HashSet::new();
        for ack in events.iter().filter(|e| e.event_type == "Acknowledged") {
            if !acknowledged.insert(ack.metadata.causation_id.clone()) {
                return Err(format!(
                    "{account}: payment {} acknowledged twice",
                    ack.metadata.causation_id
                ));
            }
        }
        let mut links = HashSet::new();
        for ping in events.iter().filter(|e| e.event_type == "Pinged") {
            if !links.insert(ping.payload["link"].as_u64()) {
                return Err(format!(
                    "{account}: link {} pinged twice",
                    ping.payload["link"]
                ));
            }
        }
        let lifecycle = store
            .read_stream("process:Watch", &account)
            .await
            .map_err(|e| e.to_string())?;
        // That each is handled once is the harness's own check.
        let handled: HashSet<String> = lifecycle
            .iter()
            .filter(|e| e.event_type == "ProcessHandled")
            .filter_map(|e| e.payload["eventId"].as_str().map(str::to_owned))
            .collect();
        if !end {
            continue;
        }
        let mine: Vec<&bounda::store::DeadLetter> = letters
            .iter()
            .filter(|l| l.aggregate_id.as_deref() == Some(account.as_str()))
            .filter(|l| l.status != LetterStatus::Retried)
            .collect();
        let open = |kind: LetterKind| mine.iter().filter(move |l| l.kind == kind);
        let ack_delay = domain::ACK_DELAY.as_millis() as i64;
        for paid in events.iter().filter(|e| {
            e.event_type == "Paid" && e.timestamp.as_millis() + ack_delay <= now.as_millis()
        }) {
            let lettered = open(LetterKind::Policy).any(|l| l.event_id.as_ref() == Some(&paid.id));
            if !acknowledged.contains(&paid.id) && !lettered {
                return Err(format!(
                    "{account}: payment {} neither acknowledged nor lettered",
                    paid.id
                ));
            }
        }
        let ping_delay = domain::PING_DELAY.as_millis() as i64;
        let chain = lifecycle
            .iter()
            .filter(|e| e.event_type == "ProcessDeadlineReached" && e.payload["field"] == "chain");
        for (index, link) in chain.enumerate() {
            let number = index as u64 + 1;
            let due = link.timestamp.as_millis() + ping_delay <= now.as_millis();
            let lettered = open(LetterKind::Scheduled).any(|l| {
                l.payload
                    .as_ref()
                    .is_some_and(|payload| payload["link"].as_u64() == Some(number))
            });
            if due && !links.contains(&Some(number)) && !lettered {
                return Err(format!(
                    "{account}: link {number} neither pinged nor lettered"
                ));
            }
        }
        if let Some(instance) = app
            .process_instance::<Watch>(&account)
            .await
            .map_err(|e| e.to_string())?
            && instance.status == ProcessStatus::Started
        {
            for event in events.iter().filter(|e| {
                matches!(
                    e.event_type.as_str(),
                    "Opened" | "Paid" | "Moved" | "Cancelled"
                )
            }) {
                if !handled.contains(&event.id) {
                    return Err(format!(
                        "{account}: {} ({}) never handled by its running instance",
                        event.event_type, event.id
                    ));
                }
            }
        }
    }
    Ok(())
}
