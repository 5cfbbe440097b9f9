#!/usr/bin/python3
"""Drives the ratemesh RLS gRPC server with gRPC C-core (Debian's python3-grpcio):
the client core of Envoy's google_grpc. Messages are encoded by hand (the few
protobuf fields the RLS and health protos need), so nothing but grpcio is
needed. Prints one JSON object per case on stdout:
  {"case": ..., "calls": N, "ok": N, "statuses": {...}, "detail": ...}
"ok" counts the calls answered as the case expects. Every loop is bounded.

usage: interop-grpcio.py PORT [MAX_MESSAGE_BYTES]
"""
import json
import sys
import threading
import time

import grpc

PORT = int(sys.argv[1])
MAX_MESSAGE = int(sys.argv[2]) if len(sys.argv) > 2 else 64 * 1024
TARGET = "127.0.0.1:%d" % PORT
RLS = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
CHECK = "/grpc.health.v1.Health/Check"
WATCH = "/grpc.health.v1.Health/Watch"
RLS_SERVICE = "envoy.service.ratelimit.v3.RateLimitService"


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


def ld(field, payload):
    """A length-delimited field."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def rls_request(domain, entries, hits=None):
    """RateLimitRequest: domain (1), descriptors (2) of entries (1: key 1, value 2), hits_addend (3)."""
    desc = b"".join(ld(1, ld(1, k.encode()) + ld(2, v.encode())) for k, v in entries)
    msg = ld(1, domain.encode()) + ld(2, desc)
    if hits is not None:
        msg += varint(3 << 3) + varint(hits)
    return msg


def first_varint(msg, field):
    """The value of varint field `field` at the top level of a message (0 when absent)."""
    i = 0
    while i < len(msg):
        key, i = read_varint(msg, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(msg, i)
            if f == field:
                return v
        elif wt == 2:
            n, i = read_varint(msg, i)
            i += n
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
    return 0


def read_varint(b, i):
    shift = 0
    v = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, i
        shift += 7


OK, OVER_LIMIT = 1, 2
SERVING = 1


def ident(x):
    return x


channel = grpc.insecure_channel(TARGET)
grpc.channel_ready_future(channel).result(timeout=10)
should = channel.unary_unary(RLS, request_serializer=ident, response_deserializer=ident)
check = channel.unary_unary(CHECK, request_serializer=ident, response_deserializer=ident)
watch = channel.unary_stream(WATCH, request_serializer=ident, response_deserializer=ident)


def report(case, calls, ok, statuses, detail=""):
    print(json.dumps({"case": case, "calls": calls, "ok": ok, "statuses": statuses, "detail": detail}), flush=True)


def tally(statuses, code):
    name = code.name if hasattr(code, "name") else str(code)
    statuses[name] = statuses.get(name, 0) + 1


def unary(case, fn, n, expect):
    """n calls of fn(i) -> (code, value); ok when expect(code, value, i)."""
    statuses, ok = {}, 0
    for i in range(n):
        try:
            code, value = grpc.StatusCode.OK, fn(i)
        except grpc.RpcError as e:
            code, value = e.code(), e.details()
        tally(statuses, code)
        if expect(code, value, i):
            ok += 1
    report(case, n, ok, statuses)


edge = rls_request("edge", [("remote_address", "192.0.2.1")])
ok_answer = lambda c, v, i: c == grpc.StatusCode.OK and first_varint(v, 1) == OK

# a unary call, then the same channel reused for thousands of calls
unary("unary ShouldRateLimit", lambda i: should(edge, timeout=10), 1, ok_answer)
unary("one connection, 5,000 calls in turn", lambda i: should(edge, timeout=10), 5000, ok_answer)

# a limit that bites: 5 a minute, the 6th and later OVER_LIMIT
user = "interop-%d" % int(time.time() * 1000)
tight = rls_request("tight", [("user", user)])
unary(
    "limit 5/min: 5 OK then OVER_LIMIT",
    lambda i: should(tight, timeout=10),
    8,
    lambda c, v, i: c == grpc.StatusCode.OK and first_varint(v, 1) == (OK if i < 5 else OVER_LIMIT),
)

# many concurrent streams on one connection
futures = [should.future(rls_request("edge", [("remote_address", "198.51.100.%d" % (i % 250))]), timeout=20) for i in range(500)]
statuses, ok = {}, 0
for f in futures:
    try:
        v = f.result()
        tally(statuses, grpc.StatusCode.OK)
        ok += first_varint(v, 1) == OK
    except grpc.RpcError as e:
        tally(statuses, e.code())
report("500 concurrent calls on one channel", 500, ok, statuses)

# gRPC C-core (Debian's 1.51; grpc/grpc#38758, seen on 1.54 too) may cancel a call after giving
# it a stream id and before writing its HEADERS, and then writes RST_STREAM for that stream, idle
# to the server. RFC 9113 section 6.4 makes that a connection error: both our HTTP/2 and
# node:http2 (nghttp2) close the connection (GOAWAY PROTOCOL_ERROR; node: INTERNAL_ERROR), and
# every call still on it fails (INTERNAL, or UNAVAILABLE), which is not what a case here tests.
# So the calls cancelled by a 1 us deadline run on connections of their own, and the calls
# cancelled below are cancelled once their HEADERS are out.


def own_connection():
    """A channel on a connection of its own (not the subchannel the other channels share), ready."""
    ch = grpc.insecure_channel(TARGET, options=[("grpc.use_local_subchannel_pool", 1)])
    grpc.channel_ready_future(ch).result(timeout=10)
    return ch


def close_all(channels):
    """Closes channels together (each close() waits about 200 ms)."""
    closers = [threading.Thread(target=ch.close) for ch in channels]
    for t in closers:
        t.start()
    for t in closers:
        t.join(10)


own = []


def short_deadline(i):
    ch = own_connection()
    own.append(ch)
    rls = ch.unary_unary(RLS, request_serializer=ident, response_deserializer=ident)
    rls(edge, timeout=10)  # one answered first: the 1 us call then goes on a connection in use
    return rls(edge, timeout=0.000001)


# deadlines: one too short to be met is DEADLINE_EXCEEDED; a sane one is answered
# (a reply may beat the client's own 1 us timer: then it must be a correct answer)
unary(
    "deadline 1 us",
    short_deadline,
    20,
    lambda c, v, i: c == grpc.StatusCode.DEADLINE_EXCEEDED or ok_answer(c, v, i),
)
close_all(own)


def watch_until_deadline(i):
    it = watch(ld(1, b""), timeout=0.2)
    for _ in range(10):
        next(it)
    return b""


unary(
    "Health/Watch with a 200 ms deadline",
    watch_until_deadline,
    5,
    lambda c, v, i: c == grpc.StatusCode.DEADLINE_EXCEEDED,
)
unary("deadline 5 s (grpc-timeout sent)", lambda i: should(edge, timeout=5), 20, ok_answer)

# cancellation: 100 calls the server holds open, each started before one it answers at once,
# all on one connection; the held calls cancelled once the others are answered (RST_STREAM CANCEL
# on open streams, the connection serving on); then a Watch stream cancelled after its first
# message. A held call is ShouldRateLimit sent as a client-streaming call whose request does not
# come: HEADERS alone, the server waiting for its message. C-core writes new streams in the order
# they started, so once the last answered call is answered every held call's HEADERS are out and
# no cancel can be for a stream the server has not seen (see above).
release = threading.Event()


def no_request_yet():
    release.wait(30)
    yield from ()


held = channel.stream_unary(RLS, request_serializer=ident, response_deserializer=ident)
statuses, ok = {}, 0
try:
    fs = [held.future(no_request_yet(), timeout=20) if i % 2 == 0 else should.future(edge, timeout=20) for i in range(200)]
    for f in fs[1::2]:
        f.exception()  # waits for it
    for f in fs[0::2]:
        f.cancel()
finally:
    release.set()
for i, f in enumerate(fs):
    try:
        v = f.result()
        tally(statuses, grpc.StatusCode.OK)
        ok += i % 2 == 1 and first_varint(v, 1) == OK
    except grpc.FutureCancelledError:
        tally(statuses, "CANCELLED")
        ok += i % 2 == 0
    except grpc.RpcError as e:
        tally(statuses, e.code())
        ok += i % 2 == 0 and e.code() == grpc.StatusCode.CANCELLED
report("200 calls, every other held and cancelled", 200, ok, statuses)

statuses, ok = {}, 0
for _ in range(20):
    it = watch(ld(1, b""), timeout=10)
    first = next(it)
    it.cancel()
    try:
        next(it)
        tally(statuses, "MORE")
    except grpc.RpcError as e:
        tally(statuses, e.code())
        ok += first_varint(first, 1) == SERVING and e.code() == grpc.StatusCode.CANCELLED
report("Health/Watch cancelled after its first message", 20, ok, statuses)
unary("the channel after the cancellations", lambda i: should(edge, timeout=10), 10, ok_answer)

# large metadata: 8 KiB of it is answered; past the server's 16 KiB header list, refused
big = [("x-big-%d" % k, "m" * 1000) for k in range(8)]
unary("8 KiB of metadata", lambda i: should(edge, timeout=10, metadata=big), 10, ok_answer)
huge = [("x-huge-%d" % k, "m" * 1000) for k in range(20)]
unary(
    "20 KiB of metadata (over the 16 KiB header list)",
    lambda i: should(edge, timeout=10, metadata=huge),
    5,
    lambda c, v, i: c in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE),
)
unary("the channel after the refusals", lambda i: should(edge, timeout=10), 10, ok_answer)


# the largest legal request (exactly MAX_MESSAGE bytes), and one byte more
def sized(n):
    pad = 1
    while True:
        m = rls_request("edge", [("remote_address", "a" * pad)])
        if len(m) >= n:
            break
        pad += n - len(m)
    while len(m) > n:
        pad -= 1
        m = rls_request("edge", [("remote_address", "a" * pad)])
    return m


largest = sized(MAX_MESSAGE)
over = sized(MAX_MESSAGE + 1)
assert len(largest) == MAX_MESSAGE and len(over) == MAX_MESSAGE + 1, (len(largest), len(over))
unary("the largest legal request (%d B)" % MAX_MESSAGE, lambda i: should(largest, timeout=10), 5, ok_answer)
unary(
    "one byte over the largest (%d B)" % (MAX_MESSAGE + 1),
    lambda i: should(over, timeout=10),
    5,
    lambda c, v, i: c == grpc.StatusCode.RESOURCE_EXHAUSTED,
)

# the health service: the server, the RLS service, an unknown name
unary("Health/Check ''", lambda i: check(ld(1, b""), timeout=10), 5, lambda c, v, i: c == grpc.StatusCode.OK and first_varint(v, 1) == SERVING)
unary(
    "Health/Check %s" % RLS_SERVICE,
    lambda i: check(ld(1, RLS_SERVICE.encode()), timeout=10),
    5,
    lambda c, v, i: c == grpc.StatusCode.OK and first_varint(v, 1) == SERVING,
)
unary("Health/Check unknown", lambda i: check(ld(1, b"no.such.Service"), timeout=10), 5, lambda c, v, i: c == grpc.StatusCode.NOT_FOUND)

# an unknown method
unknown = channel.unary_unary("/envoy.service.ratelimit.v3.RateLimitService/Nope", request_serializer=ident, response_deserializer=ident)
unary("an unknown method", lambda i: unknown(edge, timeout=10), 5, lambda c, v, i: c == grpc.StatusCode.UNIMPLEMENTED)

channel.close()
