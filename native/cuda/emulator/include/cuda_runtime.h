/*
 * cuda_runtime.h for the emulated build of libmemra_cuda (-DMEMRA_CUDA_EMULATED): the part of the
 * CUDA runtime API the library calls, implemented on the CPU in ../emulator.cpp. "Device" memory
 * is host memory; streams execute every operation when it is issued, so stream order is program
 * order and synchronisation has nothing to wait for, except on a stream that captures
 * (cudaStreamBeginCapture): its kernel launches, cudaMemcpyAsync and cudaMemsetAsync are recorded
 * as the nodes of a graph and run when cudaGraphLaunch replays it (on the calling thread, in the
 * order they were issued). Capture is per stream; the NULL stream never captures.
 */
#pragma once

#include <stddef.h>

#include "../memra-cuda-emulator.h"

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorDevicesUnavailable = 46,
    cudaErrorNoKernelImageForDevice = 209,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorLaunchFailure = 719,
    cudaErrorIllegalState = 401,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorCapturedEvent = 907,
    cudaErrorStreamCaptureWrongThread = 908,
    cudaErrorSystemDriverMismatch = 803,
    cudaErrorCompatNotSupportedOnDevice = 804,
    cudaErrorStubLibrary = 34,
    cudaErrorSystemNotReady = 802,
};
typedef enum cudaError_t cudaError;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

typedef struct memra_emu_stream * cudaStream_t;
typedef struct memra_emu_event * cudaEvent_t;
typedef struct memra_emu_graph * cudaGraph_t;
typedef struct memra_emu_graph_exec * cudaGraphExec_t;
typedef struct memra_emu_graph_node * cudaGraphNode_t;

enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2,
};

#define cudaStreamDefault 0x0
#define cudaStreamNonBlocking 0x1
#define cudaEventDefault 0x0
#define cudaEventDisableTiming 0x2

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int major, minor;
    int multiProcessorCount;
    size_t sharedMemPerBlockOptin;
};

/* The emulated device's limits (as an sm_90 GPU's). */
#define MEMRA_EMU_MAX_THREADS_PER_BLOCK 1024
#define MEMRA_EMU_STATIC_SHARED_BYTES (48 * 1024)
#define MEMRA_EMU_MAX_SHARED_BYTES (227 * 1024)

const char * cudaGetErrorString(cudaError_t error);
const char * cudaGetErrorName(cudaError_t error);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int * count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int * device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp * properties, int device);
cudaError_t cudaMemGetInfo(size_t * free_bytes, size_t * total_bytes);
cudaError_t cudaDeviceSynchronize(void);

cudaError_t cudaMalloc(void ** pointer, size_t bytes);
cudaError_t cudaFree(void * pointer);
cudaError_t cudaMallocHost(void ** pointer, size_t bytes);
cudaError_t cudaFreeHost(void * pointer);
cudaError_t cudaMemcpy(void * target, const void * source, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void * target, const void * source, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemsetAsync(void * target, int value, size_t bytes, cudaStream_t stream = 0);

cudaError_t cudaStreamCreateWithFlags(cudaStream_t * stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t * event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float * ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);
cudaError_t cudaFuncSetAttribute(const void * function, int attribute, int value);
#define cudaFuncAttributeMaxDynamicSharedMemorySize 8

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t * graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus * status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t * exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t * nodes, size_t * count);
