/**
 * Owns the language client: starts `autocomp lsp` as configured, restarts it, and turns a
 * failed start into one clear message with the fix (instead of the client's generic
 * "couldn't create connection" pop-ups). Job notifications are forwarded to the JobStore.
 */

import * as readline from "readline";
import type { Readable } from "stream";
import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  LanguageClient,
  type LanguageClientOptions,
  RevealOutputChannelOn,
  type ServerOptions,
} from "vscode-languageclient/node";

import type { JobStore } from "./jobs";
import { findOnPath, serverLaunch, startFailureMessage, type Launch } from "./launch";
import { Method, type JobStatus } from "./protocol";
import { serverEnvironment } from "./secrets";
// The languages whose files may hold a kernel: generated from the targets' declarations.
import { LANGUAGES } from "./targets";

/** The shipped targets' languages plus `autocomp.server.extraLanguages` (a target plugin's). */
export function kernelLanguages(): string[] {
  const extra = vscode.workspace.getConfiguration("autocomp.server").get<string[]>("extraLanguages", []);
  return [...new Set([...LANGUAGES, ...(Array.isArray(extra) ? extra : []).filter((l) => typeof l === "string" && l.trim() !== "")])];
}


export type MiddlewareHook = LanguageClientOptions["middleware"];

/**
 * The stock client, except that a failed start is only logged: ServerConnection shows one
 * message with the fix instead of the client's generic "couldn't create connection" pop-up.
 */
class AutocompLanguageClient extends LanguageClient {
  override error(message: string, data?: unknown, showNotification: boolean | "force" = true): void {
    super.error(message, data, /couldn't create connection/.test(message) ? false : showNotification);
  }
}

function lines(input: Readable, each: (line: string) => void): void {
  readline.createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 }).on("line", each);
}

export class ServerConnection implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private starting: Promise<LanguageClient | undefined> | undefined;
  private launch: Launch | undefined;
  private crashes: number[] = [];
  /** The server's last stderr lines: the real reason when it exits during start-up. */
  private stderrTail: string[] = [];

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly output: vscode.LogOutputChannel,
    private readonly jobs: JobStore,
    private readonly middleware: MiddlewareHook,
  ) {}

  /** The running client, starting it on first use; undefined when it cannot start. */
  async ensure(): Promise<LanguageClient | undefined> {
    if (this.client?.isRunning()) {
      return this.client;
    }
    if (!this.starting) {
      this.starting = this.start().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  /** Like ensure(), but throws with the fix when the server is not available. */
  async require(): Promise<LanguageClient> {
    const client = await this.ensure();
    if (!client) {
      throw new Error(
        "The Autocomp language server is not running. Check the Autocomp output channel, fix the setting it names, and run \"Autocomp: Restart Server\".",
      );
    }
    return client;
  }

  async restart(): Promise<LanguageClient | undefined> {
    await this.stop();
    this.jobs.clear();
    return this.ensure();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.stop(5000);
      } catch (error) {
        this.output.info(`[autocomp] stopping the server: ${String(error)}`);
      }
      await client.dispose();
    }
  }

  dispose(): void {
    void this.stop();
  }

  private settings() {
    const cfg = vscode.workspace.getConfiguration("autocomp.server");
    return {
      path: cfg.get<string>("path", "autocomp"),
      pythonPath: cfg.get<string>("pythonPath", ""),
      extraArgs: cfg.get<string[]>("args", []),
    };
  }

  private async start(): Promise<LanguageClient | undefined> {
    const launch = serverLaunch(this.settings());
    this.launch = launch;
    const env = await serverEnvironment(process.env, this.context.secrets);
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    if (findOnPath(launch.command, env.PATH ?? "") === undefined) {
      const error = new Error(`spawn ${launch.command} ENOENT`);
      this.output.error(`[autocomp] could not start: ${error.message}`);
      void this.reportStartFailure(launch, error);
      return undefined;
    }
    // No `transport`: the client would append `--stdio`, which `autocomp lsp` does not take
    // (stdio is its only transport).
    const serverOptions: ServerOptions = {
      command: launch.command,
      args: launch.args,
      options: { env, cwd },
    };
    this.stderrTail = [];
    const clientOptions: LanguageClientOptions = {
      documentSelector: kernelLanguages().flatMap((language) => [
        { scheme: "file", language },
        { scheme: "untitled", language },
      ]),
      synchronize: { configurationSection: "autocomp" },
      outputChannel: this.output,
      stdioOptions: {
        stdout: (input, channel) => lines(input, (line) => channel.info(line)),
        stderr: (input, channel) =>
          lines(input, (line) => {
            channel.error(line);
            this.stderrTail.push(line);
            if (this.stderrTail.length > 20) {
              this.stderrTail.shift();
            }
          }),
      },
      // The start-failure message below replaces the client's own pop-ups.
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationFailedHandler: (error) => {
        this.output.info(`[autocomp] initialization failed: ${String(error)}`);
        return false;
      },
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue, handled: true }),
        closed: () => this.onClosed(),
      },
      middleware: this.middleware,
    };
    const client = new AutocompLanguageClient("autocomp", "Autocomp", serverOptions, clientOptions);
    client.onNotification(Method.jobStatus, (job: JobStatus) => this.jobs.update(job));
    this.output.info(`[autocomp] starting: ${launch.display}`);
    try {
      await client.start();
    } catch (error) {
      this.output.info(`[autocomp] could not start: ${String(error)}`);
      await client.dispose().catch(() => undefined);
      // Give the server's last words (stderr) a moment to arrive: they name the real cause.
      await new Promise((resolve) => setTimeout(resolve, 300));
      void this.reportStartFailure(launch, error, this.stderrTail.slice(-3).join(" | "));
      return undefined;
    }
    this.client = client;
    this.crashes = [];
    await this.refreshJobs(client);
    return client;
  }

  /** Pick up jobs the server already has (e.g. after the window reloaded). */
  private async refreshJobs(client: LanguageClient): Promise<void> {
    try {
      const answer = await client.sendRequest<{ jobs: JobStatus[] }>(Method.jobs, {});
      for (const job of answer.jobs ?? []) {
        this.jobs.update(job);
      }
    } catch (error) {
      this.output.info(`[autocomp] ${Method.jobs} failed: ${String(error)}`);
    }
  }

  /** Restart after a crash at most 3 times in 3 minutes, then say so once. */
  private onClosed() {
    if (!this.client) {
      // Never got running: start() reports that itself.
      return { action: CloseAction.DoNotRestart, handled: true };
    }
    const now = Date.now();
    this.crashes = this.crashes.filter((t) => now - t < 180_000);
    this.crashes.push(now);
    if (this.crashes.length <= 3) {
      this.output.info("[autocomp] the server exited; restarting it");
      return { action: CloseAction.Restart, handled: true };
    }
    this.client = undefined;
    void vscode.window
      .showErrorMessage(
        "The Autocomp language server exited 4 times in 3 minutes and was not restarted. The Autocomp output channel has its error.",
        "Show Output",
        "Restart Server",
      )
      .then((choice) => {
        if (choice === "Show Output") {
          this.output.show();
        } else if (choice === "Restart Server") {
          void vscode.commands.executeCommand("autocomp.restartServer");
        }
      });
    return { action: CloseAction.DoNotRestart, handled: true };
  }

  private async reportStartFailure(launch: Launch, error: unknown, serverSaid = ""): Promise<void> {
    const choice = await vscode.window.showErrorMessage(
      startFailureMessage(launch, error, serverSaid),
      "Open Settings",
      "Show Output",
    );
    if (choice === "Open Settings") {
      await vscode.commands.executeCommand("workbench.action.openSettings", "autocomp.server");
    } else if (choice === "Show Output") {
      this.output.show();
    }
  }

  /** The command line in use, for messages. */
  describe(): string {
    return this.launch?.display ?? serverLaunch(this.settings()).display;
  }
}
