/* The grouped multi-lock (docs/group.md): its field names (HighwayHash
 * against the authors' golden values, Redisson's composition), its layout,
 * all or nothing, waiting, re-entry, the watchdog, async, many values, bad
 * input. Runs on one server, a cluster (group-cluster) and Valkey
 * (group-valkey). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/base.h"
#include "harness.h"
#include "multi/group.h"

static th_server srv;
static dlock_client *cl;

static int suite_init(void) { return th_suite_open(&srv, &cl); }
static int suite_clean(void) { return th_suite_close(&srv, cl); }

/* ---- field names ---------------------------------------------------------- */

/* The authors' golden values (google/highwayhash, highwayhash_test.cc:
 * "HighwayHash is frozen"): key 00 01 .. 1f, inputs 00, 00 01, ...; a few
 * of the 65 lengths of each, every code path among them (empty, under 4,
 * 4-15, 16-31 with the 16 branch, a whole packet, packets and a rest). */
static void test_highway_vectors(void) {
  static const uint64_t key[4] = {0x0706050403020100ull, 0x0F0E0D0C0B0A0908ull,
                                  0x1716151413121110ull, 0x1F1E1D1C1B1A1918ull};
  static const struct {
    size_t len;
    uint64_t h64, h128[2];
  } golden[] = {
      {0, 0x907A56DE22C26E53ull, {0x0FED268F9D8FFEC7ull, 0x33565E767F093E6Full}},
      {1, 0x7EAB43AAC7CDDD78ull, {0xD6B0A8893681E7A8ull, 0xDC291DF9EB9CDCB4ull}},
      {3, 0x5C6BEFAB8A463D80ull, {0x0607621B295F0BEBull, 0xBFE69A0FD9CEDD79ull}},
      {7, 0x4D02AE1738F59482ull, {0x2A401FCA697171B4ull, 0xBE1F03FF9F02796Cull}},
      {16, 0xCFAB3489F97EB832ull, {0x414460FFD5A401ADull, 0x029EA3D5019F18C8ull}},
      {21, 0x0264432CCD8A70E0ull, {0xF11621BD93F08A56ull, 0x3173C398163DD9D5ull}},
      {31, 0x9FC7007CCF035A68ull, {0x06E7B465E8A57C29ull, 0x52415E3A07F5D446ull}},
      {32, 0xA0C964D9ECD580FCull, {0x1984DF66C1434AAAull, 0x16FC1958F9B3E4B9ull}},
      {33, 0x2C90F73CA03181FCull, {0x111678AFE0C6C36Cull, 0xF958B59DE5A2849Dull}},
      {50, 0xA2A98FC534825EBEull, {0x2515D62B936AC64Cull, 0xCE088794D7088A7Dull}},
      {64, 0x75542C5D4CD2A6FFull, {0x98BB1F7198D4C4F2ull, 0xE0BC0571DE918FC8ull}},
  };
  unsigned char in[64];
  for (int i = 0; i < 64; i++)
    in[i] = (unsigned char)i;
  for (size_t k = 0; k < sizeof golden / sizeof golden[0]; k++) {
    uint64_t h[2];
    dlock__highway128(key, in, golden[k].len, h);
    CU_ASSERT_EQUAL(dlock__highway64(key, in, golden[k].len), golden[k].h64);
    CU_ASSERT(h[0] == golden[k].h128[0] && h[1] == golden[k].h128[1]);
    if (h[0] != golden[k].h128[0])
      fprintf(stderr, "\n  HighwayHash-128 of %zu bytes is wrong\n", golden[k].len);
  }
}

/* Redisson's composition (org.redisson.misc.Hash.hash128toBase64): the
 * 128-bit hash under its key, the two lanes big-endian, base64 (here
 * OpenSSL's, not dlock's) less its final "==". */
static void test_field_names(void) {
  static const uint64_t rkey[4] = {0x9e3779b97f4a7c15ull, 0xf39cc0605cedc834ull,
                                   0x1082276bf3a27251ull, 0xf86c6a11d0c18e95ull};
  const char *values[] = {"", "a", "Jack_001", "row:42", "0123456789abcdef"
                          "0123456789abcdef+tail"};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    uint64_t h[2];
    dlock__highway128(rkey, values[i], strlen(values[i]), h);
    unsigned char raw[16], b64[32];
    for (int b = 0; b < 8; b++) {
      raw[b] = (unsigned char)(h[0] >> (56 - 8 * b));
      raw[8 + b] = (unsigned char)(h[1] >> (56 - 8 * b));
    }
    CU_ASSERT_EQUAL(EVP_EncodeBlock(b64, raw, 16), 24);
    CU_ASSERT(b64[22] == '=' && b64[23] == '=');
    b64[22] = '\0';
    char field[DLOCK__GROUP_FIELD_LEN + 1];
    CU_ASSERT_EQUAL(dlock__group_field(values[i], strlen(values[i]), field), 22);
    CU_ASSERT_STRING_EQUAL(field, (char *)b64);
  }
}

/* ---- the lock ------------------------------------------------------------- */

static dlock_lock *group_of(dlock_client *c, const char *g,
                            const char *const *values, size_t n) {
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_group_lock_new(c, g, values, NULL, n, NULL, &l), DLOCK_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  return l;
}

static char *hget(th_server *node, const char *key, const char *field) {
  static char out[128];
  redisReply *r = th_cmd(node, "HGET %s %s", key, field);
  snprintf(out, sizeof out, "%s",
           r && r->type == REDIS_REPLY_STRING ? r->str : "(nil)");
  if (r)
    freeReplyObject(r);
  return out;
}

/* The fields Redisson's scripts read: F -> owner, F:owner:expire_time
 * (the server's now + lease), F:owner:lock_count; the hash's PTTL is the
 * lease. */
static void test_layout(void) {
  const char *g = th_name("group-layout");
  const char *values[] = {"Jack_001", "Mary_002", "Jack_001"};
  dlock_lock *l = group_of(cl, g, values, 3);
  CU_ASSERT_STRING_EQUAL(dlock_lock_kind(l), "group");
  th_server *node = th_node_of(&srv, g);
  TH_ASSERT_RC(dlock_acquire(l, 0, 10000), DLOCK_OK);
  char owner[96], f[DLOCK__GROUP_FIELD_LEN + 1], k[200];
  snprintf(owner, sizeof owner, "%s:%llu", dlock_client_id(cl),
           (unsigned long long)dlock_thread_id());
  CU_ASSERT_EQUAL(th_int(node, "HLEN %s", g), 6); /* two values, 3 each */
  for (int i = 0; i < 2; i++) {
    dlock__group_field(values[i], strlen(values[i]), f);
    CU_ASSERT_STRING_EQUAL(hget(node, g, f), owner);
    snprintf(k, sizeof k, "%s:%s:lock_count", f, owner);
    CU_ASSERT_STRING_EQUAL(hget(node, g, k), "1");
    snprintf(k, sizeof k, "%s:%s:expire_time", f, owner);
    long long exp = atoll(hget(node, g, k));
    redisReply *t = th_cmd(node, "TIME");
    long long now = atoll(t->element[0]->str) * 1000 +
                    atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    CU_ASSERT(exp > now + 9000 && exp <= now + 10000);
  }
  long long ttl = th_int(node, "PTTL %s", g);
  CU_ASSERT(ttl > 9000 && ttl <= 10000);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(node, "EXISTS %s", g), 0);
  dlock_lock_free(l);
}

/* Two owners, overlapping sets: the second takes nothing while one of its
 * values is held (none of its other values is written), waits, and is
 * woken by the release. */
static void test_all_or_nothing_and_waiting(void) {
  const char *g = th_name("group-all");
  const char *ab[] = {"a", "b"}, *bc[] = {"b", "c"}, *de[] = {"d", "e"};
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_lock *l1 = group_of(cl, g, ab, 2), *l2 = group_of(c2, g, bc, 2),
             *l3 = group_of(c2, g, de, 2);
  th_server *node = th_node_of(&srv, g);
  TH_ASSERT_RC(dlock_acquire(l1, 0, 30000), DLOCK_OK);
  long long before = th_int(node, "HLEN %s", g);
  TH_ASSERT_RC(th_acquire_elsewhere(l2, 0, 30000), DLOCK_EBUSY);
  CU_ASSERT_EQUAL(th_int(node, "HLEN %s", g), before); /* "c" not taken */
  TH_ASSERT_RC(th_acquire_elsewhere(l3, 0, 30000), DLOCK_OK); /* disjoint */
  th_acquirer w = {.lock = l2, .wait_ms = 10000, .lease_ms = 30000};
  th_acquirer_start(&w);
  char channel[200];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", g);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 5000));
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_release(l1), DLOCK_OK);
  th_acquirer_join(&w);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  TH_ASSERT_RC(w.release_rc, DLOCK_OK);
  CU_ASSERT(w.got_ms - t0 < 1000); /* woken, not at the lease's end */
  dlock_lock_free(l3);
  dlock_lock_free(l2);
  dlock_lock_free(l1);
  dlock_client_close(c2);
}

/* Re-entry counts per value; one owner's two sets of one group are two
 * holds. */
static void test_reentry_and_two_sets(void) {
  const char *g = th_name("group-reentry");
  const char *a[] = {"a"}, *b[] = {"b"};
  dlock_lock *la = group_of(cl, g, a, 1), *lb = group_of(cl, g, b, 1);
  th_server *node = th_node_of(&srv, g);
  TH_ASSERT_RC(dlock_acquire(la, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(la, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(lb, 0, 30000), DLOCK_OK);
  dlock_lock_state st;
  TH_ASSERT_RC(dlock_lock_state_get(la, &st), DLOCK_OK);
  CU_ASSERT(st.locked && st.held_by_me && st.hold_count == 2 && st.ttl_ms > 0);
  TH_ASSERT_RC(th_state_elsewhere(la, &st), DLOCK_OK);
  CU_ASSERT(st.locked && !st.held_by_me && st.hold_count == 0);
  TH_ASSERT_RC(dlock_release(la), DLOCK_OK);
  TH_ASSERT_RC(th_acquire_elsewhere(la, 0, 1000), DLOCK_EBUSY);
  TH_ASSERT_RC(dlock_release(la), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(la), DLOCK_ENOTOWNER);
  TH_ASSERT_RC(dlock_release(lb), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(node, "EXISTS %s", g), 0);
  dlock_lock_free(la);
  dlock_lock_free(lb);
}

/* The watchdog renews every value's expiry and the hash; a value taken
 * from under it is reported lost. */
static void test_watchdog(void) {
  th_lost_log log;
  dlock_client *c = th_watchdog_client(&srv, &log, 600);
  const char *g = th_name("group-watchdog");
  const char *v[] = {"x", "y"};
  dlock_lock *l = group_of(c, g, v, 2);
  TH_ASSERT_RC(dlock_acquire(l, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  CU_ASSERT_EQUAL(th_lost_wait(&log, 1, 1500), 0); /* renewed past 600 ms */
  dlock_lock_state st;
  TH_ASSERT_RC(dlock_lock_state_get(l, &st), DLOCK_OK);
  CU_ASSERT(st.held_by_me && st.ttl_ms > 0);
  char f[DLOCK__GROUP_FIELD_LEN + 1];
  dlock__group_field("y", 1, f);
  CU_ASSERT_EQUAL(th_int(th_node_of(&srv, g), "HSET %s %s someone-else", g, f), 0);
  CU_ASSERT_EQUAL(th_lost_wait(&log, 1, 2000), 1);
  TH_ASSERT_RC(dlock_release(l), DLOCK_ELOST);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* The async acquire waits on the group's channel without a thread. */
static void test_async(void) {
  const char *g = th_name("group-async");
  const char *v[] = {"p", "q"};
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_lock *l = group_of(cl, g, v, 2), *l2 = group_of(c2, g, v, 2);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  th_outcome got = TH_OUTCOME_INIT;
  uint64_t owner = dlock_owner_id_new();
  TH_ASSERT_RC(dlock_acquire_async(l2, owner, 10000, 30000, th_outcome_done,
                                   &got, NULL),
               DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  TH_ASSERT_RC(th_outcome_wait(&got, 10000), DLOCK_OK);
  TH_ASSERT_RC(dlock_lock_bind_owner(l2, owner), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l2), DLOCK_OK);
  dlock_lock_free(l2);
  dlock_lock_free(l);
  dlock_client_close(c2);
}

/* 5,000 values in one call, and a force release. */
static void test_many_values(void) {
  enum { N = 5000 };
  static char buf[N][16];
  static const char *values[N];
  for (int i = 0; i < N; i++) {
    snprintf(buf[i], sizeof buf[i], "row:%d", i);
    values[i] = buf[i];
  }
  const char *g = th_name("group-many");
  dlock_lock *l = group_of(cl, g, values, N);
  th_server *node = th_node_of(&srv, g);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(node, "HLEN %s", g), 3 * N);
  TH_ASSERT_RC(th_acquire_elsewhere(l, 0, 1000), DLOCK_EBUSY);
  int released = -1;
  TH_ASSERT_RC(dlock_force_release(l, &released), DLOCK_OK);
  CU_ASSERT_EQUAL(released, 1);
  CU_ASSERT_EQUAL(th_int(node, "EXISTS %s", g), 0);
  TH_ASSERT_RC(dlock_release(l), DLOCK_ELOST);
  dlock_lock_free(l);
}

static void test_bad_input(void) {
  dlock_lock *l = NULL;
  const char *v[] = {"a", NULL};
  TH_ASSERT_RC(dlock_group_lock_new(cl, "g", v, NULL, 0, NULL, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_group_lock_new(cl, "g", NULL, NULL, 1, NULL, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_group_lock_new(cl, "g", v, NULL, 2, NULL, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_group_lock_new(cl, "", v, NULL, 1, NULL, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_group_lock_new(NULL, "g", v, NULL, 1, NULL, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_group_lock_new(cl, "g", v, NULL, 1, NULL, NULL), DLOCK_EINVAL);
  CU_ASSERT_PTR_NULL(l);
  /* binary values with NUL bytes count by their length */
  const char *bin[] = {"a\0b", "a\0c"};
  size_t lens[] = {3, 3};
  const char *g = th_name("group-bin");
  TH_ASSERT_RC(dlock_group_lock_new(cl, g, bin, lens, 2, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(th_node_of(&srv, g), "HLEN %s", g), 6); /* two values */
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  /* WRONGTYPE: a string where the group should be; it survives */
  const char *s = th_name("group-string");
  freeReplyObject(th_cmd(th_node_of(&srv, s), "SET %s hello", s));
  TH_ASSERT_RC(dlock_group_lock_new(cl, s, v, NULL, 1, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_EKIND);
  redisReply *r = th_cmd(th_node_of(&srv, s), "GET %s", s);
  CU_ASSERT(r && r->type == REDIS_REPLY_STRING && strcmp(r->str, "hello") == 0);
  if (r)
    freeReplyObject(r);
  dlock_lock_free(l);
}

/* dlock_inspect and `dlock status`/`dlock list`: kind "group", one holder
 * per owner with the number of values it holds. */
static void test_inspect_status_list(void) {
  const char *g = th_name("group-inspect");
  const char *v[] = {"r1", "r2", "r3"}, *w[] = {"r4"};
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_lock *l = group_of(cl, g, v, 3), *l2 = group_of(c2, g, w, 1);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l2, 0, 30000), DLOCK_OK);
  dlock_inspection *in = NULL;
  TH_ASSERT_RC(dlock_inspect(cl, g, NULL, &in), DLOCK_OK);
  CU_ASSERT_FATAL(in != NULL);
  CU_ASSERT_STRING_EQUAL(in->kind, "group");
  CU_ASSERT_EQUAL(in->nholders, 2);
  int64_t counts = 0;
  for (size_t i = 0; i < in->nholders; i++)
    counts += in->holders[i].count * 10 + (strncmp(in->holders[i].owner,
                                                   dlock_client_id(cl), 8) == 0);
  CU_ASSERT_EQUAL(counts, 31 + 10); /* 3 values (ours), 1 value */
  dlock_inspection_free(in);
  char args[300], out[4096];
  setenv("DLOCK_REDIS_URL", srv.url, 1);
  snprintf(args, sizeof args, "status %s", g);
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "kind:    group"));
  snprintf(args, sizeof args, "list '%s'", g);
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "group"));
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l2), DLOCK_OK);
  dlock_lock_free(l2);
  dlock_lock_free(l);
  dlock_client_close(c2);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("group", suite_init, suite_clean);
  CU_add_test(s, "highway_vectors", test_highway_vectors);
  CU_add_test(s, "field_names", test_field_names);
  CU_add_test(s, "layout", test_layout);
  CU_add_test(s, "all_or_nothing_and_waiting", test_all_or_nothing_and_waiting);
  CU_add_test(s, "reentry_and_two_sets", test_reentry_and_two_sets);
  CU_add_test(s, "watchdog", test_watchdog);
  CU_add_test(s, "async", test_async);
  CU_add_test(s, "many_values", test_many_values);
  CU_add_test(s, "bad_input", test_bad_input);
  CU_add_test(s, "inspect_status_list", test_inspect_status_list);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
