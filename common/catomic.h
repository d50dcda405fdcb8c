/* An atomic member in a header that the C++ tests include as well: _Atomic T in C, std::atomic<T>
 * in C++ (the same layout in GCC and Clang). */
#ifndef BRAID_CATOMIC_H
#define BRAID_CATOMIC_H

#ifdef __cplusplus
#include <atomic>
#define BRAID_ATOMIC(T) std::atomic<T>
#else
#include <stdatomic.h>
#define BRAID_ATOMIC(T) _Atomic(T)
#endif

#endif
