use super::tokens::{for_each_token, stem};
use super::*;

fn tool(name: &str, description: &str) -> String {
    serde_json::json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": {}}
    })
    .to_string()
}

fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = String::new();
    for_each_token(text, &mut buf, &mut |t| out.push(t.to_owned()));
    out
}

fn stemmed(word: &str) -> String {
    let mut w = word.to_owned();
    stem(&mut w);
    w
}

fn all(_: usize) -> bool {
    true
}

fn positions(hits: &[Hit]) -> Vec<usize> {
    hits.iter().map(|h| h.position).collect()
}

#[test]
fn names_split_on_separators_camel_case_and_digits() {
    assert_eq!(
        tokens("git__get_file.contents-v2/readMe"),
        ["git", "get", "file", "content", "v2", "2", "readm", "read"]
    );
    assert_eq!(tokens("HTMLParser"), ["htmlparser", "html", "parser"]);
    assert_eq!(tokens("The file, and a name"), ["file", "name"]);
}

#[test]
fn stems_meet_across_inflections() {
    for group in [
        ["create", "creates", "created", "creating"],
        ["list", "lists", "listed", "listing"],
        ["entry", "entries", "entry", "entry"],
        ["image", "images", "image", "image"],
        ["commit", "commits", "committed", "committing"],
        ["navigate", "navigates", "navigated", "navigation"],
    ] {
        let stems: Vec<String> = group.iter().map(|w| stemmed(w)).collect();
        assert!(stems.iter().all(|s| s == &stems[0]), "{group:?} → {stems:?}");
    }
    // Words that only look inflected keep their shape.
    for word in ["string", "status", "process", "add", "need", "analysis"] {
        assert_eq!(stemmed(word), word);
    }
    assert_eq!(stemmed("adding"), "add");
    assert_eq!(stemmed("running"), "run");
}

#[test]
fn the_tool_named_for_the_query_ranks_first() {
    let tools = [
        tool("fs__write_file", "Write text to a file on disk."),
        tool("fs__read_file", "Read the complete contents of a file from disk."),
        tool("web__fetch", "Fetch a URL and return its contents."),
    ];
    let index = SearchIndex::new(tools.iter().map(String::as_str));
    assert_eq!(index.len(), 3);
    let hits = index.search("read a file", 5, &all);
    assert_eq!(hits[0].position, 1, "{hits:?}");
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    let hits = index.search("fetching urls", 5, &all);
    assert_eq!(positions(&hits), [2]);
}

#[test]
fn name_and_title_weigh_more_than_parameters() {
    let with_param = serde_json::json!({
        "name": "a__other",
        "description": "Does something else.",
        "inputSchema": {"properties": {"screenshot": {"description": "screenshot format"}}}
    })
    .to_string();
    let titled = serde_json::json!({
        "name": "b__capture",
        "title": "Screenshot",
        "description": "Capture the page."
    })
    .to_string();
    let index = SearchIndex::new([with_param.as_str(), titled.as_str()]);
    assert_eq!(positions(&index.search("screenshot", 5, &all)), [1, 0]);
}

#[test]
fn hidden_tools_are_filtered_before_the_limit() {
    let tools: Vec<String> = (0..10)
        .map(|i| tool(&format!("s__delete_{i}"), "Delete an item."))
        .collect();
    let index = SearchIndex::new(tools.iter().map(String::as_str));
    // The best matches are all equal; only odd positions are visible: the limit takes 3 of them.
    let hits = index.search("delete", 3, &|p| p % 2 == 1);
    assert_eq!(positions(&hits), [1, 3, 5]);
    assert!(index.search("delete", 3, &|_| false).is_empty());
}

#[test]
fn ties_are_broken_by_position() {
    let tools = [
        tool("x__alpha", "Send a message."),
        tool("y__beta", "Send a message."),
        tool("z__gamma", "Send a message."),
    ];
    let index = SearchIndex::new(tools.iter().map(String::as_str));
    let hits = index.search("send message", 10, &all);
    assert_eq!(positions(&hits), [0, 1, 2]);
    assert_eq!(hits[0].score, hits[2].score);
    assert_eq!(positions(&index.search("send message", 2, &all)), [0, 1]);
}

#[test]
fn empty_stopword_and_unknown_queries_find_nothing() {
    let tools = [tool("a__read_file", "Read a file.")];
    let index = SearchIndex::new(tools.iter().map(String::as_str));
    for query in ["", "   ", "the of and to", "?!", "zzzunknown"] {
        assert!(index.search(query, 5, &all).is_empty(), "{query:?}");
    }
    assert!(index.search("read", 0, &all).is_empty());
    assert!(SearchIndex::new([]).search("read", 5, &all).is_empty());
}

#[test]
fn synonyms_find_differently_worded_tools_below_exact_words() {
    let tools = [
        tool("a__delete_item", "Delete an item."),
        tool("b__remove_item", "Remove an item."),
    ];
    let index = SearchIndex::new(tools.iter().map(String::as_str));
    let hits = index.search("remove", 5, &all);
    assert_eq!(positions(&hits), [1, 0]);
    assert!(hits[0].score > hits[1].score);
}

#[test]
fn unicode_is_folded_and_never_splits_a_character() {
    let tools = [
        tool("geo__café_finder", "Trouve un café à Zürich."),
        tool("jp__東京", "東京 の 天気"),
    ];
    let index = SearchIndex::new(tools.iter().map(String::as_str));
    assert_eq!(positions(&index.search("CAFE zurich", 5, &all)), [0]);
    assert_eq!(positions(&index.search("東京", 5, &all)), [1]);
    // A query cut at the byte cap lands inside a multibyte character without panicking.
    let long = "東".repeat(MAX_QUERY_BYTES);
    assert!(index.search(&long, 5, &all).is_empty());
}

#[test]
fn huge_queries_and_tools_are_bounded() {
    let huge = "word ".repeat(100_000);
    let tools = [tool("a__huge", &huge), tool("b__word", "A word.")];
    let index = SearchIndex::new(tools.iter().map(String::as_str));
    let hits = index.search(&format!("{huge} word"), 5, &all);
    assert_eq!(hits.len(), 2);
    // Only the first MAX_QUERY_TERMS distinct terms count: a term past them finds nothing.
    let many: String = (0..MAX_QUERY_TERMS)
        .map(|i| format!("filler{i} "))
        .collect::<String>()
        + "word";
    assert!(index.search(&many, 5, &all).is_empty());
}

#[test]
fn malformed_tools_keep_their_position() {
    let good = tool("a__read_file", "Read a file.");
    let index = SearchIndex::new(["not json", "[1,2]", good.as_str()]);
    assert_eq!(index.len(), 3);
    assert_eq!(positions(&index.search("read", 5, &all)), [2]);
}

#[test]
fn the_index_is_shareable_and_debug_stays_small() {
    fn shareable<T: Send + Sync + std::fmt::Debug>() {}
    shareable::<SearchIndex>();
    let tools = [tool("a__read_file", &"long text ".repeat(1000))];
    let index = SearchIndex::new(tools.iter().map(String::as_str));
    assert!(format!("{index:?}").len() < 100);
}
