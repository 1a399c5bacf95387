/**
 * The Fleet's `registryCredentials` through the real pulumi CLI (file backend): a Fleet
 * whose registry is a real CNCF Distribution asking for credentials (token auth over TLS)
 * and whose password comes from the program's environment (a secret the stack's config does not
 * know, so Pulumi masks it nowhere). The machine has no Docker login (the stack's HOME is a
 * scratch folder, no DOCKER_CONFIG), so only those credentials can open the registry. After
 * `up --debug`, which prints every resource's outputs, no output printed the password: the
 * slots resource keeps the credentials in a Secret of the fleet's namespace, not among its
 * outputs; the state keeps the input encrypted and no backend file holds the password;
 * `destroy` drops the fleet's `:hibernate` tag with them (`always` keeps `:latest`) and
 * deletes the Secret.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { dockerKeychain } from "../../engine/registry/keychain.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import { startAuthRegistry } from "../support/auth-registry.js";
import { paths } from "../../engine/kube/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import { Cleanup } from "../support/controller-process.js";
import { fleetProgram, SLOTS_TYPE } from "../support/fleet-program.js";
import { pushTag } from "../support/lifecycle.js";
import { programStack } from "../support/pulumi.js";

const SECRET_SIG = "4dabf18193072939515e22adb298388d";

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

test("a Fleet's registryCredentials from the environment: printed by no output of up --debug, encrypted in the state, and destroy drops the snapshot tag with them", async (t) => {
  const c = new Cleanup(t);
  await ensureCrd(adminClient());
  const reg = await startAuthRegistry(c, "token");
  const ns = await withNamespace(t, "e2e-regcred");
  const { stack, backend } = await programStack(t, fleetProgram, {
    namespace: { value: ns },
    replicas: { value: "0" },
    registry: { value: reg.address },
    registryCa: { value: reg.caPem },
    registryUsername: { value: reg.username },
  });
  (stack.workspace as { envVars: Record<string, string> }).envVars.E2E_REGISTRY_PASSWORD =
    reg.password;
  const b64 = Buffer.from(`${reg.username}:${reg.password}`).toString("base64");
  const up = await stack.up({ debug: true, onOutput: () => undefined });
  assert.match(up.stdout, /RegisterResource RPC finished: resource:fleet-slots/);
  assert.ok(!up.stdout.includes(reg.password), "no resource's outputs print the password");
  const secret = await adminClient().get<{ data: Record<string, string> }>(
    paths.secret(ns, "fleet-registry-credentials"),
  );
  assert.ok(secret.data.credentials, "the Secret holds the credentials for destroy");

  const vm = `vk-${ns}-fleet-0`;
  const good = new OciRegistry(reg.address, {
    ca: reg.caPem,
    keychain: dockerKeychain({
      env: { DOCKER_CONFIG: reg.dockerConfig({ username: reg.username, password: reg.password }) },
    }),
  });
  await pushTag(good, vm, "hibernate");
  await pushTag(good, vm, "latest");

  const stackFile = files(backend).find(
    (f) => f.endsWith(".json") && f.includes(join(".pulumi", "stacks")),
  );
  assert.ok(stackFile, "the backend holds the stack's state file");
  const state = JSON.parse(readFileSync(stackFile, "utf8")) as {
    checkpoint: {
      latest: {
        resources: {
          type: string;
          inputs: Record<string, unknown>;
          outputs: Record<string, unknown>;
        }[];
      };
    };
  };
  const slots = state.checkpoint.latest.resources.find((r) => r.type === SLOTS_TYPE);
  assert.ok(slots, "the slots resource is in the state");
  const o = slots.inputs.registryCredentials as Record<string, unknown>;
  assert.ok(o && SECRET_SIG in o && typeof o.ciphertext === "string", "inputs: encrypted");
  assert.equal(slots.outputs.registryCredentials, undefined, "outputs: none");
  assert.equal(slots.outputs.registryCredentialsSecret, "fleet-registry-credentials");
  for (const f of files(backend)) {
    const text = readFileSync(f, "utf8");
    assert.ok(!text.includes(reg.password) && !text.includes(b64), `no credential in ${f}`);
  }

  const printed: string[] = [];
  await stack.destroy({ onOutput: (s) => printed.push(s) });
  // snapshotPolicy `always` (the default) keeps `<vm>:latest`; `:hibernate` always goes.
  assert.deepEqual(await good.listTags(vm), ["latest"], "destroy dropped the hibernate tag");
  const out = printed.join("");
  assert.match(out, /snapshot tags dropped: 1, left in the registry: 0/);
  assert.ok(!out.includes(reg.password) && !out.includes(b64), "no credential printed");
  assert.equal(
    await adminClient().getOrUndefined(paths.secret(ns, "fleet-registry-credentials")),
    undefined,
    "destroy deleted the Secret",
  );
});
