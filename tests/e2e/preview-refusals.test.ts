/**
 * `pulumi preview` refuses, naming the field, what `up` would otherwise fail on after creating
 * part of the stack: a Fleet namespace that is not a DNS label, a namespace that does not
 * exist (the program does not create it), a blank image. Real pulumi CLI, local backend,
 * embedded cluster; what was created is read from the cluster.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { LABELS } from "../../engine/spec/index.js";
import { paths } from "../../engine/kube/index.js";
import { adminClient, suffix, withNamespace } from "../support/cluster.js";
import { programStack, repoRoot } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "fleet");

/** Every CocoonSet and pod of that fleet name, in any namespace. */
async function fleetObjects(name: string): Promise<{ cocoonSets: string[]; pods: string[] }> {
  const client = adminClient();
  const cocoonSets = (await client.list(paths.cocoonSets())).items
    .filter((c) => c.metadata.name === name)
    .map((c) => `${c.metadata.namespace}/${c.metadata.name}`);
  const pods = (
    await client.list(paths.allPods(), { labelSelector: `${LABELS.name}=${name}` })
  ).items.map((p) => `${p.metadata.namespace}/${p.metadata.name}`);
  return { cocoonSets, pods };
}

test("preview refuses a namespace that is not a DNS label, a namespace that does not exist, and a blank image, naming the field, and nothing is created", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "e2e-refuse");
  const name = `refuse-${suffix()}`;
  const missing = `e2e-missing-${suffix()}`;
  const { stack } = await programStack(t, program, { namespace: { value: ns } });

  const cases: [string, { namespace?: string; image?: string }, RegExp][] = [
    [
      "a namespace that is not a DNS label",
      { namespace: "Bad_NS" },
      /\[namespace\] must be a DNS-1123 label/,
    ],
    [
      "a namespace that does not exist",
      { namespace: missing },
      new RegExp(`\\[namespace\\] namespace "${missing}" does not exist in the cluster`),
    ],
    [
      "a blank image",
      { image: " " },
      /\[spec\.agent\.image\] must be an image reference: printable ASCII without whitespace, control or non-ASCII characters \(got " "\)/,
    ],
  ];
  for (const [what, change, message] of cases) {
    await stack.setAllConfig({
      namespace: { value: change.namespace ?? ns },
      name: { value: name },
      replicas: { value: "3" },
      image: { value: change.image ?? "agents/coder:1" },
    });
    await assert.rejects(stack.preview(), message, what);
    assert.deepEqual(await fleetObjects(name), { cocoonSets: [], pods: [] }, what);
  }
  assert.equal(await client.getOrUndefined(paths.namespace(missing)), undefined);

  // The same stack previews cleanly once the input is good: the refusals came from the input.
  await stack.setAllConfig({
    namespace: { value: ns },
    name: { value: name },
    replicas: { value: "3" },
    image: { value: "agents/coder:1" },
  });
  const ok = await stack.preview();
  assert.equal(
    ok.changeSummary.create,
    5,
    "the stack, the Fleet, its claim guard, its CocoonSet and its slots",
  );
  assert.deepEqual(await fleetObjects(name), { cocoonSets: [], pods: [] });
});
