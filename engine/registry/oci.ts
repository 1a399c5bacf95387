/**
 * A small client of the OCI distribution API (`/v2/…`), for the few calls the snapshot
 * contract needs: is a tag there, drop a tag, list a repository's tags, and push a blob and
 * a manifest.
 *
 * Authentication is as `docker` does it: a call the registry answers 401 is retried once
 * with what its `WWW-Authenticate` asks for. `Bearer realm=…,service=…,scope=…` fetches a
 * token from the realm (with Basic credentials from the keychain when it has some, or an
 * `identitytoken` exchanged as an OAuth2 refresh token; anonymous otherwise), kept per
 * repository and action until it expires and fetched again on the next 401; `Basic` sends
 * the keychain's user and password, then on every call. Credentials come from the Docker
 * keychain (`./keychain.ts`).
 *
 * Transport: https, trusting the system roots plus a CA bundle the caller names; plain http
 * only for a loopback host or with the insecure flag. Tag lists follow `Link` pages.
 *
 * A registry is named as the operator's `OCI_REGISTRY` names it: `host[:port][/prefix]`.
 * A VM's snapshots live in the repository `<prefix>/<vm name>` under the tags `hibernate`
 * and `latest`.
 *
 * No credential or token is put into an error message: the values seen are replaced by
 * `[redacted]` in any text taken from an answer.
 *
 * @see https://github.com/opencontainers/distribution-spec/blob/main/spec.md
 * @see https://distribution.github.io/distribution/spec/auth/token/
 */
import { createHash } from "node:crypto";
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { request as httpsRequest } from "node:https";
import { rootCertificates } from "node:tls";
import { BrandedError, errorMessage } from "../kube/branded-error.js";
import {
  isLoopbackRegistryHost,
  plainHttpProblem,
  redactRegistryAddress,
  userinfoOf,
} from "./address.js";
import { dockerKeychain, type Keychain, type RegistryCredential } from "./keychain.js";

/** Media type of an OCI image manifest. */
export const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";

/** Thrown when the registry answers a call with an unexpected status, or not at all. */
export class RegistryError extends BrandedError {
  constructor(
    message: string,
    /** The HTTP status, or 0 when no answer came. */
    readonly status: number,
  ) {
    super(message);
  }
}

/** Options of {@link OciRegistry}. */
export interface OciRegistryOptions {
  /**
   * Speak http instead of https (an explicit choice, as the insecure flag).
   * @default as the name's scheme says when it has one (`http://…`, which for a host that
   *   is not loopback needs {@link insecure}), else http for a loopback host (127.0.0.1,
   *   localhost, [::1]) or with {@link insecure}, and https for any other
   */
  plainHttp?: boolean;
  /** Allow plain http to a host that is not loopback. @default false */
  insecure?: boolean;
  /** PEM CA bundle trusted for the registry's https, besides the system roots. */
  ca?: string;
  /** Where credentials come from. @default the Docker keychain ({@link dockerKeychain}) */
  keychain?: Keychain;
  /** Per-call deadline. @default 30000 */
  timeoutMs?: number;
  /** Tags asked for per page (`?n=`); the registry's own page size when unset. */
  tagsPageSize?: number;
}

/** `sha256:<hex>` of some bytes. */
export function digestOf(bytes: Buffer | string): string {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

/** One authentication challenge of a `WWW-Authenticate` header. */
export interface Challenge {
  /** Lower case: `bearer`, `basic`, … */
  scheme: string;
  /** Parameter names in lower case. */
  params: Record<string, string>;
}

/**
 * The challenges of a `WWW-Authenticate` header (RFC 7235): `Scheme k=v, k="v", Scheme2 …`.
 * Quoted values may hold commas and escaped quotes.
 */
export function parseChallenges(header: string | null | undefined): Challenge[] {
  const out: Challenge[] = [];
  if (!header) return out;
  let i = 0;
  const s = header;
  const skip = (re: RegExp) => {
    while (i < s.length && re.test(s[i])) i++;
  };
  while (i < s.length) {
    skip(/[\s,]/);
    const scheme = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+/.exec(s.slice(i))?.[0];
    if (!scheme) break;
    i += scheme.length;
    const challenge: Challenge = { scheme: scheme.toLowerCase(), params: {} };
    out.push(challenge);
    for (;;) {
      skip(/[\s,]/);
      const m = /^([A-Za-z0-9!#$%&'*+.^_`|~-]+)\s*=\s*/.exec(s.slice(i));
      if (!m) break;
      i += m[0].length;
      let value = "";
      if (s[i] === '"') {
        i++;
        while (i < s.length && s[i] !== '"') {
          if (s[i] === "\\" && i + 1 < s.length) i++;
          value += s[i++];
        }
        i++;
      } else {
        const v = /^[^\s,]*/.exec(s.slice(i))![0];
        value = v;
        i += v.length;
      }
      challenge.params[m[1].toLowerCase()] = value;
    }
  }
  return out;
}

/** The `rel="next"` target of a `Link` header, if any. */
export function nextLink(header: string | null | undefined): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(/,(?=\s*<)/)) {
    const m = /^\s*<([^>]*)>(.*)$/.exec(part);
    if (m && /;\s*rel\s*=\s*"?next"?/i.test(m[2])) return m[1];
  }
  return undefined;
}

/** An answer: status, headers and the whole body (answers here are small). */
interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

const header = (a: Answer, name: string): string | undefined => {
  const v = a.headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
};

/** An Authorization value and when it stops being good (ms since the epoch). */
interface Grant {
  authorization: string;
  expiresAt: number;
}

/** The action class of a call, for the token cache: the registry asks per action. */
function actionOf(method: string): string {
  if (method === "GET" || method === "HEAD") return "pull";
  if (method === "DELETE") return "delete";
  return "push";
}

/** A client of one registry, given as `host[:port][/prefix]`. */
export class OciRegistry {
  /** `http(s)://host[:port]`. */
  readonly origin: string;
  /** `host[:port]`, as errors and the keychain name it. */
  readonly host: string;
  /** Repository prefix, without slashes at either end; may be empty. */
  readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly ca?: string[];
  private readonly keychain: Keychain;
  private readonly tagsPageSize?: number;
  /** Bearer grants per `<repository> <action>`. */
  private readonly grants = new Map<string, Grant>();
  /** The Basic Authorization, once the registry asked for Basic. */
  private basic?: string;
  /** Every secret value seen, to keep out of error messages. */
  private readonly secrets = new Set<string>();
  /** Aborted by {@link close}: a request still waiting on a hung registry ends with it. */
  private readonly closing = new AbortController();

  constructor(
    readonly base: string,
    opts: OciRegistryOptions = {},
  ) {
    const scheme = /^(https?):\/\//i.exec(base)?.[1]?.toLowerCase();
    const trimmed = base.replace(/^[a-z]+:\/\//i, "").replace(/\/+$/, "");
    const slash = trimmed.indexOf("/");
    const host = slash < 0 ? trimmed : trimmed.slice(0, slash);
    // Errors show the address without its userinfo, and an address with one is refused.
    const shown = redactRegistryAddress(base);
    if (userinfoOf(base) !== undefined)
      throw new RegistryError(
        `[registry] "${shown}" carries credentials (user:password@host): give them in a Docker config instead`,
        0,
      );
    if (host === "") throw new RegistryError(`[registry] "${shown}" names no host`, 0);
    this.prefix = slash < 0 ? "" : trimmed.slice(slash + 1);
    const loopback = isLoopbackRegistryHost(host);
    const insecure = opts.insecure === true || opts.plainHttp === true;
    if (opts.plainHttp === undefined) {
      const problem = plainHttpProblem(base, insecure);
      if (problem) throw new RegistryError(`[registry] "${shown}" ${problem}`, 0);
    }
    const plain = opts.plainHttp ?? (scheme ? scheme === "http" : loopback || insecure);
    this.host = host;
    this.origin = `${plain ? "http" : "https"}://${host}`;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.ca = opts.ca ? [...rootCertificates, opts.ca] : undefined;
    this.keychain = opts.keychain ?? dockerKeychain();
    this.tagsPageSize = opts.tagsPageSize;
  }

  /** The repository path of `name` under the prefix. */
  repository(name: string): string {
    return this.prefix ? `${this.prefix}/${name}` : name;
  }

  /** `text` with every secret this client has seen replaced. */
  private redact(text: string): string {
    let out = text;
    for (const s of this.secrets) if (s.length >= 4) out = out.split(s).join("[redacted]");
    return out;
  }

  private remember(...values: (string | undefined)[]): void {
    for (const v of values) if (v) this.secrets.add(v);
  }

  /** One request over http(s), the body read whole; rejects only when no answer came. */
  private send(
    method: string,
    url: URL,
    headers: Record<string, string>,
    body?: Buffer | string,
  ): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const common = {
        method,
        hostname: url.hostname.replace(/^\[|\]$/g, ""),
        port: url.port,
        path: `${url.pathname}${url.search}`,
        headers: {
          ...headers,
          ...(body === undefined ? {} : { "content-length": String(Buffer.byteLength(body)) }),
        },
        signal: AbortSignal.any([AbortSignal.timeout(this.timeoutMs), this.closing.signal]),
      };
      const req =
        url.protocol === "https:"
          ? httpsRequest({ ...common, ...(this.ca ? { ca: this.ca } : {}) })
          : httpRequest(common);
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks),
          }),
        );
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  /**
   * A call to the registry, authenticated as the registry asks: the grant kept for the
   * repository and action is sent; a 401 gets a new one (once) and the call is repeated.
   * Authorization is sent only to the registry's own origin.
   */
  private async call(
    method: string,
    path: string,
    repo: string,
    init: { headers?: Record<string, string>; body?: Buffer | string } = {},
  ): Promise<Answer> {
    const url = new URL(path, this.origin);
    const ours = url.origin === this.origin;
    const key = `${repo} ${actionOf(method)}`;
    const attempt = (authorization: string | undefined) =>
      this.send(
        method,
        url,
        {
          ...init.headers,
          ...(ours && authorization ? { authorization } : {}),
        },
        init.body,
      ).catch((e: unknown) => {
        throw new RegistryError(
          this.redact(`${method} ${url.origin}${url.pathname}: ${errorMessage(e)}`),
          0,
        );
      });
    const kept = this.grants.get(key);
    const first = await attempt(
      kept && kept.expiresAt > Date.now() ? kept.authorization : this.basic,
    );
    if (first.status !== 401 || !ours) return first;
    const authorization = await this.authorize(
      parseChallenges(header(first, "www-authenticate")),
      key,
    );
    return authorization === undefined ? first : attempt(authorization);
  }

  /** The keychain's credential for this registry (errors name the host only). */
  private async credential(): Promise<RegistryCredential | undefined> {
    let cred: RegistryCredential | undefined;
    try {
      cred = await this.keychain.resolve(this.host);
    } catch (e) {
      // A broken keychain is an authentication failure of this registry, as a refusal is.
      throw new RegistryError(
        `the credentials for the registry ${this.host}: ${errorMessage(e)}`,
        401,
      );
    }
    if (cred) this.remember(cred.password, cred.identityToken);
    return cred;
  }

  /** Answers a 401's challenges: an Authorization to repeat the call with, or none. */
  private async authorize(challenges: Challenge[], key: string): Promise<string | undefined> {
    const bearer = challenges.find((c) => c.scheme === "bearer");
    if (bearer?.params.realm) {
      const grant = await this.fetchToken(bearer.params);
      this.grants.set(key, grant);
      return grant.authorization;
    }
    if (challenges.some((c) => c.scheme === "basic")) {
      const cred = await this.credential();
      if (!cred?.password) return undefined;
      const value = Buffer.from(`${cred.username ?? ""}:${cred.password}`).toString("base64");
      this.remember(value);
      this.basic = `Basic ${value}`;
      return this.basic;
    }
    return undefined;
  }

  /** Fetches a token from a Bearer challenge's realm (the token flow). */
  private async fetchToken(params: Record<string, string>): Promise<Grant> {
    let realm: URL;
    try {
      realm = new URL(params.realm);
    } catch {
      throw new RegistryError(`${this.host} names a token realm that is not a URL`, 401);
    }
    if (
      realm.protocol === "http:" &&
      this.origin.startsWith("https:") &&
      !isLoopbackRegistryHost(realm.host)
    )
      throw new RegistryError(
        `${this.host} names a token realm over plain http (${realm.origin}); refused`,
        401,
      );
    const cred = await this.credential();
    const scopes = (params.scope ?? "").split(" ").filter(Boolean);
    let answer: Answer;
    const what = `the token service ${realm.origin}${realm.pathname} of ${this.host}`;
    try {
      if (cred?.identityToken) {
        const form = new URLSearchParams({
          grant_type: "refresh_token",
          refresh_token: cred.identityToken,
          client_id: "cocoonset",
          ...(params.service ? { service: params.service } : {}),
        });
        if (scopes.length) form.set("scope", scopes.join(" "));
        answer = await this.send(
          "POST",
          realm,
          {
            "content-type": "application/x-www-form-urlencoded",
          },
          form.toString(),
        );
      } else {
        const url = new URL(realm);
        if (params.service) url.searchParams.set("service", params.service);
        for (const s of scopes) url.searchParams.append("scope", s);
        const headers: Record<string, string> = {};
        if (cred?.password) {
          url.searchParams.set("account", cred.username ?? "");
          const value = Buffer.from(`${cred.username ?? ""}:${cred.password}`).toString("base64");
          this.remember(value);
          headers.authorization = `Basic ${value}`;
        }
        answer = await this.send("GET", url, headers);
      }
    } catch (e) {
      throw new RegistryError(this.redact(`${what} did not answer: ${errorMessage(e)}`), 0);
    }
    if (answer.status !== 200)
      throw new RegistryError(
        `${what}: HTTP ${answer.status}${answer.status === 401 || answer.status === 403 ? ` unauthorized (${cred ? "the Docker keychain's credentials for " + this.host + " were refused" : "no credentials for " + this.host + " in the Docker keychain"})` : ""}`,
        answer.status === 403 ? 401 : answer.status,
      );
    let body: { token?: string; access_token?: string; expires_in?: number; issued_at?: string };
    try {
      body = JSON.parse(answer.body.toString("utf8")) as typeof body;
    } catch {
      throw new RegistryError(`${what} answered no JSON`, answer.status);
    }
    const token = body.token || body.access_token;
    if (!token) throw new RegistryError(`${what} answered no token`, answer.status);
    this.remember(token);
    // The spec's default lifetime is 60 s; issued_at, when given, is when it started.
    const lifetimeMs =
      (typeof body.expires_in === "number" && body.expires_in > 0 ? body.expires_in : 60) * 1000;
    const issued = body.issued_at ? Date.parse(body.issued_at) : NaN;
    const start = Number.isFinite(issued) ? Math.min(issued, Date.now()) : Date.now();
    return { authorization: `Bearer ${token}`, expiresAt: start + lifetimeMs };
  }

  /** Throws the error of an unexpected answer (credentials in it redacted). */
  private fail(a: Answer, what: string): never {
    const text = this.redact(a.body.toString("utf8").slice(0, 300));
    if (a.status === 401 || a.status === 403)
      throw new RegistryError(
        `${what}: HTTP ${a.status} unauthorized by the registry ${this.host} ${text}`.trim(),
        a.status,
      );
    throw new RegistryError(`${what}: HTTP ${a.status} ${text}`.trim(), a.status);
  }

  /**
   * Ends every request in flight (each fails as unanswered) and any later one: at shutdown,
   * requests a caller stopped waiting for must not keep the process alive.
   */
  close(): void {
    this.closing.abort(new Error("the registry client was closed"));
  }

  /** Whether `name:reference` (a tag or a digest) has a manifest. 404 is false. */
  async hasManifest(name: string, reference: string): Promise<boolean> {
    const repo = this.repository(name);
    const r = await this.call("HEAD", `/v2/${repo}/manifests/${reference}`, repo, {
      headers: { accept: OCI_MANIFEST },
    });
    if (r.status === 200) return true;
    if (r.status === 404) return false;
    return this.fail(r, `HEAD ${repo}:${reference}`);
  }

  /** Drops a tag (or a manifest by digest); a missing one counts as done. */
  async deleteManifest(name: string, reference: string): Promise<void> {
    const repo = this.repository(name);
    const r = await this.call("DELETE", `/v2/${repo}/manifests/${reference}`, repo);
    if (r.status === 202 || r.status === 200 || r.status === 404) return;
    this.fail(r, `DELETE ${repo}:${reference}`);
  }

  /** The tags of a repository, sorted, across every `Link` page; an unknown repository has none. */
  async listTags(name: string): Promise<string[]> {
    const repo = this.repository(name);
    const tags: string[] = [];
    let path = `/v2/${repo}/tags/list${this.tagsPageSize ? `?n=${this.tagsPageSize}` : ""}`;
    const seen = new Set<string>();
    for (;;) {
      seen.add(path);
      const r = await this.call("GET", path, repo);
      if (r.status === 404) return [];
      if (r.status !== 200) return this.fail(r, `GET ${repo} tags`);
      const body = JSON.parse(r.body.toString("utf8")) as { tags?: string[] | null };
      tags.push(...(body.tags ?? []));
      const next = nextLink(header(r, "link"));
      if (!next) break;
      const url = new URL(next, this.origin);
      // A page elsewhere would get no credentials, and a page seen before is a loop.
      if (url.origin !== this.origin)
        throw new RegistryError(
          `GET ${repo} tags: the next page is on another host (${url.origin})`,
          200,
        );
      const nextPath = `${url.pathname}${url.search}`;
      if (seen.has(nextPath)) break;
      path = nextPath;
    }
    return [...new Set(tags)].sort();
  }

  /** Uploads a blob (monolithic: POST a session, PUT the bytes); returns its digest. */
  async pushBlob(name: string, bytes: Buffer): Promise<string> {
    const repo = this.repository(name);
    const digest = digestOf(bytes);
    const start = await this.call("POST", `/v2/${repo}/blobs/uploads/`, repo);
    if (start.status !== 202) return this.fail(start, `starting an upload to ${repo}`);
    const location = header(start, "location");
    if (!location) throw new RegistryError(`the upload to ${repo} has no Location`, 202);
    const url = new URL(location, this.origin);
    url.searchParams.set("digest", digest);
    const put = await this.call("PUT", url.toString(), repo, {
      headers: { "content-type": "application/octet-stream" },
      body: bytes,
    });
    if (put.status !== 201) return this.fail(put, `uploading ${digest} to ${repo}`);
    return digest;
  }

  /** Puts a manifest under `reference`; returns its digest. */
  async putManifest(
    name: string,
    reference: string,
    manifest: string,
    mediaType = OCI_MANIFEST,
  ): Promise<string> {
    const repo = this.repository(name);
    const r = await this.call("PUT", `/v2/${repo}/manifests/${reference}`, repo, {
      headers: { "content-type": mediaType },
      body: manifest,
    });
    if (r.status !== 201) return this.fail(r, `PUT ${repo}:${reference}`);
    return header(r, "docker-content-digest") ?? digestOf(manifest);
  }

  /**
   * `GET /v2/` without credentials, the registry API's version check: its HTTP status (200,
   * or 401 from a registry that asks for credentials). Rejects with a RegistryError of status
   * 0 when no answer came.
   */
  async ping(): Promise<number> {
    const url = new URL("/v2/", this.origin);
    const r = await this.send("GET", url, {}).catch((e: unknown) => {
      throw new RegistryError(`GET ${url.origin}/v2/: ${errorMessage(e)}`, 0);
    });
    return r.status;
  }

  /**
   * Whether these credentials may push to `name`: starts a blob upload there and cancels it,
   * so nothing is written. Throws the registry's refusal (401, 403) as a RegistryError.
   */
  async probePush(name: string): Promise<void> {
    const repo = this.repository(name);
    const start = await this.call("POST", `/v2/${repo}/blobs/uploads/`, repo);
    if (start.status !== 202) return this.fail(start, `starting an upload to ${repo}`);
    const location = header(start, "location");
    // The cancel is a courtesy: an upload session left open expires on its own, and a
    // registry may not let these credentials delete.
    if (location)
      await this.call("DELETE", new URL(location, this.origin).toString(), repo).catch(
        () => undefined,
      );
  }
}
