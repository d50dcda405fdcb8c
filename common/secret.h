/* Memory for a secret (braid-ps's token): pages of their own, left out of core dumps
 * (MADV_DONTDUMP) and, where the limits allow, out of swap (mlock), wiped when freed. */
#ifndef BRAID_SECRET_H
#define BRAID_SECRET_H

#include <stddef.h>

/* n bytes, zeroed; NULL when no memory. */
void *braid_secret_alloc(size_t n);
/* Wipes and frees what braid_secret_alloc(n) returned (NULL: nothing). */
void braid_secret_free(void *p, size_t n);

#endif
