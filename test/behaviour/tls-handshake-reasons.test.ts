// The reasons dojang_tls_handshake_errors_total counts (issue 18 item 6), from what node's
// tlsClientError gives: the error's code and the socket's authorizationError. The codes are the
// ones Node 24 gave for real handshakes (test/process/tls-sockets.test.ts makes each of those
// against a real dojang); this table also pins the ones a test cannot make in bounded time
// (node's 120 s handshake timeout) or without a third-party client (other alerts).
import { describe, expect, it } from "vitest";
import { HANDSHAKE_ERROR_REASONS, classifyHandshakeError } from "../../src/proxy/downstream/tls.js";

describe("classifyHandshakeError", () => {
  it.each([
    ["ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE", null, "no_client_cert"],
    ["ECONNRESET", "UNABLE_TO_VERIFY_LEAF_SIGNATURE", "bad_client_cert"],
    ["ECONNRESET", "CERT_HAS_EXPIRED", "bad_client_cert"],
    ["ECONNRESET", "UNABLE_TO_GET_ISSUER_CERT", "bad_client_cert"],
    ["ERR_SSL_NO_APPLICATION_PROTOCOL", null, "protocol"],
    ["ERR_SSL_UNSUPPORTED_PROTOCOL", null, "protocol"],
    ["ERR_SSL_HTTP_REQUEST", null, "protocol"],
    ["ERR_SSL_WRONG_VERSION_NUMBER", null, "protocol"],
    ["ERR_SSL_UNEXPECTED_MESSAGE", null, "protocol"],
    ["ERR_SSL_NO_SHARED_CIPHER", null, "protocol"],
    ["ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE", null, "protocol"],
    ["ERR_SSL_TLSV1_ALERT_UNKNOWN_CA", null, "server_cert_refused"],
    ["ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE", null, "server_cert_refused"],
    ["ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED", null, "server_cert_refused"],
    ["ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN", null, "server_cert_refused"],
    ["ERR_TLS_HANDSHAKE_TIMEOUT", null, "timeout"],
    ["ECONNRESET", null, "client_closed"],
    ["EPIPE", undefined, "client_closed"],
    ["ERR_SOMETHING_NEW", null, "other"],
    [undefined, null, "other"],
  ] as const)("%s (authorizationError %s) is %s", (code, authz, want) => {
    expect(classifyHandshakeError(code, authz)).toBe(want);
    expect(HANDSHAKE_ERROR_REASONS).toContain(want);
  });
});
