/**
 * Every version of one object the apiserver delivers, followed by a watch started before the
 * change under test: a test asserts on the sequence of states (a phase that lasted a few
 * milliseconds included), never on a timer.
 */
import type { TestContext } from "node:test";
import type { KubeClient } from "../../engine/kube/index.js";
import type { ObjectLike } from "../../engine/kube/client.js";

export class ObjectHistory<T extends ObjectLike> {
  readonly seen: T[] = [];
  /** When each version in `seen` was delivered (`Date.now()`), index for index. */
  readonly times: number[] = [];
  /** How many versions `seen` held when the watch showed the object deleted, each time. */
  private readonly deletedAfter: number[] = [];
  private readonly ac = new AbortController();
  private waiters: { done: (o: T) => boolean; resolve: (o: T) => void }[] = [];

  private constructor(
    private readonly client: KubeClient,
    readonly path: string,
    readonly name: string,
  ) {}

  /** Starts following `name` in the collection `path` (until the test ends). */
  static async start<T extends ObjectLike>(
    t: TestContext,
    client: KubeClient,
    path: string,
    name: string,
  ): Promise<ObjectHistory<T>> {
    const h = new ObjectHistory<T>(client, path, name);
    const list = await client.list<T>(path, { fieldSelector: `metadata.name=${name}` });
    for (const o of list.items) h.push(o);
    void h.follow(list.metadata.resourceVersion);
    t.after(() => h.ac.abort());
    return h;
  }

  private push(o: T): void {
    this.seen.push(o);
    this.times.push(Date.now());
    this.waiters = this.waiters.filter((w) => {
      if (!w.done(o)) return true;
      w.resolve(o);
      return false;
    });
  }

  private async follow(rv: string | undefined): Promise<void> {
    while (!this.ac.signal.aborted) {
      try {
        rv = await this.client.watch<T>(
          this.path,
          { resourceVersion: rv, fieldSelector: `metadata.name=${this.name}`, timeoutSeconds: 60 },
          (ev) => {
            if (ev.type === "ADDED" || ev.type === "MODIFIED") this.push(ev.object);
            else if (ev.type === "DELETED") this.deletedAfter.push(this.seen.length);
          },
          this.ac.signal,
        );
      } catch {
        if (this.ac.signal.aborted) return;
      }
    }
  }

  /** The first version from index `since` on for which `done` holds. */
  async until(
    done: (o: T) => boolean,
    description: string,
    opts: { since?: number; timeoutMs?: number; show?: (o: T) => string } = {},
  ): Promise<T> {
    const hit = this.seen.slice(opts.since ?? 0).find(done);
    if (hit) return hit;
    let timer: NodeJS.Timeout | undefined;
    const show = opts.show ?? ((o: T) => o.metadata?.resourceVersion ?? "");
    try {
      return await new Promise<T>((resolve, reject) => {
        this.waiters.push({ done, resolve });
        timer = setTimeout(
          () =>
            reject(
              new Error(
                `timed out waiting for ${this.name}: ${description}; seen: ${this.story(show)}`,
              ),
            ),
          opts.timeoutMs ?? 60_000,
        );
      });
    } finally {
      clearTimeout(timer);
    }
  }

  /** Every version shown, consecutive repeats folded, and where the object was deleted. */
  private story(show: (o: T) => string): string {
    const out: string[] = [];
    this.seen.forEach((o, i) => {
      for (const at of this.deletedAfter) if (at === i) out.push("(deleted)");
      const v = show(o);
      if (out[out.length - 1] !== v) out.push(v);
    });
    for (const at of this.deletedAfter) if (at === this.seen.length) out.push("(deleted)");
    return out.join(" → ");
  }

  /** `show` of every version from `since` on, consecutive repeats folded. */
  fold(show: (o: T) => string, since = 0): string[] {
    const out: string[] = [];
    for (const o of this.seen.slice(since)) {
      const v = show(o);
      if (out[out.length - 1] !== v) out.push(v);
    }
    return out;
  }
}
