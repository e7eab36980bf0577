// Checks of package.json: every setting the server reads is contributed and explained, every
// command has a title and an implementation, and the extension activates for kernel files.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { LANGUAGES, TARGETS } from "../src/targets";

const root = join(__dirname, "..", "..");
const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const properties: Record<string, { description?: string; markdownDescription?: string; default?: unknown }> =
  manifest.contributes.configuration.properties;

// Everything `autocomp.*` the server reads (server/settings.py), plus the extension's own.
const SERVER_SETTINGS = [
  "autocomp.llm",
  "autocomp.search.iterations",
  "autocomp.search.beam",
  "autocomp.search.plans",
  "autocomp.search.implementations",
  "autocomp.search.keep",
  "autocomp.autoApply",
  "autocomp.acceptUnconfirmed",
  "autocomp.sandbox",
  "autocomp.executor",
  "autocomp.minSpeedup",
  "autocomp.tuneOnSave",
  "autocomp.targets",
  ...TARGETS.map((t) => `autocomp.target.${t.name}`),
  "autocomp.store",
  "autocomp.maxFileBytes",
];
const EXTENSION_SETTINGS = [
  "autocomp.server.path",
  "autocomp.server.pythonPath",
  "autocomp.server.args",
  "autocomp.server.extraLanguages",
  "autocomp.trace.server",
];

test("every setting the server reads is contributed", () => {
  for (const key of [...SERVER_SETTINGS, ...EXTENSION_SETTINGS]) {
    assert.ok(properties[key], `missing setting ${key}`);
  }
});

test("every setting explains itself", () => {
  for (const [key, schema] of Object.entries(properties)) {
    const text = schema.markdownDescription ?? schema.description ?? "";
    assert.ok(text.length >= 40, `${key} needs a real description`);
  }
});

test("defaults match the server's", () => {
  assert.equal(properties["autocomp.autoApply"].default, "always");
  assert.equal(properties["autocomp.minSpeedup"].default, 1.02);
  assert.equal(properties["autocomp.search.iterations"].default, 8);
  assert.equal(properties["autocomp.search.beam"].default, 4);
  assert.equal(properties["autocomp.search.keep"].default, 0.3);
  assert.equal(properties["autocomp.executor"].default, "local");
  // Per-target objects default to empty, so the server only sees keys the user set.
  for (const target of TARGETS.map((t) => t.name)) {
    assert.deepEqual(properties[`autocomp.target.${target}`].default, {});
  }
});

test("no setting can hold an API key", () => {
  for (const key of Object.keys(properties)) {
    // "budget.tokens" is a count; a credential would be a key, a token, a secret or a password
    assert.doesNotMatch(key, /key|token(?!s\b)|secret|password/i, `${key} looks like a place for a secret`);
  }
});

test("commands have titles and are registered by the extension", () => {
  const source = readFileSync(join(root, "src", "commands.ts"), "utf8");
  const titles = new Map<string, string>(manifest.contributes.commands.map((c: { command: string; title: string }) => [c.command, c.title]));
  for (const title of ["Optimize Kernel", "Cancel Optimization", "Apply Candidate", "Show Candidate Diff", "Show Run", "Restart Server", "Set API Key"]) {
    assert.ok([...titles.values()].includes(title), `no command titled ${title}`);
  }
  for (const id of titles.keys()) {
    assert.ok(source.includes(`registerCommand("${id}"`), `${id} is contributed but not registered`);
    // The server's own command ids are proxied by the language client: no clash allowed.
    assert.ok(!["autocomp.optimize", "autocomp.optimizeLike", "autocomp.cancel", "autocomp.applyCandidate", "autocomp.showDiff"].includes(id));
  }
});

// The target list, its languages and the activation events are generated from the targets'
// declarations (python -m autocomp.backends.editor_files; tests/server/test_target_plugins.py
// checks they are current); here: the extension uses them consistently.
test("the extension activates for the targets' languages", () => {
  const activation = manifest.activationEvents.filter((e: string) => e.startsWith("onLanguage:"));
  assert.deepEqual([...activation].sort(), LANGUAGES.map((l) => `onLanguage:${l}`).sort());
  assert.deepEqual([...new Set(TARGETS.flatMap((t) => t.languages))].sort(), [...LANGUAGES].sort());
  assert.deepEqual(properties["autocomp.targets"].default, TARGETS.map((t) => t.name));
  assert.ok(TARGETS.length >= 1 && LANGUAGES.length >= 1);
});
