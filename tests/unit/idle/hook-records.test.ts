// The hooks' pure parts the controller's hook step uses (engine/idle/hooks.ts): the record a
// pod carries between a decision and its hook's answer, the policy's defaults, the causes, the
// failure's line, and the URL's rule as a spec error (engine/hooks/call.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  formatHookRecord,
  hibernationCause,
  hookEvent,
  hookFailureMessage,
  hookPolicy,
  hookRecordFor,
  memberSubject,
  parseHookRecord,
  suspendCause,
  type HookCause,
  type HookMoment,
} from "../../../engine/idle/index.js";
import { hooksUrlProblem } from "../../../engine/hooks/index.js";
import { ANNOTATIONS, type CocoonSet, type Pod } from "../../../engine/spec/index.js";

const MOMENTS: HookMoment[] = ["BeforeHibernate", "AfterWake", "BeforeExpire"];
const CAUSES: HookCause[] = ["idle", "suspend", "hibernation", "activity", "wake", "expiry"];

function fleet(spec: Partial<CocoonSet["spec"]> = {}): CocoonSet {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name: "crew", namespace: "agents", uid: "u-1" },
    spec: { agent: { image: "img" }, ...spec },
  };
}

function pod(record?: string): Pod {
  return {
    metadata: {
      name: "crew-1",
      namespace: "agents",
      uid: "p-1",
      annotations: record === undefined ? {} : { [ANNOTATIONS.hookPending]: record },
    },
  };
}

describe("hook records", () => {
  it("a record survives its text: format then parse gives it back", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...MOMENTS),
        fc.constantFrom(...CAUSES),
        fc.integer({ min: 0, max: 4_102_444_800_000 }),
        fc.option(fc.nat(), { nil: undefined }),
        (moment, cause, ms, generation) => {
          const r = {
            moment,
            cause,
            decidedAt: new Date(ms),
            ...(generation === undefined ? {} : { generation }),
          };
          assert.deepEqual(parseHookRecord(formatHookRecord(r)), r);
        },
      ),
    );
  });

  it("text that is not a record is none", () => {
    for (const text of [
      undefined,
      "",
      "BeforeHibernate",
      "BeforeHibernate suspend",
      "BeforeHibernate suspend yesterday",
      "Sometime suspend 2026-12-01T00:00:00.000Z",
      "BeforeHibernate nap 2026-12-01T00:00:00.000Z",
      "BeforeHibernate suspend 2026-12-01T00:00:00Z",
      "BeforeHibernate suspend 2026-12-01T00:00:00.000Z extra",
      "BeforeHibernate suspend 2026-12-01T00:00:00.000Z g",
      "BeforeHibernate suspend 2026-12-01T00:00:00.000Z g01",
      "BeforeHibernate suspend 2026-12-01T00:00:00.000Z g3 extra",
    ])
      assert.equal(parseHookRecord(text), undefined, String(text));
  });

  it("the same decision keeps its time (so its event id); another decision gets now", () => {
    const then = new Date("2026-12-01T10:00:00.000Z");
    const now = new Date("2026-12-01T10:05:00.000Z");
    const text = formatHookRecord({
      moment: "BeforeHibernate",
      cause: "suspend",
      decidedAt: then,
      generation: 4,
    });
    assert.equal(text, "BeforeHibernate suspend 2026-12-01T10:00:00.000Z g4");
    const again = hookRecordFor(pod(text), "BeforeHibernate", "suspend", now, 4);
    assert.deepEqual(again, {
      record: { moment: "BeforeHibernate", cause: "suspend", decidedAt: then, generation: 4 },
      write: false,
    });
    // The spec changed since (a suspend withdrawn and asked again): a new decision.
    assert.deepEqual(hookRecordFor(pod(text), "BeforeHibernate", "suspend", now, 6), {
      record: { moment: "BeforeHibernate", cause: "suspend", decidedAt: now, generation: 6 },
      write: true,
    });
    const subject = memberSubject(fleet(), pod(text));
    assert.equal(
      hookEvent(subject, "BeforeHibernate", "suspend", again.record.decidedAt).id,
      hookEvent(subject, "BeforeHibernate", "suspend", then).id,
    );
    for (const [moment, cause, p] of [
      ["BeforeHibernate", "idle", pod(text)],
      ["AfterWake", "suspend", pod(text)],
      ["BeforeHibernate", "suspend", pod()],
      ["BeforeHibernate", "suspend", pod("garbage")],
    ] as const)
      assert.deepEqual(hookRecordFor(p, moment, cause, now), {
        record: { moment, cause, decidedAt: now },
        write: true,
      });
  });
});

describe("hookPolicy", () => {
  it("none without spec.hooks; defaults 10 s and Fail", () => {
    assert.equal(hookPolicy(fleet()), undefined);
    assert.deepEqual(hookPolicy(fleet({ hooks: { url: "https://h.example/x" } })), {
      url: "https://h.example/x",
      timeoutMs: 10_000,
      failurePolicy: "Fail",
    });
    assert.deepEqual(
      hookPolicy(
        fleet({
          hooks: {
            url: "https://h.example/x",
            caBundle: "Y2E=",
            timeoutSeconds: 2,
            failurePolicy: "Ignore",
          },
        }),
      ),
      { url: "https://h.example/x", caBundle: "Y2E=", timeoutMs: 2000, failurePolicy: "Ignore" },
    );
  });
});

describe("causes", () => {
  it("a suspend the spec asks is `suspend`; the effective suspend without it is `idle`", () => {
    assert.equal(suspendCause(fleet({ suspend: true })), "suspend");
    assert.equal(suspendCause(fleet({ suspend: false })), "idle");
    assert.equal(suspendCause(fleet()), "idle");
  });

  it("a CocoonHibernation the fleet controls is `idle`; anyone else's `hibernation`", () => {
    assert.equal(hibernationCause("u-1", [{ uid: "u-1", controller: true }]), "idle");
    assert.equal(hibernationCause("u-1", [{ uid: "u-1", controller: false }]), "hibernation");
    assert.equal(hibernationCause("u-1", [{ uid: "u-2", controller: true }]), "hibernation");
    assert.equal(hibernationCause("u-1", undefined), "hibernation");
  });
});

describe("what logs and events may show", () => {
  const url = "https://alice:s3cret@hooks.example:8443/cocoon?token=t0k#frag";

  it("a failure's line names the target, moment, cause and policy, never credentials or query", () => {
    const held = hookFailureMessage(
      url,
      { moment: "BeforeHibernate", cause: "suspend" },
      "pod crew-1",
      "HTTP 503",
      "hold",
    );
    assert.equal(
      held,
      "lifecycle hook https://hooks.example:8443/cocoon (BeforeHibernate, suspend) for pod crew-1 failed: HTTP 503; the transition waits and the call is retried with backoff (failurePolicy Fail)",
    );
    const ignored = hookFailureMessage(
      url,
      { moment: "AfterWake", cause: "wake" },
      "pod crew-1",
      "no answer within 1s",
      "proceed-despite-failure",
    );
    assert.match(ignored, /went on \(failurePolicy Ignore\)$/);
    for (const line of [held, ignored]) assert.doesNotMatch(line, /alice|s3cret|t0k|frag/);
  });

  it("hooksUrlProblem names [spec.hooks.url], shows the URL without credentials", () => {
    assert.equal(hooksUrlProblem({ agent: {} }), undefined);
    assert.equal(hooksUrlProblem({ hooks: { url: "https://h.example/x" } }), undefined);
    assert.equal(hooksUrlProblem({ hooks: { url: "http://127.0.0.1:9/x" } }), undefined);
    assert.equal(
      hooksUrlProblem({ hooks: { url: "http://bob:pw@hooks.example/x?k=v" } }),
      "[spec.hooks.url] must use https (plain http only to a loopback host such as 127.0.0.1) (got http://hooks.example/x)",
    );
    assert.equal(
      hooksUrlProblem({ hooks: { url: "not a url" } }),
      "[spec.hooks.url] must be an absolute https URL (e.g. https://hooks.example/cocoon) (got (invalid))",
    );
  });
});
