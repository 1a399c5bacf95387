/**
 * Every command README.md, docs/*.md, bench/README.md and the examples' READMEs show must be
 * one the project's command lines take: each `cocoonset` and `cocoonset-dev` command,
 * subcommand and option is looked up in the commander programs the two CLIs really build
 * (built here, never run), and each `npm run X` in package.json's scripts. A page that shows
 * a command that moved or an option that was renamed fails here, naming the file and line.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";
import { cocoonsetProgram } from "../../../cli/program.js";
import { devProgram } from "../../../cluster/dev-program.js";
import {
  commandProblems,
  commandsOfMarkdown,
  shellCommands,
  type CommandWorld,
} from "../../support/doc-commands.js";

const root = fileURLToPath(new URL("../../../../", import.meta.url));

function pages(): string[] {
  const files = ["README.md", "bench/README.md"];
  for (const f of readdirSync(join(root, "docs"))) if (f.endsWith(".md")) files.push(`docs/${f}`);
  for (const d of readdirSync(join(root, "examples")))
    if (existsSync(join(root, "examples", d, "README.md"))) files.push(`examples/${d}/README.md`);
  return files;
}

const world: CommandWorld = {
  programs: { cocoonset: cocoonsetProgram(), "cocoonset-dev": devProgram() },
  scripts: (
    JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
      scripts: Record<string, string>;
    }
  ).scripts,
};

/** The problems of every command of a page, as `file:line: text: problem`. */
function problemsOf(file: string, text: string): string[] {
  return commandsOfMarkdown(file, text).flatMap((c) =>
    commandProblems(c, world).map((p) => `${c.file}:${c.line}: ${c.text}: ${p}`),
  );
}

describe("the commands the docs show", () => {
  it("are every one registered by the CLIs (or an npm script of package.json)", () => {
    const found = pages().flatMap((f) =>
      commandsOfMarkdown(f, readFileSync(join(root, f), "utf8")),
    );
    // The pages do show commands of both CLIs and npm scripts: the parser finds them.
    assert.ok(found.filter((c) => c.cli === "cocoonset").length >= 10);
    assert.ok(found.filter((c) => c.cli === "cocoonset-dev").length >= 10);
    assert.ok(found.filter((c) => c.cli === "npm run").length >= 5);
    const problems = pages().flatMap((f) => problemsOf(f, readFileSync(join(root, f), "utf8")));
    assert.deepEqual(problems, []);
  });

  it("the README's 'from the root' block is among them", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const texts = commandsOfMarkdown("README.md", readme).map((c) => c.text);
    assert.ok(texts.includes("./bin/cocoonset-dev cluster up"), texts.join("\n"));
    assert.ok(texts.includes("./bin/cocoonset-dev toolchain env"), texts.join("\n"));
  });
});

describe("the docs' command check", () => {
  const cases: { name: string; md: string; problems: RegExp[] }[] = [
    {
      name: "a command that moved to cocoonset-dev (a fenced block)",
      md: '```sh\n./bin/cocoonset cluster up\neval "$(./bin/cocoonset toolchain env)"\n```\n',
      problems: [
        /fixture.md:2: .*cluster up: `cocoonset` has no command 'cluster'/,
        /fixture.md:3: .*toolchain env: `cocoonset` has no command 'toolchain'/,
      ],
    },
    {
      name: "an unknown option, inline",
      md: "Run `cocoonset plan -f fleet.yaml --dry-run` first.\n",
      problems: [/`cocoonset plan` has no option --dry-run/],
    },
    {
      name: "an option of another command, in a console block",
      md: "```console\n$ node dist/cluster/dev-cli.js cluster down --nodes=3\n```\n",
      problems: [/`cocoonset-dev cluster down` has no option --nodes/],
    },
    {
      name: "a missing npm script",
      md: "```bash\nnpm ci && npm run --silent no-such-script\n```\n",
      problems: [/package.json has no script "no-such-script"/],
    },
    {
      name: "a command table's row",
      md: "| `cocoonset-dev` command | what |\n| --- | --- |\n| `cluster up\\|sideways` | x |\n",
      problems: [/`cocoonset-dev cluster` has no command 'sideways'/],
    },
    {
      name: "an argument a command does not take",
      md: "```sh\n./bin/cocoonset reap agents\n```\n",
      problems: [/`cocoonset reap` takes no argument 'agents'/],
    },
    {
      name: "commands that parse (continuations, here-documents, redirections, synopses)",
      md: [
        "```sh",
        "./bin/cocoonset-dev image build \\",
        "  --push registry.example.com/c:1 --push-insecure   # a comment --nope",
        "cat > x.yml <<YML",
        "./bin/cocoonset nonsense",
        "YML",
        "./bin/cocoonset manifests -o json > out.json 2>&1 | head",
        "KUBECONFIG=k ./bin/cocoonset plan -f f.yaml -n ns --oci-registry=r:5000",
        "```",
        "",
        "`cocoonset release [-n NS] --owner-kind K --owner-name N [--timeout 60s] [-o json\\|yaml]`",
        "and `cocoonset <command>`, `npm run test:unit|test:e2e`, `cocoonset controller --help`.",
        "",
        "| `cocoonset` command | what |",
        "| --- | --- |",
        "| `controller [flags]` | x |",
        "| `doctor [-f FLEET.yaml] [--context CTX] [-n NS] [-o json\\|yaml]` | y |",
      ].join("\n"),
      problems: [],
    },
  ];
  for (const c of cases)
    it(c.name, () => {
      const problems = problemsOf("fixture.md", c.md);
      assert.equal(problems.length, c.problems.length, problems.join("\n"));
      c.problems.forEach((re, i) => assert.match(problems[i], re));
    });

  it("splits shell text as a shell does", () => {
    const words = shellCommands(
      'A=1 x "a b" \'c d\' && y $(z 1) | w; eval "$(v --q)" # c\nu \\\n  --k',
    ).map((s) => s.words.join(" "));
    assert.deepEqual(words, [
      "A=1 x a b c d",
      "z 1",
      "y $SUBST",
      "w",
      "v --q",
      "eval $SUBST",
      "u --k",
    ]);
  });
});
