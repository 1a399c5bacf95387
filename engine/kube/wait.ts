/**
 * Waiting on the cluster with watches: list once, then watch from the list's
 * resourceVersion, re-listing when the watch expires. No sleep-polling.
 */
import {
  isGone,
  isMalformedWatchEvent,
  type KubeClient,
  type KubeObject,
  type ObjectLike,
} from "./client.js";
import { BrandedError } from "./branded-error.js";

/** Thrown when a wait runs out of time; `last` holds the objects seen last. */
export class WaitTimeoutError<T extends ObjectLike = KubeObject> extends BrandedError {
  constructor(
    message: string,
    readonly last: T[],
  ) {
    super(message);
  }
}

/** Options of {@link waitForList}. */
export interface WaitOptions {
  labelSelector?: string;
  fieldSelector?: string;
  /** @default 60000 */
  timeoutMs?: number;
  /** Text for the timeout message. */
  description?: string;
  signal?: AbortSignal;
}

/**
 * Keeps a live view of a collection and resolves with it as soon as `done(items)` is true.
 * Guarantees: `done` sees every state the watch delivers, starting with the initial list.
 */
export async function waitForList<T extends ObjectLike = KubeObject>(
  client: KubeClient,
  collectionPath: string,
  done: (items: T[]) => boolean,
  opts: WaitOptions = {},
): Promise<T[]> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  const onOuterAbort = () => abort.abort();
  opts.signal?.addEventListener("abort", onOuterAbort, { once: true });
  const view = new Map<string, T>();
  const key = (o: T) => `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;
  try {
    for (;;) {
      const list = await client.list<T>(collectionPath, opts);
      view.clear();
      for (const o of list.items) view.set(key(o), o);
      if (done([...view.values()])) return [...view.values()];
      let rv = list.metadata.resourceVersion;
      let satisfied = false;
      let expired = false;
      while (!satisfied && !expired && !abort.signal.aborted) {
        try {
          rv = await client.watch<T>(
            collectionPath,
            {
              ...opts,
              resourceVersion: rv,
              timeoutSeconds: Math.max(1, Math.ceil(timeoutMs / 1000)),
            },
            (ev) => {
              if (ev.type === "DELETED") view.delete(key(ev.object));
              else view.set(key(ev.object), ev.object);
              satisfied = done([...view.values()]);
              return satisfied;
            },
            abort.signal,
          );
        } catch (e) {
          if (abort.signal.aborted) break;
          // An expired watch, or a garbled line that may have cost events: list again.
          if (isGone(e) || isMalformedWatchEvent(e)) expired = true;
          else throw e;
        }
      }
      if (satisfied) return [...view.values()];
      if (abort.signal.aborted) {
        throw new WaitTimeoutError(
          `timed out after ${timeoutMs} ms waiting for ${opts.description ?? collectionPath}`,
          [...view.values()],
        );
      }
    }
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onOuterAbort);
  }
}

/** Waits until the named object satisfies `done` (it receives undefined while absent). */
export async function waitForObject<T extends ObjectLike = KubeObject>(
  client: KubeClient,
  collectionPath: string,
  name: string,
  done: (obj: T | undefined) => boolean,
  opts: Omit<WaitOptions, "fieldSelector"> = {},
): Promise<T | undefined> {
  const items = await waitForList<T>(client, collectionPath, (items) => done(items[0]), {
    ...opts,
    fieldSelector: `metadata.name=${name}`,
    description: opts.description ?? `${collectionPath}/${name}`,
  });
  return items[0];
}
