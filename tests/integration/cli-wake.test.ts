/**
 * `cocoonset wake FLEET [SLOT...]` through the built CLI against the real apiserver, as an
 * identity with only the rights the docs name in the fleet's namespace (the CocoonSet's get,
 * leases get, create and patch): the named members' activity Leases are created, labelled
 * with the fleet, renewed later on a second wake, the others left alone; no SLOT renews every
 * member; a member the fleet does not have is refused with nothing written. (What the
 * controller does with a renewal is its own tests'.)
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { API_VERSION } from "../../engine/kube/api-names.js";
import { paths } from "../../engine/kube/index.js";
import { KIND, LABELS, type CocoonSet } from "../../engine/spec/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import { cocoonset } from "../support/cli.js";
import { writeTokenKubeconfig } from "../support/controller-process.js";
import { bindRoleAndRequestToken } from "../support/service-account.js";

interface Lease {
  metadata: { name: string; labels?: Record<string, string> };
  spec?: { holderIdentity?: string; renewTime?: string };
}

const WAKER = "waker";

/** Whether the apiserver lets the waker do `verb` on `resource` in `ns` now. */
async function allowed(ns: string, group: string, resource: string, verb: string) {
  const review = await adminClient().create<{ status?: { allowed?: boolean } }>(
    "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SubjectAccessReview",
      spec: {
        user: `system:serviceaccount:${ns}:${WAKER}`,
        groups: ["system:serviceaccounts", `system:serviceaccounts:${ns}`, "system:authenticated"],
        resourceAttributes: { group, resource, verb, namespace: ns },
      },
    },
  );
  return review.status?.allowed === true;
}

/** A token kubeconfig of a service account with only the rights `wake` needs in `ns`. */
async function wakerKubeconfig(t: Parameters<typeof withNamespace>[0], ns: string) {
  const admin = adminClient();
  await admin.create(paths.serviceAccounts(ns), {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: WAKER },
  });
  await admin.create(paths.roles(ns), {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "Role",
    metadata: { name: WAKER },
    rules: [
      { apiGroups: ["cocoonset.cocoonstack.io"], resources: ["cocoonsets"], verbs: ["get"] },
      {
        apiGroups: ["coordination.k8s.io"],
        resources: ["leases"],
        verbs: ["get", "create", "patch"],
      },
    ],
  });
  const token = await bindRoleAndRequestToken(admin, ns, WAKER, 3600);
  // The authorizer follows new bindings from its cache: ask until it answers yes.
  const deadline = Date.now() + 60_000;
  while (!(await allowed(ns, "coordination.k8s.io", "leases", "patch"))) {
    assert.ok(Date.now() < deadline, "the authorizer never allowed the waker's Role");
  }
  const cluster = admin.config.getCurrentCluster()!;
  const dir = mkdtempSync(join(tmpdir(), "wake-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return writeTokenKubeconfig(dir, "kubeconfig", cluster.server, cluster.caData, token);
}

async function leases(ns: string): Promise<Map<string, Lease>> {
  const list = await adminClient().list<Lease>(paths.leases(ns));
  return new Map(list.items.map((l) => [l.metadata.name, l]));
}

test("cocoonset wake renews the named members' activity Leases, then every member's, with only namespace rights", async (t) => {
  const admin = adminClient();
  await ensureCrd(admin);
  const ns = await withNamespace(t, "cli-wake");
  await admin.create<CocoonSet>(paths.cocoonSets(ns), {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: "coder", namespace: ns },
    spec: {
      agent: { replicas: 2, image: "agents/coder:1" },
      toolboxes: [{ name: "browser", image: "tools/browser:1" }],
    },
  });
  const kubeconfig = await wakerKubeconfig(t, ns);
  const kc = ["--kubeconfig", kubeconfig, "-n", ns];

  // Named members only, as JSON.
  const before = Date.now();
  const first = await cocoonset(["wake", "coder", "1", "browser", "-o", "json", ...kc]);
  assert.equal(first.status, 0, first.stderr);
  const printed = JSON.parse(first.stdout) as {
    namespace: string;
    fleet: string;
    renewedAt: string;
    holder: string;
    members: { member: string; pod: string; lease: string }[];
  };
  assert.deepEqual(
    printed.members.map((m) => [m.member, m.lease]),
    [
      ["1", "coder-1-activity"],
      ["browser", "coder-browser-activity"],
    ],
  );
  let live = await leases(ns);
  assert.deepEqual([...live.keys()].sort(), ["coder-1-activity", "coder-browser-activity"]);
  for (const l of live.values()) {
    assert.equal(l.metadata.labels?.[LABELS.name], "coder", "labelled for the controller's watch");
    assert.equal(l.spec?.holderIdentity, "cocoonset-cli");
    const at = Date.parse(l.spec?.renewTime ?? "");
    assert.ok(at >= before - 1000 && at <= Date.now() + 1000, `renewed now (${l.spec?.renewTime})`);
    assert.equal(at, Date.parse(printed.renewedAt));
  }
  const firstRenewal = live.get("coder-1-activity")?.spec?.renewTime;

  // A member the fleet does not have: refused, naming it, nothing written.
  const bad = await cocoonset(["wake", "coder", "0", "3", ...kc]);
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /\[SLOT\] "3" is not a member of .*\/coder: it has slots 0-2/);
  assert.equal((await leases(ns)).size, 2, "nothing renewed");
  const missing = await cocoonset(["wake", "nobody", ...kc]);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, new RegExp(`\\[FLEET\\] no CocoonSet ${ns}/nobody`));

  // No SLOT: every member, the earlier ones renewed again.
  const all = await cocoonset(["wake", "coder", "--holder", "gateway-7", ...kc]);
  assert.equal(all.status, 0, all.stderr);
  assert.match(
    all.stdout,
    new RegExp(`^marked 4 members of ${ns}/coder in use at .*: 0, 1, 2, browser\\n$`),
  );
  live = await leases(ns);
  assert.deepEqual([...live.keys()].sort(), [
    "coder-0-activity",
    "coder-1-activity",
    "coder-2-activity",
    "coder-browser-activity",
  ]);
  const again = live.get("coder-1-activity")?.spec;
  assert.equal(again?.holderIdentity, "gateway-7");
  assert.ok(
    Date.parse(again?.renewTime ?? "") >= Date.parse(firstRenewal ?? ""),
    `renewed again (${firstRenewal} → ${again?.renewTime})`,
  );
  assert.notEqual(again?.renewTime, firstRenewal, "the renewal time moved");
});
