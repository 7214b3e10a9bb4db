//! Globs over exposed names and URIs: `*` is any sequence of characters (`/` and the separator
//! included), `?` exactly one character, everything else literal. Matching never backtracks.
//!
//! A pattern is cut at its stars into segments of fixed length; the first segment must match at
//! the start, the last at the end, and each one between at its leftmost place after the one
//! before (leftmost is always safe: a later star can absorb whatever an earlier choice leaves).
//! Each text position is tried at most once per segment, so a match costs at most
//! `len(text) × len(pattern)` steps whatever the pattern, where a backtracking matcher is
//! exponential on patterns like `*a*a*a*a*b`.

use std::fmt;

/// A parsed glob; see the module documentation.
#[derive(Clone, PartialEq, Eq)]
pub struct Glob {
    text: String,
    /// The pattern cut at its stars (runs of stars count as one). One segment: no star.
    segments: Vec<Segment>,
}

/// Literal runs and single-character wildcards between two stars.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Segment {
    pieces: Vec<Piece>,
    /// Length in characters (each `?` is one).
    chars: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Literal(String),
    AnyChar,
}

/// Why a pattern is not a glob.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    #[error("a glob must not be empty")]
    Empty,
    #[error("a glob must not start or end with whitespace")]
    Whitespace,
    #[error("{0:?} has no meaning in a glob here (only `*` and `?` are wildcards; character classes, escapes and control characters are refused)")]
    Unsupported(char),
    #[error("`{{a,b}}` alternatives are not supported (write one glob per alternative)")]
    Alternatives,
}

impl Glob {
    /// Parses `pattern`. Refused: the empty pattern, surrounding whitespace, `[`, `]`, `\`,
    /// control characters, and a `{...}` group holding a comma (alternatives); a `{name}` group
    /// without a comma is literal, as in a URI template.
    pub fn new(pattern: &str) -> Result<Glob, GlobError> {
        if pattern.is_empty() {
            return Err(GlobError::Empty);
        }
        if pattern.trim() != pattern {
            return Err(GlobError::Whitespace);
        }
        if let Some(c) = (pattern.chars()).find(|c| matches!(c, '[' | ']' | '\\') || c.is_control()) {
            return Err(GlobError::Unsupported(c));
        }
        if has_alternatives(pattern) {
            return Err(GlobError::Alternatives);
        }
        let segments = pattern.split('*').map(Segment::parse).collect::<Vec<_>>();
        // Runs of stars are one star: drop the empty segments between them (keep both ends).
        let last = segments.len() - 1;
        let segments = (segments.into_iter().enumerate())
            .filter(|(i, s)| *i == 0 || *i == last || s.chars > 0)
            .map(|(_, s)| s)
            .collect();
        Ok(Glob {
            text: pattern.to_string(),
            segments,
        })
    }

    /// Whether some text that starts with `prefix` matches (a star, or the end of `prefix`,
    /// reached before a character of it is refused).
    pub fn may_match_after(&self, prefix: &str) -> bool {
        let mut pattern = self.text.chars();
        for c in prefix.chars() {
            match pattern.next() {
                Some('*') => return true,
                Some('?') => {}
                Some(p) if p == c => {}
                _ => return false,
            }
        }
        true
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `text` matches the whole pattern.
    pub fn matches(&self, text: &str) -> bool {
        self.matches_counting(text, &mut 0)
    }

    /// [`Glob::matches`], adding the characters compared to `steps` (for the tests that check
    /// the cost stays bounded).
    pub(crate) fn matches_counting(&self, text: &str, steps: &mut u64) -> bool {
        let (first, rest) = match self.segments.split_first() {
            Some(split) => split,
            None => return text.is_empty(),
        };
        let Some(mut at) = first.match_at(text, 0, steps) else {
            return false;
        };
        let Some((last, middle)) = rest.split_last() else {
            return at == text.len(); // no star: the one segment is the whole text
        };
        for segment in middle {
            match segment.find_from(text, at, steps) {
                Some(end) => at = end,
                None => return false,
            }
        }
        // The last segment ends the text: it starts `last.chars` characters before the end.
        let Some(start) = start_of_last(text, last.chars) else {
            return false;
        };
        start >= at && last.match_at(text, start, steps) == Some(text.len())
    }
}

/// The byte offset `chars` characters before the end of `text`, if it has that many.
fn start_of_last(text: &str, chars: usize) -> Option<usize> {
    if chars == 0 {
        return Some(text.len());
    }
    text.char_indices().rev().nth(chars - 1).map(|(i, _)| i)
}

fn has_alternatives(pattern: &str) -> bool {
    let mut open = None;
    for (i, c) in pattern.char_indices() {
        match c {
            '{' => open = Some(i),
            '}' => open = None,
            ',' if open.is_some() => return true,
            _ => {}
        }
    }
    false
}

impl Segment {
    fn parse(text: &str) -> Segment {
        let mut pieces = Vec::new();
        let mut chars = 0;
        for (i, part) in text.split('?').enumerate() {
            if i > 0 {
                pieces.push(Piece::AnyChar);
                chars += 1;
            }
            if !part.is_empty() {
                chars += part.chars().count();
                pieces.push(Piece::Literal(part.to_string()));
            }
        }
        Segment { pieces, chars }
    }

    /// Where this segment ends when it starts at byte `at` of `text`, if it matches there.
    fn match_at(&self, text: &str, mut at: usize, steps: &mut u64) -> Option<usize> {
        for piece in &self.pieces {
            let rest = text.get(at..)?;
            match piece {
                Piece::Literal(lit) => {
                    *steps += lit.len() as u64;
                    if !rest.starts_with(lit.as_str()) {
                        return None;
                    }
                    at += lit.len();
                }
                Piece::AnyChar => {
                    *steps += 1;
                    at += rest.chars().next()?.len_utf8();
                }
            }
        }
        Some(at)
    }

    /// The end of the leftmost match starting at or after byte `from`.
    fn find_from(&self, text: &str, from: usize, steps: &mut u64) -> Option<usize> {
        let tail = text.get(from..)?;
        let starts = tail.char_indices().map(|(i, _)| from + i);
        for start in starts.chain(std::iter::once(text.len())) {
            *steps += 1;
            if let Some(end) = self.match_at(text, start, steps) {
                return Some(end);
            }
        }
        None
    }
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", self.text)
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests;
