/**
 * Just enough X.509 for the embedded cluster's client CA: a self-signed CA and client
 * certificates it signs (ECDSA P-256, SHA-256), DER-encoded by hand with node:crypto doing
 * the keys and signatures, so `cluster up` needs no openssl.
 *
 * The apiserver (`--client-ca-file`) takes a client certificate's CN as the user name and
 * its O entries as groups.
 */
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
} from "node:crypto";

/** A CA as PEM text. */
export interface CertificateAuthority {
  certPem: string;
  keyPem: string;
}

/** A client certificate and its key as PEM text. */
export interface ClientCertificate {
  certPem: string;
  keyPem: string;
}

// --- DER ---------------------------------------------------------------------------------

function length(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, content: Buffer): Buffer {
  return Buffer.concat([Buffer.from([tag]), length(content.length), content]);
}

const seq = (...items: Buffer[]) => tlv(0x30, Buffer.concat(items));
const set = (...items: Buffer[]) => tlv(0x31, Buffer.concat(items));
const explicit = (n: number, inner: Buffer) => tlv(0xa0 + n, inner);
const utf8 = (s: string) => tlv(0x0c, Buffer.from(s, "utf8"));
const octets = (b: Buffer) => tlv(0x04, b);
const bitString = (b: Buffer) => tlv(0x03, Buffer.concat([Buffer.from([0]), b]));
const bool = (v: boolean) => tlv(0x01, Buffer.from([v ? 0xff : 0]));

function integer(b: Buffer): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  const v = b.subarray(i);
  return tlv(0x02, v[0] & 0x80 ? Buffer.concat([Buffer.from([0]), v]) : v);
}

function oid(dotted: string): Buffer {
  const parts = dotted.split(".").map(Number);
  const out = [40 * parts[0] + parts[1]];
  for (const p of parts.slice(2)) {
    const chunk = [p & 0x7f];
    for (let v = Math.floor(p / 128); v > 0; v = Math.floor(v / 128))
      chunk.unshift(0x80 | (v & 0x7f));
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, "").slice(0, 14);
  // UTCTime until 2049, GeneralizedTime after (RFC 5280).
  return d.getUTCFullYear() < 2050
    ? tlv(0x17, Buffer.from(`${iso.slice(2)}Z`))
    : tlv(0x18, Buffer.from(`${iso}Z`));
}

const OID = {
  cn: "2.5.4.3",
  o: "2.5.4.10",
  ecdsaSha256: "1.2.840.10045.4.3.2",
  basicConstraints: "2.5.29.19",
  keyUsage: "2.5.29.15",
  extKeyUsage: "2.5.29.37",
  clientAuth: "1.3.6.1.5.5.7.3.2",
  serverAuth: "1.3.6.1.5.5.7.3.1",
  subjectAltName: "2.5.29.17",
};

function name(cn: string, orgs: string[] = []): Buffer {
  return seq(...orgs.map((o) => set(seq(oid(OID.o), utf8(o)))), set(seq(oid(OID.cn), utf8(cn))));
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return seq(oid(id), ...(critical ? [bool(true)] : []), octets(value));
}

function pem(label: string, der: Buffer): string {
  const b64 = der.toString("base64").replace(/.{1,64}/g, "$&\n");
  return `-----BEGIN ${label}-----\n${b64}-----END ${label}-----\n`;
}

function derOfPem(text: string): Buffer {
  return Buffer.from(text.replace(/-----[^-]+-----/g, "").replace(/\s+/g, ""), "base64");
}

/** The subject Name of a PEM certificate, as DER (to use as an issuer). */
function subjectOf(certPem: string): Buffer {
  // Certificate > tbsCertificate > [version, serial, sigAlg, issuer, validity, subject, ...]
  const read = (b: Buffer, at: number): { start: number; end: number; next: number } => {
    let len = b[at + 1];
    let hdr = 2;
    if (len & 0x80) {
      const n = len & 0x7f;
      len = 0;
      for (let i = 0; i < n; i++) len = len * 256 + b[at + 2 + i];
      hdr += n;
    }
    return { start: at + hdr, end: at + hdr + len, next: at + hdr + len };
  };
  const der = derOfPem(certPem);
  const cert = read(der, 0);
  const tbs = read(der, cert.start);
  let at = tbs.start;
  for (let i = 0; i < 5; i++) at = read(der, at).next;
  return der.subarray(at, read(der, at).next);
}

function certificate(opts: {
  subject: Buffer;
  issuer: Buffer;
  publicKeyDer: Buffer;
  signingKeyPem: string;
  days: number;
  extensions: Buffer[];
}): Buffer {
  const now = Date.now();
  const alg = seq(oid(OID.ecdsaSha256));
  const serial = randomBytes(16);
  serial[0] &= 0x7f;
  const tbs = seq(
    explicit(0, integer(Buffer.from([2]))),
    integer(serial),
    alg,
    opts.issuer,
    seq(time(new Date(now - 3_600_000)), time(new Date(now + opts.days * 86_400_000))),
    opts.subject,
    opts.publicKeyDer,
    explicit(3, seq(...opts.extensions)),
  );
  const signature = sign("sha256", tbs, createPrivateKey(opts.signingKeyPem));
  return seq(tbs, alg, bitString(signature));
}

function ecKeyPair(): { publicKeyDer: Buffer; keyPem: string } {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  return {
    publicKeyDer: publicKey.export({ type: "spki", format: "der" }),
    keyPem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
  };
}

/** A self-signed CA valid for ten years. */
export function createClientCa(commonName: string): CertificateAuthority {
  const key = ecKeyPair();
  const subject = name(commonName);
  const der = certificate({
    subject,
    issuer: subject,
    publicKeyDer: key.publicKeyDer,
    signingKeyPem: key.keyPem,
    days: 3650,
    extensions: [
      extension(OID.basicConstraints, true, seq(bool(true))),
      // keyCertSign | cRLSign
      extension(OID.keyUsage, true, tlv(0x03, Buffer.from([1, 0x06]))),
    ],
  });
  return { certPem: pem("CERTIFICATE", der), keyPem: key.keyPem };
}

/**
 * A client certificate for `user` in `groups`, signed by `ca`, valid for a year.
 * @throws Error when the CA's key does not match its certificate's algorithm
 */
export function issueClientCertificate(
  ca: CertificateAuthority,
  user: string,
  groups: string[] = [],
): ClientCertificate {
  return issueLeaf(ca, name(user, groups), [
    extension(OID.extKeyUsage, false, seq(oid(OID.clientAuth))),
  ]);
}

/**
 * A leaf certificate for `subject` signed by `ca`, valid for a year, for digital signatures,
 * with `usage` (its extended key usage and any further extensions).
 */
function issueLeaf(ca: CertificateAuthority, subject: Buffer, usage: Buffer[]): ClientCertificate {
  const key = ecKeyPair();
  // Fails early with a clear error when the CA key is not an EC key.
  createPublicKey(ca.keyPem);
  const der = certificate({
    subject,
    issuer: subjectOf(ca.certPem),
    publicKeyDer: key.publicKeyDer,
    signingKeyPem: ca.keyPem,
    days: 365,
    extensions: [
      extension(OID.basicConstraints, true, seq()),
      // digitalSignature
      extension(OID.keyUsage, true, tlv(0x03, Buffer.from([7, 0x80]))),
      ...usage,
    ],
  });
  return { certPem: pem("CERTIFICATE", der), keyPem: key.keyPem };
}

/** The DER of an IPv4 or IPv6 address text. */
function ipBytes(ip: string): Buffer {
  if (ip.includes(":")) {
    const [head, tail = ""] = ip.split("::");
    const part = (t: string) => (t ? t.split(":").map((h) => parseInt(h, 16)) : []);
    const h = part(head);
    const tl = ip.includes("::") ? part(tail) : [];
    const words: number[] = [...h, ...new Array<number>(8 - h.length - tl.length).fill(0), ...tl];
    return Buffer.from(words.flatMap((w) => [w >> 8, w & 0xff]));
  }
  return Buffer.from(ip.split(".").map(Number));
}

/**
 * A serving certificate for `names` (DNS names and IP addresses, as subjectAltName),
 * signed by `ca`, valid for a year.
 */
export function issueServerCertificate(
  ca: CertificateAuthority,
  commonName: string,
  names: { dns?: string[]; ips?: string[] },
): ClientCertificate {
  const san = seq(
    ...(names.dns ?? []).map((d) => tlv(0x82, Buffer.from(d, "ascii"))),
    ...(names.ips ?? []).map((ip) => tlv(0x87, ipBytes(ip))),
  );
  return issueLeaf(ca, name(commonName), [
    extension(OID.extKeyUsage, false, seq(oid(OID.serverAuth))),
    extension(OID.subjectAltName, false, san),
  ]);
}
