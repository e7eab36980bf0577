// Unit tests of the pure renderings (format.ts): what the status bar and pickers say.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  baseName,
  candidateDetail,
  formatMetric,
  formatSpeedup,
  rankCandidates,
  statusBarText,
  statusBarTooltip,
} from "../src/format";
import type { CandidateSummary, JobStatus } from "../src/protocol";

function job(over: Partial<JobStatus> = {}): JobStatus {
  return {
    jobId: "j1",
    uri: "file:///work/examples/gemmini/matmul.c",
    kernel: "matmul",
    target: "gemmini",
    state: "running",
    iteration: 2,
    iterations: 4,
    evaluated: 11,
    bestSpeedup: 1.834,
    bestCandidateId: "c7",
    primaryMetric: "cycles (gemmini timing model)",
    message: "",
    replay: false,
    confirmed: true,
    ...over,
  };
}

function cand(id: string, verdict: string, speedup: number | null, iteration = 1): CandidateSummary {
  return { id, parent: null, iteration, plan: `plan of ${id}`, verdict, metric: null, speedup };
}

test("speedups print with two decimals and a dash when absent", () => {
  assert.equal(formatSpeedup(2.3456), "2.35x");
  assert.equal(formatSpeedup(null), "—");
  assert.equal(formatSpeedup(Number.NaN), "—");
});

test("metrics carry unit and source", () => {
  assert.equal(formatMetric({ value: 412330, unit: "cycles", source: "gemmini timing model" }), "412,330 cycles (gemmini timing model)");
  assert.equal(formatMetric({ value: 0.01234567, unit: "ms", source: "cuda events, H100" }), "0.01235 ms (cuda events, H100)");
  assert.equal(formatMetric(null), "—");
});

test("status bar shows progress while running, with a spinner", () => {
  const text = statusBarText(job());
  assert.match(text, /^\$\(sync~spin\) Autocomp matmul: optimizing/);
  assert.match(text, /iteration 2\/4/);
  assert.match(text, /11 candidates/);
  assert.match(text, /best 1\.83x/);
});

test("status bar shows the server's progress snapshot verbatim (the same text as $/progress and the lens)", () => {
  const progress = "iteration 3/4 · 12 candidates · best 1.90x";
  assert.equal(statusBarText(job({ progress })), `$(sync~spin) Autocomp matmul: optimizing · ${progress}`);
});

test("status bar marks replayed sessions and ended jobs", () => {
  assert.match(statusBarText(job({ replay: true })), /\(replay\)$/);
  const done = statusBarText(job({ state: "finished" }));
  assert.match(done, /^\$\(check\) Autocomp matmul: finished · best 1\.83x$/);
  assert.match(statusBarText(job({ state: "cancelled", bestSpeedup: null })), /^\$\(circle-slash\) Autocomp matmul: cancelled$/);
});

test("tooltip says what a click does and when timing is not confirmed", () => {
  assert.match(statusBarTooltip(job()), /Click to cancel/);
  assert.match(statusBarTooltip(job({ state: "finished" })), /Click to show the run/);
  assert.match(statusBarTooltip(job({ confirmed: false })), /not confirmed/);
});

test("candidates rank correct-and-fastest first, then the rest by iteration", () => {
  const ranked = rankCandidates([
    cand("a", "incorrect", null, 1),
    cand("b", "correct", 1.2, 1),
    cand("c", "correct", 3.1, 2),
    cand("d", "compile-error", null, 0),
    cand("e", "correct", null, 2),
  ]).map((c) => c.id);
  assert.deepEqual(ranked, ["c", "b", "d", "a", "e"]);
});

test("long plans are shortened in pickers", () => {
  const c = cand("x", "correct", 1.5);
  c.plan = "tile ".repeat(60);
  const detail = candidateDetail(c);
  assert.ok(detail.length < 200);
  assert.ok(detail.endsWith("..."));
});

test("baseName decodes the last segment", () => {
  assert.equal(baseName("file:///a/b/my%20kernel.cu"), "my kernel.cu");
});
