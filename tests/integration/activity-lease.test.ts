/**
 * Activity Leases against the embedded cluster: `markActivity` creates a member's Lease the
 * first time and renews it after, labelled with the fleet's name, and the idle policy's read
 * of the namespace's Leases gives each member its last renewal (other fleets' ignored).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { markActivity } from "../../engine/execute/activity.js";
import { leaseActivity, type ActivityLease } from "../../engine/idle/index.js";
import { paths } from "../../engine/kube/index.js";
import { LABELS, type CocoonSet } from "../../engine/spec/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";

test("markActivity creates and renews a member's Lease, and leaseActivity reads it back per member", async (t) => {
  const client = adminClient();
  const ns = await withNamespace(t, "activity");
  const cs = {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name: "coder", namespace: ns },
    spec: {
      agent: { replicas: 2, image: "agents/coder:1" },
      toolboxes: [{ name: "db", image: "db:1" }],
    },
  } as CocoonSet;
  const first = new Date("2026-12-01T10:00:00.123Z");
  await markActivity(client, ns, "coder", ["coder-1", "coder-db"], "gateway", first);
  await markActivity(client, ns, "other", ["other-0"], "gateway", first);
  const later = new Date("2026-12-01T10:05:00.456Z");
  await markActivity(client, ns, "coder", ["coder-1"], "gateway", later);

  const list = await client.list<ActivityLease & { metadata: { labels?: Record<string, string> } }>(
    paths.leases(ns),
    { labelSelector: `${LABELS.name}=coder` },
  );
  assert.deepEqual(list.items.map((l) => l.metadata.name).sort(), [
    "coder-1-activity",
    "coder-db-activity",
  ]);
  const activity = leaseActivity(cs, list.items);
  assert.deepEqual([...activity.entries()].map(([k, d]) => [k, d.toISOString()]).sort(), [
    ["1", later.toISOString()],
    ["db", first.toISOString()],
  ]);
});
