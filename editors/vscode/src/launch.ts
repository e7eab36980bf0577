/**
 * How the extension starts `autocomp lsp`, worked out from the settings. No `vscode` import,
 * so the rules are unit-tested: a Python interpreter setting wins over the command,
 * because it pins the environment that has Autocomp installed.
 */

import { accessSync, constants, statSync } from "fs";

export interface ServerSettings {
  /** `autocomp.server.path`: the autocomp executable (a name on PATH or a full path). */
  path: string;
  /** `autocomp.server.pythonPath`: a Python interpreter whose environment has Autocomp. */
  pythonPath: string;
  /** `autocomp.server.args`: extra arguments after `lsp`. */
  extraArgs: string[];
}

export interface Launch {
  command: string;
  args: string[];
  /** What the user reads in messages, e.g. `autocomp lsp`. */
  display: string;
}

/**
 * A one-line program for `python -c` that runs Autocomp's CLI entry point. It does not rely on
 * a `__main__` module, only on the `autocomp` console-script target that pip installs.
 */
export const PYTHON_BOOTSTRAP =
  "import sys; sys.argv[0] = 'autocomp'; from autocomp.cli.main import main; sys.exit(main())";

function quote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

export function serverLaunch(settings: ServerSettings): Launch {
  const extra = settings.extraArgs.filter((a) => a.length > 0);
  if (settings.pythonPath.trim() !== "") {
    const command = settings.pythonPath.trim();
    const args = ["-c", PYTHON_BOOTSTRAP, "lsp", ...extra];
    return { command, args, display: [quote(command), "-c <autocomp.cli.main> lsp", ...extra.map(quote)].join(" ") };
  }
  const command = settings.path.trim() === "" ? "autocomp" : settings.path.trim();
  const args = ["lsp", ...extra];
  return { command, args, display: [quote(command), ...args.map(quote)].join(" ") };
}

/**
 * Where `command` would be found: itself when it names a path, else the first executable
 * of that name on `pathVar`. Undefined when there is none (the spawn would fail ENOENT).
 */
export function findOnPath(command: string, pathVar: string, isExecutable: (file: string) => boolean = executable): string | undefined {
  if (command.includes("/")) {
    return isExecutable(command) ? command : undefined;
  }
  for (const dir of pathVar.split(":")) {
    const file = `${dir === "" ? "." : dir}/${command}`;
    if (isExecutable(file)) {
      return file;
    }
  }
  return undefined;
}

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * The message, with the fix, shown when the server cannot be started. `serverSaid` is the
 * tail of the server's stderr, which usually names the real cause.
 */
export function startFailureMessage(launch: Launch, error: unknown, serverSaid = ""): string {
  const detail = error instanceof Error ? error.message : String(error);
  const notFound = /ENOENT/i.test(detail);
  const noModule = /No module named ['"]?autocomp/i.test(`${detail} ${serverSaid}`);
  const cause = notFound
    ? `the command \`${launch.command}\` was not found`
    : noModule
      ? `Python at \`${launch.command}\` has no \`autocomp\` package`
      : `\`${launch.display}\` exited during start-up${serverSaid ? ` saying: ${serverSaid}` : ` (${detail})`}`;
  return (
    `Autocomp could not start its language server: ${cause}. ` +
    "Fix: install Autocomp into a Python 3.10–3.12 environment (`pip install -e .` in the Autocomp checkout), " +
    'then set "autocomp.server.pythonPath" to that environment\'s python, or "autocomp.server.path" to its `autocomp` executable, and run "Autocomp: Restart Server". ' +
    "The Autocomp output channel has the server's own error."
  );
}
