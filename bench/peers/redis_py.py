#!/usr/bin/env python3
"""dlock-bench's Python peer: redis-py's Lock (Debian's python3-redis), the
lock most Python services use, on the same redis-server as dlock's run.

  python3 redis_py.py PORT WORKLOAD SECONDS
    W1  one thread, lock + unlock pairs over 32 names in turn
    W2  16 threads at once, each over 32 names of its own (one client: its
        connection pool gives each thread a connection)
    W6  16 threads take turns on one lock (1 ms holds, 1 ms outside), as
        dlock-bench's W6 does on its fair lock (redis-py has none: its Lock
        is the neighbour); redis-py's blocking acquire retries every
        `sleep` seconds (its default, 0.1)

Prints one JSON line, as bench/peers/peers.js does: {"peer", "workload",
"pairs_per_s", "pairs_total", "lock_p50_us", "lock_p99_us", "cdf_us"}, and for W6
"handoff_p50_us" and "handoff_cdf_us" (a waiter's grant after the release
it waited for); cdf_us at the percentiles CDF_AT.
"""
import json
import sys
import threading
import time

import redis

LEASE_S = 30
# the percentiles of "cdf_us" (dlock-bench --plot's curves)
CDF_AT = [1, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80,
          85, 90, 95, 99]


def pct(values, p):
    if not values:
        return 0.0
    v = sorted(values)
    return float(v[min(len(v) - 1, int(len(v) * p / 100))])


def run_for(seconds, stop, jobs):
    """Run each (function, args) job on a thread of its own for seconds,
    then set stop and wait for them: the seconds they ran."""
    threads = [threading.Thread(target=f, args=a) for f, a in jobs]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return time.monotonic() - t0


def pairs(client, tasks, seconds):
    stop = threading.Event()
    counts = [0] * tasks
    lat = []

    def run(i):
        locks = [client.lock(f"bench:py:{i}:{k}", timeout=LEASE_S)
                 for k in range(32)]
        n = 0
        while not stop.is_set():
            lock = locks[n % 32]
            t0 = time.perf_counter_ns()
            if not lock.acquire(blocking=False):
                raise RuntimeError("not acquired")
            if i == 0:
                lat.append((time.perf_counter_ns() - t0) // 1000)
            lock.release()
            n += 1
        counts[i] = n

    secs = run_for(seconds, stop, [(run, (i,)) for i in range(tasks)])
    return sum(counts) / secs, sum(counts), lat, None


def handoffs(client, seconds):
    stop = threading.Event()
    released = [0]  # ns of the last release
    grants = []
    hand = []
    lock_mu = threading.Lock()

    def run():
        lock = client.lock("bench:py:w6", timeout=LEASE_S)
        while not stop.is_set():
            call = time.perf_counter_ns()
            if not lock.acquire(blocking=True, blocking_timeout=10):
                continue
            got = time.perf_counter_ns()
            with lock_mu:
                grants.append((got - call) // 1000)
                if released[0] > call:  # it waited for that release
                    hand.append((got - released[0]) // 1000)
            end = time.perf_counter_ns() + 1_000_000
            while time.perf_counter_ns() < end:  # hold 1 ms
                pass
            lock.release()
            with lock_mu:
                released[0] = time.perf_counter_ns()
            time.sleep(0.001)

    secs = run_for(seconds, stop, [(run, ())] * 16)
    return len(grants) / secs, len(grants), grants, hand


def main(argv):
    if len(argv) != 4 or argv[2] not in ("W1", "W2", "W6"):
        print(__doc__, file=sys.stderr)
        return 2
    port, workload, seconds = int(argv[1]), argv[2], float(argv[3])
    client = redis.Redis(host="127.0.0.1", port=port,
                         max_connections=64)
    if workload == "W6":
        rate, total, lat, hand = handoffs(client, seconds)
    else:
        rate, total, lat, hand = pairs(client, 16 if workload == "W2" else 1, seconds)
    p50, p99 = pct(lat, 50), pct(lat, 99)
    out = {"peer": "redis-py", "workload": workload, "pairs_per_s": rate,
           "pairs_total": total,
           "lock_p50_us": p50, "lock_p99_us": p99,
           "cdf_us": [pct(lat, p) for p in CDF_AT]}
    if hand is not None:
        out["handoff_p50_us"] = pct(hand, 50)
        out["handoff_cdf_us"] = [pct(hand, p) for p in CDF_AT]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
