/**
 * The HTML of the "Show Run" webview: a header with the job, a chart of best speedup per
 * iteration, and a table of every candidate (plan, verdict, metric, speedup) with Diff and
 * Apply buttons. Pure function of the `autocomp/run` answer, so it is unit-tested without
 * VS Code; the panel in runView.ts only supplies the nonce and CSP source.
 */

import { speedupChartSvg } from "./chart";
import { baseName, formatMetric, formatSpeedup } from "./format";
import type { RunResult } from "./protocol";

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

export interface PageContext {
  /** A fresh random value per render; only scripts carrying it may run. */
  nonce: string;
  /** `webview.cspSource`, allowed for styles. */
  cspSource: string;
}

const STYLE = `
body { font-family: var(--vscode-font-family); color: var(--vscode-foreground); padding: 0 16px 24px; }
h1 { font-size: 1.3em; margin-bottom: 4px; }
.sub { color: var(--vscode-descriptionForeground); margin-top: 0; }
.banner { padding: 6px 10px; margin: 8px 0; border-left: 3px solid var(--vscode-editorWarning-foreground, #cca700); background: var(--vscode-textBlockQuote-background); }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; margin-top: 12px; font-size: 0.92em; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--vscode-panel-border, #444); vertical-align: top; }
th { font-weight: 600; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
tr.best td { font-weight: 600; }
.verdict-correct { color: var(--vscode-testing-iconPassed, #73c991); }
.verdict-bad { color: var(--vscode-testing-iconFailed, #f14c4c); }
.plan { min-width: 14em; max-width: 46em; white-space: pre-wrap; }
button { background: var(--vscode-button-background); color: var(--vscode-button-foreground); border: none; padding: 2px 8px; margin-right: 4px; cursor: pointer; }
button:hover { background: var(--vscode-button-hoverBackground); }
.chart .grid { stroke: var(--vscode-panel-border, #444); stroke-width: 1; }
.chart .baseline { stroke: var(--vscode-descriptionForeground, #888); stroke-width: 1; }
.chart .line { stroke: var(--vscode-charts-blue, #3794ff); stroke-width: 2; }
.chart .point { fill: var(--vscode-charts-blue, #3794ff); }
.chart text { fill: var(--vscode-descriptionForeground, #999); font-size: 11px; }
`;

const SCRIPT = `
const vscode = acquireVsCodeApi();
document.addEventListener('click', (event) => {
  const target = event.target;
  if (!(target instanceof HTMLElement)) { return; }
  const action = target.dataset.action;
  const candidateId = target.dataset.candidate;
  if (action && candidateId) {
    vscode.postMessage({ type: action, candidateId });
  }
});
`;

function verdictClass(verdict: string): string {
  if (verdict === "correct") {
    return "verdict-correct";
  }
  if (verdict === "pending" || verdict === "unverified") {
    return "";
  }
  return "verdict-bad";
}

/** The whole page for one run. */
export function renderRunPage(run: RunResult, ctx: PageContext): string {
  const job = run.job;
  const csp = [
    "default-src 'none'",
    `style-src ${ctx.cspSource} 'unsafe-inline'`,
    `script-src 'nonce-${ctx.nonce}'`,
    "img-src data:",
  ].join("; ");
  const banners: string[] = [];
  if (job.replay) {
    banners.push("Recorded session (replay): every LLM reply comes from a recording; no model was called.");
  }
  if (!job.confirmed) {
    banners.push(
      `The timing tier on this machine does not confirm speedups (${escapeHtml(job.primaryMetric)}): nothing is applied automatically.`,
    );
  }
  const rows = run.candidates.map((c) => {
    const best = c.id === job.bestCandidateId ? " class=\"best\"" : "";
    // The starting kernel (no parent) has nothing to diff or apply.
    const diffButton = `<button data-action="diff" data-candidate="${escapeHtml(c.id)}" title="Open a diff against the original kernel">Diff</button>`;
    const applyButton = `<button data-action="apply" data-candidate="${escapeHtml(c.id)}" title="Replace the kernel in the editor with this candidate">Apply</button>`;
    const actions = c.parent === null ? "" : diffButton + (c.verdict === "correct" ? applyButton : "");
    return (
      `<tr${best} data-candidate-row="${escapeHtml(c.id)}">` +
      `<td>${escapeHtml(c.id)}</td>` +
      `<td class="num">${c.iteration}</td>` +
      `<td>${escapeHtml(c.parent ?? "original")}</td>` +
      `<td class="plan">${escapeHtml(c.plan)}</td>` +
      `<td class="${verdictClass(c.verdict)}">${escapeHtml(c.verdict)}</td>` +
      `<td class="num">${escapeHtml(formatMetric(c.metric))}</td>` +
      `<td class="num">${escapeHtml(formatSpeedup(c.speedup))}</td>` +
      `<td>${actions}</td>` +
      `</tr>`
    );
  });
  const table =
    run.candidates.length === 0
      ? `<p class="sub">No candidate evaluated yet.</p>`
      : `<div class="table-wrap"><table><thead><tr><th>Candidate</th><th>Iter.</th><th>Parent</th><th>Plan</th><th>Verdict</th><th>Metric</th><th>Speedup</th><th></th></tr></thead><tbody>${rows.join("")}</tbody></table></div>`;
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>Autocomp run ${escapeHtml(job.jobId)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>Autocomp — ${escapeHtml(job.kernel)} (${escapeHtml(job.target)})</h1>
<p class="sub">${escapeHtml(baseName(job.uri))} · job ${escapeHtml(job.jobId)} · ${escapeHtml(job.state)} · iteration ${job.iteration} of ${job.iterations} · ${job.evaluated} evaluated · best ${escapeHtml(formatSpeedup(job.bestSpeedup))} on ${escapeHtml(job.primaryMetric)}${job.message ? ` · ${escapeHtml(job.message)}` : ""}</p>
${banners.map((b) => `<div class="banner">${b}</div>`).join("\n")}
<h2>Best speedup per iteration</h2>
${speedupChartSvg(run.bestSpeedupPerIteration)}
<h2>Candidates</h2>
${table}
<script nonce="${ctx.nonce}">${SCRIPT}</script>
</body>
</html>`;
}
