/**
 * The status bar item: the focused job's state, progress and best speedup. A click cancels
 * a running job (vscode-languageclient shows server progress without a cancel button, so
 * this is the one-click way out) and opens the run view for a finished one.
 */

import * as vscode from "vscode";

import { statusBarText, statusBarTooltip } from "./format";
import type { JobStore } from "./jobs";

export class JobStatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private readonly subscriptions: { dispose(): void }[];

  constructor(private readonly jobs: JobStore) {
    this.item = vscode.window.createStatusBarItem("autocomp.job", vscode.StatusBarAlignment.Left, 50);
    this.item.name = "Autocomp optimization";
    this.subscriptions = [jobs.onDidChange(() => this.render()), jobs.onDidClear(() => this.render())];
    this.render();
  }

  render(): void {
    const job = this.jobs.focus();
    if (!job) {
      this.item.hide();
      return;
    }
    this.item.text = statusBarText(job);
    this.item.tooltip = statusBarTooltip(job);
    this.item.backgroundColor =
      job.state === "failed" ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
    this.item.command =
      job.state === "running"
        ? { title: "Cancel Optimization", command: "autocomp.cancelOptimization", arguments: [job.jobId] }
        : { title: "Show Run", command: "autocomp.showRun", arguments: [job.jobId] };
    this.item.accessibilityInformation = {
      label: `${statusBarText(job).replace(/\$\([^)]*\)\s*/g, "")}. ${job.state === "running" ? "Activate to cancel." : "Activate to show the run."}`,
    };
    this.item.show();
  }

  dispose(): void {
    this.subscriptions.forEach((s) => s.dispose());
    this.item.dispose();
  }
}
