/**
 * Ownership by a token: which Pulumi resource may change, release or delete a cluster object.
 *
 * A name (`<project>/<stack>/<resource>`) does not say who owns an object: Pulumi renames
 * resources (aliases, `stack rename`, `state move`), moves them under parents (a new URN for
 * the same program line) and lets two backends hold stacks of one name. So each guard of the
 * Fleet and the Operator draws a random token the first time it is checked, keeps it among its
 * inputs (its `check` hands the old one on, so every later deploy, an alias, a `state move` or
 * a `stack rename` keeps it), and the objects it creates carry it in {@link OWNER_TOKEN}. A
 * resource acts on an object only when the object's token is its own; a resource whose state
 * holds no token (a new resource: another stack, another backend, or the same program line
 * moved without an alias, which the provider cannot tell apart) is refused before anything is
 * written, unless the program adopts the object, which then carries the new resource's token,
 * so the old resource's delete finds another token and touches nothing.
 *
 * The decisions here are pure; the guards read the cluster once and ask them.
 */
import { randomBytes } from "node:crypto";
import { CRD_NAME } from "../../engine/spec/index.js";
import type { KubeObject } from "../../engine/kube/index.js";

/** Annotation holding the ownership token of the Pulumi resource that owns the object. */
export const OWNER_TOKEN = "cocoonset.cocoonstack.io/owner-token";

/** Annotation on a CocoonSet naming the Fleet (`<project>/<stack>/<name>`) that created it. */
export const CREATED_BY = "cocoonset.cocoonstack.io/created-by";

/** Annotation on the CRD naming the Operator that installed it. */
export const INSTALLED_BY = "cocoonset.cocoonstack.io/installed-by";

/** Label pulumi-kubernetes puts on every object it creates. */
const PULUMI_MANAGED = { key: "app.kubernetes.io/managed-by", value: "pulumi" } as const;

/** A new ownership token: 128 random bits, hex. */
export function newOwnerToken(): string {
  return randomBytes(16).toString("hex");
}

/**
 * The token a guard's `check` keeps among its inputs: the one its state holds (an update, an
 * alias, a moved or renamed stack), else a new one (a new resource).
 */
export function tokenFor(olds: unknown): string {
  const old = (olds ?? {}) as Record<string, unknown>;
  return typeof old.ownerToken === "string" && /^[0-9a-f]{32}$/.test(old.ownerToken)
    ? old.ownerToken
    : newOwnerToken();
}

/** The first characters of a token, enough to tell two apart in a message. */
export function shortToken(token: string): string {
  return token.slice(0, 8);
}

/** The token an object carries, if any. */
export function tokenOf(o: Pick<KubeObject, "metadata"> | undefined): string | undefined {
  return o?.metadata.annotations?.[OWNER_TOKEN] || undefined;
}

/** What a guard knows of itself when it decides. */
export interface Claimant {
  /** `<project>/<stack>/<component name>`: named in messages, never decisive. */
  owner: string;
  /** The token this resource keeps (its state's, or a new one). */
  token: string;
  /**
   * Whether the resource's state existed before this deploy (an update: the old inputs hold
   * an owner). A state of an earlier version holds no token; its own stamp is then enough.
   */
  existing: boolean;
  /** Whether the program says to take the object over (`adoptCocoonSet`, `adoptCrd`). */
  adopt: boolean;
}

/** Why a moved line may not take the object, and what the program can do instead. */
function moveHint(kind: "Fleet" | "Operator", adopt: string): string {
  return `if this is the same ${kind} under a new parent or name, add an alias (\`aliases: [{ name: "<old name>" }]\` or \`[{ parent: <old parent> }]\`, \`pulumi.rootStackResource\` for none) so Pulumi keeps its state and token; to move it from another stack, use \`pulumi state move\`; to take it over from a stack that is gone (another backend, a removed stack), set ${adopt} (the old stack's destroy then leaves it alone)`;
}

/**
 * Whether a Fleet may claim (create, update, converge) the CocoonSet it declares, as a reason
 * to refuse or undefined. `live` is the CocoonSet as read; absent: the Fleet creates it.
 */
export function fleetClaimProblem(
  live: Pick<KubeObject, "metadata"> | undefined,
  id: string,
  me: Claimant,
): string | undefined {
  if (!live) return undefined;
  const theirs = tokenOf(live);
  if (theirs === me.token) return undefined;
  const stamp = live.metadata.annotations?.[CREATED_BY];
  if (theirs) {
    if (me.adopt) return undefined;
    const holder = stamp ? `the Fleet ${stamp}` : "another Fleet";
    return me.existing
      ? `[adoptCocoonSet] the CocoonSet ${id} is now held by ${holder} (ownership token ${shortToken(theirs)}…, not this stack's ${shortToken(me.token)}…): another stack took it over, so this Fleet no longer changes or deletes it; set \`adoptCocoonSet: true\` to take it back, or remove this Fleet from the program`
      : `[name] the CocoonSet ${id} is held by ${holder} (ownership token ${shortToken(theirs)}…), and this Fleet resource is new to this stack's state, so it holds no token for it; a Fleet never takes over another's CocoonSet by name (its \`pulumi destroy\` would delete that fleet): ${moveHint("Fleet", "`adoptCocoonSet: true`")}; otherwise give this Fleet another \`name\` or namespace`;
  }
  // No token: made by hand, or by a Fleet of a version that stamped names only.
  if (stamp && stamp === me.owner && me.existing) return undefined;
  if (me.adopt) return undefined;
  if (stamp) {
    return `[name] the CocoonSet ${id} is held by the Fleet ${stamp} (stamped by a pulumi-cocoonset that recorded no ownership token), and this Fleet resource is new to this stack's state; a Fleet never takes over another's CocoonSet by name: ${moveHint("Fleet", "`adoptCocoonSet: true`")}; otherwise give this Fleet another \`name\` or namespace`;
  }
  const byPulumi = live.metadata.labels?.[PULUMI_MANAGED.key] === PULUMI_MANAGED.value;
  const holder = byPulumi
    ? "was created by a Pulumi stack that did not record its owner (a Fleet of an earlier pulumi-cocoonset, or another Pulumi program)"
    : "was not created by Pulumi (applied with kubectl or another tool)";
  return `[adoptCocoonSet] the CocoonSet ${id} exists and ${holder}; a Fleet does not take over a CocoonSet it did not create unless the program says so: set \`adoptCocoonSet: true\` on the Fleet to adopt it (this stack then manages it, and \`pulumi destroy\` deletes it and its pods), or give this Fleet another \`name\``;
}

/**
 * Whether an Operator may install (apply) the CocoonSet CRD and its controller, as a reason
 * to refuse or undefined. `crd` is the CRD as read; absent: the Operator installs it.
 * `me.adopt` is true when `adoptCrd` names the CRD exactly.
 */
export function operatorInstallProblem(
  crd: Pick<KubeObject, "metadata"> | undefined,
  me: Claimant,
): string | undefined {
  if (!crd) return undefined;
  const theirs = tokenOf(crd);
  if (theirs === me.token) return undefined;
  const stamp = crd.metadata.annotations?.[INSTALLED_BY];
  if (me.adopt) return undefined;
  const adopt = `\`adoptCrd: "${CRD_NAME}"\``;
  if (theirs) {
    const holder = stamp ? `the Operator ${stamp}` : "another Operator";
    return me.existing
      ? `[Operator] the CocoonSet CRD ${CRD_NAME} is now held by ${holder} (ownership token ${shortToken(theirs)}…, not this stack's ${shortToken(me.token)}…): another stack took it over, so this Operator changes and deletes none of it; set ${adopt} to take it back, or remove this Operator from the program`
      : `[Operator] the CocoonSet CRD ${CRD_NAME} is already installed by ${holder} (ownership token ${shortToken(theirs)}…); a cluster takes one Operator: pass that one to your Fleets, or omit \`operator\` when the controller is managed elsewhere; ${moveHint("Operator", adopt)}`;
  }
  if (stamp && stamp === me.owner && me.existing) return undefined;
  if (stamp) {
    return `[Operator] the CocoonSet CRD ${CRD_NAME} is already installed by the Operator ${stamp} (stamped by a pulumi-cocoonset that recorded no ownership token), and this Operator resource is new to this stack's state; a cluster takes one Operator: pass that one to your Fleets, or omit \`operator\` when the controller is managed elsewhere; ${moveHint("Operator", adopt)}`;
  }
  return `[adoptCrd] the CocoonSet CRD ${CRD_NAME} exists and no Operator installed it (it was applied by hand or by another tool), so it may hold CocoonSets that no stack of yours manages; to have this Operator adopt it, set ${adopt} on the Operator: an adopted CRD is kept when the Operator is destroyed`;
}

/** What a resource's delete does with one object it once created. */
export type DeleteDecision =
  /** The object is gone already. */
  | "gone"
  /** It carries this resource's token: delete it. */
  | "delete"
  /** It carries another token: another resource (a replacement, an adopter) holds it now. */
  | "handed-over"
  /** It carries no token: made before tokens, or by hand; only a state without one deletes it. */
  | "untokened";

/**
 * Whether a resource whose state holds `mine` (undefined: a state of an earlier version) may
 * delete `live`. A state without a token keeps the old behaviour (it deletes what it named);
 * a state with one deletes only an object that carries the same token.
 */
export function deleteDecision(
  live: Pick<KubeObject, "metadata"> | undefined,
  mine: string | undefined,
): DeleteDecision {
  if (!live) return "gone";
  const theirs = tokenOf(live);
  if (mine === undefined) return "delete";
  if (theirs === mine) return "delete";
  return theirs ? "handed-over" : "untokened";
}

/** A cluster object a resource created, as its delete finds it again. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
  /** Absent for a cluster-scoped object. */
  namespace?: string;
}

/** The REST path of an object's collection (every kind here is plural by an added `s`). */
export function collectionPath(r: Pick<ObjectRef, "apiVersion" | "kind" | "namespace">): string {
  const group = r.apiVersion === "v1" ? "/api/v1" : `/apis/${r.apiVersion}`;
  const ns = r.namespace ? `/namespaces/${encodeURIComponent(r.namespace)}` : "";
  return `${group}${ns}/${r.kind.toLowerCase()}s`;
}

/** The REST path of an object. */
export function objectPath(r: ObjectRef): string {
  return `${collectionPath(r)}/${encodeURIComponent(r.name)}`;
}

/** `Kind ns/name`, for messages. */
export function describeRef(r: ObjectRef): string {
  return `${r.kind} ${r.namespace ? `${r.namespace}/` : ""}${r.name}`;
}
