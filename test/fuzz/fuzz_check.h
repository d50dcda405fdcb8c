/* CHECK(c): a fuzz target's invariant; when it does not hold, says which and aborts (libFuzzer
 * then keeps the input as a crash). */
#ifndef BRAID_FUZZ_CHECK_H
#define BRAID_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                                     \
  do {                                                                               \
    if (!(c)) {                                                                      \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);          \
      abort();                                                                       \
    }                                                                                \
  } while (0)

#endif
