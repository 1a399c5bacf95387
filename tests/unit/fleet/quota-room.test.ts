// The quota sum preview adds to its dry runs: a dry run checks one pod against a quota's
// current usage, so the pods a deploy creates are summed against each ResourceQuota.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  podQuotaUsage,
  quotaOverflows,
  type ResourceQuotaObject,
} from "../../../engine/pods/index.js";
import { formatQuantity, usageKeyOf, type QuotaUsage } from "../../../engine/pods/quota-room.js";

const quota = (
  name: string,
  hard: Record<string, string>,
  used: Record<string, string>,
  spec: ResourceQuotaObject["spec"] = {},
): ResourceQuotaObject => ({
  metadata: { name },
  spec: { hard, ...spec },
  status: { hard, used },
});

const pod = (requests: Record<string, string> = {}, limits: Record<string, string> = {}) =>
  podQuotaUsage({ spec: { containers: [{ resources: { requests, limits } }] } });

const creates = (usage: QuotaUsage, ...slots: string[]) => slots.map((slot) => ({ slot, usage }));

describe("podQuotaUsage", () => {
  it("counts one pod and sums containers, at least the largest init container, plus overhead", () => {
    const u = podQuotaUsage({
      spec: {
        containers: [
          { resources: { requests: { cpu: "500m", memory: "1Gi" } } },
          { resources: { requests: { cpu: "250m" }, limits: { cpu: "1" } } },
        ],
        initContainers: [{ resources: { requests: { cpu: "2" } } }],
        overhead: { memory: "128Mi" },
      },
    });
    assert.deepEqual(
      Object.fromEntries(Object.entries(u).map(([k, q]) => [k, formatQuantity(q)])),
      {
        pods: "1",
        "requests.cpu": "2",
        "requests.memory": String(1024 ** 3 + 128 * 1024 ** 2),
        "limits.cpu": "1",
      },
    );
  });

  it("a finished pod counts nothing", () => {
    assert.deepEqual(podQuotaUsage({ status: { phase: "Failed" } }), {});
    assert.deepEqual(podQuotaUsage({ status: { phase: "Succeeded" } }), {});
  });

  it("maps quota names to usage keys", () => {
    assert.equal(usageKeyOf("pods"), "pods");
    assert.equal(usageKeyOf("count/pods"), "pods");
    assert.equal(usageKeyOf("cpu"), "requests.cpu");
    assert.equal(usageKeyOf("limits.memory"), "limits.memory");
    assert.equal(usageKeyOf("services"), undefined);
  });
});

describe("quotaOverflows", () => {
  it("room for one pod: a three-slot scale-up overflows on its second and third slot", () => {
    const [o, ...rest] = quotaOverflows(
      [quota("pods", { pods: "4" }, { pods: "3" })],
      creates(pod(), "3", "4", "5"),
      [],
    );
    assert.deepEqual(rest, []);
    assert.deepEqual(o, {
      quota: "pods",
      resource: "pods",
      hard: "4",
      used: "3",
      added: "3",
      slots: ["3", "4", "5"],
      refused: ["4", "5"],
    });
  });

  it("fits exactly: nothing to report", () => {
    assert.deepEqual(
      quotaOverflows(
        [quota("pods", { pods: "6" }, { pods: "3" })],
        creates(pod(), "3", "4", "5"),
        [],
      ),
      [],
    );
  });

  it("sums requests in exact quantities (500m + 500m + 500m is over 1)", () => {
    const [o] = quotaOverflows(
      [quota("cpu", { "requests.cpu": "1", cpu: "2" }, { "requests.cpu": "0", cpu: "0" })],
      creates(pod({ cpu: "500m" }), "1", "2", "3"),
      [],
    );
    assert.equal(o.resource, "requests.cpu");
    assert.equal(o.added, "1500m");
    assert.deepEqual(o.refused, ["3"]);
  });

  it("pods the deploy deletes for good free their usage first", () => {
    const q = [quota("pods", { pods: "4" }, { pods: "4" })];
    assert.deepEqual(quotaOverflows(q, creates(pod(), "web"), [pod()]), []);
    assert.equal(quotaOverflows(q, creates(pod(), "web", "db"), [pod()]).length, 1);
  });

  it("leaves scoped and not yet measured quotas, and resources pods do not use, to the apiserver", () => {
    const many = creates(pod(), "1", "2", "3");
    assert.deepEqual(
      quotaOverflows(
        [
          quota("scoped", { pods: "1" }, { pods: "1" }, { scopes: ["NotBestEffort"] }),
          quota(
            "selector",
            { pods: "1" },
            { pods: "1" },
            { scopeSelector: { matchExpressions: [] } },
          ),
          { metadata: { name: "new" }, spec: { hard: { pods: "1" } } },
          quota("services", { services: "0" }, { services: "0" }),
          quota("memory", { "requests.memory": "1Gi" }, { "requests.memory": "0" }),
        ],
        many,
        [],
      ),
      [],
    );
  });
});
