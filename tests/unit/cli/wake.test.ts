/**
 * `cocoonset wake FLEET [SLOT...]`: which members the arguments name (a table over one fleet),
 * and the arguments refused by name before any request is sent (the command run with a
 * kubeconfig that does not exist, so reaching the cluster would fail differently).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { checkedFleetName, wakeTargets } from "../../../cli/wake-command.js";
import type { CocoonSet } from "../../../engine/spec/index.js";

const cli = fileURLToPath(new URL("../../../cli/main.js", import.meta.url));

function run(args: string[]) {
  return spawnSync(process.execPath, [cli, ...args], { encoding: "utf8", timeout: 60_000 });
}

const fleet: CocoonSet = {
  apiVersion: "cocoonset.cocoonstack.io/v1",
  kind: "CocoonSet",
  metadata: { name: "coder", namespace: "agents" },
  spec: {
    agent: { image: "agents/coder:1", replicas: 2 },
    toolboxes: [
      { name: "browser", image: "tools/browser:1" },
      { name: "7", image: "tools/seven:1" },
    ],
  },
};

describe("wakeTargets", () => {
  const table: [string, string[], string[]][] = [
    ["no SLOT: every member, main agent first", [], ["0", "1", "2", "browser", "7"]],
    ["slot numbers", ["2", "0"], ["2", "0"]],
    ["a number with a leading zero is the slot", ["01"], ["1"]],
    ["a toolbox by name", ["browser"], ["browser"]],
    ["a toolbox named with digits is matched by name first", ["7"], ["7"]],
    ["a member's pod name", ["coder-1", "coder-browser"], ["1", "browser"]],
    ["the same member twice is renewed once", ["1", "coder-1", " 1 "], ["1"]],
  ];
  for (const [title, slots, members] of table) {
    it(title, () => {
      const got = wakeTargets(fleet, slots);
      assert.deepEqual(
        got.map((t) => t.member),
        members,
      );
      for (const t of got) assert.equal(t.lease, `${t.pod}-activity`);
    });
  }

  it("the pods and Leases are the fleet's members'", () => {
    assert.deepEqual(wakeTargets(fleet, ["0", "browser"]), [
      { member: "0", pod: "coder-0", lease: "coder-0-activity" },
      { member: "browser", pod: "coder-browser", lease: "coder-browser-activity" },
    ]);
  });

  it("refuses every name that is no member in one error naming [SLOT] and what the fleet has", () => {
    assert.throws(
      () => wakeTargets(fleet, ["3", "db", "1"]),
      (e: Error) => {
        assert.equal(
          e.message,
          '[SLOT] "3", "db" are not a member of agents/coder: it has slots 0-2 and the toolboxes browser, 7 (a slot number, a toolbox name or a member\'s pod name)',
        );
        return true;
      },
    );
    const lone: CocoonSet = { ...fleet, spec: { agent: { image: "agents/coder:1" } } };
    assert.throws(
      () => wakeTargets(lone, ["1"]),
      /\[SLOT\] "1" is not a member of agents\/coder: it has slot 0 \(the main agent\) \(/,
    );
  });
});

describe("checkedFleetName", () => {
  it("takes a CocoonSet name and refuses one that cannot be, naming [FLEET]", () => {
    assert.equal(checkedFleetName(" coder "), "coder");
    assert.throws(() => checkedFleetName(""), /\[FLEET\] must not be empty \(got ""\)$/);
    assert.throws(() => checkedFleetName("Coder_1"), /\[FLEET\] .* \(got "Coder_1"\)$/);
  });
});

describe("cocoonset wake's arguments, refused before any request", () => {
  const cases: [string, string[], RegExp, number][] = [
    ["no FLEET", ["wake"], /missing required argument 'FLEET'/, 1],
    ["a FLEET no CocoonSet can be named", ["wake", "Bad_Name"], /\[FLEET\] .*"Bad_Name"/, 2],
    ["an empty --holder", ["wake", "coder", "--holder", " "], /\[--holder\] must not be empty/, 2],
    ["a bad namespace", ["wake", "coder", "-n", "Bad_NS"], /\[--namespace\] .*"Bad_NS"/, 1],
    ["an unknown output format", ["wake", "coder", "-o", "xml"], /argument 'xml' is invalid/, 1],
    ["-o yaml with --json", ["wake", "coder", "-o", "yaml", "--json"], /contradict/, 2],
  ];
  for (const [title, args, message, code] of cases) {
    it(title, () => {
      const r = run([...args, "--kubeconfig", "/nonexistent/kubeconfig"]);
      assert.equal(r.status, code, r.stderr);
      assert.match(r.stderr, message);
      assert.doesNotMatch(r.stderr, /nonexistent/, "refused before the kubeconfig is read");
    });
  }

  it("is listed by `cocoonset --help`", () => {
    const r = run(["--help"]);
    assert.equal(r.status, 0);
    assert.match(r.stdout, /^ {2}wake \[options\] <FLEET> \[SLOT\.\.\.\]/m);
  });
});
