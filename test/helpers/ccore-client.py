#!/usr/bin/python3
# gRPC's C-core (libgrpc, through Debian's python3-grpcio) as the second client implementation of
# test/process/upgrade.test.ts: continuous load on grpc-go's interop TestService
# (test/engines/grpc-interop) through dojang, until its standard input closes; then it lets what
# is in flight finish and prints one JSON line with what it saw.
#
#   ccore-client.py --target h2c=127.0.0.1:PORT --target tls=127.0.0.1:PORT --ca CA.pem
#       [--server-name dojang.test] [--channels 2] [--inflight 500] [--delay-ms 1000]
#       [--streams 25] [--stream-messages 50] [--interval-us 100000]
#
# Unary: UnaryCall with x-delay-ms metadata (the engine holds the answer that long), `inflight`
# at all times, spread over `channels` channels per target (each its own connection); every reply's
# payload length is checked. Streams: StreamingOutputCall asking for `stream-messages` messages
# `interval-us` apart, `streams` at all times; a stream counts as complete only with all of them
# and status OK. The request messages (a few protobuf fields) are written here; grpc-go's server
# parses them, so a wrong byte would fail the calls.
import argparse
import asyncio
import json
import sys

import grpc
from grpc import aio

UNARY = "/grpc.testing.TestService/UnaryCall"
STREAM = "/grpc.testing.TestService/StreamingOutputCall"


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(num, v):
    return varint(num << 3) + varint(v)


def field_bytes(num, b):
    return varint((num << 3) | 2) + varint(len(b)) + b


def payload(size):
    # grpc.testing.Payload: type (1) COMPRESSABLE = 0, body (2)
    return field_bytes(2, bytes(size))


def simple_request(response_size, request_size):
    # grpc.testing.SimpleRequest: response_size (2), payload (3)
    return field_varint(2, response_size) + field_bytes(3, payload(request_size))


def streaming_request(count, size, interval_us):
    # grpc.testing.StreamingOutputCallRequest: response_parameters (2) {size (1), interval_us (2)}
    params = field_varint(1, size) + field_varint(2, interval_us)
    return b"".join(field_bytes(2, params) for _ in range(count))


def read_varint(b, i):
    shift = 0
    n = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        if c < 0x80:
            return n, i
        shift += 7


def body_length(msg):
    """The length of field 1 (payload) -> field 2 (body) of a SimpleResponse or StreamingOutputCallResponse."""
    i = 0
    while i < len(msg):
        key, i = read_varint(msg, i)
        num, wire = key >> 3, key & 7
        if wire == 2:
            ln, i = read_varint(msg, i)
            if num == 1:
                inner = msg[i : i + ln]
                j = 0
                while j < len(inner):
                    k, j = read_varint(inner, j)
                    if k & 7 == 2:
                        l2, j = read_varint(inner, j)
                        if k >> 3 == 2:
                            return l2
                        j += l2
                    else:
                        _, j = read_varint(inner, j)
                return 0
            i += ln
        elif wire == 0:
            _, i = read_varint(msg, i)
        else:
            return -1
    return 0


def identity(b):
    return b


class Tally:
    def __init__(self):
        self.unary_ok = 0
        self.unary_codes = {}
        self.unary_bad_payload = 0
        self.streams_ok = 0
        self.stream_codes = {}
        self.streams_short = 0
        self.messages = 0
        self.errors = []

    def error(self, what, e):
        if len(self.errors) < 10:
            self.errors.append(f"{what}: {e.code().name}: {e.details()}" if isinstance(e, grpc.RpcError) else f"{what}: {e!r}")


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", action="append", required=True)
    ap.add_argument("--ca")
    ap.add_argument("--server-name", default="dojang.test")
    ap.add_argument("--channels", type=int, default=2)
    ap.add_argument("--inflight", type=int, default=500)
    ap.add_argument("--delay-ms", type=int, default=1000)
    ap.add_argument("--streams", type=int, default=25)
    ap.add_argument("--stream-messages", type=int, default=50)
    ap.add_argument("--interval-us", type=int, default=100000)
    a = ap.parse_args()

    channels = []
    for t in a.target:
        kind, addr = t.split("=", 1)
        for _ in range(a.channels):
            # each channel its own connection (no subchannel shared between channels)
            opts = [("grpc.use_local_subchannel_pool", 1)]
            if kind == "tls":
                creds = grpc.ssl_channel_credentials(root_certificates=open(a.ca, "rb").read())
                opts.append(("grpc.ssl_target_name_override", a.server_name))
                channels.append(aio.secure_channel(addr, creds, options=opts))
            else:
                channels.append(aio.insecure_channel(addr, options=opts))
    unary = [c.unary_unary(UNARY, request_serializer=identity, response_deserializer=identity) for c in channels]
    stream = [c.unary_stream(STREAM, request_serializer=identity, response_deserializer=identity) for c in channels]
    t = Tally()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_stdin():
        if not sys.stdin.buffer.read1(4096):
            loop.remove_reader(sys.stdin.fileno())
            stop.set()

    loop.add_reader(sys.stdin.fileno(), on_stdin)
    req = simple_request(64, 32)
    sreq = streaming_request(a.stream_messages, 16, a.interval_us)
    md = (("x-delay-ms", str(a.delay_ms)),)

    async def unary_worker(i):
        while not stop.is_set():
            try:
                r = await unary[i % len(unary)](req, metadata=md, timeout=180)
                if body_length(r) == 64:
                    t.unary_ok += 1
                else:
                    t.unary_bad_payload += 1
            except grpc.RpcError as e:
                t.unary_codes[e.code().name] = t.unary_codes.get(e.code().name, 0) + 1
                t.error("unary", e)

    async def stream_worker(i):
        while not stop.is_set():
            n = 0
            try:
                async for m in stream[i % len(stream)](sreq, timeout=180):
                    if body_length(m) == 16:
                        n += 1
                t.messages += n
                if n == a.stream_messages:
                    t.streams_ok += 1
                else:
                    t.streams_short += 1
            except grpc.RpcError as e:
                t.messages += n
                t.stream_codes[e.code().name] = t.stream_codes.get(e.code().name, 0) + 1
                t.error(f"stream after {n} messages", e)

    workers = [asyncio.ensure_future(unary_worker(i)) for i in range(a.inflight)]
    workers += [asyncio.ensure_future(stream_worker(i)) for i in range(a.streams)]
    print(json.dumps({"started": True}), flush=True)
    await asyncio.gather(*workers)
    for c in channels:
        await c.close()
    print(
        json.dumps(
            {
                "unary": {"ok": t.unary_ok, "codes": t.unary_codes, "badPayload": t.unary_bad_payload},
                "streams": {"ok": t.streams_ok, "codes": t.stream_codes, "short": t.streams_short, "messages": t.messages},
                "errors": t.errors,
            }
        ),
        flush=True,
    )


asyncio.run(main())
