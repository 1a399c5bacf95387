// The bad-input property against the real apiserver: a sample of the generator the unit tier
// checks (tests/support/bad-input.ts) is sent as CocoonSets (dryRun=All, strict field
// validation: the object is fully validated, nothing is stored), and `check` and the
// apiserver must agree: check-accepted ⇔ apiserver-accepted.
//
// What the apiserver receives is JSON, so `check` is given the same JSON: NaN and ±Infinity
// become null there, and a null field is pruned by the apiserver as an absent one (check
// refuses null; such inputs are left out of the agreement, the unit tier covers them).
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import fc from "fast-check";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { UNKNOWN, check } from "../../provider/dynamic/slots.js";
import { API_VERSION } from "../../engine/kube/api-names.js";
import { hasUnsafeText, KIND } from "../../engine/spec/index.js";
import { KubeApiError, paths } from "../../engine/kube/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import { fleetInputsArb } from "../support/bad-input.js";

function hasNull(v: unknown): boolean {
  if (v === null) return true;
  if (Array.isArray(v)) return v.some(hasNull);
  if (typeof v === "object") return Object.values(v).some(hasNull);
  return false;
}

before(async () => {
  await ensureCrd(adminClient());
});

void describe("bad input: check and the apiserver agree", () => {
  void it("on a sample of 200 generated CocoonSets (dryRun=All)", async (t) => {
    const ns = await withNamespace(t, "bad-input");
    const client = adminClient();
    const sample = fc
      .sample(fleetInputsArb, { numRuns: 400, seed: 42 })
      .map(
        (x) =>
          JSON.parse(JSON.stringify({ name: x.name, spec: x.spec ?? null })) as {
            name: unknown;
            spec: unknown;
          },
      )
      // The apiserver prunes null fields as absent ones; a name that is not a string cannot
      // be sent as one.
      .filter((x) => typeof x.name === "string" && x.name !== "" && !hasNull(x.spec))
      .slice(0, 200);
    assert.equal(sample.length, 200);
    let agreedAccepted = 0;
    let agreedRefused = 0;
    const disagreements: string[] = [];
    for (const { name, spec } of sample) {
      const checked = await check(
        {},
        {
          kubeconfig: "x",
          namespace: ns,
          name,
          uid: UNKNOWN,
          spec,
          slots: {},
          providerVersion: "t",
        },
      );
      const body = {
        apiVersion: API_VERSION,
        kind: KIND,
        metadata: { name, namespace: ns },
        ...(spec === undefined ? {} : { spec }),
      };
      let apiError: string | undefined;
      try {
        await client.create(`${paths.cocoonSets(ns)}?dryRun=All&fieldValidation=Strict`, body);
      } catch (e) {
        if (!KubeApiError.isInstance(e) || (e.status !== 422 && e.status !== 400)) throw e;
        apiError = e.message;
      }
      const checkOk = checked.failures.length === 0;
      if (checkOk && apiError === undefined) agreedAccepted++;
      else if (!checkOk && apiError !== undefined) agreedRefused++;
      else {
        disagreements.push(
          `${JSON.stringify(body).slice(0, 400)}\n  check: ${checked.failures.map((f) => f.reason).join("; ") || "ok"}\n  apiserver: ${apiError ?? "ok"}`,
        );
      }
    }
    assert.deepEqual(disagreements, [], disagreements.join("\n"));
    assert.ok(agreedAccepted >= 10 && agreedRefused >= 10, `${agreedAccepted} / ${agreedRefused}`);
    t.diagnostic(`accepted by both: ${agreedAccepted}, refused by both: ${agreedRefused}`);
  });

  void it("the CRD refuses the quantities, names, images and numbers check refuses", async (t) => {
    const ns = await withNamespace(t, "bad-input");
    const client = adminClient();
    const agent = { image: "agents/coder:1" };
    const cases: [string, string, Record<string, unknown>, string][] = [
      [
        "storage 1e300000000",
        "q1",
        { agent: { ...agent, storage: "1e300000000" } },
        "spec.agent.storage",
      ],
      [
        "storage 1e300",
        "q2",
        { agent: { ...agent, storage: "1e300" } },
        "must be less than 9223372036854775807",
      ],
      [
        "storage 8Ei",
        "q3",
        { agent: { ...agent, storage: "8Ei" } },
        "must be less than 9223372036854775807",
      ],
      ["storage -1", "q4", { agent: { ...agent, storage: -1 } }, "spec.agent.storage"],
      [
        "limit -2",
        "q5",
        { agent: { ...agent, resources: { limits: { cpu: -2 } } } },
        "spec.agent.resources.limits.cpu",
      ],
      ["image ' '", "img", { agent: { image: " " } }, "spec.agent.image"],
      // Control and format characters, which would reach logs, events and terminals.
      [
        "image with an ANSI escape",
        "ansi",
        { agent: { image: "agents/coder:1\u001b[31m" } },
        "spec.agent.image",
      ],
      ["image with a BEL", "bel", { agent: { image: "agents/coder:1\u0007" } }, "spec.agent.image"],
      [
        "image with a right-to-left override",
        "rlo",
        { agent: { image: "agents/\u202eredoc:1" } },
        "spec.agent.image",
      ],
      [
        "image with a C1 control",
        "csi",
        { agent: { image: "agents/coder:1\u009b2J" } },
        "spec.agent.image",
      ],
      [
        "toolbox image with a zero-width space",
        "zwsp",
        { agent, toolboxes: [{ name: "web", image: "tools/web\u200b:1" }] },
        "spec.toolboxes[0].image",
      ],
      [
        "a 64-character name",
        "a".repeat(64),
        { agent },
        "metadata.name must be at most 63 characters",
      ],
      [
        "serviceAccountName Bad_SA",
        "sa",
        { agent: { ...agent, serviceAccountName: "Bad_SA" } },
        "spec.agent.serviceAccountName",
      ],
    ];
    for (const [label, name, spec, expected] of cases) {
      const checked = await check(
        {},
        {
          kubeconfig: "x",
          namespace: ns,
          name,
          uid: UNKNOWN,
          spec,
          slots: {},
          providerVersion: "t",
        },
      );
      assert.notDeepEqual(checked.failures, [], `${label}: check accepts it`);
      // What check says echoes the value escaped: nothing in it acts on a terminal.
      for (const f of checked.failures)
        assert.ok(!hasUnsafeText(f.reason), `${label}: ${JSON.stringify(f.reason)}`);
      await assert.rejects(
        client.create(`${paths.cocoonSets(ns)}?dryRun=All`, {
          apiVersion: API_VERSION,
          kind: KIND,
          metadata: { name, namespace: ns },
          spec,
        }),
        (e: unknown) => {
          assert.ok(KubeApiError.isInstance(e), label);
          assert.equal(e.status, 422, `${label}: ${e.message}`);
          assert.ok(e.message.includes(expected), `${label}: ${e.message}`);
          return true;
        },
      );
    }
    // The bounds themselves are accepted.
    for (const storage of ["9223372036854775806", "7Ei", 2 ** 53 - 1]) {
      await client.create(`${paths.cocoonSets(ns)}?dryRun=All`, {
        apiVersion: API_VERSION,
        kind: KIND,
        metadata: { name: "ok", namespace: ns },
        spec: { agent: { ...agent, storage } },
      });
    }
  });
});
