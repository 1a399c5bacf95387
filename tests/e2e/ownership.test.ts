/**
 * Ownership by a token through the real pulumi CLI (file backends): an Operator and two Fleets
 * (one linked to the Operator, one not) go through the structural changes Pulumi allows, and
 * after each the fleets' pods, CocoonSets, the CRD and the controller are the same objects
 * (same uid) unless the step asked for a change:
 *
 * - an aliased rename of a Fleet goes through (it was refused as held by its own old name);
 * - a move under a parent without an alias is refused at preview and by `up --skip-preview`,
 *   naming the holder and saying to add an alias, and writes nothing (it deleted every
 *   CocoonSet in the cluster with the CRD, and the fleets);
 * - the same move with a parent alias keeps every object and token, though the refused `up`
 *   left the components' new URNs in the state (their children were new resources, refused);
 * - a move back out without an alias, adopting (`adoptCocoonSet`, `adoptCrd`, with
 *   `deleteBeforeReplace`), hands every object to the new resources, whose predecessors'
 *   deletes then touch nothing;
 * - `pulumi stack rename` and `pulumi state move` keep the token: the destination's `up`
 *   goes through, and moved back, the source's `up` keeps it and then scales it;
 * - refresh after a pod is replaced works with a kubeconfig from a file (it crashed);
 * - a capacity refusal under `up --skip-preview` writes nothing (the CocoonSet was written);
 * - a stack of the same name in another backend (a second Operator and the same Fleets) is
 *   refused at preview and at `up` before anything is written, and its destroy deletes nothing;
 * - a bad spec given as an Output is refused naming the field (the apiserver's words before);
 * - the stack destroys whole though one Fleet is not linked to the Operator (the CRD guard
 *   refused: the CocoonSet left was its own stack's).
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { CRD_NAME } from "../../engine/spec/index.js";
import { paths, type KubeObject } from "../../engine/kube/index.js";
import { OWNER_TOKEN } from "../../provider/dynamic/ownership.js";
import { adminClient, suffix, withNamespace } from "../support/cluster.js";
import { removeCrd } from "../support/crd.js";
import { podUids } from "../support/fleet-program.js";
import { programStack, pulumiCli, repoRoot } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "ownership");

/** The uid of every object a step must leave as it was. */
async function snapshot(
  ns: string,
  opNs: string,
  opName: string,
): Promise<Record<string, string | undefined>> {
  const client = adminClient();
  const uid = async (path: string) => (await client.getOrUndefined<KubeObject>(path))?.metadata.uid;
  const gone = async (path: string) =>
    (await client.getOrUndefined<KubeObject>(path))?.metadata.deletionTimestamp;
  return {
    crd: await uid(paths.crd(CRD_NAME)),
    crdDeleting: await gone(paths.crd(CRD_NAME)),
    operatorNamespace: await uid(paths.namespace(opNs)),
    controller: await uid(paths.deployment(opNs, `${opName}-controller`)),
    clusterRole: await uid(paths.clusterRole(`${opName}-cocoonset-controller`)),
    "coder-a": await uid(paths.cocoonSet(ns, "coder-a")),
    "coder-b": await uid(paths.cocoonSet(ns, "coder-b")),
    ...(await podUids(ns, "coder-a")),
    ...(await podUids(ns, "coder-b")),
  };
}

test("ownership survives an aliased rename, parent moves with and without an alias, adoption, stack rename, state moves both ways, refresh, --skip-preview and a second backend; the stack destroys whole", async (t) => {
  const client = adminClient();
  await removeCrd(); // the Operator installs it
  const ns = await withNamespace(t, "e2e-own");
  const opNs = `${ns}-op`;
  const opName = `own-${suffix()}`;
  t.after(async () => {
    // What a failed run may leave (a passing one leaves nothing).
    await client.delete(paths.namespace(opNs)).catch(() => undefined);
    await client.delete(paths.clusterRole(`${opName}-cocoonset-controller`)).catch(() => undefined);
    await client
      .delete(paths.clusterRoleBinding(`${opName}-cocoonset-controller`))
      .catch(() => undefined);
    await removeCrd();
  });
  const config = {
    namespace: { value: ns },
    operatorNamespace: { value: opNs },
    operatorName: { value: opName },
    withB: { value: "false" },
  };
  const s1 = await programStack(t, program, config);
  const { stack, env } = s1;
  const cli = async (args: string[]) => {
    const r = await pulumiCli([...args, "--stack", stack.name, "--non-interactive"], {
      cwd: program,
      env,
    });
    return { ...r, out: r.stdout + r.stderr };
  };
  const set = async (key: string, value: string | undefined) =>
    value === undefined ? stack.removeConfig(key) : stack.setConfig(key, { value });

  try {
    await stack.up();
    await set("withB", "true"); // a Fleet with no Operator needs the CRD in the cluster first
    await stack.up();
    const before = await snapshot(ns, opNs, opName);
    for (const [k, v] of Object.entries(before))
      if (k !== "crdDeleting") assert.ok(v, `${k} exists`);
    assert.deepEqual(
      Object.keys(before)
        .filter((k) => k.includes("-a-") || k.includes("-b-"))
        .sort(),
      ["coder-a-0", "coder-a-1", "coder-b-0", "coder-b-1"],
    );
    const tokenOf = async (path: string) =>
      (await client.get<KubeObject>(path)).metadata.annotations?.[OWNER_TOKEN];
    const crdToken = await tokenOf(paths.crd(CRD_NAME));
    assert.match(crdToken ?? "", /^[0-9a-f]{32}$/, "the CRD carries the Operator's token");
    assert.equal(await tokenOf(paths.namespace(opNs)), crdToken, "so does its namespace");
    const fleetToken = await tokenOf(paths.cocoonSet(ns, "coder-a"));
    assert.match(fleetToken ?? "", /^[0-9a-f]{32}$/);
    assert.notEqual(fleetToken, crdToken, "each guard draws its own token");
    const same = async (step: string) =>
      assert.deepEqual(
        await snapshot(ns, opNs, opName),
        before,
        `${step}: every object is the same one`,
      );

    // Finding 10: a bad spec given as an Output is refused naming the field, by the guard,
    // before the CocoonSet's apply fails in the apiserver's words.
    await set("replicasA", "-1");
    const badSpec = await stack.preview().then(
      () => "",
      (e: unknown) => String(e),
    );
    assert.match(badSpec, /\[spec\.agent\.replicas\] must be/);
    assert.doesNotMatch(badSpec, /typed patch|Retry #/);
    await set("replicasA", undefined);

    // Finding 7: an aliased rename is no longer refused as held by its own old name.
    await set("fleetA", "fa2");
    await set("fleetAOld", "fa");
    const renamed = await stack.up();
    assert.equal(renamed.summary.result, "succeeded");
    await same("aliased rename");
    await set("fleetAOld", undefined); // done: the state has the new name

    // Findings 1 and 2: a parent without an alias is refused before anything is written.
    await set("group", "grp");
    await assert.rejects(stack.preview(), /add an alias/, "preview refuses the move");
    const skipped = await cli(["up", "--yes", "--skip-preview"]);
    assert.notEqual(skipped.code, 0, "up --skip-preview refuses it too");
    assert.match(skipped.out, /held by .*add an alias|already installed by .*add an alias/s);
    await same("refused parent move");

    // The same move with the alias (`{ parent: pulumi.rootStackResource }`) keeps everything,
    // though the refused up left the components' new URNs in the state (the engine then
    // derives no alias for their children: the components pass theirs on).
    await set("aliasGroup", "");
    const aliased = await stack.up();
    assert.equal(aliased.summary.result, "succeeded");
    assert.equal(aliased.summary.resourceChanges?.create ?? 0, 0, "no resource is new");
    await same("parent move with an alias");
    assert.equal(await tokenOf(paths.cocoonSet(ns, "coder-a")), fleetToken, "the token is kept");

    // Back out of the parent without an alias, adopting (with deleteBeforeReplace): the new
    // resources take every object over, and the old ones' deletes leave them alone.
    await set("group", undefined);
    await set("aliasGroup", undefined);
    await set("adopt", "true");
    await set("deleteBeforeReplace", "true");
    const adopted = await stack.up();
    assert.equal(adopted.summary.result, "succeeded");
    assert.ok((adopted.summary.resourceChanges?.delete ?? 0) > 0, "the old resources went");
    await same("parent move with adoption");
    assert.notEqual(
      await tokenOf(paths.cocoonSet(ns, "coder-a")),
      fleetToken,
      "the adopting Fleet's token is on the CocoonSet",
    );
    // Adoption dropped, in the renamed stack's `up` below: nothing changes either way.
    await set("adopt", undefined);
    await set("deleteBeforeReplace", undefined);

    // Finding 7: a renamed stack keeps its tokens (its stamps named the old stack).
    const original = stack.name;
    const newName = `${original}-renamed`;
    const rename = await pulumiCli(
      ["stack", "rename", newName, "--stack", original, "--non-interactive"],
      { cwd: program, env },
    );
    assert.equal(rename.code, 0, rename.stderr);
    const upRenamed = await pulumiCli(
      ["up", "--yes", "--skip-preview", "--stack", newName, "--non-interactive"],
      { cwd: program, env },
    );
    assert.equal(upRenamed.code, 0, upRenamed.stdout + upRenamed.stderr);
    await same("stack rename, adoption dropped");
    const back = await pulumiCli(
      ["stack", "rename", original, "--stack", newName, "--non-interactive"],
      { cwd: program, env },
    );
    assert.equal(back.code, 0, back.stderr);

    // Finding 6: refresh after a pod is replaced, with the kubeconfig from a file (`up
    // --refresh` previews with the refresh too).
    await client.delete(paths.pod(ns, "coder-b-1"), { gracePeriodSeconds: 0 });
    const repaired = await stack.up();
    assert.equal(repaired.summary.result, "succeeded");
    const replaced = await snapshot(ns, opNs, opName);
    assert.notEqual(replaced["coder-b-1"], before["coder-b-1"], "up recreated the deleted pod");
    assert.ok(replaced["coder-b-1"]);
    for (const args of [
      ["refresh", "--yes"],
      ["up", "--refresh", "--yes"],
    ]) {
      const r = await cli(args);
      assert.equal(r.code, 0, `${args.join(" ")}: ${r.out}`);
      assert.doesNotMatch(r.out, /does not parse/);
    }
    before["coder-b-1"] = replaced["coder-b-1"];
    await same("refresh after a replaced pod");

    // Finding 5: a capacity refusal under --skip-preview writes nothing, the CocoonSet included.
    // More than any node has (cpu=1000 each), so the refusal does not depend on where pods landed.
    await set("cpuB", "2000");
    const refused = await cli(["up", "--yes", "--skip-preview"]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.out, /no node can hold|kubelet would refuse/);
    const specB = await client.get<{ spec: { agent: { resources?: unknown } } }>(
      paths.cocoonSet(ns, "coder-b"),
    );
    assert.equal(specB.spec.agent.resources, undefined, "the CocoonSet keeps its spec");
    await same("capacity refusal");
    await set("cpuB", undefined);

    // Findings 3 and 4: the same stack name in another backend (a second Operator and the
    // same Fleets) is refused, naming the holders, and writes and deletes nothing.
    const s2 = await programStack(t, program, config, { stackName: original });
    await s2.stack.setConfig("withB", { value: "true" });
    await assert.rejects(s2.stack.preview(), /held by the Fleet|already installed by the Operator/);
    await assert.rejects(s2.stack.up(), /held by the Fleet|already installed by the Operator/);
    await same("another backend refused");
    const exported = await s2.stack.exportStack();
    const types = (exported.deployment as { resources?: { type: string }[] }).resources ?? [];
    assert.deepEqual(
      types.filter((r) => r.type.startsWith("kubernetes:") && !r.type.includes("providers")),
      [],
      "the refused stack holds no Kubernetes object",
    );
    const destroyed2 = await s2.stack.destroy();
    assert.equal(destroyed2.summary.result, "succeeded");
    await same("another backend's destroy");

    // Finding 7: `pulumi state move` keeps the token: fleet B goes to another stack of the
    // backend, whose `up` takes it as its own, and comes back, where `up` manages it again.
    const dest = `${original}-b`;
    // Its backend is the scratch one; its config file is in the program's folder.
    t.after(() => rmSync(join(program, `Pulumi.${dest}.yaml`), { force: true }));
    const inDest = async (args: string[]) => {
      const r = await pulumiCli([...args, "--stack", dest, "--non-interactive"], {
        cwd: program,
        env,
      });
      assert.equal(r.code, 0, `${args.join(" ")}: ${r.stdout}${r.stderr}`);
      return r;
    };
    await inDest(["stack", "init"]);
    await inDest(["config", "set", "namespace", ns]);
    await inDest(["config", "set", "onlyB", "true"]);
    const fleetB = async (from: string) => {
      const exported = await pulumiCli(["stack", "export", "--stack", from], { cwd: program, env });
      const { deployment } = JSON.parse(exported.stdout) as {
        deployment: { resources: { urn: string }[] };
      };
      return deployment.resources.map((r) => r.urn).filter((u) => /::fb(-[a-z]+)?$/.test(u));
    };
    // The Fleet's URN alone, as docs/pulumi.md shows: Pulumi moves its children with it.
    const moveB = async (from: string, to: string) => {
      const urns = await fleetB(from);
      assert.equal(urns.length, 4, `the Fleet and its three children: ${urns.join(" ")}`);
      const fleet = urns.filter((u) => u.endsWith("::fb"));
      const r = await pulumiCli(
        ["state", "move", "--source", from, "--dest", to, "--yes", ...fleet],
        { cwd: program, env },
      );
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.deepEqual(await fleetB(from), [], `${from} holds no part of fleet B`);
      assert.equal((await fleetB(to)).length, 4, `${to} holds all of fleet B`);
    };
    await moveB(original, dest);
    await set("withB", "false");
    assert.equal((await stack.up()).summary.result, "succeeded");
    await inDest(["up", "--yes", "--skip-preview"]);
    await same("state move");
    await moveB(dest, original);
    await set("withB", "true");
    const movedBack = await stack.up();
    assert.equal(movedBack.summary.result, "succeeded");
    assert.equal(movedBack.summary.resourceChanges?.create ?? 0, 0, "no resource is new");
    await same("state move back");
    // What the destination keeps is its stack and the providers the move copied to it.
    const left = await pulumiCli(["stack", "export", "--stack", dest], { cwd: program, env });
    const leftTypes = (
      JSON.parse(left.stdout) as { deployment: { resources: { type: string }[] } }
    ).deployment.resources.map((r) => r.type);
    assert.deepEqual(
      leftTypes.filter((t) => t !== "pulumi:pulumi:Stack" && !t.startsWith("pulumi:providers:")),
      [],
    );
    await inDest(["stack", "rm", "--yes", "--force"]);
    // The moved-back fleet is managed as before: a scale-up adds a pod and changes no other.
    await set("replicasB", "2");
    assert.equal((await stack.up()).summary.result, "succeeded");
    const scaled = await podUids(ns, "coder-b");
    assert.ok(scaled["coder-b-2"], "up scaled the moved-back fleet");
    before["coder-b-2"] = scaled["coder-b-2"];
    await same("scale-up after the moves");

    // Finding 8: an Operator and a Fleet not linked to it (fleet A, linked, goes first) destroy
    // whole: the CRD guard waits for the CocoonSet of its own stack that the same destroy
    // deletes, where it refused.
    await set("withA", "false");
    assert.equal((await stack.up()).summary.result, "succeeded");
    assert.deepEqual(Object.keys(await podUids(ns, "coder-b")).sort(), [
      "coder-b-0",
      "coder-b-1",
      "coder-b-2",
    ]);
    const destroyed = await stack.destroy();
    assert.equal(destroyed.summary.result, "succeeded");
    assert.equal(await client.getOrUndefined(paths.crd(CRD_NAME)), undefined, "the CRD is gone");
    assert.equal(await client.getOrUndefined(paths.namespace(opNs)), undefined);
    assert.deepEqual((await client.list(paths.pods(ns))).items, [], "no pod is left");
  } catch (e) {
    await stack.destroy().catch((err: unknown) => console.error("cleanup destroy failed:", err));
    throw e;
  }
});
