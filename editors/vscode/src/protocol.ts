/**
 * The Autocomp language-server protocol as the extension sees it.
 *
 * Why a module of its own: the server is written in Python by another team, so these types
 * are the single place where the contract is spelled out on the TypeScript side. Every other
 * module imports method names and shapes from here instead of repeating string literals.
 */

/** Server-side commands, sent through `workspace/executeCommand` with one object argument. */
export const ServerCommand = {
  optimize: "autocomp.optimize",
  cancel: "autocomp.cancel",
  applyCandidate: "autocomp.applyCandidate",
  showDiff: "autocomp.showDiff",
} as const;

/** Custom requests and notifications (`autocomp/...`). */
export const Method = {
  jobs: "autocomp/jobs",
  run: "autocomp/run",
  candidate: "autocomp/candidate",
  jobStatus: "autocomp/jobStatus",
} as const;

export type JobState = "running" | "finished" | "cancelled" | "failed";

/** One optimization job, as pushed by `autocomp/jobStatus` and listed by `autocomp/jobs`. */
export interface JobStatus {
  jobId: string;
  uri: string;
  kernel: string;
  target: string;
  state: JobState;
  iteration: number;
  iterations: number;
  evaluated: number;
  bestSpeedup: number | null;
  bestCandidateId: string | null;
  primaryMetric: string;
  message: string;
  /** True when every model is a recorded session: the UI must say so. */
  replay: boolean;
  /** True when the evaluator tier confirms timings (not an estimate or compile check). */
  confirmed: boolean;
  /** The server's progress snapshot ("iteration 3/8 · 41 candidates · best 2.10x"), the same
   * text $/progress and the lens show. */
  progress?: string;
  /** True while a candidate of this job is in the buffer (auto-applied or applied). */
  applied?: boolean;
}

/** A measured figure; it always says its unit and where it came from. */
export interface Metric {
  value: number;
  unit: string;
  source: string;
}

export interface CandidateSummary {
  id: string;
  parent: string | null;
  iteration: number;
  plan: string;
  verdict: string;
  metric: Metric | null;
  speedup: number | null;
}

export interface RunResult {
  job: JobStatus;
  candidates: CandidateSummary[];
  bestSpeedupPerIteration: number[];
}

export interface CandidateDetail {
  code: string;
  original: string;
  plan: string;
  verdict: string;
  metrics: unknown;
  speedup: number | null;
}

export interface OptimizeArgs {
  uri: string;
  line?: number;
  kernel?: string;
  restart?: boolean;
}

export interface OptimizeResult {
  jobId: string;
}

export interface CancelResult {
  cancelled: boolean;
}

export interface ApplyResult {
  applied: boolean;
  message: string;
}

export interface ShowDiffResult {
  title: string;
  original: string;
  candidate: string;
  unifiedDiff: string;
}

/** True for jobs that can still be cancelled. */
export function isActive(job: JobStatus): boolean {
  return job.state === "running";
}

/** The verdict (autocomp.model.Verdict) of a candidate that matched the oracle. */
export function isCorrectVerdict(verdict: string): boolean {
  return verdict === "correct";
}
