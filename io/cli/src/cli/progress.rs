//! `switchboard call`'s progress: the call always asks for progress; on a terminal (and
//! unless `--quiet`) it is drawn as a bar on stderr, cleared when the call completes. Stdout
//! only ever gets the result, so `--json` output and pipes are the same either way.

use futures_lite::future;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;
use std::io::IsTerminal;
use std::time::Duration;
use switchboard::{Progress, Switchboard};

/// Steps of a bar whose total is known (the server's numbers may be fractional).
const STEPS: u64 = 1000;

/// Calls `tool` with a progress token; shows its progress when stderr is a terminal and
/// `quiet` is off.
pub(super) async fn call_showing_progress(
    sb: &Switchboard,
    tool: &str,
    arguments: Value,
    quiet: bool,
) -> Result<switchboard::ToolResult, switchboard::Error> {
    let show = !quiet && std::io::stderr().is_terminal();
    let options = switchboard::CallOptions {
        progress: true,
        ..Default::default()
    };
    let mut call = sb.call_with(tool, arguments, options);
    let Some(progress) = call.progress().cloned() else {
        return call.await;
    };
    let mut bar: Option<ProgressBar> = None;
    let result = loop {
        let next = future::or(async { Err((&mut call).await) }, async {
            match progress.recv().await {
                Ok(p) => Ok(p),
                // The call completed: its result is ready.
                Err(_) => future::pending().await,
            }
        })
        .await;
        match next {
            Err(result) => break result,
            Ok(p) if show => draw(bar.get_or_insert_with(|| new_bar(tool)), &p),
            Ok(_) => {}
        }
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result
}

fn new_bar(tool: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_prefix(tool.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// `{spinner} tool [bar] 3/10: message` with a total, `{spinner} tool 3: message` without.
fn draw(bar: &ProgressBar, p: &Progress) {
    let note = p
        .message
        .as_deref()
        .map_or(String::new(), |m| format!(": {m}"));
    match p.total.filter(|t| *t > 0.0 && t.is_finite()) {
        Some(total) => {
            if bar.length() != Some(STEPS) {
                bar.set_style(style("{spinner} {prefix} [{bar:30}] {msg}"));
                bar.set_length(STEPS);
            }
            let done = (p.progress / total).clamp(0.0, 1.0);
            bar.set_position((done * STEPS as f64) as u64);
            bar.set_message(format!("{}/{}{note}", number(p.progress), number(total)));
        }
        None => {
            if bar.length().is_some() {
                bar.set_style(style("{spinner} {prefix} {msg}"));
                bar.unset_length();
            }
            bar.set_message(format!("{}{note}", number(p.progress)));
        }
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .progress_chars("=> ")
}

/// `3` for whole numbers, `2.5` otherwise.
fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}
