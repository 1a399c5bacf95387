import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  CONTROLLER_OPTIONS,
  detectPodNamespace,
  OptionsError,
  resolveControllerOptions,
  SERVICE_ACCOUNT_NAMESPACE_FILE,
  type ControllerFlags,
} from "../../../controller/options.js";

const resolve = (flags: ControllerFlags, env: Record<string, string> = {}, podNs?: string) =>
  resolveControllerOptions(flags, env, podNs);

describe("controller options", () => {
  test("defaults match SPEC section 6", () => {
    assert.deepEqual(resolve({}), {
      kubeconfig: undefined,
      context: undefined,
      namespaces: [],
      concurrency: 4,
      fanoutConcurrency: 8,
      metricsBindAddress: ":8080",
      healthProbeBindAddress: ":8081",
      leaderElect: true,
      leaderElectionNamespace: "default",
      leaderElectionLeaseDurationMs: 15_000,
      shard: { index: 0, count: 1 },
      reapIntervalMs: 300_000,
      logLevel: "info",
      ociRegistry: undefined,
      ociRegistryCaFile: undefined,
      ociRegistryInsecure: false,
      ociRegistryDockerConfig: undefined,
      ociRegistryTimeoutMs: 10_000,
      hibernateTimeoutMs: 180_000,
      wakeTimeoutMs: 300_000,
    });
  });

  test("every option reads its env var", () => {
    const o = resolve(
      {},
      {
        COCOONSET_KUBECONFIG: "/etc/kc",
        COCOONSET_CONTEXT: "prod",
        COCOONSET_NAMESPACE: "team-a, team-b",
        COCOONSET_CONCURRENCY: "7",
        COCOONSET_FANOUT_CONCURRENCY: "3",
        COCOONSET_METRICS_BIND_ADDRESS: "127.0.0.1:9090",
        COCOONSET_HEALTH_PROBE_BIND_ADDRESS: "0",
        COCOONSET_LEADER_ELECT: "false",
        COCOONSET_LEADER_ELECTION_NAMESPACE: "ops",
        COCOONSET_REAP_INTERVAL: "90s",
        COCOONSET_LOG_LEVEL: "debug",
        OCI_REGISTRY: "127.0.0.1:5000/snapshots",
        OCI_REGISTRY_CA_FILE: "/etc/ca.pem",
        OCI_REGISTRY_INSECURE: "true",
        DOCKER_CONFIG: "/etc/docker-auth",
        OCI_REGISTRY_TIMEOUT: "30s",
        COCOONSET_HIBERNATE_TIMEOUT: "10s",
        COCOONSET_WAKE_TIMEOUT: "1m",
      },
    );
    assert.deepEqual(o, {
      kubeconfig: "/etc/kc",
      context: "prod",
      namespaces: ["team-a", "team-b"],
      concurrency: 7,
      fanoutConcurrency: 3,
      metricsBindAddress: "127.0.0.1:9090",
      healthProbeBindAddress: "0",
      leaderElect: false,
      leaderElectionNamespace: "ops",
      leaderElectionLeaseDurationMs: 15_000,
      shard: { index: 0, count: 1 },
      reapIntervalMs: 90_000,
      logLevel: "debug",
      ociRegistry: "127.0.0.1:5000/snapshots",
      ociRegistryCaFile: "/etc/ca.pem",
      ociRegistryInsecure: true,
      ociRegistryDockerConfig: "/etc/docker-auth",
      ociRegistryTimeoutMs: 30_000,
      hibernateTimeoutMs: 10_000,
      wakeTimeoutMs: 60_000,
    });
  });

  test("a flag wins over its env var", () => {
    const o = resolve(
      { concurrency: "2", namespace: ["x"], leaderElect: true, reapInterval: "1m" },
      {
        COCOONSET_CONCURRENCY: "9",
        COCOONSET_NAMESPACE: "y",
        COCOONSET_LEADER_ELECT: "false",
        COCOONSET_REAP_INTERVAL: "1h",
      },
    );
    assert.equal(o.concurrency, 2);
    assert.deepEqual(o.namespaces, ["x"]);
    assert.equal(o.leaderElect, true);
    assert.equal(o.reapIntervalMs, 60_000);
  });

  test("--shard (or COCOONSET_SHARD) takes a share; 0/1 without leader election is fine", () => {
    assert.deepEqual(resolve({ shard: "2/4" }).shard, { index: 2, count: 4 });
    assert.equal(
      resolve({ leaderElectionLeaseDuration: "3s" }).leaderElectionLeaseDurationMs,
      3000,
    );
    assert.deepEqual(resolve({}, { COCOONSET_SHARD: "1/3" }).shard, { index: 1, count: 3 });
    assert.deepEqual(resolve({ shard: "0/1", leaderElect: false }).shard, { index: 0, count: 1 });
  });

  test("--leader-elect accepts =false, --no-leader-elect (false) and a bare flag (true)", () => {
    assert.equal(resolve({ leaderElect: "false" }).leaderElect, false);
    assert.equal(resolve({ leaderElect: false }).leaderElect, false);
    assert.equal(resolve({ leaderElect: true }).leaderElect, true);
    assert.equal(resolve({ leaderElect: "TRUE" }).leaderElect, true);
  });

  test("repeated and comma-separated namespaces are merged and deduplicated", () => {
    assert.deepEqual(resolve({ namespace: ["a", "b,c", "a"] }).namespaces, ["a", "b", "c"]);
  });

  test("the Lease namespace defaults to the pod's namespace", () => {
    assert.equal(resolve({}, {}, "cocoon-system").leaderElectionNamespace, "cocoon-system");
    assert.equal(
      resolve({ leaderElectionNamespace: "x" }, {}, "cocoon-system").leaderElectionNamespace,
      "x",
    );
  });

  test("--oci-registry takes host[:port][/prefix], with or without a scheme; the flag wins over OCI_REGISTRY", () => {
    for (const ok of [
      "127.0.0.1:5000",
      "localhost:5000/cocoon/snapshots",
      "registry.example.com",
      "http://localhost:80/vms",
      "https://[::1]:5000",
      "ghcr.io/team_a/vm-snapshots",
    ])
      assert.equal(resolve({ ociRegistry: ok }).ociRegistry, ok);
    assert.equal(
      resolve({ ociRegistry: "a.example:1" }, { OCI_REGISTRY: "b.example:2" }).ociRegistry,
      "a.example:1",
    );
    assert.equal(resolve({}, { OCI_REGISTRY: "  " }).ociRegistry, undefined, "blank is unset");
  });

  test("plain http to a host that is not loopback needs --oci-registry-insecure", () => {
    assert.equal(
      resolve({ ociRegistry: "http://10.0.0.1:80/vms", ociRegistryInsecure: true }).ociRegistry,
      "http://10.0.0.1:80/vms",
    );
    assert.equal(
      resolve({ ociRegistry: "http://10.0.0.1:80" }, { OCI_REGISTRY_INSECURE: "1" })
        .ociRegistryInsecure,
      true,
    );
    assert.equal(resolve({ ociRegistryInsecure: "false" }).ociRegistryInsecure, false);
    assert.equal(resolve({ ociRegistryCaFile: " /ca.pem " }).ociRegistryCaFile, "/ca.pem");
  });

  const bad: [string, ControllerFlags, Record<string, string>, RegExp][] = [
    [
      "--oci-registry with a space",
      { ociRegistry: "reg istry:5000" },
      {},
      /^\[--oci-registry\] must be host\[:port\]\[\/prefix\]/,
    ],
    [
      "--oci-registry port 0",
      { ociRegistry: "127.0.0.1:0" },
      {},
      /^\[--oci-registry\] must have a port between 1 and 65535 \(got "127\.0\.0\.1:0"\)/,
    ],
    [
      "--oci-registry port 70000",
      { ociRegistry: "127.0.0.1:70000" },
      {},
      /\[--oci-registry\] must have a port/,
    ],
    [
      "--oci-registry ftp://",
      { ociRegistry: "ftp://host:21" },
      {},
      /\[--oci-registry\] must be host/,
    ],
    [
      "--oci-registry upper-case prefix",
      { ociRegistry: "host:5000/Snapshots" },
      {},
      /\[--oci-registry\].*the prefix is lower-case/,
    ],
    [
      "--oci-registry empty prefix component",
      { ociRegistry: "host:5000//x" },
      {},
      /\[--oci-registry\].*prefix/,
    ],
    ["--oci-registry no host", { ociRegistry: "http:///x" }, {}, /\[--oci-registry\] must be host/],
    [
      "--oci-registry http:// to a host that is not loopback",
      { ociRegistry: "http://10.0.0.1:5000" },
      {},
      /^\[--oci-registry\] asks for plain http to a host that is not loopback: give --oci-registry-insecure too \(or use https\) \(got "http:\/\/10\.0\.0\.1:5000"\)$/,
    ],
    [
      "--oci-registry-insecure maybe",
      { ociRegistryInsecure: "maybe" },
      {},
      /^\[--oci-registry-insecure\] must be true or false \(got "maybe"\)$/,
    ],
    [
      "--oci-registry of 10 kB: the value is cut to a prefix and its length",
      { ociRegistry: `${"a".repeat(10_000)} x` },
      {},
      /^\[--oci-registry\] must be host\[:port\]\[\/prefix\].* \(got "a{60}"\.\.\. \(10002 characters\)\)$/,
    ],
    [
      "OCI_REGISTRY=bad",
      {},
      { OCI_REGISTRY: "not a registry" },
      /^\[--oci-registry \(from OCI_REGISTRY\)\]/,
    ],
    ["--concurrency 0", { concurrency: "0" }, {}, /^\[--concurrency\] must be an integer/],
    ["--concurrency abc", { concurrency: "abc" }, {}, /\[--concurrency\].*"abc"/],
    ["--concurrency -1", { concurrency: "-1" }, {}, /\[--concurrency\]/],
    ["--fanout-concurrency 0", { fanoutConcurrency: "0" }, {}, /\[--fanout-concurrency\]/],
    [
      "--reap-interval soon",
      { reapInterval: "soon" },
      {},
      /\[--reap-interval\] must be a duration/,
    ],
    ["--reap-interval 5x", { reapInterval: "5x" }, {}, /\[--reap-interval\]/],
    [
      "--oci-registry-timeout 500ms",
      { ociRegistryTimeout: "500ms" },
      {},
      /\[--oci-registry-timeout\] must be from 1s to 5m/,
    ],
    [
      "--oci-registry-timeout soon",
      { ociRegistryTimeout: "soon" },
      {},
      /\[--oci-registry-timeout\] must be a duration/,
    ],
    [
      "--reap-interval 10ms",
      { reapInterval: "10ms" },
      {},
      /\[--reap-interval\] must be at least 1s/,
    ],
    [
      "--hibernate-timeout 500ms",
      { hibernateTimeout: "500ms" },
      {},
      /^\[--hibernate-timeout\] must be at least 1s/,
    ],
    [
      "COCOONSET_WAKE_TIMEOUT=later",
      {},
      { COCOONSET_WAKE_TIMEOUT: "later" },
      /^\[--wake-timeout \(from COCOONSET_WAKE_TIMEOUT\)\] must be a duration/,
    ],
    [
      "--metrics-bind-address 8080",
      { metricsBindAddress: "8080" },
      {},
      /\[--metrics-bind-address\]/,
    ],
    [
      "--health-probe-bind-address :99999",
      { healthProbeBindAddress: ":99999" },
      {},
      /\[--health-probe-bind-address\]/,
    ],
    [
      "--leader-elect maybe",
      { leaderElect: "maybe" },
      {},
      /\[--leader-elect\] must be true or false/,
    ],
    ["--log-level loud", { logLevel: "loud" }, {}, /\[--log-level\] must be one of/],
    [
      "--shard 4/4",
      { shard: "4/4" },
      {},
      /^\[--shard\] must be INDEX\/COUNT with 0 <= INDEX < COUNT <= 256 \(got "4\/4"\)$/,
    ],
    ["--shard two", { shard: "two" }, {}, /^\[--shard\] must be INDEX\/COUNT/],
    [
      "--leader-election-lease-duration 1s",
      { leaderElectionLeaseDuration: "1s" },
      {},
      /^\[--leader-election-lease-duration\] must be whole seconds from 2s to 1h/,
    ],
    [
      "COCOONSET_SHARD=1/0",
      {},
      { COCOONSET_SHARD: "1/0" },
      /^\[--shard \(from COCOONSET_SHARD\)\]/,
    ],
    [
      "--shard 1/2 --no-leader-elect",
      { shard: "1/2", leaderElect: false },
      {},
      /^\[--shard\] needs leader election/,
    ],
    ["--namespace Bad_NS", { namespace: ["Bad_NS"] }, {}, /\[--namespace\]/],
    [
      "COCOONSET_CONCURRENCY=0",
      {},
      { COCOONSET_CONCURRENCY: "0" },
      /^\[--concurrency \(from COCOONSET_CONCURRENCY\)\]/,
    ],
    [
      "COCOONSET_REAP_INTERVAL=forever",
      {},
      { COCOONSET_REAP_INTERVAL: "forever" },
      /\[--reap-interval \(from COCOONSET_REAP_INTERVAL\)\]/,
    ],
  ];
  for (const [name, flags, env, message] of bad) {
    test(`rejects ${name} naming the flag`, () => {
      assert.throws(
        () => resolve(flags, env),
        (e: unknown) => OptionsError.isInstance(e) && message.test(e.message),
      );
    });
  }

  test("every option documents a flag, an env var and a default", () => {
    assert.equal(CONTROLLER_OPTIONS.length, 20);
    for (const o of CONTROLLER_OPTIONS) {
      assert.match(o.flag, /^--[a-z-]+$/);
      // OCI_REGISTRY is the name the node agent and cocoon-operator read: one for the stack;
      // the Docker config folder is Docker's own DOCKER_CONFIG.
      assert.match(
        o.env,
        o.key === "ociRegistryDockerConfig"
          ? /^DOCKER_CONFIG$/
          : o.key.startsWith("ociRegistry")
            ? /^OCI_REGISTRY(_[A-Z_]+)?$/
            : /^COCOONSET_[A-Z_]+$/,
      );
      assert.ok(o.defaultText.length > 0);
    }
  });

  test("the pod namespace comes from POD_NAMESPACE, else the service-account file", () => {
    const files: Record<string, string> = { [SERVICE_ACCOUNT_NAMESPACE_FILE]: "from-file\n" };
    const read = (p: string) => files[p];
    assert.equal(detectPodNamespace({ POD_NAMESPACE: "from-env" }, read), "from-env");
    assert.equal(detectPodNamespace({}, read), "from-file");
    assert.equal(
      detectPodNamespace({}, () => undefined),
      undefined,
    );
  });
});
