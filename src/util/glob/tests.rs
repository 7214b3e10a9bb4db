//! Tests for globs: the wildcards, what is refused, agreement with a dynamic-programming
//! reference on random patterns, and bounded cost on hostile patterns.

use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn glob(p: &str) -> Glob {
    Glob::new(p).unwrap_or_else(|e| panic!("{p:?}: {e}"))
}

#[test]
fn stars_cross_slashes_and_separators() {
    let g = glob("everything__*");
    assert!(g.matches("everything__echo"));
    assert!(g.matches("everything__"));
    assert!(g.matches("everything__a__b/c"));
    assert!(!g.matches("everything_echo"));
    assert!(!g.matches("other__everything__echo"));
    let g = glob("mcpmux://everything/*");
    assert!(g.matches("mcpmux://everything/demo://resource/static/document/a.md"));
    assert!(!g.matches("mcpmux://everythingelse/x"));
    let g = glob("everything__trigger-*");
    assert!(g.matches("everything__trigger-long-running-operation"));
    assert!(!g.matches("everything__echo"));
    assert!(glob("*").matches("") && glob("*").matches("anything/at all"));
    assert!(glob("**").matches("x") && glob("a**b").matches("ab") && glob("a**b").matches("a/x/b"));
}

#[test]
fn literals_are_exact_and_question_marks_take_one_character() {
    assert!(glob("echo").matches("echo"));
    assert!(!glob("echo").matches("echo2") && !glob("echo").matches("ech"));
    assert!(glob("e?ho").matches("echo") && glob("e?ho").matches("eého"));
    assert!(!glob("e?ho").matches("eho") && !glob("e?ho").matches("eccho"));
    assert!(glob("*.?").matches("a.b") && !glob("*.?").matches("a.bc"));
    assert!(glob("a*b*c").matches("abc") && glob("a*b*c").matches("aXbYbZc"));
    assert!(!glob("a*b*c").matches("acb"));
    // The last segment may not overlap the first.
    assert!(!glob("ab*ba").matches("aba"));
    assert!(glob("ab*ba").matches("abba"));
    // Dots, dashes, and a URI template's braces are literal.
    assert!(glob("demo://t/{id}").matches("demo://t/{id}"));
    assert!(!glob("demo://t/{id}").matches("demo://t/7"));
    assert!(glob("a.b").matches("a.b") && !glob("a.b").matches("axb"));
}

#[test]
fn unknown_syntax_is_refused() {
    assert_eq!(Glob::new(""), Err(GlobError::Empty));
    assert_eq!(Glob::new(" a*"), Err(GlobError::Whitespace));
    assert_eq!(Glob::new("a* "), Err(GlobError::Whitespace));
    assert_eq!(Glob::new("tool[0-9]"), Err(GlobError::Unsupported('[')));
    assert_eq!(Glob::new("tool]"), Err(GlobError::Unsupported(']')));
    assert_eq!(Glob::new("a\\*"), Err(GlobError::Unsupported('\\')));
    assert_eq!(Glob::new("a\nb"), Err(GlobError::Unsupported('\n')));
    assert_eq!(Glob::new("x__{a,b}"), Err(GlobError::Alternatives));
    assert!(Glob::new("x__{a}").is_ok());
}

/// The reference: a plain dynamic program over (pattern position, text position).
fn reference(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // ok[j] = pattern[..i] matches text[..j]
    let mut ok = vec![false; t.len() + 1];
    ok[0] = true;
    for &pc in &p {
        let mut next = vec![false; t.len() + 1];
        for j in 0..=t.len() {
            next[j] = match pc {
                '*' => ok[j] || (j > 0 && next[j - 1]),
                '?' => j > 0 && ok[j - 1],
                c => j > 0 && ok[j - 1] && t[j - 1] == c,
            };
        }
        ok = next;
    }
    ok[t.len()]
}

#[test]
fn agrees_with_a_reference_on_random_patterns() {
    let alphabet = ['a', 'b', '_', '/', 'é'];
    let mut rng = StdRng::seed_from_u64(15);
    for _ in 0..20_000 {
        let len = rng.random_range(1..8);
        let pattern: String = (0..len)
            .map(|_| match rng.random_range(0..8) {
                0 | 1 => '*',
                2 => '?',
                _ => alphabet[rng.random_range(0..alphabet.len())],
            })
            .collect();
        let text: String = (0..rng.random_range(0..10))
            .map(|_| alphabet[rng.random_range(0..alphabet.len())])
            .collect();
        let g = glob(&pattern);
        assert_eq!(
            g.matches(&text),
            reference(&pattern, &text),
            "{pattern:?} on {text:?}"
        );
    }
}

#[test]
fn hostile_patterns_cost_at_most_text_times_pattern() {
    // Exponential for a backtracking matcher; bounded here by |text| × |pattern| comparisons.
    let text = "a".repeat(4000);
    let mut patterns = vec![format!("{}b", "*a".repeat(30)), format!("*{}*b", "a".repeat(500))];
    patterns.push(format!("{}*", "?".repeat(3000)) + &"*a?".repeat(100) + "b");
    patterns.push("*a".repeat(1000));
    for pattern in &patterns {
        let g = glob(pattern);
        let mut steps = 0;
        let matched = g.matches_counting(&text, &mut steps);
        assert_eq!(matched, pattern.ends_with('a'), "{pattern:.40}");
        let bound = (text.len() as u64 + 1) * (pattern.len() as u64 + 1);
        assert!(steps <= bound, "{steps} steps > {bound} for {pattern:.40}");
    }
    // And a hostile name against an ordinary pattern.
    let name = format!("everything__{}", "_".repeat(100_000));
    let mut steps = 0;
    assert!(!glob("*__*__x").matches_counting(&name, &mut steps));
    assert!(steps <= (name.len() as u64 + 1) * 8);
}

#[test]
fn a_glob_may_match_after_a_prefix_until_a_character_of_it_is_refused() {
    assert!(glob("time__*").may_match_after("time__"));
    assert!(glob("time__now").may_match_after("time__"));
    assert!(glob("t?me*").may_match_after("time__"));
    assert!(glob("*secret").may_match_after("anything__"));
    assert!(glob("ti").may_match_after("") && glob("tim").may_match_after("ti"));
    assert!(!glob("ti").may_match_after("time__"));
    assert!(!glob("jira__*").may_match_after("time__"));
    assert!(!glob("mcpmux://docs/*").may_match_after("mcpmux://time/"));
}
