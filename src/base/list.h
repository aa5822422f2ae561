/* Intrusive doubly linked lists of any struct: a list is its head (and,
 * for a queue, its tail) pointer of the struct's type, and each node names
 * its own prev and next fields. The arguments are evaluated more than
 * once: pass plain lvalues. Locking is the caller's. */
#ifndef DLOCK_BASE_LIST_H
#define DLOCK_BASE_LIST_H

/* A list with a head only: n goes first. */
#define DLOCK__LIST_PUSH(head, n, prev, next)                                 \
  do {                                                                         \
    (n)->prev = NULL;                                                          \
    (n)->next = (head);                                                        \
    if (head)                                                                  \
      (head)->prev = (n);                                                      \
    (head) = (n);                                                              \
  } while (0)

/* Take n out of a list with a head only. */
#define DLOCK__LIST_UNLINK(head, n, prev, next)                               \
  do {                                                                         \
    if ((n)->prev)                                                             \
      (n)->prev->next = (n)->next;                                             \
    else                                                                       \
      (head) = (n)->next;                                                      \
    if ((n)->next)                                                             \
      (n)->next->prev = (n)->prev;                                             \
    (n)->prev = (n)->next = NULL;                                              \
  } while (0)

/* A queue (head and tail): n goes last. */
#define DLOCK__LIST_APPEND(head, tail, n, prev, next)                         \
  do {                                                                         \
    (n)->next = NULL;                                                          \
    (n)->prev = (tail);                                                        \
    if (tail)                                                                  \
      (tail)->next = (n);                                                      \
    else                                                                       \
      (head) = (n);                                                            \
    (tail) = (n);                                                              \
  } while (0)

/* Take n out of a queue. */
#define DLOCK__LIST_REMOVE(head, tail, n, prev, next)                         \
  do {                                                                         \
    if ((n)->next == NULL)                                                     \
      (tail) = (n)->prev;                                                      \
    DLOCK__LIST_UNLINK(head, n, prev, next);                                   \
  } while (0)

#endif /* DLOCK_BASE_LIST_H */
