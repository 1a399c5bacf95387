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
 * The lane (and so the cluster) of each part of a tier (its serial group, the rest), chosen
 * from the files' measured times so that the lanes end together (docs/testing.md). Lane 0 (A)
 * runs the integration tier's concurrent files, then most of the e2e tier's; lane 1 (B) the
 * e2e tier's serial group; lane 2 (C) the integration tier's serial group, the differential
 * tier, then the concurrent files of MOVED. Every part that removes or replaces the CRD is on
 * lane 1 or 2, and a lane's concurrent files run after those parts, on a CRD installed again.
 */
export const LANE = {
  integration: { serial: 2, rest: 0 },
  differential: { serial: 2, rest: 2 },
  e2e: { serial: 1, rest: 0 },
};
/**
 * Concurrent files that run on another lane than their tier's other concurrent files, after
 * that lane's other parts: some of the e2e tier's longest (the language programs, which adopt
 * the tier's CRD, the suspend and wake, the README block, the image push), on lane C once the
 * differential tier is done.
 */
export const MOVED = {
  e2e: {
    lane: 2,
    files: [
      "go-program.test.js",
      "python-program.test.js",
      "template.test.js",
      "suspend-wake.test.js",
      "readme-root.test.js",
      "image-push.test.js",
    ],
  },
};
/** Test files run at once, per tier (2 cores: the pulumi CLI is CPU-heavy, waits are not). */
export const CONCURRENCY = { unit: 2, integration: 3, differential: 1, e2e: 2 };
