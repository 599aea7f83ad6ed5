// Certificates made at test time with the `openssl` command line (node:crypto makes keys but
// cannot sign X.509; the openssl CLI is on every Debian image and .ci/run installs it where it is
// missing, so no npm package is needed). Each CertDir is a fresh temp directory: a CA per call to
// ca(), leaf certificates signed by it (server and client use), ECDSA P-256, valid one day.
// Nothing here is a secret worth keeping: the directory is removed after the tests.
import { execFileSync } from "node:child_process";
import { createHash, X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface CertFiles {
  readonly certFile: string;
  readonly keyFile: string;
  readonly cert: Buffer;
  readonly key: Buffer;
  /** hex SHA-256 of the certificate's DER (what x-forwarded-client-cert's Hash= carries) */
  readonly sha256: string;
  readonly x509: X509Certificate;
}

export interface Ca extends CertFiles {
  readonly name: string;
}

export interface LeafOptions {
  /** subject CN */
  readonly cn: string;
  /** subject O (before CN), default "dojang test" */
  readonly o?: string;
  readonly dns?: readonly string[];
  readonly ip?: readonly string[];
  readonly uri?: readonly string[];
  /** already expired: valid until one day before it was made (openssl -days -1) */
  readonly expired?: boolean;
}

let serial = 1000;

export class CertDir {
  readonly dir = mkdtempSync(join(tmpdir(), "dojang-certs-"));

  private openssl(args: string[]): void {
    execFileSync("openssl", args, { cwd: this.dir, stdio: ["ignore", "ignore", "pipe"] });
  }

  private files(base: string): CertFiles {
    const certFile = join(this.dir, `${base}.pem`);
    const keyFile = join(this.dir, `${base}.key`);
    const cert = readFileSync(certFile);
    const x509 = new X509Certificate(cert);
    return { certFile, keyFile, cert, key: readFileSync(keyFile), x509, sha256: createHash("sha256").update(x509.raw).digest("hex") };
  }

  /** A self-signed CA named `name` (files <name>.pem / <name>.key). */
  ca(name: string): Ca {
    this.openssl([
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
      "-keyout", `${name}.key`, "-out", `${name}.pem`, "-days", "1", "-subj", `/O=dojang test/CN=${name}`,
      "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    return { ...this.files(name), name };
  }

  /** A leaf certificate signed by `ca`, usable by servers and clients (files <base>.pem / .key). */
  leaf(ca: Ca, base: string, o: LeafOptions): CertFiles {
    const sans = [...(o.dns ?? []).map((d) => `DNS:${d}`), ...(o.ip ?? []).map((i) => `IP:${i}`), ...(o.uri ?? []).map((u) => `URI:${u}`)];
    const ext = [
      "basicConstraints=CA:FALSE",
      "keyUsage=critical,digitalSignature,keyEncipherment",
      "extendedKeyUsage=serverAuth,clientAuth",
      ...(sans.length > 0 ? [`subjectAltName=${sans.join(",")}`] : []),
    ].join("\n");
    writeFileSync(join(this.dir, `${base}.ext`), ext + "\n");
    this.openssl([
      "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
      "-keyout", `${base}.key`, "-out", `${base}.csr`, "-subj", `/O=${o.o ?? "dojang test"}/CN=${o.cn}`,
    ]);
    this.openssl([
      "x509", "-req", "-in", `${base}.csr`, "-CA", `${ca.name}.pem`, "-CAkey", `${ca.name}.key`,
      "-set_serial", String(serial++), "-days", o.expired === true ? "-1" : "1", "-extfile", `${base}.ext`, "-out", `${base}.pem`,
    ]);
    return this.files(base);
  }

  /** A path in the directory (for files a test writes itself). */
  path(name: string): string {
    return join(this.dir, name);
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
