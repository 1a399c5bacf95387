/**
 * A Pulumi YAML program (`runtime: yaml`) through the real pulumi CLI, the toolchain's
 * `pulumi-language-yaml` and pulumi-kubernetes provider, against the embedded cluster:
 * `up` creates a ConfigMap, `destroy` removes it.
 */
import assert from "node:assert/strict";
import { dirname } from "node:path";
import { test } from "node:test";
import { binDir, requireBinary } from "../../cluster/toolchain-pins.js";
import { paths } from "../../engine/kube/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import { pulumiCli, scratchBackend, scratchProject } from "../support/pulumi.js";

const program = `name: yaml-smoke
runtime: yaml
description: one ConfigMap, written in Pulumi YAML
config:
  namespace:
    type: string
resources:
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: settings
        namespace: \${namespace}
        labels:
          app.kubernetes.io/managed-by: pulumi
      data:
        purpose: yaml-smoke
outputs:
  uid: \${settings.metadata.uid}
`;

test("a Pulumi YAML program creates a ConfigMap on the embedded cluster and destroy removes it", async (t) => {
  // The language host is the toolchain's, in the folder pulumi finds its plugins in.
  assert.equal(dirname(requireBinary("pulumi-language-yaml")), binDir());
  const ns = await withNamespace(t, "yaml");
  const client = adminClient();
  const dir = scratchProject(t, { "Pulumi.yaml": program }, { linkModules: false });
  const env = scratchBackend(t);
  const pulumi = async (...args: string[]) => {
    const r = await pulumiCli(args, { cwd: dir, env });
    assert.equal(r.code, 0, `pulumi ${args.join(" ")}:\n${r.stdout}\n${r.stderr}`);
    return r;
  };

  await pulumi("stack", "init", "dev");
  await pulumi("config", "set", "namespace", ns);
  await pulumi("up", "--yes", "--skip-preview");
  const cm = await client.get<{
    metadata: { uid: string; labels?: Record<string, string> };
    data: Record<string, string>;
  }>(paths.configMap(ns, "settings"));
  assert.deepEqual(cm.data, { purpose: "yaml-smoke" });
  assert.equal(cm.metadata.labels?.["app.kubernetes.io/managed-by"], "pulumi");
  const outputs = JSON.parse((await pulumi("stack", "output", "--json")).stdout) as {
    uid: string;
  };
  assert.equal(outputs.uid, cm.metadata.uid, "the program's output is the created object's uid");

  await pulumi("destroy", "--yes", "--skip-preview");
  assert.equal(await client.getOrUndefined(paths.configMap(ns, "settings")), undefined);
});
