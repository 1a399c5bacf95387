/**
 * The embedded cluster's own lifecycle, through the CLI a user runs: `up` returns a ready
 * cluster and leaves it running after the command exits, a second `up` reports it instead
 * of starting another, `status` and `env` describe it (with its OCI registry), `down` stops
 * every process it started and removes its state.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:net";
import { test } from "node:test";
import {
  isAlive,
  readState,
  type ClusterState,
  type ComponentRecord,
} from "../../cluster/local-cluster.js";
import { KubeClient, paths } from "../../engine/kube/index.js";
import { repoRoot } from "../support/pulumi.js";

const cli = join(repoRoot, "dist", "cluster", "dev-cli.js");

/** True when something accepts TCP connections at `host:port`. */
function listening(address: string): Promise<boolean> {
  const [host, port] = address.split(":");
  return new Promise((resolve) => {
    const s = connect({ host, port: Number(port) });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

function cocoonset(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [cli, ...args], { encoding: "utf8", timeout: 180_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test("cluster up/status/env/down manage one private cluster by pid and leave nothing behind", async (t) => {
  const stateDir = mkdtempSync(join(tmpdir(), "cocoonset-lifecycle-"));
  t.after(() => {
    cocoonset("cluster", "down", "--state-dir", stateDir);
    rmSync(stateDir, { recursive: true, force: true });
  });

  const up = cocoonset("cluster", "up", "--state-dir", stateDir, "--nodes", "1", "--json");
  assert.equal(up.status, 0, up.stderr);
  const info = JSON.parse(up.stdout) as {
    kubeconfig: string;
    server: string;
    registry: string;
    reused: boolean;
  };
  assert.equal(info.reused, false);
  assert.match(info.server, /^https:\/\/127\.0\.0\.1:\d+$/, "loopback only");
  assert.match(info.registry, /^127\.0\.0\.1:\d+$/, "the registry is on loopback too");
  const v2 = await fetch(`http://${info.registry}/v2/`);
  assert.equal(v2.status, 200, "the registry answers");
  await v2.text();

  // The CLI has exited; the cluster keeps running and answers with its admin kubeconfig.
  const state = readState(stateDir) as ClusterState;
  assert.deepEqual(
    state.components.map((c) => c.name),
    [
      "registry",
      "etcd",
      "kube-apiserver",
      "kube-controller-manager",
      "kube-scheduler",
      "kwok",
      "pod-finaliser",
      "node-agent",
      "supervisor",
    ],
  );
  assert.ok(state.components.every(isAlive), "every component still runs");
  const client = new KubeClient({ kubeconfig: info.kubeconfig });
  try {
    const nodes = await client.list(paths.nodes());
    assert.deepEqual(
      nodes.items.map((n) => [n.metadata.name, n.metadata.labels?.["cocoonstack.io/pool"]]),
      [["kwok-node-0", "default"]],
    );
    assert.ok(await client.get(paths.namespace("default")));
  } finally {
    client.close();
  }

  const again = cocoonset("cluster", "up", "--state-dir", stateDir, "--json");
  assert.equal(again.status, 0, again.stderr);
  assert.equal(
    (JSON.parse(again.stdout) as { reused: boolean }).reused,
    true,
    "a second up reuses",
  );
  assert.deepEqual(
    readState(stateDir)?.components.map((c) => c.pid),
    state.components.map((c) => c.pid),
    "no second set of processes",
  );

  const status = cocoonset("cluster", "status", "--state-dir", stateDir, "--json");
  assert.equal(status.status, 0);
  const st = JSON.parse(status.stdout) as { running: boolean; healthy: boolean; registry: string };
  assert.equal(st.running && st.healthy, true);
  assert.equal(st.registry, info.registry);
  const text = cocoonset("cluster", "status", "--state-dir", stateDir);
  assert.match(text.stdout, new RegExp(`^registry: ${info.registry}$`, "m"));

  const env = cocoonset("cluster", "env", "--state-dir", stateDir);
  assert.equal(
    env.stdout.trim(),
    `export KUBECONFIG=${info.kubeconfig}\nexport COCOONSET_REGISTRY=${info.registry}`,
  );
  assert.match(readFileSync(info.kubeconfig, "utf8"), /token:/);

  const down = cocoonset("cluster", "down", "--state-dir", stateDir);
  assert.equal(down.status, 0, down.stderr);
  for (const c of state.components)
    assert.equal(isAlive(c), false, `${c.name} (pid ${c.pid}) stopped`);
  assert.equal(existsSync(stateDir), false, "the state directory is removed");
  assert.equal(await listening(info.registry), false, "the registry is stopped");

  const after = cocoonset("cluster", "status", "--state-dir", stateDir);
  assert.notEqual(after.status, 0, "status of a stopped cluster exits non-zero");
  const envAfter = cocoonset("cluster", "env", "--state-dir", stateDir);
  assert.notEqual(envAfter.status, 0);
  assert.match(envAfter.stderr, /no cluster in .*: run `cocoonset-dev cluster up`/);
});

test("a component that dies on start is reported with its log tail, and nothing it started keeps running", async (t) => {
  const stateDir = mkdtempSync(join(tmpdir(), "cocoonset-broken-"));
  t.after(() => {
    cocoonset("cluster", "down", "--state-dir", stateDir);
    rmSync(stateDir, { recursive: true, force: true });
  });

  const up = cocoonset(
    "cluster",
    "up",
    "--state-dir",
    stateDir,
    "--apiserver-arg=--no-such-flag=1",
  );
  assert.notEqual(up.status, 0);
  assert.match(
    up.stderr,
    /kube-apiserver exited during start-up; last lines of .*kube-apiserver\.log/,
  );
  assert.match(up.stderr, /unknown flag: --no-such-flag/, "the log tail says why");

  // Nothing keeps running: no process still has this state directory on its command line.
  const leftovers = readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(stateDir);
      } catch {
        return false;
      }
    });
  assert.deepEqual(leftovers, [], "etcd was stopped again");
  // The registry's command line names only its port: it said which in its log.
  const port = /serving on port (\d+)/.exec(
    readFileSync(join(stateDir, "logs", "registry.log"), "utf8"),
  )?.[1];
  assert.ok(port, "the registry had started");
  assert.equal(await listening(`127.0.0.1:${port}`), false, "the registry was stopped again");
  assert.equal(readState(stateDir), undefined, "no state file claims a running cluster");
  assert.ok(
    existsSync(join(stateDir, "logs", "kube-apiserver.log")),
    "the logs stay for the report",
  );
});

/** The recorded component `name`, as the state file says now. */
function recorded(stateDir: string, name: string): ComponentRecord {
  const c = readState(stateDir)?.components.find((x) => x.name === name);
  assert.ok(c, `${name} is recorded`);
  return c;
}

/**
 * Waits until `check` holds, looking again each time the state file or a log may have
 * changed (every 200 ms), at most `timeoutMs`: the supervisor and `up` report through files.
 */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test("a killed component is restarted on its port, and up after a crash restarts what stopped and keeps etcd's data; only --reset or unreadable etcd data starts over", async (t) => {
  const stateDir = mkdtempSync(join(tmpdir(), "cocoonset-restart-"));
  t.after(() => {
    cocoonset("cluster", "down", "--state-dir", stateDir);
    rmSync(stateDir, { recursive: true, force: true });
  });
  const up = cocoonset("cluster", "up", "--state-dir", stateDir, "--nodes", "1", "--json");
  assert.equal(up.status, 0, up.stderr);
  const info = JSON.parse(up.stdout) as { kubeconfig: string; server: string; registry: string };
  const client = new KubeClient({ kubeconfig: info.kubeconfig });
  t.after(() => client.close());
  await client.create(paths.namespaces(), {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: "kept" },
  });
  await client.create(paths.configMaps("kept"), {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "data" },
    data: { k: "v" },
  });

  // kill -9 of the registry: the supervisor starts it again on the same address.
  const registry = recorded(stateDir, "registry");
  process.kill(registry.pid, "SIGKILL");
  await until("the registry to be restarted", async () => {
    const now = recorded(stateDir, "registry");
    return now.pid !== registry.pid && isAlive(now) && (await listening(info.registry));
  });
  const v2 = await fetch(`http://${info.registry}/v2/`);
  assert.equal(v2.status, 200, "the restarted registry answers on the recorded address");
  await v2.text();
  assert.match(
    readFileSync(join(stateDir, "logs", "supervisor.log"), "utf8"),
    new RegExp(`registry \\(pid ${registry.pid}\\) is not running`),
  );

  // A crash of the supervisor and of etcd, the registry and the scheduler with it: up
  // restarts them, on the same ports, and every object is still there.
  const before = readState(stateDir) as ClusterState;
  for (const name of ["supervisor", "etcd", "registry", "kube-scheduler"])
    process.kill(recorded(stateDir, name).pid, "SIGKILL");
  await until("the killed processes to be gone", () =>
    Promise.resolve(
      ["supervisor", "etcd", "registry", "kube-scheduler"].every(
        (n) => !isAlive(before.components.find((c) => c.name === n)!),
      ),
    ),
  );
  const again = cocoonset("cluster", "up", "--state-dir", stateDir, "--json");
  assert.equal(again.status, 0, again.stderr);
  assert.doesNotMatch(again.stderr, /cleaning it up|starting a new/);
  const restarted = JSON.parse(again.stdout) as {
    server: string;
    registry: string;
    reused: boolean;
    restarted: string[];
  };
  assert.deepEqual(restarted.restarted, ["registry", "etcd", "kube-scheduler"]);
  assert.equal(restarted.reused, true);
  assert.equal(restarted.server, info.server, "the same apiserver port");
  assert.equal(restarted.registry, info.registry, "the same registry address");
  const after = readState(stateDir) as ClusterState;
  assert.ok(after.components.every(isAlive), "every component runs, the supervisor too");
  assert.equal(
    after.components.find((c) => c.name === "kube-apiserver")?.pid,
    before.components.find((c) => c.name === "kube-apiserver")?.pid,
    "what still ran was left alone",
  );
  const cm = await client.get<{ data?: Record<string, string> }>(paths.configMap("kept", "data"));
  assert.deepEqual(cm.data, { k: "v" }, "etcd's data was kept");

  // Asked for: --reset starts a new cluster, without the old data.
  const reset = cocoonset("cluster", "up", "--state-dir", stateDir, "--reset", "--json");
  assert.equal(reset.status, 0, reset.stderr);
  assert.match(reset.stderr, /--reset: stopping the cluster .* and deleting its data/);
  const fresh = JSON.parse(reset.stdout) as { kubeconfig: string; reused: boolean };
  assert.equal(fresh.reused, false);
  const freshClient = new KubeClient({ kubeconfig: fresh.kubeconfig });
  try {
    assert.equal(
      await freshClient.getOrUndefined(paths.namespace("kept")),
      undefined,
      "a new cluster",
    );
  } finally {
    freshClient.close();
  }
  for (const c of after.components) assert.equal(isAlive(c), false, `${c.name} was stopped`);

  // Every process killed and etcd's database unreadable: the one case up starts over by itself.
  const crashed = readState(stateDir) as ClusterState;
  for (const c of [...crashed.components].reverse()) process.kill(c.pid, "SIGKILL");
  await until("every process to be gone", () =>
    Promise.resolve(crashed.components.every((c) => !isAlive(c))),
  );
  writeFileSync(join(stateDir, "etcd", "member", "snap", "db"), "not a bbolt database");
  const corrupt = cocoonset("cluster", "up", "--state-dir", stateDir, "--json");
  assert.equal(corrupt.status, 0, corrupt.stderr);
  assert.match(
    corrupt.stderr,
    /etcd's data in .*etcd cannot be used \(etcd exited during start-up; .*\n[\s\S]*starting a new cluster: its namespaces and objects are lost/,
  );
  assert.equal((JSON.parse(corrupt.stdout) as { reused: boolean }).reused, false);
});
