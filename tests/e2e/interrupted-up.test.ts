/**
 * Recovering an interrupted deploy, through the real pulumi CLI: `pulumi up` of a 60-slot
 * fleet is killed (SIGKILL, with the plugins it started) in the middle of the fan-out, and
 * the steps of docs/pulumi.md ("Recovering an interrupted deploy") bring the stack back:
 * exactly the desired pods, no pending operation left in the state, and a preview that
 * changes nothing.
 */
import { spawn } from "node:child_process";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { requireBinary } from "../../cluster/toolchain-pins.js";
import { ensureCrd } from "../../engine/execute/install-crd.js";
import { LABELS } from "../../engine/spec/index.js";
import { paths, waitForList, type KubeObject } from "../../engine/kube/index.js";
import { adminClient, withNamespace } from "../support/cluster.js";
import { programStack, repoRoot } from "../support/pulumi.js";

const program = join(repoRoot, "tests", "e2e", "programs", "fleet");
const REPLICAS = 60;

/** Runs the pulumi CLI in the program's folder as a user would; resolves with its output. */
function pulumiCli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(requireBinary("pulumi"), args, {
      cwd: program,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
  });
}

/** The stack's pending operations, from `pulumi stack export`. */
function pendingOperations(exported: { deployment: unknown }): { type: string; urn: string }[] {
  const d = exported.deployment as {
    pending_operations?: { type: string; resource: { urn: string } }[];
  };
  return (d.pending_operations ?? []).map((p) => ({ type: p.type, urn: p.resource.urn }));
}

/** The variable that marks the environment of the `pulumi up` this test kills. */
const KILL_MARK = "COCOONSET_E2E_KILLED_UP";

/**
 * Kills every process whose environment holds `marker` (`NAME=value`): the plugins the killed
 * `pulumi up` started run in process groups of their own, so the group kill does not reach
 * them, and without this they outlive the test.
 */
function killMarked(marker: string): void {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let environ: string;
    try {
      environ = readFileSync(`/proc/${entry}/environ`, "latin1");
    } catch {
      continue; // gone already, or not ours to read
    }
    if (!environ.split("\0").includes(marker)) continue;
    try {
      process.kill(Number(entry), "SIGKILL");
    } catch {
      // exited between the read and the kill
    }
  }
}

const live = (items: KubeObject[]) => items.filter((p) => !p.metadata.deletionTimestamp);

test("a pulumi up killed mid fan-out recovers with the documented steps: exactly the desired pods, no pending operations, a no-change preview", async (t) => {
  const client = adminClient();
  await ensureCrd(client);
  const ns = await withNamespace(t, "e2e-killed");
  const { stack, env } = await programStack(t, program, {
    namespace: { value: ns },
    replicas: { value: String(REPLICAS) },
  });
  const selector = `${LABELS.name}=fleet`;

  try {
    // `pulumi up` in a process group of its own, killed with the group as when a CI job or a
    // terminal is killed; its plugins, in groups of their own, are found by a marker in the
    // environment they inherit and killed too.
    const up = spawn(
      requireBinary("pulumi"),
      ["up", "--yes", "--skip-preview", "--non-interactive", "--stack", stack.name],
      {
        cwd: program,
        env: { ...process.env, ...env, [KILL_MARK]: ns },
        stdio: "ignore",
        detached: true,
      },
    );
    const exited = new Promise<void>((resolve) => up.on("exit", () => resolve()));
    const atKill = await waitForList(client, paths.pods(ns), (items) => items.length >= 12, {
      labelSelector: selector,
      timeoutMs: 300_000,
      description: "the fan-out to be under way",
    });
    process.kill(-(up.pid ?? 0), "SIGKILL");
    killMarked(`${KILL_MARK}=${ns}`);
    await exited;
    assert.ok(
      atKill.length < REPLICAS + 1,
      `the kill landed mid fan-out (${atKill.length} of ${REPLICAS + 1} pods)`,
    );

    // What the user meets: the stack is locked (`preview` takes no lock; `up` does), and the
    // slots' create is pending.
    const locked = await pulumiCli(
      ["up", "--yes", "--skip-preview", "--non-interactive", "--stack", stack.name],
      env,
    );
    assert.notEqual(locked.code, 0);
    assert.match(locked.output, /the stack is currently locked by 1 lock\(s\).*`pulumi cancel`/s);

    // Step 1: pulumi cancel.
    const cancel = await pulumiCli(["cancel", "--yes", "--stack", stack.name], env);
    assert.equal(cancel.code, 0, cancel.output);
    const pending = pendingOperations(await stack.exportStack());
    assert.deepEqual(
      pending.map((p) => [p.type, p.urn.split("::").pop()]),
      [["creating", "fleet-slots"]],
      "the interrupted create of the slots is pending",
    );

    // Step 2: pulumi refresh --clear-pending-creates.
    const refresh = await pulumiCli(
      ["refresh", "--clear-pending-creates", "--yes", "--non-interactive", "--stack", stack.name],
      env,
    );
    assert.equal(refresh.code, 0, refresh.output);
    assert.deepEqual(pendingOperations(await stack.exportStack()), [], "no pending operation");

    // Step 3: pulumi up.
    const again = await pulumiCli(
      ["up", "--yes", "--skip-preview", "--non-interactive", "--stack", stack.name],
      env,
    );
    assert.equal(again.code, 0, again.output);

    const pods = live((await client.list(paths.pods(ns), { labelSelector: selector })).items);
    assert.deepEqual(
      pods.map((p) => p.metadata.name).sort(),
      Array.from({ length: REPLICAS + 1 }, (_, s) => `fleet-${s}`).sort(),
      "exactly the desired pods",
    );
    assert.deepEqual(pendingOperations(await stack.exportStack()), []);
    const preview = await stack.preview();
    assert.deepEqual(
      Object.keys(preview.changeSummary).filter((op) => op !== "same"),
      [],
      "a preview changes nothing",
    );
  } catch (e) {
    await pulumiCli(["cancel", "--yes", "--stack", stack.name], env);
    await stack.destroy().catch(() => undefined);
    throw e;
  }
  const destroyed = await stack.destroy();
  assert.equal(destroyed.summary.result, "succeeded");
  assert.deepEqual(live((await client.list(paths.pods(ns))).items), [], "no pod is left");
});
