/**
 * Who may claim a static toolbox's VM. A toolbox in `static` mode adopts a running VM by the
 * `staticVMID` and `staticIP` its spec names, and its pod carries them as the VM's identity:
 * anyone who may write a CocoonSet could name another fleet's VM there and have it reported
 * (and acted on) as its own. So a static identity is checked as VM names are (vm-names.ts):
 * one that another live fleet holds (its own static toolboxes, or a VM id or IP its status
 * reports) is refused, the younger claim losing. Pure; behaviour: docs/behaviour.md §2.7.
 */
import type { CocoonSet } from "../spec/generated/types.js";
import { fleetKey } from "../attribution/attribution.js";

/** One static identity: a VM id or a VM IP. */
export interface StaticClaim {
  field: "staticVMID" | "staticIP";
  value: string;
  /** The toolbox of the claiming fleet. */
  toolbox: string;
}

/** The static identities a fleet's spec claims: its static toolboxes' VM ids and IPs. */
function staticClaims(cs: CocoonSet): StaticClaim[] {
  const out: StaticClaim[] = [];
  for (const tb of cs.spec?.toolboxes ?? []) {
    if (tb.mode !== "static") continue;
    if (tb.staticVMID) out.push({ field: "staticVMID", value: tb.staticVMID, toolbox: tb.name });
    if (tb.staticIP) out.push({ field: "staticIP", value: tb.staticIP, toolbox: tb.name });
  }
  return out;
}

/**
 * Whether `cs` claims a static identity: then any fleet may hold it (its status reports the
 * VM ids and IPs it runs), so its check reads every fleet, not only its name's neighbours.
 */
export function claimsStaticVms(cs: CocoonSet): boolean {
  return staticClaims(cs).length > 0;
}

/** The VM ids and IPs a fleet holds: what its status reports of the VMs it runs. */
function reported(cs: CocoonSet): { ids: Set<string>; ips: Set<string> } {
  const ids = new Set<string>();
  const ips = new Set<string>();
  for (const m of [...(cs.status?.agents ?? []), ...(cs.status?.toolboxes ?? [])]) {
    if (m.vmID) ids.add(m.vmID);
    if (m.ip) ips.add(m.ip);
  }
  return { ids, ips };
}

function holds(other: CocoonSet, claim: StaticClaim): "reported" | "claimed" | undefined {
  const r = reported(other);
  if ((claim.field === "staticVMID" ? r.ids : r.ips).has(claim.value)) return "reported";
  return staticClaims(other).some((c) => c.field === claim.field && c.value === claim.value)
    ? "claimed"
    : undefined;
}

/** A static identity of `cs` another live fleet holds. */
export interface StaticClash {
  claim: StaticClaim;
  /** The fleet that holds it, `namespace/name`. */
  holder: string;
}

/**
 * The first static identity `cs` claims that another live fleet of `fleets` holds and that
 * `cs` may not take: the other reports it (a VM it runs) and `cs` does not, or both only
 * claim it and the other is older (then the smaller `namespace/name`). Undefined otherwise.
 */
export function staticVmClash(
  cs: CocoonSet,
  fleets: readonly CocoonSet[],
): StaticClash | undefined {
  const claims = staticClaims(cs);
  if (claims.length === 0) return undefined;
  const others = fleets
    .filter((o) => !o.metadata.deletionTimestamp && fleetKey(o) !== fleetKey(cs))
    .sort((a, b) => fleetKey(a).localeCompare(fleetKey(b)));
  for (const claim of claims)
    for (const other of others) {
      const theirs = holds(other, claim);
      if (theirs === undefined) continue;
      const mine = holds(cs, claim);
      if (theirs === "reported" && mine !== "reported") return { claim, holder: fleetKey(other) };
      if (theirs === "claimed" && mine !== "reported") {
        const created = (x: CocoonSet) => x.metadata.creationTimestamp ?? "\uffff";
        const byAge = created(other).localeCompare(created(cs));
        if (byAge < 0 || (byAge === 0 && fleetKey(other) < fleetKey(cs)))
          return { claim, holder: fleetKey(other) };
      }
    }
  return undefined;
}

/** The refusal's message, naming the toolbox, the field, the value and both fleets. */
export function staticVmClashMessage(cs: CocoonSet, clash: StaticClash): string {
  const { claim } = clash;
  return `[spec.toolboxes[${claim.toolbox}].${claim.field}] ${claim.value} of CocoonSet ${fleetKey(cs)} is already held by CocoonSet ${clash.holder} (a static toolbox adopts that VM as its own); nothing is created for ${fleetKey(cs)}: name a VM of its own`;
}
