/** Input checks of owner release and worker boot, which must fail before any request. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { KubeClient } from "../../../provider/kube/index.js";
import {
  release,
  ReleaseError,
  validateRelease,
  workerIdentityFromEnv,
} from "../../../provider/release/index.js";

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
