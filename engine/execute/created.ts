/**
 * The engine's memory of the pods this process created, until the CocoonSet's status
 * records them: the executor writes it, the reads and the deletion read it.
 */
import { memberRole, memberVm } from "../attribution/index.js";
import { type CocoonSet } from "../spec/index.js";
import type { VMRecord } from "../spec/generated/types.js";

/**
 * The pods this process created, by CocoonSet uid then member, until the CocoonSet's status
 * records them (engine/attribution): a pass whose view of the status is older than its own
 * creates still knows them as members. One map per copy of the engine; the provider and the
 * controller each keep theirs for as long as the process lives.
 */
const CREATED = new Map<string, Map<string, VMRecord>>();

/** The pods this process created for `cs` and knows as members (see {@link CREATED}). */
export function createdRecords(cs: CocoonSet): ReadonlyMap<string, VMRecord> {
  return CREATED.get(cs.metadata.uid ?? "") ?? new Map();
}

/** Forgets what this process created for `cs` (its deletion is done). */
export function forgetCreated(cs: CocoonSet): void {
  CREATED.delete(cs.metadata.uid ?? "");
}

/** Remembers a pod this process created for `cs` as the member its name says. */
export function rememberCreated(cs: CocoonSet, podName: string, podUID: string): void {
  const name = cs.metadata.name ?? "";
  const member = podName.slice(name.length + 1);
  if (podUID === "" || !podName.startsWith(`${name}-`) || memberRole(member) === undefined) return;
  const uid = cs.metadata.uid ?? "";
  const mine = CREATED.get(uid) ?? new Map<string, VMRecord>();
  mine.set(member, { vm: memberVm(cs, member), podUID });
  CREATED.set(uid, mine);
}
