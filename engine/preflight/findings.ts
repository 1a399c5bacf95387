/**
 * `cocoonset doctor`'s judgement, pure: what a cluster was seen to have ({@link DoctorFacts},
 * gathered by `gather.ts`) turned into findings, one line each with what to do. The rights a
 * deploy needs and the kind of a node are decided here too, so every rule is a table test.
 *
 * Severity: `error` blocks a deploy (the command exits 1), `warn` may (or blocks only some
 * programs: an Operator's rights for a program that deploys none), `ok` and `info` do not.
 */
import { NODE_LABELS } from "../spec/index.js";
import { VIRTUAL_KUBELET_TAINT } from "../spec/constants.js";
import { GROUP } from "../kube/api-names.js";

/** How much a finding matters. */
export type Severity = "ok" | "info" | "warn" | "error";

/** One line of the report. */
export interface Finding {
  /** The part of the cluster looked at: `apiserver`, `crd`, `controller`, `rbac`, `pool`, `registry`. */
  check: string;
  severity: Severity;
  /** What was seen and, when it is not ok, what to do. */
  message: string;
}

/** The oldest Kubernetes the CRDs work on: their validation rules (CEL) are GA from 1.29. */
const MIN_KUBERNETES = { major: 1, minor: 29 };

/** One right a deploy needs, asked of the apiserver as a SelfSubjectAccessReview. */
export interface AccessCheck {
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  /** Unset for a cluster-scoped resource. */
  namespace?: string;
  /** Which deploy step needs it. */
  for: string;
  /**
   * `fleet`: any Fleet deploy needs it; `forecast`: without it preview makes no capacity
   * forecast; `operator`: only a program that deploys an Operator needs it.
   */
  scope: "fleet" | "forecast" | "operator";
  /** Only `pulumi destroy` needs it (a deploy goes through without it, its destroy would not). */
  destroyOnly?: boolean;
}

/** The answer to one {@link AccessCheck}. */
export interface AccessFact {
  check: AccessCheck;
  allowed: boolean;
  /** The authorizer's reason, when it gave one. */
  reason?: string;
}

/** What a node is, for the agents' pods. */
export type NodeKind = "virtual-kubelet" | "simulated" | "kubelet";

/** One node of a pool. */
export interface NodeFact {
  name: string;
  kind: NodeKind;
  ready: boolean;
  unschedulable: boolean;
  /** The node's allocatable (`cpu`, `memory`, `pods`), as the node reports it. */
  allocatable: Record<string, string>;
}

/** A CRD as found. */
export interface CrdFact {
  name: string;
  state: "missing" | "matches" | "differs" | "unreadable";
  /** Why it could not be read. */
  error?: string;
}

/** A controller Deployment as found. */
export interface ControllerFact {
  namespace: string;
  name: string;
  image: string;
  replicas: number;
  readyReplicas: number;
  updatedReplicas: number;
}

/** A registry call's outcome: done, or refused with the registry's status (0: no answer). */
export type RegistryCall = { ok: true } | { ok: false; status: number; error: string };

/** The snapshot registry as found. */
export interface RegistryFact {
  /** `host[:port][/prefix]`. */
  address: string;
  /** `host[:port]`, as the Docker keychain keys it. */
  host: string;
  /** Where the address came from (a flag, the environment, the controller's arguments). */
  from: string;
  /** `GET /v2/` without credentials: 200 or 401 means it speaks the registry API. */
  ping: RegistryCall;
  /** Whether the Docker keychain holds credentials for its host. */
  credentials: boolean | { error: string };
  /** A tag list read with the keychain's credentials. */
  pull?: RegistryCall;
  /** An upload started (and cancelled) with the keychain's credentials. */
  push?: RegistryCall;
}

/** Everything `cocoonset doctor` saw. */
export interface DoctorFacts {
  /** The kubeconfig's server and where the kubeconfig came from. */
  server: string;
  source: string;
  /** The namespace checked for the fleet's rights. */
  namespace: string;
  /** `GET /version`: the server's `gitVersion`, or why it did not answer. */
  apiServer: { version: string } | { error: string };
  crds: CrdFact[];
  /** The controller Deployments, or why they could not be listed. */
  controllers: { deployments: ControllerFact[] } | { error: string };
  access: AccessFact[];
  /** Per pool the fleet selects, its nodes (or why nodes could not be listed). */
  pools: { pool: string; nodes: NodeFact[] | { error: string } }[];
  /** Undefined when no registry was given or found. */
  registry?: RegistryFact;
}

/** The rights `pulumi up` and `pulumi destroy` of a Fleet in `namespace` use. */
function fleetAccess(namespace: string): AccessCheck[] {
  const fleet = (
    resource: string,
    verbs: string[],
    why: string,
    group = "",
    subresource?: string,
    destroyOnly: string[] = [],
  ): AccessCheck[] =>
    verbs.map((verb) => ({
      verb,
      group,
      resource,
      subresource,
      namespace,
      for: why,
      scope: "fleet",
      ...(destroyOnly.includes(verb) ? { destroyOnly: true } : {}),
    }));
  return [
    ...fleet(
      "cocoonsets",
      ["get", "list", "create", "patch", "delete"],
      "pulumi up creates and updates the CocoonSet, destroy deletes it",
      GROUP,
      undefined,
      ["delete"],
    ),
    ...fleet("cocoonsets", ["patch"], "the pass writes the fleet's status", GROUP, "status"),
    ...fleet(
      "cocoonsets",
      ["update"],
      "the agents' pods block their CocoonSet's deletion (ownerReferences)",
      GROUP,
      "finalizers",
    ),
    ...fleet(
      "pods",
      ["get", "list", "watch", "create", "delete", "patch"],
      "pulumi up creates the agents' pods (and preview sends them as dry runs), destroy deletes them",
    ),
    ...fleet(
      "jobs",
      ["list", "delete"],
      "destroy releases the Jobs the agents own",
      "batch",
      undefined,
      ["list", "delete"],
    ),
    ...fleet(
      "configmaps",
      ["list", "delete"],
      "destroy releases the agents' ConfigMaps",
      "",
      undefined,
      ["list", "delete"],
    ),
    ...fleet("resourcequotas", ["list"], "preview sums the pods against the namespace's quotas"),
    ...fleet(
      "cocoonhibernations",
      ["list"],
      "the pass reads the pods' hibernation requests",
      GROUP,
    ),
  ];
}

/** The rights an Operator's deploy and destroy use, its objects in `operatorNamespace`. */
function operatorAccess(operatorNamespace: string): AccessCheck[] {
  const operator = (
    resource: string,
    verbs: string[],
    why: string,
    group: string,
    clusterScoped = false,
  ): AccessCheck[] =>
    verbs.map((verb) => ({
      verb,
      group,
      resource,
      ...(clusterScoped ? {} : { namespace: operatorNamespace }),
      for: why,
      scope: "operator",
      ...(verb === "delete" ? { destroyOnly: true } : {}),
    }));
  return [
    ...operator(
      "customresourcedefinitions",
      ["get", "create", "patch", "delete"],
      "the Operator installs the CocoonSet and CocoonHibernation CRDs",
      "apiextensions.k8s.io",
      true,
    ),
    ...operator("namespaces", ["create"], "the Operator creates its namespace", "", true),
    ...operator(
      "clusterroles",
      ["create", "delete"],
      "the Operator grants its controller a ClusterRole",
      "rbac.authorization.k8s.io",
      true,
    ),
    ...operator(
      "clusterrolebindings",
      ["create", "delete"],
      "the Operator binds its ClusterRole",
      "rbac.authorization.k8s.io",
      true,
    ),
    ...operator("serviceaccounts", ["create", "delete"], "the controller's ServiceAccount", ""),
    ...operator(
      "roles",
      ["create", "delete"],
      "the controller's Lease Role",
      "rbac.authorization.k8s.io",
    ),
    ...operator(
      "rolebindings",
      ["create", "delete"],
      "the controller's Lease RoleBinding",
      "rbac.authorization.k8s.io",
    ),
    ...operator(
      "deployments",
      ["get", "create", "patch", "delete"],
      "the controller Deployment (pulumi up awaits its rollout)",
      "apps",
    ),
  ];
}

/**
 * The rights `pulumi up` and `pulumi destroy` of a Fleet in `namespace` use (the CocoonSet
 * through pulumi-kubernetes, then the engine's pass, preview's dry runs and forecast, and the
 * owner release), and those of an Operator in `operatorNamespace` (its CRDs, namespace,
 * ServiceAccount, RBAC and Deployment).
 */
export function requiredAccess(namespace: string, operatorNamespace: string): AccessCheck[] {
  return [
    ...fleetAccess(namespace),
    {
      verb: "list",
      group: "",
      resource: "nodes",
      for: "preview forecasts room on the nodes (capacityCheck) and makes no forecast without it",
      scope: "forecast",
    },
    ...operatorAccess(operatorNamespace),
  ];
}

/** The kubectl spelling of a checked resource: `pods`, `cocoonsets/status`, `jobs.batch`. */
export function resourceName(c: Pick<AccessCheck, "group" | "resource" | "subresource">): string {
  const base = c.group ? `${c.resource}.${c.group}` : c.resource;
  return c.subresource ? `${base}/${c.subresource}` : base;
}

/**
 * What a node is to the agents' pods: a virtual kubelet (vk-cocoon registers its nodes with
 * the `virtual-kubelet.io/provider` taint, which the pods tolerate; some virtual kubelets
 * label them `type=virtual-kubelet` instead), a simulated node (kwok's, as the embedded
 * cluster's: the `kwok.x-k8s.io/node` annotation), or an ordinary kubelet, which would try to
 * run the pods' placeholder image instead of a VM.
 */
export function nodeKind(node: {
  metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: { taints?: { key: string }[] };
}): NodeKind {
  if (node.spec?.taints?.some((t) => t.key === VIRTUAL_KUBELET_TAINT)) return "virtual-kubelet";
  if (node.metadata.labels?.type === "virtual-kubelet") return "virtual-kubelet";
  if (node.metadata.annotations?.["kwok.x-k8s.io/node"] !== undefined) return "simulated";
  return "kubelet";
}

/** `v1.36.3`, `v1.30.2-eks-1234` → major and minor, or undefined when unreadable. */
export function parseKubeVersion(v: string): { major: number; minor: number } | undefined {
  const m = /^v?(\d+)\.(\d+)/.exec(v);
  return m ? { major: Number(m[1]), minor: Number(m[2]) } : undefined;
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

function apiServerFindings(f: DoctorFacts): Finding[] {
  if ("error" in f.apiServer)
    return [
      {
        check: "apiserver",
        severity: "error",
        message: `${f.server} does not answer (${f.apiServer.error}): check the kubeconfig (${f.source}) and --context`,
      },
    ];
  const v = parseKubeVersion(f.apiServer.version);
  const min = `${MIN_KUBERNETES.major}.${MIN_KUBERNETES.minor}`;
  if (
    v &&
    (v.major < MIN_KUBERNETES.major ||
      (v.major === MIN_KUBERNETES.major && v.minor < MIN_KUBERNETES.minor))
  )
    return [
      {
        check: "apiserver",
        severity: "error",
        message: `${f.server} runs Kubernetes ${f.apiServer.version}: the CRDs' validation rules need ${min} or newer; upgrade the cluster`,
      },
    ];
  return [
    {
      check: "apiserver",
      severity: "ok",
      message: `${f.server} answers: Kubernetes ${f.apiServer.version}`,
    },
  ];
}

const INSTALL_CRDS =
  "deploy an Operator (its `pulumi up` installs them), or `cocoonset manifests | kubectl apply --server-side -f -`";

function crdFindings(f: DoctorFacts): Finding[] {
  return f.crds.map((c): Finding => {
    switch (c.state) {
      case "matches":
        return { check: "crd", severity: "ok", message: `${c.name} is this version's` };
      case "differs":
        return {
          check: "crd",
          severity: "warn",
          message: `${c.name} differs from this version's: ${INSTALL_CRDS} to update it`,
        };
      case "missing":
        return {
          check: "crd",
          severity: "error",
          message: `${c.name} is not installed (a Fleet needs the CocoonSet CRD, the controller both): ${INSTALL_CRDS}`,
        };
      case "unreadable":
        return {
          check: "crd",
          severity: "warn",
          message: `${c.name} cannot be read (${c.error ?? "no answer"}): ask for get on customresourcedefinitions, or check it with a cluster admin`,
        };
    }
  });
}

function controllerFindings(f: DoctorFacts): Finding[] {
  if ("error" in f.controllers)
    return [
      {
        check: "controller",
        severity: "warn",
        message: `the controller Deployments cannot be listed (${f.controllers.error}): check them with kubectl -n <namespace> get deploy`,
      },
    ];
  if (f.controllers.deployments.length === 0)
    return [
      {
        check: "controller",
        severity: "warn",
        message:
          "no controller Deployment (label app.kubernetes.io/part-of=cocoonset): fleets converge at each `pulumi up` only; deploy an Operator, or `cocoonset manifests --image REF`, to keep them converged",
      },
    ];
  return f.controllers.deployments.map((d): Finding => {
    const where = `${d.namespace}/${d.name}`;
    const ready = `${d.readyReplicas}/${d.replicas} ready`;
    if (d.replicas > 0 && d.readyReplicas >= d.replicas)
      return {
        check: "controller",
        severity: "ok",
        message: `${where} ${ready}, image ${d.image}`,
      };
    return {
      check: "controller",
      severity: "warn",
      message: `${where} ${ready}, image ${d.image}: the cluster may not pull it (an image pushed with \`cocoonset-dev image build --push\`, and imagePullSecrets) — kubectl -n ${d.namespace} describe deploy/${d.name}`,
    };
  });
}

/** One missing right (or several verbs on one resource) as a line with what to ask for. */
function accessLine(c: AccessCheck, verbs: string[], reason?: string, inDeploy = false): string {
  const where = c.namespace ? ` in namespace ${c.namespace}` : " (cluster-wide)";
  const grant = c.namespace ? "a Role (or ClusterRole) bound to you" : "a ClusterRole bound to you";
  const what =
    c.scope === "operator" && !inDeploy
      ? `, which only a program that deploys an Operator needs (${c.for})`
      : `: ${c.for}`;
  return `you cannot ${verbs.join(", ")} ${resourceName(c)}${where}${what}; ask for ${grant} with ${verbs.length === 1 ? "verb" : "verbs"} ${verbs.join(", ")} on ${resourceName(c)}${reason ? ` [${reason}]` : ""}`;
}

function accessFindings(f: DoctorFacts): Finding[] {
  const missing = f.access.filter((a) => !a.allowed);
  const line = (c: AccessCheck, verbs: string[], reason?: string): Finding => ({
    check: "rbac",
    severity: c.scope === "fleet" ? "error" : "warn",
    message: accessLine(c, verbs, reason),
  });
  // A Fleet's rights one line per missing verb; an Operator's, which a platform team often
  // holds instead of the fleet's owner, one line per resource.
  const out: Finding[] = missing
    .filter((a) => a.check.scope !== "operator")
    .map((a) => line(a.check, [a.check.verb], a.reason));
  const byResource = new Map<string, AccessFact[]>();
  for (const a of missing.filter((x) => x.check.scope === "operator")) {
    const key = `${resourceName(a.check)} ${a.check.namespace ?? ""}`;
    byResource.set(key, [...(byResource.get(key) ?? []), a]);
  }
  for (const group of byResource.values())
    out.push(
      line(
        group[0].check,
        group.map((a) => a.check.verb),
      ),
    );
  const fleetChecks = f.access.filter((a) => a.check.scope === "fleet");
  const opChecks = f.access.filter((a) => a.check.scope === "operator");
  if (fleetChecks.length > 0 && fleetChecks.every((a) => a.allowed))
    out.unshift({
      check: "rbac",
      severity: "ok",
      message: `you may deploy and destroy a Fleet in namespace ${f.namespace} (${plural(fleetChecks.length, "right")} checked)`,
    });
  if (opChecks.length > 0 && opChecks.every((a) => a.allowed))
    out.push({
      check: "rbac",
      severity: "ok",
      message: `you may deploy and destroy an Operator (${plural(opChecks.length, "right")} checked)`,
    });
  return out;
}

/** `cpu 8, memory 16Gi, pods 110` of a node's allocatable. */
function allocatableText(a: Record<string, string>): string {
  return ["cpu", "memory", "pods"]
    .filter((k) => a[k] !== undefined)
    .map((k) => `${k} ${a[k]}`)
    .join(", ");
}

function poolFindings(f: DoctorFacts): Finding[] {
  const out: Finding[] = [];
  for (const { pool, nodes } of f.pools) {
    const label = `${NODE_LABELS.pool}=${pool}`;
    if ("error" in nodes) {
      out.push({
        check: "pool",
        severity: "warn",
        message: `the nodes of pool ${pool} cannot be listed (${nodes.error}): ask for list on nodes, or check \`kubectl get nodes -l ${label}\` with a cluster admin`,
      });
      continue;
    }
    if (nodes.length === 0) {
      out.push({
        check: "pool",
        severity: "error",
        message: `no node in pool ${pool} (label ${label}): the agents' pods would stay Pending; run vk-cocoon nodes for the pool and label them: kubectl label node NODE ${label}`,
      });
      continue;
    }
    const agentNodes = nodes.filter((n) => n.kind !== "kubelet");
    const usable = agentNodes.filter((n) => n.ready && !n.unschedulable);
    const kinds = [...new Set(agentNodes.map((n) => n.kind))]
      .map((k) =>
        k === "simulated" ? "simulated node-agent (kwok)" : "vk-cocoon (virtual-kubelet)",
      )
      .join(" and ");
    const each = nodes.map((n) => `${n.name} [${allocatableText(n.allocatable)}]`).join("; ");
    if (agentNodes.length === 0) {
      out.push({
        check: "pool",
        severity: "error",
        message: `pool ${pool} has ${plural(nodes.length, "node")} but none runs the node agent (no ${VIRTUAL_KUBELET_TAINT} taint): an ordinary kubelet cannot run the agents' VMs; label vk-cocoon nodes with ${label} instead`,
      });
      continue;
    }
    if (usable.length === 0) {
      out.push({
        check: "pool",
        severity: "error",
        message: `pool ${pool}: none of its ${plural(agentNodes.length, "node-agent node")} is Ready and schedulable; check kubectl describe node (and uncordon)`,
      });
      continue;
    }
    out.push({
      check: "pool",
      severity: "ok",
      message: `pool ${pool}: ${plural(usable.length, "node")} Ready, ${kinds}: ${each}`,
    });
    const other = nodes.filter((n) => n.kind === "kubelet");
    if (other.length > 0)
      out.push({
        check: "pool",
        severity: "warn",
        message: `pool ${pool} also holds ${plural(other.length, "ordinary kubelet node")} (${other.map((n) => n.name).join(", ")}): agents scheduled there cannot run; remove ${NODE_LABELS.pool} from them`,
      });
    const down = agentNodes.filter((n) => !n.ready || n.unschedulable);
    if (down.length > 0)
      out.push({
        check: "pool",
        severity: "warn",
        message: `pool ${pool}: ${down.map((n) => `${n.name} (${n.ready ? "cordoned" : "not Ready"})`).join(", ")} take no agents`,
      });
  }
  return out;
}

function registryFindings(f: DoctorFacts): Finding[] {
  const r = f.registry;
  if (!r)
    return [
      {
        check: "registry",
        severity: "info",
        message:
          "no snapshot registry given (--oci-registry, OCI_REGISTRY, or the controller's --oci-registry): suspend, wake and migration need one",
      },
    ];
  const at = `${r.address} (${r.from})`;
  if (!r.ping.ok && r.ping.status === 0)
    return [
      {
        check: "registry",
        severity: "error",
        message: `the snapshot registry ${at} does not answer (${r.ping.error}): check the address, the network, and --oci-registry-ca-file for a private CA`,
      },
    ];
  const out: Finding[] = [];
  if (!r.ping.ok)
    out.push({
      check: "registry",
      severity: "error",
      message: `${at} answers GET /v2/ with HTTP ${r.ping.status}: it does not speak the OCI distribution API; check the address`,
    });
  else out.push({ check: "registry", severity: "ok", message: `${at} answers` });
  if (typeof r.credentials === "object")
    out.push({
      check: "registry",
      severity: "error",
      message: `the Docker keychain cannot be read (${r.credentials.error}): fix the Docker config (--oci-registry-docker-config, $DOCKER_CONFIG)`,
    });
  const login = `docker login ${r.host} (or --oci-registry-docker-config DIR)`;
  // The registry's JSON error body adds nothing to the status for a person.
  const short = (error: string) => error.replace(/\s*[{[][\s\S]*$/, "");
  const refused = (call: RegistryCall & { ok: false }, what: string): Finding => ({
    check: "registry",
    severity: "error",
    message:
      call.status === 401
        ? r.credentials === true
          ? `${at} refuses the Docker keychain's credentials to ${what} (${short(call.error)}): log in again, ${login}`
          : `${at} asks for credentials to ${what} and the Docker keychain has none for it: ${login}`
        : call.status === 403
          ? `${at} denies ${what} to these credentials (HTTP 403): grant them push, pull and delete on the snapshots' repositories`
          : `${at} failed to ${what} (${short(call.error)})`,
  });
  if (r.pull && !r.pull.ok) out.push(refused(r.pull, "read tags"));
  else if (r.push && !r.push.ok) out.push(refused(r.push, "push"));
  else if (r.pull && r.push)
    out.push({
      check: "registry",
      severity: "ok",
      message: `${at} lets ${r.credentials === true ? "the Docker keychain's credentials" : "anonymous callers"} read tags and push`,
    });
  return out;
}

/** What a deploy's preview refuses, and what it only warns of, from its rights and pools. */
export interface DeployPreflight {
  refusals: string[];
  warnings: string[];
}

/**
 * The findings of `cocoonset doctor` that concern one deploy, as its guard's check reports
 * them: a missing right the deploy uses refuses it (one line per resource, its verbs
 * together), one only `pulumi destroy` or the capacity forecast uses is a warning; a pool
 * with no node that can run the agents refuses it (a warning when `poolsBlock` is false,
 * as with `capacityCheck: off`).
 */
export function deployPreflight(
  access: readonly AccessFact[],
  pools: DoctorFacts["pools"],
  opts: { poolsBlock: boolean },
): DeployPreflight {
  const out: DeployPreflight = { refusals: [], warnings: [] };
  const groups = new Map<string, AccessFact[]>();
  for (const a of access.filter((x) => !x.allowed)) {
    const soft = a.check.destroyOnly === true || a.check.scope === "forecast";
    const key = `${soft} ${resourceName(a.check)} ${a.check.namespace ?? ""}`;
    groups.set(key, [...(groups.get(key) ?? []), a]);
  }
  for (const group of groups.values()) {
    const c = group[0].check;
    const line = accessLine(
      c,
      group.map((a) => a.check.verb),
      group[0].reason,
      true,
    );
    if (c.scope === "forecast") out.warnings.push(`${line} (preview makes no capacity forecast)`);
    else if (c.destroyOnly) out.warnings.push(`${line} (pulumi destroy would fail without it)`);
    else out.refusals.push(line);
  }
  for (const f of poolFindings({ pools } as DoctorFacts)) {
    if (f.severity === "error") (opts.poolsBlock ? out.refusals : out.warnings).push(f.message);
    else if (f.severity === "warn") out.warnings.push(f.message);
  }
  return out;
}

/** The findings, in the order of the report: apiserver, CRDs, controller, rights, pools, registry. */
export function doctorFindings(f: DoctorFacts): Finding[] {
  const api = apiServerFindings(f);
  // Nothing else can be known of a server that does not answer.
  if ("error" in f.apiServer) return [...api, ...registryFindings(f)];
  return [
    ...api,
    ...crdFindings(f),
    ...controllerFindings(f),
    ...accessFindings(f),
    ...poolFindings(f),
    ...registryFindings(f),
  ];
}

/** True when a finding blocks a deploy. */
export function blocks(findings: readonly Finding[]): boolean {
  return findings.some((x) => x.severity === "error");
}

/** The report as text: one line per finding, `ok`/`info`/`warn`/`error` first. */
export function renderFindings(findings: readonly Finding[]): string {
  const width = Math.max(...findings.map((x) => x.check.length));
  const lines = findings.map(
    (x) => `${x.severity.toUpperCase().padEnd(5)} ${x.check.padEnd(width)}  ${x.message}`,
  );
  const errors = findings.filter((x) => x.severity === "error").length;
  const warns = findings.filter((x) => x.severity === "warn").length;
  lines.push(
    errors > 0
      ? `${plural(errors, "blocking problem")}, ${plural(warns, "warning")}`
      : `nothing blocks a deploy${warns > 0 ? ` (${plural(warns, "warning")})` : ""}`,
  );
  return lines.join("\n");
}
