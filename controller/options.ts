/**
 * Options of `cocoonset controller`: flags, their environment variables and defaults, and a
 * pure resolver that merges them (flag wins over env, env over default) and validates every
 * value, naming the flag in the error.
 */
import { MAX_TIMER_MS, parseDuration } from "./duration.js";
import { parseBindAddress } from "./health.js";
import { DEFAULT_LOG_LEVEL, LOG_LEVELS, type LogLevel } from "./logger.js";
import { BrandedError, InvalidValueError } from "../engine/kube/branded-error.js";
import {
  DEFAULT_FANOUT,
  DEFAULT_HIBERNATE_TIMEOUT_MS,
  DEFAULT_WAKE_TIMEOUT_MS,
} from "../engine/spec/index.js";
import { METRICS_PORT, PROBE_PORT } from "./image.js";
import {
  describeValue,
  escapeUnsafeText,
  namespaceNameProblem,
  redactUserinfo,
} from "../engine/spec/index.js";
import { parseRegistryAddress, plainHttpProblem } from "../engine/registry/address.js";
import { MAX_SHARDS, parseShard, UNSHARDED, type Shard } from "./shard.js";

/** The resolved, validated options of the controller process. */
export interface ControllerOptions {
  /** Kubeconfig file; undefined means `$KUBECONFIG`, else in-cluster credentials, else `~/.kube/config`. */
  kubeconfig?: string;
  /** The kubeconfig context; undefined means its current context. */
  context?: string;
  /** Namespaces to watch; empty means all namespaces. */
  namespaces: string[];
  /** Parallel reconciles. @default 4 */
  concurrency: number;
  /** Sub-agent creates in flight per reconcile. @default 8 */
  fanoutConcurrency: number;
  /** Metrics server address; `0` disables it. @default ":8080" */
  metricsBindAddress: string;
  /** Probe server address; `0` disables it. @default ":8081" */
  healthProbeBindAddress: string;
  /** Run only while holding the leader Lease. @default true */
  leaderElect: boolean;
  /** Namespace of the leader Lease. @default the pod's namespace, else "default" */
  leaderElectionNamespace: string;
  /** How long a leader's Lease lasts without renewal. @default 15000 (15s) */
  leaderElectionLeaseDurationMs?: number;
  /** The share of the CocoonSets this process reconciles (controller/shard.ts). @default 0/1 */
  shard?: Shard;
  /** Time between orphan reaper passes. @default 300000 (5m) */
  reapIntervalMs: number;
  /** @default "info" */
  logLevel: LogLevel;
  /**
   * The snapshot registry, `host[:port][/prefix]` (as cocoon-operator's `OCI_REGISTRY`);
   * undefined: none, and `spec.suspend` is stored but not acted on.
   */
  ociRegistry?: string;
  /** PEM CA bundle file trusted for the registry's https, besides the system roots. */
  ociRegistryCaFile?: string;
  /** Allow plain http to a registry host that is not loopback. @default false */
  ociRegistryInsecure?: boolean;
  /**
   * Folder of the Docker config (`config.json`) the registry's credentials come from, as
   * `DOCKER_CONFIG` names it. @default `$DOCKER_CONFIG`, else `~/.docker`
   */
  ociRegistryDockerConfig?: string;
  /** Deadline of one request to the snapshot registry. @default 10000 (10s) */
  ociRegistryTimeoutMs?: number;
  /** How long a CocoonHibernation may stay Hibernating. @default 180000 (3m) */
  hibernateTimeoutMs?: number;
  /** How long a CocoonHibernation may stay Waking. @default 300000 (5m) */
  wakeTimeoutMs?: number;
}

/** Raw flag values as commander hands them over (undefined when the flag was not given). */
export interface ControllerFlags {
  kubeconfig?: string;
  context?: string;
  namespace?: string[];
  concurrency?: string;
  fanoutConcurrency?: string;
  metricsBindAddress?: string;
  healthProbeBindAddress?: string;
  leaderElect?: string | boolean;
  leaderElectionNamespace?: string;
  leaderElectionLeaseDuration?: string;
  shard?: string;
  reapInterval?: string;
  logLevel?: string;
  ociRegistry?: string;
  ociRegistryCaFile?: string;
  ociRegistryInsecure?: string | boolean;
  ociRegistryDockerConfig?: string;
  ociRegistryTimeout?: string;
  hibernateTimeout?: string;
  wakeTimeout?: string;
}

/** One documented option: its flag, env var, default and help text. */
export interface OptionSpec {
  key: keyof ControllerFlags;
  flag: string;
  /** A one-letter alias, as kubectl has `-n` for `--namespace`. */
  short?: string;
  env: string;
  /** The value placeholder in `--help`, e.g. `<duration>`. */
  valueName: string;
  /** The default as shown in `--help`. */
  defaultText: string;
  description: string;
}

/** The defaults of the options that have one, as written on the command line. */
export const DEFAULT_METRICS_BIND_ADDRESS = `:${METRICS_PORT}`;
export const DEFAULT_HEALTH_PROBE_BIND_ADDRESS = `:${PROBE_PORT}`;
export const DEFAULT_LEADER_ELECT = true;
/** CocoonSets reconciled at once when `--concurrency` is not given. */
export const DEFAULT_CONCURRENCY = 4;
export const DEFAULT_LEASE_DURATION = "15s";
export const DEFAULT_REAP_INTERVAL = "5m";
export const DEFAULT_REGISTRY_TIMEOUT = "10s";
/** The engine's defaults (engine/spec/constants.ts), as flag values. */
export const DEFAULT_HIBERNATE_TIMEOUT = `${DEFAULT_HIBERNATE_TIMEOUT_MS / 60_000}m`;
export const DEFAULT_WAKE_TIMEOUT = `${DEFAULT_WAKE_TIMEOUT_MS / 60_000}m`;

/** Every controller option, in `--help` order. */
export const CONTROLLER_OPTIONS: readonly OptionSpec[] = [
  {
    key: "kubeconfig",
    valueName: "<path>",
    flag: "--kubeconfig",
    env: "COCOONSET_KUBECONFIG",
    defaultText: "$KUBECONFIG (its files merged), else in-cluster credentials, else ~/.kube/config",
    description: "kubeconfig file",
  },
  {
    key: "context",
    valueName: "<name>",
    flag: "--context",
    env: "COCOONSET_CONTEXT",
    defaultText: "the kubeconfig's current context",
    description: "kubeconfig context to use",
  },
  {
    key: "namespace",
    valueName: "<namespace>",
    flag: "--namespace",
    short: "-n",
    env: "COCOONSET_NAMESPACE",
    defaultText: "all namespaces",
    description: "namespace to watch; repeat the flag (or comma-separate the env var) for several",
  },
  {
    key: "concurrency",
    valueName: "<n>",
    flag: "--concurrency",
    env: "COCOONSET_CONCURRENCY",
    defaultText: String(DEFAULT_CONCURRENCY),
    description: "CocoonSets reconciled in parallel (>= 1)",
  },
  {
    key: "fanoutConcurrency",
    valueName: "<n>",
    flag: "--fanout-concurrency",
    env: "COCOONSET_FANOUT_CONCURRENCY",
    defaultText: String(DEFAULT_FANOUT),
    description: "sub-agent creates in flight per reconcile (>= 1)",
  },
  {
    key: "metricsBindAddress",
    valueName: "<address>",
    flag: "--metrics-bind-address",
    env: "COCOONSET_METRICS_BIND_ADDRESS",
    defaultText: DEFAULT_METRICS_BIND_ADDRESS,
    description: "address of GET /metrics (host:port or :port; 0 disables)",
  },
  {
    key: "healthProbeBindAddress",
    valueName: "<address>",
    flag: "--health-probe-bind-address",
    env: "COCOONSET_HEALTH_PROBE_BIND_ADDRESS",
    defaultText: DEFAULT_HEALTH_PROBE_BIND_ADDRESS,
    description: "address of GET /healthz and /readyz (host:port or :port; 0 disables)",
  },
  {
    key: "leaderElect",
    valueName: "[bool]",
    flag: "--leader-elect",
    env: "COCOONSET_LEADER_ELECT",
    defaultText: String(DEFAULT_LEADER_ELECT),
    description:
      "reconcile only while holding a coordination.k8s.io Lease (--leader-elect=false or --no-leader-elect to disable)",
  },
  {
    key: "leaderElectionNamespace",
    valueName: "<namespace>",
    flag: "--leader-election-namespace",
    env: "COCOONSET_LEADER_ELECTION_NAMESPACE",
    defaultText: "the pod's namespace ($POD_NAMESPACE or the service account's), else default",
    description: "namespace of the leader Lease",
  },
  {
    key: "leaderElectionLeaseDuration",
    valueName: "<duration>",
    flag: "--leader-election-lease-duration",
    env: "COCOONSET_LEADER_ELECTION_LEASE_DURATION",
    defaultText: DEFAULT_LEASE_DURATION,
    description:
      "how long the leader's Lease lasts without renewal: a standby takes over that long after a leader dies (renewals and retries scale with it)",
  },
  {
    key: "shard",
    valueName: "<index/count>",
    flag: "--shard",
    env: "COCOONSET_SHARD",
    defaultText: "0/1",
    description: `reconcile only shard INDEX of COUNT (at most ${MAX_SHARDS}) of the CocoonSets, by a stable hash of namespace/name; each shard elects its leader on a Lease of its own (<lease>-shard-INDEX-of-COUNT), so every shard has its standby; needs leader election`,
  },
  {
    key: "reapInterval",
    valueName: "<duration>",
    flag: "--reap-interval",
    env: "COCOONSET_REAP_INTERVAL",
    defaultText: DEFAULT_REAP_INTERVAL,
    description: "time between orphan reaper passes (e.g. 30s, 5m, 1h)",
  },
  {
    key: "logLevel",
    valueName: "<level>",
    flag: "--log-level",
    env: "COCOONSET_LOG_LEVEL",
    defaultText: DEFAULT_LOG_LEVEL,
    description: `log level (${LOG_LEVELS.join(", ")})`,
  },
  {
    key: "ociRegistry",
    valueName: "<host[:port][/prefix]>",
    flag: "--oci-registry",
    // The node agent's and cocoon-operator's name for it: one variable for the whole stack.
    env: "OCI_REGISTRY",
    defaultText:
      "none: a retain spec.suspend and a migration to spec.nodeName are not acted on; a release suspend fails the reconcile",
    description:
      "registry of the VMs' snapshots (<vm>:hibernate), asked while a CocoonSet suspends, wakes from a slot release or migrates to spec.nodeName; credentials from the Docker keychain ($DOCKER_CONFIG/config.json, else ~/.docker/config.json, and its credential helpers); http for a loopback host (or with --oci-registry-insecure), else https",
  },
  {
    key: "ociRegistryCaFile",
    valueName: "<path>",
    flag: "--oci-registry-ca-file",
    env: "OCI_REGISTRY_CA_FILE",
    defaultText: "the system's roots only",
    description:
      "PEM CA bundle trusted for the snapshot registry's https, besides the system's roots",
  },
  {
    key: "ociRegistryInsecure",
    valueName: "[bool]",
    flag: "--oci-registry-insecure",
    env: "OCI_REGISTRY_INSECURE",
    defaultText: "false",
    description:
      "speak plain http to a snapshot registry host that is not loopback (a name without a scheme, or http://); credentials then cross the network in clear",
  },
  {
    key: "ociRegistryDockerConfig",
    valueName: "<dir>",
    flag: "--oci-registry-docker-config",
    // Docker's own variable: the flag is the same setting, named beside the registry's.
    env: "DOCKER_CONFIG",
    defaultText: "~/.docker",
    description:
      "folder of the Docker config.json the snapshot registry's credentials come from (auths, credHelpers, credsStore); a mounted kubernetes.io/dockerconfigjson Secret whose .dockerconfigjson is projected as config.json is one",
  },
  {
    key: "ociRegistryTimeout",
    valueName: "<duration>",
    flag: "--oci-registry-timeout",
    env: "OCI_REGISTRY_TIMEOUT",
    defaultText: DEFAULT_REGISTRY_TIMEOUT,
    description:
      "deadline of one request to the snapshot registry; a reconcile waits at most 2s (or this, when shorter) for an answer, and after 3 requests in a row without one the registry is not asked for a cool-down (5s, doubling to 1m) while the fleets that need it requeue",
  },
  {
    key: "hibernateTimeout",
    valueName: "<duration>",
    flag: "--hibernate-timeout",
    env: "COCOONSET_HIBERNATE_TIMEOUT",
    defaultText: DEFAULT_HIBERNATE_TIMEOUT,
    description:
      "how long a CocoonHibernation may stay Hibernating before it is Failed (HibernateTimedOut)",
  },
  {
    key: "wakeTimeout",
    valueName: "<duration>",
    flag: "--wake-timeout",
    env: "COCOONSET_WAKE_TIMEOUT",
    defaultText: DEFAULT_WAKE_TIMEOUT,
    description: "how long a CocoonHibernation may stay Waking before it is Failed (WakeTimedOut)",
  },
];

/** A bad option value; the message names the flag (and the env var when it came from there). */
export class OptionsError extends BrandedError {
  constructor(message: string) {
    super(message);
  }
}

const isNamespaceName = (ns: string) => namespaceNameProblem(ns) === undefined;

// The value parsers below are shared with the Operator component (sdk/operator.ts), which
// renders these flags into the controller Deployment: what one refuses the other refuses.
// Each throws an InvalidValueError whose message is the rule (the caller names the field).

/** Largest `--concurrency` / `--fanout-concurrency`. */
export const MAX_CONCURRENCY = 10_000;

/** Parses a count flag (`--concurrency`, `--fanout-concurrency`): an integer 1..10000. */
export function parseCountOption(text: string): number {
  const t = text.trim();
  if (!/^\d+$/.test(t) || parseInt(t, 10) < 1 || parseInt(t, 10) > MAX_CONCURRENCY)
    throw new InvalidValueError(`must be an integer between 1 and ${MAX_CONCURRENCY}`);
  return parseInt(t, 10);
}

/** Parses one namespace name (`--namespace`, `--leader-election-namespace`). */
export function parseNamespaceOption(text: string): string {
  const ns = text.trim();
  if (!isNamespaceName(ns))
    throw new InvalidValueError("must be namespace names (DNS-1123 labels)");
  return ns;
}

/** Parses `--hibernate-timeout` / `--wake-timeout`: as `--reap-interval`, in milliseconds. */
export function parseTransitionTimeoutOption(text: string): number {
  return parseReapIntervalOption(text);
}

/** Parses `--oci-registry-timeout`: 1s to 5m, in milliseconds. */
export function parseRegistryTimeoutOption(text: string): number {
  let ms: number;
  try {
    ms = parseDuration(text);
  } catch {
    throw new InvalidValueError("must be a duration such as 10s or 1m");
  }
  if (ms < 1000 || ms > 300_000) throw new InvalidValueError("must be from 1s to 5m");
  return ms;
}

/** Parses `--leader-election-lease-duration`: whole seconds, 2s to 1h, in milliseconds. */
export function parseLeaseDurationOption(text: string): number {
  let ms: number;
  try {
    ms = parseDuration(text);
  } catch {
    throw new InvalidValueError("must be a duration such as 15s or 1m");
  }
  if (ms < 2000 || ms > 3_600_000 || ms % 1000 !== 0)
    throw new InvalidValueError("must be whole seconds from 2s to 1h");
  return ms;
}

/** Parses `--reap-interval`: a duration of at least 1s, in milliseconds. */
export function parseReapIntervalOption(text: string): number {
  let ms: number;
  try {
    ms = parseDuration(text);
  } catch {
    throw new InvalidValueError("must be a duration such as 30s, 5m or 1h");
  }
  if (ms < 1000) throw new InvalidValueError("must be at least 1s");
  // A longer timer fires at once in Node: the reaper would run in a tight loop.
  if (ms > MAX_TIMER_MS) throw new InvalidValueError("must be at most 596h");
  return ms;
}

/** Parses `--log-level`. */
export function parseLogLevelOption(text: string): LogLevel {
  const v = text.trim().toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(v))
    throw new InvalidValueError(`must be one of ${LOG_LEVELS.join(", ")}`);
  return v as LogLevel;
}

/**
 * Parses `--oci-registry`: `host[:port][/prefix]`, optionally with an `http://` or
 * `https://` scheme (the parser every registry input shares).
 */
export const parseRegistryOption = parseRegistryAddress;

/** A raw option's text and a label naming where it came from. */
interface Picked {
  value: string;
  from: string;
}

/** Reads options from the flags, then the environment, and parses them naming the flag. */
function optionReader(flags: ControllerFlags, env: Record<string, string | undefined>) {
  const spec = (key: keyof ControllerFlags) => CONTROLLER_OPTIONS.find((o) => o.key === key)!;
  /** The raw text and a label naming where it came from, or undefined when absent. */
  const pick = (key: keyof ControllerFlags): Picked | undefined => {
    const s = spec(key);
    const f = flags[key];
    if (f !== undefined && !Array.isArray(f)) return { value: String(f), from: s.flag };
    const e = env[s.env];
    if (e !== undefined && e.trim() !== "") return { value: e, from: `${s.flag} (from ${s.env})` };
    return undefined;
  };
  const fail = (from: string, rule: string, value: string): never => {
    // A long value is cut to a prefix and its length: echoing kilobytes back helps nobody.
    // Never an address's credentials, never a character that would act on a terminal.
    const shown = redactUserinfo(value);
    const got = shown.length > 60 ? describeValue(shown) : `"${escapeUnsafeText(shown)}"`;
    throw new OptionsError(`[${from}] ${rule} (got ${got})`);
  };
  /** Runs a shared parser, turning its rule into an error naming the flag. */
  const parse = <T>(p: Picked, parser: (text: string) => T): T => {
    try {
      return parser(p.value);
    } catch (e) {
      if (!InvalidValueError.isInstance(e)) throw e;
      return fail(p.from, e.message, p.value);
    }
  };
  /** The option parsed, or its default parsed by the same parser. */
  const value = <T>(key: keyof ControllerFlags, dflt: string, parser: (text: string) => T): T =>
    parse(pick(key) ?? { value: dflt, from: spec(key).flag }, parser);
  const bool = (key: keyof ControllerFlags, dflt: boolean): boolean => {
    const p = pick(key);
    if (!p) return dflt;
    const v = p.value.trim().toLowerCase();
    if (["true", "1", "yes", "on"].includes(v)) return true;
    if (["false", "0", "no", "off"].includes(v)) return false;
    return fail(p.from, "must be true or false", p.value);
  };
  const bind = (text: string): string => {
    parseBindAddress(text);
    return text.trim();
  };
  return { pick, fail, parse, value, bool, bind };
}

type OptionReader = ReturnType<typeof optionReader>;

function resolveNamespaces(
  flags: ControllerFlags,
  env: Record<string, string | undefined>,
  r: OptionReader,
): string[] {
  const nsFrom = flags.namespace?.length
    ? { values: flags.namespace, from: "--namespace" }
    : env.COCOONSET_NAMESPACE?.trim()
      ? { values: [env.COCOONSET_NAMESPACE], from: "--namespace (from COCOONSET_NAMESPACE)" }
      : undefined;
  if (!nsFrom) return [];
  const all = nsFrom.values.flatMap((v) => v.split(",")).map((v) => v.trim());
  for (const ns of all) r.parse({ value: ns, from: nsFrom.from }, parseNamespaceOption);
  return [...new Set(all)];
}

function resolveLeaderElection(r: OptionReader, podNamespace: string | undefined) {
  const leaderElect = r.bool("leaderElect", DEFAULT_LEADER_ELECT);
  const len = r.pick("leaderElectionNamespace");
  const leaderElectionNamespace = len?.value.trim() ?? podNamespace ?? "default";
  if (!isNamespaceName(leaderElectionNamespace))
    r.fail(
      len?.from ?? "--leader-election-namespace",
      "must be a namespace name",
      leaderElectionNamespace,
    );
  const leaderElectionLeaseDurationMs = r.value(
    "leaderElectionLeaseDuration",
    DEFAULT_LEASE_DURATION,
    parseLeaseDurationOption,
  );
  const sh = r.pick("shard");
  const shard = sh ? parseShard(sh.value) : UNSHARDED;
  if (sh && !shard)
    r.fail(sh.from, `must be INDEX/COUNT with 0 <= INDEX < COUNT <= ${MAX_SHARDS}`, sh.value);
  if (sh && shard && shard.count > 1 && !leaderElect)
    r.fail(
      sh.from,
      "needs leader election (a shard hands CocoonSets over to another through its Lease)",
      sh.value,
    );
  return {
    leaderElect,
    leaderElectionNamespace,
    leaderElectionLeaseDurationMs,
    shard: shard ?? UNSHARDED,
  };
}

function resolveRegistry(r: OptionReader) {
  const reg = r.pick("ociRegistry");
  const ociRegistry = reg ? r.parse(reg, parseRegistryOption) : undefined;
  const ociRegistryInsecure = r.bool("ociRegistryInsecure", false);
  const plainProblem = reg ? plainHttpProblem(reg.value, ociRegistryInsecure) : undefined;
  if (reg && plainProblem)
    r.fail(
      reg.from,
      plainProblem.replace("the registry's insecure flag", "--oci-registry-insecure"),
      reg.value,
    );
  return {
    ociRegistry,
    ociRegistryCaFile: r.pick("ociRegistryCaFile")?.value.trim() || undefined,
    ociRegistryInsecure,
    ociRegistryDockerConfig: r.pick("ociRegistryDockerConfig")?.value.trim() || undefined,
    ociRegistryTimeoutMs: r.value(
      "ociRegistryTimeout",
      DEFAULT_REGISTRY_TIMEOUT,
      parseRegistryTimeoutOption,
    ),
  };
}

/**
 * Merges flags, environment and defaults, and validates the result.
 * @param flags what commander parsed (undefined = flag absent)
 * @param env the process environment
 * @param podNamespace the namespace the controller runs in, if known (see {@link detectPodNamespace})
 * @throws OptionsError naming the offending flag
 */
export function resolveControllerOptions(
  flags: ControllerFlags,
  env: Record<string, string | undefined>,
  podNamespace?: string,
): ControllerOptions {
  const r = optionReader(flags, env);
  const namespaces = resolveNamespaces(flags, env, r);
  const election = resolveLeaderElection(r, podNamespace);
  const reapIntervalMs = r.value("reapInterval", DEFAULT_REAP_INTERVAL, parseReapIntervalOption);
  const logLevel: LogLevel = r.value("logLevel", DEFAULT_LOG_LEVEL, parseLogLevelOption);
  const registry = resolveRegistry(r);
  const hibernateTimeoutMs = r.value(
    "hibernateTimeout",
    DEFAULT_HIBERNATE_TIMEOUT,
    parseTransitionTimeoutOption,
  );
  const wakeTimeoutMs = r.value("wakeTimeout", DEFAULT_WAKE_TIMEOUT, parseTransitionTimeoutOption);
  const kc = r.pick("kubeconfig");
  return {
    kubeconfig: kc?.value.trim() || undefined,
    context: r.pick("context")?.value.trim() || undefined,
    namespaces,
    concurrency: r.value("concurrency", String(DEFAULT_CONCURRENCY), parseCountOption),
    fanoutConcurrency: r.value("fanoutConcurrency", String(DEFAULT_FANOUT), parseCountOption),
    metricsBindAddress: r.value("metricsBindAddress", DEFAULT_METRICS_BIND_ADDRESS, r.bind),
    healthProbeBindAddress: r.value(
      "healthProbeBindAddress",
      DEFAULT_HEALTH_PROBE_BIND_ADDRESS,
      r.bind,
    ),
    ...election,
    reapIntervalMs,
    logLevel,
    ...registry,
    hibernateTimeoutMs,
    wakeTimeoutMs,
  };
}

/** The service-account namespace file mounted into every pod. */
export const SERVICE_ACCOUNT_NAMESPACE_FILE =
  "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/**
 * The namespace the process runs in: `$POD_NAMESPACE`, else the service-account namespace
 * file, else undefined.
 * @param readFile reads a file or returns undefined (injected so callers and tests control I/O)
 */
export function detectPodNamespace(
  env: Record<string, string | undefined>,
  readFile: (path: string) => string | undefined,
): string | undefined {
  const fromEnv = env.POD_NAMESPACE?.trim();
  if (fromEnv) return fromEnv;
  const fromFile = readFile(SERVICE_ACCOUNT_NAMESPACE_FILE)?.trim();
  return fromFile || undefined;
}
