/**
 * The extension's view of the server's jobs, fed by `autocomp/jobStatus` notifications and
 * `autocomp/jobs` answers. No `vscode` import: plain listeners, so it is unit-tested.
 */

import type { JobStatus } from "./protocol";

export type JobListener = (job: JobStatus, previous: JobStatus | undefined) => void;

export class JobStore {
  private readonly jobs = new Map<string, JobStatus>();
  private readonly order: string[] = [];
  private readonly listeners = new Set<JobListener>();
  private readonly clearListeners = new Set<() => void>();

  /** Record a status; listeners hear about it with the status it replaces. */
  update(job: JobStatus): void {
    const previous = this.jobs.get(job.jobId);
    this.jobs.set(job.jobId, job);
    const at = this.order.indexOf(job.jobId);
    if (at >= 0) {
      this.order.splice(at, 1);
    }
    this.order.push(job.jobId);
    for (const listener of [...this.listeners]) {
      listener(job, previous);
    }
  }

  onDidChange(listener: JobListener): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  /** Heard after clear(): every job is gone at once. */
  onDidClear(listener: () => void): { dispose(): void } {
    this.clearListeners.add(listener);
    return { dispose: () => this.clearListeners.delete(listener) };
  }

  get(jobId: string): JobStatus | undefined {
    return this.jobs.get(jobId);
  }

  /** All jobs, most recently updated first. */
  all(): JobStatus[] {
    return [...this.order].reverse().map((id) => this.jobs.get(id) as JobStatus);
  }

  running(): JobStatus[] {
    return this.all().filter((j) => j.state === "running");
  }

  /** The job the status bar should show: the latest running one, else the latest of any. */
  focus(): JobStatus | undefined {
    return this.running()[0] ?? this.all()[0];
  }

  /** Forget everything (the server restarted; its jobs are gone). */
  clear(): void {
    this.jobs.clear();
    this.order.length = 0;
    for (const listener of [...this.clearListeners]) {
      listener();
    }
  }
}
