/** Errors of owner release: branded so `isInstance` works across duplicate package copies. */

/** A release refused before any mutation: bad input, or an owner that is not who it claims. */
export class ReleaseError extends Error {
  readonly isReleaseError = true;
  constructor(message: string) {
    super(message);
    this.name = "ReleaseError";
  }
  /** True for a {@link ReleaseError}, even from another copy of the package. */
  static isInstance(e: unknown): e is ReleaseError {
    return typeof e === "object" && e !== null && (e as ReleaseError).isReleaseError === true;
  }
}

/** One object of the owner's tree that was still present when a release timed out. */
export interface RemainingObject {
  kind: string;
  name: string;
  uid: string;
  finalizers: string[];
  deletionTimestamp?: string;
}

/** A release whose objects were not all gone within the timeout; `remaining` names them. */
export class ReleaseTimeoutError extends Error {
  readonly isReleaseTimeoutError = true;
  constructor(
    message: string,
    readonly remaining: RemainingObject[],
  ) {
    super(message);
    this.name = "ReleaseTimeoutError";
  }
  /** True for a {@link ReleaseTimeoutError}, even from another copy of the package. */
  static isInstance(e: unknown): e is ReleaseTimeoutError {
    return (
      typeof e === "object" &&
      e !== null &&
      (e as ReleaseTimeoutError).isReleaseTimeoutError === true
    );
  }
}
