//! The admin page in a real browser (Debian's chromium, driven by playwright-core): it goes live,
//! shows a host's session, sees an upstream go down (its error and the failed call among the
//! recent ones) and come back, lists a tool added while it is open (a name that is markup shown as text), and unfolds a
//! real server's tool to its schema. The screenshot it takes is the one in
//! `docs/admin.png` (copied there by hand when the page changes).

use crate::support::browser::AdminPage;
use crate::support::mcp::RawSession;
use crate::support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_follows_an_upstream_down_and_back_and_shows_a_tools_schema() {
    let _suite = crate::suite::enter(module_path!());
    let p = peers();
    let dir = scratch_dir("admin-page");
    let down = dir.join("down");
    // A server that fails to start while the file `down` exists.
    let script = format!(
        "if [ -e {down:?} ]; then echo 'flaky: its database is down' >&2; exit 1; fi; exec {:?} --name flaky",
        path_str(test_server::test_server_bin()),
    );
    let (node, args) = p.everything_stdio_cmd();
    let servers = format!(
        "[servers.everything]\ncommand = {node:?}\nargs = {}\n\n\
         [servers.flaky]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\n",
        toml_list(&args)
    );
    let gw = boot_gateway(&servers, "").await;
    let url = format!("http://{}/admin", gw.local_addr());
    let mut page = AdminPage::open(&url);
    page.run("ready everything flaky").await;

    let host = RawSession::open(&gw.url(), json!({})).await;
    page.run("session raw-test").await;
    // The session is named as the access lines and audit records name it.
    let log_id = crate::support::session_digest(&host.sid);
    page.run(&format!("session {log_id}")).await;

    // It goes down: the crash, then start attempts that fail while `down` exists.
    std::fs::write(&down, "").expect("write the flag");
    let crashed = host
        .call("tools/call", json!({"name": "flaky__crash", "arguments": {}}))
        .await;
    assert!(crashed.get("error").is_some(), "{crashed}");
    page.run("down flaky").await;
    // The host's call that the crash ended is among the recent errors too.
    page.run("error tools/call flaky__crash failed: JSON-RPC error")
        .await;
    std::fs::remove_file(&down).expect("remove the flag");
    page.run("back flaky").await;

    // A tool appears while the page is open; its name is markup, which the page shows as text.
    let markup = "<img/src=x/onerror=window.__xss=1>";
    let added = host.tool_text("flaky__add_tool", json!({"name": markup})).await;
    assert_eq!(added, "added");
    // Listed under a name every model API accepts; its original (the markup) is its title and
    // `_meta["mcpmux/original"]`, which the page must show as text too.
    // (The server announces it with list_changed; mcpmux fetches the list again.)
    let mut exposed = None;
    for _ in 0..100 {
        let (tools, _) = host.list_all("tools/list", "tools").await;
        exposed = (tools.iter())
            .find(|t| t["_meta"]["mcpmux/original"]["name"] == markup)
            .and_then(|t| t["name"].as_str().map(str::to_string));
        if exposed.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let exposed = exposed.expect("the markup tool is listed within 10 s");
    assert!(
        exposed.starts_with("flaky__") && !exposed.contains('<'),
        "{exposed}"
    );
    page.run(&format!("listed {exposed}")).await;

    page.run("schema everything everything__echo Message to echo")
        .await;
    let shot = dir.join("admin.png");
    page.run(&format!("shot {}", path_str(&shot))).await;
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG image");
    page.close().await;
    gw.stop().await;
}
