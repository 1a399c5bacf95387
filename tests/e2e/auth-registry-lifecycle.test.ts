/**
 * A Fleet's whole snapshot lifecycle through a registry that asks for credentials over TLS:
 * CNCF Distribution with htpasswd auth and a CA made for the run, the node-agent simulator
 * started as its own process with that registry's CA file and a Docker config (the flags the
 * controller takes), and the Fleet with `registryCredentials` from a secret config, through
 * the real pulumi CLI. Suspend pushes every VM's `:hibernate` into that registry, the wake
 * restores from it, and destroy drops the tags; the password shows in no log, event, status
 * or output.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { NODE_AGENT_LABEL } from "../../cluster/node-agent.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { paths } from "../../engine/kube/index.js";
import { dockerKeychain } from "../../engine/registry/keychain.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { ANNOTATIONS, SNAPSHOT_TAGS, type CocoonSet } from "../../engine/spec/index.js";
import { startAuthRegistry } from "../support/auth-registry.js";
import { adminClient, suffix, testKubeconfig } from "../support/cluster.js";
import { Cleanup, controllerNamespace } from "../support/controller-process.js";
import { fleetProgram } from "../support/fleet-program.js";
import { vmReady, waitForPods } from "../support/lifecycle.js";
import { programStack } from "../support/pulumi.js";

const NODE_AGENT_MAIN = fileURLToPath(new URL("../../cluster/node-agent-main.js", import.meta.url));

test("suspend, wake and destroy of a Fleet through a registry with htpasswd auth over TLS: the tags come and go there, and the password is nowhere", async (t) => {
  const c = new Cleanup(t);
  const client = adminClient();
  await ensureCrd(client);
  const reg = await startAuthRegistry(c, "htpasswd");
  const dockerConfig = reg.dockerConfig({ username: reg.username, password: reg.password });

  // A simulator of its own for this test's namespace, reaching the registry as the
  // controller would; the cluster's simulator leaves the namespace alone (another opt-in).
  const optIn = `auth-${suffix()}`;
  const agentLog: string[] = [];
  const agent = spawn(
    process.execPath,
    [
      NODE_AGENT_MAIN,
      "--kubeconfig",
      testKubeconfig(),
      "--registry",
      reg.address,
      "--registry-ca-file",
      reg.caFile,
      "--docker-config",
      dockerConfig,
      "--opt-in",
      optIn,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  c.defer("stop the node agent", async () => {
    if (agent.exitCode !== null) return;
    agent.kill("SIGTERM");
    await once(agent, "exit");
  });
  const synced = new Promise<void>((resolve, reject) => {
    for (const stream of [agent.stdout, agent.stderr]) {
      createInterface({ input: stream }).on("line", (line) => {
        agentLog.push(line);
        if (line.includes("node-agent: synced")) resolve();
      });
    }
    agent.on("exit", (code) =>
      reject(new Error(`the node agent exited (${code}): ${agentLog.join("\n")}`)),
    );
  });
  await synced;

  const ns = await controllerNamespace(c, "e2e-authreg");
  await client.patch(paths.namespace(ns), { metadata: { labels: { [NODE_AGENT_LABEL]: optIn } } });
  const name = "fleet";
  const vms = [0, 1].map((s) => `vk-${ns}-${name}-${s}`);
  const { stack } = await programStack(t, fleetProgram, {
    namespace: { value: ns },
    replicas: { value: "1" },
    registry: { value: reg.address },
    registryCa: { value: reg.caPem },
    registryUsername: { value: reg.username },
    registryPassword: { value: reg.password, secret: true },
  });
  const printed: string[] = [];
  const onOutput = (line: string) => printed.push(line);
  let up = false;
  c.defer("destroy the stack", async () => {
    if (up) await stack.destroy({ onOutput }).catch(() => undefined);
  });

  up = true;
  await stack.up({ onOutput });
  await waitForPods(ns, name, 2, vmReady, "both VMs booted by this test's node agent");

  const reader = new OciRegistry(reg.address, {
    ca: reg.caPem,
    keychain: dockerKeychain({ env: { DOCKER_CONFIG: dockerConfig } }),
  });
  const phase = async () =>
    (await client.get<CocoonSet>(paths.cocoonSet(ns, name))).status?.phase ?? "";

  await stack.setConfig("suspend", { value: "true" });
  const suspended = await stack.up({ onOutput });
  assert.equal(suspended.summary.result, "succeeded");
  assert.equal(await phase(), "Suspended");
  for (const vm of vms) {
    assert.ok((await reader.listTags(vm)).includes(SNAPSHOT_TAGS.hibernate), `${vm}:hibernate`);
  }
  const status = JSON.stringify((await client.get<CocoonSet>(paths.cocoonSet(ns, name))).status);

  await stack.setConfig("suspend", { value: "false" });
  const woken = await stack.up({ onOutput });
  assert.equal(woken.summary.result, "succeeded");
  const pods = await waitForPods(
    ns,
    name,
    2,
    (p) => vmReady(p) && p.metadata?.annotations?.[ANNOTATIONS.hibernate] === undefined,
    "both VMs up again",
  );
  for (const vm of vms) {
    assert.ok(
      agentLog.some(
        (l) => l.includes(`${vm} ready`) && l.includes(`restored from ${vm}:hibernate`),
      ),
      `${vm} was restored from the registry: ${agentLog.join("\n")}`,
    );
  }
  const outputs = JSON.stringify(woken.outputs);

  await stack.destroy({ onOutput });
  up = false;
  for (const vm of vms) {
    assert.ok(
      !(await reader.listTags(vm)).includes(SNAPSHOT_TAGS.hibernate),
      `${vm}:hibernate dropped by destroy`,
    );
  }
  assert.equal(pods.length, 2);

  const events = (await client.list(paths.events(ns))).items.map((e) => JSON.stringify(e));
  for (const [where, text] of [
    ["the node agent's log", agentLog.join("\n")],
    ["pulumi's output", printed.join("")],
    ["the events", events.join("\n")],
    ["the status", status],
    ["the stack's outputs", outputs],
  ] as const) {
    assert.ok(!text.includes(reg.password), `the password is not in ${where}`);
  }
  assert.ok(printed.join("").length > 0 && events.length > 0, "there was something to look at");
});
