//! The tokenizer shared by indexing and queries: words split on punctuation, `__`/`_`/`-`/`.`/`/`,
//! camelCase and letter/digit boundaries, lowercased, cheaply ASCII-folded, English stopwords
//! dropped, and a small suffix stemmer (plurals, -ing, -ed, -ion, a final -e) so "creating",
//! "created" and "creates" meet "create".

/// Calls `emit` with each stemmed, non-stopword token of `text`, in order. A camelCase or
/// letter+digit word is emitted whole (lowercased) and as its parts, so "GitHub" finds both
/// "github" and "hub"; `buf` is a reusable scratch string.
pub(super) fn for_each_token(text: &str, buf: &mut String, emit: &mut dyn FnMut(&str)) {
    let mut parts: Vec<(usize, usize)> = Vec::new();
    let mut word = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if !c.is_alphanumeric() {
            chars.next();
            continue;
        }
        // One run of alphanumeric characters: a word, with its camelCase/digit boundaries.
        let mut end = start;
        while let Some(&(i, c)) = chars.peek() {
            if !c.is_alphanumeric() {
                break;
            }
            end = i + c.len_utf8();
            chars.next();
        }
        split_word(&text[start..end], &mut word, &mut parts);
        if parts.len() > 1 {
            emit_one(&word, buf, emit);
        }
        for &(a, b) in &parts {
            emit_one(&word[a..b], buf, emit);
        }
    }
}

/// Folds and lowercases `raw` into `word` and records the byte ranges of its camelCase and
/// letter/digit parts (in `word`; together they cover it).
fn split_word(raw: &str, word: &mut String, parts: &mut Vec<(usize, usize)>) {
    word.clear();
    parts.clear();
    let mut start = 0;
    let mut prev: Option<char> = None;
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if prev.is_some_and(|p| is_boundary(p, c, chars.peek().copied())) {
            parts.push((start, word.len()));
            start = word.len();
        }
        fold_into(c, word);
        prev = Some(c);
    }
    if word.len() > start {
        parts.push((start, word.len()));
    }
}

/// A part boundary between `prev` and `c`: lower→Upper ("getFile"), the last capital of an
/// acronym before a lowercase letter ("HTMLParser"), and letter↔digit ("v2", "2fa").
fn is_boundary(prev: char, c: char, next: Option<char>) -> bool {
    (prev.is_lowercase() && c.is_uppercase())
        || (prev.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase))
        || (prev.is_alphabetic() && c.is_numeric())
        || (prev.is_numeric() && c.is_alphabetic())
}

/// Lowercases `c` and folds the common Latin accents to ASCII.
fn fold_into(c: char, out: &mut String) {
    for l in c.to_lowercase() {
        let folded = match l {
            'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' => "a",
            'ç' | 'ć' | 'č' => "c",
            'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ę' | 'ě' => "e",
            'ì' | 'í' | 'î' | 'ï' | 'ī' => "i",
            'ñ' | 'ń' | 'ň' => "n",
            'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' => "o",
            'ù' | 'ú' | 'û' | 'ü' | 'ū' | 'ů' => "u",
            'ý' | 'ÿ' => "y",
            'ß' => "ss",
            'æ' => "ae",
            'œ' => "oe",
            'ł' => "l",
            'š' | 'ś' => "s",
            'ž' | 'ź' | 'ż' => "z",
            'ř' => "r",
            _ => {
                out.push(l);
                continue;
            }
        };
        out.push_str(folded);
    }
}

fn emit_one(word: &str, buf: &mut String, emit: &mut dyn FnMut(&str)) {
    // Single letters carry no meaning ("a", the "s" of "it's", the "v" of "v2"); digits do.
    if word.chars().count() < 2 && !word.chars().all(|c| c.is_numeric()) {
        return;
    }
    if is_stopword(word) {
        return;
    }
    buf.clear();
    buf.push_str(word);
    stem(buf);
    emit(buf);
}

/// Common English function words, and the politeness and filler a query carries.
const STOPWORDS: &[&str] = &[
    "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "being",
    "but", "by", "can", "could", "did", "do", "does", "doing", "for", "from", "had", "has", "have", "he",
    "her", "here", "him", "his", "how", "if", "in", "into", "is", "it", "its", "just", "let", "me", "might",
    "my", "need", "of", "on", "one", "or", "our", "please", "she", "should", "so", "some", "such", "than",
    "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through", "to",
    "too", "us", "use", "used", "using", "via", "want", "was", "we", "were", "what", "when", "where",
    "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your",
];

pub(super) fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// A light suffix stemmer for lowercase English words; other words pass through unchanged.
pub(super) fn stem(word: &mut String) {
    if !word.is_ascii() || word.len() <= 3 || word.bytes().any(|b| b.is_ascii_digit()) {
        return;
    }
    // Plurals and third person: "entries" → "entry", "classes" → "class", "boxes" → "box".
    if word.ends_with("ies") && word.len() > 4 {
        word.truncate(word.len() - 3);
        word.push('y');
    } else if word.ends_with("sses")
        || word.ends_with("xes")
        || word.ends_with("ches")
        || word.ends_with("shes")
        || word.ends_with("zes")
    {
        word.truncate(word.len() - 2);
    } else if word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us") && !word.ends_with("is") {
        word.truncate(word.len() - 1);
    }
    // Verb forms, then -ion, then a final silent e: "creating", "created", "creation",
    // "create" all become "creat".
    if !strip_verb_suffix(word, "ing", 6) && !strip_verb_suffix(word, "ed", 5) {
        if word.len() >= 7 && word.ends_with("ion") {
            word.truncate(word.len() - 3);
        } else if word.len() >= 5 && word.ends_with('e') {
            word.truncate(word.len() - 1);
        }
    }
}

/// Strips `suffix` when the word is at least `min_len` long and what is left has a vowel and
/// does not end in `e` ("string", "need" and "speed" stay); undoubles a final consonant
/// ("running" → "run", "committed" → "commit", but "adding" → "add").
fn strip_verb_suffix(word: &mut String, suffix: &str, min_len: usize) -> bool {
    if word.len() < min_len || !word.ends_with(suffix) {
        return false;
    }
    let stem = &word[..word.len() - suffix.len()];
    if !stem.bytes().any(|b| b"aeiouy".contains(&b)) || stem.ends_with('e') {
        return false;
    }
    let keep = stem.len();
    word.truncate(keep);
    let bytes = word.as_bytes();
    if keep >= 4 && bytes[keep - 1] == bytes[keep - 2] && b"bdgmnprt".contains(&bytes[keep - 1]) {
        word.truncate(keep - 1);
    }
    true
}
