// Which admin addresses only this machine can reach: the rule behind admin.token's requirement
// (schema.ts) and behind the admin's record reads (src/proxy/admin/admin.ts). No imports: the
// served process reads it without loading the config parsers.

/** 127.0.0.0/8, ::1 and "localhost": addresses only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) || /^::ffff:127\./.test(host);
}
