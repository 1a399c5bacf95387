// Kubernetes resource quantities as exact rationals, so "1Gi" equals "1024Mi" and "1" equals
// "1000m" without floating-point rounding.
//
// Bounds, the ones Kubernetes' resource.Quantity documents: no quantity reaches 2^63-1 in
// magnitude (the apiserver silently caps a larger binary-suffixed one, `8Ei`, at 2^63-1, so
// that value itself is refused too), and precision stops at 1n (a non-zero value finer than that rounds up
// to the next nano-unit, away from zero, as the apiserver stores it). Kubernetes' parser reads
// the exponent as a 64-bit integer and then truncates it to 32 bits, so `1e4294967296` reads as
// 1 there; the schema therefore allows at most QUANTITY_MAX_EXPONENT_DIGITS exponent digits and
// QUANTITY_MAX_LENGTH characters (every value within the bounds fits both), and this parser
// never raises 10 to an unbounded power: it costs the same for `1e300000000` as for `1`.

/** A quantity as the exact fraction `numerator / denominator` (denominator > 0). */
export interface Quantity {
  numerator: bigint;
  denominator: bigint;
}

/** Kubernetes' cap on a quantity, in base units: 2^63-1; accepted quantities stay below it. */
export const MAX_QUANTITY = 2n ** 63n - 1n;
/** Longest quantity string the schema accepts. */
export const QUANTITY_MAX_LENGTH = 64;
/** Most digits an `e` exponent may have in the schema. */
export const QUANTITY_MAX_EXPONENT_DIGITS = 3;

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

const NANO_DIGITS = 9;
const NANO = 10n ** BigInt(NANO_DIGITS);
// MAX_QUANTITY has 19 digits; a binary suffix multiplies by at most 2^60 (19 digits).
const MAX_DIGITS = 19;

/** Why a text is not a quantity within bounds, or the quantity. */
export type QuantityReading =
  { ok: true; value: Quantity } | { ok: false; problem: "syntax" | "too-large" };

function exponentOf(text: string | undefined): number {
  if (text === undefined) return 0;
  const negative = text.startsWith("-");
  const digits = text.replace(/^[+-]/, "").replace(/^0+/, "");
  // More than 12 significant digits is far beyond any bound; keep it finite but decisive.
  if (digits.length > 12) return negative ? -1e12 : 1e12;
  const n = Number(digits || "0");
  return negative ? -n : n;
}

/**
 * Reads a quantity (`10Gi`, `500m`, `1.5`, `1e3`, or a plain number) within Kubernetes'
 * bounds. Costs O(length of the text) whatever its exponent.
 */
export function readQuantity(input: string | number): QuantityReading {
  if (typeof input === "number" && !Number.isFinite(input)) return { ok: false, problem: "syntax" };
  const text = typeof input === "number" ? String(input) : input.trim();
  const match = QUANTITY.exec(text);
  if (!match) return { ok: false, problem: "syntax" };
  const [, sign, digits, exponent, suffix] = match;
  const [whole, fraction = ""] = digits.split(".");
  const significant = `${whole}${fraction}`.replace(/^0+/, "");
  if (significant === "") return { ok: true, value: { numerator: 0n, denominator: 1n } };
  const binary = suffix !== undefined && suffix in BINARY_SUFFIX ? BINARY_SUFFIX[suffix] : 0;
  let power10 = exponentOf(exponent) - fraction.length;
  if (suffix !== undefined && suffix in DECIMAL_SUFFIX) power10 += DECIMAL_SUFFIX[suffix];
  // value = significant × 10^power10 × 2^binary, and significant ≥ 10^(length-1).
  if (significant.length - 1 + power10 >= MAX_DIGITS) return { ok: false, problem: "too-large" };
  let numerator: bigint;
  let denominator: bigint;
  const mantissa = BigInt(significant) * 2n ** BigInt(binary);
  if (power10 >= -NANO_DIGITS) {
    numerator = power10 >= 0 ? mantissa * 10n ** BigInt(power10) : mantissa;
    denominator = power10 >= 0 ? 1n : 10n ** BigInt(-power10);
  } else {
    // Finer than 1n: round up to the next nano-unit, as the apiserver does.
    const drop = -power10 - NANO_DIGITS;
    const mantissaDigits = significant.length + MAX_DIGITS;
    numerator =
      drop > mantissaDigits ? 1n : (mantissa + 10n ** BigInt(drop) - 1n) / 10n ** BigInt(drop);
    denominator = NANO;
  }
  if (numerator >= MAX_QUANTITY * denominator) return { ok: false, problem: "too-large" };
  if (sign === "-") numerator = -numerator;
  return { ok: true, value: { numerator, denominator } };
}

/**
 * Parses `10Gi`, `500m`, `1.5`, `1e3`, or a plain number; `undefined` when it is not one or
 * lies beyond Kubernetes' bounds (see {@link readQuantity}).
 */
export function parseQuantity(input: string | number): Quantity | undefined {
  const reading = readQuantity(input);
  return reading.ok ? reading.value : undefined;
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
