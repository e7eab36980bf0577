/**
 * API keys for the LLM providers. They never go into settings (settings sync and workspace
 * files would leak them): they come from the environment, or from VS Code's SecretStorage,
 * filled by "Autocomp: Set API Key", and reach the server only through its environment.
 */

export interface Provider {
  id: string;
  label: string;
  envVar: string;
}

export const PROVIDERS: readonly Provider[] = [
  { id: "openai", label: "OpenAI", envVar: "OPENAI_API_KEY" },
  { id: "anthropic", label: "Anthropic", envVar: "ANTHROPIC_API_KEY" },
];

/** The SecretStorage key for a provider. */
export function secretKey(provider: Provider): string {
  return `autocomp.apiKey.${provider.id}`;
}

/** Minimal view of SecretStorage, so this module stays testable without VS Code. */
export interface SecretReader {
  get(key: string): PromiseLike<string | undefined>;
}

/**
 * The server's environment: the extension host's own, plus stored keys for providers whose
 * variable is not already set (a key set in the environment wins; it was chosen explicitly).
 */
export async function serverEnvironment(
  base: NodeJS.ProcessEnv,
  secrets: SecretReader,
): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(base)) {
    if (v !== undefined) {
      env[k] = v;
    }
  }
  for (const provider of PROVIDERS) {
    if (!env[provider.envVar]) {
      const stored = await secrets.get(secretKey(provider));
      if (stored) {
        env[provider.envVar] = stored;
      }
    }
  }
  return env;
}
