//! Terminal handling: colour decisions, and the live view of servers while they connect.
//!
//! ANSI sequences are written by hand (a handful of them) to keep the dependency list short.
//! Colour is used only on a terminal and never when `NO_COLOR` is set; the live view is drawn
//! only when stderr is a terminal, and becomes one plain line per settled server otherwise.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
use switchboard::{ServerState, ServerStatus};

/// `NO_COLOR` (https://no-color.org): present and not empty turns colour off.
fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Whether stdout gets colour.
pub fn stdout_color() -> bool {
    std::io::stdout().is_terminal() && !no_color()
}

/// Whether stderr gets colour.
pub fn stderr_color() -> bool {
    std::io::stderr().is_terminal() && !no_color()
}

/// A colour palette that is either real or empty.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
}

impl Style {
    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
    pub fn green(self, t: &str) -> String {
        self.paint("32", t)
    }
    pub fn yellow(self, t: &str) -> String {
        self.paint("33", t)
    }
    pub fn red(self, t: &str) -> String {
        self.paint("31", t)
    }
    pub fn dim(self, t: &str) -> String {
        self.paint("2", t)
    }
    pub fn bold(self, t: &str) -> String {
        self.paint("1", t)
    }
}

/// A duration the way a person reads it: `12 ms`, `1.52 s`.
pub fn fmt_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

/// The first line of an error, without the `; last stderr lines:` lead-in of the tail that
/// follows it (the full text is in `status`).
pub fn first_line(error: &str) -> &str {
    let line = error.lines().next().unwrap_or("");
    line.strip_suffix("; last stderr lines:").unwrap_or(line)
}

/// The status word shown for a server: `connected`, `connecting`, `deferred` (connecting, its
/// tools served from the cache), `failed` (disconnected with an error), `disconnected`.
pub fn status_word(s: &ServerState) -> &'static str {
    match s.status {
        ServerStatus::Connected => "connected",
        ServerStatus::Connecting if s.deferred => "deferred",
        ServerStatus::Connecting => "connecting",
        ServerStatus::Disconnected
            if s.last_error
                .as_ref()
                .is_some_and(|e| e.kind == switchboard::ServerErrorKind::NeedsLogin) =>
        {
            "needs login"
        }
        ServerStatus::Disconnected if s.last_error.is_some() => "failed",
        _ => "disconnected",
    }
}

/// `text` (a server's status cell) in the colour of its status.
pub fn paint_status(style: Style, s: &ServerState, text: &str) -> String {
    match s.status {
        ServerStatus::Connected => style.green(text),
        ServerStatus::Connecting => style.yellow(text),
        ServerStatus::Disconnected if s.last_error.is_some() => style.red(text),
        _ => text.to_string(),
    }
}

/// One line per server, redrawn in place while servers connect (on a terminal), or a plain
/// line on stderr as each server settles (otherwise). Silent when `quiet`.
pub struct LiveView {
    started: Instant,
    tty: bool,
    quiet: bool,
    style: Style,
    drawn: usize,
    announced: BTreeSet<String>,
}

impl LiveView {
    pub fn new(started: Instant, quiet: bool) -> Self {
        LiveView {
            started,
            tty: std::io::stderr().is_terminal(),
            quiet,
            style: Style {
                color: stderr_color(),
            },
            drawn: 0,
            announced: BTreeSet::new(),
        }
    }

    pub fn update(&mut self, servers: &[ServerState]) {
        if self.quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.tty {
            let mut out = String::new();
            if self.drawn > 0 {
                out.push_str(&format!("\x1b[{}A", self.drawn));
            }
            let width = servers.iter().map(|s| s.name.len()).max().unwrap_or(0);
            for s in servers {
                let when = match (s.status, s.time_to_ready) {
                    (ServerStatus::Connected, Some(t)) => fmt_duration(t),
                    (ServerStatus::Connecting, _) => fmt_duration(self.started.elapsed()),
                    _ => String::new(),
                };
                let phase = if s.status == ServerStatus::Connecting {
                    format!(" ({})", s.phase)
                } else {
                    String::new()
                };
                out.push_str(&format!(
                    "\r\x1b[2K  {:<width$}  {}{}  {}\n",
                    s.name,
                    paint_status(self.style, s, status_word(s)),
                    self.style.dim(&phase),
                    self.style.dim(&when),
                ));
            }
            self.drawn = servers.len();
            let _ = err.write_all(out.as_bytes());
        } else {
            for s in servers {
                if s.status == ServerStatus::Connecting || self.announced.contains(&s.name) {
                    continue;
                }
                self.announced.insert(s.name.clone());
                let line = match (s.status, &s.last_error) {
                    (ServerStatus::Connected, _) => format!(
                        "switchboard: {} connected in {} ({} tools)",
                        s.name,
                        s.time_to_ready.map(fmt_duration).unwrap_or_default(),
                        s.tool_count
                    ),
                    (_, Some(e)) => format!(
                        "switchboard: {} failed: {}",
                        s.name,
                        first_line(&e.to_string())
                    ),
                    _ => format!("switchboard: {} disconnected", s.name),
                };
                let _ = writeln!(err, "{}", terminal_safe(&line));
            }
        }
        let _ = err.flush();
    }

    /// Erase the live view so the final output replaces it.
    pub fn finish(&mut self) {
        if self.tty && self.drawn > 0 && !self.quiet {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\x1b[{}A\r\x1b[J", self.drawn);
            let _ = err.flush();
            self.drawn = 0;
        }
    }
}

/// Text for a terminal, from strings a server or a config chose (names, descriptions, errors,
/// stderr lines, results): every control character but newline — escape sequences that clear
/// the screen, move the cursor or set the title, carriage returns, backspaces — and the
/// Unicode bidirectional overrides become visible `\u{..}` text. The colour sequences this
/// program writes itself (`ESC [ digits m`) are kept. JSON output never goes through here: it
/// stays exact, and JSON escapes control characters by itself.
pub fn terminal_safe(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| needs_escape(c) || c == '\x1b') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\x1b' {
            if let Some(len) = sgr_len(&s[i..]) {
                out.push_str(&s[i..i + len]);
                for _ in 1..len {
                    chars.next();
                }
                continue;
            }
        }
        if needs_escape(c) || c == '\x1b' {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// [`terminal_safe`] for one table cell or one line: newlines and tabs are escaped too, so a
/// name cannot split a row.
pub fn line_safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) || c == '\x1b' => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\x1b')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The length of a colour sequence (`ESC [ digits/semicolons m`) at the start of `s`.
fn sgr_len(s: &str) -> Option<usize> {
    let rest = s.strip_prefix("\x1b[")?;
    let n = rest
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b';')
        .count();
    (rest.as_bytes().get(n) == Some(&b'm')).then_some(2 + n + 1)
}

#[cfg(test)]
mod safe_tests {
    use super::*;

    #[test]
    fn control_sequences_from_servers_become_visible_text_but_our_colours_stay() {
        // Clear the screen, home the cursor, print a fake line; a carriage return; a title.
        let hostile = "\x1b[2J\x1b[Hall servers connected\r\x1b]0;owned\x07";
        let safe = terminal_safe(hostile);
        assert!(!safe.contains('\x1b') && !safe.contains('\r') && !safe.contains('\x07'));
        assert_eq!(
            safe,
            "\\u{1b}[2J\\u{1b}[Hall servers connected\\u{d}\\u{1b}]0;owned\\u{7}"
        );
        let ours = "\x1b[1mbold\x1b[0m and \x1b[31mred\x1b[0m\nnext line";
        assert_eq!(terminal_safe(ours), ours);
        assert_eq!(terminal_safe("plain"), "plain");
        assert_eq!(terminal_safe("abc\u{202e}cba"), "abc\\u{202e}cba");
        assert_eq!(
            line_safe("two\nlines\tand \x1b[1m"),
            "two\\nlines\\tand \\u{1b}[1m"
        );
    }
}
