/**
 * Test support: the shell commands a Markdown page shows, and a check of each against the
 * commands and options the project's two command lines really register (their commander
 * programs, built and walked, never run) and the npm scripts of package.json.
 *
 * What counts as a command of the page:
 * - every line of a fenced `sh`, `bash`, `shell` or `console` block (in `console`, the lines
 *   after a `$ ` prompt), parsed as a shell would split it: `&&`, `||`, `;`, `|`, `$(…)` and
 *   `eval "…"`, line continuations, comments, redirections, here-documents skipped;
 * - an inline code span (outside fences) that starts with a CLI name, read as a synopsis:
 *   `[…]` groups, `a|b` alternatives (each checked), `...` and placeholders (`NS`, `<ref>`);
 * - the first cell of each row of a table whose first header cell is "`cocoonset` command"
 *   or "`cocoonset-dev` command", read as a synopsis of that CLI.
 *
 * CLI names (`npx` before them too): `cocoonset`, `./bin/cocoonset`, `node dist/cli/main.js`; `cocoonset-dev`,
 * `./bin/cocoonset-dev`, `node dist/cluster/dev-cli.js`; and `npm run SCRIPT`.
 */
import type { Command, Option } from "commander";

/** One command found in a page. */
export interface DocCommand {
  file: string;
  line: number;
  /** Which program: `cocoonset`, `cocoonset-dev` or `npm run`. */
  cli: "cocoonset" | "cocoonset-dev" | "npm run";
  /** The words after the CLI name. */
  args: string[];
  /** A synopsis (inline code or a command table) rather than a line to run. */
  synopsis: boolean;
  /** The text as the page has it, for the message. */
  text: string;
}

/** What the commands are checked against. */
export interface CommandWorld {
  programs: { cocoonset: Command; "cocoonset-dev": Command };
  scripts: Record<string, string>;
}

// ---------------------------------------------------------------------------------------------
// Shell splitting

/** Lines of a here-document body removed (the `<<WORD` line kept), so no body is read as commands. */
function dropHereDocs(text: string): string {
  const out: string[] = [];
  let until: string | undefined;
  for (const line of text.split("\n")) {
    if (until !== undefined) {
      if (line.trim() === until) until = undefined;
      out.push("");
      continue;
    }
    const m = /<<-?\s*(['"]?)([A-Za-z_][A-Za-z0-9_]*)\1/.exec(line);
    if (m) until = m[2];
    out.push(line);
  }
  return out.join("\n");
}

/** The text of a `$(` … `)` starting at `open` (the index of `(`), and the index after it. */
function substitution(src: string, open: number): { inner: string; end: number } {
  let depth = 0;
  let quote: string | undefined;
  for (let i = open; i < src.length; i++) {
    const c = src[i];
    if (quote) {
      if (c === "\\" && quote === '"') i++;
      else if (c === quote) quote = undefined;
      continue;
    }
    if (c === "'" || c === '"') quote = c;
    else if (c === "(") depth++;
    else if (c === ")" && --depth === 0) return { inner: src.slice(open + 1, i), end: i + 1 };
  }
  return { inner: src.slice(open + 1), end: src.length };
}

/** A simple command's words (quotes removed) and the line (0-based, in `src`) it starts on. */
interface Simple {
  words: string[];
  line: number;
}

/**
 * Splits shell text into simple commands, as a shell would: quotes, escapes, line
 * continuations, comments, `;` `&&` `||` `|` `&` and newlines; each `$(…)` is a command of
 * its own and a `$SUBST` word where it stood.
 */
export function shellCommands(text: string, firstLine = 0): Simple[] {
  const src = dropHereDocs(text);
  const out: Simple[] = [];
  let words: string[] = [];
  let word: string | undefined;
  let line = firstLine;
  let start = firstLine;
  const endWord = () => {
    if (word !== undefined) words.push(word);
    word = undefined;
  };
  const endCommand = () => {
    endWord();
    if (words.length > 0) out.push({ words, line: start });
    words = [];
    start = line;
  };
  const append = (s: string) => {
    if (words.length === 0 && word === undefined) start = line;
    word = (word ?? "") + s;
  };
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    if (c === "\\" && src[i + 1] === "\n") {
      i++;
      line++;
      continue;
    }
    if (c === "\\") {
      append(src[++i] ?? "");
      continue;
    }
    if (c === "'") {
      const end = src.indexOf("'", i + 1);
      const body = src.slice(i + 1, end < 0 ? src.length : end);
      line += body.split("\n").length - 1;
      append(body);
      i = end < 0 ? src.length : end;
      continue;
    }
    if (c === "$" && src[i + 1] === "(") {
      const { inner, end } = substitution(src, i + 1);
      out.push(...shellCommands(inner, line));
      line += inner.split("\n").length - 1;
      append("$SUBST");
      i = end - 1;
      continue;
    }
    if (c === '"') {
      append("");
      let j = i + 1;
      for (; j < src.length && src[j] !== '"'; j++) {
        if (src[j] === "\\" && j + 1 < src.length) {
          append(src[++j]);
        } else if (src[j] === "$" && src[j + 1] === "(") {
          const { inner, end } = substitution(src, j + 1);
          out.push(...shellCommands(inner, line));
          append("$SUBST");
          j = end - 1;
        } else {
          if (src[j] === "\n") line++;
          append(src[j]);
        }
      }
      i = j;
      continue;
    }
    if (c === "#" && word === undefined) {
      while (i + 1 < src.length && src[i + 1] !== "\n") i++;
      continue;
    }
    if (c === "\n") {
      endCommand();
      line++;
      start = line;
      continue;
    }
    if (c === ";" || c === "|" || c === "&") {
      // `2>&1` and `>&2` are redirections, not command separators.
      if (c === "&" && (src[i - 1] === ">" || src[i - 1] === "<")) {
        append(c);
        continue;
      }
      if ((c === "|" || c === "&") && src[i + 1] === c) i++;
      endCommand();
      continue;
    }
    if (c === " " || c === "\t") {
      endWord();
      continue;
    }
    if ((c === "(" || c === ")" || c === "{" || c === "}") && word === undefined) {
      endCommand();
      continue;
    }
    append(c);
  }
  endCommand();
  return out.map((s) => ({ words: dropRedirections(s.words), line: s.line }));
}

/** The words without redirections (`> file`, `2>&1`, `<file`). */
function dropRedirections(words: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const m = /^\d*(>>?|<<?-?|<)(&\d*)?(.*)$/.exec(words[i]);
    if (m) {
      if (m[2] === undefined && m[3] === "") i++; // the target is the next word
      continue;
    }
    out.push(words[i]);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Finding the commands of a page

const COCOONSET = ["cocoonset", "./bin/cocoonset", "bin/cocoonset"];
const DEV = ["cocoonset-dev", "./bin/cocoonset-dev", "bin/cocoonset-dev"];
const WRAPPERS = new Set(["time", "exec", "nohup", "command"]);

/** The CLI a command's words start with, and the words after its name; undefined for another program. */
export function cliOf(words: readonly string[]): Pick<DocCommand, "cli" | "args"> | undefined {
  let w = [...words];
  while (w.length > 0 && (/^[A-Za-z_][A-Za-z0-9_]*=/.test(w[0]) || WRAPPERS.has(w[0])))
    w = w.slice(1);
  if (w[0] === "npx") w = w.slice(1);
  if (w.length === 0) return undefined;
  if (COCOONSET.includes(w[0])) return { cli: "cocoonset", args: w.slice(1) };
  if (DEV.includes(w[0])) return { cli: "cocoonset-dev", args: w.slice(1) };
  if (/(^|\/)node$/.test(w[0])) {
    if (w[1] === "dist/cli/main.js") return { cli: "cocoonset", args: w.slice(2) };
    if (w[1] === "dist/cluster/dev-cli.js") return { cli: "cocoonset-dev", args: w.slice(2) };
  }
  if (w[0] === "npm" && (w[1] === "run" || w[1] === "run-script"))
    return { cli: "npm run", args: w.slice(2) };
  return undefined;
}

/** Commands of a shell text (a fenced block); `eval "…"` is read as the text it runs. */
function commandsOfShell(file: string, text: string, firstLine: number): DocCommand[] {
  const out: DocCommand[] = [];
  for (const s of shellCommands(text, firstLine)) {
    if (s.words[0] === "eval") {
      out.push(...commandsOfShell(file, s.words.slice(1).join(" "), s.line));
      continue;
    }
    const found = cliOf(s.words);
    if (found)
      out.push({ file, line: s.line + 1, ...found, synopsis: false, text: s.words.join(" ") });
  }
  return out;
}

/** A synopsis (inline code, a table cell) split into commands at `&&` and `;`. */
function commandsOfSynopsis(
  file: string,
  text: string,
  line: number,
  cli?: DocCommand["cli"],
): DocCommand[] {
  const out: DocCommand[] = [];
  // `eval "$(X)"` shows X; a `|` escaped for a table is an alternative.
  const plain = text.replace(/\\\|/g, "|");
  const inner = [...plain.matchAll(/\$\(([^)]*)\)/g)].map((m) => m[1]);
  const parts = inner.length > 0 ? inner : plain.split(/&&|;/);
  for (const part of parts) {
    const words = part.trim().split(/\s+/).filter(Boolean);
    const found = cli ? { cli, args: words } : cliOf(words);
    if (found) out.push({ file, line, ...found, synopsis: true, text: part.trim() });
  }
  return out;
}

/** Every command a Markdown page shows (see the module's comment for what counts). */
export function commandsOfMarkdown(file: string, text: string): DocCommand[] {
  const out: DocCommand[] = [];
  const lines = text.split("\n");
  let paragraph: { text: string; line: number } | undefined;
  const flush = () => {
    if (!paragraph) return;
    // Inline code spans, which may run over a line break inside the paragraph.
    for (const m of paragraph.text.matchAll(/(`+)([^`]+?)\1/g)) {
      const span = m[2].trim();
      const words = span.replace(/^eval\s+"?/, "").replace(/^\$\(/, "");
      const line = paragraph.line + paragraph.text.slice(0, m.index).split("\n").length - 1;
      if (cliOf(words.split(/\s+/))) out.push(...commandsOfSynopsis(file, span, line));
    }
    paragraph = undefined;
  };
  let tableCli: DocCommand["cli"] | undefined;
  for (let i = 0; i < lines.length; i++) {
    const fence = /^(\s*)(`{3,}|~{3,})\s*([A-Za-z]*)/.exec(lines[i]);
    if (fence) {
      flush();
      const close = fence[2];
      const lang = fence[3].toLowerCase();
      const body: string[] = [];
      let j = i + 1;
      for (; j < lines.length && !lines[j].trim().startsWith(close); j++)
        body.push(lines[j].slice(Math.min(fence[1].length, lines[j].search(/\S|$/))));
      if (["sh", "bash", "shell"].includes(lang))
        out.push(...commandsOfShell(file, body.join("\n"), i + 1));
      if (lang === "console")
        body.forEach((l, k) => {
          const m = /^\s*\$ (.*)$/.exec(l);
          if (m) out.push(...commandsOfShell(file, m[1], i + 1 + k));
        });
      i = j;
      continue;
    }
    const row = /^\s*\|(.*)\|\s*$/.exec(lines[i]);
    if (row) {
      flush();
      const cells = row[1].split(/(?<!\\)\|/).map((c) => c.trim());
      const header = /^`(cocoonset(?:-dev)?)` command$/.exec(cells[0]);
      if (header) tableCli = header[1] as DocCommand["cli"];
      else if (/^:?-+:?$/.test(cells[0])) {
        // the header's separator row
      } else if (tableCli) {
        const m = /^`([^`]+)`/.exec(cells[0]);
        if (m) out.push(...commandsOfSynopsis(file, m[1], i + 1, tableCli));
      }
      // Inline code in the other cells counts as in prose.
      paragraph = { text: cells.slice(tableCli ? 1 : 0).join(" "), line: i + 1 };
      flush();
      continue;
    }
    tableCli = undefined;
    if (lines[i].trim() === "") flush();
    else if (paragraph) paragraph.text += `\n${lines[i]}`;
    else paragraph = { text: lines[i], line: i + 1 };
  }
  flush();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Checking a command against the programs

/** A word of a synopsis that stands for a value: `NS`, `REF`, `<command>`, `N`, `…`. */
function isPlaceholder(w: string): boolean {
  return (
    /^[A-Z][A-Z0-9_:./=@-]*$/.test(w) ||
    /^<[^>]*>$/.test(w) ||
    /^(\.\.\.|…)$/.test(w) ||
    /^\$/.test(w)
  );
}

function findOption(cmd: Command, flag: string): Option | "builtin" | undefined {
  if (flag === "-h" || flag === "--help") return "builtin";
  const own = cmd.options.find((o) => o.long === flag || o.short === flag);
  if (own) return own;
  return undefined;
}

function pathOf(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

/**
 * What is wrong with one command: an unknown command, option or npm script, or an argument
 * a command does not take. Empty when it would parse.
 */
export function commandProblems(c: DocCommand, world: CommandWorld): string[] {
  if (c.cli === "npm run") {
    const args = c.args.filter((a) => !a.startsWith("-"));
    if (args.length === 0 || (c.synopsis && isPlaceholder(args[0]))) return [];
    return args[0]
      .split("|")
      .filter((s) => !(s in world.scripts))
      .map((s) => `npm run ${s}: package.json has no script "${s}"`);
  }
  const problems: string[] = [];
  let cmd = world.programs[c.cli];
  let positional = 0;
  const words = [...c.args];
  for (let i = 0; i < words.length; i++) {
    let w = words[i];
    let bracketed = false;
    if (c.synopsis) {
      bracketed = /^[[(]/.test(w) || /[\])]$/.test(w);
      w = w.replace(/^[[(]+/, "").replace(/(\.\.\.|…)?[\]),]*(\.\.\.|…)?$/, "");
      if (w === "") continue;
    }
    if (w === "--") break;
    if (w.startsWith("-") && w !== "-") {
      const eq = w.indexOf("=");
      const flag = eq < 0 ? w : w.slice(0, eq);
      const opt = findOption(cmd, flag);
      if (!opt) {
        problems.push(`\`${pathOf(cmd)}\` has no option ${flag}`);
        continue;
      }
      if (opt === "builtin" || eq >= 0) continue;
      if (opt.required) i++;
      else if (opt.optional && i + 1 < words.length && !words[i + 1].startsWith("-")) {
        // commander gives an optional value the next word unless it is an option; a
        // synopsis shows it only as `true`/`false`.
        if (!c.synopsis || /^(true|false)\]*$/.test(words[i + 1])) i++;
      }
      continue;
    }
    const subs = cmd.commands.filter((s) => s.name() !== "help");
    if (subs.length > 0 && positional === 0) {
      if (isPlaceholder(w)) return problems;
      const alternatives = w.split("|");
      const found = alternatives.map((a) =>
        subs.find((s) => s.name() === a || s.aliases().includes(a)),
      );
      alternatives.forEach((a, k) => {
        if (!found[k] && a !== "help")
          problems.push(
            `\`${pathOf(cmd)}\` has no command '${a}' (it has: ${subs.map((s) => s.name()).join(", ")})`,
          );
      });
      // With alternatives the rest could belong to any; a missing command ends the check.
      if (alternatives.length > 1 || !found[0]) return problems;
      cmd = found[0];
      continue;
    }
    if (c.synopsis && (bracketed || isPlaceholder(w))) {
      positional++;
      continue;
    }
    const args = cmd.registeredArguments;
    const variadic = args.length > 0 && args[args.length - 1].variadic;
    if (positional >= args.length && !variadic)
      problems.push(`\`${pathOf(cmd)}\` takes no argument '${w}'`);
    positional++;
  }
  return problems;
}
