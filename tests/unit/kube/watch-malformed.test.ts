/**
 * A watch stream that sends a line that is not JSON (a proxy's error page, a truncated
 * write) ends the watch with an error instead of crashing the process, and the waiting and
 * informer paths list again and carry on.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { test, type TestContext } from "node:test";
import { Informer } from "../../../controller/informer.js";
import {
  isMalformedWatchEvent,
  KubeApiError,
  KubeClient,
  KubeConfig,
  waitForList,
} from "../../../engine/kube/index.js";

const POD = (name: string, rv: string) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "ns", resourceVersion: rv, uid: `uid-${name}` },
});

/**
 * A loopback apiserver for one collection: each LIST returns the pods present so far; the
 * first watch sends one good event and then a garbage line; later watches stay open.
 */
async function fakeApiserver(t: TestContext) {
  const stats = { lists: 0, watches: 0 };
  const present = [POD("a", "1")];
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    res.setHeader("content-type", "application/json");
    if (url.searchParams.get("watch") !== "true") {
      stats.lists++;
      // From the second list on, "b" exists: the event the garbled line stood for.
      if (stats.lists === 2) present.push(POD("b", "3"));
      res.end(
        JSON.stringify({ metadata: { resourceVersion: String(stats.lists + 2) }, items: present }),
      );
      return;
    }
    stats.watches++;
    res.writeHead(200);
    if (stats.watches === 1) {
      res.write(JSON.stringify({ type: "MODIFIED", object: POD("a", "2") }) + "\n");
      res.write("<html>502 Bad Gateway</html>\n");
    }
    req.on("close", () => res.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const kc = new KubeConfig(
    [
      {
        name: "c",
        server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        skipTLSVerify: true,
      },
    ],
    [{ name: "u" }],
    [{ name: "c", cluster: "c", user: "u" }],
    "c",
  );
  const client = new KubeClient({ config: kc, requestTimeoutMs: 5_000 });
  t.after(() => client.close());
  return { client, stats };
}

test("a garbage watch line rejects the watch with a typed error naming the line", async (t) => {
  const { client } = await fakeApiserver(t);
  const seen: string[] = [];
  await assert.rejects(
    client.watch("/api/v1/namespaces/ns/pods", {}, (ev) => {
      seen.push(`${ev.type} ${ev.object.metadata.name}`);
    }),
    (e: unknown) => {
      assert.ok(KubeApiError.isInstance(e));
      assert.ok(isMalformedWatchEvent(e));
      assert.match((e as Error).message, /not a watch event: "<html>502 Bad Gateway<\/html>"/);
      return true;
    },
  );
  assert.deepEqual(seen, ["MODIFIED a"], "the good event before it was delivered");
});

test("waitForList lists again after a garbage line and sees what it missed", async (t) => {
  const { client, stats } = await fakeApiserver(t);
  const items = await waitForList(
    client,
    "/api/v1/namespaces/ns/pods",
    (items) => items.some((p) => p.metadata.name === "b"),
    { timeoutMs: 10_000 },
  );
  assert.deepEqual(items.map((p) => p.metadata.name).sort(), ["a", "b"]);
  assert.equal(stats.lists, 2, "one list, then a re-list after the garbage line");
});

test("an informer re-lists after a garbage line and its cache catches up", async (t) => {
  const { client, stats } = await fakeApiserver(t);
  const inf = new Informer({ client, path: "/api/v1/namespaces/ns/pods", initialBackoffMs: 10 });
  inf.start();
  t.after(() => inf.stop());
  await inf.waitForSync();
  const added = new Promise<string>((resolve) =>
    inf.addHandlers({ onAdd: (o) => o.metadata.name === "b" && resolve(o.metadata.name) }),
  );
  assert.equal(await added, "b");
  assert.ok(stats.lists >= 2);
  assert.ok(inf.relistCount() >= 1, "the informer listed again");
  assert.ok(inf.isSupervised(), "and keeps watching");
});
