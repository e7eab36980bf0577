/**
 * Entry point: wires the server connection, the job store, the status bar, the candidate
 * documents, the run view and the commands together. Each piece lives in its own module.
 */

import * as vscode from "vscode";

import { CandidateDocuments, SCHEME } from "./candidateDocs";
import { ServerConnection, type MiddlewareHook } from "./client";
import { Commands } from "./commands";
import { formatSpeedup } from "./format";
import { JobStore } from "./jobs";
import { ServerCommand, type JobStatus, type OptimizeResult } from "./protocol";
import { RunViews } from "./runView";
import { JobStatusBar } from "./statusBar";

let connection: ServerConnection | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("Autocomp", { log: true });
  const jobs = new JobStore();
  let commands: Commands | undefined;

  // Commands the server puts in code lenses and code actions run through the client's own
  // command proxies; steer two of them into the native UI.
  const middleware: MiddlewareHook = {
    executeCommand: async (command, args, next) => {
      if (command === ServerCommand.showDiff && commands) {
        const arg = (args[0] ?? {}) as { jobId?: string; candidateId?: string };
        if (arg.jobId && arg.candidateId) {
          await commands.diff(arg.jobId, arg.candidateId);
          return undefined;
        }
      }
      const result = await next(command, args);
      if (command === ServerCommand.optimize && commands) {
        commands.trackStarted((result as OptimizeResult | undefined)?.jobId);
      }
      return result;
    },
  };

  connection = new ServerConnection(context, output, jobs, middleware);
  const docs = new CandidateDocuments(connection);
  commands = new Commands(context, connection, jobs, docs);
  const runViews = new RunViews(connection, jobs, {
    diff: (jobId, candidateId) => commands!.diff(jobId, candidateId),
    apply: (jobId, candidateId) => commands!.apply(jobId, candidateId),
  });
  commands.runViews = runViews;

  context.subscriptions.push(
    output,
    connection,
    new JobStatusBar(jobs),
    runViews,
    vscode.workspace.registerTextDocumentContentProvider(SCHEME, docs),
    ...commands.register(),
    announceEndings(jobs),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("autocomp.server")) {
        void vscode.window
          .showInformationMessage("Autocomp: the server settings changed.", "Restart Server")
          .then((choice) => choice && vscode.commands.executeCommand("autocomp.restartServer"));
      }
    }),
  );

  // Start the server with the first kernel-language file; failures are reported inside.
  await connection.ensure();
}

/** One message when a job ends, with the next useful actions. */
function announceEndings(jobs: JobStore): { dispose(): void } {
  return jobs.onDidChange((job: JobStatus, previous: JobStatus | undefined) => {
    if (job.state === "running" || previous?.state === job.state) {
      return;
    }
    if (previous === undefined && job.state !== "finished") {
      return; // an old job picked up after a restart: nothing new to announce
    }
    const best = job.bestSpeedup !== null ? ` Best: ${formatSpeedup(job.bestSpeedup)} on ${job.primaryMetric}.` : "";
    const text = `Autocomp: ${job.kernel} ${job.state}.${best}${job.message ? ` ${job.message}` : ""}`;
    const actions = job.bestCandidateId ? ["Show Run", "Show Diff"] : ["Show Run"];
    const show = job.state === "failed" ? vscode.window.showErrorMessage : vscode.window.showInformationMessage;
    void show(text, ...actions).then((choice) => {
      if (choice === "Show Run") {
        void vscode.commands.executeCommand("autocomp.showRun", job.jobId);
      } else if (choice === "Show Diff" && job.bestCandidateId) {
        void vscode.commands.executeCommand("autocomp.showCandidateDiff", job.jobId, job.bestCandidateId);
      }
    });
  });
}

export async function deactivate(): Promise<void> {
  await connection?.stop();
  connection = undefined;
}
