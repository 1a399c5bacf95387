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

/**
 * Forgets the creates the CocoonSet's stored status now records (the same pod's uid for the
 * same VM): the record names them from then on. Without this every pass of a fleet this
 * process created rebuilt its whole record from this memory.
 */
export function forgetRecorded(cs: CocoonSet): void {
  const uid = cs.metadata.uid ?? "";
  const mine = CREATED.get(uid);
  if (!mine) return;
  const vms = cs.status?.vms ?? {};
  for (const [member, entry] of mine) {
    const stored = vms[member];
    if (stored?.podUID === entry.podUID && stored.vm === entry.vm) mine.delete(member);
  }
  if (mine.size === 0) CREATED.delete(uid);
}

/** Forgets what this process created for `cs` (its deletion is done). */
export function forgetCreated(cs: CocoonSet): void {
  CREATED.delete(cs.metadata.uid ?? "");
  AHEAD.delete(cs.metadata.uid ?? "");
}

/**
 * Create tokens announced ahead, by CocoonSet uid then member: a controller's status write
 * records, for a member whose pod the record names by uid, the digest of the token its next
 * pod will carry, so the create that replaces the pod needs no write of its own before it
 * (a rebuild is then the history write, the delete and the create, as the peer's). Only this
 * process knows the token; the record shows only its digest, as for any create.
 */
const AHEAD = new Map<string, Map<string, TokenAhead>>();

/** A create token announced ahead, and the digest the record shows of it. */
export interface TokenAhead {
  token: string;
  digest: string;
}

/** The token announced ahead for `member` of `cs`, taken (each is used for one create). */
export function takeTokenAhead(cs: CocoonSet, member: string): TokenAhead | undefined {
  const mine = AHEAD.get(cs.metadata.uid ?? "");
  const ahead = mine?.get(member);
  if (ahead !== undefined) mine?.delete(member);
  return ahead;
}

/** The token announced ahead for `member` of `cs`, if any (not taken). */
export function tokenAhead(cs: CocoonSet, member: string): TokenAhead | undefined {
  return AHEAD.get(cs.metadata.uid ?? "")?.get(member);
}

/** Keeps the tokens whose digests a status write just recorded. */
export function holdTokensAhead(cs: CocoonSet, tokens: ReadonlyMap<string, TokenAhead>): void {
  if (tokens.size === 0) return;
  const uid = cs.metadata.uid ?? "";
  const mine = AHEAD.get(uid) ?? new Map<string, TokenAhead>();
  for (const [member, ahead] of tokens) mine.set(member, ahead);
  AHEAD.set(uid, mine);
}

/**
 * Remembers a pod this process created for `cs` as the member its name says, with the digest
 * of the create token it carries (engine/attribution), if any.
 */
export function rememberCreated(
  cs: CocoonSet,
  podName: string,
  podUID: string,
  createToken?: string,
): void {
  const name = cs.metadata.name ?? "";
  const member = podName.slice(name.length + 1);
  if (podUID === "" || !podName.startsWith(`${name}-`) || memberRole(member) === undefined) return;
  const uid = cs.metadata.uid ?? "";
  const mine = CREATED.get(uid) ?? new Map<string, VMRecord>();
  mine.set(member, { vm: memberVm(cs, member), podUID, ...(createToken && { createToken }) });
  CREATED.set(uid, mine);
}
