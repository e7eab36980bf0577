// Unit tests of how the server command line and the start-failure message are made (launch.ts),
// and of how stored API keys reach the server's environment (secrets.ts).
import assert from "node:assert/strict";
import { test } from "node:test";

import { JobStore } from "../src/jobs";
import { findOnPath, PYTHON_BOOTSTRAP, serverLaunch, startFailureMessage } from "../src/launch";
import type { JobStatus } from "../src/protocol";
import { serverEnvironment } from "../src/secrets";

test("the default runs `autocomp lsp`", () => {
  const launch = serverLaunch({ path: "autocomp", pythonPath: "", extraArgs: [] });
  assert.equal(launch.command, "autocomp");
  assert.deepEqual(launch.args, ["lsp"]);
  assert.equal(launch.display, "autocomp lsp");
});

test("an empty path falls back to autocomp, extra args follow lsp", () => {
  const launch = serverLaunch({ path: "  ", pythonPath: "", extraArgs: ["--verbose", ""] });
  assert.equal(launch.command, "autocomp");
  assert.deepEqual(launch.args, ["lsp", "--verbose"]);
});

test("a Python interpreter wins over the command", () => {
  const launch = serverLaunch({ path: "/opt/autocomp", pythonPath: "/venv/bin/python", extraArgs: [] });
  assert.equal(launch.command, "/venv/bin/python");
  assert.deepEqual(launch.args, ["-c", PYTHON_BOOTSTRAP, "lsp"]);
});

test("the failure message names the cause and the settings that fix it", () => {
  const launch = serverLaunch({ path: "autocomp", pythonPath: "", extraArgs: [] });
  const err = Object.assign(new Error("spawn autocomp ENOENT"), { code: "ENOENT" });
  const text = startFailureMessage(launch, err);
  assert.match(text, /`autocomp` was not found/);
  assert.match(text, /autocomp\.server\.pythonPath/);
  assert.match(text, /autocomp\.server\.path/);
  assert.match(text, /Restart Server/);
  const py = serverLaunch({ path: "", pythonPath: "/usr/bin/python3", extraArgs: [] });
  assert.match(startFailureMessage(py, new Error("ModuleNotFoundError: No module named 'autocomp'")), /has no `autocomp` package/);
});

test("the server's own last words are quoted when it exits during start-up", () => {
  const launch = serverLaunch({ path: "autocomp", pythonPath: "", extraArgs: [] });
  const text = startFailureMessage(launch, new Error("Pending response rejected since connection got disposed"), "autocomp: error: unrecognized arguments: --stdio");
  assert.match(text, /`autocomp lsp` exited during start-up saying: autocomp: error: unrecognized arguments: --stdio/);
  const py = serverLaunch({ path: "", pythonPath: "/venv/bin/python", extraArgs: [] });
  assert.match(startFailureMessage(py, new Error("closed"), "ModuleNotFoundError: No module named 'autocomp'"), /has no `autocomp` package/);
});

test("commands are looked up on PATH the way spawn would", () => {
  const present = new Set(["/usr/local/bin/autocomp", "/opt/py/bin/python"]);
  const isExe = (f: string) => present.has(f);
  assert.equal(findOnPath("autocomp", "/usr/bin:/usr/local/bin", isExe), "/usr/local/bin/autocomp");
  assert.equal(findOnPath("autocomp", "/usr/bin", isExe), undefined);
  assert.equal(findOnPath("/opt/py/bin/python", "", isExe), "/opt/py/bin/python");
  assert.equal(findOnPath("/opt/py/bin/python3", "/opt/py/bin", isExe), undefined);
  // The real check: node itself is an executable on this PATH.
  assert.ok(findOnPath(process.execPath, ""));
});

test("stored keys reach the server only where the environment has none", async () => {
  const secrets = new Map([
    ["autocomp.apiKey.openai", "sk-stored"],
    ["autocomp.apiKey.anthropic", "ak-stored"],
  ]);
  const env = await serverEnvironment({ PATH: "/bin", ANTHROPIC_API_KEY: "ak-env" }, { get: async (k) => secrets.get(k) });
  assert.equal(env.OPENAI_API_KEY, "sk-stored");
  assert.equal(env.ANTHROPIC_API_KEY, "ak-env");
  assert.equal(env.PATH, "/bin");
});

function status(jobId: string, state: JobStatus["state"]): JobStatus {
  return {
    jobId, uri: "file:///k.c", kernel: "k", target: "gemmini", state, iteration: 0, iterations: 1,
    evaluated: 0, bestSpeedup: null, bestCandidateId: null, primaryMetric: "cycles", message: "",
    replay: false, confirmed: true,
  };
}

test("the job store focuses the latest running job and reports transitions", () => {
  const store = new JobStore();
  const seen: string[] = [];
  store.onDidChange((job, prev) => seen.push(`${job.jobId}:${prev?.state ?? "-"}->${job.state}`));
  store.update(status("a", "running"));
  store.update(status("b", "running"));
  store.update(status("a", "running"));
  assert.equal(store.focus()?.jobId, "a");
  store.update(status("a", "cancelled"));
  assert.equal(store.focus()?.jobId, "b");
  store.update(status("b", "finished"));
  assert.equal(store.focus()?.jobId, "b");
  assert.deepEqual(seen, ["a:-->running", "b:-->running", "a:running->running", "a:running->cancelled", "b:running->finished"]);
  let cleared = 0;
  store.onDidClear(() => cleared++);
  store.clear();
  assert.equal(store.focus(), undefined);
  assert.equal(cleared, 1);
});
