/** The client CA of the embedded cluster: certificates that verify, with the user and groups. */
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { test } from "node:test";
import { createClientCa, issueClientCertificate } from "../../../cluster/pki.js";

test("a client certificate names the user (CN) and groups (O) and verifies against its CA", () => {
  const ca = createClientCa("unit-ca");
  const cert = issueClientCertificate(ca, "alice", ["devs", "ops"]);
  const caX = new X509Certificate(ca.certPem);
  const x = new X509Certificate(cert.certPem);
  assert.equal(caX.ca, true);
  assert.equal(x.ca, false);
  assert.equal(x.subject, "O=devs\nO=ops\nCN=alice");
  assert.equal(x.issuer, "CN=unit-ca");
  assert.ok(x.checkIssued(caX));
  assert.ok(x.verify(caX.publicKey));
  assert.deepEqual(x.keyUsage, ["1.3.6.1.5.5.7.3.2"], "client authentication only");
  const other = createClientCa("other-ca");
  assert.equal(x.verify(new X509Certificate(other.certPem).publicKey), false);
});
