// A hook call (engine/hooks/call.ts) against real HTTP(S) servers of the test's own: the
// event arrives as JSON with the URL's credentials as basic auth, the caBundle is trusted
// beside the system roots (and needed), a non-2xx, a closed port and a service that never
// answers are failures with their reason, and the URL's rules name what is wrong.
import assert from "node:assert/strict";
import { once } from "node:events";
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { after, describe, it } from "node:test";
import { createClientCa, issueServerCertificate } from "../../../cluster/pki.js";
import { callHook, parseHookUrl } from "../../../engine/hooks/index.js";
import { hookEvent } from "../../../engine/idle/index.js";

const event = hookEvent(
  {
    namespace: "agents",
    cocoonSet: "coder",
    uid: "u-1",
    member: "1",
    pod: "coder-1",
    vm: "vk-agents-coder-1",
  },
  "BeforeHibernate",
  "idle",
  new Date("2026-12-01T10:00:00Z"),
);

interface Seen {
  auth?: string;
  type?: string;
  body: unknown;
}

/** A handler that records what it saw and answers `status` (or never, for `hang`). */
function recorder(seen: Seen[], status: number | "hang") {
  return (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      seen.push({
        auth: req.headers.authorization,
        type: req.headers["content-type"],
        body: JSON.parse(Buffer.concat(chunks).toString("utf8")),
      });
      if (status !== "hang") res.writeHead(status).end("ok");
    });
  };
}

const ca = createClientCa("cocoonset hooks test CA");
const serving = issueServerCertificate(ca, "127.0.0.1", { ips: ["127.0.0.1"], dns: ["localhost"] });
const caBundle = Buffer.from(ca.certPem).toString("base64");
const servers: { close(): void; closeAllConnections(): void }[] = [];
after(() => {
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
});

async function https(status: number | "hang", seen: Seen[]): Promise<string> {
  const s = createHttpsServer(
    { cert: serving.certPem, key: serving.keyPem },
    recorder(seen, status),
  );
  servers.push(s);
  s.listen(0, "127.0.0.1");
  await once(s, "listening");
  return `127.0.0.1:${(s.address() as AddressInfo).port}`;
}

async function http(status: number | "hang", seen: Seen[]): Promise<string> {
  const s = createHttpServer(recorder(seen, status));
  servers.push(s);
  s.listen(0, "127.0.0.1");
  await once(s, "listening");
  return `127.0.0.1:${(s.address() as AddressInfo).port}`;
}

describe("callHook", () => {
  it("POSTs the event as JSON over https, trusting the caBundle, with the URL's credentials as basic auth", async () => {
    const seen: Seen[] = [];
    const host = await https(204, seen);
    const out = await callHook(
      { url: `https://ops:s3cret@${host}/cocoon?x=1`, caBundle, timeoutMs: 5000 },
      event,
    );
    assert.deepEqual(out, { ok: true, status: 204 });
    assert.equal(seen.length, 1);
    assert.equal(seen[0].auth, `Basic ${Buffer.from("ops:s3cret").toString("base64")}`);
    assert.equal(seen[0].type, "application/json");
    assert.deepEqual(seen[0].body, JSON.parse(JSON.stringify(event)));
  });

  it("without the caBundle the service's certificate is not trusted", async () => {
    const seen: Seen[] = [];
    const host = await https(200, seen);
    const out = await callHook({ url: `https://${host}/`, timeoutMs: 5000 }, event);
    assert.equal(out.ok, false);
    assert.match(out.ok ? "" : out.reason, /certificate/i);
    assert.equal(seen.length, 0);
  });

  it("a non-2xx answer, a closed port and a service that never answers are failures with their reason", async () => {
    const seen: Seen[] = [];
    const refusing = await http(503, seen);
    assert.deepEqual(await callHook({ url: `http://${refusing}/`, timeoutMs: 5000 }, event), {
      ok: false,
      reason: "HTTP 503",
    });
    const hanging = await http("hang", seen);
    const slow = await callHook({ url: `http://${hanging}/`, timeoutMs: 300 }, event);
    assert.deepEqual(slow, { ok: false, reason: "no answer within 0.3s" });
    const closed = createHttpServer();
    closed.listen(0, "127.0.0.1");
    await once(closed, "listening");
    const port = (closed.address() as AddressInfo).port;
    closed.close();
    await once(closed, "close");
    const out = await callHook({ url: `http://127.0.0.1:${port}/`, timeoutMs: 5000 }, event);
    assert.match(out.ok ? "" : out.reason, /ECONNREFUSED/);
  });
});

describe("parseHookUrl", () => {
  const cases: [string, RegExp | undefined][] = [
    ["https://hooks.example/cocoon", undefined],
    ["http://127.0.0.1:8080/h", undefined],
    ["http://localhost/h", undefined],
    ["http://hooks.example/h", /must use https \(plain http only to a loopback host/],
    ["ftp://hooks.example/h", /must be an https URL \(got scheme ftp\)/],
    ["hooks.example/h", /must be an absolute https URL/],
  ];
  for (const [url, problem] of cases)
    it(`${url}: ${problem ? "refused" : "accepted"}`, () => {
      if (problem) assert.throws(() => parseHookUrl(url), problem);
      else assert.equal(parseHookUrl(url).href.startsWith(url.split("/")[0]), true);
    });
});
