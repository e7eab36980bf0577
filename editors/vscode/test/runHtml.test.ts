// Unit tests of the run view page (runHtml.ts): content, escaping and the script policy.
import assert from "node:assert/strict";
import { test } from "node:test";

import type { RunResult } from "../src/protocol";
import { escapeHtml, renderRunPage } from "../src/runHtml";

function run(): RunResult {
  return {
    job: {
      jobId: "job-1",
      uri: "file:///x/matmul.c",
      kernel: "matmul",
      target: "gemmini",
      state: "finished",
      iteration: 2,
      iterations: 2,
      evaluated: 3,
      bestSpeedup: 2.5,
      bestCandidateId: "c2",
      primaryMetric: "cycles (gemmini timing model)",
      message: "applied c2",
      replay: true,
      confirmed: true,
    },
    candidates: [
      { id: "c0", parent: null, iteration: 0, plan: "the starting kernel", verdict: "correct", metric: { value: 2500, unit: "cycles", source: "gemmini timing model" }, speedup: 1 },
      { id: "c1", parent: "c0", iteration: 1, plan: "tile <i> & j", verdict: "correct", metric: { value: 2000, unit: "cycles", source: "gemmini timing model" }, speedup: 1.25 },
      { id: "c2", parent: "c1", iteration: 2, plan: "double buffer", verdict: "correct", metric: { value: 1000, unit: "cycles", source: "gemmini timing model" }, speedup: 2.5 },
      { id: "c3", parent: "c1", iteration: 2, plan: "unroll", verdict: "incorrect", metric: null, speedup: null },
    ],
    bestSpeedupPerIteration: [1.25, 2.5],
  };
}

test("html escaping covers markup and quotes", () => {
  assert.equal(escapeHtml(`<a href="x">'&'</a>`), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
});

test("the page lists every candidate with plan, verdict, metric and speedup", () => {
  const html = renderRunPage(run(), { nonce: "N0NCE", cspSource: "vscode-resource:" });
  for (const id of ["c0", "c1", "c2", "c3"]) {
    assert.match(html, new RegExp(`data-candidate-row="${id}"`));
  }
  assert.match(html, /tile &lt;i&gt; &amp; j/);
  assert.match(html, /2,000 cycles \(gemmini timing model\)/);
  assert.match(html, /2\.50x/);
  assert.match(html, /<tr class="best" data-candidate-row="c2">/);
  assert.match(html, /<svg/);
  assert.match(html, /Recorded session \(replay\)/);
});

test("only correct candidates get an Apply button, never the starting kernel", () => {
  const html = renderRunPage(run(), { nonce: "N0NCE", cspSource: "vscode-resource:" });
  assert.doesNotMatch(html, /data-candidate="c0"/);
  assert.match(html, /data-action="apply" data-candidate="c1"/);
  assert.match(html, /data-action="apply" data-candidate="c2"/);
  assert.doesNotMatch(html, /data-action="apply" data-candidate="c3"/);
  assert.match(html, /data-action="diff" data-candidate="c3"/);
});

test("scripts run only with the nonce", () => {
  const html = renderRunPage(run(), { nonce: "N0NCE", cspSource: "vscode-resource:" });
  assert.match(html, /script-src 'nonce-N0NCE'/);
  assert.match(html, /default-src 'none'/);
  const scripts = html.match(/<script[^>]*>/g) ?? [];
  assert.deepEqual(scripts, ['<script nonce="N0NCE">']);
});

test("an unconfirmed tier is stated", () => {
  const r = run();
  r.job.confirmed = false;
  assert.match(renderRunPage(r, { nonce: "n", cspSource: "s" }), /does not confirm speedups/);
});
