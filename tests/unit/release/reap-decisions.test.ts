/** Table tests for the reaper's pure decisions (SPEC section 5). */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { KubeObject, OwnerReference } from "../../../engine/kube/index.js";
import {
  configMapReapReason,
  expiresAtMs,
  jobReapReason,
  podReapReason,
  type ReapReason,
} from "../../../engine/release/index.js";

const NOW_S = 1_700_000_000;
const NOW_MS = NOW_S * 1000;
const MANAGED = { "app.kubernetes.io/managed-by": "cocoonset" };
const PROMPT = { ...MANAGED, "app.kubernetes.io/component": "prompt-data" };

interface Shape {
  labels?: Record<string, string>;
  expires?: string;
  status?: Record<string, unknown>;
  terminating?: boolean;
  owners?: OwnerReference[];
}

function obj(s: Shape): KubeObject {
  return {
    metadata: {
      name: "x",
      uid: "u",
      labels: s.labels,
      annotations:
        s.expires === undefined ? undefined : { "cocoonset.cocoonstack.io/expires-at": s.expires },
      deletionTimestamp: s.terminating ? "2024-01-01T00:00:00Z" : undefined,
      ownerReferences: s.owners,
    },
    status: s.status,
  };
}

const past = String(NOW_S - 1);
const future = String(NOW_S + 1);
const equal = String(NOW_S);
const jobOwner: OwnerReference = {
  apiVersion: "batch/v1",
  kind: "Job",
  name: "j",
  uid: "j1",
  controller: true,
};
const deadline = {
  conditions: [{ type: "Failed", status: "True", reason: "DeadlineExceeded" }],
};

type Row = [string, Shape, ReapReason | undefined];

void describe("jobReapReason", () => {
  const rows: Row[] = [
    [
      "failed on its deadline, no expiry",
      { labels: MANAGED, status: deadline },
      "DeadlineExceeded",
    ],
    [
      "failed on its deadline, future expiry",
      { labels: MANAGED, status: deadline, expires: future },
      "DeadlineExceeded",
    ],
    [
      "Failed condition with status False is not a deadline",
      {
        labels: MANAGED,
        status: { conditions: [{ type: "Failed", status: "False", reason: "DeadlineExceeded" }] },
      },
      undefined,
    ],
    [
      "failed for another reason, no expiry",
      {
        labels: MANAGED,
        status: {
          conditions: [{ type: "Failed", status: "True", reason: "BackoffLimitExceeded" }],
        },
      },
      undefined,
    ],
    [
      "failed for another reason, expired",
      {
        labels: MANAGED,
        expires: past,
        status: {
          conditions: [{ type: "Failed", status: "True", reason: "BackoffLimitExceeded" }],
        },
      },
      "Expired",
    ],
    ["expired", { labels: MANAGED, expires: past }, "Expired"],
    ["expiry equal to now is kept (strict <)", { labels: MANAGED, expires: equal }, undefined],
    ["future expiry", { labels: MANAGED, expires: future }, undefined],
    ["missing expiry", { labels: MANAGED }, undefined],
    ["garbage expiry", { labels: MANAGED, expires: "tomorrow" }, undefined],
    [
      "not managed by cocoonset",
      { labels: { "app.kubernetes.io/managed-by": "helm" }, expires: past, status: deadline },
      undefined,
    ],
    ["already being deleted", { labels: MANAGED, expires: past, terminating: true }, undefined],
  ];
  for (const [name, shape, want] of rows) {
    void test(`${name} → ${want ?? "keep"}`, () =>
      assert.equal(jobReapReason(obj(shape), NOW_MS), want));
  }
});

void describe("podReapReason", () => {
  const failed = (reason: string) => ({ phase: "Failed", reason });
  const rows: Row[] = [
    [
      "Failed with DeadlineExceeded, no expiry",
      { labels: MANAGED, status: failed("DeadlineExceeded") },
      "DeadlineExceeded",
    ],
    [
      "Failed with DeadlineExceeded, future expiry",
      { labels: MANAGED, status: failed("DeadlineExceeded"), expires: future },
      "DeadlineExceeded",
    ],
    [
      "Failed for another reason, no expiry",
      { labels: MANAGED, status: failed("Error") },
      undefined,
    ],
    [
      "Failed for another reason, expired",
      { labels: MANAGED, status: failed("Error"), expires: past },
      "Expired",
    ],
    [
      "Running with DeadlineExceeded reason is not a deadline",
      { labels: MANAGED, status: { phase: "Running", reason: "DeadlineExceeded" } },
      undefined,
    ],
    ...(["Pending", "Running", "Succeeded", "Failed", "Unknown"] as const).map((phase): Row => [
      `${phase} and expired`,
      { labels: MANAGED, status: { phase }, expires: past },
      "Expired",
    ]),
    ...(["Pending", "Running", "Unknown"] as const).map((phase): Row => [
      `${phase} with future expiry`,
      { labels: MANAGED, status: { phase }, expires: future },
      undefined,
    ]),
    ["expiry equal to now is kept (strict <)", { labels: MANAGED, expires: equal }, undefined],
    ["missing expiry", { labels: MANAGED, status: { phase: "Running" } }, undefined],
    ["garbage expiry", { labels: MANAGED, expires: "12abc" }, undefined],
    ["negative expiry is unparseable", { labels: MANAGED, expires: "-5" }, undefined],
    ["fractional expiry is unparseable", { labels: MANAGED, expires: `${past}.5` }, undefined],
    ["terminating and expired", { labels: MANAGED, expires: past, terminating: true }, undefined],
    [
      "terminating with DeadlineExceeded",
      { labels: MANAGED, status: failed("DeadlineExceeded"), terminating: true },
      undefined,
    ],
    [
      "controlled by a Job, expired",
      { labels: MANAGED, expires: past, owners: [jobOwner] },
      undefined,
    ],
    [
      "controlled by a Job, DeadlineExceeded",
      { labels: MANAGED, status: failed("DeadlineExceeded"), owners: [jobOwner] },
      undefined,
    ],
    [
      "owned but not controlled by a Job, expired",
      { labels: MANAGED, expires: past, owners: [{ ...jobOwner, controller: false }] },
      "Expired",
    ],
    [
      "controlled by something else, expired",
      { labels: MANAGED, expires: past, owners: [{ ...jobOwner, kind: "CocoonSet" }] },
      "Expired",
    ],
    ["not managed, expired", { expires: past }, undefined],
  ];
  for (const [name, shape, want] of rows) {
    void test(`${name} → ${want ?? "keep"}`, () =>
      assert.equal(podReapReason(obj(shape), NOW_MS), want));
  }
});

void describe("configMapReapReason", () => {
  const rows: Row[] = [
    ["prompt ConfigMap expired", { labels: PROMPT, expires: past }, "Expired"],
    [
      "prompt ConfigMap expiring now is kept (strict <)",
      { labels: PROMPT, expires: equal },
      undefined,
    ],
    ["prompt ConfigMap with future expiry", { labels: PROMPT, expires: future }, undefined],
    ["prompt ConfigMap without expiry", { labels: PROMPT }, undefined],
    ["prompt ConfigMap with garbage expiry", { labels: PROMPT, expires: "" }, undefined],
    [
      "managed but another component",
      { labels: { ...MANAGED, "app.kubernetes.io/component": "cache" }, expires: past },
      undefined,
    ],
    ["managed without component", { labels: MANAGED, expires: past }, undefined],
    [
      "prompt-data not managed by cocoonset",
      { labels: { "app.kubernetes.io/component": "prompt-data" }, expires: past },
      undefined,
    ],
    ["already being deleted", { labels: PROMPT, expires: past, terminating: true }, undefined],
  ];
  for (const [name, shape, want] of rows) {
    void test(`${name} → ${want ?? "keep"}`, () =>
      assert.equal(configMapReapReason(obj(shape), NOW_MS), want));
  }
});

void describe("expiresAtMs", () => {
  void test("reads decimal unix seconds as milliseconds", () =>
    assert.equal(expiresAtMs(obj({ expires: "1700000000" })), 1_700_000_000_000));
  void test("refuses padding and numbers too large to be exact", () => {
    assert.equal(expiresAtMs(obj({ expires: " 1700000000" })), undefined);
    assert.equal(expiresAtMs(obj({ expires: "99999999999999999999" })), undefined);
  });
});
