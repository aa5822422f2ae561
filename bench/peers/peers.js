// dlock-bench's peers: the uncontended workloads through Node.js lock
// libraries, on the same redis-server, so dlock's figures have neighbours.
//
//   node peers.js PORT PEER WORKLOAD SECONDS
//     PEER      node-redlock | redis-semaphore | node-redisson
//     WORKLOAD  W1: one task, lock + unlock pairs over 32 names in turn
//               W2: 16 tasks at once, each over 32 names of its own
//               W6: 16 tasks take turns on one lock, each waiting as the
//                   library waits by default (hand-offs)
//
// Prints one JSON line: {"peer", "workload", "pairs_per_s", "pairs_total",
// "lock_p50_us", "lock_p99_us", "cdf_us"} (latencies of task 0's lock calls;
// cdf_us at the percentiles CDF_AT), as dlock-bench's own W1/W2 measure
// them; pairs_total counts every pair (W6: every grant) the run made, which
// dlock-bench divides the server's CPU by.
'use strict';
const Redis = require('ioredis');

const [port, peer, workload, seconds] = process.argv.slice(2);
const tasks = workload === 'W2' ? 16 : 1;
// W6's holds are 1 ms: a 2 s lease bounds the wait of a waiter whose
// wake-up a library loses (node-redisson 1.0.4 lost some: waiters that sat
// until the lease ended)
const LEASE_MS = workload === 'W6' ? 2000 : 30000;

// One peer: make(name) returns {acquire(), release()} for one name; wait:
// acquire() waits for the lock as the library does by default (W6), else
// it is a single try.
function peerOf(name, wait) {
  const client = new Redis({ host: '127.0.0.1', port: Number(port) });
  if (name === 'node-redlock') {
    const Redlock = require('redlock');
    // waiting: its default retry delay and jitter (200 ms), retried
    // without a limit (-1), as a waiting lock must
    const redlock = new Redlock([client], { retryCount: wait ? -1 : 0 });
    return {
      client,
      make(key) {
        let held = null;
        return {
          async acquire() { held = await redlock.lock(key, LEASE_MS); },
          async release() { await held.unlock(); },
        };
      },
    };
  }
  if (name === 'redis-semaphore') {
    const { Mutex } = require('redis-semaphore');
    return {
      client,
      make(key) {
        // waiting: its defaults (retries every 10 ms for up to 10 s)
        const m = new Mutex(client, key, wait ? { lockTimeout: LEASE_MS }
                                              : { lockTimeout: LEASE_MS,
                                                  acquireAttemptsLimit: 1 });
        return { acquire: () => m.acquire(), release: () => m.release() };
      },
    };
  }
  if (name === 'node-redisson') {
    const { Redisson, TimeUnit } = require('node-redisson');
    const redisson = new Redisson({
      redis: { options: { host: '127.0.0.1', port: Number(port) } },
    });
    client.disconnect(); // node-redisson keeps its own connections
    const others = []; // W6: a client per task (one client is one owner)
    return {
      client: { async quit() {
        await Promise.all([redisson, ...others].map((r) => r.quit()));
      } },
      make(key) {
        let r = redisson;
        if (wait) {
          r = new Redisson({
            redis: { options: { host: '127.0.0.1', port: Number(port) } },
          });
          others.push(r);
        }
        const lock = r.getLock(key);
        return {
          // waiting: without a bound (false), woken by its pub/sub; its
          // bounded wait (1.0.4) takes the time waited off its budget
          // again at each wake-up, and with 16 waiters gave up in a
          // fraction of its 10 s
          async acquire() {
            if (!(await lock.tryLock(wait ? false : 0, LEASE_MS,
                                     TimeUnit.MILLISECONDS)))
              throw new Error('not acquired');
          },
          release: () => lock.unlock(),
        };
      },
    };
  }
  throw new Error(`unknown peer ${name}`);
}

// the percentiles of "cdf_us" (dlock-bench --plot's curves)
const CDF_AT = [1, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75,
                80, 85, 90, 95, 99];

function pct(sorted, p) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// W6: 16 tasks take turns on one lock (1 ms holds, 1 ms outside); a
// hand-off counts when a task that was waiting gets the lock: the time
// from the release it waited for.
async function handoffs(p, end) {
  const hand = [], grants = [];
  let released = 0n;
  const run = async () => {
    const l = p.make(`bench:peer:${peer}:${process.pid}:w6`);
    while (process.hrtime.bigint() < end) {
      const call = process.hrtime.bigint();
      await l.acquire();
      const got = process.hrtime.bigint();
      grants.push(Number(got - call) / 1000);
      if (released > call) hand.push(Number(got - released) / 1000);
      await sleep(1);
      await l.release();
      released = process.hrtime.bigint();
      await sleep(1);
    }
  };
  const start = process.hrtime.bigint();
  await Promise.all(Array.from({ length: 16 }, () => run()));
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  grants.sort((a, b) => a - b);
  hand.sort((a, b) => a - b);
  return {
    peer, workload, pairs_per_s: grants.length / secs,
    pairs_total: grants.length,
    lock_p50_us: pct(grants, 50), lock_p99_us: pct(grants, 99),
    cdf_us: CDF_AT.map((q) => pct(grants, q)),
    handoff_p50_us: pct(hand, 50),
    handoff_cdf_us: CDF_AT.map((q) => pct(hand, q)),
  };
}

async function main() {
  const p = peerOf(peer, workload === 'W6');
  if (workload === 'W6') {
    const end = process.hrtime.bigint() + BigInt(Math.round(Number(seconds) * 1e9));
    process.stdout.write(JSON.stringify(await handoffs(p, end)) + '\n');
    await (p.client.quit ? p.client.quit() : p.client.disconnect());
    return;
  }
  const end = process.hrtime.bigint() + BigInt(Math.round(Number(seconds) * 1e9));
  const samples = [];
  let pairs = 0;
  const run = async (task) => {
    const locks = [];
    for (let i = 0; i < 32; i++)
      locks.push(p.make(`bench:peer:${peer}:${process.pid}:${task}:${i}`));
    for (let k = 0; process.hrtime.bigint() < end; k++) {
      const l = locks[k % 32];
      const t0 = process.hrtime.bigint();
      await l.acquire();
      if (task === 0) samples.push(Number(process.hrtime.bigint() - t0) / 1000);
      await l.release();
      pairs++;
    }
  };
  const start = process.hrtime.bigint();
  await Promise.all(Array.from({ length: tasks }, (_, t) => run(t)));
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  samples.sort((a, b) => a - b);
  process.stdout.write(JSON.stringify({
    peer, workload, pairs_per_s: pairs / secs, pairs_total: pairs,
    lock_p50_us: pct(samples, 50), lock_p99_us: pct(samples, 99),
    cdf_us: CDF_AT.map((p) => pct(samples, p)),
  }) + '\n');
  await (p.client.quit ? p.client.quit() : p.client.disconnect());
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`peers.js: ${peer} ${workload}: ${e && e.message}\n`);
    process.exit(1);
  });
