/**
 * Name rules of the apiserver that the engine checks before sending anything: light enough
 * for the worker's boot path (no schema validator is loaded).
 */
import {
  DNS_LABEL_PATTERN,
  DNS_SUBDOMAIN_PATTERN,
  MAX_COCOONSET_NAME_LENGTH,
} from "./schema-source.js";

const DNS_SUBDOMAIN = new RegExp(DNS_SUBDOMAIN_PATTERN);
const DNS_LABEL = new RegExp(DNS_LABEL_PATTERN);

/**
 * What is wrong with a CocoonSet name, or undefined: a DNS-1123 subdomain (the apiserver's rule
 * for object names) of at most 63 characters (it is a label value on every pod).
 */
export function cocoonSetNameProblem(name: unknown): string | undefined {
  if (typeof name !== "string" || name === "") return "must be a non-empty string";
  if (name.length > MAX_COCOONSET_NAME_LENGTH) {
    return `must be at most ${MAX_COCOONSET_NAME_LENGTH} characters (it is a label value on every pod; got ${name.length})`;
  }
  if (!DNS_SUBDOMAIN.test(name)) {
    return "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit)";
  }
  return undefined;
}

/**
 * What is wrong with an object name, or undefined: a DNS-1123 subdomain of at most 253
 * characters, the apiserver's rule for the names of most kinds (pods, Jobs, ConfigMaps).
 */
export function objectNameProblem(name: unknown): string | undefined {
  if (typeof name !== "string" || name === "") return "must be a non-empty string";
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    return "must be a DNS-1123 subdomain of at most 253 characters (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit)";
  }
  return undefined;
}

/** What is wrong with a namespace name, or undefined: a DNS-1123 label of at most 63 characters. */
export function namespaceNameProblem(name: unknown): string | undefined {
  if (typeof name !== "string" || name === "") return "must be a non-empty string";
  if (name.length > 63 || !DNS_LABEL.test(name)) {
    return "must be a DNS-1123 label of at most 63 characters (lowercase letters, digits and '-', starting and ending with a letter or digit)";
  }
  return undefined;
}
