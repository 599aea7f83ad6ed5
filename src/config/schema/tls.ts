// TLS schemas for listeners and clusters (paths only; the files are read by src/config/load.ts for
// --check and by the proxy).

import { z } from "zod";
import { describeValue } from "../issues.js";
import { expected, flag } from "./scalars.js";

const filePath = z.string({ error: expected("a file path") }).min(1, "must not be empty");
/** An SNI name: a DNS name, or "*." and a DNS name (matches exactly one more label). */
const SERVER_NAME_RE = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;
const serverName = z
  .string({ error: expected('a server name like "api.example.com" or "*.example.com"') })
  .transform((v, ctx) => {
    const n = v.trim().toLowerCase();
    if (!SERVER_NAME_RE.test(n) || n.length > 253) {
      ctx.addIssue({ code: "custom", message: `expected a server name like "api.example.com" or "*.example.com", got ${describeValue(v)}` });
      return z.NEVER;
    }
    return n;
  });

export const listenerTls = z
  .strictObject(
    {
      certFile: filePath,
      keyFile: filePath,
      caFile: filePath.nullable().default(null),
      requireClientCert: flag.default(false),
      certificates: z
        .array(
          z.strictObject(
            {
              serverNames: z.array(serverName, { error: expected("a list of server names") }).min(1, "needs at least one server name"),
              certFile: filePath,
              keyFile: filePath,
            },
            { error: expected("a mapping like { serverNames: [api.example.com], certFile, keyFile }") },
          ),
          { error: expected("a list of certificates chosen by SNI") },
        )
        .default([]),
    },
    { error: expected("a mapping like { certFile: server.pem, keyFile: server.key }") },
  )
  .superRefine((t, ctx) => {
    if (t.requireClientCert && t.caFile === null) {
      ctx.addIssue({ code: "custom", path: ["caFile"], message: "requireClientCert needs caFile (the CA that client certificates are verified against)" });
    }
  });

export const clusterTls = z
  .strictObject(
    {
      caFile: filePath.nullable().default(null),
      serverName: serverName.nullable().default(null),
      certFile: filePath.nullable().default(null),
      keyFile: filePath.nullable().default(null),
    },
    { error: expected("a mapping like { caFile: ca.pem, serverName: backend.internal } ({} for the system CAs)") },
  )
  .superRefine((t, ctx) => {
    if ((t.certFile === null) !== (t.keyFile === null)) {
      ctx.addIssue({ code: "custom", path: [t.certFile === null ? "certFile" : "keyFile"], message: "a client certificate needs both certFile and keyFile" });
    }
    if (t.serverName !== null && t.serverName.startsWith("*.")) {
      ctx.addIssue({ code: "custom", path: ["serverName"], message: "must be one name, not a wildcard" });
    }
  });
