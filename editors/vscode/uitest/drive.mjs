// Drives code-server in headless Debian Chromium through the Autocomp scenario and saves a
// screenshot at each step. Started by run.sh, which passes everything through the environment.
// Each step waits for what a person would see (status bar text, a toast, a diff editor), and
// fails with a screenshot named after the step when it does not appear in time.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    throw new Error(`drive.mjs: ${name} is not set (run it through uitest/run.sh)`);
  }
  return value;
};
const URL = env("URL");
const FILE = env("FILE");
const LINE = Number(env("LINE"));
const SHOTS = env("SHOTS");
const WS_FILE = env("WS_FILE");
const ORIGINAL = env("ORIGINAL");
const SETTINGS = env("SETTINGS");
const STORE2 = env("STORE2");
const FINISH_TIMEOUT = Number(process.env.FINISH_TIMEOUT || "600") * 1000;
// With the scripted double, a file its candidate evaluations wait for (run.sh --double): the
// first run is held mid-search until it is cancelled, then the gate opens for the second.
const GATE = process.env.GATE || "";
const { chromium } = createRequire(import.meta.url)(env("PLAYWRIGHT"));

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
const started = Date.now();
const say = (text) => console.log(`[uitest ${((Date.now() - started) / 1000).toFixed(1)}s] ${text}`);
page.on("pageerror", (error) => console.log(`[page error] ${error.message}`));

let shotNumber = 0;
async function shot(name, what) {
  shotNumber += 1;
  const file = join(SHOTS, `${String(shotNumber).padStart(2, "0")}-${name}.png`);
  await page.screenshot({ path: file });
  say(`screenshot ${file}: ${what}`);
  return file;
}

/** Run `body`; on failure save a screenshot named after the step, then rethrow. */
async function step(name, body) {
  say(`step: ${name}`);
  try {
    return await body();
  } catch (error) {
    await page.screenshot({ path: join(SHOTS, `failed-${name}.png`) }).catch(() => undefined);
    throw new Error(`step "${name}" failed: ${error.message}`);
  }
}

const statusItem = () => page.locator(".statusbar-item", { hasText: /Autocomp \S+: / }).first();

async function statusText() {
  return ((await statusItem().textContent({ timeout: 1000 }).catch(() => "")) || "").replace(/\s+/g, " ").trim();
}

async function waitStatus(pattern, timeout, what) {
  const deadline = Date.now() + timeout;
  let last = "";
  while (Date.now() < deadline) {
    last = await statusText();
    if (pattern.test(last)) {
      say(`status bar: ${last}`);
      return last;
    }
    await page.waitForTimeout(250);
  }
  throw new Error(`status bar never showed ${what} (last: "${last}")`);
}

async function runCommand(title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 10000 });
  await input.fill(`>${title}`);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first().waitFor({ timeout: 10000 });
  await page.keyboard.press("Enter");
}

/** Choose the quick pick row containing `text` (the pick must be open). */
async function pick(text) {
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 15000 });
  await input.fill(text);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: text }).first().waitFor({ timeout: 15000 });
  await page.keyboard.press("Enter");
}

async function toast(pattern, timeout) {
  const loc = page.locator(".notification-toast .notification-list-item-message", { hasText: pattern }).first();
  await loc.waitFor({ state: "visible", timeout });
  return ((await loc.innerText()) || "").replace(/\s+/g, " ").trim();
}

async function clearToasts() {
  await runCommand("Notifications: Clear All Notifications").catch(() => undefined);
}

try {
  await step("open-workbench", async () => {
    await page.goto(URL);
    await page.locator(".monaco-workbench").waitFor({ timeout: 90000 });
    await page.locator(".explorer-folders-view, .explorer-viewlet").first().waitFor({ timeout: 60000 });
  });

  await step("open-example", async () => {
    await page.keyboard.press("Control+P");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible", timeout: 10000 });
    await input.fill(FILE);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: FILE }).first().waitFor({ timeout: 15000 });
    await page.keyboard.press("Enter");
    await page.locator(`.tab[data-resource-name="${FILE}"], .tab:has-text("${FILE}")`).first().waitFor({ timeout: 15000 });
    await page.locator(".monaco-editor .view-lines").first().waitFor({ timeout: 15000 });
    // Put the cursor inside the kernel.
    await page.keyboard.press("Control+G");
    await page.locator(".quick-input-widget input").fill(`:${LINE}`);
    await page.keyboard.press("Enter");
    await page.waitForTimeout(2000); // let the extension activate and the server start
    await shot("example-open", `the example ${FILE} open, cursor on line ${LINE}`);
  });

  await step("first-run-progress", async () => {
    await runCommand("Autocomp: Optimize Kernel");
    await waitStatus(/optimizing/, 60000, "a running job");
    await waitStatus(/optimizing .*iteration [1-9]/, 180000, "the first iteration under way");
    await shot("run1-progress", "Optimize Kernel running: progress in the status bar");
  });

  await step("cancel-first-run", async () => {
    await statusItem().hover();
    await page.waitForTimeout(1200);
    await shot("run1-cancel-tooltip", "the status bar tooltip: state, progress, and 'Click to cancel'");
    // With the gate (run.sh --double) the job is held: its candidate evaluations wait for
    // the gate file, so it cannot finish, and no status update re-renders the item under
    // the click. Without it (the real example), the item is re-rendered on every status
    // update and a click can land on an element being replaced: click again while the job
    // still runs. Either way the test asserts the job's state, not a timing.
    if (GATE) {
      if (existsSync(GATE)) throw new Error(`the gate ${GATE} is open before the first run was cancelled`);
      // held at the gate: running, and no candidate evaluated yet
      await waitStatus(/optimizing .*· 0 candidates/, 30000, "the first run held at the gate");
    }
    for (let attempt = 1; ; attempt++) {
      await statusItem().click();
      await page.mouse.move(800, 300); // away from the status bar, so its tooltip closes
      await page.keyboard.press("Escape");
      try {
        await waitStatus(/cancelled/, 15000, "the job cancelled"); // a stop ends a job within ~3 s
        break;
      } catch (error) {
        if (attempt >= 3 || !/optimizing/.test(await statusText())) throw error;
        say(`cancel click ${attempt} was lost (status: ${await statusText()}); clicking again`);
      }
    }
    if (GATE) {
      writeFileSync(GATE, "open\n"); // the second run's evaluations go through
    }
    await waitStatus(/cancelled/, 60000, "the job cancelled");
    await toast(/cancelled|stopped/i, 30000);
    await shot("run1-cancelled", "the first run cancelled from the status bar");
  });

  await step("second-run-finishes", async () => {
    await clearToasts();
    // The second run gets a store of its own. Known engine issue (reported): an evaluation
    // read back from the store lists its metrics in another order than a fresh one, so the
    // plan prompts of a run that reuses the first run's cached baseline differ from the ones
    // recorded in the session, and the replay finds no replies.
    const settings = JSON.parse(readFileSync(SETTINGS, "utf8"));
    settings["autocomp.store"] = STORE2;
    writeFileSync(SETTINGS, JSON.stringify(settings, null, 2));
    await page.waitForTimeout(6000); // the file watcher sees the change and the server re-reads its settings
    await runCommand("Autocomp: Optimize Kernel");
    await waitStatus(/optimizing/, 60000, "the second job running");
    await waitStatus(/optimizing .*iteration [1-9]|finished|failed/, 180000, "the second job's first iteration");
    await shot("run2-progress", "second run in progress: iteration, candidates evaluated and best speedup so far");
    await waitStatus(/finished|failed/, FINISH_TIMEOUT, "the second job ended");
    const text = await statusText();
    if (!/finished/.test(text)) {
      throw new Error(`the second run did not finish: ${text}`);
    }
    const best = Number(/best ([\d.]+)x/.exec(text)?.[1] ?? "0");
    if (!(best > 1)) {
      throw new Error(`the finished run found no speedup: ${text}`);
    }
    // The server announces the outcome ("Autocomp rewrote ..." when it applied the kernel).
    const message = await toast(/Autocomp rewrote|Autocomp:/, 30000);
    say(`toast: ${message}`);
    await page.waitForTimeout(1000);
    await shot("run2-applied", "the second run finished; the faster kernel applied in the editor");
  });

  await step("candidate-diff", async () => {
    await clearToasts();
    await runCommand("Autocomp: Show Candidate Diff");
    await pick("finished");
    // The candidate pick lists the best (fastest correct) candidate first.
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible", timeout: 15000 });
    await page.locator(".quick-input-list .monaco-list-row").first().waitFor({ timeout: 15000 });
    await page.waitForTimeout(500);
    await shot("diff-pick", "the candidate pick: fastest correct first, with metric and plan");
    await page.keyboard.press("Enter");
    await page.locator(".monaco-diff-editor").first().waitFor({ timeout: 30000 });
    await page.waitForTimeout(1500);
    await shot("candidate-diff", "native diff editor: original kernel vs the best candidate");
  });

  await step("check-applied", async () => {
    // Bring the example back (from the explorer: Quick Open would also offer the diff's
    // virtual document of the same name) and compare the text on disk with the original.
    await page.locator(".explorer-folders-view .monaco-list-row", { hasText: FILE }).first().click();
    await page.locator(`.tab.active:has-text("${FILE}")`).first().waitFor({ timeout: 15000 });
    const before = readFileSync(ORIGINAL, "utf8");
    // VS Code saves files changed by an extension's workspace edit itself
    // (files.refactoring.autoSave); save explicitly only if the buffer is still dirty.
    if (readFileSync(WS_FILE, "utf8") === before) {
      await runCommand("File: Save");
      await page.waitForTimeout(1500);
    }
    const after = readFileSync(WS_FILE, "utf8");
    if (before === after) {
      throw new Error("the example on disk is unchanged after the finished run: no kernel was applied");
    }
    writeFileSync(join(SHOTS, "applied-kernel.txt"), after);
    say(`the applied kernel differs from the original (${before.length} -> ${after.length} chars); saved as applied-kernel.txt`);
    await shot("applied-saved", "the example saved with the applied, faster kernel");
  });
  await step("show-run", async () => {
    await runCommand("View: Close Primary Side Bar");
    await runCommand("View: Close All Editors");
    await runCommand("Autocomp: Show Run");
    await pick("finished");
    await page.locator("iframe.webview").first().waitFor({ state: "visible", timeout: 30000 });
    await page.waitForTimeout(3000);
    await shot("run-view", "the run view: candidates with plan, verdict, metric, speedup and the chart");
    // The view's buttons talk back to the extension: Diff on the second-best candidate.
    const view = page.frameLocator("iframe.webview").frameLocator("#active-frame");
    const buttons = view.locator('button[data-action="diff"]');
    await buttons.first().waitFor({ timeout: 15000 });
    const target = await buttons.nth(1).getAttribute("data-candidate");
    await buttons.nth(1).click();
    await page.locator(".tab", { hasText: `original ↔ ${target}` }).first().waitFor({ timeout: 30000 });
    await page.waitForTimeout(1500);
    await shot("run-view-diff", `the run view's Diff button: a diff of ${target} opened next to the run view`);
  });

  await step("server-missing", async () => {
    // Point the server setting at a command that does not exist: the extension must say so,
    // with the fix, in one message.
    await clearToasts();
    const settings = JSON.parse(readFileSync(SETTINGS, "utf8"));
    settings["autocomp.server.path"] = "/nonexistent/bin/autocomp";
    writeFileSync(SETTINGS, JSON.stringify(settings, null, 2));
    const restart = page.locator(".notification-toast", { hasText: "server settings changed" }).locator("a.monaco-button, .monaco-button", { hasText: "Restart Server" }).first();
    await restart.waitFor({ state: "visible", timeout: 30000 });
    await restart.click();
    const message = await toast(/could not start its language server/, 30000);
    say(`toast: ${message}`);
    if (!/autocomp\.server\.path/.test(message) || !/was not found/.test(message)) {
      throw new Error(`the start-failure message lacks the cause or the fix: ${message}`);
    }
    await page.waitForTimeout(500);
    await shot("server-missing", "a server command that does not exist: one message with the cause and the fix");
  });
  say("all steps passed");
} finally {
  await browser.close();
}
