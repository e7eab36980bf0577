/**
 * Read-only virtual documents for the diff editor: the kernel the job started from and a
 * candidate, both served from `autocomp/candidate` so nothing is written to disk. URIs look
 * like `autocomp-candidate:/<jobId>/<candidateId>/<side>/<file name>`; the file name keeps the
 * source's extension so the diff editor colours the code.
 */

import * as vscode from "vscode";

import type { ServerConnection } from "./client";
import { Method, type CandidateDetail } from "./protocol";

export const SCHEME = "autocomp-candidate";

export type Side = "original" | "candidate";

export function candidateUri(jobId: string, candidateId: string, side: Side, fileName: string): vscode.Uri {
  const seg = (s: string) => encodeURIComponent(s);
  return vscode.Uri.from({ scheme: SCHEME, path: `/${seg(jobId)}/${seg(candidateId)}/${side}/${seg(fileName)}` });
}

export function parseCandidateUri(uri: vscode.Uri): { jobId: string; candidateId: string; side: Side } {
  const [, jobId, candidateId, side] = uri.path.split("/");
  if (!jobId || !candidateId || (side !== "original" && side !== "candidate")) {
    throw new Error(`not an Autocomp candidate document: ${uri.toString()}`);
  }
  return { jobId: decodeURIComponent(jobId), candidateId: decodeURIComponent(candidateId), side };
}

export class CandidateDocuments implements vscode.TextDocumentContentProvider {
  private readonly cache = new Map<string, Promise<CandidateDetail>>();

  constructor(private readonly server: ServerConnection) {}

  /** Fetch (once) the candidate's code and the original it is compared with. */
  detail(jobId: string, candidateId: string): Promise<CandidateDetail> {
    const key = `${jobId}\u0000${candidateId}`;
    let entry = this.cache.get(key);
    if (!entry) {
      entry = this.server
        .require()
        .then((client) => client.sendRequest<CandidateDetail>(Method.candidate, { jobId, candidateId }));
      entry.catch(() => this.cache.delete(key));
      this.cache.set(key, entry);
    }
    return entry;
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const { jobId, candidateId, side } = parseCandidateUri(uri);
    const detail = await this.detail(jobId, candidateId);
    return side === "original" ? detail.original : detail.code;
  }

  /** Forget cached texts (after a server restart job ids may be reused). */
  clear(): void {
    this.cache.clear();
  }
}
