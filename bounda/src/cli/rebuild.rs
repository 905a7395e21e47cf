//! `rebuild <read model>`: the rebuild with a progress bar on a terminal, and a line saying how
//! it ended.

use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};

use crate::App;

/// Rebuilds `read_model` (`afresh`: from the log's beginning, whatever rebuild is under way),
/// drawing its progress on standard error when that is a terminal.
pub(super) async fn run(
    app: &App,
    read_model: &str,
    afresh: bool,
    out: &mut impl Write,
) -> Result<(), crate::Error> {
    if afresh {
        app.abandon_rebuild(read_model).await?;
    }
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(0);
        // The template is a literal; a bad one would be a bug here, shown as a plain bar.
        if let Ok(style) = ProgressStyle::with_template(
            "{msg} [{bar:40}] {pos}/{len} events ({per_sec}, {eta} left)",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(format!("rebuilding {read_model}"));
        bar
    });
    let mut first = None;
    let done = app
        .rebuild(read_model, |progress| {
            first.get_or_insert(progress.position);
            if let Some(bar) = &bar {
                bar.set_length(progress.head);
                bar.set_position(progress.position);
            }
        })
        .await;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let done = done?;
    let resumed = match first {
        Some(position) if position > 0 => format!(", resumed at position {position}"),
        _ => String::new(),
    };
    writeln!(
        out,
        "rebuilt {read_model} from the log through position {}{resumed}, and swapped it in",
        done.position
    )
    .map_err(|e| crate::Error::Configuration {
        message: format!("cannot write: {e}"),
    })
}
