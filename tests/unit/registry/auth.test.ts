// The pure parts of registry authentication: WWW-Authenticate challenges, Link pages, the
// Docker config's auths and helpers, and which names may speak plain http.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { after, describe, it } from "node:test";
import {
  authsEntryFor,
  authsKeyHost,
  credentialFromHelper,
  dockerConfigPath,
  dockerKeychain,
  helperFor,
  KeychainError,
} from "../../../engine/registry/keychain.js";
import {
  nextLink,
  OciRegistry,
  parseChallenges,
  RegistryError,
} from "../../../engine/registry/oci.js";
import { plainHttpProblem } from "../../../engine/registry/address.js";
import { parseCaBundle } from "../../../engine/registry/ca.js";

describe("WWW-Authenticate challenges", () => {
  const table: [string, ReturnType<typeof parseChallenges>][] = [
    [
      'Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push"',
      [
        {
          scheme: "bearer",
          params: {
            realm: "https://auth.example.com/token",
            service: "registry.example.com",
            scope: "repository:a/b:pull,push",
          },
        },
      ],
    ],
    ['Basic realm="Registry Realm"', [{ scheme: "basic", params: { realm: "Registry Realm" } }]],
    [
      'Basic realm="x", Bearer realm="https://t/token", error="insufficient_scope"',
      [
        { scheme: "basic", params: { realm: "x" } },
        { scheme: "bearer", params: { realm: "https://t/token", error: "insufficient_scope" } },
      ],
    ],
    [
      "BEARER Realm=https://t/token,Service=svc",
      [{ scheme: "bearer", params: { realm: "https://t/token", service: "svc" } }],
    ],
    ['Bearer realm="a\\"b"', [{ scheme: "bearer", params: { realm: 'a"b' } }]],
    ["", []],
  ];
  for (const [header, want] of table)
    it(JSON.stringify(header), () => assert.deepEqual(parseChallenges(header), want));
  it("no header, no challenge", () => assert.deepEqual(parseChallenges(undefined), []));
});

describe("Link pages", () => {
  const table: [string | undefined, string | undefined][] = [
    ['</v2/a/tags/list?last=b&n=2>; rel="next"', "/v2/a/tags/list?last=b&n=2"],
    [
      "<https://r.example/v2/a/tags/list?n=2&last=c>; rel=next",
      "https://r.example/v2/a/tags/list?n=2&last=c",
    ],
    ['</v2/x?p=1>; rel="prev", </v2/x?p=3>; rel="next"', "/v2/x?p=3"],
    ['</v2/x?p=1>; rel="prev"', undefined],
    [undefined, undefined],
  ];
  for (const [header, want] of table)
    it(String(header), () => assert.equal(nextLink(header), want));
});

describe("the Docker config", () => {
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  it("names its file from DOCKER_CONFIG, else ~/.docker", () => {
    assert.equal(dockerConfigPath({ DOCKER_CONFIG: "/etc/dc" }), join("/etc/dc", "config.json"));
    assert.match(dockerConfigPath({}), /\.docker[/\\]config\.json$/);
  });

  const keys: [string, string][] = [
    ["ghcr.io", "ghcr.io"],
    ["https://index.docker.io/v1/", "index.docker.io"],
    ["http://Registry.Example.com:5000", "registry.example.com:5000"],
    ["127.0.0.1:5000/v2/", "127.0.0.1:5000"],
  ];
  for (const [key, host] of keys)
    it(`auths key ${key} names ${host}`, () => assert.equal(authsKeyHost(key), host));

  const config = {
    auths: {
      "https://a.example": { auth: b64("alice:pa:ss") },
      "b.example": { username: "bob", password: "hunter2" },
      "c.example": { identitytoken: "refresh-me" },
      "d.example": {},
    },
    credHelpers: { "e.example": "ecr-login" },
    credsStore: "desktop",
  };
  const entries: [string, ReturnType<typeof authsEntryFor>][] = [
    ["a.example", { username: "alice", password: "pa:ss", identityToken: undefined }],
    ["b.example", { username: "bob", password: "hunter2", identityToken: undefined }],
    ["c.example", { username: undefined, password: undefined, identityToken: "refresh-me" }],
    ["d.example", undefined],
    ["z.example", undefined],
  ];
  for (const [host, want] of entries)
    it(`auths entry of ${host}`, () => assert.deepEqual(authsEntryFor(config, host), want));

  it("credHelpers win for their host, credsStore for the others", () => {
    assert.equal(helperFor(config, "e.example"), "ecr-login");
    assert.equal(helperFor(config, "a.example"), "desktop");
    assert.equal(helperFor({ auths: {} }, "a.example"), undefined);
  });

  it("an auth that is not user:password is refused without quoting it", () => {
    assert.throws(
      () => authsEntryFor({ auths: { x: { auth: b64("no-colon-secret") } } }, "x"),
      (e) =>
        KeychainError.isInstance(e) && !String((e as Error).message).includes("no-colon-secret"),
    );
  });
});

describe("credential helpers", () => {
  const ok =
    (stdout: string, code = 0) =>
    () =>
      Promise.resolve({ code, stdout });
  it("Username/Secret is a user and password", async () => {
    assert.deepEqual(
      await credentialFromHelper("x", "h", ok('{"ServerURL":"h","Username":"u","Secret":"s3"}')),
      { username: "u", password: "s3" },
    );
  });
  it("the user <token> makes the Secret an identity token", async () => {
    assert.deepEqual(
      await credentialFromHelper("x", "h", ok('{"Username":"<token>","Secret":"rt"}')),
      { identityToken: "rt" },
    );
  });
  it("credentials not found is no credential", async () => {
    assert.equal(
      await credentialFromHelper("x", "h", ok("credentials not found in native keychain\n", 1)),
      undefined,
    );
  });
  it("another failure names the helper and exit code, not its output", async () => {
    await assert.rejects(
      credentialFromHelper("x", "h", ok("boom: leaked-secret", 3)),
      (e) =>
        KeychainError.isInstance(e) &&
        /docker-credential-x get for h failed with exit code 3/.test((e as Error).message) &&
        !(e as Error).message.includes("leaked-secret"),
    );
  });

  it("a real helper program on PATH is run with the host on stdin", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cocoonset-keychain-"));
    after(() => rmSync(dir, { recursive: true, force: true }));
    const helper = join(dir, "docker-credential-fake");
    writeFileSync(
      helper,
      `#!/bin/sh\n[ "$1" = get ] || exit 9\nread host\nif [ "$host" = "reg.example:5000" ]; then printf '{"ServerURL":"%s","Username":"hu","Secret":"hs"}' "$host"; else echo "credentials not found in native keychain"; exit 1; fi\n`,
    );
    chmodSync(helper, 0o755);
    writeFileSync(
      join(dir, "config.json"),
      JSON.stringify({
        credsStore: "fake",
        auths: { "other.example": { username: "fu", password: "fp" } },
      }),
    );
    const saved = process.env.PATH;
    process.env.PATH = `${dir}${delimiter}${saved}`;
    try {
      const kc = dockerKeychain({ env: { DOCKER_CONFIG: dir } });
      assert.deepEqual(await kc.resolve("reg.example:5000"), { username: "hu", password: "hs" });
      // Not in the store: the auths entry of the host.
      assert.deepEqual(await kc.resolve("other.example"), {
        username: "fu",
        password: "fp",
        identityToken: undefined,
      });
      assert.equal(await kc.resolve("none.example"), undefined);
    } finally {
      process.env.PATH = saved;
    }
  });

  it("no config file is no credential", async () => {
    const kc = dockerKeychain({ env: { DOCKER_CONFIG: join(tmpdir(), "cocoonset-no-such-dir") } });
    assert.equal(await kc.resolve("a.example"), undefined);
  });
});

describe("plain http", () => {
  const table: [string, boolean, boolean][] = [
    ["127.0.0.1:5000", false, true],
    ["http://127.0.0.1:5000", false, true],
    ["http://localhost:5000/p", false, true],
    ["http://[::1]:5000", false, true],
    ["http://10.0.0.5:5000", false, false],
    ["http://10.0.0.5:5000", true, true],
    ["https://10.0.0.5:5000", false, true],
    ["registry.example.com", false, true],
  ];
  for (const [name, insecure, allowed] of table)
    it(`${name}${insecure ? " (insecure)" : ""}: ${allowed ? "allowed" : "refused"}`, () => {
      assert.equal(plainHttpProblem(name, insecure) === undefined, allowed);
      if (allowed) new OciRegistry(name, { insecure });
      else
        assert.throws(
          () => new OciRegistry(name, { insecure }),
          (e) => RegistryError.isInstance(e) && /insecure/.test((e as Error).message),
        );
    });
  it("the insecure flag makes a name without a scheme http", () => {
    assert.equal(
      new OciRegistry("10.0.0.5:5000", { insecure: true }).origin,
      "http://10.0.0.5:5000",
    );
    assert.equal(new OciRegistry("10.0.0.5:5000").origin, "https://10.0.0.5:5000");
  });
});

describe("CA bundles", () => {
  it("must hold a certificate", () => {
    assert.throws(() => parseCaBundle("not pem"), /CERTIFICATE/);
    assert.equal(
      parseCaBundle("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n").length > 0,
      true,
    );
  });
});
