//! The `WWW-Authenticate` of a protected resource's 401 or 403 (RFC 6750 §3, RFC 9728 §5.1):
//! the Bearer challenge's `resource_metadata`, `scope` and `error`, from a header that may
//! carry several schemes, quoted or bare values, and odd spacing.

/// What a Bearer challenge asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Challenge {
    /// RFC 9728: where the protected resource metadata is.
    pub resource_metadata: Option<String>,
    /// The scopes the request needs (space separated).
    pub scope: Option<String>,
    /// RFC 6750 error code: `invalid_token`, `insufficient_scope`, ...
    pub error: Option<String>,
}

impl Challenge {
    /// A 403 that asks for more scope (step-up).
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// The Bearer challenge of one `WWW-Authenticate` value, `None` when it has none.
pub fn parse_www_authenticate(value: &str) -> Option<Challenge> {
    let mut lexer = Lexer { rest: value };
    let mut in_bearer = false;
    let mut found: Option<Challenge> = None;
    loop {
        lexer.skip_separators();
        let Some(token) = lexer.token() else { break };
        lexer.skip_spaces();
        if lexer.eat('=') {
            // An auth-param (or the tail of a token68: `abc==`).
            lexer.skip_spaces();
            let value = lexer.value();
            if in_bearer {
                let challenge = found.get_or_insert_with(Challenge::default);
                let value = value.filter(|v| !v.is_empty());
                match token.to_ascii_lowercase().as_str() {
                    "resource_metadata" => challenge.resource_metadata = value,
                    "scope" => challenge.scope = value.map(|v| normalise_scope(&v)).filter(|s| !s.is_empty()),
                    "error" => challenge.error = value,
                    _ => {}
                }
            }
        } else if found.is_some() && in_bearer {
            // The next scheme after the Bearer challenge: done.
            break;
        } else {
            in_bearer = token.eq_ignore_ascii_case("bearer");
            if in_bearer {
                found.get_or_insert_with(Challenge::default);
            }
        }
    }
    found
}

/// Scopes as one space-separated list without repeats of whitespace.
fn normalise_scope(scope: &str) -> String {
    scope.split_whitespace().collect::<Vec<_>>().join(" ")
}

struct Lexer<'a> {
    rest: &'a str,
}

impl<'a> Lexer<'a> {
    fn skip_spaces(&mut self) {
        self.rest = self.rest.trim_start_matches([' ', '\t']);
    }

    fn skip_separators(&mut self) {
        self.rest = self.rest.trim_start_matches([' ', '\t', ',']);
    }

    fn eat(&mut self, c: char) -> bool {
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    /// A token: up to whitespace, `,`, `=` or a quote.
    fn token(&mut self) -> Option<&'a str> {
        let end = self
            .rest
            .find([' ', '\t', ',', '=', '"'])
            .unwrap_or(self.rest.len());
        if end == 0 {
            // A stray character: skip it so the loop moves on.
            let mut chars = self.rest.chars();
            chars.next()?;
            self.rest = chars.as_str();
            return Some("");
        }
        let (token, rest) = self.rest.split_at(end);
        self.rest = rest;
        Some(token)
    }

    /// A quoted string (with `\` escapes) or a bare token; `None` for an empty bare value.
    fn value(&mut self) -> Option<String> {
        if self.eat('"') {
            let mut out = String::new();
            let mut chars = self.rest.char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            out.push(escaped);
                        }
                    }
                    '"' => {
                        self.rest = &self.rest[i + 1..];
                        return Some(out);
                    }
                    _ => out.push(c),
                }
            }
            // Unterminated: take what there is.
            self.rest = "";
            return Some(out);
        }
        let end = self.rest.find([',', ' ', '\t']).unwrap_or(self.rest.len());
        let (value, rest) = self.rest.split_at(end);
        self.rest = rest;
        // A token68's padding (`abc==`) leaves `=`s: not a value.
        let value = value.trim_start_matches('=');
        (!value.is_empty()).then(|| value.to_string())
    }
}

#[cfg(test)]
#[path = "challenge_tests.rs"]
mod tests;
