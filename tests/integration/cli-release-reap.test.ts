/**
 * `cocoonset reap` and `cocoonset release` through the built CLI against the real
 * apiserver: their JSON shapes, their missing-flag errors, and a release that names a Pod
 * owner with the wrong uid refusing (non-zero exit, both uids named, nothing deleted).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  COMPONENT_LABEL,
  EXPIRES_AT_ANNOTATION,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  PROMPT_DATA_COMPONENT,
  ownerReferenceForPod,
} from "../../engine/release/index.js";
import { paths, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, testKubeconfig, withNamespace } from "../support/cluster.js";
import { cocoonset } from "../support/cli.js";

const kc = () => ["--kubeconfig", testKubeconfig()];

function pod(name: string, extra: Partial<KubeObject["metadata"]> = {}): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, ...extra },
    spec: { containers: [{ name: "c", image: "agents/worker:1" }] },
  };
}

const past = () => String(Math.floor(Date.now() / 1000) - 60);
const managed = { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE };

test("reap --json prints exactly {jobs,pods,configMaps} with what one pass deleted", async (t) => {
  const ns = await withNamespace(t, "cli-reap");
  const client = adminClient();
  await client.create(
    paths.pods(ns),
    pod("expired", { labels: managed, annotations: { [EXPIRES_AT_ANNOTATION]: past() } }),
  );
  await client.create(paths.pods(ns), pod("kept", { labels: managed }));
  await client.create(paths.configMaps(ns), {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: "prompt",
      labels: { ...managed, [COMPONENT_LABEL]: PROMPT_DATA_COMPONENT },
      annotations: { [EXPIRES_AT_ANNOTATION]: past() },
    },
    data: { prompt: "hi" },
  });
  const r = await cocoonset(["reap", "--namespace", ns, "--json", ...kc()]);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { jobs: 0, pods: 1, configMaps: 1 });
  const left = await client.list(paths.pods(ns));
  assert.deepEqual(
    left.items.filter((p) => !p.metadata.deletionTimestamp).map((p) => p.metadata.name),
    ["kept"],
  );
  const text = await cocoonset(["reap", "--namespace", ns, ...kc()]);
  assert.equal(text.status, 0, text.stderr);
  assert.match(text.stdout, new RegExp(`^reaped in ${ns}: 0 Jobs, 0 pods, 0 ConfigMaps\\n$`));
});

test("reap and release name each missing or empty flag, and exit 1 before deleting", async () => {
  const cases: [string[], RegExp][] = [
    [
      ["reap", ...kc()],
      /^cocoonset: missing --namespace: the namespace to reap \(the current context of --kubeconfig .* names no namespace either\)\n$/,
    ],
    [["reap", "--namespace", " ", ...kc()], /^cocoonset: --namespace must not be empty/],
    [
      ["reap", "--namespace", "Team_A", ...kc()],
      /^cocoonset: \[--namespace\] must be a DNS-1123 label .*\(got "Team_A"\)\n$/,
    ],
    [
      [
        "release",
        "--namespace",
        "a/b",
        "--owner-kind",
        "Pod",
        "--owner-name",
        "n",
        "--owner-uid",
        "u",
        ...kc(),
      ],
      /^cocoonset: \[--namespace\] must be a DNS-1123 label .*\(got "a\/b"\)\n$/,
    ],
    [
      [
        "release",
        "--namespace",
        "x",
        "--owner-kind",
        "pod",
        "--owner-name",
        "n",
        "--owner-uid",
        "u",
        ...kc(),
      ],
      /^cocoonset: \[--owner-kind\] must be a kind as the API spells it, such as Pod, Job or CocoonSet \(got "pod"\)\n$/,
    ],
    [
      [
        "release",
        "--namespace",
        "x",
        "--owner-kind",
        "Pod",
        "--owner-name",
        "../../nodes/n1",
        "--owner-uid",
        "u",
        ...kc(),
      ],
      /^cocoonset: \[--owner-name\] must be a DNS-1123 subdomain .*\(got "..\/..\/nodes\/n1"\)\n$/,
    ],
    [
      ["release", "--namespace", "x", "--owner-name", "n", "--owner-uid", "u", ...kc()],
      /^cocoonset: missing --owner-kind: /,
    ],
    [
      ["release", "--namespace", "x", "--owner-kind", "Pod", "--owner-uid", "u", ...kc()],
      /^cocoonset: missing --owner-name: /,
    ],
    [
      ["release", "--namespace", "x", "--owner-kind", "Pod", "--owner-name", "n", ...kc()],
      /^cocoonset: missing --owner-uid: kubectl get KIND NAME/,
    ],
    [
      ["release", "--owner-kind", "Pod", "--owner-name", "n", "--owner-uid", "u", ...kc()],
      /^cocoonset: missing --namespace: the owner's namespace/,
    ],
    [
      [
        "release",
        "--namespace",
        "x",
        "--owner-kind",
        "Pod",
        "--owner-name",
        "n",
        "--owner-uid",
        "u",
        "--timeout",
        "soon",
        ...kc(),
      ],
      /"soon" is not a duration/,
    ],
  ];
  for (const [args, want] of cases) {
    const r = await cocoonset(args);
    assert.equal(r.status, 1, `${args.join(" ")}\n${r.stderr}`);
    assert.match(r.stderr, want, args.join(" "));
    assert.equal(r.stdout, "");
  }
});

test("release of a Pod owner that exists with another uid refuses, naming both uids", async (t) => {
  const ns = await withNamespace(t, "cli-release");
  const client = adminClient();
  const owner = await client.create(paths.pods(ns), pod("worker"));
  const ref = ownerReferenceForPod({ name: "worker", uid: owner.metadata.uid! });
  await client.create(paths.pods(ns), pod("child", { ownerReferences: [ref] }));
  await client.create(paths.configMaps(ns), {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "child-cm", ownerReferences: [ref] },
  });
  const typo = "00000000-0000-4000-8000-000000000000";
  const wrong = await cocoonset([
    "release",
    "--namespace",
    ns,
    "--owner-kind",
    "Pod",
    "--owner-name",
    "worker",
    "--owner-uid",
    typo,
    "--json",
    ...kc(),
  ]);
  assert.equal(wrong.status, 1, wrong.stdout);
  assert.equal(wrong.stdout, "", "no JSON on a refusal");
  assert.ok(
    wrong.stderr.includes(typo) && wrong.stderr.includes(owner.metadata.uid!),
    wrong.stderr,
  );
  assert.match(wrong.stderr, /nothing was deleted/);
  assert.ok(await client.getOrUndefined(paths.pod(ns, "child")), "the child pod is untouched");
  assert.ok(
    await client.getOrUndefined(paths.configMap(ns, "child-cm")),
    "the child ConfigMap too",
  );

  // The right uid releases the tree and prints the JSON shape.
  const right = await cocoonset([
    "release",
    "--namespace",
    ns,
    "--owner-kind",
    "Pod",
    "--owner-name",
    "worker",
    "--owner-uid",
    owner.metadata.uid!,
    "--json",
    ...kc(),
  ]);
  assert.equal(right.status, 0, right.stderr);
  assert.deepEqual(JSON.parse(right.stdout), { jobs: 0, pods: 1, configMaps: 1 });
  assert.equal(await client.getOrUndefined(paths.pod(ns, "child")), undefined);
});

test("release of an owner that does not exist is not refused (nothing to compare its uid with)", async (t) => {
  const ns = await withNamespace(t, "cli-release-gone");
  const r = await cocoonset([
    "release",
    "--namespace",
    ns,
    "--owner-kind",
    "Pod",
    "--owner-name",
    "gone",
    "--owner-uid",
    "11111111-2222-4333-8444-555555555555",
    "--json",
    ...kc(),
  ]);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { jobs: 0, pods: 0, configMaps: 0 });
});
