//! The call load both benchmarks make: `echo` calls checked for their answer, sequentially or
//! from 64 callers pulling call numbers from one counter. Included by `shell_bench` and
//! `tokio_embed` with `#[path]`, so both measure exactly the same calls.

use serde_json::json;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use switchboard::Switchboard;

/// Calls in flight in the parallel phase.
pub const IN_FLIGHT: usize = 64;

/// One `echo` call through `tool` (a qualified name), its text checked.
pub async fn echo(sb: &Switchboard, tool: &str, i: usize) {
    let text = format!("call {i}");
    let r = sb
        .call(tool, json!({ "text": text }))
        .await
        .expect("echo call");
    assert_eq!(r.render_text(), text);
}

/// `IN_FLIGHT` callers of `tool`, together making `calls` calls.
pub fn callers(
    sb: &Switchboard,
    tool: &'static str,
    calls: usize,
) -> Vec<impl Future<Output = ()> + Send + 'static> {
    let next = Arc::new(AtomicUsize::new(0));
    (0..IN_FLIGHT)
        .map(|_| {
            let (sb, next) = (sb.clone(), next.clone());
            async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= calls {
                        break;
                    }
                    echo(&sb, tool, i).await;
                }
            }
        })
        .collect()
}
