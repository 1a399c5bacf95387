/**
 * The one parser of a snapshot registry's name, `host[:port][/prefix]` (as the node agent's
 * `OCI_REGISTRY`), optionally with an `http://` or `https://` scheme. The controller's
 * `--oci-registry`, `cocoonset plan --oci-registry`, the Operator's `ociRegistry` and the
 * Fleet's `registry` all go through it, so they accept exactly the same names.
 */
import { InvalidValueError } from "../kube/branded-error.js";

const REGISTRY_HOST =
  /^(?:(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*|\[[0-9a-f:.]+\])(?::(\d{1,5}))?$/i;
/** One repository path component, as the OCI distribution spec allows it. */
const REGISTRY_PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;

/**
 * Checks a registry name and returns it trimmed; throws an Error whose message is the rule
 * broken (the caller names the field or flag).
 */
export function parseRegistryAddress(text: string): string {
  const t = text.trim();
  if (userinfoOf(t) !== undefined)
    throw new InvalidValueError(
      "must not carry credentials (user:password@host): the registry's credentials come from a Docker config (its auths, credHelpers or credsStore), never from the address",
    );
  const rule =
    "must be host[:port][/prefix] (e.g. 127.0.0.1:5000 or registry.example.com/snapshots), optionally with http:// or https://";
  const rest = t.replace(/^https?:\/\//, "").replace(/\/+$/, "");
  const slash = rest.indexOf("/");
  const host = slash < 0 ? rest : rest.slice(0, slash);
  const prefix = slash < 0 ? "" : rest.slice(slash + 1);
  const m = REGISTRY_HOST.exec(host);
  if (!m || /\s/.test(t)) throw new InvalidValueError(rule);
  if (m[1] !== undefined && (Number(m[1]) < 1 || Number(m[1]) > 65535))
    throw new InvalidValueError("must have a port between 1 and 65535");
  if (prefix !== "" && !prefix.split("/").every((c) => REGISTRY_PATH_COMPONENT.test(c)))
    throw new InvalidValueError(
      `${rule}; the prefix is lower-case letters, digits and . _ - between slashes`,
    );
  return t;
}

/**
 * The userinfo (`user[:password]`) of a registry address, if it has one: whatever precedes
 * an `@` in the part before the first `/` (after the scheme).
 */
export function userinfoOf(address: string): string | undefined {
  const rest = address.trim().replace(/^[a-z][a-z0-9+.-]*:\/\//i, "");
  const authority = rest.split("/")[0];
  const at = authority.lastIndexOf("@");
  return at < 0 ? undefined : authority.slice(0, at);
}

/** A registry address as messages may show it: its userinfo replaced by `[redacted]`. */
export function redactRegistryAddress(address: string): string {
  const info = userinfoOf(address);
  if (info === undefined) return address;
  const i = address.indexOf(`${info}@`);
  return `${address.slice(0, i)}[redacted]@${address.slice(i + info.length + 1)}`;
}

/** Whether a registry host (`host[:port]`) is a loopback address. */
export function isLoopbackRegistryHost(host: string): boolean {
  return /^(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?$/i.test(host);
}

/**
 * The rule a registry name breaks by asking for plain http (an `http://` scheme) to a host
 * that is not loopback without the explicit insecure flag, if it does. Every registry input
 * checks it, so the controller, `plan`, the Operator and the Fleet refuse the same names.
 */
export function plainHttpProblem(address: string, insecure: boolean): string | undefined {
  const t = address.trim();
  if (insecure || !/^http:\/\//i.test(t)) return undefined;
  const host = t.replace(/^http:\/\//i, "").split("/")[0];
  if (isLoopbackRegistryHost(host)) return undefined;
  return "asks for plain http to a host that is not loopback: give the registry's insecure flag too (or use https)";
}
