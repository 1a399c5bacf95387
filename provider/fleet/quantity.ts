// Kubernetes resource quantities as exact rationals, so "1Gi" equals "1024Mi" and "1" equals
// "1000m" without floating-point rounding.

/** A quantity as the exact fraction `numerator / denominator` (denominator > 0). */
export interface Quantity {
  numerator: bigint;
  denominator: bigint;
}

const QUANTITY =
  /^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+)|([KMGTPE]i|[numkMGTPE]))?$/;

const BINARY_SUFFIX: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const DECIMAL_SUFFIX: Record<string, number> = {
  n: -9,
  u: -6,
  m: -3,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};

/** Parses `10Gi`, `500m`, `1.5`, `1e3`, or a plain number; `undefined` when it is not one. */
export function parseQuantity(input: string | number): Quantity | undefined {
  const text = typeof input === "number" ? String(input) : input.trim();
  const match = QUANTITY.exec(text);
  if (!match) return undefined;
  const [, sign, digits, exponent, suffix] = match;
  const [whole, fraction = ""] = digits.split(".");
  let numerator = BigInt(`${whole || "0"}${fraction}`);
  let denominator = 10n ** BigInt(fraction.length);
  if (sign === "-") numerator = -numerator;
  let power10 = exponent !== undefined ? Number(exponent) : 0;
  if (suffix !== undefined && suffix in BINARY_SUFFIX) {
    numerator *= 2n ** BigInt(BINARY_SUFFIX[suffix]);
  } else if (suffix !== undefined) {
    power10 += DECIMAL_SUFFIX[suffix];
  }
  if (power10 >= 0) numerator *= 10n ** BigInt(power10);
  else denominator *= 10n ** BigInt(-power10);
  return { numerator, denominator };
}

/**
 * Whether two quantities are equal in value. Either side may be absent; two absent sides are
 * equal. A side that does not parse is compared as text.
 */
export function quantitiesEqual(
  a: string | number | undefined,
  b: string | number | undefined,
): boolean {
  if (a === undefined || b === undefined) return a === b;
  const qa = parseQuantity(a);
  const qb = parseQuantity(b);
  if (!qa || !qb) return String(a) === String(b);
  return qa.numerator * qb.denominator === qb.numerator * qa.denominator;
}

/** Whether the quantity is zero (an unparsable one is not). */
export function isZeroQuantity(value: string | number): boolean {
  return parseQuantity(value)?.numerator === 0n;
}
