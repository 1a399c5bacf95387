/**
 * The fleets of a cache indexed by the stem of their VM names (`<namespace>-<name>`, every VM
 * name of the fleet being `vk-<stem>-<member>`), so that "which fleets could share a VM name
 * with this one" and "which fleets could name this VM" cost a few map lookups per dash of
 * the name rather than a test of every fleet. The answers are exactly those of
 * `mayShareVmNames` and `mayNameVm` over the fleets added (a property test holds
 * it to that).
 */
import { VM_NAME_PREFIX } from "./attribution.js";

/** A fleet as the index holds it. */
export interface FleetName {
  namespace: string;
  name: string;
}

/** Positions of the dashes in `s`. */
function dashes(s: string): number[] {
  const out: number[] = [];
  for (let i = s.indexOf("-"); i >= 0; i = s.indexOf("-", i + 1)) out.push(i);
  return out;
}

const stemOf = (f: FleetName) => `${f.namespace}-${f.name}`;
const keyOf = (f: FleetName) => `${f.namespace}/${f.name}`;

/** Adds fleet `f` to the set at `k` of `m`. */
function put(m: Map<string, Map<string, FleetName>>, k: string, f: FleetName): void {
  let set = m.get(k);
  if (!set) m.set(k, (set = new Map<string, FleetName>()));
  set.set(keyOf(f), f);
}

/** Removes fleet `f` from the set at `k` of `m`, and the set once empty. */
function drop(m: Map<string, Map<string, FleetName>>, k: string, f: FleetName): void {
  const set = m.get(k);
  if (!set) return;
  set.delete(keyOf(f));
  if (set.size === 0) m.delete(k);
}

/** The fleets by stem, and by each proper prefix of a stem that ends before a dash. */
export class VmNameIndex {
  private readonly byStem = new Map<string, Map<string, FleetName>>();
  private readonly byStemPrefix = new Map<string, Map<string, FleetName>>();

  add(f: FleetName): void {
    const stem = stemOf(f);
    put(this.byStem, stem, f);
    for (const i of dashes(stem)) put(this.byStemPrefix, stem.slice(0, i), f);
  }

  delete(f: FleetName): void {
    const stem = stemOf(f);
    drop(this.byStem, stem, f);
    for (const i of dashes(stem)) drop(this.byStemPrefix, stem.slice(0, i), f);
  }

  /**
   * Every fleet held whose VM names could meet `f`'s (`f` itself when held): the same stem, a
   * stem that begins `f`'s at a dash, or one that `f`'s begins at a dash.
   */
  neighbours(f: FleetName): FleetName[] {
    const stem = stemOf(f);
    const out = new Map<string, FleetName>();
    const take = (set: Map<string, FleetName> | undefined) => {
      for (const [k, v] of set ?? []) out.set(k, v);
    };
    take(this.byStem.get(stem));
    take(this.byStemPrefix.get(stem));
    for (const i of dashes(stem)) take(this.byStem.get(stem.slice(0, i)));
    return [...out.values()];
  }

  /** Every fleet held that could name the VM `vm` (its stem and a dash begin the VM's rest). */
  naming(vm: string): FleetName[] {
    if (!vm.startsWith(VM_NAME_PREFIX)) return [];
    const rest = vm.slice(VM_NAME_PREFIX.length);
    const out: FleetName[] = [];
    for (const i of dashes(rest)) out.push(...(this.byStem.get(rest.slice(0, i))?.values() ?? []));
    return out;
  }
}
