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
 *   (expired) is replaced on the 401; a token whose lifetime is over is not sent again.
 */
import assert from "node:assert/strict";
import { chmodSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { describe, test } from "node:test";
import { setTimeout } from "node:timers/promises";
import { dockerKeychain } from "../../provider/registry/keychain.js";
import { OCI_MANIFEST, OciRegistry, RegistryError } from "../../provider/registry/oci.js";
import { startAuthRegistry, type AuthRegistry } from "../support/auth-registry.js";
import { Cleanup, tempDir } from "../support/controller-process.js";

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
