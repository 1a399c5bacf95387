/**
 * The snapshot registry client against a real registry that asks for credentials: CNCF
 * Distribution over TLS (a CA made for the run, given as the CA bundle), with htpasswd
 * (Basic) auth and with token auth (its token issuer in tests/support signs JWTs the
 * registry is configured to trust). Credentials come from a real Docker config file
 * (`auths`, or `credsStore` with a `docker-credential-*` helper program on PATH).
 *
 * - push, tag check, paged tag list and tag deletion all pass with the keychain's
 *   credentials; without them, or with a wrong password, the call fails "unauthorized",
 *   naming the registry, and no error text holds the password or a token;
 * - the https certificate is checked: without the CA bundle the call fails;
 * - token flow: one token per repository and action, reused; a token the registry refuses
 *   (expired) is replaced on the 401; a token whose lifetime is over is not sent again;
 * - the controller process (`--oci-registry https://…` with `--oci-registry-ca-file`, the
 *   Docker config through `DOCKER_CONFIG`) confirms a retain suspend in that registry; with a
 *   wrong password the pass fails closed (Suspending kept, the error names the registry and
 *   says unauthorized) and no credential is in its logs, the CocoonSet or the events; with
 *   token auth it drops a deleted fleet's snapshot tags (pull and delete tokens);
 * - the Fleet's destroy (the slots resource's `remove`, called as the Pulumi engine calls it)
 *   with `registry` and `registryCa` drops the tags with the keychain's credentials; with a
 *   wrong password it leaves them and says so; no credential in its outputs or its output.
 */
import assert from "node:assert/strict";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { before, describe, test, type TestContext } from "node:test";
import { NODE_AGENT_ENABLED, NODE_AGENT_LABEL } from "../../cluster/node-agent.js";
import { create, remove } from "../../provider/dynamic/index.js";
import { API_VERSION } from "../../engine/kube/api-names.js";
import { KIND } from "../../engine/spec/index.js";
import { withNamespace } from "../support/cluster.js";
import { slotsInputs } from "../support/lifecycle.js";
import { setTimeout } from "node:timers/promises";
import { dockerKeychain } from "../../engine/registry/keychain.js";
import { OCI_MANIFEST, OciRegistry, RegistryError } from "../../engine/registry/oci.js";
import { startAuthRegistry, type AuthRegistry } from "../support/auth-registry.js";
import { Cleanup, startController, tempDir } from "../support/controller-process.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { ANNOTATIONS, type CocoonSet, type Pod } from "../../engine/spec/index.js";
import { paths, waitForObject } from "../../engine/kube/index.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";
import { createCocoonSet, patchSpec, waitForConverged } from "../support/controller-fleet.js";
import { controllerNamespace } from "../support/controller-process.js";
import { optInNodeAgent, pushTag, vmReady, waitForPods, waitForSet } from "../support/lifecycle.js";

/** A client of `reg` whose keychain reads the Docker config in `dockerConfigDir`. */
function clientOf(reg: AuthRegistry, dockerConfigDir: string, opts: { ca?: boolean } = {}) {
  return new OciRegistry(reg.address, {
    ca: opts.ca === false ? undefined : reg.caPem,
    keychain: dockerKeychain({ env: { DOCKER_CONFIG: dockerConfigDir } }),
    tagsPageSize: 2,
    timeoutMs: 10_000,
  });
}

/** Pushes an empty image manifest under each tag of `tags`. */
async function pushTags(r: OciRegistry, repo: string, tags: string[]): Promise<void> {
  const config = Buffer.from("{}");
  const configDigest = await r.pushBlob(repo, config);
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: {
      mediaType: "application/vnd.oci.image.config.v1+json",
      digest: configDigest,
      size: config.length,
    },
    layers: [],
  });
  for (const tag of tags) await r.putManifest(repo, tag, manifest);
}

/** Asserts that `e` is a 401 RegistryError naming the registry, without any secret in it. */
function assertUnauthorized(e: unknown, reg: AuthRegistry, secrets: string[]): boolean {
  assert.ok(RegistryError.isInstance(e), String(e));
  const msg = (e as Error).message;
  assert.match(msg, /unauthorized/, msg);
  assert.ok(msg.includes(reg.host), `names the registry: ${msg}`);
  for (const s of secrets) assert.ok(!msg.includes(s), `no secret in: ${msg}`);
  assert.ok(!/Bearer ey|Basic [A-Za-z0-9+/=]{8,}/.test(msg), `no credential in: ${msg}`);
  return true;
}

/** The whole snapshot contract, as the engine uses it, against `r`. */
async function snapshotContract(r: OciRegistry): Promise<void> {
  const vm = "vk-auth-crew-0";
  assert.deepEqual(await r.listTags(vm), [], "an unknown repository has no tags");
  await pushTags(r, vm, ["hibernate", "latest", "t1", "t2", "t3"]);
  assert.equal(await r.hasManifest(vm, "hibernate"), true);
  // Five tags at two per page: three pages, joined through the Link headers.
  assert.deepEqual(await r.listTags(vm), ["hibernate", "latest", "t1", "t2", "t3"]);
  await r.deleteManifest(vm, "hibernate");
  assert.equal(await r.hasManifest(vm, "hibernate"), false);
  await r.deleteManifest(vm, "hibernate"); // a missing tag counts as done
}

describe("a registry with htpasswd auth over TLS", { timeout: 120_000 }, () => {
  test("the Docker config's auths entry opens it; none, or a wrong password, fails unauthorized", async (t) => {
    const c = new Cleanup(t);
    const reg = await startAuthRegistry(c, "htpasswd");
    const good = reg.dockerConfig({ username: reg.username, password: reg.password });
    await snapshotContract(clientOf(reg, good));

    const none = tempDir(c, "cocoonset-dockercfg-none");
    await assert.rejects(clientOf(reg, none).hasManifest("vk-x", "hibernate"), (e) =>
      assertUnauthorized(e, reg, [reg.password]),
    );
    const wrongPassword = `wrong-${reg.password}`;
    const wrong = reg.dockerConfig({ username: reg.username, password: wrongPassword });
    await assert.rejects(clientOf(reg, wrong).listTags("vk-x"), (e) =>
      assertUnauthorized(e, reg, [reg.password, wrongPassword]),
    );
    // A helper that cannot be run is this registry's authentication failure, named.
    const missing = reg.dockerConfig({ credsStore: "cocoonset-no-such-helper" });
    await assert.rejects(clientOf(reg, missing).hasManifest("vk-x", "hibernate"), (e) => {
      assert.ok(RegistryError.isInstance(e), String(e));
      assert.equal(e.status, 401);
      assert.match(
        (e as Error).message,
        new RegExp(
          `^the credentials for the registry ${reg.host}: credential helper docker-credential-cocoonset-no-such-helper for ${reg.host} could not be run \\(ENOENT\\)$`,
        ),
      );
      return true;
    });
  });

  test("https is verified: without the CA bundle the call fails, naming the registry", async (t) => {
    const c = new Cleanup(t);
    const reg = await startAuthRegistry(c, "htpasswd");
    const good = reg.dockerConfig({ username: reg.username, password: reg.password });
    await assert.rejects(clientOf(reg, good, { ca: false }).hasManifest("vk-x", "latest"), (e) => {
      assert.ok(RegistryError.isInstance(e));
      assert.equal(e.status, 0);
      assert.ok((e as Error).message.includes(reg.host), (e as Error).message);
      assert.ok(!(e as Error).message.includes(reg.password));
      return true;
    });
  });
});

describe("a registry with token auth", { timeout: 120_000 }, () => {
  test("a credential helper's password gets tokens; one per repository and action, reused until refused", async (t) => {
    const c = new Cleanup(t);
    const reg = await startAuthRegistry(c, "token");
    const issuer = reg.issuer!;
    // The real helper protocol: `docker-credential-<name> get`, the host on stdin.
    const bin = tempDir(c, "cocoonset-helper-bin");
    writeFileSync(
      join(bin, "docker-credential-cocoonsettest"),
      `#!/bin/sh\nread host\n[ "$host" = "${reg.host}" ] || { echo "credentials not found in native keychain"; exit 1; }\nprintf '{"ServerURL":"%s","Username":"${reg.username}","Secret":"${reg.password}"}' "$host"\n`,
    );
    chmodSync(join(bin, "docker-credential-cocoonsettest"), 0o755);
    const cfg = reg.dockerConfig({ credsStore: "cocoonsettest" });
    const saved = process.env.PATH;
    process.env.PATH = `${bin}${delimiter}${saved}`;
    t.after(() => {
      process.env.PATH = saved;
    });

    const r = clientOf(reg, cfg);
    await snapshotContract(r);
    const afterContract = issuer.granted;
    assert.ok(afterContract >= 3, `tokens for pull, push and delete (${afterContract})`);
    // Kept: the same calls again fetch no new token.
    assert.equal(await r.hasManifest("vk-auth-crew-0", "latest"), true);
    assert.deepEqual(await r.listTags("vk-auth-crew-0"), ["latest", "t1", "t2", "t3"]);
    assert.equal(issuer.granted, afterContract, "the pull token is reused");

    // A kept token that expires mid-run (the registry starts refusing it) is replaced on
    // the 401, and no call fails: poll the registry until the client has refreshed.
    issuer.behaviour.expOffsets = [-55];
    const fresh = clientOf(reg, cfg);
    const before = issuer.granted;
    assert.equal(await fresh.hasManifest("vk-auth-crew-0", "latest"), true);
    assert.equal(issuer.granted, before + 1, "one token, about to expire for the registry");
    const deadline = Date.now() + 30_000;
    let calls = 0;
    while (issuer.granted === before + 1) {
      assert.ok(Date.now() < deadline, "the registry refuses the expired token within 30 s");
      assert.equal(await fresh.hasManifest("vk-auth-crew-0", "latest"), true, "no call fails");
      calls++;
      await setTimeout(250);
    }
    assert.equal(issuer.granted, before + 2, "the refused token was replaced once");
    assert.ok(calls >= 1);
    assert.equal(await fresh.hasManifest("vk-auth-crew-0", "t1"), true);
    assert.equal(issuer.granted, before + 2, "and the fresh one kept");

    // A token whose lifetime is over (for the client) is not sent again: a new one is fetched.
    issuer.behaviour.expiresIn = 1;
    issuer.behaviour.issuedSecondsAgo = 5;
    const short = clientOf(reg, cfg);
    const b2 = issuer.granted;
    assert.equal(await short.hasManifest("vk-auth-crew-0", "latest"), true);
    assert.equal(await short.hasManifest("vk-auth-crew-0", "t1"), true);
    assert.equal(issuer.granted, b2 + 2, "each call needed a new token");
  });

  test("without credentials, or with a wrong password, the token service refuses: unauthorized, no secret", async (t) => {
    const c = new Cleanup(t);
    const reg = await startAuthRegistry(c, "token");
    const none = tempDir(c, "cocoonset-dockercfg-none");
    await assert.rejects(clientOf(reg, none).hasManifest("vk-x", "hibernate"), (e) =>
      assertUnauthorized(e, reg, [reg.password]),
    );
    const wrongPassword = `wrong-${reg.password}`;
    const wrong = reg.dockerConfig({ username: reg.username, password: wrongPassword });
    await assert.rejects(clientOf(reg, wrong).deleteManifest("vk-x", "hibernate"), (e) =>
      assertUnauthorized(e, reg, [reg.password, wrongPassword]),
    );
  });
});

describe(
  "the controller against a registry that asks for credentials, over TLS",
  { timeout: 240_000 },
  () => {
    const client = adminClient();
    before(async () => {
      await ensureCrd(client);
    });
    const lifecycleOf = (p: Pod) => p.metadata?.annotations?.[ANNOTATIONS.lifecycleState];

    /**
     * An opted-in namespace and a controller given the registry, its CA and a Docker config:
     * through `DOCKER_CONFIG`, or (`via: "flag"`) with `--oci-registry-docker-config`.
     */
    async function setUp(
      c: Cleanup,
      prefix: string,
      reg: AuthRegistry,
      dockerConfig: string | ((ns: string) => Promise<string>),
      via: "env" | "flag" = "env",
    ) {
      const ns = await controllerNamespace(c, prefix);
      await optInNodeAgent(ns);
      const dir = typeof dockerConfig === "string" ? dockerConfig : await dockerConfig(ns);
      const saved = process.env.DOCKER_CONFIG;
      if (via === "env") process.env.DOCKER_CONFIG = dir;
      else delete process.env.DOCKER_CONFIG;
      try {
        const proc = await startController(c, {
          kubeconfig: testKubeconfig(),
          namespaces: [ns],
          extraArgs: [
            ...["--oci-registry", reg.address, "--oci-registry-ca-file", reg.caFile],
            ...(via === "flag" ? ["--oci-registry-docker-config", dir] : []),
          ],
        });
        await proc.synced();
        return { ns, proc };
      } finally {
        if (saved === undefined) delete process.env.DOCKER_CONFIG;
        else process.env.DOCKER_CONFIG = saved;
      }
    }

    /** No form of the password in the controller's output, the CocoonSet or the events. */
    async function assertNoCredential(
      ns: string,
      proc: { rawLines: string[]; stderr: string },
      secrets: string[],
    ) {
      const cs = await client.get<CocoonSet>(paths.cocoonSet(ns, "crew"));
      const events = await client.get<unknown>(paths.events(ns));
      const texts = {
        logs: proc.rawLines.join("\n") + proc.stderr,
        cocoonSet: JSON.stringify(cs),
        events: JSON.stringify(events),
      };
      for (const [where, text] of Object.entries(texts))
        for (const s of secrets) assert.ok(!text.includes(s), `no credential in the ${where}`);
    }

    test("a retain suspend is confirmed in the registry with the credentials of a kubernetes.io/dockerconfigjson Secret (--oci-registry-docker-config)", async (t) => {
      const c = new Cleanup(t);
      const reg = await startAuthRegistry(c, "htpasswd");
      const cfg = reg.dockerConfig({ username: reg.username, password: reg.password });
      // The Secret the Operator's ociRegistryCredentialsSecret names, made as `kubectl create
      // secret docker-registry` makes it, read back and projected as the Operator's volume
      // does (its .dockerconfigjson as config.json; the embedded cluster has no kubelet).
      const fromSecret = async (ns: string) => {
        await client.create(paths.secrets(ns), {
          apiVersion: "v1",
          kind: "Secret",
          type: "kubernetes.io/dockerconfigjson",
          metadata: { name: "registry-auth" },
          stringData: { ".dockerconfigjson": readFileSync(join(cfg, "config.json"), "utf8") },
        });
        const secret = await client.get<{ data: Record<string, string> }>(
          paths.secret(ns, "registry-auth"),
        );
        const dir = tempDir(c, "cocoonset-projected");
        writeFileSync(
          join(dir, "config.json"),
          Buffer.from(secret.data[".dockerconfigjson"], "base64"),
        );
        return dir;
      };
      const { ns, proc } = await setUp(c, "regauth-ok", reg, fromSecret, "flag");
      await createCocoonSet(ns, "crew", { replicas: 0 });
      await waitForConverged(ns, "crew", { replicas: 0 });
      const [pod] = await waitForPods(ns, "crew", 1, vmReady, "the VM booted by the simulator");
      const vm = pod.metadata?.annotations?.[ANNOTATIONS.vmName] ?? "";
      await patchSpec(ns, "crew", { suspend: true });
      await waitForPods(ns, "crew", 1, (p) => lifecycleOf(p) === "hibernated", "VM hibernated");
      // The simulator pushes to the cluster's own registry; the snapshot lands here as the
      // node agent of a real cluster would push it to this one.
      await pushTag(clientOf(reg, cfg), vm, "hibernate");
      await waitForSet(ns, "crew", (cs) => cs.status?.phase === "Suspended", "phase Suspended");
      const b64 = Buffer.from(`${reg.username}:${reg.password}`).toString("base64");
      await assertNoCredential(ns, proc, [reg.password, b64]);
    });

    test("a wrong password fails the pass closed: Suspending kept, unauthorized, the registry named, no pod changed", async (t) => {
      const c = new Cleanup(t);
      const reg = await startAuthRegistry(c, "htpasswd");
      const wrongPassword = `wrong-${reg.password}`;
      const cfg = reg.dockerConfig({ username: reg.username, password: wrongPassword });
      const { ns, proc } = await setUp(c, "regauth-bad", reg, cfg);
      await createCocoonSet(ns, "crew", { replicas: 0 });
      await waitForConverged(ns, "crew", { replicas: 0 });
      await waitForPods(ns, "crew", 1, vmReady, "the VM booted by the simulator");
      const from = proc.lines.length;
      await patchSpec(ns, "crew", { suspend: true });
      const [hibernated] = await waitForPods(
        ns,
        "crew",
        1,
        (p) => lifecycleOf(p) === "hibernated",
        "VM hibernated",
      );
      const failure = await proc.waitForLog(
        "a reconcile failed on the registry",
        (l) =>
          l.msg === "reconcile failed; requeued with backoff" && /unauthorized/.test(String(l.err)),
        { from },
      );
      assert.ok(String(failure.err).includes(reg.host), String(failure.err));
      await proc.waitForLog(
        "the pass retried and failed again",
        (l) => l.msg === "reconcile failed; requeued with backoff" && Number(l.attempt) >= 2,
        { from },
      );
      const cs = await client.get<CocoonSet>(paths.cocoonSet(ns, "crew"));
      assert.equal(cs.status?.phase, "Suspending", "never Suspended without the registry's word");
      const [now] = await waitForPods(ns, "crew", 1, () => true, "the pod");
      assert.equal(now.metadata?.uid, hibernated.metadata?.uid, "the pod is not replaced");
      assert.equal(
        now.metadata?.resourceVersion,
        hibernated.metadata?.resourceVersion,
        "nor changed",
      );
      const b64 = Buffer.from(`${reg.username}:${wrongPassword}`).toString("base64");
      await assertNoCredential(ns, proc, [reg.password, wrongPassword, b64]);
    });

    test("token auth: deleting a fleet drops its snapshot tags in the registry", async (t) => {
      const c = new Cleanup(t);
      const reg = await startAuthRegistry(c, "token");
      const cfg = reg.dockerConfig({ username: reg.username, password: reg.password });
      const { ns, proc } = await setUp(c, "regauth-gc", reg, cfg);
      await createCocoonSet(ns, "crew", { replicas: 0, snapshotPolicy: "never" });
      await waitForConverged(ns, "crew", { replicas: 0 });
      const vm = `vk-${ns}-crew-0`;
      const r = clientOf(reg, cfg);
      await pushTag(r, vm, "hibernate");
      await pushTag(r, vm, "latest");
      assert.deepEqual(await r.listTags(vm), ["hibernate", "latest"]);
      const granted = reg.issuer!.granted;
      await client.delete(paths.cocoonSet(ns, "crew"));
      await waitForObject<CocoonSet>(client, paths.cocoonSets(ns), "crew", (o) => o === undefined, {
        timeoutMs: 60_000,
        description: "the CocoonSet gone, finalizer released",
      });
      assert.deepEqual(await r.listTags(vm), [], "both tags dropped by the controller");
      assert.ok(reg.issuer!.granted > granted, "the controller fetched its own tokens");
      const b64 = Buffer.from(`${reg.username}:${reg.password}`).toString("base64");
      const logs = proc.rawLines.join("\n") + proc.stderr;
      for (const s of [reg.password, b64])
        assert.ok(!logs.includes(s), "no credential in the logs");
    });

    test("token auth: tokens the registry stops taking mid-run are fetched again: a suspend, a wake and the tag clean-up", async (t) => {
      const c = new Cleanup(t);
      const reg = await startAuthRegistry(c, "token");
      const issuer = reg.issuer!;
      // Every token is one the registry takes for 3 s, while the controller is told it lasts
      // 300 s: the controller keeps it, and meets the registry's 401 once it runs out.
      issuer.behaviour.registryLifetime = 3;
      const cfg = reg.dockerConfig({ username: reg.username, password: reg.password });
      const { ns, proc } = await setUp(c, "regauth-expiry", reg, cfg);
      await createCocoonSet(ns, "crew", { replicas: 0 });
      await waitForConverged(ns, "crew", { replicas: 0 });
      const [booted] = await waitForPods(ns, "crew", 1, vmReady, "the VM booted by the simulator");
      const vm = booted.metadata?.annotations?.[ANNOTATIONS.vmName] ?? "";
      const probe = `/v2/${vm}/manifests/hibernate`;
      const pullScope = `repository:${vm}:pull`;
      const pulls = (from = 0) =>
        issuer.issued.slice(from).filter((i) => i.scopes.includes(pullScope));

      await patchSpec(ns, "crew", { suspend: true });
      await waitForPods(ns, "crew", 1, (p) => lifecycleOf(p) === "hibernated", "VM hibernated");
      await pushTag(clientOf(reg, cfg), vm, "hibernate");
      await waitForSet(ns, "crew", (cs) => cs.status?.phase === "Suspended", "phase Suspended");
      assert.ok(pulls().length >= 1, "the controller probed the tag with a pull token");

      // Wait until the registry refuses every token handed out so far. What is waited for is
      // time passing (each token's exp plus the registry's leeway); the condition polled is
      // the registry's own answer to the newest token, a 401 where it answered 200 before.
      const deadline = Date.now() + 60_000;
      let refused: { count: number } | undefined;
      while (!refused) {
        assert.ok(Date.now() < deadline, "the registry refuses the tokens within 60 s");
        const newest = issuer.issued[issuer.issued.length - 1];
        const status = await reg.statusOf(probe, `Bearer ${newest.token}`);
        if (status === 401 && newest === issuer.issued[issuer.issued.length - 1])
          refused = { count: issuer.issued.length };
        else await setTimeout(250);
      }
      for (const i of issuer.issued.slice(0, refused.count))
        assert.equal(await reg.statusOf(probe, `Bearer ${i.token}`), 401, "every token refused");

      // The wake probes the tag again with the token the controller kept: refused, a new one.
      await patchSpec(ns, "crew", { suspend: false });
      await waitForPods(
        ns,
        "crew",
        1,
        (p) => vmReady(p) && p.metadata?.annotations?.[ANNOTATIONS.hibernate] === undefined,
        "the VM woken",
      );
      await waitForSet(
        ns,
        "crew",
        (cs) =>
          cs.status?.phase === "Running" &&
          cs.status?.observedGeneration === cs.metadata.generation,
        "phase Running",
      );
      assert.ok(
        pulls(refused.count).length >= 1,
        "the controller asked the issuer again for the pull token the registry refused",
      );
      const r = clientOf(reg, cfg);
      assert.deepEqual(await r.listTags(vm), ["hibernate"], "the wake keeps the tag");

      // The clean-up after a deletion (its delete token, too, runs out after 3 s).
      await client.delete(paths.cocoonSet(ns, "crew"));
      await waitForObject<CocoonSet>(client, paths.cocoonSets(ns), "crew", (o) => o === undefined, {
        timeoutMs: 60_000,
        description: "the CocoonSet gone, finalizer released",
      });
      assert.deepEqual(await r.listTags(vm), [], "the hibernate tag dropped by the controller");
      const failures = proc.lines.filter(
        (l) => /failed/.test(String(l.msg)) && /unauthorized/.test(String(l.err)),
      );
      assert.deepEqual(failures, [], "no pass failed unauthorized: each 401 got a new token");
      assert.ok(issuer.granted > refused.count, "the issuer was asked again after the expiry");
    });
  },
);

describe("the Fleet's destroy against a registry with token auth", { timeout: 240_000 }, () => {
  const client = adminClient();
  before(async () => {
    await ensureCrd(client);
  });

  /** A fleet made by the slots resource with the registry and its CA; its snapshot tags pushed. */
  async function fleet(
    t: TestContext,
    c: Cleanup,
    prefix: string,
    reg: AuthRegistry,
    credentials?: { username: string; password: string },
  ) {
    const ns = await withNamespace(t, prefix);
    await client.patch(paths.namespace(ns), {
      metadata: { labels: { [NODE_AGENT_LABEL]: NODE_AGENT_ENABLED } },
    });
    const spec = {
      agent: { replicas: 0, image: "agents/coder:1" },
      snapshotPolicy: "never" as const,
    };
    const cs = await client.create<CocoonSet>(paths.cocoonSets(ns), {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name: "fleet", namespace: ns },
      spec,
    });
    const inputs = slotsInputs(ns, "fleet", cs.metadata.uid ?? "", spec, {
      registry: reg.address,
      registryCa: reg.caPem,
      ...(credentials ? { registryCredentials: credentials } : {}),
    });
    const { outs } = await create(inputs);
    c.defer("remove the fleet", () => remove(`${ns}/fleet`, outs).catch(() => undefined));
    const vm = `vk-${ns}-fleet-0`;
    const good = clientOf(
      reg,
      reg.dockerConfig({ username: reg.username, password: reg.password }),
    );
    await pushTag(good, vm, "hibernate");
    await pushTag(good, vm, "latest");
    return { ns, outs, vm, good };
  }

  /** Runs `remove` with `DOCKER_CONFIG` set, collecting what it prints. */
  async function removeWith(dockerConfig: string, id: string, outs: Parameters<typeof remove>[1]) {
    const printed: string[] = [];
    const saved = { env: process.env.DOCKER_CONFIG, log: console.log };
    process.env.DOCKER_CONFIG = dockerConfig;
    console.log = (...args: unknown[]) => printed.push(args.map(String).join(" "));
    try {
      await remove(id, outs);
    } finally {
      console.log = saved.log;
      if (saved.env === undefined) delete process.env.DOCKER_CONFIG;
      else process.env.DOCKER_CONFIG = saved.env;
    }
    return printed.join("\n");
  }

  test("remove drops the tags with the keychain's credentials; a wrong password leaves them, unauthorized, no secret", async (t) => {
    const c = new Cleanup(t);
    const reg = await startAuthRegistry(c, "token");
    const secrets = (pw: string) => [pw, Buffer.from(`${reg.username}:${pw}`).toString("base64")];

    const ok = await fleet(t, c, "regauth-destroy", reg);
    const printed = await removeWith(
      reg.dockerConfig({ username: reg.username, password: reg.password }),
      `${ok.ns}/fleet`,
      ok.outs,
    );
    assert.match(printed, /snapshot tags dropped: 2, left in the registry: 0/);
    assert.deepEqual(await ok.good.listTags(ok.vm), [], "both tags dropped");
    const state = JSON.stringify(ok.outs);
    for (const s of secrets(reg.password)) {
      assert.ok(!state.includes(s), "no credential in the outputs");
      assert.ok(!printed.includes(s), "no credential printed");
    }

    const bad = await fleet(t, c, "regauth-destroy-bad", reg);
    const wrongPassword = `wrong-${reg.password}`;
    const printedBad = await removeWith(
      reg.dockerConfig({ username: reg.username, password: wrongPassword }),
      `${bad.ns}/fleet`,
      bad.outs,
    );
    assert.match(printedBad, /left in the registry: 2/);
    assert.match(printedBad, /unauthorized/);
    assert.deepEqual(await bad.good.listTags(bad.vm), ["hibernate", "latest"], "the tags are left");
    for (const s of [...secrets(reg.password), ...secrets(wrongPassword)])
      assert.ok(!printedBad.includes(s), "no credential printed");
  });

  test("the Fleet's registryCredentials open the registry without a Docker login; wrong ones leave the tags, unauthorized, no secret", async (t) => {
    const c = new Cleanup(t);
    const reg = await startAuthRegistry(c, "token");
    const noLogin = tempDir(c, "cocoonset-dockercfg-none");
    const ok = await fleet(t, c, "regauth-cred", reg, {
      username: reg.username,
      password: reg.password,
    });
    // Not among the outputs (up --debug prints them): in a Secret of the fleet's namespace.
    assert.equal(ok.outs.registryCredentials, undefined);
    assert.equal(ok.outs.registryCredentialsSecret, "fleet-registry-credentials");
    assert.ok(!JSON.stringify(ok.outs).includes(reg.password), "no credential in the outputs");
    const printed = await removeWith(noLogin, `${ok.ns}/fleet`, ok.outs);
    assert.match(printed, /snapshot tags dropped: 2, left in the registry: 0/);
    assert.deepEqual(await ok.good.listTags(ok.vm), [], "both tags dropped");
    assert.ok(!printed.includes(reg.password), "no credential printed");
    assert.equal(
      await adminClient().getOrUndefined(paths.secret(ok.ns, "fleet-registry-credentials")),
      undefined,
      "remove deleted the Secret",
    );

    const wrongPassword = `wrong-${reg.password}`;
    const bad = await fleet(t, c, "regauth-cred-bad", reg, {
      username: reg.username,
      password: wrongPassword,
    });
    const printedBad = await removeWith(noLogin, `${bad.ns}/fleet`, bad.outs);
    assert.match(printedBad, /left in the registry: 2/);
    assert.match(printedBad, /unauthorized/);
    assert.deepEqual(await bad.good.listTags(bad.vm), ["hibernate", "latest"], "the tags are left");
    for (const s of [reg.password, wrongPassword])
      assert.ok(!printedBad.includes(s), "no credential printed");
  });
});
