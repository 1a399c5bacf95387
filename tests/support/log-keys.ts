/** Test support: the keys of a raw JSON log line, duplicates kept. */

/**
 * The top-level keys of one JSON object text, in order, duplicates kept (JSON.parse would
 * keep only the last one).
 */
export function topLevelKeys(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  let i = 0;
  let expectKey = false;
  while (i < line.length) {
    const c = line[i];
    if (c === '"') {
      let j = i + 1;
      while (line[j] !== '"') j += line[j] === "\\" ? 2 : 1;
      if (depth === 1 && expectKey) keys.push(JSON.parse(line.slice(i, j + 1)) as string);
      expectKey = false;
      i = j + 1;
      continue;
    }
    if (c === "{" || c === "[") {
      depth++;
      expectKey = c === "{" && depth === 1;
    } else if (c === "}" || c === "]") depth--;
    else if (c === "," && depth === 1) expectKey = true;
    i++;
  }
  return keys;
}

/** The top-level keys that occur more than once in a JSON object text. */
export function duplicateKeys(line: string): string[] {
  const keys = topLevelKeys(line);
  return keys.filter((k, i) => keys.indexOf(k) !== i);
}
