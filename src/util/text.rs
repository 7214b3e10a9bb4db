//! Text a host sent, echoed back in an error message: clipped, so a 1 MiB method name or URI
//! does not come back whole.

use std::borrow::Cow;

/// The most characters of a host's text an error message repeats.
pub const ECHO_CHARS: usize = 128;

/// `text` cut to [`ECHO_CHARS`] characters, with "…" when something was cut.
pub fn clip(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(ECHO_CHARS) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_clipped_on_a_character_boundary() {
        assert_eq!(clip("tools/call"), "tools/call");
        let exact = "é".repeat(ECHO_CHARS);
        assert_eq!(clip(&exact), exact.as_str());
        let long = "é".repeat(1 << 20);
        let clipped = clip(&long);
        assert_eq!(clipped.chars().count(), ECHO_CHARS + 1);
        assert!(clipped.ends_with("é…"));
    }
}
