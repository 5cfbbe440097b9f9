#!/usr/bin/python3
"""bench:rls's grpcio driver: ShouldRateLimit calls from gRPC C-core (Debian's
python3-grpcio, the client core of Envoy's google_grpc) on CHANNELS channels,
for SECONDS s: closed loop with CONCURRENCY calls in flight (RATE 0), or paced
at RATE calls/s (each millisecond sends what the rate owes by then, at most
CONCURRENCY * 8 in flight). Every reply is checked: status OK and
overall_code OK (1). Prints one JSON line: {"total", "failed", "rps",
"p99_ms"}. Bounded in time: it stops sending at SECONDS and waits at most 10 s
more for the calls in flight.

usage: bench-grpcio.py PORT SECONDS CONCURRENCY CHANNELS RATE REQUEST_FILE
"""
import json
import sys
import threading
import time

import grpc

PORT, SECONDS, CONCURRENCY, CHANNELS, RATE = (int(float(a)) for a in sys.argv[1:6])
REQUEST = open(sys.argv[6], "rb").read()
RLS = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"


def overall_ok(msg):
    """overall_code (field 1, varint) of a RateLimitResponse is OK (1)."""
    i = 0
    while i < len(msg):
        key = msg[i]
        i += 1
        if key == 0x08:
            return msg[i] == 1
        wt = key & 7
        if wt == 0:
            while msg[i] & 0x80:
                i += 1
            i += 1
        elif wt == 2:
            n, shift = 0, 0
            while True:
                b = msg[i]
                i += 1
                n |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            i += n
        else:
            return False
    return False


channels = [grpc.insecure_channel("127.0.0.1:%d" % PORT) for _ in range(CHANNELS)]
for ch in channels:
    grpc.channel_ready_future(ch).result(timeout=10)
calls = [ch.unary_unary(RLS) for ch in channels]

lock = threading.Lock()
done_cv = threading.Condition(lock)
state = {"inflight": 0, "total": 0, "failed": 0}
latencies = []
next_channel = [0]


def send():
    t0 = time.perf_counter()
    c = calls[next_channel[0] % CHANNELS]
    next_channel[0] += 1
    fut = c.future(REQUEST, timeout=30)

    def finished(f):
        ok = False
        try:
            ok = overall_ok(f.result())
        except grpc.RpcError:
            ok = False
        ms = (time.perf_counter() - t0) * 1000
        with lock:
            state["inflight"] -= 1
            state["total"] += 1
            if not ok:
                state["failed"] += 1
            latencies.append(ms)
            done_cv.notify()

    fut.add_done_callback(finished)


start = time.perf_counter()
end = start + SECONDS
if RATE == 0:
    while time.perf_counter() < end:
        with lock:
            while state["inflight"] >= CONCURRENCY:
                done_cv.wait(0.05)
            state["inflight"] += 1
        send()
else:
    sent = 0
    cap = CONCURRENCY * 8
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        owed = int((now - start) * RATE) - sent
        for _ in range(owed):
            with lock:
                if state["inflight"] >= cap:
                    break
                state["inflight"] += 1
            send()
            sent += 1
        time.sleep(0.001)
wall = time.perf_counter() - start
deadline = time.perf_counter() + 10
with lock:
    while state["inflight"] > 0 and time.perf_counter() < deadline:
        done_cv.wait(0.05)
    total, failed = state["total"], state["failed"]
    lat = sorted(latencies)
for ch in channels:
    ch.close()
p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else 0
print(json.dumps({"total": total, "failed": failed, "rps": total / wall, "p99_ms": p99}))
