/**
 * The README and the pages under docs/ link each other by relative paths and #anchors; when a
 * section moves, a link to it must move too. Every relative markdown link in README.md,
 * docs/*.md, bench/README.md and the examples' READMEs must name a file or folder that exists and, with an
 * #anchor into a markdown file, a heading of that file (GitHub's slugs). Pure: reads files only.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";

const root = fileURLToPath(new URL("../../../../", import.meta.url));

/** GitHub's heading anchor: lowercase, punctuation dropped (but `-` and `_`), spaces → `-`. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** Lines outside fenced code blocks. */
function prose(text: string): string[] {
  const out: string[] = [];
  let fence: string | undefined;
  for (const line of text.split("\n")) {
    const m = /^\s*(`{3,}|~{3,})/.exec(line);
    if (m) {
      if (fence === undefined) fence = m[1][0];
      else if (m[1][0] === fence) fence = undefined;
      continue;
    }
    if (fence === undefined) out.push(line);
  }
  return out;
}

/** The anchors of a markdown file's headings, with GitHub's `-1`, `-2` for repeats. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of prose(text)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const plain = m[1]
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1") // a link's text
      .replace(/<[^>]+>/g, "");
    const base = slug(plain);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Relative link targets of a markdown file (outside code blocks and inline code). */
export function links(text: string): string[] {
  const out: string[] = [];
  for (const line of prose(text)) {
    const bare = line.replace(/(`+)[^`]*?\1/g, "");
    for (const m of bare.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, …
      out.push(target);
    }
  }
  return out;
}

function pages(): string[] {
  const files = ["README.md", "bench/README.md"];
  for (const f of readdirSync(join(root, "docs"))) if (f.endsWith(".md")) files.push(`docs/${f}`);
  for (const d of readdirSync(join(root, "examples"))) {
    if (existsSync(join(root, "examples", d, "README.md"))) files.push(`examples/${d}/README.md`);
  }
  return files;
}

describe("markdown links", () => {
  it("slugs headings as GitHub does", () => {
    assert.equal(slug("The `cocoonset` command"), "the-cocoonset-command");
    assert.equal(slug("The Node.js language host"), "the-nodejs-language-host");
    assert.equal(slug("Who owns a CocoonSet"), "who-owns-a-cocoonset");
    assert.equal(
      slug("Driving pods in tests (kwok stages, `cluster/kwok-stages.yaml`)"),
      "driving-pods-in-tests-kwok-stages-clusterkwok-stagesyaml",
    );
    assert.deepEqual([...anchors("# A\n\n```sh\n# not a heading\n```\n## A\n")], ["a", "a-1"]);
    assert.deepEqual(links("[x](docs/a.md#b) `[y](z.md)` [w](https://e.org) [v](#c)"), [
      "docs/a.md#b",
      "#c",
    ]);
  });

  for (const page of pages()) {
    it(`${page}: every relative link names an existing file and heading`, () => {
      const text = readFileSync(join(root, page), "utf8");
      const broken: string[] = [];
      for (const target of links(text)) {
        const [pathPart, anchor] = target.split("#", 2) as [string, string | undefined];
        const file =
          pathPart === "" ? join(root, page) : join(root, dirname(page), decodeURI(pathPart));
        if (!existsSync(file)) {
          broken.push(`${target}: ${relative(root, file)} does not exist`);
          continue;
        }
        if (anchor === undefined || !file.endsWith(".md") || statSync(file).isDirectory()) continue;
        if (!anchors(readFileSync(file, "utf8")).has(anchor)) {
          broken.push(`${target}: ${relative(root, file)} has no heading #${anchor}`);
        }
      }
      assert.deepEqual(broken, []);
    });
  }
});
