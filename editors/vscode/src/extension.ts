/**
 * Entry point: wires the server connection, the job store, the status bar, the candidate
 * documents, the run view and the commands together. Each piece lives in its own module.
 */

import * as vscode from "vscode";

import { CandidateDocuments, SCHEME } from "./candidateDocs";
import { ServerConnection, type MiddlewareHook } from "./client";
import { Commands } from "./commands";
import { JobStore } from "./jobs";
import { ServerCommand, type OptimizeResult } from "./protocol";
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
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("autocomp.server")) {
        void vscode.window
          .showInformationMessage("Autocomp: the server settings changed.", "Restart Server")
          .then((choice) => choice && vscode.commands.executeCommand("autocomp.restartServer"));
      }
    }),
  );

  // The server itself announces how each job ended (window/showMessage), so the extension
  // adds no toast of its own; the status bar keeps the last job's outcome one click away.

  // Start the server with the first kernel-language file; failures are reported inside.
  await connection.ensure();
}

export async function deactivate(): Promise<void> {
  await connection?.stop();
  connection = undefined;
}
