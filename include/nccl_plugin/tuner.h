/*
 * braid: our own declarations of NCCL's tuner plugin ABI, versions v1 to v6.
 *
 * Written from NCCL's sources: v1 as in 2.19.4 and 2.20.5 (the only version
 * they look up), v2..v5 as in 2.28.9 (the library we target, newest tuner
 * version v5), v6 as in 2.30.7. The checks at the end pin every
 * size and offset for LP64.
 *
 * A plugin exports the table as a data symbol with C linkage, e.g.
 *   const ncclTuner_v5_t ncclTunerPlugin_v5 = { ... };
 *
 * getCollInfo's collCostTable is declared float** but is really a flat
 * float[numAlgo][numProto]; index it through a cast:
 *   float (*table)[NCCL_NUM_PROTOCOLS] = (float (*)[NCCL_NUM_PROTOCOLS])collCostTable;
 */
#ifndef BRAID_NCCL_PLUGIN_TUNER_H
#define BRAID_NCCL_PLUGIN_TUNER_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Constants ---------------------------------------------------------- */

/* Algorithms (first index of the cost table). */
#define NCCL_ALGO_UNDEF (-1)
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_NUM_ALGORITHMS_V5 7
#define NCCL_NUM_ALGORITHMS NCCL_NUM_ALGORITHMS_V5

/* Protocols (second index of the cost table). */
#define NCCL_PROTO_UNDEF (-1)
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_NUM_PROTOCOLS_V5 3
#define NCCL_NUM_PROTOCOLS NCCL_NUM_PROTOCOLS_V5

/* Cost-table entry of an unavailable algorithm/protocol: leave it alone. */
#define NCCL_ALGO_PROTO_IGNORE (-1.0)

/* Hardware link kinds (first index of hwLatencies). */
#define NCCL_HW_NVLINK 0
#define NCCL_HW_PCI 1
#define NCCL_HW_NET 2
#define NCCL_NUM_HW_LINKS_V5 3
#define NCCL_NUM_HW_LINKS NCCL_NUM_HW_LINKS_V5

/* GPU generation indices of the bandwidth tables. */
#define NCCL_VOLTA_COMPCAP_IDX 0
#define NCCL_AMPERE_COMPCAP_IDX 1
#define NCCL_HOPPER_COMPCAP_IDX 2
#define NCCL_BLACKWELL_COMPCAP_IDX 3
#define NCCL_NUM_COMPCAPS_V5 4
#define NCCL_NUM_COMPCAPS NCCL_NUM_COMPCAPS_V5

/* Node-count scale indices of the bandwidth tables. */
#define NCCL_TUNING_SCALE_1NODE 0
#define NCCL_TUNING_SCALE_2NODES 1
#define NCCL_TUNING_SCALE_4NODES 2
#define NCCL_NUM_TUNING_SCALES_V5 3
#define NCCL_NUM_TUNING_SCALES NCCL_NUM_TUNING_SCALES_V5

/* ---- v1 (NCCL 2.19, 2.20): no context; init runs once per communicator and
 *          destroy once per communicator, on one process-wide table;
 *          getCollInfo returns the chosen algorithm and protocol directly and
 *          NCCL uses them unchecked (both must be set, else NCCL decides). */

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction);
  ncclResult_t (*getCollInfo)(ncclFunc_t collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int* algorithm, int* protocol,
                              int* nChannels);
  ncclResult_t (*destroy)(void);
} ncclTuner_v1_t;

/* ---- v2: init(nRanks, nNodes, logger, &context); getCollInfo returns the
 *          chosen algorithm and protocol directly. */

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes,
                              int collNetSupport, int nvlsSupport, int numPipeOps,
                              int* algorithm, int* protocol, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v2_t;

/* ---- v3: getCollInfo edits NCCL's cost table instead of choosing. */

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes,
                              int numPipeOps, float** collCostTable, int numAlgo,
                              int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v3_t;

/* ---- v4: getCollInfo gains regBuff. */

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes,
                              int numPipeOps, float** collCostTable, int numAlgo,
                              int numProto, int regBuff, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v4_t;

/* ---- v5 (2.28): init takes the context first, a comm id, the NVLink domain
 *          shape and NCCL's model constants (in/out: pre-filled with NCCL's
 *          defaults, edits feed NCCL's own model); destroy becomes finalize. */

typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

/* Latencies in microseconds, bandwidths in GB/s. All seven arrays are part of
 * the ABI (NCCL's example header for plugin authors omits the last one). */
typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double llMaxBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                       ncclTunerConstants_v5_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes,
                              int numPipeOps, float** collCostTable, int numAlgo,
                              int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* context);
} ncclTuner_v5_t;

/* ---- v6 (2.30): appends optional getChunkSize (may be NULL). */

typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;
typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v6_t* nvlDomainInfo,
                       ncclTunerConstants_v6_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes,
                              int numPipeOps, float** collCostTable, int numAlgo,
                              int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* context);
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algo,
                               int proto, int nChannels, size_t* chunkSize);
} ncclTuner_v6_t;

/* ---- Unversioned names: the newest version NCCL 2.28.9 loads. ----------- */
typedef ncclTuner_v5_t ncclTuner_t;
typedef ncclTunerConstants_v5_t ncclTunerConstants_t;
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_t;
#define NCCL_TUNER_PLUGIN_SYMBOL "ncclTunerPlugin_v5"

/* ---- LP64 layout checks (values from NCCL's own headers) ---------------- */
#if defined(__LP64__)
BRAID_ASSERT_SIZE(ncclTuner_v1_t, 32);
BRAID_ASSERT_OFFSET(ncclTuner_v1_t, getCollInfo, 16);
BRAID_ASSERT_SIZE(ncclTuner_v2_t, 32);
BRAID_ASSERT_OFFSET(ncclTuner_v2_t, name, 0);
BRAID_ASSERT_OFFSET(ncclTuner_v2_t, init, 8);
BRAID_ASSERT_OFFSET(ncclTuner_v2_t, getCollInfo, 16);
BRAID_ASSERT_OFFSET(ncclTuner_v2_t, destroy, 24);

BRAID_ASSERT_SIZE(ncclTuner_v3_t, 32);
BRAID_ASSERT_OFFSET(ncclTuner_v3_t, name, 0);
BRAID_ASSERT_OFFSET(ncclTuner_v3_t, init, 8);
BRAID_ASSERT_OFFSET(ncclTuner_v3_t, getCollInfo, 16);
BRAID_ASSERT_OFFSET(ncclTuner_v3_t, destroy, 24);

BRAID_ASSERT_SIZE(ncclTuner_v4_t, 32);
BRAID_ASSERT_OFFSET(ncclTuner_v4_t, name, 0);
BRAID_ASSERT_OFFSET(ncclTuner_v4_t, init, 8);
BRAID_ASSERT_OFFSET(ncclTuner_v4_t, getCollInfo, 16);
BRAID_ASSERT_OFFSET(ncclTuner_v4_t, destroy, 24);

BRAID_ASSERT_SIZE(ncclNvlDomainInfo_v5_t, 12);
BRAID_ASSERT_OFFSET(ncclNvlDomainInfo_v5_t, nNvlDomains, 0);
BRAID_ASSERT_OFFSET(ncclNvlDomainInfo_v5_t, minRanksPerNvlDomain, 4);
BRAID_ASSERT_OFFSET(ncclNvlDomainInfo_v5_t, maxRanksPerNvlDomain, 8);

BRAID_ASSERT_SIZE(ncclTunerConstants_v5_t, 1152);
BRAID_ASSERT_OFFSET(ncclTunerConstants_v5_t, baseLatencies, 0);
BRAID_ASSERT_OFFSET(ncclTunerConstants_v5_t, hwLatencies, 168);
BRAID_ASSERT_OFFSET(ncclTunerConstants_v5_t, llMaxBws, 672);
BRAID_ASSERT_OFFSET(ncclTunerConstants_v5_t, perChMaxRingLL128Bws, 768);
BRAID_ASSERT_OFFSET(ncclTunerConstants_v5_t, perChMaxTreeLL128Bws, 864);
BRAID_ASSERT_OFFSET(ncclTunerConstants_v5_t, perChMaxTreeBws, 960);
BRAID_ASSERT_OFFSET(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws, 1056);

BRAID_ASSERT_SIZE(ncclTuner_v5_t, 32);
BRAID_ASSERT_OFFSET(ncclTuner_v5_t, name, 0);
BRAID_ASSERT_OFFSET(ncclTuner_v5_t, init, 8);
BRAID_ASSERT_OFFSET(ncclTuner_v5_t, getCollInfo, 16);
BRAID_ASSERT_OFFSET(ncclTuner_v5_t, finalize, 24);

BRAID_ASSERT_SIZE(ncclTuner_v6_t, 40);
BRAID_ASSERT_OFFSET(ncclTuner_v6_t, name, 0);
BRAID_ASSERT_OFFSET(ncclTuner_v6_t, init, 8);
BRAID_ASSERT_OFFSET(ncclTuner_v6_t, getCollInfo, 16);
BRAID_ASSERT_OFFSET(ncclTuner_v6_t, finalize, 24);
BRAID_ASSERT_OFFSET(ncclTuner_v6_t, getChunkSize, 32);
#endif /* __LP64__ */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BRAID_NCCL_PLUGIN_TUNER_H */
