//! The timeline picture: pending deadlines placed along the hours ahead, a row per process and
//! field, overdue ones at the left edge.

use crate::app::PendingDeadline;
use crate::{Duration, Instant};

/// The picture's rows and its scale.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Timeline {
    /// One row per process and field, in name order.
    pub(crate) rows: Vec<Row>,
    /// The ticks along the top: their place (0 to 1) and label.
    pub(crate) ticks: Vec<(f64, String)>,
}

/// One row of the picture.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// `Process · field`.
    pub(crate) label: String,
    /// The deadlines on it.
    pub(crate) dots: Vec<Dot>,
}

/// One deadline on the picture.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Dot {
    /// Where along the window, 0 (now, or overdue) to 1 (its end).
    pub(crate) x: f64,
    /// Whether it is due already.
    pub(crate) overdue: bool,
    /// Whether it came due and waits for its instance's events.
    pub(crate) waiting: bool,
    /// The instance, for its link.
    pub(crate) process: String,
    /// The instance, for its link.
    pub(crate) instance: String,
    /// What a hover shows.
    pub(crate) title: String,
}

/// `pending` laid out over the `window` after `now`; any beyond it is left out.
pub(crate) fn lay_out(pending: &[PendingDeadline], now: Instant, window: Duration) -> Timeline {
    let span = window.as_millis().max(1) as f64;
    let mut rows: Vec<Row> = Vec::new();
    for due in pending {
        let ahead = due.at.as_millis() - now.as_millis();
        if ahead > window.as_millis() as i64 {
            continue;
        }
        let label = format!("{} · {}", due.process, due.field);
        let dot = Dot {
            x: (ahead.max(0) as f64 / span).clamp(0.0, 1.0),
            overdue: ahead <= 0,
            waiting: due.waiting,
            process: due.process.to_owned(),
            instance: due.instance.clone(),
            title: format!(
                "{}:{} {} at {}",
                due.process, due.instance, due.field, due.at
            ),
        };
        match rows.iter_mut().find(|row| row.label == label) {
            Some(row) => row.dots.push(dot),
            None => rows.push(Row {
                label,
                dots: vec![dot],
            }),
        }
    }
    rows.sort_by(|a, b| a.label.cmp(&b.label));
    let hours = (window.as_millis() / 3_600_000).max(1);
    let step = match hours {
        0..=12 => 1,
        13..=48 => 6,
        _ => 24,
    };
    let ticks = (0..=hours)
        .step_by(step as usize)
        .map(|hour| (hour as f64 / hours as f64, format!("+{hour}h")))
        .collect();
    Timeline { rows, ticks }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hours;

    fn due(field: &'static str, instance: &str, at: Instant, waiting: bool) -> PendingDeadline {
        PendingDeadline {
            process: "OrderLifecycle",
            instance: instance.to_owned(),
            field,
            at,
            waiting,
        }
    }

    #[test]
    fn deadlines_sit_along_the_window_a_row_per_field_overdue_at_the_edge() {
        let now = Instant::from_millis(1_767_225_600_000).unwrap_or_else(Instant::min_value);
        let pending = [
            due("payment_deadline", "o-1", now + hours(12), false),
            due("reminder", "o-2", now - hours(1), true),
            due("payment_deadline", "o-3", now + hours(100), false),
        ];
        let timeline = lay_out(&pending, now, hours(48));
        assert_eq!(timeline.rows.len(), 2, "the one beyond the window left out");
        assert_eq!(timeline.rows[0].dots.len(), 1);
        assert_eq!(timeline.rows[0].label, "OrderLifecycle · payment_deadline");
        assert!((timeline.rows[0].dots[0].x - 0.25).abs() < 1e-9);
        let overdue = &timeline.rows[1].dots[0];
        assert!(overdue.overdue && overdue.waiting && overdue.x == 0.0);
        assert_eq!(timeline.ticks.first().map(|t| t.1.as_str()), Some("+0h"));
        assert_eq!(timeline.ticks.last().map(|t| t.1.as_str()), Some("+48h"));
    }
}
