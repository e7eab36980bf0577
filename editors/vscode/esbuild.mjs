// Bundles the extension into one CommonJS file (dist/extension.js) with `vscode` left external,
// or, with --tests, each unit test (test/*.test.ts) into out/test/ for `node --test`.
// Why a script and not CLI flags: the same options serve CI, `vscode:prepublish` and the UI test.
import { build } from "esbuild";
import { readdirSync } from "node:fs";

const production = process.argv.includes("--production");
const tests = process.argv.includes("--tests");

const common = {
  bundle: true,
  platform: "node",
  target: "node20",
  format: "cjs",
  logLevel: "warning",
};

if (tests) {
  const entryPoints = readdirSync("test")
    .filter((f) => f.endsWith(".test.ts"))
    .map((f) => `test/${f}`);
  await build({ ...common, entryPoints, outdir: "out/test", sourcemap: "inline" });
} else {
  await build({
    ...common,
    entryPoints: ["src/extension.ts"],
    outfile: "dist/extension.js",
    external: ["vscode"],
    sourcemap: production ? false : "linked",
    minify: production,
    metafile: false,
  });
}
