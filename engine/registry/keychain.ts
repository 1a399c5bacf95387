/**
 * Registry credentials from the Docker keychain, as `docker login` leaves them: the
 * config file `$DOCKER_CONFIG/config.json` (else `~/.docker/config.json`) with its
 * `auths`, and the credential helpers it names (`credHelpers` per registry host,
 * `credsStore` for every other), run as `docker-credential-<name> get` with the host on
 * stdin.
 *
 * Order for one host: its `credHelpers` entry, else `credsStore`; when that helper has
 * nothing for the host (or neither is set), the `auths` entry of the host; else none
 * (anonymous).
 *
 * A credential is never put into an error message: a helper's output is not echoed, and a
 * file that cannot be parsed is named, not quoted.
 *
 * @see https://docs.docker.com/reference/cli/docker/login/#credential-helpers
 */
import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { BrandedError } from "../kube/branded-error.js";

/** What the keychain holds for one registry. */
export interface RegistryCredential {
  /** User name for Basic auth and the token endpoint's Basic auth. */
  username?: string;
  /** Password (or access token used as one). */
  password?: string;
  /** An OAuth2 refresh token (`identitytoken`): exchanged at the token endpoint. */
  identityToken?: string;
}

/** Thrown when the Docker config cannot be read or a credential helper fails. */
export class KeychainError extends BrandedError {
  constructor(message: string) {
    super(message);
  }
}

/** The part of a Docker `config.json` the keychain reads. */
export interface DockerConfig {
  auths?: Record<
    string,
    {
      auth?: string;
      username?: string;
      password?: string;
      identitytoken?: string;
    }
  >;
  credHelpers?: Record<string, string>;
  credsStore?: string;
}

/** Finds a registry's credential (undefined: anonymous). */
export interface Keychain {
  resolve(host: string): Promise<RegistryCredential | undefined>;
}

/** Where the Docker config lives: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`. */
export function dockerConfigPath(env: Record<string, string | undefined> = process.env): string {
  const dir = env.DOCKER_CONFIG?.trim() || join(homedir(), ".docker");
  return join(dir, "config.json");
}

/**
 * The host an `auths` key names: Docker writes keys as `host`, `https://host`,
 * `http://host/v1/` and so on; Docker Hub's legacy key names `index.docker.io`.
 */
export function authsKeyHost(key: string): string {
  return key
    .trim()
    .replace(/^[a-z]+:\/\//i, "")
    .replace(/\/.*$/, "")
    .toLowerCase();
}

/**
 * The credential an `auths` entry holds: `auth` (base64 of `user:password`), else
 * `username`/`password`, plus `identitytoken`; undefined when it holds none.
 * @throws KeychainError for an `auth` that is not base64 of `user:password` (the value is not quoted)
 */
function credentialOfAuthsEntry(
  key: string,
  entry: NonNullable<DockerConfig["auths"]>[string],
): RegistryCredential | undefined {
  let username = entry.username || undefined;
  let password = entry.password || undefined;
  if (entry.auth) {
    const decoded = Buffer.from(entry.auth, "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon <= 0)
      throw new KeychainError(
        `the Docker config's auths["${key}"].auth is not base64 of user:password`,
      );
    username = decoded.slice(0, colon);
    password = decoded.slice(colon + 1);
  }
  const identityToken = entry.identitytoken || undefined;
  if (!password && !identityToken) return undefined;
  return { username, password, identityToken };
}

/** The `auths` entry for `host` (keys are compared by the host they name). */
export function authsEntryFor(config: DockerConfig, host: string): RegistryCredential | undefined {
  const want = host.toLowerCase();
  for (const [key, entry] of Object.entries(config.auths ?? {})) {
    if (authsKeyHost(key) !== want || typeof entry !== "object" || entry === null) continue;
    const cred = credentialOfAuthsEntry(key, entry);
    if (cred) return cred;
  }
  return undefined;
}

/** The helper `host` is given to: its `credHelpers` entry, else `credsStore`. */
export function helperFor(config: DockerConfig, host: string): string | undefined {
  const want = host.toLowerCase();
  for (const [key, name] of Object.entries(config.credHelpers ?? {}))
    if (authsKeyHost(key) === want && name) return name;
  return config.credsStore || undefined;
}

/** Runs a helper program with its input; resolves with its exit code and output. */
export type HelperRunner = (
  program: string,
  args: string[],
  input: string,
) => Promise<{ code: number; stdout: string }>;

const runProgram: HelperRunner = (program, args, input) =>
  new Promise((resolve, reject) => {
    const child = spawn(program, args, { stdio: ["pipe", "pipe", "ignore"] });
    let stdout = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (d: string) => (stdout += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout });
    });
    child.stdin.on("error", () => {});
    child.stdin.end(input);
  });

/**
 * Asks `docker-credential-<name> get` for `host`'s credential. A helper that answers
 * "credentials not found" yields undefined; a helper that fails otherwise, or is missing,
 * throws (naming the helper and its exit code, never its output).
 */
export async function credentialFromHelper(
  name: string,
  host: string,
  run: HelperRunner = runProgram,
): Promise<RegistryCredential | undefined> {
  const program = `docker-credential-${name}`;
  let out: { code: number; stdout: string };
  try {
    out = await run(program, ["get"], host);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new KeychainError(
      `credential helper ${program} for ${host} could not be run${code ? ` (${code})` : ""}`,
    );
  }
  if (out.code !== 0) {
    if (/credentials not found/i.test(out.stdout)) return undefined;
    throw new KeychainError(
      `credential helper ${program} get for ${host} failed with exit code ${out.code}`,
    );
  }
  let parsed: { Username?: unknown; Secret?: unknown };
  try {
    parsed = JSON.parse(out.stdout) as typeof parsed;
  } catch {
    throw new KeychainError(`credential helper ${program} get for ${host} printed no JSON`);
  }
  const username = typeof parsed.Username === "string" ? parsed.Username : "";
  const secret = typeof parsed.Secret === "string" ? parsed.Secret : "";
  if (!secret) return undefined;
  // A helper returns an identity token under the user name "<token>".
  return username === "<token>" ? { identityToken: secret } : { username, password: secret };
}

/** Options of {@link dockerKeychain}. */
export interface DockerKeychainOptions {
  /** @default process.env (for `DOCKER_CONFIG`) */
  env?: Record<string, string | undefined>;
  /** Runs a credential helper (injectable for tests). */
  run?: HelperRunner;
}

/** The Docker keychain: reads the config file on every lookup (so `docker login` is seen). */
export function dockerKeychain(opts: DockerKeychainOptions = {}): Keychain {
  return {
    async resolve(host) {
      const path = dockerConfigPath(opts.env ?? process.env);
      let text: string;
      try {
        text = await readFile(path, "utf8");
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        throw new KeychainError(
          `the Docker config ${path} cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})`,
        );
      }
      let config: DockerConfig;
      try {
        config = JSON.parse(text) as DockerConfig;
      } catch {
        throw new KeychainError(`the Docker config ${path} is not JSON`);
      }
      if (typeof config !== "object" || config === null) return undefined;
      const helper = helperFor(config, host);
      if (helper) {
        const cred = await credentialFromHelper(helper, host, opts.run);
        if (cred) return cred;
      }
      return authsEntryFor(config, host);
    },
  };
}
