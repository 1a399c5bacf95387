/**
 * `cocoonset-dev toolchain check` against the tier's cluster, with its quickest program
 * (Pulumi YAML): the real `pulumi`, YAML host and pulumi-kubernetes provider create a
 * ConfigMap the test reads while it exists, and destroy removes it; a ConfigMap changed
 * behind the check's back makes it fail, naming the program and what it found, and its
 * namespace is deleted either way.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ToolchainCheckError, runToolchainCheck } from "../../cluster/toolchain-check.js";
import { paths, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, testKubeconfig } from "../support/cluster.js";

type ConfigMap = KubeObject & { data?: Record<string, string> };

/** The namespace is gone, or on its way (deleted, finalizing). */
async function namespaceDeleted(ns: string): Promise<boolean> {
  const got = await adminClient().getOrUndefined(paths.namespace(ns));
  return got === undefined || got.metadata.deletionTimestamp !== undefined;
}

test("the check's YAML program creates a real ConfigMap and destroy removes it", async () => {
  const client = adminClient();
  const seen: ConfigMap[] = [];
  const done = await runToolchainCheck({
    kubeconfig: testKubeconfig(),
    programs: ["yaml"],
    progress: () => {},
    afterUp: async (program, ns) => {
      assert.equal(program, "yaml");
      seen.push(await client.get<ConfigMap>(paths.configMap(ns, "settings")));
    },
  });
  assert.deepEqual(
    done.map((d) => d.program),
    ["yaml"],
  );
  const ns = done[0].namespace;
  assert.equal(seen.length, 1);
  assert.deepEqual(seen[0].data, { purpose: "yaml-smoke" });
  assert.equal(seen[0].metadata.namespace, ns);
  assert.equal(await client.getOrUndefined(paths.configMap(ns, "settings")), undefined);
  assert.ok(await namespaceDeleted(ns), `namespace ${ns} is deleted after the check`);
});

test("the check fails, saying what it found, when the object is not what the program made", async () => {
  const client = adminClient();
  let namespace = "";
  await assert.rejects(
    runToolchainCheck({
      kubeconfig: testKubeconfig(),
      programs: ["yaml"],
      progress: () => {},
      afterUp: async (_program, ns) => {
        namespace = ns;
        await client.patch(paths.configMap(ns, "settings"), { data: { purpose: "x" } });
      },
    }),
    (e: unknown) =>
      e instanceof ToolchainCheckError &&
      /yaml program: ConfigMap .*\/settings holds \{"purpose":"x"\}/.test(e.message),
  );
  assert.notEqual(namespace, "");
  assert.ok(await namespaceDeleted(namespace), `namespace ${namespace} is deleted after a failure`);
});
