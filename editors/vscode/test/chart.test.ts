// Unit tests of the SVG chart (chart.ts) shown in the run view.
import assert from "node:assert/strict";
import { test } from "node:test";

import { niceCeiling, speedupChartSvg } from "../src/chart";

test("axis limits round up to tidy values", () => {
  assert.equal(niceCeiling(1), 1);
  assert.equal(niceCeiling(1.2), 1.5);
  assert.equal(niceCeiling(2.7), 3);
  assert.equal(niceCeiling(5.6), 10);
  assert.equal(niceCeiling(0), 1);
});

test("one point per iteration, on one polyline", () => {
  const svg = speedupChartSvg([1.1, 1.8, 2.4], { width: 300, height: 200 });
  assert.ok(svg.startsWith("<svg"));
  assert.ok(svg.endsWith("</svg>"));
  assert.equal((svg.match(/<circle /g) ?? []).length, 3);
  const points = /<polyline[^>]*points="([^"]*)"/.exec(svg)?.[1].split(" ") ?? [];
  assert.equal(points.length, 3);
  // Higher speedup is drawn higher up (smaller y).
  const ys = points.map((p) => Number(p.split(",")[1]));
  assert.ok(ys[0] > ys[1] && ys[1] > ys[2]);
  assert.match(svg, /iteration 3: 2\.40x/);
});

test("an empty run says so instead of drawing nothing", () => {
  const svg = speedupChartSvg([]);
  assert.match(svg, /no iteration finished yet/);
  assert.doesNotMatch(svg, /<polyline/);
});

test("non-finite values are skipped, not drawn at zero", () => {
  const svg = speedupChartSvg([1.5, Number.NaN, 2]);
  assert.equal((svg.match(/<circle /g) ?? []).length, 2);
});
