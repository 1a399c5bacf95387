/**
 * What each command ensures of the toolchain (`needs` of `toolchain.json`): the demo none of
 * the groups only the tests use, the embedded cluster every binary it starts, the tests every
 * group; and the names are checked.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { resolveOnly } from "../../../cluster/toolchain.js";
import {
  groupFiles,
  groupsFor,
  loadPins,
  needsNames,
  ToolchainError,
  type ToolchainPins,
} from "../../../cluster/toolchain-pins.js";

const pins = loadPins();

test("needs names three commands, each a list of groups of the pin file", () => {
  assert.deepEqual(needsNames(pins), ["cluster", "demo", "test"]);
  for (const name of needsNames(pins))
    for (const g of pins.needs![name]) assert.ok(pins.groups[g], `${name}: ${g}`);
});

test("the tests need every group", () => {
  assert.deepEqual(groupsFor("test", pins), Object.keys(pins.groups));
});

test("the demo needs the cluster's groups, pulumi, its Kubernetes provider and the Node.js host, and nothing only the tests use", () => {
  const demo = groupsFor("demo", pins);
  assert.deepEqual(demo, [
    "etcd",
    "kubernetes",
    "kwok",
    "pulumi",
    "pulumi-kubernetes",
    "registry",
    "pulumi-language-nodejs",
  ]);
  for (const g of groupsFor("cluster", pins)) assert.ok(demo.includes(g), g);
  for (const g of ["distribution", "pulumi-yaml", "pulumi-language-python", "pulumi-language-go"])
    assert.ok(!demo.includes(g), g);
  // The Python virtualenv is made only when the Python host is wanted.
  const binaries = resolveOnly(demo, pins);
  assert.ok(!binaries.includes("pulumi-language-python"));
  assert.ok(
    binaries.includes("pulumi-resource-pulumi-nodejs"),
    "the host's dynamic-provider script",
  );
});

test("the cluster's groups hold every binary the embedded cluster starts", () => {
  const source = readFileSync(
    fileURLToPath(new URL("../../../../cluster/local-cluster.ts", import.meta.url)),
    "utf8",
  );
  const started = [...source.matchAll(/startComponent\(\s*stateDir,\s*"[^"]+",\s*"([^"]+)"/g)].map(
    (m) => m[1],
  );
  assert.ok(started.length >= 6, `found ${started.join(", ")}`);
  const provided = groupsFor("cluster", pins).flatMap((g) => groupFiles(pins.groups[g]));
  for (const b of started) assert.ok(provided.includes(b as never), b);
});

test("an unknown command, or a needs list naming no group, is refused with the names", () => {
  assert.throws(
    () => groupsFor("demos", pins),
    (e: unknown) =>
      e instanceof ToolchainError &&
      e.message ===
        '[for] unknown command "demos": choose from cluster, demo, test (the needs of toolchain.json)',
  );
  const bad: ToolchainPins = { ...pins, needs: { ...pins.needs, demo: ["etcd", "kubernets"] } };
  assert.throws(
    () => groupsFor("demo", bad),
    /\[needs\.demo\] names no group of toolchain.json: "kubernets"/,
  );
});
