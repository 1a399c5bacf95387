// The project's test command: build; then the checks (generated files, ESLint, Prettier, the
// import rules of .dependency-cruiser.cjs, publint and arethetypeswrong on the packed package)
// beside the unit tests, their lines tagged `checks│` and `unit│`; then the integration,
// differential and e2e tiers against embedded clusters started for the run (and stopped after
// it, pass or fail).
// `node scripts/test.mjs unit|integration|differential|e2e` runs only that tier.
// The differential tier needs the Go peer cocoon-operator (bench/peer.ts builds it); when it
// cannot be built the tier is skipped with the reason printed.
//
// Within a cluster tier, the files in SERIAL change something every test shares (the CRD,
// the apiserver, a node, controllers that watch every namespace; see test-groups.mjs): they
// run one at a time. Then the CRD is installed once and the other files run CONCURRENCY at a
// time, each in its own namespaces.
//
// Three lanes, three clusters: the serial groups (they remove the CRD, or their Operators
// install and delete it) and the differential tier (it swaps the CRD for the peer's) run on
// the second and third clusters, beside the concurrent files of the integration and e2e tiers
// on the first, so that waiting on one cluster's CRD never holds another's tests (LANE and
// MOVED in test-groups.mjs). With COCOONSET_TEST_CLUSTER_DIR (a cluster the caller started)
// everything runs in one lane on that cluster, in tier order.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { createInterface } from "node:readline";
import { CONCURRENCY, LANE, MOVED, SERIAL } from "./test-groups.mjs";

const only = process.argv[2];
const tiers = only ? [only] : ["unit", "integration", "differential", "e2e"];
const cli = join("dist", "cluster", "dev-cli.js");

// Node's compile cache for every Node process of the run: the test files, the controllers they
// start, and the Node program and dynamic-provider hosts of each of the e2e tier's `pulumi`
// commands, which load the same @pulumi/pulumi, typescript and @pulumi/kubernetes modules
// a few hundred times (about 0.3 CPU-seconds less per `pulumi preview` measured here). A
// folder of the run's own, removed when it ends; a caller's own NODE_COMPILE_CACHE is kept.
if (!process.env.NODE_COMPILE_CACHE) {
  const cache = mkdtempSync(join(tmpdir(), "cocoonset-test-node-cache-"));
  process.env.NODE_COMPILE_CACHE = cache;
  process.on("exit", () => rmSync(cache, { recursive: true, force: true }));
}

/**
 * What failed, repeated at the very end of the run: the lanes' output interleaves, and a
 * reader (or CI, which keeps the tail) must not have to search for the red line. Each entry
 * is a failed step's title and the failing tests' lines with a few lines of their reasons.
 */
const failures = [];

/** Keeps the lines of a step's output that say what failed (node:test's spec reporter). */
function failureLines(lines) {
  const out = [];
  let keep = 0;
  for (const line of lines) {
    if (/✖|not ok|Error|error:|expected|actual|FAILED/.test(line)) keep = 6;
    if (keep > 0) {
      out.push(line);
      keep--;
    }
  }
  return out.slice(-80);
}

/**
 * Runs one step, its output shown live (each line after `tag` when lanes run side by side).
 * Resolves true when it exits 0.
 */
function step(title, cmd, args, { env = {}, tag = "" } = {}) {
  const t0 = Date.now();
  const seen = [];
  const say = (line) => {
    process.stdout.write(`${tag}${line}\n`);
    if (tag) {
      seen.push(line);
      if (seen.length > 4000) seen.splice(0, 1000);
    }
  };
  process.stdout.write(`\n${tag}== ${title}\n`);
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      stdio: ["ignore", tag ? "pipe" : "inherit", tag ? "pipe" : "inherit"],
      env: { ...process.env, ...env },
    });
    if (tag) {
      for (const stream of [child.stdout, child.stderr])
        createInterface({ input: stream }).on("line", say);
    }
    child.on("close", (code) => {
      const secs = ((Date.now() - t0) / 1000).toFixed(1);
      if (code !== 0) failures.push({ title: `${tag}${title}`, lines: failureLines(seen) });
      say(code === 0 ? `== ${title}: ok in ${secs}s` : `== ${title}: FAILED after ${secs}s`);
      resolve(code === 0);
    });
  });
}

function testFiles(dir) {
  if (!existsSync(dir)) return [];
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...testFiles(p));
    else if (name.endsWith(".test.js")) out.push(p);
  }
  return out.sort();
}

function must(ok) {
  if (ok) return;
  printFailures();
  process.exit(1);
}

function printFailures() {
  for (const f of failures) {
    process.stdout.write(`\n== FAILED: ${f.title}\n`);
    for (const line of f.lines) process.stdout.write(`   ${line}\n`);
  }
}

must(await step("build", "npx", ["tsc", "-p", "tsconfig.json"]));
// The controller's bundle, which `cocoonset controller` and the image run.
must(await step("bundle", process.execPath, ["dist/cluster/controller-bundle.js"]));

/**
 * The checks after the build, one after another, stopping at the first failure: each is
 * mostly one thread, so they run beside the unit tests (see below) rather than before them.
 */
async function checks(tag) {
  const steps = [
    [
      "generated files are fresh",
      process.execPath,
      [join("dist", "scripts", "generate-schema.js"), "--check"],
    ],
    ["lint", "npx", ["eslint", "."]],
    ["format", "npx", ["prettier", "--check", "."]],
    ["imports: no cycles, no upward layers", "npm", ["run", "--silent", "lint:deps"]],
    ["exports: none unused", "npm", ["run", "--silent", "lint:exports"]],
    ["package: publint, arethetypeswrong", "npm", ["run", "--silent", "lint:package"]],
  ];
  for (const [title, cmd, args] of steps)
    if (!(await step(title, cmd, args, { tag }))) return false;
  return true;
}

/**
 * The work of the cluster tiers as parts: a tier's serial group, then the CRD and its other
 * files (some of them, MOVED, a part of their own). Each part knows its lane.
 */
function partsOf(tier) {
  const files = testFiles(join("dist", "tests", tier));
  if (files.length === 0) throw new Error(`no ${tier} tests found`);
  const alone = SERIAL[tier] ?? {};
  const serial = files.filter((f) => Object.hasOwn(alone, basename(f)));
  const movedNames = MOVED[tier]?.files ?? [];
  const moved = files.filter((f) => !serial.includes(f) && movedNames.includes(basename(f)));
  const rest = files.filter((f) => !serial.includes(f) && !moved.includes(f));
  const lane = LANE[tier] ?? { serial: 0, rest: 0 };
  const parts = [];
  if (serial.length > 0) parts.push({ tier, kind: "serial", files: serial, lane: lane.serial });
  if (rest.length > 0) parts.push({ tier, kind: "rest", files: rest, lane: lane.rest });
  if (moved.length > 0) parts.push({ tier, kind: "rest", files: moved, lane: MOVED[tier].lane });
  return parts;
}

const TEST_ARGS = ["--enable-source-maps", "--test", "--test-reporter=spec"];

/** Runs one part on the cluster in `env`; resolves true when it passed. */
async function runPart(part, env, tag) {
  const args = [...TEST_ARGS];
  if (part.tier !== "unit") args.push("--test-timeout=900000");
  if (part.kind === "serial")
    return step(
      `${part.tier} tests, one at a time`,
      process.execPath,
      [...args, "--test-concurrency=1", ...part.files],
      { env, tag },
    );
  if (
    part.tier !== "unit" &&
    !(await step("the CRD", process.execPath, [join("dist", "scripts", "ensure-crd.js")], {
      env,
      tag,
    }))
  )
    return false;
  const n = Number(process.env.COCOONSET_TEST_CONCURRENCY ?? CONCURRENCY[part.tier] ?? 1);
  return step(
    `${part.tier} tests, ${n} at a time`,
    process.execPath,
    [...args, `--test-concurrency=${n}`, ...part.files],
    { env, tag },
  );
}

/** The differential tier's peer: "ok", "skip" (cannot be built here, reason printed) or "fail". */
function ensurePeer(tag) {
  process.stdout.write(`${tag}== the peer for the differential tier\n`);
  const peer = spawnSync(process.execPath, [join("dist", "bench", "ensure-peer.js")], {
    stdio: ["ignore", "pipe", "inherit"],
    encoding: "utf8",
  });
  const out = (peer.stdout ?? "").replace(/^/gm, tag);
  if (peer.status === 2) {
    process.stdout.write(`${tag}== differential tests SKIPPED: the peer cannot be built:\n${out}`);
    return "skip";
  }
  if (peer.status !== 0) {
    process.stdout.write(`${tag}== the peer: FAILED (exit ${peer.status})\n${out}`);
    return "fail";
  }
  process.stdout.write(`${tag}== the peer:\n${out}`);
  return "ok";
}

/** Runs the parts one after another on one cluster; stops at the first failure. */
async function runLane(parts, env, tag) {
  const t0 = Date.now();
  let peer;
  for (const part of parts) {
    if (part.tier === "differential") {
      peer ??= ensurePeer(tag);
      if (peer === "fail") return false;
      if (peer === "skip") continue;
    }
    if (!(await runPart(part, env, tag))) return false;
  }
  if (tag)
    process.stdout.write(`${tag}== lane done in ${((Date.now() - t0) / 1000).toFixed(1)}s\n`);
  return true;
}

/** The unit tier's parts, one after another; resolves true when all passed. */
async function unitTier(tag) {
  for (const part of partsOf("unit")) if (!(await runPart(part, {}, tag))) return false;
  return true;
}

if (!only) {
  const [checked, unit] = await Promise.all([checks("checks│ "), unitTier("unit│ ")]);
  must(checked && unit);
} else if (only === "unit") must(await unitTier(""));
const clusterTiers = tiers.filter((t) => t !== "unit");
if (clusterTiers.length === 0) process.exit(0);

// The groups the tests need beyond the demo's (Distribution, the YAML, Python and Go hosts,
// the Python virtualenv) are fetched or built here, with their own progress lines.
must(await step("toolchain", process.execPath, [cli, "toolchain", "ensure", "--for", "test"]));
let parts;
try {
  parts = clusterTiers.flatMap(partsOf);
} catch (e) {
  process.stdout.write(`${e.message}\n`);
  process.exit(1);
}
const given = process.env.COCOONSET_TEST_CLUSTER_DIR;
const byLane = [];
for (const part of parts) (byLane[given ? 0 : part.lane] ??= []).push(part);
const lanes = byLane.filter((l) => l !== undefined && l.length > 0);
const clusters = given
  ? [given]
  : lanes.map((_, i) => mkdtempSync(join(tmpdir(), `cocoonset-test-cluster-${i + 1}-`)));
const tags = lanes.length > 1 ? lanes.map((_, i) => `${"ABC"[i]}│ `) : [""];

let failed = false;
try {
  const up = await Promise.all(
    clusters.map((dir, i) =>
      step("embedded cluster up", process.execPath, [cli, "cluster", "up", "--state-dir", dir], {
        tag: tags[i],
      }),
    ),
  );
  failed = up.includes(false);
  if (!failed) {
    const results = await Promise.all(
      lanes.map((lane, i) =>
        runLane(
          lane,
          {
            COCOONSET_TEST_CLUSTER_DIR: clusters[i],
            COCOONSET_TEST_KUBECONFIG: join(clusters[i], "kubeconfig"),
          },
          tags[i],
        ),
      ),
    );
    failed = results.includes(false);
  }
} finally {
  if (!given) {
    for (const dir of clusters)
      spawnSync(process.execPath, [cli, "cluster", "down", "--state-dir", dir], {
        stdio: "inherit",
      });
  }
}
printFailures();
process.stdout.write(failed ? "\n== tests FAILED\n" : "\n== tests: all passed\n");
process.exit(failed ? 1 : 0);
