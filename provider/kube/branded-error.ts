/**
 * The base of the project's error classes. `X.isInstance(e)` recognises an X made by another
 * copy of the package too (the Pulumi dynamic provider loads the package anew in its own
 * module scope, so `instanceof` would fail across copies): every error carries the names of
 * its class and of the classes above it, and `isInstance` looks for its own name there.
 */
export class BrandedError extends Error {
  /** The class names of this error, most derived first, up to (not including) BrandedError. */
  readonly brands: readonly string[];

  constructor(message: string, options?: ErrorOptions) {
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
