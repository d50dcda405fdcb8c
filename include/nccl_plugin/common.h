/*
 * braid: our own declarations of the types NCCL's plugin interfaces share.
 *
 * Written from the NCCL sources (src/include/nccl_common.h, nccl.h) of
 * NCCL 2.28.9, which is the library we target; later additions are marked.
 * Names and values are NCCL's, so plugin code written against NCCL's headers
 * compiles against these. Never include NCCL's own headers next to these.
 */
#ifndef BRAID_NCCL_PLUGIN_COMMON_H
#define BRAID_NCCL_PLUGIN_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Compile-time layout checks, usable from C11 and C++. */
#ifdef __cplusplus
#define BRAID_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define BRAID_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
#define BRAID_ASSERT_SIZE(type, size) \
  BRAID_STATIC_ASSERT(sizeof(type) == (size), "ABI: sizeof(" #type ") must be " #size)
#define BRAID_ASSERT_OFFSET(type, member, off) \
  BRAID_STATIC_ASSERT(offsetof(type, member) == (off), \
                      "ABI: offsetof(" #type ", " #member ") must be " #off)

#ifdef __cplusplus
extern "C" {
#endif

/* Return code of every plugin entry point (nccl.h). */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8 /* 2.30 inserts ncclTimeout = 8 and moves this to 9 */
} ncclResult_t;

/* Severity passed to the logger. */
typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

/* Subsystem bit flags; the logger takes them as an unsigned long. */
typedef enum {
  NCCL_INIT = 0x1,
  NCCL_COLL = 0x2,
  NCCL_P2P = 0x4,
  NCCL_SHM = 0x8,
  NCCL_NET = 0x10,
  NCCL_GRAPH = 0x20,
  NCCL_TUNING = 0x40,
  NCCL_ENV = 0x80,
  NCCL_ALLOC = 0x100,
  NCCL_CALL = 0x200,
  NCCL_PROXY = 0x400,
  NCCL_NVLS = 0x800,
  NCCL_BOOTSTRAP = 0x1000,
  NCCL_REG = 0x2000,
  NCCL_PROFILE = 0x4000,
  NCCL_RAS = 0x8000,
  NCCL_DESTROY = 0x10000,    /* 2.30 */
  NCCL_ALLOC_HOST = 0x20000, /* 2.30 */
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

/* printf-style logger NCCL hands to init. */
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags,
                                  const char* file, int line, const char* fmt, ...);

/* Values of the profiler callback's `type` argument. */
enum {
  ncclProfilerNetEventStart = 0,
  ncclProfilerNetEventStop = 1,
  ncclProfilerNetEventUpdate = 2,
  ncclProfilerNetEventUpdateAndStop = 3
};

/* Profiler hook NCCL hands to net init (net v10 and later). */
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* pHandle,
                                               int64_t pluginId, void* extData);

/* Element types (nccl.h); CollNet's reduceSupport is asked about all 12. */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Reduction ops (nccl.h). Values >= ncclNumOps are user-created; the
 * network sees Avg and PreMulSum as Sum. ncclMaxRedOp keeps the enum 4 bytes. */
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

/* Collective kinds (nccl_common.h). The tuner is asked only about 0..4. */
#define NCCL_NUM_FUNCTIONS 5
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  ncclFuncAlltoAll = 8,
  ncclFuncScatter = 9,
  ncclFuncGather = 10,
  ncclNumFuncs = 11 /* 2.30 adds AllGatherV..WaitSignal (11..14), NumFuncs 15 */
} ncclFunc_t;

/* Every enum above is passed by value across the ABI as a 4-byte int. */
BRAID_ASSERT_SIZE(ncclResult_t, 4);
BRAID_ASSERT_SIZE(ncclDebugLogLevel, 4);
BRAID_ASSERT_SIZE(ncclDebugLogSubSys, 4);
BRAID_ASSERT_SIZE(ncclDataType_t, 4);
BRAID_ASSERT_SIZE(ncclRedOp_t, 4);
BRAID_ASSERT_SIZE(ncclFunc_t, 4);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BRAID_NCCL_PLUGIN_COMMON_H */
