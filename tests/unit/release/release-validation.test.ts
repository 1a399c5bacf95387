/** Input checks of owner release and worker boot, which must fail before any request. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { KubeClient } from "../../../engine/kube/index.js";
import {
  release,
  ReleaseError,
  validateRelease,
  workerIdentityFromEnv,
} from "../../../engine/release/index.js";

/** A client that records every call and answers none. */
function recordingClient(): { client: KubeClient; calls: string[] } {
  const calls: string[] = [];
  const client = new Proxy({} as KubeClient, {
    get: (_t, prop) => () => {
      calls.push(String(prop));
      return Promise.reject(new Error(`unexpected call ${String(prop)}`));
    },
  });
  return { client, calls };
}

const owner = { kind: "CocoonSet", name: "fleet", uid: "3f1c" };

void describe("release input", () => {
  const cases: [string, typeof owner, string, string][] = [
    ["empty uid", { ...owner, uid: "" }, "ns", "[owner.uid] must not be empty"],
    ["whitespace uid", { ...owner, uid: "  " }, "ns", "[owner.uid] must not be empty"],
    ["empty name", { ...owner, name: "" }, "ns", "[owner.name] must not be empty"],
    ["empty kind", { ...owner, kind: "\t" }, "ns", "[owner.kind] must not be empty"],
    ["empty namespace", owner, " ", "[namespace] must not be empty"],
    [
      "a namespace that is not a DNS label",
      owner,
      "Team_A",
      `[namespace] must be a DNS-1123 label of at most 63 characters (lowercase letters, digits and '-', starting and ending with a letter or digit) (got "Team_A")`,
    ],
    [
      "a namespace with a slash",
      owner,
      "a/b",
      `[namespace] must be a DNS-1123 label of at most 63 characters (lowercase letters, digits and '-', starting and ending with a letter or digit) (got "a/b")`,
    ],
    [
      "an owner name that climbs the request path",
      { ...owner, name: "../../nodes/n1" },
      "ns",
      `[owner.name] must be a DNS-1123 subdomain of at most 253 characters (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit) (got "../../nodes/n1")`,
    ],
    [
      "an owner name of 254 characters",
      { ...owner, name: "a".repeat(254) },
      "ns",
      `[owner.name] must be a DNS-1123 subdomain of at most 253 characters (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit) (got "${"a".repeat(80)}…")`,
    ],
    [
      "a kind in lowercase",
      { ...owner, kind: "pod" },
      "ns",
      `[owner.kind] must be a kind as the API spells it, such as Pod, Job or CocoonSet (got "pod")`,
    ],
    [
      "a plural resource for a kind",
      { ...owner, kind: "Pods/x" },
      "ns",
      `[owner.kind] must be a kind as the API spells it, such as Pod, Job or CocoonSet (got "Pods/x")`,
    ],
  ];
  for (const [name, o, ns, message] of cases) {
    void test(`${name} is refused with a field-named error before any request`, async () => {
      assert.throws(() => validateRelease(o, ns), { message });
      const { client, calls } = recordingClient();
      await assert.rejects(
        release(client, o, ns),
        (e) => ReleaseError.isInstance(e) && e.message === message,
      );
      assert.deepEqual(calls, []);
    });
  }
  void test("a complete owner passes", () =>
    assert.doesNotThrow(() => validateRelease(owner, "ns")));
  void test("a dotted owner name of 253 characters and a 63-character namespace pass", () =>
    assert.doesNotThrow(() =>
      validateRelease({ ...owner, name: `${"a".repeat(126)}.${"b".repeat(126)}` }, "n".repeat(63)),
    ));
});

void describe("workerIdentityFromEnv", () => {
  void test("reads the downward-API variables", () => {
    assert.deepEqual(workerIdentityFromEnv({ POD_NAMESPACE: "ns", POD_NAME: "w", POD_UID: "u" }), {
      namespace: "ns",
      podName: "w",
      podUid: "u",
    });
  });
  void test("names the missing variable", () => {
    assert.throws(
      () => workerIdentityFromEnv({ POD_NAMESPACE: "ns", POD_NAME: "w", POD_UID: "" }),
      (e) => ReleaseError.isInstance(e) && /^\[POD_UID\] must not be empty/.test(e.message),
    );
  });
});
