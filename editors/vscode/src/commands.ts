/**
 * The user-facing commands. Each one talks to the server through the protocol in
 * protocol.ts and reports the outcome in words; none of them edits a buffer itself (the
 * server applies edits through workspace/applyEdit, so the editor's undo reverts them).
 */

import * as vscode from "vscode";

import { CandidateDocuments, candidateUri } from "./candidateDocs";
import { kernelLanguages, type ServerConnection } from "./client";
import { baseName, candidateDetail, candidateLabel, formatSpeedup, rankCandidates } from "./format";
import type { JobStore } from "./jobs";
import {
  isCorrectVerdict,
  Method,
  ServerCommand,
  type ApplyResult,
  type CancelResult,
  type CandidateSummary,
  type JobStatus,
  type OptimizeArgs,
  type OptimizeResult,
  type RunResult,
} from "./protocol";
import type { RunViews } from "./runView";
import { PROVIDERS, secretKey } from "./secrets";
import { TARGETS } from "./targets";

/** "Gemmini C, NKI Python or CUDA": the shipped targets' kernels, from their declarations. */
function kernelKinds(): string {
  const labels = TARGETS.map((t) => t.label);
  return labels.length > 1 ? `${labels.slice(0, -1).join(", ")} or ${labels[labels.length - 1]}` : labels.join("");
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export class Commands {
  runViews: RunViews | undefined;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly server: ServerConnection,
    private readonly jobs: JobStore,
    private readonly docs: CandidateDocuments,
  ) {}

  register(): vscode.Disposable[] {
    const wrap =
      (name: string, fn: (...args: any[]) => Promise<unknown>) =>
      async (...args: any[]) => {
        try {
          return await fn.apply(this, args);
        } catch (error) {
          void vscode.window.showErrorMessage(`Autocomp ${name}: ${errorText(error)}`);
          return undefined;
        }
      };
    return [
      vscode.commands.registerCommand("autocomp.optimizeKernel", wrap("Optimize Kernel", this.optimizeKernel)),
      vscode.commands.registerCommand("autocomp.cancelOptimization", wrap("Cancel Optimization", this.cancelOptimization)),
      vscode.commands.registerCommand("autocomp.applyCandidatePick", wrap("Apply Candidate", this.applyCandidatePick)),
      vscode.commands.registerCommand("autocomp.showCandidateDiff", wrap("Show Candidate Diff", this.showCandidateDiff)),
      vscode.commands.registerCommand("autocomp.showRun", wrap("Show Run", this.showRun)),
      vscode.commands.registerCommand("autocomp.restartServer", wrap("Restart Server", this.restartServer)),
      vscode.commands.registerCommand("autocomp.setApiKey", wrap("Set API Key", this.setApiKey)),
    ];
  }

  /** Optimize the kernel under the cursor (or the one named in `kernel`). */
  async optimizeKernel(options?: { restart?: boolean; kernel?: string }): Promise<string | undefined> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      throw new Error(`open a kernel file (${kernelKinds()}) and put the cursor in the kernel first`);
    }
    const doc = editor.document;
    const languages = kernelLanguages();
    if (!languages.includes(doc.languageId)) {
      throw new Error(
        `${baseName(doc.uri.toString())} is a ${doc.languageId} file; Autocomp optimizes kernels in ${languages.join(", ")} files (${kernelKinds()})`,
      );
    }
    const client = await this.server.require();
    const args: OptimizeArgs = {
      uri: client.code2ProtocolConverter.asUri(doc.uri),
      line: editor.selection.active.line,
    };
    if (options?.kernel) {
      args.kernel = options.kernel;
    }
    if (options?.restart) {
      args.restart = true;
    }
    const result = await client.sendRequest<OptimizeResult>("workspace/executeCommand", {
      command: ServerCommand.optimize,
      arguments: [args],
    });
    this.trackStarted(result?.jobId);
    return result?.jobId;
  }

  /** After `autocomp.optimize` answered, make sure the status bar shows the job at once. */
  trackStarted(jobId: string | undefined): void {
    if (!jobId) {
      return;
    }
    void this.server.ensure().then(async (client) => {
      if (!client || this.jobs.get(jobId)) {
        return;
      }
      const answer = await client.sendRequest<{ jobs: JobStatus[] }>(Method.jobs, {});
      const job = answer.jobs?.find((j) => j.jobId === jobId);
      if (job && !this.jobs.get(jobId)) {
        this.jobs.update(job);
      }
    });
  }

  /** Cancel a job: the one given (status bar click), the only running one, or a picked one. */
  async cancelOptimization(jobId?: string): Promise<void> {
    const client = await this.server.require();
    let target = typeof jobId === "string" ? jobId : undefined;
    if (!target) {
      const running = (await this.serverJobs()).filter((j) => j.state === "running");
      if (running.length === 0) {
        void vscode.window.showInformationMessage("Autocomp: no optimization is running.");
        return;
      }
      target = running.length === 1 ? running[0].jobId : (await this.pickJob(running, "Cancel which optimization?"))?.jobId;
      if (!target) {
        return;
      }
    }
    const result = await client.sendRequest<CancelResult>("workspace/executeCommand", {
      command: ServerCommand.cancel,
      arguments: [{ jobId: target }],
    });
    // A cancelled job is announced by the server (with the best result so far); only say
    // something when there was nothing to cancel.
    if (!result?.cancelled) {
      const job = this.jobs.get(target);
      void vscode.window.showInformationMessage(`Autocomp: ${job ? job.kernel : target} was not running any more.`);
    }
  }

  /** Pick a correct candidate of a job and ask the server to apply it to the buffer. */
  async applyCandidatePick(jobId?: string, candidateId?: string): Promise<void> {
    const job = await this.resolveJob(jobId, "Apply a candidate from which run?");
    if (!job) {
      return;
    }
    const chosen = candidateId ?? (await this.pickCandidate(job, true, "Apply which candidate?"))?.id;
    if (!chosen) {
      return;
    }
    await this.apply(job.jobId, chosen);
  }

  async apply(jobId: string, candidateId: string): Promise<void> {
    const client = await this.server.require();
    const result = await client.sendRequest<ApplyResult>("workspace/executeCommand", {
      command: ServerCommand.applyCandidate,
      arguments: [{ jobId, candidateId }],
    });
    // On success the server itself announces the rewrite (with the figures and "Undo reverts
    // it"); only a refusal needs saying here.
    if (!result?.applied) {
      void vscode.window.showWarningMessage(`Autocomp: ${candidateId} not applied — ${result?.message ?? "the server gave no reason"}`);
    }
  }

  /** Open the native diff editor: the kernel the job started from against a candidate. */
  async showCandidateDiff(jobId?: string, candidateId?: string): Promise<void> {
    const job = await this.resolveJob(jobId, "Show a candidate of which run?");
    if (!job) {
      return;
    }
    let summary: CandidateSummary | undefined;
    let chosen = candidateId;
    if (!chosen) {
      summary = await this.pickCandidate(job, false, "Diff which candidate?");
      chosen = summary?.id;
    }
    if (!chosen) {
      return;
    }
    await this.diff(job.jobId, chosen, job);
  }

  async diff(jobId: string, candidateId: string, job?: JobStatus): Promise<void> {
    const status = job ?? this.jobs.get(jobId) ?? (await this.serverJobs()).find((j) => j.jobId === jobId);
    const file = status ? baseName(status.uri) : "kernel";
    const detail = await this.docs.detail(jobId, candidateId);
    const left = candidateUri(jobId, candidateId, "original", file);
    const right = candidateUri(jobId, candidateId, "candidate", file);
    const kernel = status?.kernel ?? "kernel";
    const title = `${kernel}: original ↔ ${candidateId} (${formatSpeedup(detail.speedup)}, ${detail.verdict})`;
    await vscode.commands.executeCommand("vscode.diff", left, right, title, { preview: true });
  }

  async showRun(jobId?: string): Promise<void> {
    const job = await this.resolveJob(typeof jobId === "string" ? jobId : undefined, "Show which run?");
    if (job && this.runViews) {
      await this.runViews.show(job.jobId);
    }
  }

  async restartServer(): Promise<void> {
    this.docs.clear();
    const client = await this.server.restart();
    if (client) {
      void vscode.window.showInformationMessage(`Autocomp: language server restarted (${this.server.describe()}).`);
    }
  }

  /** Store a provider's key in SecretStorage (never in settings) and restart the server with it. */
  async setApiKey(): Promise<void> {
    const provider = await vscode.window.showQuickPick(
      PROVIDERS.map((p) => ({ label: p.label, description: `used when ${p.envVar} is not set`, provider: p })),
      { placeHolder: "Set the API key of which provider?" },
    );
    if (!provider) {
      return;
    }
    const key = await vscode.window.showInputBox({
      prompt: `${provider.label} API key (kept in VS Code's secret storage; leave empty to remove it)`,
      password: true,
      ignoreFocusOut: true,
    });
    if (key === undefined) {
      return;
    }
    if (key.trim() === "") {
      await this.context.secrets.delete(secretKey(provider.provider));
    } else {
      await this.context.secrets.store(secretKey(provider.provider), key.trim());
    }
    const choice = await vscode.window.showInformationMessage(
      `Autocomp: ${provider.label} key ${key.trim() === "" ? "removed" : "stored"}. The server reads keys when it starts.`,
      "Restart Server",
    );
    if (choice === "Restart Server") {
      await this.restartServer();
    }
  }

  /** Jobs as the server knows them (the store may lag behind a reload). */
  private async serverJobs(): Promise<JobStatus[]> {
    const client = await this.server.require();
    const answer = await client.sendRequest<{ jobs: JobStatus[] }>(Method.jobs, {});
    for (const job of answer.jobs ?? []) {
      this.jobs.update(job);
    }
    return this.jobs.all();
  }

  /** The job named, else the only/most relevant one for the active file, else a pick. */
  private async resolveJob(jobId: string | undefined, placeHolder: string): Promise<JobStatus | undefined> {
    const all = await this.serverJobs();
    if (typeof jobId === "string") {
      const job = all.find((j) => j.jobId === jobId);
      if (!job) {
        throw new Error(`the server has no job ${jobId} (it may have restarted)`);
      }
      return job;
    }
    if (all.length === 0) {
      void vscode.window.showInformationMessage("Autocomp: no optimization has run yet. Use \"Autocomp: Optimize Kernel\" first.");
      return undefined;
    }
    const active = vscode.window.activeTextEditor?.document.uri.toString();
    const here = all.filter((j) => active !== undefined && sameUri(j.uri, active));
    const candidates = here.length > 0 ? here : all;
    return candidates.length === 1 ? candidates[0] : this.pickJob(candidates, placeHolder);
  }

  private async pickJob(jobs: JobStatus[], placeHolder: string): Promise<JobStatus | undefined> {
    const picked = await vscode.window.showQuickPick(
      jobs.map((j) => ({
        label: `${j.kernel} — ${j.state}`,
        description: `${baseName(j.uri)} · best ${formatSpeedup(j.bestSpeedup)}`,
        detail: `job ${j.jobId} · iteration ${j.iteration}/${j.iterations} · ${j.evaluated} evaluated${j.message ? ` · ${j.message}` : ""}`,
        job: j,
      })),
      { placeHolder },
    );
    return picked?.job;
  }

  private async pickCandidate(job: JobStatus, correctOnly: boolean, placeHolder: string): Promise<CandidateSummary | undefined> {
    const client = await this.server.require();
    const run = await client.sendRequest<RunResult>(Method.run, { jobId: job.jobId });
    // The starting kernel (no parent) is listed for its metric but is nothing to apply.
    const pool = correctOnly
      ? run.candidates.filter((c) => isCorrectVerdict(c.verdict) && c.parent !== null)
      : run.candidates;
    if (pool.length === 0) {
      void vscode.window.showInformationMessage(
        correctOnly
          ? `Autocomp: ${job.kernel} has no correct candidate yet.`
          : `Autocomp: ${job.kernel} has no evaluated candidate yet.`,
      );
      return undefined;
    }
    const picked = await vscode.window.showQuickPick(
      rankCandidates(pool).map((c) => ({
        label: candidateLabel(c),
        description: c.id === job.bestCandidateId ? "best" : undefined,
        detail: candidateDetail(c),
        candidate: c,
      })),
      { placeHolder, matchOnDetail: true },
    );
    return picked?.candidate;
  }
}

/** Compare URIs as the server and VS Code may spell them (e.g. `%3A` vs `:` in drive letters). */
export function sameUri(a: string, b: string): boolean {
  const norm = (u: string) => {
    try {
      return decodeURIComponent(u).toLowerCase();
    } catch {
      return u.toLowerCase();
    }
  };
  return norm(a) === norm(b);
}
