package dlock.peer;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * dlock-bench's Java peer: Redisson's lock with its default configuration
 * and connection pool, on the same redis-server as dlock's run (bench/locks.c
 * runs it with --peers).
 *
 *   Bench PORT WORKLOAD SECONDS
 *     W1  one thread, lock + unlock pairs over 32 names in turn
 *     W2  16 threads at once, each over 32 names of its own
 *     W6  16 threads take turns on one fair lock (1 ms holds, 1 ms outside),
 *         as dlock-bench's W6 does on its own
 *
 * Each runs once for 3 s first (the JIT's warm-up, not counted; at most 5
 * x SECONDS), then for SECONDS. Prints one JSON line as bench/peers/peers.js does: {"peer",
 * "version", "workload", "pairs_per_s", "pairs_total" (both rounds' pairs:
 * dlock-bench divides the server's CPU over the whole run by it),
 * "lock_p50_us", "lock_p99_us", "cdf_us"}, and for W6 "handoff_p50_us" and
 * "handoff_cdf_us".
 */
public final class Bench {
  private static final double[] CDF_AT = {1, 5, 10, 15, 20, 25, 30, 35, 40, 45,
      50, 55, 60, 65, 70, 75, 80, 85, 90, 95, 99};

  /* The warm-up round: long enough for C2 to compile the lock paths on two
   * busy cores (1 s gave W2 3,300-4,000 pairs/s, 3 s 4,400-4,900); a short
   * run (the suite's smoke) warms five times its length at most */
  private static final long WARM_MS = 3000;

  private Bench() {}

  private static double pct(List<Long> v, double p) {
    if (v.isEmpty()) {
      return 0;
    }
    long[] s = v.stream().mapToLong(Long::longValue).toArray();
    Arrays.sort(s);
    return s[Math.min(s.length - 1, (int) (s.length * p / 100))];
  }

  private static String cdf(List<Long> v) {
    StringBuilder b = new StringBuilder("[");
    for (int i = 0; i < CDF_AT.length; i++) {
      b.append(i > 0 ? "," : "").append(pct(v, CDF_AT[i]));
    }
    return b.append("]").toString();
  }

  /** Run tasks threads of job for ms; the seconds they ran. */
  private static double run(int tasks, long ms, AtomicBoolean stop, Runnable job)
      throws InterruptedException {
    List<Thread> ts = new ArrayList<>();
    long t0 = System.nanoTime();
    for (int i = 0; i < tasks; i++) {
      Thread t = new Thread(job);
      ts.add(t);
      t.start();
    }
    Thread.sleep(ms);
    stop.set(true);
    for (Thread t : ts) {
      t.join();
    }
    return (System.nanoTime() - t0) / 1e9;
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: Bench PORT W1|W2|W6 SECONDS");
      System.exit(2);
    }
    Config config = new Config();
    config.useSingleServer().setAddress("redis://127.0.0.1:" + args[0]);
    RedissonClient client = Redisson.create(config);
    String w = args[1];
    long ms = (long) (Double.parseDouble(args[2]) * 1000);
    long warm = Math.min(WARM_MS, 5 * ms);
    double rate = 0;
    long all = 0; /* every pair (W6: grant) of both rounds */
    List<Long> lat = new ArrayList<>();
    List<Long> hand = new ArrayList<>();
    for (int round = 0; round < 2; round++) { /* the first warms the JIT */
      lat.clear();
      hand.clear();
      AtomicBoolean stop = new AtomicBoolean();
      AtomicLong total = new AtomicLong();
      double secs;
      if (w.equals("W6")) {
        RLock l = client.getFairLock("bench:java:w6");
        AtomicLong released = new AtomicLong();
        secs = run(16, round == 0 ? warm : ms, stop, () -> {
          while (!stop.get()) {
            long call = System.nanoTime();
            try {
              if (!l.tryLock(10, 30, TimeUnit.SECONDS)) {
                continue;
              }
            } catch (InterruptedException e) {
              return;
            }
            long got = System.nanoTime();
            synchronized (lat) {
              lat.add((got - call) / 1000);
              if (released.get() > call) {
                hand.add((got - released.get()) / 1000);
              }
            }
            total.incrementAndGet();
            for (long end = System.nanoTime() + 1_000_000; System.nanoTime() < end; ) {
              Thread.onSpinWait(); // hold 1 ms
            }
            l.unlock();
            released.set(System.nanoTime());
            try {
              Thread.sleep(1);
            } catch (InterruptedException e) {
              return;
            }
          }
        });
      } else {
        int tasks = w.equals("W2") ? 16 : 1;
        AtomicLong ids = new AtomicLong();
        secs = run(tasks, round == 0 ? warm : ms, stop, () -> {
          long me = ids.getAndIncrement();
          RLock[] ls = new RLock[32];
          for (int k = 0; k < 32; k++) {
            ls[k] = client.getLock("bench:java:" + me + ":" + k);
          }
          long n = 0;
          while (!stop.get()) {
            RLock l = ls[(int) (n % 32)];
            long t0 = System.nanoTime();
            if (!l.tryLock()) {
              throw new IllegalStateException("not acquired");
            }
            if (me == 0) {
              synchronized (lat) {
                lat.add((System.nanoTime() - t0) / 1000);
              }
            }
            l.unlock();
            n++;
          }
          total.addAndGet(n);
        });
      }
      rate = total.get() / secs;
      all += total.get();
    }
    String version = Redisson.class.getPackage().getImplementationVersion();
    StringBuilder out = new StringBuilder();
    out.append("{\"peer\":\"redisson\",\"version\":\"").append(version)
        .append("\",\"workload\":\"").append(w).append("\",\"pairs_per_s\":").append(rate)
        .append(",\"pairs_total\":").append(all)
        .append(",\"lock_p50_us\":").append(pct(lat, 50))
        .append(",\"lock_p99_us\":").append(pct(lat, 99))
        .append(",\"cdf_us\":").append(cdf(lat));
    if (w.equals("W6")) {
      out.append(",\"handoff_p50_us\":").append(pct(hand, 50))
          .append(",\"handoff_cdf_us\":").append(cdf(hand));
    }
    System.out.println(out.append("}"));
    client.shutdown();
    System.exit(0);
  }
}
