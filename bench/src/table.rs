//! The report: one markdown table of rates and ratios, and the notes under it.

use std::fmt::Write as _;

/// One measured line: bounda doing some work, and plain rusqlite doing the same writes.
#[derive(Debug, Clone)]
pub struct Row {
    /// What was measured.
    pub what: String,
    /// `FULL` or `NORMAL` (SQLite's `synchronous`), or the server's durability.
    pub mode: &'static str,
    /// Units of work done by bounda in the timed part.
    pub units: usize,
    /// bounda's rate, units per second.
    pub bounda: f64,
    /// The floor's rate committing each unit on its own, units per second.
    pub floor1: f64,
    /// The floor's rate committing 100 units per transaction, units per second.
    pub floor100: f64,
    /// bounda's write transactions per unit of work, where the store counts them.
    pub tx_per_unit: Option<f64>,
    /// The process's resident memory right after the measurement, in KiB.
    pub rss_kib: Option<u64>,
}

/// Renders `rows` as a markdown table followed by `notes`, one per line.
pub fn render(title: &str, rows: &[Row], notes: &[String]) -> String {
    let mut out = String::new();
    // Writing to a `String` cannot fail.
    let _ = writeln!(out, "# {title}\n");
    out.push_str(
        "| what | mode | n | bounda /s | floor 1/tx /s | floor 100/tx /s | bounda/floor1 \
         | bounda/floor100 | write tx per unit | VmRSS after |\n",
    );
    out.push_str("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for row in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.what,
            row.mode,
            row.units,
            rate(row.bounda),
            rate(row.floor1),
            rate(row.floor100),
            ratio(row.bounda, row.floor1),
            ratio(row.bounda, row.floor100),
            row.tx_per_unit
                .map_or_else(|| "-".to_owned(), |tx| format!("{tx:.2}")),
            row.rss_kib.map_or_else(|| "-".to_owned(), mebibytes),
        );
    }
    if !notes.is_empty() {
        out.push('\n');
        for note in notes {
            let _ = writeln!(out, "- {note}");
        }
    }
    out
}

/// A rate, rounded to what a shared machine can tell apart.
fn rate(per_second: f64) -> String {
    if per_second >= 10_000.0 {
        format!("{:.0}k", per_second / 1_000.0)
    } else if per_second >= 1_000.0 {
        format!("{:.1}k", per_second / 1_000.0)
    } else {
        format!("{per_second:.0}")
    }
}

/// `a / b`, or `-` when `b` is not a rate.
pub fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && b.is_finite() {
        format!("{:.3}", a / b)
    } else {
        "-".to_owned()
    }
}

/// KiB as MiB with one decimal.
pub fn mebibytes(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_renders_with_its_ratios() {
        let rows = [Row {
            what: "deadline firings".to_owned(),
            mode: "FULL",
            units: 10,
            bounda: 500.0,
            floor1: 2_000.0,
            floor100: 50_000.0,
            tx_per_unit: Some(1.5),
            rss_kib: Some(2048),
        }];
        let table = render("t", &rows, &["a note".to_owned()]);
        assert!(
            table.contains("| deadline firings | FULL | 10 | 500 | 2.0k | 50k | 0.250 | 0.010 | 1.50 | 2.0 MiB |"),
            "{table}"
        );
        assert!(table.ends_with("- a note\n"), "{table}");
    }

    #[test]
    fn a_ratio_to_nothing_is_a_dash() {
        assert_eq!(ratio(1.0, 0.0), "-");
    }
}
