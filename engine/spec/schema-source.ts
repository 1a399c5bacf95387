// The one schema of the CocoonSet resource. The CRD (YAML and JSON), the TypeScript types and
// the validator are all derived from the objects below, so they cannot disagree.
// The shape follows Kubernetes' structural-schema rules (apiextensions.k8s.io/v1).
// Behaviour: docs/behaviour.md §1.
import { MAX_REPLICAS, MAX_TOOLBOXES } from "./constants.js";
import { MAX_QUANTITY, QUANTITY_MAX_EXPONENT_DIGITS, QUANTITY_MAX_LENGTH } from "./quantity.js";

/** A CEL rule the apiserver evaluates; {@link validateCocoonSetSpec} mirrors each one in JS. */
export interface CelRule {
  /** CEL expression that must hold. */
  rule: string;
  /** Message the apiserver returns when it does not. */
  message: string;
}

/** One node of an OpenAPI v3 structural schema, as Kubernetes' JSONSchemaProps spells it. */
export interface SchemaNode {
  type?: "object" | "array" | "string" | "integer" | "number" | "boolean";
  description?: string;
  properties?: Record<string, SchemaNode>;
  additionalProperties?: SchemaNode;
  items?: SchemaNode;
  required?: string[];
  enum?: string[];
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  maxItems?: number;
  maxProperties?: number;
  pattern?: string;
  format?: string;
  anyOf?: SchemaNode[];
  "x-kubernetes-int-or-string"?: boolean;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  "x-kubernetes-list-type"?: "atomic" | "set" | "map";
  "x-kubernetes-list-map-keys"?: string[];
  "x-kubernetes-map-type"?: "atomic" | "granular";
  "x-kubernetes-validations"?: CelRule[];
}

/** DNS-1123 label: lowercase alphanumerics and '-', alphanumeric at both ends. */
export const DNS_LABEL_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/** Kubernetes label value: empty, or alphanumeric at both ends with '-', '_', '.' inside. */
export const LABEL_VALUE_PATTERN = "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
/**
 * Non-negative resource quantity such as `10Gi`, `500m`, `1.5` or `1e3`: Kubernetes' own
 * syntax, with an exponent of at most three digits (see engine/spec/quantity.ts).
 */
export const QUANTITY_PATTERN = `^\\+?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,${QUANTITY_MAX_EXPONENT_DIGITS}})?$`;
/** Largest quantity written as a JSON number: 2^53-1, the last integer a double holds exactly. */
const MAX_INTEGER_QUANTITY = Number.MAX_SAFE_INTEGER;
/** The CEL rule bounding a quantity string's value (the pattern keeps `quantity()` cheap). */
export const QUANTITY_BOUND_RULE =
  `type(self) != string || !self.matches(r'${QUANTITY_PATTERN}') || ` +
  `quantity(self).compareTo(quantity('${MAX_QUANTITY}')) < 0`;
/** Text with no whitespace (an image reference); empty passes unless minLength says otherwise. */
export const NO_WHITESPACE_PATTERN = "^[^ \\t\\n\\v\\f\\r]*$";
/**
 * An image reference: printable ASCII without spaces (`!` to `~`), as every reference grammar
 * (registry host, repository path, tag, digest) is. Refuses control characters (an ANSI
 * escape, BEL), whitespace and every non-ASCII character (a right-to-left override, a
 * zero-width space), which would otherwise reach logs, events and `kubectl` output.
 */
export const IMAGE_PATTERN = "^[!-~]*$";
/**
 * Longest CocoonSet name: it is the value of the pods' `cocoonset.cocoonstack.io/name` label,
 * and label values have at most 63 characters.
 */
export const MAX_COCOONSET_NAME_LENGTH = 63;
/** DNS-1123 subdomain: the apiserver's rule for object names (ServiceAccounts, ConfigMaps...). */
export const DNS_SUBDOMAIN_PATTERN =
  "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/** A DNS-1123 subdomain, or empty. */
export const OPTIONAL_DNS_SUBDOMAIN_PATTERN = `^(${DNS_SUBDOMAIN_PATTERN.slice(1, -1)})?$`;
/** Longest name of an object the pods refer to (a DNS-1123 subdomain). */
export const MAX_OBJECT_NAME_LENGTH = 253;
/** Longest free-text string in the spec (image references, network names, VM ids). */
const MAX_TEXT_LENGTH = 4096;
/** A name that parses as a (decimal) integer. */
export const INTEGER_NAME_PATTERN = "^[0-9]+$";

/** Default node pool. */
export const DEFAULT_NODE_POOL = "default";
/** Default snapshot policy. */
export const DEFAULT_SNAPSHOT_POLICY = "always";
/** Default hibernate policy. */
const DEFAULT_HIBERNATE_POLICY = "retain";
/** Default agent mode. */
export const DEFAULT_AGENT_MODE = "clone";
/** Default toolbox mode. */
export const DEFAULT_TOOLBOX_MODE = "run";
/** Default guest OS. */
export const DEFAULT_OS = "linux";
/** Default hypervisor backend. */
export const DEFAULT_BACKEND = "cloud-hypervisor";
/** Default number of sub-agents. */
const DEFAULT_REPLICAS = 0;

const string = (description: string, extra: Partial<SchemaNode> = {}): SchemaNode => ({
  type: "string",
  description,
  ...extra,
});

const boolean = (description: string): SchemaNode => ({ type: "boolean", description });

const port = (description: string): SchemaNode => ({
  type: "integer",
  description,
  minimum: 0,
  maximum: 65535,
});

const quantity = (description: string): SchemaNode => ({
  description,
  "x-kubernetes-int-or-string": true,
  anyOf: [{ type: "integer" }, { type: "string" }],
  minimum: 0,
  maximum: MAX_INTEGER_QUANTITY,
  maxLength: QUANTITY_MAX_LENGTH,
  pattern: QUANTITY_PATTERN,
  "x-kubernetes-validations": [
    { rule: QUANTITY_BOUND_RULE, message: `must be less than ${MAX_QUANTITY} (2^63-1)` },
  ],
});

/** Snapshot policy values. */
const snapshotPolicySchema: SchemaNode = string(
  "Which VMs get snapshots: every VM, only the main agent, or none.",
  { enum: ["always", "main-only", "never"] },
);

/** Hibernate policy values. */
const hibernatePolicySchema: SchemaNode = string(
  "Whether a suspended fleet keeps (retain) or frees (release) its scheduling seat.",
  { enum: ["retain", "release"] },
);

/** Agent VM provisioning modes. */
const agentModeSchema: SchemaNode = string(
  "How agent VMs are provisioned: clone a snapshot or run the image fresh.",
  { enum: ["clone", "run"] },
);

/** Toolbox VM provisioning modes. */
const toolboxModeSchema: SchemaNode = string(
  "How the toolbox VM is provisioned: run the image, clone it, or adopt an existing (static) VM.",
  { enum: ["run", "clone", "static"] },
);

/** Guest operating systems. */
const osSchema: SchemaNode = string("Guest operating system family.", {
  enum: ["linux", "windows", "android", "macos"],
});

/** Hypervisor backends. */
const backendSchema: SchemaNode = string("Hypervisor backend that runs the VM.", {
  enum: ["cloud-hypervisor", "firecracker"],
});

/** Connection protocols. */
const connTypeSchema: SchemaNode = string("Connection protocol; inferred from the OS when unset.", {
  enum: ["ssh", "rdp", "vnc", "adb"],
});

/** Fleet phases reported in status. */
const phaseSchema: SchemaNode = string("Coarse state of the fleet.", {
  enum: [
    "Pending",
    "Running",
    "Scaling",
    "Suspending",
    "Suspended",
    "Waking",
    "Migrating",
    "Failed",
  ],
});

/** Condition status values. */
const conditionStatusSchema: SchemaNode = string("Status of the condition.", {
  enum: ["True", "False", "Unknown"],
});

/** One resource claim of a container (core/v1 ResourceClaim). */
const resourceClaimSchema: SchemaNode = {
  type: "object",
  description: "A dynamic resource claim the container uses.",
  required: ["name"],
  properties: {
    name: string("Name of an entry in the pod's resourceClaims.", {
      maxLength: MAX_OBJECT_NAME_LENGTH,
    }),
    request: string("Request within the claim; empty means the whole claim.", {
      maxLength: MAX_OBJECT_NAME_LENGTH,
    }),
  },
};

/** Most resources a limits or requests map names (bounds the CRD's CEL cost per map). */
const MAX_RESOURCES = 16;

/** Compute resources (core/v1 ResourceRequirements). */
const resourceRequirementsSchema: SchemaNode = {
  type: "object",
  description: "Compute resources of the pod's container (core/v1 ResourceRequirements).",
  properties: {
    limits: {
      type: "object",
      description: `Maximum amount of each resource (at most ${MAX_RESOURCES} resources).`,
      maxProperties: MAX_RESOURCES,
      additionalProperties: quantity("A resource quantity."),
    },
    requests: {
      type: "object",
      description: `Minimum amount of each resource; defaults to the limits when unset (at most ${MAX_RESOURCES} resources).`,
      maxProperties: MAX_RESOURCES,
      additionalProperties: quantity("A resource quantity."),
    },
    claims: {
      type: "array",
      description: "Dynamic resource claims the container uses.",
      items: resourceClaimSchema,
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["name"],
    },
  },
};

/** Reference to a ConfigMap whose keys become environment variables. */
const configMapEnvSourceSchema: SchemaNode = {
  type: "object",
  description: "ConfigMap whose keys become environment variables.",
  properties: {
    name: string("Name of the ConfigMap.", {
      maxLength: MAX_OBJECT_NAME_LENGTH,
      pattern: DNS_SUBDOMAIN_PATTERN,
    }),
    optional: boolean("Whether the ConfigMap may be missing."),
  },
};

/** Reference to a Secret whose keys become environment variables. */
const secretEnvSourceSchema: SchemaNode = {
  type: "object",
  description: "Secret whose keys become environment variables.",
  properties: {
    name: string("Name of the Secret.", {
      maxLength: MAX_OBJECT_NAME_LENGTH,
      pattern: DNS_SUBDOMAIN_PATTERN,
    }),
    optional: boolean("Whether the Secret may be missing."),
  },
};

/** One envFrom source (core/v1 EnvFromSource). */
const envFromSourceSchema: SchemaNode = {
  type: "object",
  description: "A source of environment variables (core/v1 EnvFromSource).",
  properties: {
    configMapRef: configMapEnvSourceSchema,
    prefix: string("Prefix prepended to every variable name.", {
      maxLength: MAX_OBJECT_NAME_LENGTH,
    }),
    secretRef: secretEnvSourceSchema,
  },
};

/** VM options shared by agents and toolboxes. */
const vmOptionsProperties: Record<string, SchemaNode> = {
  os: { ...osSchema, default: DEFAULT_OS },
  backend: { ...backendSchema, default: DEFAULT_BACKEND },
  connType: connTypeSchema,
  network: string("Cluster network the VM attaches to.", { maxLength: MAX_OBJECT_NAME_LENGTH }),
  forcePull: boolean("Bypass the image cache and pull the image again."),
  noDirectIO: boolean("Use the host page cache instead of O_DIRECT on writable disks."),
  probePort: port("TCP port probed for readiness instead of ICMP; 0 keeps the default probe."),
  storage: quantity("Size of the VM root volume; also requested as ephemeral-storage."),
  resources: resourceRequirementsSchema,
};

/** The VM options as an object schema (used for the TypeScript type only). */
const vmOptionsSchema: SchemaNode = {
  type: "object",
  description: "VM options shared by agents and toolboxes.",
  properties: vmOptionsProperties,
};

/** The agent section: the main agent plus `replicas` sub-agents forked from it. */
const agentSpecSchema: SchemaNode = {
  type: "object",
  description: "The main agent (slot 0) and its sub-agents (slots 1..replicas).",
  required: ["image"],
  properties: {
    replicas: {
      type: "integer",
      description: `Number of sub-agents; the main agent always exists in addition (at most ${MAX_REPLICAS}).`,
      minimum: 0,
      maximum: MAX_REPLICAS,
      default: DEFAULT_REPLICAS,
    },
    image: string("VM image of every agent.", {
      minLength: 1,
      maxLength: MAX_TEXT_LENGTH,
      pattern: IMAGE_PATTERN,
    }),
    mode: { ...agentModeSchema, default: DEFAULT_AGENT_MODE },
    envFrom: {
      type: "array",
      description: "Environment sources of the agent pods.",
      items: envFromSourceSchema,
    },
    serviceAccountName: string("Service account of the agent pods; empty means `default`.", {
      maxLength: MAX_OBJECT_NAME_LENGTH,
      pattern: OPTIONAL_DNS_SUBDOMAIN_PATTERN,
    }),
    ...vmOptionsProperties,
  },
};

/** One toolbox: a named helper VM next to the agents. */
const toolboxSpecSchema: SchemaNode = {
  type: "object",
  description: "A named helper VM next to the agents.",
  required: ["name"],
  properties: {
    name: string(
      "Toolbox name (DNS-1123 label, not an integer); the pod is `<cocoonset>-<name>`.",
      {
        minLength: 1,
        maxLength: 63,
        pattern: DNS_LABEL_PATTERN,
        "x-kubernetes-validations": [
          {
            rule: `!self.matches('${INTEGER_NAME_PATTERN}')`,
            message: "must not be an integer (it would collide with sub-agent slots)",
          },
        ],
      },
    ),
    image: string("VM image of the toolbox.", {
      maxLength: MAX_TEXT_LENGTH,
      pattern: IMAGE_PATTERN,
    }),
    mode: { ...toolboxModeSchema, default: DEFAULT_TOOLBOX_MODE },
    staticIP: string("IP of the adopted VM (static mode).", { maxLength: MAX_OBJECT_NAME_LENGTH }),
    staticVMID: string("Id of the adopted VM (static mode).", {
      maxLength: MAX_OBJECT_NAME_LENGTH,
    }),
    vncPort: port("VNC port of the adopted VM (static mode); 0 means none."),
    ...vmOptionsProperties,
  },
};

/** A duration as the spec spells it: `90s`, `30m`, `1h30m`, `250ms` (a bare number is seconds). */
const DURATION_PATTERN = "^([0-9]+(\\.[0-9]+)?|([0-9]+(\\.[0-9]+)?(ms|s|m|h))+)$";

const duration = (description: string): SchemaNode =>
  string(description, { minLength: 1, maxLength: 32, pattern: DURATION_PATTERN });

/** spec.idle: hibernate members nobody used for a while, suspend a fleet nobody uses. */
const idlePolicySchema: SchemaNode = {
  type: "object",
  description:
    "Idle policy: a sub-agent or toolbox with no activity for `after` is hibernated (snapshot kept) and woken by activity; when every member, the main agent included, is idle past it, the fleet is suspended as spec.suspend would (status.idleSuspendedSince) and woken by activity. Activity is a renewal of the member's Lease <pod>-activity, or the controller's own create, wake or rebuild.",
  required: ["after"],
  properties: {
    after: duration(
      "How long a member may go without activity before it is hibernated (e.g. 30m).",
    ),
  },
};

/** spec.expiry: a fleet that ends on its own. */
const expiryPolicySchema: SchemaNode = {
  type: "object",
  description:
    "Expiry: `after` the fleet's creation (or its last activity, with since: idle) the fleet is suspended (snapshot kept) or deleted through the normal release. The condition Expiring turns True an hour ahead (or a tenth of `after`, if later).",
  required: ["after"],
  properties: {
    after: duration("How long the fleet lives (e.g. 24h)."),
    since: string("What the expiry counts from: the fleet's creation, or its last activity.", {
      enum: ["creation", "idle"],
      default: "creation",
    }),
    action: string("What an expired fleet becomes: suspended (snapshot kept) or deleted.", {
      enum: ["suspend", "delete"],
      default: "suspend",
    }),
  },
};

/** spec.hooks: the platform's own service, told around each transition. */
const hooksSchema: SchemaNode = {
  type: "object",
  description:
    "Lifecycle hooks: the controller POSTs one JSON event (CocoonSetLifecycleEvent) to `url` before a member hibernates, after it wakes and before the fleet expires, and waits for a 2xx.",
  required: ["url"],
  properties: {
    url: string(
      "https URL of the service (plain http only to a loopback host); credentials in it are sent as basic auth and never logged.",
      { minLength: 1, maxLength: MAX_TEXT_LENGTH, pattern: "^https?://" },
    ),
    caBundle: string("Base64 of PEM certificates trusted for `url` beside the system roots.", {
      maxLength: 65536,
    }),
    timeoutSeconds: {
      type: "integer",
      description: "How long one call may take; 10 when unset.",
      minimum: 1,
      maximum: 30,
      default: 10,
    },
    failurePolicy: string(
      "What a failed call does: Fail holds the transition back (Warning event, retried with backoff); Ignore goes on and says so in an event.",
      { enum: ["Ignore", "Fail"], default: "Fail" },
    ),
  },
};

/** The desired state of a CocoonSet. */
export const cocoonSetSpecSchema: SchemaNode = {
  type: "object",
  description: "Desired state of a CocoonSet.",
  required: ["agent"],
  properties: {
    suspend: boolean(
      "Suspend the fleet: each VM is hibernated to its snapshot (with hibernatePolicy release the pods are deleted too); false wakes it. Acted on only by a controller with --oci-registry, or a Fleet with a registry.",
    ),
    nodePool: string("Node pool the pods select with the cocoonstack.io/pool label.", {
      default: DEFAULT_NODE_POOL,
      maxLength: 63,
      pattern: LABEL_VALUE_PATTERN,
    }),
    nodeName: string(
      "Node the main agent must land on (required node affinity on its kubernetes.io/hostname label).",
      { maxLength: 63, pattern: LABEL_VALUE_PATTERN },
    ),
    snapshotPolicy: { ...snapshotPolicySchema, default: DEFAULT_SNAPSHOT_POLICY },
    progressDeadlineSeconds: {
      type: "integer",
      description:
        "Seconds the fleet may go without progress towards its spec (a phase, a member or a generation changing) before the condition Progressing turns False with reason ProgressDeadlineExceeded, naming what it waits for, and a Warning is posted; 600 when unset.",
      minimum: 1,
      maximum: 2147483647,
    },
    hibernatePolicy: { ...hibernatePolicySchema, default: DEFAULT_HIBERNATE_POLICY },
    snapshotCompatibilityClass: string(
      "Guest CPU ABI class the nodes must expose (cocoonstack.io/snapshot-cpu-class); immutable once set.",
      { maxLength: 63, pattern: LABEL_VALUE_PATTERN },
    ),
    idle: idlePolicySchema,
    expiry: expiryPolicySchema,
    hooks: hooksSchema,
    agent: agentSpecSchema,
    toolboxes: {
      type: "array",
      description: `Named helper VMs (at most ${MAX_TOOLBOXES}, unique names).`,
      maxItems: MAX_TOOLBOXES,
      items: toolboxSpecSchema,
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["name"],
      "x-kubernetes-validations": [
        {
          rule: "self.all(t, self.exists_one(u, u.name == t.name))",
          message: "toolbox names must be unique",
        },
      ],
    },
  },
  "x-kubernetes-validations": [
    {
      rule:
        "!has(self.hibernatePolicy) || self.hibernatePolicy != 'release' || " +
        "((!has(self.agent.replicas) || self.agent.replicas == 0) && " +
        "(!has(self.toolboxes) || size(self.toolboxes) == 0))",
      message: "hibernatePolicy=release needs agent.replicas 0 and no toolboxes",
    },
    {
      rule:
        "!has(oldSelf.snapshotCompatibilityClass) || oldSelf.snapshotCompatibilityClass == '' || " +
        "(has(self.snapshotCompatibilityClass) && " +
        "self.snapshotCompatibilityClass == oldSelf.snapshotCompatibilityClass)",
      message: "snapshotCompatibilityClass is immutable once set",
    },
  ],
};

/** Why a node refused an agent's pod, as its kubelet wrote it in the pod's status. */
const nodeRefusalSchema: SchemaNode = {
  type: "object",
  description:
    "Set while the agent's pod is one its node refused to admit (it never ran), as the node's kubelet wrote it in the pod's status; a sub-agent is rebuilt with backoff, then left in dead-letter.",
  required: ["node", "reason", "message"],
  properties: {
    node: string("The node the pod was bound to."),
    reason: string(
      "The kubelet's reason: OutOfcpu, OutOfmemory, OutOfpods, OutOf<resource>, NodeAffinity or UnexpectedAdmissionError.",
    ),
    message: string("The kubelet's message (Pod was rejected: ...)."),
  },
};

/** Observed state of one agent. */
const agentStatusSchema: SchemaNode = {
  type: "object",
  description: "Observed state of one agent.",
  required: ["slot", "role"],
  properties: {
    slot: { type: "integer", description: "Slot number; 0 is the main agent.", minimum: 0 },
    role: string("main or sub-agent.", { enum: ["main", "sub-agent"] }),
    podName: string("Name of the agent's pod."),
    vmName: string("Name of the agent's VM."),
    vmID: string("Runtime id of the VM, once the virtual kubelet reports it."),
    ip: string("IP address of the agent."),
    phase: string("Phase of the agent's pod."),
    forkedFrom: string("VM this agent was forked from (sub-agents)."),
    nodeRefusal: nodeRefusalSchema,
  },
};

/** Observed state of one toolbox. */
const toolboxStatusSchema: SchemaNode = {
  type: "object",
  description: "Observed state of one toolbox.",
  required: ["name"],
  properties: {
    name: string("Toolbox name."),
    podName: string("Name of the toolbox's pod."),
    vmName: string("Name of the toolbox's VM."),
    vmID: string("Runtime id of the VM."),
    ip: string("IP address of the toolbox."),
    phase: string("Phase of the toolbox's pod."),
    connType: connTypeSchema,
    vncPort: port("VNC port of the toolbox, when one is exposed."),
  },
};

/** One VM the controller named for a member of the fleet (status.vms). */
const vmRecordSchema: SchemaNode = {
  type: "object",
  description:
    "A VM this CocoonSet named for one member, and the uid of the last pod it created for that member. Written only by the engine (the status subresource): what it believes about the fleet's pods and VMs (docs/security.md).",
  required: ["vm"],
  properties: {
    vm: string("The VM's name, vk-<namespace>-<cocoonset>-<member>."),
    podUID: string("The uid of the last pod the engine created for this member."),
    createToken: string(
      "The SHA-256 (hex) of the token the engine put on the pod it was about to create for this member, written before the create: a pod carrying the token is that create's, should the engine stop before it recorded the pod's uid.",
    ),
    hibernated: {
      type: "boolean",
      description:
        "The engine saw this member's VM hibernated, its snapshot in the registry, and has not seen it running since: a pod created for the member meanwhile restores from that snapshot.",
    },
    lastActivity: string(
      "The member's last activity the controller saw (its activity Lease renewed, or its own create, wake or rebuild), recorded at each idle-policy transition.",
      { format: "date-time" },
    ),
    idleSince: string(
      "Set while the idle policy holds this member hibernated: when it hibernated it. Activity after it wakes the member.",
      { format: "date-time" },
    ),
  },
};

/** A status condition (same shape as meta/v1 Condition). */
export const conditionSchema: SchemaNode = {
  type: "object",
  description: "A status condition (meta/v1 Condition).",
  required: ["type", "status", "lastTransitionTime", "reason", "message"],
  properties: {
    type: string("Condition type, e.g. Ready or Progressing.", { maxLength: 316 }),
    status: conditionStatusSchema,
    reason: string("Machine-readable CamelCase reason of the last transition.", {
      maxLength: 1024,
    }),
    message: string("Human-readable detail.", { maxLength: 32768 }),
    lastTransitionTime: string("When the status last changed.", { format: "date-time" }),
    observedGeneration: {
      type: "integer",
      description: "Generation of the CocoonSet the condition was computed from.",
      minimum: 0,
    },
  },
};

const count = (description: string): SchemaNode => ({ type: "integer", description, minimum: 0 });

/** The observed state of a CocoonSet, written by the engine. */
const cocoonSetStatusSchema: SchemaNode = {
  type: "object",
  description: "Observed state of a CocoonSet.",
  required: ["readyAgents", "desiredAgents", "readyToolboxes", "desiredToolboxes"],
  properties: {
    observedGeneration: {
      type: "integer",
      description: "Generation of the spec this status was computed from.",
      minimum: 0,
    },
    phase: phaseSchema,
    lastProgressTime: string(
      "While the fleet is under way (not Running or Suspended): when it last moved towards its spec (a new generation observed, the phase, a count or a member changed). The progress deadline counts from it.",
      { format: "date-time" },
    ),
    readyAgents: count("Ready agents, main included."),
    desiredAgents: count("Desired agents: 1 + agent.replicas."),
    readyToolboxes: count("Ready toolboxes."),
    desiredToolboxes: count("Desired toolboxes."),
    // The lists and the record below are written whole by the engine alone, so their field
    // ownership is one entry each (atomic): kept per element, the apiserver's managed fields
    // were nearly a third of a big fleet's object and were recomputed at every write of it
    // (docs/benchmarks.md). A merge patch still merges the record's keys.
    agents: {
      type: "array",
      description: "Agents, main first then by slot.",
      items: agentStatusSchema,
      "x-kubernetes-list-type": "atomic",
    },
    toolboxes: {
      type: "array",
      description: "Toolboxes by name.",
      items: toolboxStatusSchema,
      "x-kubernetes-list-type": "atomic",
    },
    vms: {
      type: "object",
      description:
        "The engine's record, by member (a slot number or a toolbox name), of the VMs it named and the pods it created: kept until the CocoonSet is gone, so a slot scaled away or released is still known at deletion.",
      additionalProperties: vmRecordSchema,
      "x-kubernetes-map-type": "atomic",
    },
    idleSuspendedSince: string(
      "Set while the idle policy (or an expiry with action suspend) holds the whole fleet suspended: since when. The fleet is suspended while spec.suspend or this is set; activity clears it.",
      { format: "date-time" },
    ),
    expiresAt: string("When spec.expiry acts on the fleet, as last computed.", {
      format: "date-time",
    }),
    conditions: {
      type: "array",
      description: "Ready, Progressing and (with spec.expiry) Expiring conditions.",
      items: conditionSchema,
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["type"],
    },
  },
};

/** Object metadata; the apiserver owns its schema, so it stays opaque here. */
export const objectMetaSchema: SchemaNode = { type: "object" };

/** The whole CocoonSet object (the CRD's openAPIV3Schema). */
export const cocoonSetSchema: SchemaNode = {
  type: "object",
  description: "A fleet of AI agents: one main agent, N sub-agents forked from it, and toolboxes.",
  required: ["spec"],
  properties: {
    apiVersion: string("API version of the object."),
    kind: string("Kind of the object."),
    metadata: objectMetaSchema,
    spec: cocoonSetSpecSchema,
    status: cocoonSetStatusSchema,
  },
  "x-kubernetes-validations": [
    {
      rule: `size(self.metadata.name) <= ${MAX_COCOONSET_NAME_LENGTH}`,
      message: `metadata.name must be at most ${MAX_COCOONSET_NAME_LENGTH} characters (it is a label value on every pod)`,
    },
  ],
};

/** A schema node that gets a name in the generated TypeScript. */
export interface NamedSchema {
  /** TypeScript name. */
  name: string;
  /** The node (matched by identity wherever it is referenced). */
  schema: SchemaNode;
  /** Interface this one extends; properties the base declares are not repeated. */
  extends?: string;
}

/** Every schema node that has a TypeScript name, in the order the generated file lists them. */
export const namedSchemas: readonly NamedSchema[] = [
  { name: "CocoonSet", schema: cocoonSetSchema },
  { name: "CocoonSetSpec", schema: cocoonSetSpecSchema },
  { name: "AgentSpec", schema: agentSpecSchema, extends: "VMOptions" },
  { name: "ToolboxSpec", schema: toolboxSpecSchema, extends: "VMOptions" },
  { name: "VMOptions", schema: vmOptionsSchema },
  { name: "ResourceRequirements", schema: resourceRequirementsSchema },
  { name: "ResourceClaim", schema: resourceClaimSchema },
  { name: "EnvFromSource", schema: envFromSourceSchema },
  { name: "ConfigMapEnvSource", schema: configMapEnvSourceSchema },
  { name: "SecretEnvSource", schema: secretEnvSourceSchema },
  { name: "IdleSpec", schema: idlePolicySchema },
  { name: "ExpirySpec", schema: expiryPolicySchema },
  { name: "HooksSpec", schema: hooksSchema },
  { name: "CocoonSetStatus", schema: cocoonSetStatusSchema },
  { name: "AgentStatus", schema: agentStatusSchema },
  { name: "NodeRefusal", schema: nodeRefusalSchema },
  { name: "ToolboxStatus", schema: toolboxStatusSchema },
  { name: "VMRecord", schema: vmRecordSchema },
  { name: "Condition", schema: conditionSchema },
  { name: "SnapshotPolicy", schema: snapshotPolicySchema },
  { name: "HibernatePolicy", schema: hibernatePolicySchema },
  { name: "AgentMode", schema: agentModeSchema },
  { name: "ToolboxMode", schema: toolboxModeSchema },
  { name: "OSType", schema: osSchema },
  { name: "Backend", schema: backendSchema },
  { name: "ConnType", schema: connTypeSchema },
  { name: "CocoonSetPhase", schema: phaseSchema },
  { name: "ConditionStatus", schema: conditionStatusSchema },
];
