/**
 * Secrets across the package provider's wire. The provider host of `@pulumi/pulumi` accepts
 * secrets, so the engine sends secret values wrapped (`{ <sig>: <secret sig>, value }`) and
 * keeps as secret only what the provider returns wrapped. The provider objects take plain
 * values, so each call unwraps its inputs and wraps again, in what it returns, every
 * top-level property that held a secret in the inputs (the kubeconfig, always).
 */

/** Key of Pulumi's special-value marker in wire values. */
const SIG_KEY = "4dabf18193072939515e22adb298388d";
/** The marker's value for a secret. */
const SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270";

/** Whether a wire value is a wrapped secret. */
function isWrappedSecret(v: unknown): v is { value: unknown } {
  return (
    typeof v === "object" && v !== null && (v as Record<string, unknown>)[SIG_KEY] === SECRET_SIG
  );
}

/** The value with every secret at any depth replaced by what it holds. */
export function unwrapSecrets(v: unknown): unknown {
  if (isWrappedSecret(v)) return unwrapSecrets(v.value);
  if (Array.isArray(v)) return v.map(unwrapSecrets);
  if (typeof v === "object" && v !== null) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, unwrapSecrets(x)]));
  }
  return v;
}

/** Whether a wire value holds a secret at any depth. */
function holdsSecret(v: unknown): boolean {
  if (isWrappedSecret(v)) return true;
  if (typeof v === "object" && v !== null) return Object.values(v).some(holdsSecret);
  return false;
}

/** Top-level property names of a wire object that hold a secret. */
export function secretKeys(props: unknown): Set<string> {
  if (typeof props !== "object" || props === null) return new Set();
  return new Set(
    Object.entries(props)
      .filter(([, v]) => holdsSecret(v))
      .map(([k]) => k),
  );
}

/** `props` with the properties named in `keys` wrapped as secrets (the rest as they are). */
export function wrapSecrets<T>(props: T, keys: Set<string>): T {
  if (typeof props !== "object" || props === null || keys.size === 0) return props;
  return Object.fromEntries(
    Object.entries(props as Record<string, unknown>).map(([k, v]) => [
      k,
      keys.has(k) && v !== undefined && !isWrappedSecret(v)
        ? { [SIG_KEY]: SECRET_SIG, value: v }
        : v,
    ]),
  ) as T;
}
