// The few grpc.testing messages (grpc-go's interop TestService, test/engines/grpc-interop) that
// the upgrade test sends and reads, written as protobuf bytes here (the same fields
// test/helpers/ccore-client.py writes): grpc-go's server parses the requests, so a wrong byte
// fails the calls. Field numbers as grpc/testing/messages.proto numbers them.

function varint(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n = Math.floor(n / 128);
    if (n === 0) {
      out.push(b);
      return out;
    }
    out.push(b | 0x80);
  }
}

function fieldVarint(num: number, v: number): number[] {
  return [...varint(num << 3), ...varint(v)];
}

function fieldBytes(num: number, b: readonly number[] | Buffer): number[] {
  return [...varint((num << 3) | 2), ...varint(b.length), ...b];
}

/** grpc.testing.SimpleRequest: response_size (2), payload (3) { body (2) } of `requestSize` zero bytes. */
export function simpleRequest(responseSize: number, requestSize: number): Buffer {
  return Buffer.from([...fieldVarint(2, responseSize), ...fieldBytes(3, fieldBytes(2, Buffer.alloc(requestSize)))]);
}

/** grpc.testing.StreamingOutputCallRequest: `count` response_parameters (2) { size (1), interval_us (2) }. */
export function streamingOutputRequest(count: number, size: number, intervalUs: number): Buffer {
  const params = fieldBytes(2, [...fieldVarint(1, size), ...fieldVarint(2, intervalUs)]);
  return Buffer.from(Array.from({ length: count }, () => params).flat());
}

function readVarint(b: Buffer, i: number): [number, number] {
  let n = 0;
  let mul = 1;
  for (;;) {
    const c = b[i++]!;
    n += (c & 0x7f) * mul;
    if (c < 0x80) return [n, i];
    mul *= 128;
  }
}

/** The body length of field 1 (payload) of a SimpleResponse or StreamingOutputCallResponse; -1 if unreadable. */
export function payloadBodyLength(msg: Buffer): number {
  let i = 0;
  while (i < msg.length) {
    let key: number;
    [key, i] = readVarint(msg, i);
    const wire = key & 7;
    if (wire === 0) {
      [, i] = readVarint(msg, i);
      continue;
    }
    if (wire !== 2) return -1;
    let len: number;
    [len, i] = readVarint(msg, i);
    if (key >> 3 === 1) {
      const inner = msg.subarray(i, i + len);
      let j = 0;
      while (j < inner.length) {
        let k: number;
        [k, j] = readVarint(inner, j);
        if ((k & 7) === 0) {
          [, j] = readVarint(inner, j);
          continue;
        }
        let l2: number;
        [l2, j] = readVarint(inner, j);
        if (k >> 3 === 2) return l2;
        j += l2;
      }
      return 0;
    }
    i += len;
  }
  return 0;
}
