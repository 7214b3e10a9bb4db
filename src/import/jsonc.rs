//! JSON with comments (VS Code's and Cursor's `mcp.json` are JSONC): `//` and `/* */` comments
//! and trailing commas blanked out in place, so a JSON parser's line and column still point into
//! the file as written.

/// `text` with comments and trailing commas replaced by spaces (newlines kept), byte for byte
/// the same length; strings are left alone. An unterminated block comment is blanked to the end.
pub fn strip(text: &str) -> String {
    let mut out = text.as_bytes().to_vec();
    blank_comments(&mut out);
    blank_trailing_commas(&mut out);
    // Only ASCII bytes outside strings were replaced by ASCII spaces, and comments are blanked
    // whole (every byte of a multi-byte character in them), so the bytes stay UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

fn blank_comments(b: &mut [u8]) {
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => i = skip_string(b, i),
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    b[i] = b' ';
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let start = i;
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                let end = (i + 2).min(b.len());
                for byte in &mut b[start..end] {
                    if *byte != b'\n' {
                        *byte = b' ';
                    }
                }
                i = end;
            }
            _ => i += 1,
        }
    }
}

/// A `,` whose next non-blank byte closes an object or array.
fn blank_trailing_commas(b: &mut [u8]) {
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => i = skip_string(b, i),
            b',' => {
                let next = b[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
                if matches!(next, Some(b'}' | b']')) {
                    b[i] = b' ';
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
}

/// The index just past the string starting at `start` (a `"`), or the end of the text.
fn skip_string(b: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::strip;

    #[test]
    fn comments_and_trailing_commas_become_blanks_in_place() {
        let text = "{\n  // a server\n  \"a\": \"x//y\", /* é\n */ \"b\": [1, 2,],\n}\n";
        let stripped = strip(text);
        assert_eq!(stripped.len(), text.len());
        assert_eq!(stripped.matches('\n').count(), text.matches('\n').count());
        let v: serde_json::Value = serde_json::from_str(&stripped).expect("valid JSON");
        assert_eq!(v["a"], "x//y");
        assert_eq!(v["b"], serde_json::json!([1, 2]));
    }

    #[test]
    fn strings_keep_their_slashes_commas_and_escaped_quotes() {
        let text = r#"{"a": "q\" // not a comment, ]", "b": ",}"}"#;
        assert_eq!(strip(text), text);
    }

    #[test]
    fn an_error_after_a_comment_keeps_its_line_and_column() {
        let text = "{ /* one\n two */ \"a\": tru }";
        let err = serde_json::from_str::<serde_json::Value>(&strip(text)).unwrap_err();
        assert_eq!(err.line(), 2);
        assert!(err.column() >= 14, "{err}");
    }
}
