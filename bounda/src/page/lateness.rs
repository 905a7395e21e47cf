//! The lateness chart: how late the recent deadlines ran, by process, read from the log's last
//! events (each deadline's step records the moment it was due and the moment it ran), so it
//! holds for every worker on the store.

use crate::app::App;
use crate::{Duration, Error, days, hours, minutes, seconds};

/// How many of the log's last events the chart reads.
const EVENTS_READ: usize = 5_000;

/// The buckets: up to each bound (the last has none), with its label.
const BUCKETS: [(Option<Duration>, &str); 5] = [
    (Some(seconds(1)), "within 1 s"),
    (Some(minutes(1)), "1 s to 1 min"),
    (Some(hours(1)), "1 min to 1 h"),
    (Some(days(1)), "1 h to 1 day"),
    (None, "a day or more"),
];

/// The chart.
pub(super) struct Lateness {
    /// The buckets' labels, in order.
    pub(super) labels: Vec<&'static str>,
    /// One row per process that ran a deadline, by name.
    pub(super) rows: Vec<Row>,
    /// How many events were read, the last of the log.
    pub(super) read: usize,
}

/// One process's deadlines by how late they ran.
pub(super) struct Row {
    pub(super) process: String,
    /// Per bucket: the count, and the bar's height out of 40.
    pub(super) bars: Vec<(u64, usize)>,
    pub(super) firings: u64,
    /// The latest of them, as a person reads it.
    pub(super) worst: String,
}

impl Lateness {
    /// The deadlines the last events of `app`'s log (up to `head`) ran, by process and lateness.
    pub(super) async fn read(app: &App, head: u64) -> Result<Lateness, Error> {
        let store = app.store();
        let events = store
            .read_all(head.saturating_sub(EVENTS_READ as u64), EVENTS_READ)
            .await?;
        let read = events.len();
        let mut by_process: std::collections::BTreeMap<String, Vec<Duration>> =
            std::collections::BTreeMap::new();
        for event in &events {
            let ran = crate::store::instances::deadline_ran(
                &event.aggregate_type,
                &event.event_type,
                &event.payload,
                event.timestamp,
            );
            if let Some(ran) = ran {
                by_process
                    .entry(ran.process.to_owned())
                    .or_default()
                    .push(ran.late);
            }
        }
        let rows = by_process
            .into_iter()
            .map(|(process, lateness)| Row::of(process, &lateness))
            .collect();
        Ok(Lateness {
            labels: BUCKETS.iter().map(|(_, label)| *label).collect(),
            rows,
            read,
        })
    }
}

impl Row {
    fn of(process: String, lateness: &[Duration]) -> Row {
        let mut counts = [0u64; BUCKETS.len()];
        for late in lateness {
            let bucket = BUCKETS
                .iter()
                .position(|(bound, _)| bound.is_none_or(|bound| *late < bound))
                .unwrap_or(BUCKETS.len() - 1);
            counts[bucket] += 1;
        }
        let most = counts.iter().copied().max().unwrap_or(0).max(1);
        let worst = lateness.iter().copied().max().unwrap_or(Duration::ZERO);
        Row {
            process,
            bars: counts
                .iter()
                .map(|&count| {
                    let height = (count * 40).div_ceil(most);
                    (count, usize::try_from(height).unwrap_or(40))
                })
                .collect(),
            firings: lateness.len() as u64,
            worst: spoken(worst),
        }
    }
}

/// `late` in its largest whole unit: `3 min`, `under a second`.
fn spoken(late: Duration) -> String {
    let ms = late.as_millis();
    match ms {
        0..1_000 => "under a second".to_owned(),
        1_000..60_000 => format!("{} s", ms / 1_000),
        60_000..3_600_000 => format!("{} min", ms / 60_000),
        3_600_000..86_400_000 => format!("{} h", ms / 3_600_000),
        _ => format!("{} days", ms / 86_400_000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::millis;

    #[test]
    fn each_lateness_falls_in_its_bucket() {
        let row = Row::of(
            "P".to_owned(),
            &[
                millis(0),
                millis(999),
                seconds(1),
                minutes(59),
                hours(2),
                days(3),
            ],
        );
        let counts: Vec<u64> = row.bars.iter().map(|(count, _)| *count).collect();
        assert_eq!(counts, [2, 1, 1, 1, 1]);
        let heights: Vec<usize> = row.bars.iter().map(|(_, height)| *height).collect();
        assert_eq!(heights, [40, 20, 20, 20, 20]);
        assert_eq!((row.firings, row.worst.as_str()), (6, "3 days"));
        assert_eq!(spoken(millis(10)), "under a second");
    }
}
