// One call of a lifecycle hook (spec.hooks): the event POSTed as JSON to the platform's
// service, over https with the system roots plus the hook's caBundle (plain http only to a
// loopback host), answered 2xx within the timeout or failed. Redirects are not followed.
// Nothing here logs: the caller shows the URL through `hookTarget`, which drops its
// credentials and query, and never the body.
// Behaviour: docs/lifecycle-design.md, "Idle policy, expiry and hooks".
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { rootCertificates } from "node:tls";
import { InvalidValueError } from "../kube/branded-error.js";
import { hookTarget, type HookEvent, type HookOutcome } from "../idle/index.js";
import { isLoopbackRegistryHost } from "../registry/address.js";

/** Where and how a hook is called. */
export interface HookEndpoint {
  url: string;
  /** PEM certificates, base64-encoded (as a webhook's caBundle), trusted beside the system roots. */
  caBundle?: string;
  timeoutMs: number;
}

/** Largest answer body read (and thrown away); a longer one is cut off. */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * The hook's URL, checked: https, or http to a loopback host; throws an InvalidValueError
 * whose message is the rule (the caller names the field).
 */
export function parseHookUrl(text: string): URL {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new InvalidValueError(
      "must be an absolute https URL (e.g. https://hooks.example/cocoon)",
    );
  }
  if (u.protocol === "https:") return u;
  if (u.protocol === "http:" && isLoopbackRegistryHost(u.host)) return u;
  throw new InvalidValueError(
    u.protocol === "http:"
      ? "must use https (plain http only to a loopback host such as 127.0.0.1)"
      : `must be an https URL (got scheme ${u.protocol.replace(/:$/, "")})`,
  );
}

/**
 * What is wrong with a spec's `hooks.url`, as `[spec.hooks.url] rule (got url)` with the URL
 * shown without its credentials or query; undefined when it is fine or absent.
 */
export function hooksUrlProblem(spec: unknown): string | undefined {
  const hooks = (spec as { hooks?: { url?: unknown } } | undefined)?.hooks;
  const url = hooks?.url;
  if (typeof url !== "string") return undefined;
  try {
    parseHookUrl(url);
    return undefined;
  } catch (e) {
    if (!InvalidValueError.isInstance(e)) throw e;
    return `[spec.hooks.url] ${e.message} (got ${hookTarget(url)})`;
  }
}

/**
 * POSTs the event; resolves to the call's outcome, never throws for the service's failure.
 * An aborted `signal` cuts the call short (a failed outcome).
 */
export async function callHook(
  endpoint: HookEndpoint,
  event: HookEvent,
  signal?: AbortSignal,
): Promise<HookOutcome> {
  const url = parseHookUrl(endpoint.url);
  const body = Buffer.from(JSON.stringify(event));
  const headers: Record<string, string | number> = {
    "content-type": "application/json",
    "content-length": body.length,
    "user-agent": "cocoonset-controller",
  };
  if (url.username || url.password) {
    const user = decodeURIComponent(url.username);
    const pass = decodeURIComponent(url.password);
    headers.authorization = `Basic ${Buffer.from(`${user}:${pass}`).toString("base64")}`;
  }
  const target = {
    protocol: url.protocol,
    hostname: url.hostname.replace(/^\[|\]$/g, ""),
    port: url.port,
    path: `${url.pathname}${url.search}`,
  };
  const ca = endpoint.caBundle
    ? [...rootCertificates, Buffer.from(endpoint.caBundle, "base64").toString("utf8")]
    : undefined;
  return new Promise<HookOutcome>((resolve) => {
    const options = {
      ...target,
      method: "POST",
      headers,
      ...(ca ? { ca } : {}),
      ...(signal ? { signal } : {}),
    };
    const req = (url.protocol === "https:" ? httpsRequest : httpRequest)(options, (res) => {
      let read = 0;
      res.on("data", (chunk: Buffer) => {
        read += chunk.length;
        if (read > MAX_ANSWER_BYTES) res.destroy();
      });
      res.on("close", () => {
        const status = res.statusCode ?? 0;
        resolve(
          status >= 200 && status < 300
            ? { ok: true, status }
            : { ok: false, reason: `HTTP ${status}` },
        );
      });
    });
    req.setTimeout(endpoint.timeoutMs, () =>
      req.destroy(new Error(`no answer within ${endpoint.timeoutMs / 1000}s`)),
    );
    req.on("error", (e: NodeJS.ErrnoException) =>
      resolve({
        ok: false,
        reason: e.code && !e.message.includes(e.code) ? `${e.code}: ${e.message}` : e.message,
      }),
    );
    req.end(body);
  });
}
