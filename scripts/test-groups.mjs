// How scripts/test.mjs groups the test files of a tier. tests/unit/scripts/test-groups.test.ts
// checks that every file doing one of the shared things below is listed in SERIAL.

/** Files (under dist/tests/<tier>/) that run alone, and why. */
export const SERIAL = {
  integration: {
    "operator-guards.test.js": "removes the CRD",
    "controller-no-crd.test.js": "removes the CRD",
    "manifests-apply.test.js": "removes the CRD and applies the manifests' CRDs",
    "controller-runtime.test.js": "restarts the apiserver",
    "migration-target.test.js": "cordons a node of the cluster",
    "migration.test.js": "labels the cluster's nodes with a snapshot class",
    "controller-rbac.test.js": "its controllers watch every namespace",
    "doctor.test.js": "removes the CRD",
  },
  differential: { "peer.test.js": "replaces the CRD with the peer's" },
  e2e: {
    "fleet-adopt.test.js": "removes the CRD",
    "fleet-operator.test.js": "its Operator installs and deletes the CRD",
    "ownership.test.js": "removes the CRD; its Operator installs and deletes it",
    "operator-crd.test.js": "removes the CRD",
    "resource-options-operator.test.js": "removes the CRD",
    "shared-operator.test.js": "its Operator installs and deletes the CRD",
    "yaml-package.test.js": "its Operator installs and deletes the CRD",
  },
};
/**
 * The parts of a tier (its serial group, the rest) that run on the second cluster, beside the
 * others on the first (see test.mjs), chosen from the files' measured times so that the two
 * lanes end together: the first lane runs the integration tier's concurrent files, then the
 * e2e tier's; the second the integration tier's serial group, the differential tier and the
 * e2e tier's serial group.
 */
export const SECOND_LANE = {
  integration: ["serial"],
  e2e: ["serial"],
  differential: ["serial", "rest"],
};
/** Test files run at once, per tier (2 cores: the pulumi CLI is CPU-heavy, waits are not). */
export const CONCURRENCY = { unit: 2, integration: 3, differential: 1, e2e: 2 };
