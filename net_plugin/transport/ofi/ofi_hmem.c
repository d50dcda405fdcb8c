/* What memory libfabric's provider takes (see ofi_hmem.h). */
#include "transport/ofi/ofi_hmem.h"

#include <stdio.h>

int braid_ofi_ptr_support(char *why, size_t whylen) {
  snprintf(why, whylen, "libfabric: host memory only");
  return 0;
}
