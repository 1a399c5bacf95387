/**
 * The options of an error (the lib's `ErrorOptions`, spelled out: the declaration files of the
 * package must type-check in a program whose `lib` is older than ES2022).
 */
export interface BrandedErrorOptions {
  /** The error this one was caused by. */
  cause?: unknown;
}

/**
 * The base of the project's error classes. `X.isInstance(e)` recognises an X made by another
 * copy of the package too (the Pulumi dynamic provider loads the package anew in its own
 * module scope, so `instanceof` would fail across copies): every error carries the names of
 * its class and of the classes above it, and `isInstance` looks for its own name there.
 */
export class BrandedError extends Error {
  /** The class names of this error, most derived first, up to (not including) BrandedError. */
  readonly brands: readonly string[];

  constructor(message: string, options?: BrandedErrorOptions) {
    super(message, options);
    const brands: string[] = [];
    for (let c = new.target; c && c !== BrandedError; c = Object.getPrototypeOf(c) as typeof c) {
      brands.push(c.name);
    }
    this.brands = brands;
    this.name = new.target.name;
  }

  /** True when `e` is an error of this class (or a subclass), from any copy of the package. */
  static isInstance<T extends BrandedError>(
    this: abstract new (...args: never[]) => T,
    e: unknown,
  ): e is T {
    const brands = (e as { brands?: unknown } | null)?.brands;
    return Array.isArray(brands) && brands.includes(this.name);
  }
}

/**
 * A value that does not parse (a flag, an argument, an address, a duration). Its message is
 * the rule the value breaks; the caller names the field (`[--reap-interval] must be at
 * least 1s (got "0s")`), so the parsers can be shared by the controller, the CLI and the
 * components.
 */
export class InvalidValueError extends BrandedError {}

/**
 * The text of anything thrown, for a log line or a message that wraps it. Never a way to
 * tell failures apart: branch on the error's class (`X.isInstance(e)`) instead.
 */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
