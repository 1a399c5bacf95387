/**
 * `cocoonset wake FLEET [SLOT...]`: marks members of a fleet in use from a terminal, by renewing
 * their activity Leases as an agent, a sidecar or a gateway would (engine/execute/activity.ts).
 * The controller's idle policy then wakes what it hibernated, or the fleet it suspended, and
 * counts the renewal as activity for the idle and expiry deadlines (docs/lifecycle.md).
 */
import type { Command } from "commander";
import { markActivity } from "../engine/execute/activity.js";
import { activityLeaseName } from "../engine/idle/index.js";
import { KubeApiError, paths } from "../engine/kube/index.js";
import { agentPodName, toolboxPodName } from "../engine/pods/index.js";
import { cocoonSetNameProblem, type CocoonSet } from "../engine/spec/index.js";
import { action, CliError } from "./common.js";
import {
  addClusterFlags,
  addOutputFlag,
  checkedNamespace,
  clusterClient,
  outputFormat,
  printDocument,
  type ClusterFlags,
} from "./cluster-flags.js";

/** The holder a renewal from this command is recorded under (and its field manager). */
const WAKE_HOLDER = "cocoonset-cli";

/** One member a wake renews: its key in status.vms, its pod and its Lease. */
export interface WakeTarget {
  member: string;
  pod: string;
  lease: string;
}

/** The members of a fleet by key, in order: slot 0 (main), its sub-agents, then toolboxes. */
function members(cs: CocoonSet): WakeTarget[] {
  const name = cs.metadata.name ?? "";
  const target = (member: string, pod: string) => ({ member, pod, lease: activityLeaseName(pod) });
  const out: WakeTarget[] = [];
  for (let slot = 0; slot <= (cs.spec.agent?.replicas ?? 0); slot++)
    out.push(target(String(slot), agentPodName(name, slot)));
  for (const tb of cs.spec.toolboxes ?? [])
    out.push(target(tb.name, toolboxPodName(name, tb.name)));
  return out;
}

/**
 * The members `slots` name (every member when none is named): a slot number (`0` is the main
 * agent), a toolbox's name, or a member's pod name. Each name that is none of these fails,
 * all of them in one error naming the argument and what the fleet has.
 */
export function wakeTargets(cs: CocoonSet, slots: readonly string[]): WakeTarget[] {
  const all = members(cs);
  if (slots.length === 0) return all;
  const out: WakeTarget[] = [];
  const unknown: string[] = [];
  for (const raw of slots) {
    const s = raw.trim();
    // A name as it is first (a toolbox may be named with digits), then "01" as slot 1.
    const found =
      all.find((m) => m.member === s || m.pod === s) ??
      (/^\d+$/.test(s) ? all.find((m) => m.member === String(Number(s))) : undefined);
    if (!found) unknown.push(JSON.stringify(raw));
    else if (!out.includes(found)) out.push(found);
  }
  if (unknown.length > 0) {
    const agents = cs.spec.agent?.replicas ?? 0;
    const toolboxes = (cs.spec.toolboxes ?? []).map((t) => t.name);
    const has =
      (agents === 0 ? "slot 0 (the main agent)" : `slots 0-${agents}`) +
      (toolboxes.length > 0 ? ` and the toolboxes ${toolboxes.join(", ")}` : "");
    throw new CliError(
      `[SLOT] ${unknown.join(", ")} ${unknown.length === 1 ? "is" : "are"} not a member of ${cs.metadata.namespace ?? ""}/${cs.metadata.name ?? ""}: it has ${has} (a slot number, a toolbox name or a member's pod name)`,
      2,
    );
  }
  return out;
}

/** `FLEET` checked before any request: a name no CocoonSet can have. */
export function checkedFleetName(fleet: string): string {
  const name = fleet.trim();
  const problem = name === "" ? "must not be empty" : cocoonSetNameProblem(name);
  if (problem) throw new CliError(`[FLEET] ${problem} (got ${JSON.stringify(fleet)})`, 2);
  return name;
}

/** What `wake` prints with `-o`. */
export interface WakeResult {
  namespace: string;
  fleet: string;
  renewedAt: string;
  holder: string;
  members: WakeTarget[];
}

/** Registers `wake`. */
export function registerWake(program: Command): void {
  const wake = program
    .command("wake")
    .argument("<FLEET>", "name of the CocoonSet")
    .argument(
      "[SLOT...]",
      "members to mark in use: slot numbers (0 is the main agent), toolbox names or pod names (default: every member)",
    )
    .description(
      "mark members of a fleet in use now by renewing their activity Leases (<pod>-activity): the idle policy wakes the members it hibernated, or the fleet it suspended, and counts it as activity (needs leases get, create and patch in the fleet's namespace)",
    );
  addClusterFlags(
    wake,
    "namespace of the fleet (default: the namespace of the kubeconfig's context)",
  );
  wake.option(
    "--holder <name>",
    "who the renewal is recorded as (the Lease's holderIdentity and field manager)",
    WAKE_HOLDER,
  );
  addOutputFlag(wake, "the members renewed");
  wake.action(
    action(
      async (
        fleet: string,
        slots: string[],
        opts: ClusterFlags & { holder: string; output?: string; json?: boolean },
      ) => {
        const format = outputFormat(opts);
        const name = checkedFleetName(fleet);
        const holder = opts.holder.trim();
        if (holder === "") throw new CliError("[--holder] must not be empty", 2);
        const flagNs =
          opts.namespace === undefined
            ? undefined
            : checkedNamespace(opts.namespace.trim(), "--namespace");
        const client = clusterClient(opts);
        try {
          const fromContext = client.contextNamespace;
          const ns =
            flagNs ??
            (fromContext
              ? checkedNamespace(
                  fromContext,
                  `namespace of the current context of ${client.source}`,
                )
              : undefined);
          if (!ns)
            throw new CliError(
              `missing --namespace: the fleet's namespace (the current context of ${client.source} names none)`,
            );
          const cs = await client.getOrUndefined<CocoonSet>(paths.cocoonSet(ns, name));
          if (!cs) throw new CliError(`[FLEET] no CocoonSet ${ns}/${name}`);
          const targets = wakeTargets(cs, slots);
          const now = new Date();
          await markActivity(
            client,
            ns,
            name,
            targets.map((t) => t.pod),
            holder,
            now,
          );
          const result: WakeResult = {
            namespace: ns,
            fleet: name,
            renewedAt: now.toISOString(),
            holder,
            members: targets,
          };
          if (format) return printDocument(result, format);
          process.stdout.write(
            `marked ${targets.length} member${targets.length === 1 ? "" : "s"} of ${ns}/${name} in use at ${result.renewedAt}: ${targets.map((t) => t.member).join(", ")}\n`,
          );
        } catch (e) {
          if (KubeApiError.isInstance(e) && e.status === 0)
            throw new CliError(`${e.message}; kubeconfig: ${client.source}`);
          if (KubeApiError.isInstance(e) && e.status === 401)
            throw new CliError(`${e.message}; the credentials in ${client.source} were rejected`);
          if (KubeApiError.isInstance(e) && e.status === 403)
            throw new CliError(
              `${e.message}; renewing activity needs leases get, create and patch in the fleet's namespace`,
            );
          throw e;
        } finally {
          client.close();
        }
      },
    ),
  );
}
