/**
 * The guards of the Operator component.
 *
 * - The install guard: one Operator per cluster. Before the CRD is applied, it reads the
 *   CocoonSet CRD; when another Operator's stamp is on it, `pulumi up` fails with a message
 *   saying which one, instead of two stacks silently fighting over the CRD and the
 *   controller. A CRD with no stamp (applied by hand) holds CocoonSets no stack of this
 *   user may manage: it is adopted only when the Operator names it in `adoptCrd`.
 * - The CRD guard: deleted before the CRD and the controller. Deleting the CRD deletes every
 *   CocoonSet in the cluster, and with no controller left their finalizers would hold the
 *   destroy forever: it refuses while any CocoonSet is left, unless the CRD is kept.
 */
import { CRD_NAME, stableJson } from "../../engine/spec/index.js";
import {
  KubeClient,
  paths,
  waitForList,
  waitForObject,
  type KubeObject,
} from "../../engine/kube/index.js";
import { BrandedError } from "../../engine/kube/branded-error.js";
import { missingKindReason, missingNamespaceReason, type RequiredKind } from "./namespace-check.js";
import { kubeconfigChanged, kubeconfigOfState, storedKubeconfig } from "./outputs.js";
import { operatorPreflight } from "./preflight.js";
import { UNKNOWN } from "./slots.js";
import {
  collectionPath,
  CREATED_BY,
  deleteDecision,
  describeRef,
  INSTALLED_BY,
  objectPath,
  operatorInstallProblem,
  shortToken,
  tokenFor,
  tokenOf,
  type ObjectRef,
} from "./ownership.js";

export { INSTALLED_BY };

/** Inputs of the guard resource. */
export interface OperatorGuardInputs {
  /** Kubeconfig YAML (a secret input; among the outputs only when no file holds it). */
  kubeconfig: string;
  /** The file the kubeconfig was read from, if it was (see provider/dynamic/outputs.ts). */
  kubeconfigFile?: string;
  /** The context chosen in that file, if any. */
  kubeconfigContext?: string;
  /** `<project>/<stack>/<component name>` of this Operator (named in messages only). */
  owner: string;
  /** The CRD's name when the Operator may adopt a CRD it did not install. */
  adoptCrd?: string;
  /**
   * Namespaces the Operator puts objects in without creating them (its own namespace with
   * `createNamespace: false`, the watched namespaces), by the argument that names each.
   */
  requiredNamespaces?: { field: string; namespace: string }[];
  /**
   * Kinds of objects the Operator creates that the cluster serves only with another project's
   * CRD (the Prometheus Operator's ServiceMonitor), by the argument that asks for them.
   */
  requiredKinds?: RequiredKind[];
  /**
   * The ownership token: set by `check` (the state's, else a new one), never by the program;
   * every object of the Operator carries it (provider/dynamic/ownership.ts).
   */
  ownerToken?: string;
  /**
   * The Operator's objects in the order its delete removes them (sdk/operator-objects.ts,
   * `teardownOrder`): the Kubernetes resources never delete (they are retained); this guard,
   * deleted after all of them, deletes each that carries its token.
   */
  objects?: ObjectRef[];
  /** Why the CRDs are kept on destroy (`retainCrdOnDelete` or `adoptCrd`); empty: deleted. */
  retain?: string;
}

/** Outputs of the install guard: the inputs, the kubeconfig kept as its file if it has one. */
export type OperatorGuardOutputs = Omit<OperatorGuardInputs, "kubeconfig"> & {
  kubeconfig?: string;
};

/**
 * Guard `check`, run by `pulumi preview` and by `up` before any object of the Operator is
 * written (every one depends on this guard): keeps the ownership token (the state's, else a
 * new one); refuses a CRD another Operator holds, or one no Operator installed unless
 * `adoptCrd` names it; and every namespace the Operator needs but does not create must exist,
 * and every kind it creates objects of must be served (its CRD installed). Each failure names
 * the argument. A cluster that cannot be asked is no failure here; `create` asks again.
 */
export async function guardCheck(
  olds: unknown,
  given: Record<string, unknown>,
): Promise<{ inputs: Record<string, unknown>; failures: { property: string; reason: string }[] }> {
  const news: Record<string, unknown> = { ...given, ownerToken: tokenFor(olds) };
  const failures: { property: string; reason: string }[] = [];
  const reachable = typeof news.kubeconfig === "string" && news.kubeconfig !== UNKNOWN;
  if (reachable && typeof news.owner === "string" && news.owner !== UNKNOWN) {
    try {
      const problem = await installProblem(
        news as unknown as OperatorGuardInputs,
        existed(olds),
        15_000,
      );
      if (problem) failures.push({ property: "", reason: problem });
    } catch {
      // Unreachable or forbidden: `create` asks again and fails closed.
    }
  }
  if (reachable && Array.isArray(news.objects) && !JSON.stringify(news.objects).includes(UNKNOWN)) {
    // The rights for each object the Operator writes, as `cocoonset doctor` checks them:
    // refused here, before the first object is written, rather than half-way through `up`.
    const pre = await operatorPreflight(news.kubeconfig as string, news.objects as ObjectRef[]);
    for (const line of pre.warnings) process.stderr.write(`warning: ${line}\n`);
    for (const reason of pre.refusals) failures.push({ property: "", reason });
  }
  const required = news.requiredNamespaces;
  if (reachable && Array.isArray(required)) {
    for (const item of required as unknown[]) {
      const { field, namespace } = (item ?? {}) as { field?: unknown; namespace?: unknown };
      if (typeof field !== "string" || typeof namespace !== "string" || namespace === UNKNOWN) {
        continue;
      }
      const missing = await missingNamespaceReason(
        news.kubeconfig as string,
        namespace,
        field,
        field === "namespace"
          ? "create it first, or leave `createNamespace` on"
          : "create it first (the Operator puts a Role in each watched namespace)",
      );
      if (missing) failures.push({ property: "", reason: missing });
    }
  }
  const kinds = news.requiredKinds;
  if (reachable && Array.isArray(kinds)) {
    for (const item of kinds as RequiredKind[]) {
      const missing = await missingKindReason(news.kubeconfig as string, item);
      if (missing) failures.push({ property: "", reason: missing });
    }
  }
  return { inputs: news, failures };
}

/** Whether the old inputs are those of a guard that existed before this deploy. */
function existed(olds: unknown): boolean {
  return typeof (olds as Record<string, unknown> | undefined)?.owner === "string";
}

/**
 * The install guard refused: the CRD belongs to another Operator or to nobody, or deleting
 * it would delete CocoonSets that are left.
 */
export class CrdGuardError extends BrandedError {}

/** The install decision against the cluster, from one read of the CRD. */
async function installProblem(
  inputs: OperatorGuardInputs,
  existing: boolean,
  timeoutMs: number,
): Promise<string | undefined> {
  const client = KubeClient.fromString(inputs.kubeconfig, { requestTimeoutMs: timeoutMs });
  try {
    const crd = await client.getOrUndefined<KubeObject>(paths.crd(CRD_NAME));
    return operatorInstallProblem(crd, {
      owner: inputs.owner,
      token: inputs.ownerToken ?? "",
      existing,
      adopt: inputs.adoptCrd === CRD_NAME,
    });
  } finally {
    client.close();
  }
}

/**
 * Fails when the CRD is held by another Operator (another token), or by none and not named
 * in `adoptCrd`; returns the installing Operator's stamp found, if any.
 */
export async function assertSingleOperator(
  inputs: OperatorGuardInputs,
  existing = false,
): Promise<string | undefined> {
  const problem = await installProblem(inputs, existing, 30_000);
  if (problem) throw new CrdGuardError(problem);
  const client = KubeClient.fromString(inputs.kubeconfig, { requestTimeoutMs: 30_000 });
  try {
    const crd = await client.getOrUndefined<KubeObject>(paths.crd(CRD_NAME));
    return crd?.metadata.annotations?.[INSTALLED_BY];
  } finally {
    client.close();
  }
}

/** Guard `create`: checks, then records this Operator's token. */
export async function guardCreate(
  inputs: OperatorGuardInputs,
): Promise<{ id: string; outs: OperatorGuardOutputs }> {
  await assertSingleOperator(inputs);
  return { id: inputs.owner, outs: storedKubeconfig(inputs) };
}

/**
 * Guard `update`: the same check (the CRD or the cluster may have changed), then the objects
 * the Operator no longer declares (a Service turned off, fewer shards, another namespace),
 * which their retained resources leave behind, are deleted when they carry its token.
 */
export async function guardUpdate(
  _id: string,
  olds: OperatorGuardOutputs,
  news: OperatorGuardInputs,
): Promise<{ outs: OperatorGuardOutputs }> {
  await assertSingleOperator(news, true);
  const key = (r: ObjectRef) => `${r.apiVersion}/${r.kind}/${r.namespace ?? ""}/${r.name}`;
  const kept = new Set((news.objects ?? []).map(key));
  const dropped = (olds.objects ?? []).filter((r) => !kept.has(key(r)));
  if (dropped.length > 0 && news.ownerToken) {
    const client = KubeClient.fromString(news.kubeconfig, { requestTimeoutMs: 30_000 });
    try {
      await teardown(client, dropped, news.ownerToken, { retain: "keep" });
    } finally {
      client.close();
    }
  }
  return { outs: storedKubeconfig(news) };
}

/** Guard `diff`: a change when the claim, the token, the objects or the kubeconfig's source differ. */
export function guardDiff(
  _id: string,
  olds: OperatorGuardOutputs,
  news: OperatorGuardInputs,
): { changes: boolean } {
  const keys = ["owner", "adoptCrd", "ownerToken", "objects", "retain"] as const;
  return {
    changes:
      keys.some((k) => stableJson(olds[k]) !== stableJson(news[k])) ||
      kubeconfigChanged(olds, news),
  };
}

/**
 * Guard `delete`, the last of the Operator's deletes (every object depends on the guard):
 * deletes each object that carries the guard's token, in teardown order, and waits until it
 * is gone; an object with another token (an adopting Operator holds it now) or none is left.
 * The CRDs are kept when `retain` says so, and never deleted while any CocoonSet exists.
 */
export async function guardDelete(props: OperatorGuardOutputs): Promise<void> {
  if (!props.ownerToken || !props.objects) return; // an earlier version: its resources deleted
  const client = KubeClient.fromString(kubeconfigOfState(props), { requestTimeoutMs: 30_000 });
  try {
    await teardown(client, props.objects, props.ownerToken, { retain: props.retain ?? "" });
  } finally {
    client.close();
  }
}

/**
 * Deletes, in order, the objects that carry `token`, waiting for each to be gone; CRDs are
 * kept when `retain` is set, and refused while a CocoonSet is left.
 */
async function teardown(
  client: KubeClient,
  refs: ObjectRef[],
  token: string,
  opts: { retain: string },
): Promise<void> {
  for (const ref of refs) {
    const path = objectPath(ref);
    const live = await client.getOrUndefined<KubeObject>(path);
    const decision = deleteDecision(live, token);
    if (decision === "gone") continue;
    if (decision !== "delete") {
      console.log(
        `cocoonset: leaving the ${describeRef(ref)}: it carries ${
          tokenOf(live)
            ? `the ownership token ${shortToken(tokenOf(live)!)}…`
            : "no ownership token"
        }, not this Operator's ${shortToken(token)}…, so another resource holds it now`,
      );
      continue;
    }
    if (ref.kind === "CustomResourceDefinition") {
      if (opts.retain) continue;
      if (ref.name === CRD_NAME) {
        const left = (await client.list(paths.cocoonSets())).items;
        if (left.length > 0) throw new CrdGuardError(refusal(left, false));
      }
    }
    await client.delete(path, { propagationPolicy: "Background", uid: live!.metadata.uid });
    await waitForObject(
      client,
      collectionPath(ref),
      ref.name,
      (o) => o === undefined || o.metadata.uid !== live!.metadata.uid,
      { timeoutMs: 180_000, description: `${describeRef(ref)} to be gone` },
    );
  }
}

/** Inputs of the CRD guard resource. */
export interface CrdGuardInputs {
  /** Kubeconfig YAML (a secret input; among the outputs only when no file holds it). */
  kubeconfig: string;
  /** The file the kubeconfig was read from, if it was (see provider/dynamic/outputs.ts). */
  kubeconfigFile?: string;
  /** The context chosen in that file, if any. */
  kubeconfigContext?: string;
  /** `<project>/<stack>/<component name>` of the Operator. */
  owner: string;
  /** Why the CRD is kept on destroy (`retainCrdOnDelete` or `adoptCrd`); empty when it is deleted. */
  retain: string;
  /** Version of the stored provider code. */
  providerVersion: string;
  /** The Operator's ownership token (its install guard's): the CRD it may let go carries it. */
  ownerToken?: string;
}

/** Names of CocoonSets (`ns/name`) that hold up a CRD deletion, the first ten. */
function named(items: KubeObject[]): string {
  const names = items.map((o) => `${o.metadata.namespace}/${o.metadata.name}`).sort();
  return names.length > 10
    ? `${names.slice(0, 10).join(", ")} and ${names.length - 10} more`
    : names.join(", ");
}

/** Outputs of the CRD guard: what its `delete` needs, the kubeconfig kept as its file if it has one. */
export type CrdGuardOutputs = Omit<CrdGuardInputs, "kubeconfig"> & { kubeconfig?: string };

/** CRD guard `create`: nothing to do until the destroy; stores what the check will need. */
export function crdGuardCreate(inputs: CrdGuardInputs): { id: string; outs: CrdGuardOutputs } {
  return { id: inputs.owner, outs: storedKubeconfig(inputs) };
}

/** CRD guard `update`: stores the new inputs. */
export function crdGuardUpdate(
  _id: string,
  _olds: CrdGuardOutputs,
  news: CrdGuardInputs,
): { outs: CrdGuardOutputs } {
  return { outs: storedKubeconfig(news) };
}

/** CRD guard `diff`: a change when any stored input, or the kubeconfig's source, differs. */
export function crdGuardDiff(
  _id: string,
  olds: CrdGuardOutputs,
  news: CrdGuardInputs,
): { changes: boolean } {
  const keys = ["owner", "retain", "providerVersion", "ownerToken"] as const;
  return { changes: keys.some((k) => olds[k] !== news[k]) || kubeconfigChanged(olds, news) };
}

/** Why the CRD may not go, naming what is left and the Fleets that hold it. */
function refusal(left: KubeObject[], waited: boolean): string {
  const holders = [
    ...new Set(left.map((o) => o.metadata.annotations?.[CREATED_BY]).filter((h) => h)),
  ].sort();
  return (
    `[Operator] refusing to delete the CocoonSet CRD ${CRD_NAME}: ${left.length} CocoonSet(s) are left in the cluster (${named(left)})` +
    (holders.length > 0
      ? `, held by the Fleet(s) ${holders.join(", ")}`
      : ", made outside Pulumi") +
    (waited ? " (waited for, as this project's: they did not go)" : "") +
    `; deleting the CRD deletes them, and with no controller left to release them their finalizers would hold the destroy forever. Destroy the stacks that own them first (\`pulumi destroy\` in each; a Fleet of this stack that is not given this Operator as its \`operator\` is destroyed in the same run, and this guard waits for it), or set \`retainCrdOnDelete: true\` on the Operator and run \`pulumi up\` to keep the CRD when the Operator is destroyed`
  );
}

/** How long the CRD guard waits for the CocoonSets of its own project to go. */
const OWN_FLEETS_WAIT_MS = 180_000;

/**
 * CRD guard `delete`: runs before the CRD and the controller are deleted. When the CRD carries
 * another Operator's token (an adopting Operator holds it now), touches nothing; when it is
 * kept, says so (with what is left). Otherwise fails while any CocoonSet exists, naming them
 * and who holds them; when every one left was created by a Fleet of this project (its stamp
 * names it) and is being deleted (the same destroy releases it when the Fleet is not linked
 * to the Operator), they are waited for first (three minutes at most).
 */
export async function crdGuardDelete(props: CrdGuardOutputs): Promise<void> {
  const client = KubeClient.fromString(kubeconfigOfState(props), { requestTimeoutMs: 30_000 });
  try {
    const crd = await client.getOrUndefined<KubeObject>(paths.crd(CRD_NAME));
    if (!crd) return;
    const theirs = tokenOf(crd);
    if (props.ownerToken && theirs && theirs !== props.ownerToken) {
      console.log(
        `cocoonset: leaving the CocoonSet CRD ${CRD_NAME}: it carries the ownership token ${shortToken(theirs)}…, not this Operator's ${shortToken(props.ownerToken)}…, so another Operator holds it now`,
      );
      return;
    }
    let left = (await client.list(paths.cocoonSets())).items;
    if (props.retain) {
      console.log(
        `cocoonset: keeping the CocoonSet CRD ${CRD_NAME} (${props.retain})` +
          (left.length > 0
            ? `; ${left.length} CocoonSet(s) are left in the cluster: ${named(left)}`
            : "; no CocoonSet is left") +
          `; delete it with \`kubectl delete crd ${CRD_NAME}\` once no CocoonSet is left`,
      );
      return;
    }
    // Stamped by a Fleet of this project and already being deleted: one of this stack's (its
    // stack name in the stamp may be an old one, after a `state move` or a `stack rename`),
    // whose release this destroy started beside the Operator when it is not linked to it.
    // Waiting deletes nothing: a CocoonSet another stack holds, or one no delete reached,
    // stays, and the refusal follows at once.
    const project = props.owner.slice(0, props.owner.indexOf("/") + 1);
    const ours = (o: KubeObject) =>
      project !== "" && (o.metadata.annotations?.[CREATED_BY] ?? "").startsWith(project);
    const going = (o: KubeObject) => ours(o) && o.metadata.deletionTimestamp !== undefined;
    const waited = left.length > 0 && left.every(going);
    if (waited) {
      console.log(
        `cocoonset: waiting for ${left.length} CocoonSet(s) of this project to be destroyed before the CRD goes: ${named(left)}`,
      );
      left = await waitForList(client, paths.cocoonSets(), (items) => !items.some(ours), {
        timeoutMs: OWN_FLEETS_WAIT_MS,
        description: "this project's CocoonSets to be gone",
      }).catch(async () => (await client.list(paths.cocoonSets())).items);
    }
    if (left.length > 0) throw new CrdGuardError(refusal(left, waited));
  } finally {
    client.close();
  }
}
