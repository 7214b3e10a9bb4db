use super::*;

fn c<'a>(server: &'a str, exposed: &'a str) -> Candidate<'a> {
    Candidate {
        server,
        original: exposed,
        exposed,
    }
}

/// The Claude/OpenAI rule and the Gemini rule, checked by hand.
fn accepted_everywhere(name: &str, budget: usize) -> bool {
    let claude = (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c));
    let gemini = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
    claude && gemini && name.len() <= budget
}

#[test]
fn a_name_that_fits_is_kept_as_it_is() {
    let names = ["echo", "a__get-thing", "_private", "x".repeat(64).leak()];
    let candidates: Vec<Candidate> = names.iter().map(|n| c("s", n)).collect();
    assert_eq!(fit(&candidates, 64), names.map(String::from).to_vec());
}

#[test]
fn characters_outside_the_alphabet_are_mapped_readably() {
    assert_eq!(map("files.read"), ("files_read".into(), false));
    assert_eq!(map("fs/read file"), ("fs_read_file".into(), false));
    assert_eq!(map("café_überprüfen"), ("cafe_uberprufen".into(), false));
    assert_eq!(map("数据"), ("__".into(), true));
    assert_eq!(map("3d-print"), ("_3d-print".into(), false));
    assert_eq!(map("-x"), ("_-x".into(), false));
    assert_eq!(map(""), ("_".into(), false));
    let got = fit(&[c("s", "files.read"), c("s", "café_überprüfen")], 64);
    assert_eq!(got, ["files_read", "cafe_uberprufen"]);
}

#[test]
fn long_lossy_and_clashing_names_get_a_head_and_a_stable_hash() {
    let long = format!("ns__{}", "very_long_tool_name_".repeat(8));
    let candidates = [
        c("srv", &long),
        c("srv", "ns__数据"),
        c("srv", "ns__files.read"),
        c("other", "ns__files_read"),
    ];
    let names = fit(&candidates, 64);
    for name in &names {
        assert!(accepted_everywhere(name, 64), "{name}");
    }
    let hash = |server: &str, original: &str| digest(server, original)[..8].to_string();
    assert_eq!(names[0], format!("{}_{}", &long[..55], hash("srv", &long)));
    assert_eq!(names[1], format!("ns_____{}", hash("srv", "ns__数据")));
    // The valid name keeps its name; the one mapped onto it gets a hash.
    assert_eq!(names[3], "ns__files_read");
    assert_eq!(
        names[2],
        format!("ns__files_read_{}", hash("srv", "ns__files.read"))
    );
    // The same set in another order: the same names.
    let mut reversed = candidates;
    reversed.reverse();
    let mut again = fit(&reversed, 64);
    again.reverse();
    assert_eq!(again, names);
}

#[test]
fn two_names_that_map_alike_both_get_a_hash_and_a_smaller_budget_is_kept() {
    let names = fit(&[c("s", "a.b"), c("s", "a/b"), c("s", "a b")], 16);
    assert_eq!(names.iter().collect::<HashSet<_>>().len(), 3, "{names:?}");
    for name in &names {
        assert!(name.starts_with("a_b_") && name.len() == 12, "{name}");
        assert!(accepted_everywhere(name, 16), "{name}");
    }
    let long = fit(&[c("s", &"x".repeat(100))], 16);
    assert_eq!(long[0].len(), 16);
    assert!(long[0].starts_with("xxxxxxx_"), "{long:?}");
}

#[test]
fn a_hash_that_meets_another_name_grows_until_unique() {
    let long = "t".repeat(80);
    let first = fit(&[c("s", &long)], 20).remove(0);
    // Another candidate already holds exactly that name: the hash grows by two digits.
    let names = fit(&[c("s", &long), c("z", &first)], 20);
    assert_eq!(names[1], first);
    assert_ne!(names[0], first);
    assert_eq!(names[0].len(), 20);
    assert!(names[0].ends_with(&digest("s", &long)[..10]), "{names:?}");
}

#[test]
fn the_hash_depends_on_the_server() {
    let long = "q".repeat(90);
    let a = fit(&[c("a", &long)], 64);
    let b = fit(&[c("b", &long)], 64);
    assert_ne!(a, b);
}
