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
