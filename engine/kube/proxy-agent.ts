/**
 * A kubeconfig's `proxy-url`: an HTTPS agent whose connections are tunnels opened with
 * HTTP CONNECT through the proxy (credentials in the URL become `Proxy-Authorization:
 * Basic`). TLS to the apiserver runs inside the tunnel with the cluster's own settings (CA,
 * client certificate, `tls-server-name`), so the proxy never sees the traffic.
 *
 * Only `http://` proxies are supported; a SOCKS or `https://` proxy URL is refused when the
 * client is built, with a message that says so.
 */
import { request } from "node:http";
import { Agent, type AgentOptions } from "node:https";
import type { Duplex } from "node:stream";
import { connect, type ConnectionOptions } from "node:tls";

/** Checks a `proxy-url` and returns it parsed; throws a plain error naming what is wrong. */
export function parseProxyUrl(proxyUrl: string): URL {
  let url: URL;
  try {
    url = new URL(proxyUrl);
  } catch {
    throw new Error(`proxy-url "${proxyUrl}" is not a URL`);
  }
  if (url.protocol !== "http:")
    throw new Error(
      `proxy-url with scheme ${url.protocol.replace(/:$/, "")} is not supported (only http:// CONNECT proxies)`,
    );
  return url;
}

/** An HTTPS agent that tunnels every connection through an HTTP CONNECT proxy. */
export class ConnectProxyAgent extends Agent {
  constructor(
    private readonly proxy: URL,
    options: AgentOptions,
  ) {
    super(options);
  }

  override createConnection(
    options: ConnectionOptions & { host?: string | null; port?: number | string | null },
    callback?: (err: Error | null, stream: Duplex) => void,
  ): Duplex | null | undefined {
    const done = callback ?? (() => undefined);
    const target = `${options.host ?? "localhost"}:${options.port ?? 443}`;
    const headers: Record<string, string> = { host: target };
    if (this.proxy.username) {
      const user = decodeURIComponent(this.proxy.username);
      const pass = decodeURIComponent(this.proxy.password);
      headers["proxy-authorization"] = `Basic ${Buffer.from(`${user}:${pass}`).toString("base64")}`;
    }
    const req = request({
      host: this.proxy.hostname,
      port: this.proxy.port || 80,
      method: "CONNECT",
      path: target,
      headers,
      agent: false,
    });
    req.once("connect", (res, socket, head) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        done(
          new Error(
            `the proxy ${this.proxy.host} refused CONNECT ${target}: HTTP ${res.statusCode}`,
          ),
          socket,
        );
        return;
      }
      if (head.length) socket.unshift(head);
      const tls = connect({ ...options, socket });
      done(null, tls);
    });
    req.once("error", (e) =>
      done(
        new Error(`cannot reach the proxy ${this.proxy.host}: ${e.message}`),
        undefined as unknown as Duplex,
      ),
    );
    req.end();
    return undefined;
  }
}
