/**
 * A minimal HTTPS client for talking to a freshly started apiserver before any kubeconfig
 * exists (bring-up probes, node registration). Everything else uses the project's
 * Kubernetes client wrapper.
 */
import { request } from "node:https";
import { request as httpRequest } from "node:http";

/** A response body and status. */
export interface RawResponse {
  status: number;
  body: string;
}

/** Options of {@link rawRequest}. */
export interface RawRequestOptions {
  method?: string;
  token?: string;
  ca?: string;
  body?: unknown;
  /** @default application/json */
  contentType?: string;
  timeoutMs?: number;
}

/** One HTTP(S) request; rejects only on transport errors, never on a status code. */
export function rawRequest(url: string, opts: RawRequestOptions = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const headers: Record<string, string> = { accept: "application/json" };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    if (payload) {
      headers["content-type"] = opts.contentType ?? "application/json";
      headers["content-length"] = String(Buffer.byteLength(payload));
    }
    const common = {
      method: opts.method ?? "GET",
      hostname: u.hostname,
      port: u.port,
      path: `${u.pathname}${u.search}`,
      headers,
      timeout: opts.timeoutMs ?? 5000,
    };
    const req =
      u.protocol === "https:"
        ? request({ ...common, ca: opts.ca, rejectUnauthorized: opts.ca !== undefined })
        : httpRequest(common);
    req.on("response", (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error(`timed out after ${common.timeout} ms`)));
    req.on("error", reject);
    if (payload) req.write(payload);
    req.end();
  });
}
