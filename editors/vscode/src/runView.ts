/**
 * The "Show Run" webview: one panel per job, re-rendered from `autocomp/run` whenever the
 * job's status changes (throttled), with Diff and Apply buttons that post back to the
 * extension. Rendering itself lives in runHtml.ts.
 */

import { randomBytes } from "crypto";
import * as vscode from "vscode";

import type { ServerConnection } from "./client";
import type { JobStore } from "./jobs";
import { Method, type RunResult } from "./protocol";
import { renderRunPage } from "./runHtml";

export interface RunViewActions {
  diff(jobId: string, candidateId: string): Promise<void>;
  apply(jobId: string, candidateId: string): Promise<void>;
}

export class RunViews implements vscode.Disposable {
  private readonly panels = new Map<string, vscode.WebviewPanel>();
  private readonly pending = new Map<string, NodeJS.Timeout>();
  private readonly subscription: { dispose(): void };

  constructor(
    private readonly server: ServerConnection,
    jobs: JobStore,
    private readonly actions: RunViewActions,
  ) {
    this.subscription = jobs.onDidChange((job) => {
      if (this.panels.has(job.jobId)) {
        this.schedule(job.jobId);
      }
    });
  }

  /** Open (or reveal) the panel for a job and render it now. */
  async show(jobId: string): Promise<void> {
    let panel = this.panels.get(jobId);
    if (panel) {
      panel.reveal(undefined, false);
    } else {
      panel = vscode.window.createWebviewPanel("autocomp.run", `Autocomp run ${jobId}`, vscode.ViewColumn.Beside, {
        enableScripts: true,
        localResourceRoots: [],
      });
      const created = panel;
      this.panels.set(jobId, created);
      created.onDidDispose(() => {
        this.panels.delete(jobId);
        const timer = this.pending.get(jobId);
        if (timer) {
          clearTimeout(timer);
          this.pending.delete(jobId);
        }
      });
      created.webview.onDidReceiveMessage((message: { type?: string; candidateId?: string }) => {
        if (typeof message?.candidateId !== "string") {
          return;
        }
        const run = message.type === "diff" ? this.actions.diff : message.type === "apply" ? this.actions.apply : undefined;
        run?.call(this.actions, jobId, message.candidateId).catch((error: unknown) => {
          void vscode.window.showErrorMessage(`Autocomp: ${error instanceof Error ? error.message : String(error)}`);
        });
      });
    }
    await this.render(jobId);
  }

  private schedule(jobId: string): void {
    if (this.pending.has(jobId)) {
      return;
    }
    this.pending.set(
      jobId,
      setTimeout(() => {
        this.pending.delete(jobId);
        void this.render(jobId);
      }, 500),
    );
  }

  private async render(jobId: string): Promise<void> {
    const panel = this.panels.get(jobId);
    if (!panel) {
      return;
    }
    try {
      const client = await this.server.require();
      const run = await client.sendRequest<RunResult>(Method.run, { jobId });
      panel.title = `Autocomp: ${run.job.kernel} (${run.job.state})`;
      panel.webview.html = renderRunPage(run, {
        nonce: randomBytes(16).toString("base64"),
        cspSource: panel.webview.cspSource,
      });
    } catch (error) {
      const text = error instanceof Error ? error.message : String(error);
      panel.webview.html = `<!DOCTYPE html><html><body><p>Could not load run ${jobId}: ${text.replace(/[<&>]/g, "")}</p></body></html>`;
    }
  }

  dispose(): void {
    this.subscription.dispose();
    for (const timer of this.pending.values()) {
      clearTimeout(timer);
    }
    for (const panel of this.panels.values()) {
      panel.dispose();
    }
  }
}
