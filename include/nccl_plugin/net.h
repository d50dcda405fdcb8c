/*
 * braid: our own declarations of NCCL's net and CollNet plugin ABI,
 * versions v7 to v12.
 *
 * Written from NCCL's sources: v7..v11 as in 2.28.9 (the library we target,
 * newest net version v11), v12 as in 2.30.7. The struct and function-table
 * layouts must match NCCL's bit for bit; the checks after each version pin
 * every size and offset for LP64.
 *
 * A plugin exports the table as a data symbol with C linkage, e.g.
 *   const ncclNet_v11_t ncclNetPlugin_v11 = { ... };
 *   const ncclCollNet_v11_t ncclCollNetPlugin_v11 = { ... };
 */
#ifndef BRAID_NCCL_PLUGIN_NET_H
#define BRAID_NCCL_PLUGIN_NET_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Constants ---------------------------------------------------------- */

/* Bytes of the listen/connect handle buffer NCCL provides. */
#define NCCL_NET_HANDLE_MAXSIZE 128

/* Memory kinds for ptrSupport (bit mask) and the regMr `type` argument. */
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

/* Requests in flight per comm object. */
#define NCCL_NET_MAX_REQUESTS 32

/* Physical devices per virtual NIC: 4 up to v11, 8 in v12 (2.30). */
#define NCCL_NET_MAX_DEVS_PER_NIC 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V11 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8

/* Upper bound (1 TiB) NCCL accepts for maxP2pBytes and maxCollBytes. */
#define NCCL_MAX_NET_SIZE_BYTES (1024L * 1024L * 1024L * 1024L)
/* Defaults NCCL's compatibility layers assume for plugins without max*Bytes. */
#ifndef MAX_NET_SIZE
#define MAX_NET_SIZE (1024L * 1024L * 1024L)
#endif
#ifndef MAX_COLLNET_SIZE
#define MAX_COLLNET_SIZE (512L * 1024L * 1024L)
#endif

/* Hint NCCL stores in *request before irecv: completion may be reported early. */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_NET_MULTI_REQUEST 0x2 /* defined, unused by core in 2.28 */

/* Net plugin slots per process (2 reserved for the built-in IB and Socket). */
#ifndef NCCL_NET_MAX_PLUGINS
#define NCCL_NET_MAX_PLUGINS 16
#endif

/* "Not set" markers: comm config trafficClass, attr fields, v12 railId/planeId. */
#define NCCL_NET_TRAFFIC_CLASS_UNDEF (-1)
#define NCCL_NET_ATTR_UNDEF (-1)
#define NCCL_NET_ID_UNDEF (-1)

/* Used by GIN (GPU-initiated networking) plugins only. */
#define NCCL_NET_MR_FLAG_FORCE_SO (1 << 0)
#define NCCL_NET_SIGNAL_OP_INC 0x1
#define NCCL_NET_SIGNAL_OP_ADD 0x2

/* Device offload (nccl_device/net_device.h). NCCL accepts HOST, or UNPACK
 * with netDeviceVersion == NCCL_NET_DEVICE_UNPACK_VERSION. */
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
#define NCCL_NET_MTU_SIZE 4096
#define NCCL_NET_DEVICE_UNPACK_VERSION 0x7

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2,
  NCCL_NET_DEVICE_GIN_GDAKI = 3,
  NCCL_NET_DEVICE_GIN_GPI = 4 /* 2.30 */
} ncclNetDeviceType;

/* Device-offload handle returned through connect/accept. Unchanged since v7. */
typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v11_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v12_t;

BRAID_ASSERT_SIZE(ncclNetDeviceType, 4);

/* ---- v7: adds device offload (netDeviceType/Version, devComm arguments,
 *          getDeviceMr, irecvConsumed). Sizes are int; net regMr takes int. */

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v7_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v7_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v7_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v7_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags,
                        void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v7_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v7_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  ncclResult_t (*regMr)(void* collComm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, int count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
} ncclCollNet_v7_t;

/* ---- v8: props gain regIsGlobal; regMr takes size_t; CollNet gains
 *          iallgather/ireducescatter with a 32-bit-size SGE. */

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v8_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v8_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags,
                        void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

typedef struct {
  void* mhandle;
  void* address;
  uint32_t size;
} ncclNetSGE_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  ncclResult_t (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, int count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,
                             ncclNetSGE_v8_t* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void* sendMhandle,
                             void** request);
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v8_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType,
                                 ncclRedOp_t redOp, void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
} ncclCollNet_v8_t;

/* ---- v9: props gain forceFlush, vProps, maxP2pBytes/maxCollBytes; isend and
 *          irecv sizes become size_t; CollNet count and SGE size become size_t;
 *          makeVDevice appended to both tables. */

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V11];
} ncclNetVDeviceProps_v9_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v9_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v9_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v9_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclNet_v9_t;

typedef struct {
  void* mhandle;
  void* address;
  size_t size;
} ncclNetSGE_v9_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  ncclResult_t (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, size_t count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,
                             ncclNetSGE_v9_t* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void* sendMhandle,
                             void** request);
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v9_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType,
                                 ncclRedOp_t redOp, void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclCollNet_v9_t;

/* ---- v10: net init gains the profiler callback; connect gains a comm
 *           config (traffic class); isend/irecv gain profiler handles.
 *           Props and CollNet are as in v9 (with _v10 names). */

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V11];
} ncclNetVDeviceProps_v10_t;

typedef struct {
  int trafficClass; /* NCCL_NET_TRAFFIC_CLASS_UNDEF unless the app set one */
} ncclNetCommConfig_v10_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v10_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v10_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t* config, void* handle,
                          void** sendComm, ncclNetDeviceHandle_v10_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v10_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v10_t* props);
} ncclNet_v10_t;

typedef struct {
  void* mhandle;
  void* address;
  size_t size;
} ncclNetSGE_v10_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  ncclResult_t (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, size_t count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,
                             ncclNetSGE_v10_t* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void* sendMhandle,
                             void** request);
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v10_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType,
                                 ncclRedOp_t redOp, void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v10_t* props);
} ncclCollNet_v10_t;

/* ---- v11 (2.28): init/finalize are per communicator and return a context
 *           that listen/connect/setNetAttr take; the comm config moves from
 *           connect to init; props gain maxMultiRequestSize; finalize and
 *           setNetAttr appended. CollNet gains ctx in init/listen + finalize
 *           (its connect still has no ctx). */

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V11];
} ncclNetVDeviceProps_v11_t;

typedef struct {
  int trafficClass;
} ncclNetCommConfig_v11_t;

typedef struct {
  char* name;                /* unique and stable: NCCL's topology key */
  char* pciPath;             /* /sys PCI device path; NULL for virtual NICs */
  uint64_t guid;
  int ptrSupport;            /* NCCL_PTR_* bit mask */
  int regIsGlobal;
  int forceFlush;
  int speed;                 /* Mbps */
  int port;
  float latency;             /* microseconds */
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v11_t vProps;
  size_t maxP2pBytes;        /* must be in (0, NCCL_MAX_NET_SIZE_BYTES] */
  size_t maxCollBytes;       /* likewise */
  int maxMultiRequestSize;
} ncclNetProperties_v11_t;

/* Per-direction hints of setNetAttr; every field may be NCCL_NET_ATTR_UNDEF. */
typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

/* op/algo/proto are bit masks: 1 << ncclFunc_t, NCCL_ALGO_*, NCCL_PROTO_*. */
typedef struct {
  ncclNetCommAttr_v11_t sendCommAttr;
  ncclNetCommAttr_v11_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} ncclNetAttr_v11_t;

/* Initializer for ncclNetAttr_v11_t / _v12_t with every field unset. */
#define NCCL_NET_ATTR_INIT                                                      \
  {                                                                             \
    {NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF,             \
     NCCL_NET_ATTR_UNDEF},                                                      \
    {NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF,             \
     NCCL_NET_ATTR_UNDEF},                                                      \
    (uint32_t)NCCL_NET_ATTR_UNDEF, (uint32_t)NCCL_NET_ATTR_UNDEF,               \
    (uint32_t)NCCL_NET_ATTR_UNDEF                                               \
  }

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v11_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v11_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v11_t* netAttr);
} ncclNet_v11_t;

typedef struct {
  void* mhandle;
  void* address;
  size_t size;
} ncclNetSGE_v11_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  ncclResult_t (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, size_t count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,
                             ncclNetSGE_v11_t* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void* sendMhandle,
                             void** request);
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v11_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType,
                                 ncclRedOp_t redOp, void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  ncclResult_t (*finalize)(void* ctx);
} ncclCollNet_v11_t;

/* ---- v12 (2.30): vProps holds up to 8 devices; props gain railId and
 *           planeId (NCCL_NET_ID_UNDEF when unknown). Tables as in v11. */

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef struct {
  int trafficClass;
} ncclNetCommConfig_v12_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
} ncclNetProperties_v12_t;

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v12_t;

typedef struct {
  ncclNetCommAttr_v12_t sendCommAttr;
  ncclNetCommAttr_v12_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} ncclNetAttr_v12_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v12_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v12_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v12_t* netAttr);
} ncclNet_v12_t;

typedef struct {
  void* mhandle;
  void* address;
  size_t size;
} ncclNetSGE_v12_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  ncclResult_t (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type,
                              uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, size_t count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,
                             ncclNetSGE_v12_t* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void* sendMhandle,
                             void** request);
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v12_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType,
                                 ncclRedOp_t redOp, void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
  ncclResult_t (*finalize)(void* ctx);
} ncclCollNet_v12_t;

/* ---- Unversioned names: the newest versions NCCL 2.28.9 loads. ---------- */
typedef ncclNet_v11_t ncclNet_t;
typedef ncclCollNet_v11_t ncclCollNet_t;
typedef ncclNetProperties_v11_t ncclNetProperties_t;
typedef ncclNetVDeviceProps_v11_t ncclNetVDeviceProps_t;
typedef ncclNetCommConfig_v11_t ncclNetCommConfig_t;
typedef ncclNetAttr_v11_t ncclNetAttr_t;
typedef ncclNetSGE_v11_t ncclNetSGE_t;
typedef ncclNetDeviceHandle_v11_t ncclNetDeviceHandle_t;
#define NCCL_NET_PLUGIN_SYMBOL ncclNetPlugin_v11
#define NCCL_COLLNET_PLUGIN_SYMBOL ncclCollNetPlugin_v11

/* ---- LP64 layout checks (values from NCCL's own headers) ---------------- */
#if defined(__LP64__)
BRAID_ASSERT_SIZE(ncclNetDeviceHandle_v7_t, 32);
BRAID_ASSERT_OFFSET(ncclNetDeviceHandle_v7_t, netDeviceType, 0);
BRAID_ASSERT_OFFSET(ncclNetDeviceHandle_v7_t, netDeviceVersion, 4);
BRAID_ASSERT_OFFSET(ncclNetDeviceHandle_v7_t, handle, 8);
BRAID_ASSERT_OFFSET(ncclNetDeviceHandle_v7_t, size, 16);
BRAID_ASSERT_OFFSET(ncclNetDeviceHandle_v7_t, needsProxyProgress, 24);

BRAID_ASSERT_SIZE(ncclNetProperties_v7_t, 56);
BRAID_ASSERT_OFFSET(ncclNetProperties_v7_t, name, 0);
BRAID_ASSERT_OFFSET(ncclNetProperties_v7_t, pciPath, 8);
BRAID_ASSERT_OFFSET(ncclNetProperties_v7_t, guid, 16);
BRAID_ASSERT_OFFSET(ncclNetProperties_v7_t, ptrSupport, 24);
BRAID_ASSERT_OFFSET(ncclNetProperties_v7_t, speed, 28);
BRAID_ASSERT_OFFSET(ncclNetProperties_v7_t, port, 32);
BRAID_ASSERT_OFFSET(ncclNetProperties_v7_t, latency, 36);
BRAID_ASSERT_OFFSET(ncclNetProperties_v7_t, maxComms, 40);
BRAID_ASSERT_OFFSET(ncclNetProperties_v7_t, maxRecvs, 44);
BRAID_ASSERT_OFFSET(ncclNetProperties_v7_t, netDeviceType, 48);
BRAID_ASSERT_OFFSET(ncclNetProperties_v7_t, netDeviceVersion, 52);

BRAID_ASSERT_SIZE(ncclNet_v7_t, 152);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, name, 0);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, init, 8);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, devices, 16);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, getProperties, 24);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, listen, 32);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, connect, 40);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, accept, 48);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, regMr, 56);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, regMrDmaBuf, 64);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, deregMr, 72);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, isend, 80);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, irecv, 88);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, iflush, 96);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, test, 104);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, closeSend, 112);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, closeRecv, 120);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, closeListen, 128);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, getDeviceMr, 136);
BRAID_ASSERT_OFFSET(ncclNet_v7_t, irecvConsumed, 144);

BRAID_ASSERT_SIZE(ncclCollNet_v7_t, 120);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, name, 0);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, init, 8);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, devices, 16);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, getProperties, 24);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, listen, 32);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, connect, 40);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, reduceSupport, 48);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, regMr, 56);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, regMrDmaBuf, 64);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, deregMr, 72);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, iallreduce, 80);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, iflush, 88);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, test, 96);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, closeColl, 104);
BRAID_ASSERT_OFFSET(ncclCollNet_v7_t, closeListen, 112);

BRAID_ASSERT_SIZE(ncclNetProperties_v8_t, 64);
BRAID_ASSERT_OFFSET(ncclNetProperties_v8_t, name, 0);
BRAID_ASSERT_OFFSET(ncclNetProperties_v8_t, pciPath, 8);
BRAID_ASSERT_OFFSET(ncclNetProperties_v8_t, guid, 16);
BRAID_ASSERT_OFFSET(ncclNetProperties_v8_t, ptrSupport, 24);
BRAID_ASSERT_OFFSET(ncclNetProperties_v8_t, regIsGlobal, 28);
BRAID_ASSERT_OFFSET(ncclNetProperties_v8_t, speed, 32);
BRAID_ASSERT_OFFSET(ncclNetProperties_v8_t, port, 36);
BRAID_ASSERT_OFFSET(ncclNetProperties_v8_t, latency, 40);
BRAID_ASSERT_OFFSET(ncclNetProperties_v8_t, maxComms, 44);
BRAID_ASSERT_OFFSET(ncclNetProperties_v8_t, maxRecvs, 48);
BRAID_ASSERT_OFFSET(ncclNetProperties_v8_t, netDeviceType, 52);
BRAID_ASSERT_OFFSET(ncclNetProperties_v8_t, netDeviceVersion, 56);

BRAID_ASSERT_SIZE(ncclNet_v8_t, 152);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, name, 0);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, init, 8);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, devices, 16);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, getProperties, 24);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, listen, 32);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, connect, 40);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, accept, 48);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, regMr, 56);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, regMrDmaBuf, 64);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, deregMr, 72);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, isend, 80);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, irecv, 88);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, iflush, 96);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, test, 104);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, closeSend, 112);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, closeRecv, 120);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, closeListen, 128);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, getDeviceMr, 136);
BRAID_ASSERT_OFFSET(ncclNet_v8_t, irecvConsumed, 144);

BRAID_ASSERT_SIZE(ncclNetSGE_v8_t, 24);
BRAID_ASSERT_OFFSET(ncclNetSGE_v8_t, mhandle, 0);
BRAID_ASSERT_OFFSET(ncclNetSGE_v8_t, address, 8);
BRAID_ASSERT_OFFSET(ncclNetSGE_v8_t, size, 16);

BRAID_ASSERT_SIZE(ncclCollNet_v8_t, 136);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, name, 0);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, init, 8);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, devices, 16);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, getProperties, 24);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, listen, 32);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, connect, 40);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, reduceSupport, 48);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, regMr, 56);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, regMrDmaBuf, 64);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, deregMr, 72);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, iallreduce, 80);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, iallgather, 88);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, ireducescatter, 96);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, iflush, 104);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, test, 112);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, closeColl, 120);
BRAID_ASSERT_OFFSET(ncclCollNet_v8_t, closeListen, 128);

BRAID_ASSERT_SIZE(ncclNetVDeviceProps_v9_t, 20);
BRAID_ASSERT_OFFSET(ncclNetVDeviceProps_v9_t, ndevs, 0);
BRAID_ASSERT_OFFSET(ncclNetVDeviceProps_v9_t, devs, 4);

BRAID_ASSERT_SIZE(ncclNetProperties_v9_t, 104);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, name, 0);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, pciPath, 8);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, guid, 16);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, ptrSupport, 24);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, regIsGlobal, 28);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, forceFlush, 32);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, speed, 36);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, port, 40);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, latency, 44);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, maxComms, 48);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, maxRecvs, 52);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, netDeviceType, 56);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, netDeviceVersion, 60);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, vProps, 64);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, maxP2pBytes, 88);
BRAID_ASSERT_OFFSET(ncclNetProperties_v9_t, maxCollBytes, 96);

BRAID_ASSERT_SIZE(ncclNet_v9_t, 160);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, name, 0);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, init, 8);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, devices, 16);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, getProperties, 24);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, listen, 32);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, connect, 40);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, accept, 48);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, regMr, 56);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, regMrDmaBuf, 64);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, deregMr, 72);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, isend, 80);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, irecv, 88);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, iflush, 96);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, test, 104);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, closeSend, 112);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, closeRecv, 120);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, closeListen, 128);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, getDeviceMr, 136);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, irecvConsumed, 144);
BRAID_ASSERT_OFFSET(ncclNet_v9_t, makeVDevice, 152);

BRAID_ASSERT_SIZE(ncclNetSGE_v9_t, 24);
BRAID_ASSERT_OFFSET(ncclNetSGE_v9_t, mhandle, 0);
BRAID_ASSERT_OFFSET(ncclNetSGE_v9_t, address, 8);
BRAID_ASSERT_OFFSET(ncclNetSGE_v9_t, size, 16);

BRAID_ASSERT_SIZE(ncclCollNet_v9_t, 144);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, name, 0);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, init, 8);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, devices, 16);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, getProperties, 24);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, listen, 32);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, connect, 40);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, reduceSupport, 48);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, regMr, 56);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, regMrDmaBuf, 64);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, deregMr, 72);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, iallreduce, 80);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, iallgather, 88);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, ireducescatter, 96);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, iflush, 104);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, test, 112);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, closeColl, 120);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, closeListen, 128);
BRAID_ASSERT_OFFSET(ncclCollNet_v9_t, makeVDevice, 136);

BRAID_ASSERT_SIZE(ncclNetVDeviceProps_v10_t, 20);
BRAID_ASSERT_OFFSET(ncclNetVDeviceProps_v10_t, ndevs, 0);
BRAID_ASSERT_OFFSET(ncclNetVDeviceProps_v10_t, devs, 4);

BRAID_ASSERT_SIZE(ncclNetCommConfig_v10_t, 4);
BRAID_ASSERT_OFFSET(ncclNetCommConfig_v10_t, trafficClass, 0);

BRAID_ASSERT_SIZE(ncclNetProperties_v10_t, 104);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, name, 0);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, pciPath, 8);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, guid, 16);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, ptrSupport, 24);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, regIsGlobal, 28);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, forceFlush, 32);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, speed, 36);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, port, 40);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, latency, 44);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, maxComms, 48);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, maxRecvs, 52);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, netDeviceType, 56);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, netDeviceVersion, 60);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, vProps, 64);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, maxP2pBytes, 88);
BRAID_ASSERT_OFFSET(ncclNetProperties_v10_t, maxCollBytes, 96);

BRAID_ASSERT_SIZE(ncclNet_v10_t, 160);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, name, 0);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, init, 8);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, devices, 16);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, getProperties, 24);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, listen, 32);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, connect, 40);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, accept, 48);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, regMr, 56);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, regMrDmaBuf, 64);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, deregMr, 72);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, isend, 80);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, irecv, 88);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, iflush, 96);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, test, 104);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, closeSend, 112);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, closeRecv, 120);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, closeListen, 128);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, getDeviceMr, 136);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, irecvConsumed, 144);
BRAID_ASSERT_OFFSET(ncclNet_v10_t, makeVDevice, 152);

BRAID_ASSERT_SIZE(ncclNetSGE_v10_t, 24);
BRAID_ASSERT_OFFSET(ncclNetSGE_v10_t, mhandle, 0);
BRAID_ASSERT_OFFSET(ncclNetSGE_v10_t, address, 8);
BRAID_ASSERT_OFFSET(ncclNetSGE_v10_t, size, 16);

BRAID_ASSERT_SIZE(ncclCollNet_v10_t, 144);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, name, 0);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, init, 8);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, devices, 16);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, getProperties, 24);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, listen, 32);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, connect, 40);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, reduceSupport, 48);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, regMr, 56);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, regMrDmaBuf, 64);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, deregMr, 72);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, iallreduce, 80);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, iallgather, 88);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, ireducescatter, 96);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, iflush, 104);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, test, 112);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, closeColl, 120);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, closeListen, 128);
BRAID_ASSERT_OFFSET(ncclCollNet_v10_t, makeVDevice, 136);

BRAID_ASSERT_SIZE(ncclNetVDeviceProps_v11_t, 20);
BRAID_ASSERT_OFFSET(ncclNetVDeviceProps_v11_t, ndevs, 0);
BRAID_ASSERT_OFFSET(ncclNetVDeviceProps_v11_t, devs, 4);

BRAID_ASSERT_SIZE(ncclNetCommConfig_v11_t, 4);
BRAID_ASSERT_OFFSET(ncclNetCommConfig_v11_t, trafficClass, 0);

BRAID_ASSERT_SIZE(ncclNetProperties_v11_t, 112);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, name, 0);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, pciPath, 8);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, guid, 16);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, ptrSupport, 24);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, regIsGlobal, 28);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, forceFlush, 32);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, speed, 36);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, port, 40);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, latency, 44);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, maxComms, 48);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, maxRecvs, 52);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, netDeviceType, 56);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, netDeviceVersion, 60);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, vProps, 64);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, maxP2pBytes, 88);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, maxCollBytes, 96);
BRAID_ASSERT_OFFSET(ncclNetProperties_v11_t, maxMultiRequestSize, 104);

BRAID_ASSERT_SIZE(ncclNetCommAttr_v11_t, 16);
BRAID_ASSERT_OFFSET(ncclNetCommAttr_v11_t, maxConcurrentPeers, 0);
BRAID_ASSERT_OFFSET(ncclNetCommAttr_v11_t, minConcurrentPeers, 4);
BRAID_ASSERT_OFFSET(ncclNetCommAttr_v11_t, maxFlowsPerPeer, 8);
BRAID_ASSERT_OFFSET(ncclNetCommAttr_v11_t, minFlowsPerPeer, 12);

BRAID_ASSERT_SIZE(ncclNetAttr_v11_t, 44);
BRAID_ASSERT_OFFSET(ncclNetAttr_v11_t, sendCommAttr, 0);
BRAID_ASSERT_OFFSET(ncclNetAttr_v11_t, recvCommAttr, 16);
BRAID_ASSERT_OFFSET(ncclNetAttr_v11_t, op, 32);
BRAID_ASSERT_OFFSET(ncclNetAttr_v11_t, algo, 36);
BRAID_ASSERT_OFFSET(ncclNetAttr_v11_t, proto, 40);

BRAID_ASSERT_SIZE(ncclNet_v11_t, 176);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, name, 0);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, init, 8);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, devices, 16);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, getProperties, 24);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, listen, 32);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, connect, 40);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, accept, 48);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, regMr, 56);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, regMrDmaBuf, 64);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, deregMr, 72);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, isend, 80);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, irecv, 88);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, iflush, 96);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, test, 104);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, closeSend, 112);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, closeRecv, 120);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, closeListen, 128);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, getDeviceMr, 136);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, irecvConsumed, 144);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, makeVDevice, 152);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, finalize, 160);
BRAID_ASSERT_OFFSET(ncclNet_v11_t, setNetAttr, 168);

BRAID_ASSERT_SIZE(ncclNetSGE_v11_t, 24);
BRAID_ASSERT_OFFSET(ncclNetSGE_v11_t, mhandle, 0);
BRAID_ASSERT_OFFSET(ncclNetSGE_v11_t, address, 8);
BRAID_ASSERT_OFFSET(ncclNetSGE_v11_t, size, 16);

BRAID_ASSERT_SIZE(ncclCollNet_v11_t, 152);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, name, 0);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, init, 8);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, devices, 16);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, getProperties, 24);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, listen, 32);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, connect, 40);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, reduceSupport, 48);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, regMr, 56);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, regMrDmaBuf, 64);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, deregMr, 72);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, iallreduce, 80);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, iallgather, 88);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, ireducescatter, 96);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, iflush, 104);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, test, 112);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, closeColl, 120);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, closeListen, 128);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, makeVDevice, 136);
BRAID_ASSERT_OFFSET(ncclCollNet_v11_t, finalize, 144);

BRAID_ASSERT_SIZE(ncclNetVDeviceProps_v12_t, 36);
BRAID_ASSERT_OFFSET(ncclNetVDeviceProps_v12_t, ndevs, 0);
BRAID_ASSERT_OFFSET(ncclNetVDeviceProps_v12_t, devs, 4);

BRAID_ASSERT_SIZE(ncclNetCommConfig_v12_t, 4);
BRAID_ASSERT_OFFSET(ncclNetCommConfig_v12_t, trafficClass, 0);

BRAID_ASSERT_SIZE(ncclNetProperties_v12_t, 128);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, name, 0);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, pciPath, 8);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, guid, 16);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, ptrSupport, 24);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, regIsGlobal, 28);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, forceFlush, 32);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, speed, 36);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, port, 40);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, latency, 44);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, maxComms, 48);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, maxRecvs, 52);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, netDeviceType, 56);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, netDeviceVersion, 60);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, vProps, 64);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, maxP2pBytes, 104);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, maxCollBytes, 112);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, maxMultiRequestSize, 120);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, railId, 124);
BRAID_ASSERT_OFFSET(ncclNetProperties_v12_t, planeId, 126);

BRAID_ASSERT_SIZE(ncclNetCommAttr_v12_t, 16);
BRAID_ASSERT_OFFSET(ncclNetCommAttr_v12_t, maxConcurrentPeers, 0);
BRAID_ASSERT_OFFSET(ncclNetCommAttr_v12_t, minConcurrentPeers, 4);
BRAID_ASSERT_OFFSET(ncclNetCommAttr_v12_t, maxFlowsPerPeer, 8);
BRAID_ASSERT_OFFSET(ncclNetCommAttr_v12_t, minFlowsPerPeer, 12);

BRAID_ASSERT_SIZE(ncclNetAttr_v12_t, 44);
BRAID_ASSERT_OFFSET(ncclNetAttr_v12_t, sendCommAttr, 0);
BRAID_ASSERT_OFFSET(ncclNetAttr_v12_t, recvCommAttr, 16);
BRAID_ASSERT_OFFSET(ncclNetAttr_v12_t, op, 32);
BRAID_ASSERT_OFFSET(ncclNetAttr_v12_t, algo, 36);
BRAID_ASSERT_OFFSET(ncclNetAttr_v12_t, proto, 40);

BRAID_ASSERT_SIZE(ncclNet_v12_t, 176);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, name, 0);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, init, 8);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, devices, 16);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, getProperties, 24);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, listen, 32);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, connect, 40);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, accept, 48);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, regMr, 56);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, regMrDmaBuf, 64);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, deregMr, 72);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, isend, 80);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, irecv, 88);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, iflush, 96);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, test, 104);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, closeSend, 112);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, closeRecv, 120);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, closeListen, 128);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, getDeviceMr, 136);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, irecvConsumed, 144);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, makeVDevice, 152);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, finalize, 160);
BRAID_ASSERT_OFFSET(ncclNet_v12_t, setNetAttr, 168);

BRAID_ASSERT_SIZE(ncclNetSGE_v12_t, 24);
BRAID_ASSERT_OFFSET(ncclNetSGE_v12_t, mhandle, 0);
BRAID_ASSERT_OFFSET(ncclNetSGE_v12_t, address, 8);
BRAID_ASSERT_OFFSET(ncclNetSGE_v12_t, size, 16);

BRAID_ASSERT_SIZE(ncclCollNet_v12_t, 152);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, name, 0);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, init, 8);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, devices, 16);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, getProperties, 24);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, listen, 32);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, connect, 40);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, reduceSupport, 48);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, regMr, 56);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, regMrDmaBuf, 64);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, deregMr, 72);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, iallreduce, 80);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, iallgather, 88);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, ireducescatter, 96);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, iflush, 104);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, test, 112);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, closeColl, 120);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, closeListen, 128);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, makeVDevice, 136);
BRAID_ASSERT_OFFSET(ncclCollNet_v12_t, finalize, 144);
#endif /* __LP64__ */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BRAID_NCCL_PLUGIN_NET_H */
