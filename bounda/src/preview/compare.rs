//! What changes between the previews of two builds on one copy, in sentences an operator reads
//! before a deploy: "1204 OrderLifecycle.reminder fire 24h earlier".

use std::collections::{BTreeMap, HashMap};

use super::report::{Ended, Fired, Report};

/// The changes from `old` to `new`, one sentence each, most telling first; empty when the two
/// runs did the same.
pub fn changes(old: &Report, new: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    if old.from != new.from || old.until != new.until {
        lines.push(format!(
            "the previews ran over different spans ({} to {}, then {} to {}): compare previews of \
             one copy over one horizon",
            old.from, old.until, new.from, new.until
        ));
    }
    check(old, new, &mut lines);
    fired(&old.fired, &new.fired, &mut lines);
    ended(&old.ended, &new.ended, &mut lines);
    counted(
        "letters of",
        &by(old.letters.iter().map(|l| l.handler.clone())),
        &by(new.letters.iter().map(|l| l.handler.clone())),
        &mut lines,
    );
    counted(
        "commands rejected:",
        &by(old
            .rejected
            .iter()
            .map(|r| format!("{} {}", r.command, r.code))),
        &by(new
            .rejected
            .iter()
            .map(|r| format!("{} {}", r.command, r.code))),
        &mut lines,
    );
    counted("events", &old.events, &new.events, &mut lines);
    counted(
        "port calls",
        &by(old.calls.iter().map(|c| format!("{}.{}", c.port, c.call))),
        &by(new.calls.iter().map(|c| format!("{}.{}", c.port, c.call))),
        &mut lines,
    );
    lines
}

fn check(old: &Report, new: &Report, lines: &mut Vec<String>) {
    let (o, n) = (&old.check, &new.check);
    for (what, old, new) in [
        (
            "instances fail to read",
            o.unreadable_states,
            n.unreadable_states,
        ),
        (
            "stored events fail to read",
            o.unreadable_events,
            n.unreadable_events,
        ),
        (
            "instances hold moments this build lost",
            o.lost_moments,
            n.lost_moments,
        ),
        (
            "scheduler entries have nothing to run them",
            o.orphan_entries,
            n.orphan_entries,
        ),
        (
            "scheduler entries disagree with their state",
            o.drifted_entries,
            n.drifted_entries,
        ),
    ] {
        if old != new {
            lines.push(format!("{new} {what} (before: {old})"));
        }
    }
}

/// `process.field` of a firing.
fn deadline(fired: &Fired) -> String {
    format!("{}.{}", fired.process, fired.field)
}

/// A firing's process, instance and field, and which firing of that deadline it is (from 1).
type FiringKey = (String, String, String, usize);

/// Each firing keyed by its process, instance, field and how many of that deadline fired
/// before it: a deadline that re-arms itself pairs its k-th firing in one run with its k-th in
/// the other.
fn keyed(fired: &[Fired]) -> Vec<(FiringKey, &Fired)> {
    let mut seen: HashMap<(&str, &str, &str), usize> = HashMap::new();
    fired
        .iter()
        .map(|f| {
            let n = seen.entry((&f.process, &f.instance, &f.field)).or_default();
            *n += 1;
            let key = (f.process.clone(), f.instance.clone(), f.field.clone(), *n);
            (key, f)
        })
        .collect()
}

fn fired(old: &[Fired], new: &[Fired], lines: &mut Vec<String>) {
    let old_keyed = keyed(old);
    let new_keyed = keyed(new);
    let old_by: HashMap<_, &Fired> = old_keyed.iter().cloned().collect();
    let new_by: HashMap<_, &Fired> = new_keyed.iter().cloned().collect();
    // (deadline, signed shift in ms) → how many.
    let mut moved: BTreeMap<(String, i64), u64> = BTreeMap::new();
    // The firings only the new build makes, by instance and moment.
    let mut new_only: HashMap<(&str, &str, i64), Vec<&Fired>> = HashMap::new();
    for (key, firing) in &new_keyed {
        match old_by.get(key) {
            Some(before) if before.due != firing.due => {
                let shift = firing.due.as_millis() - before.due.as_millis();
                *moved.entry((deadline(firing), shift)).or_default() += 1;
            }
            Some(_) => {}
            None => new_only
                .entry((&firing.process, &firing.instance, firing.due.as_millis()))
                .or_default()
                .push(firing),
        }
    }
    // A firing only the old build makes, matched by one only the new build makes of the same
    // instance at the same moment under another field, is a deadline renamed (a migration
    // mapping `no_show` to `missed_at`), not one lost and one gained; each is taken once.
    let mut renamed: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut only_old: BTreeMap<String, u64> = BTreeMap::new();
    for (key, firing) in &old_keyed {
        if new_by.contains_key(key) {
            continue;
        }
        let slot = (
            firing.process.as_str(),
            firing.instance.as_str(),
            firing.due.as_millis(),
        );
        let successor = new_only.get_mut(&slot).and_then(|candidates| {
            let index = candidates
                .iter()
                .position(|new| new.field != firing.field)?;
            Some(candidates.remove(index))
        });
        match successor {
            Some(new) => {
                *renamed
                    .entry((deadline(firing), deadline(new)))
                    .or_default() += 1;
            }
            None => *only_old.entry(deadline(firing)).or_default() += 1,
        }
    }
    let only_new = by(new_only.into_values().flatten().map(deadline));
    for ((deadline, shift), count) in moved {
        let by = crate::millis(shift.unsigned_abs());
        let way = if shift < 0 { "earlier" } else { "later" };
        lines.push(format!("{count} {deadline} fire {by} {way}"));
    }
    for ((old, new), count) in renamed {
        lines.push(format!(
            "{count} {old} fire as {new}, renamed, at the same moments"
        ));
    }
    for (deadline, count) in only_old {
        lines.push(format!("{count} {deadline} no longer fire"));
    }
    for (deadline, count) in only_new {
        lines.push(format!("{count} {deadline} newly fire"));
    }
}

fn ended(old: &[Ended], new: &[Ended], lines: &mut Vec<String>) {
    let key = |e: &Ended| (e.process.clone(), e.instance.clone());
    let old_by: HashMap<_, &Ended> = old.iter().map(|e| (key(e), e)).collect();
    let new_by: HashMap<_, &Ended> = new.iter().map(|e| (key(e), e)).collect();
    let mut changed: BTreeMap<String, u64> = BTreeMap::new();
    for end in new {
        let sentence = match old_by.get(&key(end)) {
            Some(before) if before.how == end.how => continue,
            Some(before) => format!(
                "{} instances end {:?} instead of {:?}",
                end.process, end.how, before.how
            ),
            None => format!("{} instances newly end {:?}", end.process, end.how),
        };
        *changed.entry(sentence).or_default() += 1;
    }
    for end in old {
        if !new_by.contains_key(&key(end)) {
            let sentence = format!("{} instances no longer end {:?}", end.process, end.how);
            *changed.entry(sentence).or_default() += 1;
        }
    }
    for (sentence, count) in changed {
        lines.push(format!("{count} {sentence}"));
    }
}

fn by(names: impl Iterator<Item = String>) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for name in names {
        *counts.entry(name).or_default() += 1;
    }
    counts
}

/// A line per name whose count differs: `what name: old → new`.
fn counted(
    what: &str,
    old: &BTreeMap<String, u64>,
    new: &BTreeMap<String, u64>,
    lines: &mut Vec<String>,
) {
    let names: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for name in names {
        let (before, after) = (
            old.get(name).copied().unwrap_or(0),
            new.get(name).copied().unwrap_or(0),
        );
        if before != after {
            lines.push(format!("{what} {name}: {before} → {after}"));
        }
    }
}
