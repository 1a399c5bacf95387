/**
 * The embedded cluster's supervisor: the restart delay doubles while a component keeps
 * dying, and one look at the cluster starts a dead component again the way it was started,
 * recording the new pid, and leaves alone a component that runs or never said how it started.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import {
  cannotRestart,
  isAlive,
  readState,
  startProcess,
  stopComponents,
  SUPERVISOR,
  writeState,
  type ClusterState,
} from "../../../cluster/local-cluster.js";
import { restartDelayMs, superviseOnce, type Memory } from "../../../cluster/supervisor.js";

test("the restart delay: none for the first death, then 1 s doubling up to 30 s", () => {
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 8, 20].map(restartDelayMs),
    [0, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000],
  );
});

test("one look restarts a dead component with its recorded arguments and records the new pid", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cocoonset-supervisor-"));
  mkdirSync(join(dir, "logs"));
  writeFileSync(join(dir, ".cocoonset-cluster"), "");
  const sleeper = startProcess(dir, "sleeper", "/bin/sleep", ["300"]);
  const other = startProcess(dir, "other", "/bin/sleep", ["300"]);
  const legacy = { ...startProcess(dir, "legacy", "/bin/sleep", ["300"]), args: undefined };
  const st: ClusterState = {
    version: 1,
    stateDir: dir,
    kubeconfig: join(dir, "kubeconfig"),
    server: "https://127.0.0.1:1",
    token: "t",
    startedAt: new Date().toISOString(),
    nodes: [],
    components: [sleeper, other, legacy, { ...sleeper, name: SUPERVISOR, pid: process.pid }],
  };
  writeState(dir, st);
  t.after(async () => {
    await stopComponents(readState(dir)?.components.filter((c) => c.name !== SUPERVISOR) ?? []);
    await stopComponents([sleeper, other, legacy]);
    rmSync(dir, { recursive: true, force: true });
  });

  process.kill(sleeper.pid, "SIGKILL");
  process.kill(legacy.pid, "SIGKILL");
  // Killed processes are this test's children: wait until they are gone (reaped).
  while (isAlive(sleeper) || isAlive(legacy)) await new Promise((r) => setImmediate(r));

  const lines: string[] = [];
  const memory = new Map<string, Memory>();
  assert.equal(
    superviseOnce(dir, process.pid, memory, 1_000, (l) => lines.push(l)),
    true,
  );
  const after = readState(dir) as ClusterState;
  const restarted = after.components.find((c) => c.name === "sleeper")!;
  assert.notEqual(restarted.pid, sleeper.pid, "a new process");
  assert.ok(isAlive(restarted), "it runs");
  assert.deepEqual([restarted.binary, restarted.args], ["/bin/sleep", ["300"]]);
  assert.equal(after.components.find((c) => c.name === "other")?.pid, other.pid, "left alone");
  assert.equal(
    after.components.find((c) => c.name === "legacy")?.pid,
    legacy.pid,
    "no recorded arguments: not restarted",
  );
  assert.deepEqual(lines, [
    `sleeper (pid ${sleeper.pid}) is not running (death 1 in a row)`,
    `restarted sleeper: pid ${restarted.pid}`,
  ]);

  // Dying again at once: the second restart waits 1 s.
  process.kill(restarted.pid, "SIGKILL");
  while (isAlive(restarted)) await new Promise((r) => setImmediate(r));
  superviseOnce(dir, process.pid, memory, 1_500, () => {});
  assert.equal(readState(dir)?.components.find((c) => c.name === "sleeper")?.pid, restarted.pid);
  superviseOnce(dir, process.pid, memory, 2_500, () => {});
  const third = readState(dir)?.components.find((c) => c.name === "sleeper");
  assert.notEqual(third?.pid, restarted.pid, "restarted once its delay was over");

  assert.equal(
    superviseOnce(dir, process.pid + 1, memory, 3_000, () => {}),
    false,
    "another supervisor is recorded: this one stops",
  );
});

test("a recorded cluster is restarted in place unless it cannot be: no recorded arguments, or etcd's data or the certificates gone", () => {
  const dir = mkdtempSync(join(tmpdir(), "cocoonset-restartable-"));
  try {
    for (const d of ["etcd/member", "pki", "logs"]) mkdirSync(join(dir, d), { recursive: true });
    for (const f of ["pki/apiserver.crt", "pki/tokens.csv", "kubeconfig"])
      writeFileSync(join(dir, f), "");
    const component = (name: string, args?: string[]) => ({
      name,
      pid: 1,
      binary: "/bin/true",
      log: join(dir, "logs", `${name}.log`),
      startTicks: "0",
      args,
    });
    const st = (components: ReturnType<typeof component>[]): ClusterState => ({
      version: 1,
      stateDir: dir,
      kubeconfig: join(dir, "kubeconfig"),
      server: "https://127.0.0.1:1",
      token: "t",
      startedAt: "",
      nodes: [],
      components,
    });
    assert.equal(cannotRestart(st([component("etcd", ["--x=1"])])), undefined);
    assert.match(
      cannotRestart(st([component("etcd", ["--x=1"]), component("kwok")])) ?? "",
      /started by an earlier version, which did not record how to start kwok again/,
    );
    rmSync(join(dir, "etcd", "member"), { recursive: true });
    assert.match(
      cannotRestart(st([component("etcd", [])])) ?? "",
      /etcd's data folder .*member is missing/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
