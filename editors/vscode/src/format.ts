/**
 * Plain-text renderings of jobs, metrics and speedups, shared by the status bar, quick picks,
 * messages and the run view. Pure functions (no `vscode` import) so they are unit-tested
 * with Node's test runner.
 */

import type { CandidateSummary, JobStatus, Metric } from "./protocol";

/** `2.31x`, or an em dash when there is no figure yet. */
export function formatSpeedup(speedup: number | null | undefined): string {
  if (speedup === null || speedup === undefined || !Number.isFinite(speedup)) {
    return "—";
  }
  return `${speedup.toFixed(2)}x`;
}

/** `412,330 cycles (gemmini timing model)`: a number never travels without unit and source. */
export function formatMetric(metric: Metric | null | undefined): string {
  if (!metric) {
    return "—";
  }
  const v = metric.value;
  const text =
    Number.isInteger(v) && Math.abs(v) >= 1 ? v.toLocaleString("en-US") : Number(v.toPrecision(4)).toString();
  return `${text} ${metric.unit} (${metric.source})`;
}

/** The last path segment of a URI, for short labels. */
export function baseName(uri: string): string {
  const clean = uri.split(/[?#]/)[0];
  const parts = clean.split("/");
  return decodeURIComponent(parts[parts.length - 1] || clean);
}

/** Words shown for a state, chosen to read well after the kernel name. */
const STATE_WORDS: Record<JobStatus["state"], string> = {
  running: "optimizing",
  finished: "finished",
  cancelled: "cancelled",
  failed: "failed",
};

/** The status bar text: a codicon, the kernel, progress and the best speedup so far. */
export function statusBarText(job: JobStatus): string {
  const icon =
    job.state === "running"
      ? "$(sync~spin)"
      : job.state === "finished"
        ? "$(check)"
        : job.state === "cancelled"
          ? "$(circle-slash)"
          : "$(error)";
  const parts = [`${icon} Autocomp ${job.kernel}: ${STATE_WORDS[job.state]}`];
  if (job.state === "running" && job.progress) {
    // The server's one progress snapshot: the same text as $/progress and the lens.
    parts.push(job.progress);
  } else {
    if (job.state === "running") {
      parts.push(`iteration ${job.iteration}/${job.iterations}`);
      parts.push(`${job.evaluated} candidates`);
    }
    if (job.bestSpeedup !== null && job.bestSpeedup !== undefined) {
      parts.push(`best ${formatSpeedup(job.bestSpeedup)}`);
    }
  }
  if (job.replay) {
    parts.push("(replay)");
  }
  return parts.join(" · ");
}

/** The status bar tooltip: the full story, and what a click does. */
export function statusBarTooltip(job: JobStatus): string {
  const lines = [
    `Autocomp — ${job.kernel} in ${baseName(job.uri)} (${job.target})`,
    `State: ${job.state}${job.message ? ` — ${job.message}` : ""}`,
    `Iteration ${job.iteration} of ${job.iterations}, ${job.evaluated} candidates evaluated`,
    `Best speedup: ${formatSpeedup(job.bestSpeedup)} on ${job.primaryMetric}`,
  ];
  if (!job.confirmed) {
    lines.push("Timing is not confirmed by a hardware tier on this machine: nothing is auto-applied.");
  }
  if (job.replay) {
    lines.push("Every model is a recorded session (replay): no LLM was called.");
  }
  lines.push(job.state === "running" ? "Click to cancel this optimization." : "Click to show the run.");
  return lines.join("\n");
}

/** One line for a candidate in a quick pick. */
export function candidateLabel(c: CandidateSummary): string {
  return `${c.id} · ${formatSpeedup(c.speedup)} · ${c.verdict}`;
}

export function candidateDetail(c: CandidateSummary): string {
  const plan = c.plan.replace(/\s+/g, " ").trim();
  return `iteration ${c.iteration} · ${formatMetric(c.metric)} · ${plan.length > 140 ? plan.slice(0, 137) + "..." : plan}`;
}

/** Candidates worth offering first: correct ones, fastest first, then the rest by iteration. */
export function rankCandidates(candidates: CandidateSummary[]): CandidateSummary[] {
  const score = (c: CandidateSummary): number =>
    c.verdict === "correct" && c.speedup !== null && Number.isFinite(c.speedup) ? c.speedup : -Infinity;
  return [...candidates].sort((a, b) => {
    const d = score(b) - score(a);
    if (d !== 0 && Number.isFinite(d)) {
      return d;
    }
    if (score(a) !== score(b)) {
      return score(a) === -Infinity ? 1 : -1;
    }
    return a.iteration - b.iteration || a.id.localeCompare(b.id);
  });
}
