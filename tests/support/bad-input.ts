/**
 * One generator of CocoonSet specs and Fleet / Operator arguments for the bad-input property
 * tests: valid ones, near-valid ones (one field off) and hostile ones (huge strings, deep
 * nesting, unicode, numbers at the limits, NaN, ±Infinity, -0, values of the wrong type).
 * The unit tier runs `check` on them; the integration tier sends a sample to the apiserver.
 */
import fc from "fast-check";

/** Values a hostile field may take. */
export const limitNumbers = [
  0,
  -0,
  -1,
  1,
  1.5,
  2.5,
  63,
  64,
  1000,
  1001,
  65535,
  65536,
  2 ** 31 - 1,
  2 ** 31,
  2 ** 53 - 1,
  2 ** 53,
  2 ** 63,
  1e21,
  1e308,
  Number.MIN_VALUE,
  -1e308,
  NaN,
  Infinity,
  -Infinity,
];

const unicode = [
  "ẞtorage",
  "名字",
  "😀",
  "\u0000",
  "\u00a0",
  "\u200b",
  "a\u0301",
  "\ud800",
  "ｆｕｌｌｗｉｄｔｈ",
  "é",
];

/** Strings at the edges: empty, blank, unicode, long and very long. */
export function hostileString(maxLength: number): fc.Arbitrary<string> {
  return fc.oneof(
    fc.constantFrom("", " ", "\t", "\n", " a", "a ", "-a", "a-", "A", "a_b", "a.b", "0", "42"),
    fc.constantFrom(...unicode),
    fc.string({ maxLength: 80, unit: "grapheme" }),
    fc
      .tuple(
        fc.constantFrom("a", "0", "-", " ", "é"),
        fc.integer({ min: Math.min(60, maxLength), max: maxLength }),
      )
      .map(([c, n]) => c.repeat(n)),
  );
}

/** Quantities: good ones, ones at 2^63-1 and 2^53-1, and bad ones. */
export const quantityArb: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 12,
    arbitrary: fc.constantFrom("1", "500m", "10Gi", "2", 4, "1.5", "512Mi", "100u", "1e3"),
  },
  fc.constantFrom(
    "1",
    "0",
    "500m",
    "10Gi",
    "1.5",
    ".5",
    "+1",
    "1e3",
    "1E-3",
    "1e-999",
    "7Ei",
    "8Ei",
    "9E",
    "10E",
    "9223372036854775807",
    "9223372036854775808",
    "1e300",
    "1e1000",
    "1e300000000",
    "1e999999999",
    "-1",
    "1 Gi",
    "1GB",
    "0".repeat(64),
    "0".repeat(65),
    "0.0000000001",
  ),
  fc.constantFrom(...limitNumbers),
  fc.integer({ min: -10, max: 2 ** 40 }),
  fc
    .tuple(
      fc.bigInt({ min: 0n, max: 10n ** 25n }),
      fc.constantFrom("", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ei", "e2", "e-9", "e19"),
    )
    .map(([n, s]) => `${n}${s}`),
);

/** A value of any shape, nested up to `depth` levels. */
export function anyValue(depth = 3): fc.Arbitrary<unknown> {
  return fc.letrec<{ v: unknown }>((tie) => ({
    v: fc.oneof(
      { depthSize: "small", maxDepth: depth },
      fc.constantFrom(...limitNumbers),
      hostileString(200),
      fc.boolean(),
      fc.constant(null),
      fc.array(tie("v"), { maxLength: 3 }),
      fc.dictionary(hostileString(20), tie("v"), { maxKeys: 3 }),
    ),
  })).v;
}

const goodImage = fc.constantFrom("ghcr.io/acme/agent:1", "agents/coder:1", "a");
const goodName = fc.constantFrom("web", "db", "cache", "browser-1");

/** Sometimes the good value, sometimes a near miss, sometimes anything at all. */
function field<T>(good: fc.Arbitrary<T>, near: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 24, arbitrary: good },
    { weight: 2, arbitrary: near },
    { weight: 1, arbitrary: anyValue(2) },
  );
}

function optional(arb: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc.option(arb, { nil: undefined, freq: 2 });
}

/** Drops the keys whose value is undefined (as JSON would). */
function compact(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

const resourcesArb = fc
  .record({
    limits: optional(
      fc.dictionary(fc.constantFrom("cpu", "memory", "example.com/gpu"), quantityArb, {
        maxKeys: 2,
      }),
    ),
    requests: optional(
      fc.dictionary(fc.constantFrom("cpu", "memory"), quantityArb, { maxKeys: 2 }),
    ),
    claims: optional(
      fc.array(fc.record({ name: field(goodName, hostileString(70)) }), { maxLength: 3 }),
    ),
  })
  .map(compact);

function vmOptions(): Record<string, fc.Arbitrary<unknown>> {
  return {
    os: optional(field(fc.constantFrom("linux", "windows"), fc.constantFrom("Linux", "dos", ""))),
    probePort: optional(
      field(fc.integer({ min: 0, max: 65535 }), fc.constantFrom(...limitNumbers)),
    ),
    storage: optional(quantityArb),
    network: optional(field(fc.constantFrom("default", "net-a"), hostileString(300))),
    forcePull: optional(field(fc.boolean(), fc.constantFrom("true", 1, 0))),
    resources: optional(field(resourcesArb, anyValue(2))),
  };
}

const agentArb = fc
  .record({
    replicas: optional(field(fc.integer({ min: 0, max: 5 }), fc.constantFrom(...limitNumbers))),
    image: field(goodImage, hostileString(300)),
    mode: optional(field(fc.constantFrom("clone", "run"), fc.constantFrom("fork", ""))),
    serviceAccountName: optional(field(fc.constantFrom("default", "agent-sa"), hostileString(300))),
    ...vmOptions(),
  })
  .map(compact);

const toolboxArb = fc
  .record({
    name: field(goodName, hostileString(70)),
    image: optional(field(goodImage, hostileString(100))),
    mode: optional(field(fc.constantFrom("run", "static"), fc.constantFrom("Run", ""))),
    vncPort: optional(field(fc.integer({ min: 0, max: 65535 }), fc.constantFrom(...limitNumbers))),
    ...vmOptions(),
  })
  .map(compact);

/** A CocoonSet spec: mostly well-formed, with near misses and hostile values mixed in. */
export const specArb: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .record({
        agent: field(agentArb, anyValue(2)),
        nodePool: optional(field(fc.constantFrom("default", "gpu"), hostileString(70))),
        nodeName: optional(field(fc.constantFrom("kwok-node-0"), hostileString(300))),
        snapshotPolicy: optional(field(fc.constantFrom("always", "never"), hostileString(10))),
        hibernatePolicy: optional(field(fc.constantFrom("retain", "release"), hostileString(10))),
        snapshotCompatibilityClass: optional(field(fc.constantFrom("n2-v1"), hostileString(70))),
        suspend: optional(field(fc.boolean(), anyValue(1))),
        toolboxes: optional(field(fc.array(toolboxArb, { maxLength: 4 }), anyValue(2))),
        unknownField: fc.oneof(
          { weight: 20, arbitrary: fc.constant(undefined) },
          { weight: 1, arbitrary: anyValue(2) },
        ),
      })
      .map(compact),
  },
  { weight: 1, arbitrary: anyValue(4) },
);

/** A CocoonSet name: good, at the 63/64 boundary, or hostile. */
export const nameArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom("coder", "fleet.v2", "a", "a".repeat(63)) },
  { weight: 3, arbitrary: hostileString(253) },
  { weight: 1, arbitrary: fc.constantFrom("a".repeat(64), "a".repeat(253), `${"a".repeat(62)}.b`) },
);

/** Everything the slots resource's check receives besides the kubeconfig. */
export const fleetInputsArb = fc.record({
  name: nameArb,
  namespace: field(fc.constantFrom("agents", "team-a"), hostileString(70)),
  spec: specArb,
  fanOut: optional(field(fc.integer({ min: 1, max: 64 }), fc.constantFrom(...limitNumbers))),
  timeoutSeconds: optional(
    field(fc.integer({ min: 1, max: 600 }), fc.constantFrom(...limitNumbers)),
  ),
  releaseTimeoutSeconds: optional(field(fc.constantFrom(120), fc.constantFrom(...limitNumbers))),
});

/** Operator arguments that reach the controller's flags. */
export const operatorArgsArb = fc
  .record({
    namespace: optional(field(fc.constantFrom("cocoonset-system"), hostileString(70))),
    image: optional(field(goodImage, hostileString(100))),
    concurrency: optional(field(fc.integer({ min: 1, max: 16 }), fc.constantFrom(...limitNumbers))),
    fanoutConcurrency: optional(
      field(fc.integer({ min: 1, max: 16 }), fc.constantFrom(...limitNumbers)),
    ),
    reapInterval: optional(field(fc.constantFrom("5m", "30s", "1h"), hostileString(20))),
    logLevel: optional(field(fc.constantFrom("info", "debug", "warn"), hostileString(20))),
    hibernateTimeout: optional(field(fc.constantFrom("3m", "90s", "1h"), hostileString(20))),
    wakeTimeout: optional(field(fc.constantFrom("5m", "45s", "2h"), hostileString(20))),
    watchNamespaces: optional(
      field(
        fc.array(fc.constantFrom("team-a", "team-b")),
        fc.array(hostileString(70), { maxLength: 3 }),
      ),
    ),
    leaderElect: optional(field(fc.boolean(), anyValue(1))),
  })
  .map(compact);

/** Whether a failure reason starts by naming a field in brackets. */
export function namesAField(reason: string): boolean {
  return /^\[\S.*?\] \S/s.test(reason);
}
