/** Reading the CA bundle a user names for a registry's https. */
import { readFileSync } from "node:fs";
import { errorMessage, InvalidValueError } from "../kube/branded-error.js";

/** A CA bundle that cannot be read or holds no certificate (a bad value of its option). */
export class CaBundleError extends InvalidValueError {
  constructor(message: string) {
    super(message);
  }
}

/**
 * Checks PEM text for a CA bundle: it must hold at least one certificate.
 * @throws InvalidValueError whose message is the rule (the caller names the field)
 */
export function parseCaBundle(text: string): string {
  if (!/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.test(text))
    throw new InvalidValueError("must be PEM text holding at least one CERTIFICATE");
  return text;
}

/**
 * The PEM text of the CA bundle file `path`.
 * @param from the flag or field that named it, for the error
 * @throws CaBundleError naming `from` and the path
 */
export function readCaBundle(path: string, from: string): string {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new CaBundleError(
      `[${from}] the CA bundle ${path} cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})`,
    );
  }
  try {
    return parseCaBundle(text);
  } catch (e) {
    throw new CaBundleError(`[${from}] the CA bundle ${path} ${errorMessage(e)}`);
  }
}
