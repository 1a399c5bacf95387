import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Command } from "commander";
import { registerController } from "../../../controller/command.js";
import { CONTROLLER_OPTIONS } from "../../../controller/options.js";
import { runControllerCli } from "../../support/run-controller-cli.js";

describe("cocoonset controller (flags)", () => {
  const bad: [string[], RegExp][] = [
    [
      ["--concurrency", "0"],
      /\[--concurrency\] must be an integer between 1 and 10000 \(got "0"\)/,
    ],
    [["--reap-interval", "soon"], /\[--reap-interval\] must be a duration/],
    [["--leader-elect=perhaps"], /\[--leader-elect\] must be true or false/],
    [["--metrics-bind-address", "8080"], /\[--metrics-bind-address\]/],
  ];
  for (const [args, message] of bad) {
    test(`${args.join(" ")} fails before doing anything, naming the flag`, async () => {
      const r = await runControllerCli(args);
      assert.notEqual(r.exitCode, 0);
      assert.match(r.stderr, message);
      assert.equal(r.depsCalled, false);
    });
  }

  test("--help documents every flag with its default and env var", () => {
    const program = new Command();
    registerController(program, async () => {
      throw new Error("unused");
    });
    const help = program.commands
      .find((c) => c.name() === "controller")!
      .helpInformation()
      .replace(/\s+/g, " ");
    for (const o of CONTROLLER_OPTIONS) {
      assert.ok(help.includes(o.flag), `help lists ${o.flag}`);
      assert.ok(help.includes(`env: ${o.env}`), `help names ${o.env}`);
      assert.ok(help.includes(`default: ${o.defaultText}`), `help shows the default of ${o.flag}`);
    }
    assert.ok(help.includes("--no-leader-elect"));
  });
});
