// Lists the exports no other module uses (part of `npm run lint`): an export that nothing
// imports is dead code that reads as API. Built on the TypeScript compiler the project
// already has: every identifier of every module is resolved to the declaration it names, and
// an export counts as used when a module other than its own names it. A re-export (an
// `index.ts` line) names the original but does not count, so a room's facade cannot keep an
// otherwise unused export alive. The entry points below are used by definition: what the
// package exports, the programs `node` runs, and the tests' support (shared helpers).
import path from "node:path";
import ts from "typescript";

const root = path.resolve(import.meta.dirname, "..");

/** Modules whose exports are public or run as programs: every export of them is used. */
const ENTRY_POINTS = [
  // package.json "exports" and "main"
  "sdk/index.ts",
  "provider/index.ts",
  "controller/index.ts",
  // programs: bin/ launchers, the controller image, the dev CLI, build scripts
  "cli/launch.ts",
  "cli/main.ts",
  "plugin/main.ts",
  "controller/main.ts",
  "cluster/dev-cli.ts",
];
/** Folders whose exports are not checked: programs and their shared helpers, generated code. */
const UNCHECKED = [
  "tests/",
  "bench/",
  "scripts/",
  "examples/",
  // Pulumi programs: their exports are the stack's outputs
  "cluster/check-programs/",
  "engine/spec/generated/",
];

const configPath = path.join(root, "tsconfig.json");
const config = ts.getParsedCommandLineOfConfigFile(
  configPath,
  {},
  {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    },
  },
);
const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
const checker = program.getTypeChecker();
const rel = (f) => path.relative(root, f).split(path.sep).join("/");
const sources = program
  .getSourceFiles()
  .filter((f) => !f.isDeclarationFile && !rel(f.fileName).startsWith(".."));

/** The declaration a symbol finally names (through imports and re-exports). */
function resolve(symbol) {
  let s = symbol;
  for (let i = 0; s && s.flags & ts.SymbolFlags.Alias && i < 20; i++)
    s = checker.getAliasedSymbol(s);
  return s;
}

const used = new Set();
/** Marks every export of a module used (an entry point, `export * as`, a dynamic import). */
function useModule(moduleSymbol, seen = new Set()) {
  if (!moduleSymbol || seen.has(moduleSymbol)) return;
  seen.add(moduleSymbol);
  for (const e of checker.getExportsOfModule(moduleSymbol)) {
    const target = resolve(e);
    if (!target) continue;
    used.add(target);
    if (target.flags & ts.SymbolFlags.ValueModule) useModule(target, seen);
  }
}

for (const f of sources) {
  const file = rel(f.fileName);
  if (ENTRY_POINTS.includes(file)) useModule(checker.getSymbolAtLocation(f));
  const visit = (node) => {
    // import("./x.js"): what it destructures is not traced; all of the module counts.
    if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    )
      useModule(checker.getSymbolAtLocation(node.arguments[0]));
    if (ts.isIdentifier(node) && !isReExport(node)) {
      const symbol = node.parent && checker.getSymbolAtLocation(node);
      const target = symbol && resolve(symbol);
      const home = target?.declarations?.[0]?.getSourceFile();
      if (home && (home !== f || inOtherExportsType(node, target))) used.add(target);
      if (target && target.flags & ts.SymbolFlags.ValueModule && ts.isNamespaceImport(node.parent))
        useModule(target);
    }
    ts.forEachChild(node, visit);
  };
  visit(f);
}

/**
 * Whether the identifier is in a type of another exported declaration of its own module (a
 * parameter's type, a field's): the declaration files need that type exported too.
 */
function inOtherExportsType(node, target) {
  let inType = false;
  let n = node;
  for (; n.parent && !ts.isSourceFile(n.parent); n = n.parent) if (ts.isTypeNode(n)) inType = true;
  if (!inType || !ts.canHaveModifiers(n)) return false;
  const exported = ts.getModifiers(n)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  return !!exported && !target.declarations?.some((d) => n === d || isWithin(d, n));
}

function isWithin(inner, outer) {
  for (let n = inner; n; n = n.parent) if (n === outer) return true;
  return false;
}

/** Whether the identifier is the name in `export { x } from` or `export { x }` of an import. */
function isReExport(node) {
  const spec = node.parent;
  return (
    ts.isExportSpecifier(spec) &&
    !!spec.parent?.parent &&
    ts.isExportDeclaration(spec.parent.parent)
  );
}

const dead = [];
for (const f of sources) {
  const file = rel(f.fileName);
  if (ENTRY_POINTS.includes(file) || UNCHECKED.some((d) => file.startsWith(d))) continue;
  const moduleSymbol = checker.getSymbolAtLocation(f);
  if (!moduleSymbol) continue;
  for (const e of checker.getExportsOfModule(moduleSymbol)) {
    if (e.flags & ts.SymbolFlags.Alias) continue; // a re-export: judged where it is declared
    if (used.has(e)) continue;
    const decl = e.declarations?.[0];
    if (!decl || decl.getSourceFile() !== f) continue;
    const { line } = f.getLineAndCharacterOfPosition(decl.getStart());
    dead.push(`${file}:${line + 1}: ${e.name}`);
  }
}

if (dead.length > 0) {
  console.error(
    `exports no other module uses (remove the export, or the code):\n  ${dead.join("\n  ")}`,
  );
  process.exit(1);
}
