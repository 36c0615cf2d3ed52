//! JSON with comments and trailing commas, as VS Code and Gemini write their settings: the
//! extras are blanked out in place so the strict JSON parser reads what is left, and its
//! error positions still point into the user's own text.

/// Blank out `//` and `/* */` comments and trailing commas (VS Code and Gemini files are
/// JSONC), byte for byte, so serde_json's line and column still point into the original text.
pub(super) fn strip_jsonc(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match (b, bytes.get(i + 1)) {
            (b'"', _) => in_string = true,
            (b'/', Some(b'/')) => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
                continue;
            }
            (b'/', Some(b'*')) => {
                let start = i;
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                // An unterminated comment is left as is: serde_json reports it.
                if i < bytes.len() {
                    i += 2;
                    for o in &mut out[start..i] {
                        if *o != b'\n' {
                            *o = b' ';
                        }
                    }
                }
                continue;
            }
            (b'}' | b']', _) => {
                let mut j = i;
                while j > 0 && out[j - 1].is_ascii_whitespace() {
                    j -= 1;
                }
                if j > 0 && out[j - 1] == b',' {
                    out[j - 1] = b' ';
                }
            }
            _ => {}
        }
        i += 1;
    }
    // Only ASCII bytes (and whole comments) were replaced by spaces: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}
