/**
 * The implementation behind the Pulumi slots resource (`pulumi-nodejs:dynamic/cocoonset:Slots`).
 * The serialized provider object (sdk/slots.ts) holds no state: each of its methods imports
 * this package by name and calls the function of the same name here, so destroy and
 * refresh always run the engine that is installed.
 * Behaviour: docs/behaviour.md §7.3.
 */
import { asksHibernate } from "../../engine/lifecycle/index.js";
import {
  cocoonSetNameProblem,
  describeValue,
  formatFailure,
  namespaceNameProblem,
  prefixedProperty,
  validateCocoonSetSpec,
  type CocoonSet,
  type CocoonSetSpec,
  type CocoonSetStatus,
  type Pod,
} from "../../engine/spec/index.js";
import { CAPACITY_CHECKS, type CapacityCheck } from "./dry-run.js";
import { missingNamespaceReason } from "./namespace-check.js";
import {
  converge,
  deleteFleet,
  isSuspendRegistrySilence,
  listFleetPods,
  readCocoonSet,
} from "../../engine/execute/index.js";
import { KubeApiError, KubeClient, KubeConfigError } from "../../engine/kube/index.js";
import {
  cocoonSetFrom,
  desiredSlots,
  liveSlots,
  type SlotMap,
  type SlotStatus,
} from "./slot-view.js";
import { BrandedError, errorMessage, InvalidValueError } from "../../engine/kube/branded-error.js";
import { stableJson } from "../../engine/spec/index.js";
import { parseRegistryAddress, plainHttpProblem } from "../../engine/registry/address.js";
import { hooksUrlProblem } from "../../engine/hooks/index.js";
import { parseCaBundle } from "../../engine/registry/ca.js";
import { OciRegistry } from "../../engine/registry/oci.js";
import type { RegistryCredential } from "../../engine/registry/keychain.js";
import {
  DEFAULT_SUSPEND_TIMEOUT_SECONDS,
  lifecycleChange,
  lifecycleCount,
  lifecycleSummary,
  type LifecycleChange,
} from "./deploy-view.js";
import {
  awaitLifecycle,
  awaitReady,
  DeployWaitFailedError,
  DeployWaitTimeoutError,
} from "./deploy-wait.js";
import { kubeconfigChanged, kubeconfigOfState, storedKubeconfig } from "./outputs.js";
import { deleteDecision, shortToken, tokenOf } from "./ownership.js";
import {
  credentialsDiffer,
  credentialsSecretName,
  deleteCredentialsSecret,
  readCredentialsSecret,
  writeCredentialsSecret,
} from "./registry-secret.js";

/** The placeholder Pulumi sends for values not known during preview. */
export const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

/** Inputs of the slots resource. */
export interface SlotsInputs {
  /** Kubeconfig YAML (a secret input: never stored in plaintext). */
  kubeconfig: string;
  /**
   * The file the kubeconfig was read from, if it was: the outputs keep this path (and the
   * context) instead of the text, and `destroy` and `refresh` read the file again.
   */
  kubeconfigFile?: string;
  /** The context chosen in {@link kubeconfigFile}, if any. */
  kubeconfigContext?: string;
  namespace: string;
  /** Name of the CocoonSet. */
  name: string;
  /** uid of the CocoonSet (unknown in a preview that creates it). */
  uid: string;
  spec: CocoonSetSpec;
  /** Desired slots keyed by slot number or toolbox name. */
  slots: SlotMap;
  /** Version of the stored provider code; a new version rewrites it on the next update. */
  providerVersion: string;
  /** Sub-agent creates in flight. @default 8 */
  fanOut?: number;
  /**
   * How long `up` waits for the fleet: the main agent, the fan-out, then every member Ready.
   * @default 300
   */
  timeoutSeconds?: number;
  /**
   * `up` returns once the pods are created, without waiting for every member to be Ready
   * (the outputs then say what was Ready at that moment). Read by `create` and `update` only:
   * a change of it alone changes no slot. @default false
   */
  skipAwait?: boolean;
  /** How long `destroy` waits for the fleet's tree to be gone. @default 120 */
  releaseTimeoutSeconds?: number;
  /**
   * The snapshot registry of the fleet's VMs, `host[:port][/prefix]` (the node agent's
   * `OCI_REGISTRY`). With it `spec.suspend` is acted on and `destroy` drops the VMs'
   * snapshot tags per `snapshotPolicy`; without it `suspend` is stored only.
   */
  registry?: string;
  /** PEM CA bundle trusted for the registry's https, besides the system roots. */
  registryCa?: string;
  /** Plain http to a registry host that is not loopback. @default false */
  registryInsecure?: boolean;
  /**
   * The registry's credentials, a secret input (so a secret output too): a user name and
   * password (or access token), or an identity token. Without them, the Docker keychain of
   * the machine that runs `pulumi`.
   */
  registryCredentials?: RegistryCredential;
  /** How long `up` waits for a suspend (phase Suspended) or a wake (every VM up). @default 300 */
  suspendTimeoutSeconds?: number;
  /**
   * Whether `check` asks the cluster that the namespace exists: true when the program named it
   * as plain text, false when it comes from a resource (which may create it in the same deploy).
   */
  checkNamespace?: boolean;
  /**
   * What `check` does with the slots the capacity forecast says the nodes would refuse:
   * fail (`refuse`), warn and go on (`warn`), or not forecast at all (`off`). Read by
   * `check` only; a change of it alone changes no slot. @default "refuse"
   */
  capacityCheck?: CapacityCheck;
  /**
   * The ownership token of the Fleet's claim guard, which the CocoonSet carries: `up` acts on
   * the CocoonSet and `destroy` releases it only while it carries this token
   * (provider/dynamic/ownership.ts). Absent in a state of an earlier version.
   */
  ownerToken?: string;
}

/**
 * Outputs: the inputs plus the live state of every slot. The kubeconfig is among them only
 * when it was given as text (provider/dynamic/outputs.ts).
 */
export interface SlotsOutputs extends Omit<SlotsInputs, "kubeconfig" | "registryCredentials"> {
  kubeconfig?: string;
  /**
   * Absent since the credentials moved to a Secret; a state of an earlier version holds them
   * here (encrypted), and its next update drops them.
   */
  registryCredentials?: RegistryCredential;
  /**
   * The Secret in the fleet's namespace that holds the `registryCredentials` for `destroy`
   * (registry-secret.ts), when the Fleet has them: never the credentials themselves.
   */
  registryCredentialsSecret?: string;
  /** Per slot: pod name, uid, phase and readiness. */
  pods: Record<string, SlotStatus>;
  /** VM name of the main agent. */
  mainVmName: string;
  /** The CocoonSet's status phase after the last `up` (`Running`, `Suspended`, …). */
  phase?: string;
  /** The CocoonSet's status after the last `up` (absent while it has none). */
  status?: CocoonSetStatus;
}

/** A check failure as Pulumi wants it. */
export interface CheckFailure {
  property: string;
  reason: string;
}

const isUnknown = (v: unknown): boolean => v === UNKNOWN;

function containsUnknown(v: unknown): boolean {
  if (isUnknown(v)) return true;
  if (Array.isArray(v)) return v.some(containsUnknown);
  if (v && typeof v === "object") return Object.values(v).some(containsUnknown);
  return false;
}

/**
 * How long `pulumi up` waits for the fleet by default (the main agent, the fan-out, every
 * member Ready), in seconds.
 */
export const DEFAULT_TIMEOUT_SECONDS = 300;
/** How long `pulumi destroy` waits for the fleet's tree to be gone by default, in seconds. */
export const DEFAULT_RELEASE_TIMEOUT_SECONDS = 120;

/** Largest `fanOut`: the controller's own bound on `--fanout-concurrency`. */
export const MAX_FAN_OUT = 10_000;
/** Longest wait `timeoutSeconds` and `releaseTimeoutSeconds` take (one day). */
export const MAX_TIMEOUT_SECONDS = 86_400;

/**
 * What is wrong with the Fleet's numeric arguments (`fanOut`, `timeoutSeconds`,
 * `releaseTimeoutSeconds`), one `[field] rule (got value)` line each. Shared by the Fleet
 * component (which throws before registering anything) and `check`.
 */
export function slotsArgumentProblems(args: {
  fanOut?: unknown;
  timeoutSeconds?: unknown;
  releaseTimeoutSeconds?: unknown;
  suspendTimeoutSeconds?: unknown;
  registry?: unknown;
  registryCa?: unknown;
  registryInsecure?: unknown;
  registryCredentials?: unknown;
  capacityCheck?: unknown;
  skipAwait?: unknown;
}): { property: string; reason: string }[] {
  const out: { property: string; reason: string }[] = [];
  const skipAwait = args.skipAwait;
  if (skipAwait !== undefined && !isUnknown(skipAwait) && typeof skipAwait !== "boolean")
    out.push({
      property: "skipAwait",
      reason: `[skipAwait] must be true or false (got ${describeValue(skipAwait)})`,
    });
  const capacityCheck = args.capacityCheck;
  if (
    capacityCheck !== undefined &&
    !isUnknown(capacityCheck) &&
    !CAPACITY_CHECKS.includes(capacityCheck as CapacityCheck)
  ) {
    out.push({
      property: "capacityCheck",
      reason: `[capacityCheck] must be one of ${CAPACITY_CHECKS.map((c) => `"${c}"`).join(", ")} (got ${describeValue(capacityCheck)})`,
    });
  }
  const fanOut = args.fanOut;
  if (
    fanOut !== undefined &&
    !isUnknown(fanOut) &&
    !(Number.isInteger(fanOut) && (fanOut as number) >= 1 && (fanOut as number) <= MAX_FAN_OUT)
  ) {
    out.push({
      property: "fanOut",
      reason: `[fanOut] must be an integer between 1 and ${MAX_FAN_OUT} (got ${describeValue(fanOut)})`,
    });
  }
  for (const field of [
    "timeoutSeconds",
    "releaseTimeoutSeconds",
    "suspendTimeoutSeconds",
  ] as const) {
    const v = args[field];
    if (
      v !== undefined &&
      !isUnknown(v) &&
      !(typeof v === "number" && v >= 1 && v <= MAX_TIMEOUT_SECONDS)
    ) {
      out.push({
        property: field,
        reason: `[${field}] must be a number of seconds between 1 and ${MAX_TIMEOUT_SECONDS} (got ${describeValue(v)})`,
      });
    }
  }
  const registry = registryProblem(args.registry);
  if (registry) out.push({ property: "registry", reason: registry });
  const insecure = args.registryInsecure;
  if (insecure !== undefined && !isUnknown(insecure) && typeof insecure !== "boolean")
    out.push({
      property: "registryInsecure",
      reason: `[registryInsecure] must be true or false (got ${describeValue(insecure)})`,
    });
  else if (
    typeof args.registry === "string" &&
    !registry &&
    !isUnknown(insecure) &&
    plainHttpProblem(args.registry, insecure === true)
  )
    out.push({
      property: "registry",
      reason: `[registry] ${plainHttpProblem(args.registry, false)!.replace("the registry's insecure flag", "registryInsecure: true")} (got ${describeValue(args.registry)})`,
    });
  const ca = args.registryCa;
  if (ca !== undefined && !isUnknown(ca)) {
    if (typeof ca !== "string")
      out.push({
        property: "registryCa",
        reason: `[registryCa] must be PEM text (got ${describeValue(ca)})`,
      });
    else
      try {
        parseCaBundle(ca);
      } catch (e) {
        out.push({
          property: "registryCa",
          reason: `[registryCa] ${(e as Error).message} (got ${describeValue(ca)})`,
        });
      }
  }
  const cred = registryCredentialsProblem(args.registryCredentials, args.registry !== undefined);
  if (cred) out.push({ property: "registryCredentials", reason: cred });
  return out;
}

/**
 * What is wrong with `registryCredentials` (never showing them), given whether a registry is
 * named; undefined when nothing is, or when they are not known yet.
 */
export function registryCredentialsProblem(
  cred: unknown,
  hasRegistry: boolean,
): string | undefined {
  if (cred === undefined || containsUnknown(cred)) return undefined;
  if (!isRegistryCredential(cred))
    return "[registryCredentials] must be { username, password } or { identityToken }, non-empty strings (the value is not shown: it is a secret)";
  if (!hasRegistry) return "[registryCredentials] needs [registry]: the registry they open";
  return undefined;
}

/** Whether `v` is a user name and password, or an identity token (non-empty strings). */
function isRegistryCredential(v: unknown): v is RegistryCredential {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const o = v as Record<string, unknown>;
  const text = (k: string) => typeof o[k] === "string" && o[k] !== "";
  const keys = Object.keys(o).filter((k) => o[k] !== undefined);
  if (keys.length === 1 && text("identityToken")) return true;
  return keys.length === 2 && text("username") && text("password");
}

/** What is wrong with a `registry` argument, as `[registry] rule (got value)`, if anything. */
export function registryProblem(v: unknown): string | undefined {
  if (v === undefined || isUnknown(v)) return undefined;
  if (typeof v !== "string") {
    return `[registry] must be a string host[:port][/prefix] (got ${describeValue(v)})`;
  }
  try {
    parseRegistryAddress(v);
    return undefined;
  } catch (e) {
    if (!InvalidValueError.isInstance(e)) throw e;
    return `[registry] ${e.message} (got ${describeValue(v)})`;
  }
}

/**
 * Validates the inputs with the CRD's own schema; failures name the field. Top-level inputs
 * are reported under their own key, so the engine prints the value given; a field inside the
 * spec has no key of its own in the inputs, so its failure carries the field and the value in
 * its reason (the engine would print `value {<nil>}` for a dotted key). When the namespace was
 * given as plain text and the kubeconfig is known, one GET makes sure the namespace exists.
 * The dry runs and the capacity forecast of the pods the deploy creates are the claim guard's
 * (fleet-guard.ts): its check runs before the CocoonSet is written, this one after.
 */
export async function check(
  _olds: unknown,
  news: Record<string, unknown>,
): Promise<{ inputs: Record<string, unknown>; failures: CheckFailure[] }> {
  const failures: CheckFailure[] = [];
  if (!isUnknown(news.namespace)) {
    const problem = namespaceNameProblem(news.namespace);
    if (problem) failures.push({ property: "namespace", reason: `[namespace] ${problem}` });
  }
  if (!isUnknown(news.name)) {
    const problem = cocoonSetNameProblem(news.name);
    if (problem) failures.push({ property: "name", reason: `[name] ${problem}` });
  }
  if (
    news.kubeconfig !== undefined &&
    !isUnknown(news.kubeconfig) &&
    (typeof news.kubeconfig !== "string" || news.kubeconfig.trim() === "")
  ) {
    failures.push({
      property: "kubeconfig",
      reason: "[kubeconfig] must be the text of a kubeconfig file",
    });
  }
  failures.push(...slotsArgumentProblems(news));
  if (!containsUnknown(news.spec)) {
    const v = validateCocoonSetSpec(news.spec);
    if (!v.ok)
      for (const f of v.failures)
        failures.push({
          property: "",
          reason: formatFailure({ ...f, property: prefixedProperty("spec", f.property) }),
        });
    // The hook's URL rule (https, or http to loopback) is the caller's, not the CRD's.
    const hookUrl = hooksUrlProblem(news.spec);
    if (hookUrl) failures.push({ property: "", reason: hookUrl });
  }
  if (
    failures.length === 0 &&
    news.checkNamespace === true &&
    typeof news.kubeconfig === "string" &&
    typeof news.namespace === "string"
  ) {
    const missing = await missingNamespaceReason(
      news.kubeconfig,
      news.namespace,
      "namespace",
      "create it first, or pass the `namespace` of the Fleet as a Namespace resource's name so the Fleet is created after it",
    );
    if (missing) failures.push({ property: "namespace", reason: missing });
  }
  if (
    failures.length === 0 &&
    typeof news.namespace === "string" &&
    typeof news.name === "string" &&
    !isUnknown(news.namespace) &&
    !isUnknown(news.name) &&
    news.spec !== undefined &&
    !containsUnknown(news.spec)
  ) {
    // The slots follow from the spec the engine hands over, which is the program's with the
    // paths of `ignoreChanges` put back to their old values: derived here, they always match
    // the spec this resource converges to.
    news = {
      ...news,
      slots: desiredSlots(news.namespace, news.name, news.spec as CocoonSetSpec),
    };
  }
  return { inputs: news, failures };
}

const COMPARED: (keyof SlotsInputs)[] = [
  "spec",
  "slots",
  "providerVersion",
  "fanOut",
  "timeoutSeconds",
  "releaseTimeoutSeconds",
  "registry",
  "registryCa",
  "registryInsecure",
  "suspendTimeoutSeconds",
  "ownerToken",
];

/** What `diff` returns (the dynamic provider's DiffResult). */
export interface DiffResult {
  changes?: boolean;
  replaces?: string[];
  deleteBeforeReplace?: boolean;
}

/**
 * Compares old outputs with new inputs. When inputs differ, `changes` stays unset so the
 * engine prints its own per-slot input diff. When they match, one LIST of the fleet's pods
 * finds live drift (a deleted or drifted slot pod) and reports it as a change. A flip of
 * `spec.suspend` is one update whose input diff is `spec.suspend` alone (the slots are kept),
 * and the provider prints one line saying what it is (deploy-view.ts).
 */
export async function diff(
  _id: string,
  olds: SlotsOutputs,
  news: SlotsInputs,
): Promise<DiffResult> {
  const replaces = (["namespace", "name"] as const).filter(
    (k) => !isUnknown(news[k]) && olds[k] !== news[k],
  );
  if (replaces.length > 0) return { replaces, deleteBeforeReplace: true };
  const change = lifecycleChange(olds.spec, news.spec, isUnknown);
  if (change) await reportLifecycleChange(change, olds, news);
  const inputsChanged =
    COMPARED.some((k) => stableJson(olds[k]) !== stableJson(news[k])) ||
    // Credentials added, dropped, or still among the outputs (an earlier version's state);
    // changed ones are found in the Secret below.
    olds.registryCredentials !== undefined ||
    (news.registryCredentials !== undefined) !== (olds.registryCredentialsSecret !== undefined) ||
    kubeconfigChanged(olds, news) ||
    (!isUnknown(news.uid) && olds.uid !== news.uid) ||
    containsUnknown(news.spec) ||
    containsUnknown(news.slots);
  if (inputsChanged) return {};
  if (isUnknown(news.kubeconfig)) return { changes: false };
  let client: KubeClient;
  try {
    // A refresh diffs the state against the inputs `read` returned, which hold the
    // kubeconfig's file rather than its text when it came from one.
    client = KubeClient.fromString(
      typeof news.kubeconfig === "string" ? news.kubeconfig : kubeconfigOfState(news),
      { requestTimeoutMs: 30_000 },
    );
  } catch (e) {
    process.stderr.write(
      `cocoonset: could not check live slots (${errorMessage(e)}); assuming no drift\n`,
    );
    return { changes: false };
  }
  try {
    if (
      olds.registryCredentialsSecret &&
      (await credentialsDiffer(
        client,
        news.namespace,
        olds.registryCredentialsSecret,
        news.registryCredentials,
      ))
    ) {
      return { changes: true };
    }
    const cs = cocoonSetFrom(news.namespace, news.name, news.spec, olds.uid);
    const pods = await listFleetPods(client, cs);
    const live = liveSlots(cs, pods, news.slots);
    const presentDrifted = () =>
      Object.entries(live.slots).some(
        ([key, view]) => stableJson(view) !== stableJson(news.slots[key]),
      );
    // A suspended fleet (acted on: a registry is given) creates no pod, so a missing slot is
    // no drift an update could repair; a drifted pod still is.
    if (news.spec.suspend === true && typeof news.registry === "string") {
      return { changes: presentDrifted() };
    }
    if (stableJson(live.slots) === stableJson(news.slots)) return { changes: false };
    // Nor is a slot missing from a fleet the controller's idle policy suspended (it records
    // that in the status, never in the spec Pulumi declares): an update would wake nothing.
    // Read only when something is missing or drifted, so a converged fleet costs no GET.
    const current = await readCocoonSet(client, news.namespace, news.name);
    const suspendedByPolicy =
      current?.metadata.uid === olds.uid && current.status?.idleSuspendedSince !== undefined;
    return { changes: suspendedByPolicy ? presentDrifted() : true };
  } catch (e) {
    process.stderr.write(
      `cocoonset: could not check live slots (${errorMessage(e)}); assuming no drift\n`,
    );
    return { changes: false };
  } finally {
    client.close();
  }
}

/**
 * Prints the summary line of a suspend or a wake (`suspend fleet NS/NAME (N pods
 * hibernate; …)`), counting the fleet's live pods when the cluster answers, else its slots.
 */
async function reportLifecycleChange(
  change: LifecycleChange,
  olds: SlotsOutputs,
  news: SlotsInputs,
): Promise<void> {
  const cs = cocoonSetFrom(news.namespace, news.name, news.spec, olds.uid);
  let pods: Pod[] | undefined;
  if (typeof news.kubeconfig === "string" && !isUnknown(news.kubeconfig)) {
    const client = KubeClient.fromString(news.kubeconfig, { requestTimeoutMs: 30_000 });
    try {
      pods = await listFleetPods(client, cs);
    } catch {
      pods = undefined; // counted from the slots instead
    } finally {
      client.close();
    }
  }
  const count = lifecycleCount(cs, pods, containsUnknown(news.slots) ? {} : news.slots);
  let line = lifecycleSummary(change, news.namespace, news.name, count);
  if (news.registry === undefined) {
    line += `; the Fleet has no \`registry\`, so \`spec.suspend\` is stored and not acted on`;
  }
  console.log(line);
}

async function observe(
  client: KubeClient,
  inputs: SlotsInputs,
  cs: CocoonSet,
): Promise<SlotsOutputs> {
  const pods: Pod[] = await listFleetPods(client, cs);
  const live = liveSlots(cs, pods, inputs.slots);
  // A copy: storedKubeconfig hands the inputs themselves back when they name no file.
  const stored: Partial<SlotsInputs> = { ...storedKubeconfig(inputs) };
  delete stored.registryCredentials;
  return {
    ...(stored as Omit<SlotsInputs, "kubeconfig" | "registryCredentials">),
    ...(inputs.registryCredentials
      ? { registryCredentialsSecret: credentialsSecretName(inputs.name) }
      : {}),
    uid: cs.metadata.uid ?? inputs.uid,
    pods: live.status,
    mainVmName: inputs.slots["0"]?.vm ?? "",
    phase: cs.status?.phase ?? "",
    ...(cs.status ? { status: cs.status } : {}),
  };
}

/**
 * A partial failure: Pulumi records the resource as created but failed to initialise (with
 * these outputs) instead of losing it, and the next `up` converges it.
 */
export class SlotsInitError extends BrandedError {
  constructor(
    readonly id: string,
    readonly properties: SlotsOutputs,
    readonly reasons: string[],
    /** The message, when it is not a count of failed slot operations. */
    message?: string,
  ) {
    super(message ?? `${reasons.length} slot operation(s) failed: ${reasons.join("; ")}`);
  }
}

/**
 * The CocoonSet the slots resource's kubeconfig reaches is not the one its Fleet created
 * (another cluster, or the CocoonSet was recreated outside Pulumi): nothing is changed.
 */
export class CocoonSetIdentityError extends BrandedError {}

/** How to point the slots resource at the CocoonSet's cluster, for error messages. */
const KUBECONFIG_HINT =
  "give the Fleet the Kubernetes provider its CocoonSet uses (the `provider` option: the slots resource then takes that provider's kubeconfig), or pass the same kubeconfig text as the Fleet's `kubeconfig` argument";

/**
 * Reads the CocoonSet the slots act on and checks it is the one the Fleet's CocoonSet
 * resource created (same uid): a kubeconfig that reaches another cluster than the Kubernetes
 * provider must not converge, or release, a same-named CocoonSet there. A missing CocoonSet
 * is an error unless `missingOk` (destroy: already gone).
 */
export async function verifiedCocoonSet(
  client: KubeClient,
  p: Pick<SlotsInputs, "namespace" | "name" | "uid">,
  opts: { missingOk: boolean; action: string },
): Promise<CocoonSet | undefined> {
  const cs = await readCocoonSet(client, p.namespace, p.name);
  if (!p.uid || isUnknown(p.uid)) return cs;
  if (!cs) {
    if (opts.missingOk) return undefined;
    throw new CocoonSetIdentityError(
      `[kubeconfig] cannot ${opts.action}: the CocoonSet ${p.namespace}/${p.name} (uid ${p.uid}) that this Fleet created is not in the cluster the slots resource's kubeconfig reaches (${client.server}), so that kubeconfig points at another cluster than the CocoonSet's Kubernetes provider; ${KUBECONFIG_HINT}`,
    );
  }
  if (cs.metadata.uid !== p.uid) {
    throw new CocoonSetIdentityError(
      `[kubeconfig] cannot ${opts.action}: the CocoonSet ${p.namespace}/${p.name} in the cluster the slots resource's kubeconfig reaches (${client.server}) has uid ${cs.metadata.uid}, not ${p.uid}, the one this Fleet created; nothing was changed. Either that kubeconfig points at another cluster than the CocoonSet's Kubernetes provider (${KUBECONFIG_HINT}), or the CocoonSet was deleted and recreated outside Pulumi (then \`pulumi up --refresh\` takes the new one over; when it lost this Fleet's created-by annotation, set \`adoptCocoonSet: true\` on the Fleet first)`,
    );
  }
  return cs;
}

/**
 * `up` converges only a CocoonSet that carries this Fleet's token (its claim guard and the
 * CocoonSet's apply, both before this, make sure of it): another token means another stack
 * took it over between the two.
 */
function assertOwned(
  cs: CocoonSet | undefined,
  inputs: Pick<SlotsInputs, "namespace" | "name" | "ownerToken">,
): void {
  if (!cs || !inputs.ownerToken || isUnknown(inputs.ownerToken)) return;
  const theirs = tokenOf(cs);
  if (theirs === inputs.ownerToken) return;
  throw new CocoonSetIdentityError(
    `[adoptCocoonSet] cannot create or update the slots: the CocoonSet ${inputs.namespace}/${inputs.name} carries ${
      theirs ? `the ownership token ${shortToken(theirs)}…` : "no ownership token"
    }, not this Fleet's ${shortToken(inputs.ownerToken)}…; nothing was changed (another stack holds it: set \`adoptCocoonSet: true\` to take it over)`,
  );
}

/** The registry client of the inputs' `registry`, if one is given. */
function registryOf(
  inputs: Pick<SlotsInputs, "registry" | "registryCa" | "registryInsecure" | "registryCredentials">,
): OciRegistry | undefined {
  const cred = inputs.registryCredentials;
  return typeof inputs.registry === "string" && inputs.registry !== ""
    ? new OciRegistry(parseRegistryAddress(inputs.registry), {
        ca: inputs.registryCa || undefined,
        insecure: inputs.registryInsecure === true,
        // The Fleet's own credentials, else the Docker keychain (the client's default).
        ...(cred ? { keychain: { resolve: () => Promise.resolve(cred) } } : {}),
      })
    : undefined;
}

async function apply(
  inputs: SlotsInputs,
  olds?: SlotsOutputs,
): Promise<{ id: string; outs: SlotsOutputs }> {
  const id = `${inputs.namespace}/${inputs.name}`;
  const timeoutMs = (inputs.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS) * 1000;
  // One budget for the convergence and the readiness wait after it.
  const deadline = Date.now() + timeoutMs;
  const client = KubeClient.fromString(inputs.kubeconfig);
  try {
    const before = await verifiedCocoonSet(client, inputs, {
      missingOk: false,
      action: "create or update the slots",
    });
    assertOwned(before, inputs);
    // The credentials `destroy` will need, kept in the cluster rather than the outputs.
    const secret = credentialsSecretName(inputs.name);
    if (inputs.registryCredentials) {
      await writeCredentialsSecret(
        client,
        inputs.namespace,
        secret,
        inputs.registryCredentials,
        inputs.ownerToken,
      );
    } else if (olds?.registryCredentialsSecret) {
      await deleteCredentialsSecret(client, inputs.namespace, olds.registryCredentialsSecret);
    }
    const registry = registryOf(inputs);
    const suspend = inputs.spec.suspend === true;
    if (suspend && !registry) {
      console.log(
        `${id}: spec.suspend is set but the Fleet has no \`registry\`: the slots resource does not act on it (docs/behaviour.md §3.15)`,
      );
    }
    // A wake waits for the VMs when the last deploy was suspended, or when pods still carry
    // a hibernate request (a wake an earlier `up` did not finish).
    const wake =
      !!registry &&
      !suspend &&
      (olds?.spec?.suspend === true ||
        (before !== undefined && (await listFleetPods(client, before)).some(asksHibernate)));
    const total = Object.keys(inputs.slots).length;
    let lastReport = 0;
    const result = await converge(client, inputs.namespace, inputs.name, {
      fanOut: inputs.fanOut,
      registry,
      timeoutMs,
      hooks: {
        progress(done, batch) {
          if (done === batch || Date.now() - lastReport > 2000) {
            lastReport = Date.now();
            console.log(
              `${inputs.name}: sub-agent slots ${done}/${batch} created (fleet of ${total} slots)`,
            );
          }
        },
      },
    });
    let cocoonSet = result.cocoonSet;
    const errors = result.failures
      .filter((f) => !(registry && suspend && isSuspendRegistrySilence(f)))
      .map((f) => f.message);
    if (registry && (suspend || wake) && errors.length === 0) {
      // The registry's silence is waited out (the lifecycle wait retries it until its timeout).
      const waited = await awaitLifecycle(
        client,
        inputs.namespace,
        inputs.name,
        suspend ? "suspend" : "wake",
        {
          pass: { fanOut: inputs.fanOut, registry },
          timeoutMs: (inputs.suspendTimeoutSeconds ?? DEFAULT_SUSPEND_TIMEOUT_SECONDS) * 1000,
          timeoutField: "suspendTimeoutSeconds",
          log: (line) => console.log(line),
        },
      );
      cocoonSet = waited.cocoonSet;
    }
    if (errors.length > 0) {
      throw new SlotsInitError(id, await observe(client, inputs, cocoonSet), errors);
    }
    // A suspended fleet asks no member to run (deploy-view.ts), so it is not waited for.
    if (inputs.skipAwait !== true && !suspend) {
      try {
        const ready = await awaitReady(client, inputs.namespace, inputs.name, {
          pass: { fanOut: inputs.fanOut, registry },
          timeoutMs: Math.max(1000, deadline - Date.now()),
          timeoutField: "timeoutSeconds",
          budgetSeconds: Math.round(timeoutMs / 1000),
          log: (line) => console.log(line),
        });
        cocoonSet = ready.cocoonSet;
      } catch (e) {
        if (!DeployWaitTimeoutError.isInstance(e) && !DeployWaitFailedError.isInstance(e)) throw e;
        // The pods exist: Pulumi keeps the resource, with what the cluster has now, and the
        // next `up` updates it (and waits again).
        const now = (await readCocoonSet(client, inputs.namespace, inputs.name)) ?? cocoonSet;
        throw new SlotsInitError(id, await observe(client, inputs, now), [e.message], e.message);
      }
    }
    return { id, outs: await observe(client, inputs, cocoonSet) };
  } finally {
    client.close();
  }
}

/** Creates the slots: the engine's full pass, converged (main agent first, then the fan-out). */
export async function create(inputs: SlotsInputs): Promise<{ id: string; outs: SlotsOutputs }> {
  return apply(inputs);
}

/** Updates the slots: the same convergence against the CocoonSet's new spec. */
export async function update(
  _id: string,
  olds: SlotsOutputs,
  news: SlotsInputs,
): Promise<{ outs: SlotsOutputs }> {
  const { outs } = await apply(news, olds);
  return { outs };
}

/** Deletes the CocoonSet and everything it owns, and returns once all of it is gone. */
export async function remove(id: string, props: SlotsOutputs): Promise<void> {
  const client = storedClient(props, "destroy", id);
  try {
    // Another token on the CocoonSet: another resource holds it now (a Fleet moved with
    // `adoptCocoonSet`, another stack that adopted it); this one releases nothing.
    const found = await readCocoonSet(client, props.namespace, props.name);
    const decision = deleteDecision(found, props.ownerToken);
    if (decision === "handed-over" || decision === "untokened") {
      console.log(
        `${id}: leaving the fleet: the CocoonSet carries ${
          tokenOf(found)
            ? `the ownership token ${shortToken(tokenOf(found)!)}…`
            : "no ownership token"
        }, not this Fleet's ${shortToken(props.ownerToken!)}…, so another resource holds it now` +
          (decision === "untokened"
            ? "; if it is still this stack's, run `pulumi up` (it writes the token back), then destroy again"
            : ""),
      );
      return;
    }
    const cs = await verifiedCocoonSet(client, props, {
      missingOk: true,
      action: "release the fleet",
    });
    if (!cs) return;
    // The registry of the last `up`: with it the VMs' snapshot tags are dropped per
    // `snapshotPolicy` once the pods are gone (docs/behaviour.md §3.13).
    const credentials =
      props.registryCredentials ??
      (props.registryCredentialsSecret
        ? await readCredentialsSecret(client, props.namespace, props.registryCredentialsSecret)
        : undefined);
    const result = await deleteFleet(client, props.namespace, props.name, {
      timeoutMs: (props.releaseTimeoutSeconds ?? DEFAULT_RELEASE_TIMEOUT_SECONDS) * 1000,
      registry: registryOf({ ...props, registryCredentials: credentials }),
      log: (level, msg, fields) => {
        if (level === "warn")
          console.log(`${id}: ${msg}${fields ? ` ${JSON.stringify(fields)}` : ""}`);
      },
    });
    if (result?.snapshotTags) {
      console.log(
        `${id}: snapshot tags dropped: ${result.snapshotTags.dropped}, left in the registry: ${result.snapshotTags.failed}`,
      );
    }
    if (props.registryCredentialsSecret) {
      await deleteCredentialsSecret(client, props.namespace, props.registryCredentialsSecret);
    }
  } catch (e) {
    throw explainStoredKubeconfig(e, "destroy", id, client.server, props.kubeconfigFile);
  } finally {
    client.close();
  }
}

/** Refresh: the live slots, as inputs too, so drift made outside Pulumi shows in the diff. */
export async function read(
  id: string,
  props: SlotsOutputs,
): Promise<{ id: string; props: SlotsOutputs; inputs: SlotsOutputs }> {
  const client = storedClient(props, "refresh", id);
  try {
    const found = await readCocoonSet(client, props.namespace, props.name);
    // Another uid: not this Fleet's CocoonSet (another cluster, or recreated by hand). Its pods
    // are not this fleet's: read the slots of the uid the state knows.
    if (found && props.uid && found.metadata.uid !== props.uid) {
      process.stderr.write(
        `cocoonset: the CocoonSet ${props.namespace}/${props.name} at ${client.server} has uid ${found.metadata.uid}, not ${props.uid}, the one this Fleet created; its pods are not counted as this fleet's\n`,
      );
    }
    const cs =
      found && (!props.uid || found.metadata.uid === props.uid)
        ? found
        : cocoonSetFrom(props.namespace, props.name, props.spec, props.uid);
    const pods = await listFleetPods(client, cs);
    const live = liveSlots(cs, pods, desiredSlots(props.namespace, props.name, props.spec));
    const inputs: SlotsOutputs = { ...props };
    delete (inputs as Partial<SlotsOutputs>).pods;
    delete (inputs as Partial<SlotsOutputs>).mainVmName;
    delete (inputs as Partial<SlotsOutputs>).phase;
    delete (inputs as Partial<SlotsOutputs>).status;
    return {
      id,
      props: { ...props, slots: live.slots, pods: live.status },
      inputs: { ...inputs, slots: live.slots },
    };
  } catch (e) {
    throw explainStoredKubeconfig(e, "refresh", id, client.server, props.kubeconfigFile);
  } finally {
    client.close();
  }
}

/** A client from the kubeconfig the last `pulumi up` stored (its text, or its file read again). */
function storedClient(
  props: SlotsOutputs,
  operation: "destroy" | "refresh",
  id: string,
): KubeClient {
  try {
    return KubeClient.fromString(kubeconfigOfState(props));
  } catch (e) {
    throw explainStoredKubeconfig(e, operation, id, undefined, props.kubeconfigFile);
  }
}

/**
 * `destroy` and `refresh` use the kubeconfig stored by the last `pulumi up`. When it can no
 * longer reach or authenticate to its cluster (the cluster moved, was recreated, or its
 * credentials rotated), say so and how to get out; other errors pass through unchanged.
 */
export function explainStoredKubeconfig(
  e: unknown,
  operation: "destroy" | "refresh",
  id: string,
  server: string | undefined,
  file?: string,
): unknown {
  let cause: string;
  if (KubeApiError.isInstance(e) && e.status === 0) cause = "cannot reach it";
  else if (KubeApiError.isInstance(e) && e.status === 401) cause = "it rejects the credentials";
  else if (KubeConfigError.isInstance(e)) cause = "its credentials cannot be used";
  else return e;
  return new Error(
    `${operation} of the slots of ${id} uses the kubeconfig the stack stored at its last \`pulumi up\`${file ? ` (the file ${file}, read again)` : ""}, and ${cause}${server ? ` (${server})` : ""}: ${errorMessage(e)}. ` +
      `If that cluster still holds the fleet under a new address or with new credentials, run \`pulumi up\` with the current kubeconfig first (it stores the new one), then \`pulumi ${operation}\` again. ` +
      `If that cluster is gone (for example \`cocoonset-dev cluster down\` then \`up\` starts a new, empty cluster), nothing of the fleet is left: remove the slots resource from the stack with \`pulumi state delete <its URN>\` (\`pulumi stack --show-urns\` lists them), then run \`pulumi ${operation}\` again.`,
    { cause: e },
  );
}
