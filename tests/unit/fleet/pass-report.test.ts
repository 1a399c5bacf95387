import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  quotaBlockedStatus,
  quotaRefusalOf,
  summarizeFailures,
} from "../../../engine/plan/index.js";
import { QUOTA_CONDITION, type FailedStep } from "../../../engine/plan/pass-report.js";
import type { CocoonSet } from "../../../engine/spec/index.js";
import { NOW, cocoonSet, mainPod, subPod } from "./fixtures.js";
import { rfc3339Seconds } from "../../../engine/kube/index.js";

const QUOTA_MESSAGE =
  'POST /api/v1/namespaces/q/pods: HTTP 403 Forbidden: pods "demo-11" is forbidden: exceeded quota: pods-10, requested: pods=1, used: pods=10, limited: pods=10';

describe("quotaRefusalOf", () => {
  const cases: [string, string, ReturnType<typeof quotaRefusalOf>][] = [
    [
      "a pod count quota",
      QUOTA_MESSAGE,
      { quota: "pods-10", detail: "requested: pods=1, used: pods=10, limited: pods=10" },
    ],
    [
      "a cpu quota",
      'pods "demo-3" is forbidden: exceeded quota: compute, requested: requests.cpu=2, used: requests.cpu=3, limited: requests.cpu=4',
      {
        quota: "compute",
        detail: "requested: requests.cpu=2, used: requests.cpu=3, limited: requests.cpu=4",
      },
    ],
    ["another 403", 'pods "demo-1" is forbidden: User "x" cannot create resource', undefined],
    ["a webhook refusal", "admission webhook denied the request", undefined],
  ];
  for (const [name, message, want] of cases)
    it(`reads ${name}`, () => assert.deepEqual(quotaRefusalOf(message), want));
});

describe("summarizeFailures", () => {
  it("990 quota refusals make one line with the counts, the quota and the first reason", () => {
    const failures: FailedStep[] = Array.from({ length: 990 }, (_, i) => ({
      pod: `demo-${i + 11}`,
      decision: "create",
      message: QUOTA_MESSAGE.replace("demo-11", `demo-${i + 11}`),
    }));
    const line = summarizeFailures(failures, 8, quotaRefusalOf(QUOTA_MESSAGE));
    assert.equal(
      line,
      `990 step(s) failed (create ×990); ResourceQuota pods-10 is full; 8 create(s) not sent (the quota refused the ones before); first: demo-11 (create): ${QUOTA_MESSAGE}`,
    );
  });

  it("stays under 2.5 kB whatever the failures (property)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            pod: fc.option(fc.string({ maxLength: 300 }), { nil: undefined }),
            decision: fc.option(fc.string({ maxLength: 40 }), { nil: undefined }),
            message: fc.string({ maxLength: 5000 }),
          }),
          { maxLength: 300 },
        ),
        fc.nat(100_000),
        (failures, unsent) => {
          assert.ok(summarizeFailures(failures, unsent).length < 2500);
        },
      ),
    );
  });

  it("cuts a long first message and says how long it was", () => {
    const line = summarizeFailures([{ message: "x".repeat(10_000) }]);
    assert.match(line, /^1 step\(s\) failed \(plan ×1\); first: x{1000}… \(10000 characters\)$/);
  });
});

describe("quotaBlockedStatus", () => {
  const cs = cocoonSet({}, { replicas: 1000 });
  const pods = [mainPod(cs), ...Array.from({ length: 9 }, (_, i) => subPod(cs, i + 1))];
  const refusal = quotaRefusalOf(QUOTA_MESSAGE)!;

  it("writes the phase and counts the pods give, and a ReplicaFailure condition naming the quota", () => {
    const st = quotaBlockedStatus({ cocoonSet: cs, pods, nowMs: NOW, refusal, missing: 991 });
    assert.equal(st.phase, "Scaling");
    assert.equal(st.readyAgents, 10);
    assert.equal(st.desiredAgents, 1001);
    const c = st.conditions?.find((x) => x.type === QUOTA_CONDITION.type);
    assert.deepEqual(c, {
      type: "ReplicaFailure",
      status: "True",
      reason: "QuotaExceeded",
      message:
        "ResourceQuota pods-10 refuses the pods of 991 missing member(s) (requested: pods=1, used: pods=10, limited: pods=10); they are created once the quota has room",
      lastTransitionTime: rfc3339Seconds(NOW),
      observedGeneration: 3,
    });
    assert.deepEqual(
      st.conditions?.map((x) => x.type),
      ["Ready", "Progressing", "ReplicaFailure"],
    );
  });

  it("keeps the condition's transition time while the quota stays full", () => {
    const first = quotaBlockedStatus({ cocoonSet: cs, pods, nowMs: NOW, refusal, missing: 991 });
    const later = quotaBlockedStatus({
      cocoonSet: { ...cs, status: first },
      pods,
      nowMs: NOW + 60_000,
      refusal,
      missing: 991,
    });
    assert.deepEqual(later, first, "the same status: no write");
  });

  it("keeps a stored phase that marks work in flight (a migration, a suspend, Failed)", () => {
    const counts = { readyAgents: 0, desiredAgents: 1001, readyToolboxes: 0, desiredToolboxes: 0 };
    for (const phase of ["Migrating", "Suspending", "Waking", "Failed"] as const) {
      const stored: CocoonSet = { ...cs, status: { ...counts, phase } };
      const st = quotaBlockedStatus({ cocoonSet: stored, pods, nowMs: NOW, refusal, missing: 1 });
      assert.equal(st.phase, phase);
    }
    const plain: CocoonSet = { ...cs, status: { ...counts, phase: "Running" } };
    assert.equal(
      quotaBlockedStatus({ cocoonSet: plain, pods: [], nowMs: NOW, refusal, missing: 1001 }).phase,
      "Pending",
      "no main agent: Pending, as the pods say",
    );
  });
});

describe("quotaBlockedStatus with an admission refusal (Pod Security, a webhook)", () => {
  const cs = cocoonSet({}, { replicas: 1 });
  const admission =
    'POST /api/v1/namespaces/q/pods: HTTP 403 Forbidden: pods "demo-0" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true';
  it("writes ReplicaFailure with reason FailedCreate quoting the apiserver, and the deadline names it", () => {
    const first = quotaBlockedStatus({
      cocoonSet: cs,
      pods: [],
      nowMs: NOW,
      refusal: { admission },
      missing: 1,
    });
    assert.equal(first.phase, "Pending");
    const c = first.conditions?.find((x) => x.type === "ReplicaFailure");
    assert.equal(c?.reason, "FailedCreate");
    assert.equal(
      c?.message,
      `the apiserver refuses to create the pods of 1 missing member(s): ${admission}; they are created once the apiserver allows them (the namespace's admission: Pod Security, webhooks, policies; or the RBAC of whoever creates them)`,
    );
    const later = quotaBlockedStatus({
      cocoonSet: { ...cs, status: first },
      pods: [],
      nowMs: NOW + 600_000,
      refusal: { admission },
      missing: 1,
    });
    const progressing = later.conditions?.find((x) => x.type === "Progressing");
    assert.equal(progressing?.reason, "ProgressDeadlineExceeded");
    assert.match(
      progressing?.message ?? "",
      /waiting for: the apiserver refuses to create the pods/,
    );
  });
});
