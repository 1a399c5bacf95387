/**
 * `cocoonset-dev demo` (`npm run demo`): the whole product on one machine, step by step — the
 * embedded cluster, the controller, `pulumi up` of the minimal example, a scale-up preview
 * with its slot lines, a sub-agent failure the controller rebuilds, and a destroy that
 * leaves nothing behind. Everything it starts is stopped, even on Ctrl-C.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { clusterDown, clusterUp } from "../local-cluster.js";
import { pulumiEnv } from "../pulumi.js";
import { ensureToolchain } from "../toolchain.js";
import { agentPodName, isReady } from "../../engine/pods/index.js";
import type { Pod } from "../../engine/spec/index.js";
import {
  KubeClient,
  paths,
  waitForList,
  waitForObject,
  type KubeObject,
} from "../../engine/kube/index.js";
import { ownerReferenceForPod } from "../../engine/release/index.js";
import { action, CliError } from "../../cli/common.js";

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const NAMESPACE = "agents";
const FLEET = "coder";

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** Runs one titled step and reports how long it took. */
async function step<T>(n: number, title: string, fn: () => Promise<T>): Promise<T> {
  say(`\n▶ ${n}. ${title}`);
  const t0 = Date.now();
  const r = await fn();
  say(`  ✓ done in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
  return r;
}

/** Commands running now, stopped by the cleanup when the demo is interrupted. */
const running = new Set<ChildProcess>();

/** Runs a command, streaming its output indented; rejects on a non-zero exit. */
function run(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  filter?: (line: string) => boolean,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: repoRoot, env, stdio: ["ignore", "pipe", "pipe"] });
    running.add(child);
    child.on("exit", () => running.delete(child));
    const forward = (chunk: Buffer) => {
      for (const line of chunk.toString().split("\n")) {
        if (line.trim() && (!filter || filter(line))) say(`    ${line}`);
      }
    };
    child.stdout.on("data", forward);
    child.stderr.on("data", forward);
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve() : reject(new CliError(`${cmd} ${args.join(" ")} exited with ${code}`)),
    );
  });
}

/** Registers `cocoonset-dev demo`. */
export function registerDemo(program: Command): void {
  program
    .command("demo")
    .description(
      "run the demo fleet end to end on a private embedded cluster (toolchain, cluster, controller, pulumi up/preview/destroy) and clean up after itself",
    )
    .action(
      action(async () => {
        const scratch = mkdtempSync(join(tmpdir(), "cocoonset-demo-"));
        const stateDir = join(scratch, "cluster");
        const controllerLog = join(tmpdir(), `cocoonset-demo-controller-${process.pid}.log`);
        let controller: ChildProcess | undefined;
        let client: KubeClient | undefined;
        let cleaning = false;
        const cleanup = async () => {
          if (cleaning) return;
          cleaning = true;
          client?.close();
          say("\n▶ cleaning up: stopping the controller and the cluster");
          for (const child of running) child.kill("SIGTERM");
          controller?.kill("SIGTERM");
          await clusterDown(stateDir);
          rmSync(scratch, { recursive: true, force: true });
          say(`  the controller's log is kept in ${controllerLog}`);
        };
        const onSignal = () => {
          say("\ninterrupted");
          void cleanup().then(() => process.exit(130));
        };
        process.once("SIGINT", onSignal);
        process.once("SIGTERM", onSignal);
        try {
          const started = Date.now();
          await step(
            1,
            "toolchain: find, fetch or build etcd, Kubernetes, kwok, the registry and Pulumi",
            async () => {
              await ensureToolchain({ for: "demo", progress: (l) => say(`    ${l}`) });
            },
          );
          const cluster = await step(
            2,
            "embedded cluster: etcd, apiserver, controllers, 2 kwok nodes",
            async () => clusterUp({ stateDir, progress: (l) => say(`    ${l}`) }),
          );
          client = new KubeClient({ kubeconfig: cluster.kubeconfig });
          const backend = join(scratch, "pulumi-backend");
          mkdirSync(backend, { recursive: true });
          const env: NodeJS.ProcessEnv = {
            ...process.env,
            ...pulumiEnv(join(scratch, "pulumi-home"), backend, cluster.kubeconfig),
          };
          // Pulumi's non-interactive display repeats a resource's line at each status update
          // (`creating (0s)`, then again with a message, then `created`): the bare in-progress
          // lines go, each resource keeps its outcome and any message.
          const quiet = (l: string) =>
            !/warning|using pulumi-resource-kubernetes|plugin kubernetes is expected/.test(l) &&
            !/ (creating|updating|deleting|reading|refreshing) \([\d.]+s\)\s*$/.test(l);

          await step(
            3,
            "controller: `cocoonset controller` against the cluster (waits for the CRD)",
            async () => {
              // Its log goes to a file of its own (kept after the demo), so Pulumi's output
              // reads as one story; the path is printed here and at the end.
              const log = openSync(controllerLog, "a");
              controller = spawn(
                process.execPath,
                [
                  join(repoRoot, "dist", "cli", "main.js"),
                  "controller",
                  `--kubeconfig=${cluster.kubeconfig}`,
                  "--leader-elect=false",
                  "--metrics-bind-address=0",
                  "--health-probe-bind-address=0",
                  "--log-level=warn",
                ],
                { stdio: ["ignore", log, log] },
              );
              say(`    controller pid ${controller.pid}, its log: ${controllerLog}`);
            },
          );

          await step(
            4,
            "pulumi up: Operator (CRD, RBAC, controller Deployment) + Fleet `coder` with 3 sub-agents",
            async () => {
              // The namespace stays outside the stack, so step 9 can show it is left empty.
              await client!.create(paths.namespaces(), {
                apiVersion: "v1",
                kind: "Namespace",
                metadata: { name: NAMESPACE },
              });
              await run("pulumi", ["stack", "init", "demo", "--non-interactive"], env, quiet);
              await run("pulumi", ["config", "set", "replicas", "3"], env, quiet);
              await run("pulumi", ["config", "set", "createNamespace", "false"], env, quiet);
              await run(
                "pulumi",
                ["up", "--yes", "--non-interactive", "--skip-preview", "--suppress-progress"],
                env,
                quiet,
              );
            },
          );

          await step(
            5,
            "pulumi preview --diff of a scale-up 3 → 5: one entry per added slot",
            async () => {
              await run("pulumi", ["config", "set", "replicas", "5"], env, quiet);
              await run("pulumi", ["preview", "--diff", "--non-interactive"], env, quiet);
            },
          );

          await step(6, "pulumi up: apply the scale-up", async () => {
            await run(
              "pulumi",
              ["up", "--yes", "--non-interactive", "--skip-preview", "--suppress-progress"],
              env,
              quiet,
            );
            const pods = await client!.list(paths.pods(NAMESPACE), {
              labelSelector: `cocoonset.cocoonstack.io/name=${FLEET}`,
            });
            say(
              `    ${pods.items.length} agent pods: ${pods.items
                .map((p) => p.metadata.name)
                .sort()
                .join(", ")}`,
            );
          });

          await step(
            7,
            "a sub-agent fails (kwok drives coder-2 to Failed); the controller rebuilds it",
            async () => {
              const name = agentPodName(FLEET, 2);
              const before = await client!.get<Pod>(paths.pod(NAMESPACE, name));
              await client!.patch(paths.pod(NAMESPACE, name), {
                metadata: { annotations: { "cocoonset.cocoonstack.io/simulate": "failed" } },
              });
              say(`    ${name} (uid ${before.metadata?.uid}) marked to fail`);
              const after = await waitForObject<Pod>(
                client!,
                paths.pods(NAMESPACE),
                name,
                (p) => p !== undefined && p.metadata?.uid !== before.metadata?.uid && isReady(p),
                { timeoutMs: 60_000, description: `${name} to be rebuilt` },
              );
              say(`    rebuilt: ${name} has a new uid ${after?.metadata?.uid} and is Ready`);
              const cs = await client!.get<KubeObject>(paths.cocoonSet(NAMESPACE, FLEET));
              say(
                `    rebuild history: ${cs.metadata.annotations?.["cocoonset.cocoonstack.io/rebuild-history"]}`,
              );
              const events = await client!.list(paths.events(NAMESPACE));
              for (const e of events.items.filter(
                (e) => (e as { reason?: string }).reason === "SubAgentRebuilding",
              )) {
                say(
                  `    event ${(e as { type?: string }).type} SubAgentRebuilding: ${(e as { note?: string }).note}`,
                );
              }
            },
          );

          await step(
            8,
            "a worker in coder-1 starts a Job and a prompt ConfigMap it owns",
            async () => {
              const owner = await client!.get<KubeObject>(
                paths.pod(NAMESPACE, agentPodName(FLEET, 1)),
              );
              const ref = ownerReferenceForPod({
                name: owner.metadata.name!,
                uid: owner.metadata.uid!,
              });
              await client!.create(paths.configMaps(NAMESPACE), {
                apiVersion: "v1",
                kind: "ConfigMap",
                metadata: { name: "coder-1-prompt", ownerReferences: [ref] },
                data: { prompt: "refactor the parser" },
              });
              await client!.create(paths.jobs(NAMESPACE), {
                apiVersion: "batch/v1",
                kind: "Job",
                metadata: { name: "coder-1-step", ownerReferences: [ref] },
                spec: {
                  template: {
                    metadata: { annotations: { "cocoonset.cocoonstack.io/simulate": "not-ready" } },
                    spec: {
                      restartPolicy: "Never",
                      containers: [{ name: "step", image: "agents/step:1" }],
                    },
                  },
                },
              });
              await waitForList(client!, paths.pods(NAMESPACE), (items) => items.length > 0, {
                labelSelector: "job-name=coder-1-step",
                description: "the Job's pod",
              });
              say(
                "    ConfigMap coder-1-prompt, Job coder-1-step and its pod exist, owned by coder-1",
              );
            },
          );

          await step(
            9,
            "pulumi destroy: release the fleet's tree, then the operator; returns once all is gone",
            async () => {
              await run(
                "pulumi",
                ["destroy", "--yes", "--non-interactive", "--skip-preview", "--suppress-progress"],
                env,
                quiet,
              );
              const pods = await client!.list(paths.pods(NAMESPACE));
              const jobs = await client!.list(paths.jobs(NAMESPACE));
              const cms = (await client!.list(paths.configMaps(NAMESPACE))).items.filter(
                (c) => c.metadata.name !== "kube-root-ca.crt",
              );
              const left = pods.items.length + jobs.items.length + cms.length;
              say(
                `    left in namespace ${NAMESPACE}: ${pods.items.length} pods, ${jobs.items.length} Jobs, ${cms.length} ConfigMaps`,
              );
              if (left > 0) throw new CliError("destroy left objects behind");
            },
          );
          say(`\nDemo finished in ${((Date.now() - started) / 1000).toFixed(0)}s.`);
        } finally {
          process.off("SIGINT", onSignal);
          process.off("SIGTERM", onSignal);
          await cleanup();
        }
      }),
    );
}
