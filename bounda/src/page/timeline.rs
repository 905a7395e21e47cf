//! The timeline picture: pending deadlines placed along the hours ahead, a row per process and
//! field, overdue ones at the left edge. Deadlines of a row that fall in the same slot of the
//! window (a 96th of it: half an hour of 48) are one circle with their count, so the picture
//! stays readable, and small, however many are pending.

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

/// One deadline on the picture, or several of one row in one slot.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Dot {
    /// Where along the window, 0 (now, or overdue) to 1 (its end): the first deadline's place.
    pub(crate) x: f64,
    /// Whether one of them is due already.
    pub(crate) overdue: bool,
    /// Whether one of them came due and waits for its instance's events.
    pub(crate) waiting: bool,
    /// Whether one of them is held by its instance's failure until the letter is retried.
    pub(crate) held: bool,
    /// Whether one of them is paused (its process or instance) until resumed.
    pub(crate) paused: bool,
    /// The first one's process, for its link.
    pub(crate) process: String,
    /// The first one's instance, for its link.
    pub(crate) instance: String,
    /// How many deadlines it stands for.
    pub(crate) count: usize,
    /// What a hover shows.
    pub(crate) title: String,
    /// The slot it fills.
    slot: i64,
}

impl Dot {
    /// The circle's radius: larger for more deadlines, within bounds.
    pub(crate) fn radius(&self) -> f64 {
        6.0 + (self.count as f64).log2().clamp(0.0, 6.0)
    }
}

/// How many slots the window has: deadlines of one row within one slot share a circle.
const SLOTS: f64 = 96.0;

/// How many instances a group's hover names before it says how many more.
const NAMED: usize = 5;

/// What a hover says of a deadline its instance's failure holds, that is paused, or whose
/// instance's scheduler entry disagrees with its state.
/// When it comes due: in its zone when it was set on the calendar.
fn shown_at(due: &PendingDeadline) -> String {
    due.local.clone().unwrap_or_else(|| due.at.to_string())
}

fn held(due: &PendingDeadline) -> String {
    let mut why = due.held_by.as_ref().map_or_else(String::new, |letter| {
        format!(" (held by its failure: letter {letter})")
    });
    if due.paused {
        why.push_str(" (paused)");
    }
    if due.drift.is_some() {
        why.push_str(" (its scheduler entry disagrees with its state)");
    }
    why
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
        let x = (ahead.max(0) as f64 / span).clamp(0.0, 1.0);
        let overdue = ahead <= 0;
        // Overdue ones share the first slot with those due in it.
        let slot = (x * SLOTS).floor() as i64;
        let row = match rows.iter().position(|row| row.label == label) {
            Some(index) => &mut rows[index],
            None => {
                rows.push(Row {
                    label,
                    dots: Vec::new(),
                });
                let last = rows.len() - 1;
                &mut rows[last]
            }
        };
        match row.dots.iter_mut().find(|dot| dot.slot == slot) {
            Some(dot) => {
                dot.count += 1;
                dot.overdue |= overdue;
                dot.waiting |= due.waiting;
                dot.held |= due.held_by.is_some();
                dot.paused |= due.paused;
                if dot.count <= NAMED {
                    dot.title.push_str(&format!(
                        "\n{}:{} at {}{}",
                        due.process,
                        due.instance,
                        shown_at(due),
                        held(due)
                    ));
                }
            }
            None => row.dots.push(Dot {
                x,
                overdue,
                waiting: due.waiting,
                held: due.held_by.is_some(),
                paused: due.paused,
                process: due.process.to_owned(),
                instance: due.instance.clone(),
                count: 1,
                title: format!(
                    "{}:{} {} at {}{}",
                    due.process,
                    due.instance,
                    due.field,
                    shown_at(due),
                    held(due)
                ),
                slot,
            }),
        }
    }
    for row in &mut rows {
        for dot in &mut row.dots {
            if dot.count > NAMED {
                dot.title
                    .push_str(&format!("\nand {} more", dot.count - NAMED));
            }
            if dot.count > 1 {
                dot.title = format!("{} deadlines:\n{}", dot.count, dot.title);
            }
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
            local: None,
            drift: None,
            process: "OrderLifecycle",
            instance: instance.to_owned(),
            field,
            at,
            waiting,
            held_by: None,
            paused: false,
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

    #[test]
    fn deadlines_of_a_row_in_one_slot_share_a_circle_that_counts_them() {
        let now = Instant::from_millis(1_767_225_600_000).unwrap_or_else(Instant::min_value);
        let mut pending: Vec<_> = (0..40)
            .map(|n| {
                let at = now + hours(12) + crate::minutes(n % 20);
                due("payment_deadline", &format!("o-{n}"), at, false)
            })
            .collect();
        pending.push(due("payment_deadline", "o-late", now + hours(13), false));
        pending.push(due("payment_deadline", "o-over", now - hours(2), false));
        pending.push(due(
            "payment_deadline",
            "o-now",
            now + crate::minutes(5),
            true,
        ));
        let timeline = lay_out(&pending, now, hours(48));
        let dots = &timeline.rows[0].dots;
        let counts: Vec<usize> = dots.iter().map(|dot| dot.count).collect();
        assert_eq!(counts, [40, 1, 2], "12:00-12:30, 13:00, and the first slot");
        let group = &dots[0];
        assert_eq!(group.instance, "o-0", "its link is the first one's");
        assert!(
            group
                .title
                .starts_with("40 deadlines:\nOrderLifecycle:o-0 payment_deadline at")
        );
        assert!(group.title.ends_with("and 35 more"), "{}", group.title);
        assert!(group.radius() > dots[1].radius());
        assert!(
            dots[2].overdue && dots[2].waiting,
            "the first slot holds both"
        );
    }
}
