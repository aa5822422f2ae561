package dlock.peer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.ByteArrayCodec;
import org.redisson.client.codec.LongCodec;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * A real Redisson client the C interop suite drives (tests/interop/test_java.c).
 *
 * Started as {@code Peer URL WATCHDOG_MS [CODEC [URL2 URL3...]]}: URL is redis://host:port,
 * redis+cluster://h1:p1,h2:p2 or redis+sentinel://s1:p1,s2:p2/MASTER; WATCHDOG_MS is Redisson's
 * lockWatchdogTimeout (0: its default, 30 s), or WATCHDOG_MS,FAIR_MS with
 * its fairLockWaitTimeout too (the fair lock's thread wait time); CODEC the client's codec
 * (default: Redisson's; string, bytes, long: StringCodec, ByteArrayCodec,
 * LongCodec, and a group's values are given to it as String, byte[] (UTF-8)
 * or Long); URL2... more standalone servers, each a client of its own, for
 * RedLock (kind redlock: the lock NAME on URL and on each of them). It prints
 * {@code ready VERSION} once its client is up, then reads one request per
 * line on stdin:
 *
 *   ID SLOT VERB ARG...
 *
 * and answers each, when it is done, with one line {@code ID RESULT...}
 * ({@code ok}, {@code true}, {@code false}, a number, {@code token N},
 * {@code id X}, or {@code error CLASS: MESSAGE}). A slot is a thread of its
 * own (created on first use): Redisson's locks belong to a thread, so a
 * lock taken in slot a is released in slot a; requests of one slot run in
 * order, slots run at once. {@code exit} ends the program.
 *
 * Verbs (KIND: reentrant, fair, spin, fenced, read, write, nonreentrant,
 * nonreentrantfair (4.x), group (NAME is GROUP/v1,v2,... for
 * getMultiLock(GROUP, values)), multi (NAME is a,b,c: getMultiLock of
 * those locks), redlock (above); LEASE, WAIT in ms, -1: none):
 *   lock KIND NAME LEASE          lock(), lock(lease)
 *   trylock KIND NAME WAIT LEASE  tryLock (fenced: token N, or false)
 *   unlock KIND NAME              unlock()
 *   forceunlock KIND NAME         forceUnlock()
 *   held KIND NAME                isHeldByCurrentThread()
 *   locked KIND NAME              isLocked()
 *   enter KIND NAME WAIT LEASE    tryLock, then System.nanoTime() (CLOCK_MONOTONIC
 *                                 on Linux, the C side's clock): true|false NS
 *   leave KIND NAME               System.nanoTime(), then unlock(): ok NS
 *   owner                         this slot's owner in Redisson's hashes (ID:THREAD)
 *   latch.set NAME N | latch.down NAME | latch.await NAME WAIT | latch.count NAME
 *   sem.init NAME N | sem.add NAME N | sem.acquire NAME N WAIT
 *   sem.release NAME N | sem.available NAME
 *   psem.init NAME N | psem.set NAME N | psem.acquire NAME WAIT LEASE
 *   psem.release NAME ID
 *   psem.available NAME
 *   sleep MS
 */
public final class Peer {
  private static final PrintStream OUT =
      new PrintStream(System.out, true, StandardCharsets.UTF_8);
  private static RedissonClient client;
  private static String codec;
  private static final List<RedissonClient> others = new ArrayList<>();
  private static final Map<String, ExecutorService> SLOTS = new ConcurrentHashMap<>();

  private Peer() {}

  public static void main(String[] args) throws Exception {
    Config config = new Config();
    String url = args[0];
    if (url.startsWith("redis+sentinel://")) {
      /* redis+sentinel://s1:p1,s2:p2/MASTER */
      String rest = url.substring("redis+sentinel://".length());
      int slash = rest.indexOf('/');
      config.useSentinelServers().setMasterName(rest.substring(slash + 1))
          .setCheckSentinelsList(false);
      for (String n : rest.substring(0, slash).split(",")) {
        config.useSentinelServers().addSentinelAddress("redis://" + n);
      }
    } else if (url.startsWith("redis+cluster://")) {
      String[] nodes = url.substring("redis+cluster://".length()).split(",");
      List<String> addrs = new ArrayList<>();
      for (String n : nodes) {
        addrs.add("redis://" + n);
      }
      config.useClusterServers().addNodeAddress(addrs.toArray(new String[0]));
    } else {
      config.useSingleServer().setAddress(url);
    }
    String[] times = (args.length > 1 ? args[1] : "0").split(",");
    long watchdog = Long.parseLong(times[0]);
    if (watchdog > 0) {
      config.setLockWatchdogTimeout(watchdog);
    }
    if (times.length > 1) {
      config.setFairLockWaitTimeout(Long.parseLong(times[1]));
    }
    codec = args.length > 2 ? args[2] : "default";
    switch (codec) {
      case "string": config.setCodec(StringCodec.INSTANCE); break;
      case "bytes": config.setCodec(ByteArrayCodec.INSTANCE); break;
      case "long": config.setCodec(LongCodec.INSTANCE); break;
      default: break;
    }
    client = Redisson.create(config);
    for (int i = 3; i < args.length; i++) {
      Config more = new Config();
      more.useSingleServer().setAddress(args[i]);
      if (watchdog > 0) {
        more.setLockWatchdogTimeout(watchdog);
      }
      others.add(Redisson.create(more));
    }
    String version = Redisson.class.getPackage().getImplementationVersion();
    say("ready " + (version == null ? "?" : version));
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line; (line = in.readLine()) != null; ) {
      String[] w = line.trim().split(" ");
      if (w.length == 1 && w[0].equals("exit")) {
        break;
      }
      if (w.length < 3) {
        say("? error bad request: " + line);
        continue;
      }
      String id = w[0];
      String[] rest = Arrays.copyOfRange(w, 2, w.length);
      SLOTS.computeIfAbsent(w[1], s -> Executors.newSingleThreadExecutor())
          .submit(() -> say(id + " " + answer(rest)));
    }
    for (ExecutorService e : SLOTS.values()) {
      e.shutdownNow();
    }
    client.shutdown();
    for (RedissonClient o : others) {
      o.shutdown();
    }
    System.exit(0);
  }

  private static synchronized void say(String line) {
    OUT.println(line);
  }

  private static String answer(String[] w) {
    try {
      return run(w);
    } catch (Throwable t) {
      String m = String.valueOf(t.getMessage()).replace('\n', ' ');
      return "error " + t.getClass().getSimpleName() + ": " + m;
    }
  }

  private static long num(String s) {
    return Long.parseLong(s);
  }

  /** A 4.x-only getter (getNonReentrantLock, ...) by name, so one source builds on 3.x. */
  private static RLock byName(String getter, String name) throws Exception {
    Method m = RedissonClient.class.getMethod(getter, String.class);
    return (RLock) m.invoke(client, name);
  }

  private static RLock lock(String kind, String name) throws Exception {
    switch (kind) {
      case "reentrant": return client.getLock(name);
      case "fair": return client.getFairLock(name);
      case "spin": return client.getSpinLock(name);
      case "fenced": return client.getFencedLock(name);
      case "read": return client.getReadWriteLock(name).readLock();
      case "write": return client.getReadWriteLock(name).writeLock();
      case "nonreentrant": return byName("getNonReentrantLock", name);
      case "nonreentrantfair": return byName("getNonReentrantFairLock", name);
      case "group": {
        int slash = name.indexOf('/');
        List<Object> values = new ArrayList<>();
        for (String v : name.substring(slash + 1).split(",")) {
          values.add(codec.equals("bytes") ? v.getBytes(StandardCharsets.UTF_8)
                     : codec.equals("long") ? (Object) Long.valueOf(v) : v);
        }
        return client.getMultiLock(name.substring(0, slash), values);
      }
      case "multi": {
        List<RLock> ls = new ArrayList<>();
        for (String n : name.split(",")) {
          ls.add(client.getLock(n));
        }
        return client.getMultiLock(ls.toArray(new RLock[0]));
      }
      case "redlock": {
        List<RLock> ls = new ArrayList<>();
        ls.add(client.getLock(name));
        for (RedissonClient o : others) {
          ls.add(o.getLock(name));
        }
        return client.getRedLock(ls.toArray(new RLock[0]));
      }
      default: throw new IllegalArgumentException("unknown kind " + kind);
    }
  }

  private static String run(String[] w) throws Exception {
    String verb = w[0];
    switch (verb) {
      case "sleep":
        Thread.sleep(num(w[1]));
        return "ok";
      case "lock": {
        RLock l = lock(w[1], w[2]);
        long lease = num(w[3]);
        if (lease < 0) {
          l.lock();
        } else {
          l.lock(lease, TimeUnit.MILLISECONDS);
        }
        return "ok";
      }
      case "trylock": {
        RLock l = lock(w[1], w[2]);
        long wait = num(w[3]);
        long lease = num(w[4]);
        if (l instanceof RFencedLock) {
          Long t = ((RFencedLock) l).tryLockAndGetToken(wait, lease, TimeUnit.MILLISECONDS);
          return t == null ? "false" : "token " + t;
        }
        return String.valueOf(l.tryLock(wait, lease, TimeUnit.MILLISECONDS));
      }
      case "unlock":
        lock(w[1], w[2]).unlock();
        return "ok";
      case "forceunlock":
        return String.valueOf(lock(w[1], w[2]).forceUnlock());
      case "held":
        return String.valueOf(lock(w[1], w[2]).isHeldByCurrentThread());
      case "locked":
        return String.valueOf(lock(w[1], w[2]).isLocked());
      case "enter": {
        RLock l = lock(w[1], w[2]);
        boolean got = l.tryLock(num(w[3]), num(w[4]), TimeUnit.MILLISECONDS);
        return got + " " + System.nanoTime();
      }
      case "leave": {
        RLock l = lock(w[1], w[2]);
        long at = System.nanoTime();
        l.unlock();
        return "ok " + at;
      }
      case "owner":
        return client.getId() + ":" + Thread.currentThread().getId();
      default:
        return sync(w);
    }
  }

  private static String sync(String[] w) throws Exception {
    String verb = w[0];
    String name = w[1];
    if (verb.startsWith("latch.")) {
      RCountDownLatch l = client.getCountDownLatch(name);
      switch (verb) {
        case "latch.set": return String.valueOf(l.trySetCount(num(w[2])));
        case "latch.down": l.countDown(); return "ok";
        case "latch.await": return String.valueOf(l.await(num(w[2]), TimeUnit.MILLISECONDS));
        case "latch.count": return String.valueOf(l.getCount());
        default: break;
      }
    } else if (verb.startsWith("sem.")) {
      RSemaphore s = client.getSemaphore(name);
      switch (verb) {
        case "sem.init": return String.valueOf(s.trySetPermits((int) num(w[2])));
        case "sem.add": s.addPermits((int) num(w[2])); return "ok";
        case "sem.acquire":
          return String.valueOf(s.tryAcquire((int) num(w[2]), num(w[3]), TimeUnit.MILLISECONDS));
        case "sem.release": s.release((int) num(w[2])); return "ok";
        case "sem.available": return String.valueOf(s.availablePermits());
        default: break;
      }
    } else if (verb.startsWith("psem.")) {
      RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(name);
      switch (verb) {
        case "psem.init": return String.valueOf(s.trySetPermits((int) num(w[2])));
        case "psem.set": s.setPermits((int) num(w[2])); return "ok";
        case "psem.acquire": {
          String id = s.tryAcquire(num(w[2]), num(w[3]), TimeUnit.MILLISECONDS);
          return id == null ? "false" : "id " + id;
        }
        case "psem.release": s.release(w[2]); return "ok";
        case "psem.available": return String.valueOf(s.availablePermits());
        default: break;
      }
    }
    throw new IllegalArgumentException("unknown verb " + verb);
  }
}
