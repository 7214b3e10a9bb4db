// Drives mcpmux's admin page in Debian's chromium with playwright-core, one command per stdin
// line, answering each on stdout ("ok <command>" or "error <why>", then it exits 1):
//   ready NAME...            every named upstream's row shows `ready`, and the stream is live
//   down NAME                the row leaves `ready` and the recent errors name the upstream
//   back NAME                the row is `ready` again with at least one restart
//   session CLIENT           a session row shows the client's name
//   error TEXT...            the recent errors list a line containing TEXT
//   listed TOOL              the catalog lists the tool (as text: a name that is markup stays text)
//   schema SERVER TOOL TEXT  unfold the server's catalog and the tool: its schema shows TEXT
//   drift SERVER TOOL TEXT   the changed tool definitions list SERVER/TOOL with a diff showing TEXT
//   approve SERVER TOOL      click its approve button: it leaves the list
//   shot PATH                a screenshot of the page
//   quit
// Usage: node admin_page.mjs URL   (env MCPMUX_PLAYWRIGHT: the playwright-core package directory)
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const [url] = process.argv.slice(2);
const pkg = process.env.MCPMUX_PLAYWRIGHT;
const { chromium } = await import(pathToFileURL(path.join(pkg, "index.mjs")).href);
const WAIT = { timeout: 30_000 };

const browser = await chromium.launch({
  executablePath: process.env.MCPMUX_CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
const problems = [];
page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
page.on("console", (msg) => {
  if (msg.type() === "error") problems.push(`console error: ${msg.text()}`);
});
await page.goto(url);

const row = (name) => `tr[data-upstream="${name}"]`;
const phase = async (name) => page.getAttribute(`${row(name)} .badge`, "data-state");

async function run(words) {
  const [command, ...args] = words;
  switch (command) {
    case "ready":
      await page.waitForSelector('#live[data-state="live"]', WAIT);
      for (const name of args) await page.waitForSelector(`${row(name)} .badge[data-state="ready"]`, WAIT);
      return;
    case "down": {
      const [name] = args;
      await page.waitForFunction(
        (sel) => {
          const badge = document.querySelector(`${sel} .badge`);
          return badge && badge.dataset.state !== "ready";
        },
        row(name),
        WAIT,
      );
      await page.waitForFunction(
        (name) => [...document.querySelectorAll("#errors li b")].some((b) => b.textContent === name),
        name,
        WAIT,
      );
      return;
    }
    case "back": {
      const [name] = args;
      await page.waitForSelector(`${row(name)} .badge[data-state="ready"]`, WAIT);
      const restarts = Number(await page.textContent(`${row(name)} td:nth-child(5)`));
      if (!(restarts >= 1)) throw new Error(`${name}: ${restarts} restarts shown`);
      return;
    }
    case "session":
      await page.waitForFunction(
        (client) => [...document.querySelectorAll("#sessions td")].some((td) => td.textContent.startsWith(client)),
        args[0],
        WAIT,
      );
      return;
    case "error": {
      const text = args.join(" ");
      await page.waitForFunction(
        (text) => [...document.querySelectorAll("#errors li")].some((li) => li.textContent.includes(text)),
        text,
        WAIT,
      );
      return;
    }
    case "listed": {
      const [tool] = args;
      await page.waitForFunction(
        (tool) => [...document.querySelectorAll("#catalog details.item")].some((d) => d.dataset.name === tool),
        tool,
        WAIT,
      );
      const injected = await page.evaluate(() => document.querySelectorAll("#catalog img").length + (window.__xss ? 1 : 0));
      if (injected !== 0) throw new Error(`the tool's name was taken as markup (${injected})`);
      return;
    }
    case "schema": {
      const [server, tool, ...text] = args;
      await page.click(`details[data-server="${server}"] > summary`);
      await page.click(`details[data-name="${tool}"] > summary`);
      const shown = await page.textContent(`details[data-name="${tool}"] pre`);
      if (!shown.includes(text.join(" "))) throw new Error(`${tool}'s schema does not show ${text.join(" ")}: ${shown}`);
      // The next catalog or overview update must keep it unfolded.
      await page.waitForTimeout(1500);
      if (!(await page.isVisible(`details[data-name="${tool}"] pre`))) throw new Error("the schema folded again");
      return;
    }
    case "drift": {
      const [server, tool, ...text] = args;
      await page.waitForFunction(
        ([heading, text]) =>
          [...document.querySelectorAll("#drifts .drift")].some(
            (d) => d.querySelector("h3").textContent.startsWith(heading) && d.querySelector("pre").textContent.includes(text),
          ),
        [`${server}/${tool}:`, text.join(" ")],
        WAIT,
      );
      if (!(await page.isVisible("#drifts-section"))) throw new Error("the drifts section is hidden");
      return;
    }
    case "approve": {
      const [server, tool] = args;
      await page.click(`#drifts button:has-text("approve ${server}/${tool}")`);
      await page.waitForFunction(
        (heading) => ![...document.querySelectorAll("#drifts .drift h3")].some((h) => h.textContent.startsWith(heading)),
        `${server}/${tool}:`,
        WAIT,
      );
      return;
    }
    case "shot":
      await page.screenshot({ path: args[0] });
      return;
    default:
      throw new Error(`unknown command ${command}`);
  }
}

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  const words = line.trim().split(/\s+/);
  if (words[0] === "quit") break;
  try {
    await run(words);
    if (problems.length) throw new Error(problems.join("; "));
    console.log(`ok ${words[0]}`);
  } catch (err) {
    const state = await page.content().catch(() => "");
    console.log(`error ${words[0]}: ${String(err.message).split("\n")[0]}`);
    console.error(state.slice(0, 4000));
    await browser.close();
    process.exit(1);
  }
}
await browser.close();
process.exit(0);
