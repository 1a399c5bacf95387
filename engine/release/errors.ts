/** Errors of owner release: branded so `isInstance` works across duplicate package copies. */
import { BrandedError } from "../kube/branded-error.js";

/** A release refused before any mutation: bad input, or an owner that is not who it claims. */
export class ReleaseError extends BrandedError {
  constructor(message: string) {
    super(message);
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
export class ReleaseTimeoutError extends BrandedError {
  constructor(
    message: string,
    readonly remaining: RemainingObject[],
  ) {
    super(message);
  }
}
