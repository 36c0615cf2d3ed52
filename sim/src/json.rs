//! Reading the simulator's `serde_json::Value`s without allocating: `Value::pointer` builds a
//! new `String` for every token it looks up (to undo `~0`/`~1` escapes), which made it one of
//! the simulator's larger costs; [`At::at`] follows the same pointer and copies only a token
//! that holds an escape.

use serde_json::Value;
use std::borrow::Cow;

/// [`Value::pointer`], without an allocation per token.
pub(crate) trait At {
    /// The value `pointer` (RFC 6901) names, as `Value::pointer` finds it.
    fn at(&self, pointer: &str) -> Option<&Value>;
}

impl At for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        if pointer.is_empty() {
            return Some(self);
        }
        let rest = pointer.strip_prefix('/')?;
        rest.split('/').try_fold(self, |v, token| {
            let token: Cow<str> = if token.contains('~') {
                Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
            } else {
                Cow::Borrowed(token)
            };
            match v {
                Value::Object(map) => map.get(token.as_ref()),
                Value::Array(list) => index(&token).and_then(|i| list.get(i)),
                _ => None,
            }
        })
    }
}

/// An array index as RFC 6901 writes it: digits, no sign, no leading zero.
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::At;
    use serde_json::json;

    #[test]
    fn at_finds_what_pointer_finds() {
        let v = json!({
            "a": {"b": [10, {"c": "x"}], "d/e": 1, "f~g": 2, "": 3},
            "h": null,
        });
        for p in [
            "", "/", "/a", "/a/b", "/a/b/0", "/a/b/1/c", "/a/b/2", "/a/b/01", "/a/b/+1", "/a/b/-1",
            "/a/d~1e", "/a/f~0g", "/a/d/e", "/h", "/h/x", "/nope", "a", "/a/",
        ] {
            assert_eq!(v.at(p), v.pointer(p), "{p}");
        }
    }
}
