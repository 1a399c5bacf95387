/**
 * Frozen objects, and what a pass may keep of them. The controller plans from its caches'
 * own objects, deep-frozen: an object that changes is a new object, so a result derived from
 * a frozen object alone stays true for as long as that object is the one read. A pass over a
 * converged fleet of a thousand pods then derives per pod only what changed since the last
 * pass. Objects that are not frozen (a fresh read, a unit test's input) are never memoized.
 */

/**
 * `o` frozen, and every object and array in it. An object is frozen once (the watch replaces
 * a cached object on each change, never edits it); after that this is one check.
 */
export function frozen<T>(o: T): T {
  if (o === null || typeof o !== "object" || Object.isFrozen(o)) return o;
  // The children first, so that a frozen object is always frozen all the way down.
  for (const v of Object.values(o)) frozen(v);
  return Object.freeze(o);
}

/**
 * A pure function's results per frozen object and per context: `get(o, context, compute)`
 * returns what `compute` returned for `o` the last time, if every part of `context` is the
 * same (`===`: a spec's {@link contentToken}, a slot, a record object); else it computes
 * again. An undefined context, or an object that is not frozen, is never kept. One result is
 * kept per object, held weakly. Results are shared between passes: they are frozen, and must
 * not be changed.
 */
export class FrozenMemo<K extends object, R> {
  private readonly results = new WeakMap<K, { context: readonly unknown[]; value: R }>();

  get(key: K, context: readonly unknown[] | undefined, compute: () => R): R {
    if (context === undefined || !Object.isFrozen(key)) return compute();
    const hit = this.results.get(key);
    if (hit !== undefined && sameParts(hit.context, context)) return hit.value;
    const value = frozen(compute());
    this.results.set(key, { context, value });
    return value;
  }
}

function sameParts(a: readonly unknown[], b: readonly unknown[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** The tokens of the contents most recently seen (a fleet's spec changes rarely). */
const TOKENS: string[] = [];
const TOKENS_KEPT = 64;
const TOKEN_OF = new WeakMap<object, string>();

/**
 * A token for the content of the frozen object `o`: objects of equal content (their JSON)
 * get the same string object, so that contexts compare by identity; undefined for an object
 * that is not frozen (its content could change under the token).
 */
export function contentToken(o: object): string | undefined {
  if (!Object.isFrozen(o)) return undefined;
  let token = TOKEN_OF.get(o);
  if (token !== undefined) return token;
  const json = JSON.stringify(o);
  token = TOKENS.find((t) => t === json);
  if (token === undefined) {
    token = json;
    TOKENS.unshift(token);
    if (TOKENS.length > TOKENS_KEPT) TOKENS.pop();
  }
  TOKEN_OF.set(o, token);
  return token;
}
