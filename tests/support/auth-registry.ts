/**
 * A real registry that asks for credentials: CNCF Distribution (the toolchain's
 * `distribution-registry`) over TLS with a certificate of a CA made for the run, with
 * either htpasswd (Basic) auth or token auth. For token auth this module runs the token
 * issuer: a small HTTP server that checks Basic credentials and signs JWTs (ES256, the
 * signing certificate in the `x5c` header) with a key whose certificate the registry is
 * configured to trust (`rootcertbundle`), so the registry that checks them is the real one.
 *
 * The issuer counts its requests and can be told to hand out a token that expires for the
 * registry soon while the client is told it lasts, to show a client refreshing a token the
 * registry starts refusing mid-run.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID, sign } from "node:crypto";
import { createServer, type Server } from "node:http";
import { request as httpsRequest } from "node:https";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import bcrypt from "bcryptjs";
import { createClientCa, issueServerCertificate } from "../../cluster/pki.js";
import { requireBinary } from "../../cluster/toolchain-pins.js";
import { type Cleanup, freePort, tempDir } from "./controller-process.js";

/** What the token issuer hands out next. */
export interface IssuerBehaviour {
  /** `expires_in` told to the client, in seconds. @default 300 */
  expiresIn: number;
  /** `issued_at` this many seconds in the past. @default 0 */
  issuedSecondsAgo: number;
  /**
   * The `exp` of the next tokens, in seconds from now, one per token (then `expiresIn`).
   * Distribution accepts a token until 60 s after its `exp`: -55 makes a token the registry
   * takes for about 5 s more while the client is told it lasts `expiresIn`.
   */
  expOffsets: number[];
  /**
   * When set, every later token (after {@link expOffsets}) is one the registry accepts for
   * only this many seconds, while the client is still told {@link expiresIn}: its `exp` is
   * set that far in the future minus Distribution's 60 s leeway. A client that keeps such a
   * token meets a real 401 once it runs out, mid-run.
   */
  registryLifetime?: number;
}

/** A token the issuer granted: the scopes asked for, and when the registry stops taking it. */
export interface IssuedToken {
  scopes: string[];
  /** Milliseconds since the epoch after which the registry refuses it (its `exp` + leeway). */
  refusedAfter: number;
  /** The token itself, to show the registry refusing it. */
  token: string;
}

/** Distribution's leeway on a token's `exp` and `nbf`, in seconds (registry/auth/token). */
export const TOKEN_LEEWAY_SECONDS = 60;

/** A started registry. */
export interface AuthRegistry {
  /** `https://127.0.0.1:<port>`, as `--oci-registry` takes it. */
  address: string;
  /** `127.0.0.1:<port>`, as the Docker config's `auths` keys it. */
  host: string;
  /** PEM of the CA that signed the registry's serving certificate. */
  caPem: string;
  /** A file holding {@link caPem}. */
  caFile: string;
  /** The user and password the registry accepts. */
  username: string;
  password: string;
  /** Token mode: requests the issuer answered (any status), and the next tokens' behaviour. */
  issuer?: {
    requests: number;
    granted: number;
    behaviour: IssuerBehaviour;
    /** Every token granted, in order. */
    issued: IssuedToken[];
  };
  /** Writes a Docker config for this registry in a new folder; returns the folder. */
  dockerConfig(auth: { username: string; password: string } | Record<string, unknown>): string;
  /** The folder the registry's files live in. */
  dir: string;
  /** The status the registry answers a HEAD of `path` with this Authorization value. */
  statusOf(path: string, authorization?: string): Promise<number>;
}

const b64url = (b: Buffer | string) => Buffer.from(b).toString("base64url");

/** The DER of the first certificate of a PEM text, base64 (as `x5c` holds it). */
const x5cOf = (certPem: string) => certPem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");

/** Access requested by `scope` values (`repository:<name>:<actions>`), all granted. */
function accessOf(scopes: string[]): { type: string; name: string; actions: string[] }[] {
  return scopes.map((s) => {
    const [type, ...rest] = s.split(":");
    const actions = rest.pop() ?? "";
    return { type, name: rest.join(":"), actions: actions.split(",").filter(Boolean) };
  });
}

/**
 * Starts Distribution with `mode` auth on a free loopback port, stopped by the cleanup.
 * Resolves once `/v2/` answers 401 over TLS.
 */
export async function startAuthRegistry(
  c: Cleanup,
  mode: "htpasswd" | "token",
): Promise<AuthRegistry> {
  const dir = tempDir(c, `cocoonset-authreg-${mode}`);
  const ca = createClientCa("cocoonset test registry CA");
  const serving = issueServerCertificate(ca, "127.0.0.1", {
    ips: ["127.0.0.1"],
    dns: ["localhost"],
  });
  const caFile = join(dir, "ca.pem");
  writeFileSync(caFile, ca.certPem);
  writeFileSync(join(dir, "tls.crt"), serving.certPem);
  writeFileSync(join(dir, "tls.key"), serving.keyPem);
  const username = "fleet-bot";
  const password = `pw-${randomUUID()}`;
  const port = await freePort();
  const host = `127.0.0.1:${port}`;

  let auth: string;
  let issuer: AuthRegistry["issuer"];
  if (mode === "htpasswd") {
    writeFileSync(join(dir, "htpasswd"), `${username}:${bcrypt.hashSync(password, 4)}\n`);
    auth = `  htpasswd:\n    realm: cocoonset-test\n    path: ${join(dir, "htpasswd")}\n`;
  } else {
    const signer = createClientCa("cocoonset test token issuer");
    writeFileSync(join(dir, "token-ca.pem"), signer.certPem);
    const state = {
      requests: 0,
      granted: 0,
      behaviour: { expiresIn: 300, issuedSecondsAgo: 0, expOffsets: [] } as IssuerBehaviour,
      issued: [] as IssuedToken[],
    };
    issuer = state;
    const service = "cocoonset-test-registry";
    const server: Server = createServer((req, res) => {
      state.requests++;
      const url = new URL(req.url ?? "/", "http://issuer");
      const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? "")?.[1];
      const [user, ...pw] = basic ? Buffer.from(basic, "base64").toString().split(":") : [];
      if (user !== username || pw.join(":") !== password) {
        res.writeHead(401, { "content-type": "application/json" });
        res.end('{"details":"unauthorized"}');
        return;
      }
      const now = Math.floor(Date.now() / 1000);
      const { registryLifetime } = state.behaviour;
      const exp =
        now +
        (state.behaviour.expOffsets.shift() ??
          (registryLifetime !== undefined
            ? registryLifetime - TOKEN_LEEWAY_SECONDS
            : state.behaviour.expiresIn));
      const header = { typ: "JWT", alg: "ES256", x5c: [x5cOf(signer.certPem)] };
      const claims = {
        iss: "cocoonset-test-issuer",
        sub: user,
        aud: url.searchParams.get("service") ?? service,
        exp,
        nbf: Math.min(now, exp) - 10,
        iat: Math.min(now, exp) - 10,
        jti: randomUUID(),
        access: accessOf(url.searchParams.getAll("scope")),
      };
      const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
      const signature = sign("sha256", Buffer.from(input), {
        key: signer.keyPem,
        dsaEncoding: "ieee-p1363",
      });
      const token = `${input}.${b64url(signature)}`;
      state.granted++;
      state.issued.push({
        scopes: url.searchParams.getAll("scope"),
        refusedAfter: (exp + TOKEN_LEEWAY_SECONDS) * 1000,
        token,
      });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          token,
          expires_in: state.behaviour.expiresIn,
          issued_at: new Date(Date.now() - state.behaviour.issuedSecondsAgo * 1000).toISOString(),
        }),
      );
    });
    const issuerPort = await freePort();
    await new Promise<void>((resolve) => server.listen(issuerPort, "127.0.0.1", resolve));
    c.defer("stop the token issuer", () => new Promise<void>((r) => server.close(() => r())));
    auth =
      `  token:\n    realm: http://127.0.0.1:${issuerPort}/token\n    service: ${service}\n` +
      `    issuer: cocoonset-test-issuer\n    rootcertbundle: ${join(dir, "token-ca.pem")}\n`;
  }

  const config =
    `version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n` +
    `storage:\n  inmemory: {}\n  delete:\n    enabled: true\n` +
    `http:\n  addr: ${host}\n  tls:\n    certificate: ${join(dir, "tls.crt")}\n    key: ${join(dir, "tls.key")}\n` +
    `auth:\n${auth}`;
  writeFileSync(join(dir, "config.yml"), config);
  const proc: ChildProcess = spawn(
    requireBinary("distribution-registry"),
    ["serve", join(dir, "config.yml")],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  proc.stderr?.setEncoding("utf8");
  proc.stderr?.on("data", (d: string) => (stderr = (stderr + d).slice(-4000)));
  c.defer("stop the registry", async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const gone = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGTERM");
    await gone;
  });

  const statusOf = (path: string, authorization?: string) =>
    new Promise<number>((resolve) => {
      const req = httpsRequest(
        {
          method: "HEAD",
          host: "127.0.0.1",
          port,
          path,
          ca: ca.certPem,
          timeout: 2000,
          headers: authorization ? { authorization } : {},
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", () => resolve(0));
      req.on("timeout", () => req.destroy());
      req.end();
    });

  // Ready once /v2/ answers (401: it asks for credentials) over TLS with our CA.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const status = await statusOf("/v2/");
    if (status === 401) break;
    if (proc.exitCode !== null || Date.now() > deadline)
      throw new Error(`the Distribution registry did not start (last status ${status}): ${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }

  return {
    address: `https://${host}`,
    host,
    caPem: ca.certPem,
    caFile,
    username,
    password,
    issuer,
    dir,
    statusOf,
    dockerConfig(entry) {
      const d = tempDir(c, "cocoonset-dockercfg");
      const auths =
        "username" in entry && "password" in entry && Object.keys(entry).length === 2
          ? {
              [host]: {
                auth: Buffer.from(`${String(entry.username)}:${String(entry.password)}`).toString(
                  "base64",
                ),
              },
            }
          : undefined;
      writeFileSync(join(d, "config.json"), JSON.stringify(auths ? { auths } : entry, null, 2));
      return d;
    },
  };
}
