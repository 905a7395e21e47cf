//! Control characters in stored text, made visible: an id, a type or a message with a newline
//! or a terminal escape in it must not forge a log line or a table row, nor move the cursor.
//! One escape for both: the log writer ([`Lines`]) and the operator's tables ([`Plain`]).

use std::fmt;
use std::io;

/// Writes `text` with every control character escaped: `\n`, `\r` and `\t` as themselves
/// escaped, any other (C0, DEL, C1, ESC among them) as `\u{..}`.
fn escape(text: &str, out: &mut impl fmt::Write) -> fmt::Result {
    let mut rest = text;
    while let Some(at) = rest.find(char::is_control) {
        out.write_str(&rest[..at])?;
        let mut chars = rest[at..].chars();
        let control = chars.next().unwrap_or_default();
        match control {
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            other => write!(out, "\\u{{{:x}}}", u32::from(other))?,
        }
        rest = chars.as_str();
    }
    out.write_str(rest)
}

/// Stored text in an operator's table or message: shown with its control characters escaped,
/// padded as its format asks.
pub struct Plain<T>(pub T);

impl<T: fmt::Display> fmt::Display for Plain<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0.to_string();
        if !text.contains(char::is_control) {
            return f.pad(&text);
        }
        let mut escaped = String::with_capacity(text.len() + 8);
        escape(&text, &mut escaped)?;
        f.pad(&escaped)
    }
}

/// A log writer whose every write is one whole line (as the log formatter writes an event):
/// control characters within it are escaped, its own final newline kept, so nothing a field
/// holds can begin a line of its own.
#[derive(Debug)]
pub struct Lines<W>(pub W);

impl<W: io::Write> io::Write for Lines<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let (line, end) = match text.strip_suffix('\n') {
            Some(line) => (line, "\n"),
            None => (text.as_ref(), ""),
        };
        if !line.contains(char::is_control) {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut escaped = String::with_capacity(buf.len() + 8);
        escape(line, &mut escaped).map_err(|_| io::Error::other("cannot escape a log line"))?;
        escaped.push_str(end);
        self.0.write_all(escaped.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn control_characters_are_escaped_and_padding_kept() {
        let forged = "o-1\nERROR forged\x1b[31m\u{85}\t";
        assert_eq!(
            Plain(forged).to_string(),
            "o-1\\nERROR forged\\u{1b}[31m\\u{85}\\t"
        );
        assert_eq!(format!("{:<6}|", Plain("a\nb")), "a\\nb  |");
        assert_eq!(format!("{:<6}|", Plain("ab")), "ab    |");
    }

    #[test]
    fn a_log_line_keeps_its_own_newline_only() {
        let mut out = Lines(Vec::new());
        out.write_all(b"WARN id=o-1\nERROR forged\x1b[2J\n")
            .unwrap();
        out.write_all(b"INFO plain\n").unwrap();
        assert_eq!(
            String::from_utf8(out.0).unwrap(),
            "WARN id=o-1\\nERROR forged\\u{1b}[2J\nINFO plain\n"
        );
    }
}
