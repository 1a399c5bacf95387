/**
 * A small client of the OCI distribution API (`/v2/…`), for the few calls the snapshot
 * contract needs: is a tag there, drop a tag, list a repository's tags, and push a blob and
 * a manifest. It speaks plain `fetch`; no authentication (the embedded cluster's registry
 * has none).
 *
 * A registry is named as the operator's `OCI_REGISTRY` names it: `host[:port][/prefix]`.
 * A VM's snapshots live in the repository `<prefix>/<vm name>` under the tags `hibernate`
 * and `latest`.
 *
 * @see https://github.com/opencontainers/distribution-spec/blob/main/spec.md
 */
import { createHash } from "node:crypto";
import { BrandedError, errorMessage } from "../kube/branded-error.js";

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
   * Speak http instead of https.
   * @default as the name's scheme says when it has one (`http://…`), else true for a
   *   loopback host (127.0.0.1, localhost, [::1]) and false for any other
   */
  plainHttp?: boolean;
  /** Per-call deadline. @default 30000 */
  timeoutMs?: number;
}

/** `sha256:<hex>` of some bytes. */
export function digestOf(bytes: Buffer | string): string {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

/** A client of one registry, given as `host[:port][/prefix]`. */
export class OciRegistry {
  /** `http(s)://host[:port]`. */
  readonly origin: string;
  /** Repository prefix, without slashes at either end; may be empty. */
  readonly prefix: string;
  private readonly timeoutMs: number;

  constructor(
    readonly base: string,
    opts: OciRegistryOptions = {},
  ) {
    const scheme = /^(https?):\/\//.exec(base)?.[1];
    const trimmed = base.replace(/^[a-z]+:\/\//, "").replace(/\/+$/, "");
    const slash = trimmed.indexOf("/");
    const host = slash < 0 ? trimmed : trimmed.slice(0, slash);
    if (host === "") throw new RegistryError(`[registry] "${base}" names no host`, 0);
    this.prefix = slash < 0 ? "" : trimmed.slice(slash + 1);
    const loopback = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?$/.test(host);
    const plain = opts.plainHttp ?? (scheme ? scheme === "http" : loopback);
    this.origin = `${plain ? "http" : "https"}://${host}`;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  /** The repository path of `name` under the prefix. */
  repository(name: string): string {
    return this.prefix ? `${this.prefix}/${name}` : name;
  }

  private async call(
    method: string,
    path: string,
    init: { headers?: Record<string, string>; body?: Buffer | string } = {},
  ): Promise<Response> {
    const url = path.startsWith("http") ? path : `${this.origin}${path}`;
    try {
      return await fetch(url, {
        method,
        headers: init.headers,
        body: init.body,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      throw new RegistryError(`${method} ${url}: ${errorMessage(e)}`, 0);
    }
  }

  private async fail(r: Response, what: string): Promise<never> {
    const text = (await r.text().catch(() => "")).slice(0, 300);
    throw new RegistryError(`${what}: HTTP ${r.status} ${text}`.trim(), r.status);
  }

  /** Whether `name:reference` (a tag or a digest) has a manifest. 404 is false. */
  async hasManifest(name: string, reference: string): Promise<boolean> {
    const repo = this.repository(name);
    const r = await this.call("HEAD", `/v2/${repo}/manifests/${reference}`, {
      headers: { accept: OCI_MANIFEST },
    });
    await r.body?.cancel();
    if (r.status === 200) return true;
    if (r.status === 404) return false;
    return this.fail(r, `HEAD ${repo}:${reference}`);
  }

  /** Drops a tag (or a manifest by digest); a missing one counts as done. */
  async deleteManifest(name: string, reference: string): Promise<void> {
    const repo = this.repository(name);
    const r = await this.call("DELETE", `/v2/${repo}/manifests/${reference}`);
    if (r.status === 202 || r.status === 200 || r.status === 404) {
      await r.body?.cancel();
      return;
    }
    await this.fail(r, `DELETE ${repo}:${reference}`);
  }

  /** The tags of a repository, sorted; an unknown repository has none. */
  async listTags(name: string): Promise<string[]> {
    const repo = this.repository(name);
    const r = await this.call("GET", `/v2/${repo}/tags/list`);
    if (r.status === 404) {
      await r.body?.cancel();
      return [];
    }
    if (r.status !== 200) return this.fail(r, `GET ${repo} tags`);
    const body = (await r.json()) as { tags?: string[] | null };
    return [...(body.tags ?? [])].sort();
  }

  /** Uploads a blob (monolithic: POST a session, PUT the bytes); returns its digest. */
  async pushBlob(name: string, bytes: Buffer): Promise<string> {
    const repo = this.repository(name);
    const digest = digestOf(bytes);
    const start = await this.call("POST", `/v2/${repo}/blobs/uploads/`);
    if (start.status !== 202) return this.fail(start, `starting an upload to ${repo}`);
    await start.body?.cancel();
    const location = start.headers.get("location");
    if (!location) throw new RegistryError(`the upload to ${repo} has no Location`, 202);
    const url = new URL(location, this.origin);
    url.searchParams.set("digest", digest);
    const put = await this.call("PUT", url.toString(), {
      headers: { "content-type": "application/octet-stream" },
      body: bytes,
    });
    if (put.status !== 201) return this.fail(put, `uploading ${digest} to ${repo}`);
    await put.body?.cancel();
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
    const r = await this.call("PUT", `/v2/${repo}/manifests/${reference}`, {
      headers: { "content-type": mediaType },
      body: manifest,
    });
    if (r.status !== 201) return this.fail(r, `PUT ${repo}:${reference}`);
    await r.body?.cancel();
    return r.headers.get("docker-content-digest") ?? digestOf(manifest);
  }
}
