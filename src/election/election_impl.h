/* What election.c (the kind, campaigns, proclamations) and observe.c (the
 * observers) share: the handle and the reading of a leader's state. */
#ifndef DLOCK_ELECTION_IMPL_H
#define DLOCK_ELECTION_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "dlock/election.h"
#include "lock/lock_impl.h"

struct dlock_election {
  dlock_lock base;          /* first: kind "election", bound to an owner id
                               of its own */
  dlock__buf token_key;     /* redisson_lock_token:{N}: the term counter */
  dlock__buf record;        /* dlock_election:{N} */
  dlock__buf channel;       /* dlock_election_channel:{N} */
  dlock__buf lock_channel;  /* redisson_lock__channel:{N} */
  dlock__buf unlock_prefix; /* redisson_unlock_latch:{N}: */
  pthread_mutex_t mu;       /* value */
  char *value;              /* the candidate's (a campaign's tries) */
  size_t value_len;
  _Atomic int campaigning;
  _Atomic int64_t term;     /* the term it was granted, 0 none */
  struct election_hub *hub; /* its observers' subscription (observe.c;
                               engine thread), NULL when none observes */
};

/* The state query (lua/election_state.lua) into req. */
int dlock__election_state_req(dlock_election *e, dlock__req *req);
/* Its reply into *out, the value a copy (free with dlock_leader_clear);
 * out->mine against e's owner. DLOCK_OK or an error. */
int dlock__election_state_read(dlock_election *e, const redisReply *r,
                               dlock_leader *out);

#endif /* DLOCK_ELECTION_IMPL_H */
