/*
 * context.cu — the library's entry points that are not kernels: version, errors, support table,
 * devices, the context (stream, caching allocator, pinned staging), memory and copies.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <new>

#include "cuda-internal.cuh"
#include "kernels/device.cuh"

#if defined(MEMRA_CUDA_EMULATED) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* The emulated build under AddressSanitizer (bun native/build.ts cuda-emulated-asan): device
 * memory is host memory there, so the bytes of an allocation's size class past those asked for
 * are poisoned, and a kernel that reads or writes past the end of its tensor is reported, where on
 * a GPU it would read the size class's padding unnoticed. */
static void memra_cuda_poison_tail(void * pointer, int64_t bytes, int64_t size_class) {
    ASAN_UNPOISON_MEMORY_REGION(pointer, (size_t)size_class);
    ASAN_POISON_MEMORY_REGION((uint8_t *)pointer + bytes, (size_t)(size_class - bytes));
}
static void memra_cuda_unpoison(void * pointer, int64_t size_class) { ASAN_UNPOISON_MEMORY_REGION(pointer, (size_t)size_class); }
#else
static void memra_cuda_poison_tail(void *, int64_t, int64_t) {}
static void memra_cuda_unpoison(void *, int64_t) {}
#endif

int memra_cuda_pdl = 0;

static thread_local char last_error[1024];
static thread_local int last_status = MEMRA_CUDA_OK;

int memra_cuda_fail(int status, const char * format, ...) {
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(last_error, sizeof last_error, format, arguments);
    va_end(arguments);
    last_status = status;
    memra_cuda_capture_note_failure(status, last_error);
    return status;
}

static int status_of(cudaError_t error) {
    switch (error) {
        case cudaErrorMemoryAllocation: return MEMRA_CUDA_ERROR_OUT_OF_MEMORY;
        case cudaErrorInsufficientDriver:
        case cudaErrorNoDevice:
        case cudaErrorInvalidDevice:
        case cudaErrorDevicesUnavailable:
        case cudaErrorSystemDriverMismatch:
        case cudaErrorCompatNotSupportedOnDevice:
        case cudaErrorNoKernelImageForDevice:
        case cudaErrorStubLibrary:
        case cudaErrorSystemNotReady:
        case cudaErrorInitializationError: return MEMRA_CUDA_ERROR_NO_DEVICE;
        default: return MEMRA_CUDA_ERROR_CUDA;
    }
}

int memra_cuda_fail_cuda(cudaError_t error, const char * function, const char * call) {
    return memra_cuda_fail(status_of(error), "%s: %s failed: %s (%s)", function, call, cudaGetErrorString(error), cudaGetErrorName(error));
}

extern "C" const char * memra_cuda_version(void) { return "0.1.0"; }
extern "C" int memra_cuda_abi_version(void) { return MEMRA_CUDA_ABI_VERSION; }
extern "C" const char * memra_cuda_last_error(void) { return last_error; }
extern "C" int memra_cuda_last_status(void) { return last_status; }

extern "C" int memra_cuda_supports(int op, int weight_type) {
    switch (op) {
        case MEMRA_CUDA_OP_MATMUL:
        case MEMRA_CUDA_OP_EXPERT_MATMUL:
        case MEMRA_CUDA_OP_EMBEDDING: return memra_cuda_weight_type_supported(weight_type);
        case MEMRA_CUDA_OP_RMS_NORM:
        case MEMRA_CUDA_OP_ROPE_NEOX:
        case MEMRA_CUDA_OP_ATTENTION:
        case MEMRA_CUDA_OP_SWIGLU:
        case MEMRA_CUDA_OP_ADD:
        case MEMRA_CUDA_OP_MOE_ROUTE:
        case MEMRA_CUDA_OP_GATHER_ROWS:
        case MEMRA_CUDA_OP_SCATTER_ADD_ROWS: return weight_type == MEMRA_CUDA_NO_WEIGHT_TYPE || weight_type == MEMRA_CUDA_TYPE_F32 ? 1 : 0;
        default: return 0;
    }
}

extern "C" int memra_cuda_plan_matmul(int type, int64_t rows, int64_t n_in, int64_t n_out, int64_t * plan, int64_t plan_length) {
    static const char function[] = "memra_cuda_plan_matmul";
    if (!plan || plan_length < 7) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: plan holds %lld values, 7 needed", function, (long long)plan_length);
    memra_cuda_matmul_plan chosen;
    char message[512];
    int status = memra_cuda_plan_matmul_for(type, rows, n_in, n_out, &chosen, message, sizeof message);
    if (status != MEMRA_CUDA_OK) FAIL(status, "%s: %s", function, message);
    /* A context with the default settings (activation rounding, MEMRA_CUDA_INT8_GEMM on) runs the
     * prefill of q8_0/q4_0/q5_0 on the int8 GEMM (matmul.cu). */
    if (chosen.kernel == MEMRA_CUDA_MATMUL_GEMM && memra_cuda_int8_gemm_supports(type)) {
        status = memra_cuda_plan_int8_gemm(type, rows, n_in, n_out, 0, &chosen, message, sizeof message); /* no device: an H200's 132 SMs */
        if (status != MEMRA_CUDA_OK) FAIL(status, "%s: %s", function, message);
    }
    plan[0] = chosen.kernel;
    plan[1] = chosen.launch.grid_x;
    plan[2] = chosen.launch.grid_y;
    plan[3] = chosen.launch.grid_z;
    plan[4] = chosen.launch.threads;
    plan[5] = chosen.launch.shared_bytes;
    plan[6] = chosen.rows_per_launch;
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_device_count(int32_t * count) {
    static const char function[] = "memra_cuda_device_count";
    if (!count) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: count is NULL", function);
    *count = 0;
    int devices = 0;
    const cudaError_t error = cudaGetDeviceCount(&devices);
    if (error != cudaSuccess) {
        cudaGetLastError(); /* not sticky: clear it */
        return memra_cuda_fail(MEMRA_CUDA_ERROR_NO_DEVICE, "%s: no usable CUDA device: %s (%s)", function, cudaGetErrorString(error), cudaGetErrorName(error));
    }
    if (devices == 0) FAIL(MEMRA_CUDA_ERROR_NO_DEVICE, "%s: no CUDA-capable device is detected", function);
    *count = devices;
    return MEMRA_CUDA_OK;
}

/* ---- helpers shared by the launchers ---- */

/* memra_cuda_enter without dropping kept norm codes: for allocating and freeing, which ops do
 * around their launches (a producer's workspace is freed after it has kept its codes). */
static int use_device(const char * function, memra_cuda * cuda) {
    if (!cuda) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: cuda is NULL", function);
    CUDA_CHECK(function, cudaSetDevice(cuda->device));
    return MEMRA_CUDA_OK;
}

int memra_cuda_enter(const char * function, memra_cuda * cuda) {
    CHECK(use_device(function, cuda));
    /* Kept norm codes are for the very next call only (which takes them before entering). */
    memra_cuda_drop_norm_handoff(cuda);
    return MEMRA_CUDA_OK;
}

void memra_cuda_drop_norm_handoff(memra_cuda * cuda) {
    memra_cuda_norm_handoff & kept = cuda->norm_handoff;
    if (!kept.codes) return;
    void * codes = kept.codes;
    void * scales = kept.scales;
    kept = memra_cuda_norm_handoff{}; /* first: memra_cuda_free enters again */
    memra_cuda_free(cuda, codes);
    memra_cuda_free(cuda, scales);
}

bool memra_cuda_take_norm_handoff(memra_cuda * cuda, const float * normed, const float * hidden, const float * weight, float eps, int64_t rows, int64_t width,
                                  memra_cuda_q8_0_codes * codes) {
    if (!cuda) return false;
    if (!memra_cuda_norm_handoff_holds(cuda, normed, hidden, weight, eps, rows, width)) {
        memra_cuda_drop_norm_handoff(cuda);
        return false;
    }
    const memra_cuda_norm_handoff & kept = cuda->norm_handoff;
    *codes = {(const int8_t *)kept.codes, (const float *)kept.scales};
    cuda->norm_handoff = memra_cuda_norm_handoff{};
    return true;
}

bool memra_cuda_norm_handoff_holds(memra_cuda * cuda, const float * normed, const float * hidden, const float * weight, float eps, int64_t rows, int64_t width) {
    if (!cuda) return false;
    const memra_cuda_norm_handoff & kept = cuda->norm_handoff;
    return kept.codes && kept.normed == normed && kept.hidden == hidden && kept.weight == weight && kept.eps == eps && kept.rows == rows && kept.width == width;
}

bool memra_cuda_take_codes_of(memra_cuda * cuda, const float * x, int64_t rows, int64_t width, memra_cuda_q8_0_codes * codes) {
    if (!cuda) return false;
    const memra_cuda_norm_handoff & kept = cuda->norm_handoff;
    if (!kept.codes || kept.normed != x || kept.width != width || rows < 1 || rows > kept.rows) {
        memra_cuda_drop_norm_handoff(cuda);
        return false;
    }
    *codes = {(const int8_t *)kept.codes, (const float *)kept.scales};
    cuda->norm_handoff = memra_cuda_norm_handoff{};
    return true;
}

int memra_cuda_check_size(const char * function, const char * name, int64_t value, int64_t minimum) {
    if (value < minimum || value > ((int64_t)1 << 40)) {
        FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %s is %lld, must be in %lld..2^40", function, name, (long long)value, (long long)minimum);
    }
    return MEMRA_CUDA_OK;
}

int memra_cuda_check_product(const char * function, const char * what, int64_t a, int64_t b, int64_t * product) {
    if (a < 0 || b < 0 || (a > 0 && b > ((int64_t)1 << 46) / a)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %s is too large", function, what);
    *product = a * b;
    return MEMRA_CUDA_OK;
}

int memra_cuda_check_buffer(const char * function, const char * name, const void * pointer, int64_t length, int64_t needed) {
    if (length < 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %s has a negative length", function, name);
    if (needed > 0 && !pointer) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", function, name);
    if (length < needed) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %s holds %lld elements, %lld needed", function, name, (long long)length, (long long)needed);
    return MEMRA_CUDA_OK;
}

int memra_cuda_wait(const char * function, memra_cuda * cuda) {
    REFUSE_WHILE_CAPTURING(function, cuda, "cannot wait for the stream");
    CUDA_CHECK(function, cudaStreamSynchronize(cuda->stream));
    memra_cuda_arena_reset(&cuda->arena);
    return MEMRA_CUDA_OK;
}

int memra_cuda_stage_many(const char * function, memra_cuda * cuda, int count, const void * const * hosts, const int64_t * bytes, const void ** devices) {
    /* All arrays in one reservation: a synchronisation (arena full) can never separate them. */
    if (cuda->capture) return memra_cuda_capture_stage(function, cuda, count, hosts, bytes, devices);
    int64_t offsets[8];
    int64_t total = 0;
    if (count > 8) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: too many index arrays", function);
    for (int i = 0; i < count; i++) {
        devices[i] = NULL;
        if (bytes[i] < 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: negative index array size", function);
        if (bytes[i] > 0 && !hosts[i]) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: a host index array is NULL", function);
        offsets[i] = total;
        total += (bytes[i] + MEMRA_CUDA_ARENA_ALIGNMENT - 1) / MEMRA_CUDA_ARENA_ALIGNMENT * MEMRA_CUDA_ARENA_ALIGNMENT;
    }
    if (total == 0) return MEMRA_CUDA_OK;
    for (int attempt = 0; attempt < 3; attempt++) {
        int64_t offset = 0;
        const int result = memra_cuda_arena_reserve(&cuda->arena, total, &offset);
        if (result == MEMRA_CUDA_ARENA_FITS) {
            uint8_t * host = (uint8_t *)cuda->arena_host + offset;
            for (int i = 0; i < count; i++) {
                if (bytes[i] > 0) memcpy(host + offsets[i], hosts[i], (size_t)bytes[i]);
            }
            CUDA_CHECK(function, cudaMemcpyAsync((uint8_t *)cuda->arena_device + offset, host, (size_t)total, cudaMemcpyHostToDevice, cuda->stream));
            for (int i = 0; i < count; i++) devices[i] = bytes[i] > 0 ? (const uint8_t *)cuda->arena_device + offset + offsets[i] : NULL;
            return MEMRA_CUDA_OK;
        }
        CHECK(memra_cuda_wait(function, cuda));
        if (result == MEMRA_CUDA_ARENA_GROW) {
            const int64_t capacity = offset;
            if (cuda->arena_host) cudaFreeHost(cuda->arena_host);
            if (cuda->arena_device) cudaFree(cuda->arena_device);
            cuda->arena_host = cuda->arena_device = NULL;
            cuda->arena.capacity = 0;
            CUDA_CHECK(function, cudaMallocHost(&cuda->arena_host, (size_t)capacity));
            CUDA_CHECK(function, cudaMalloc(&cuda->arena_device, (size_t)capacity));
            cuda->arena.capacity = capacity;
        }
    }
    FAIL(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: cannot stage %lld bytes of indices", function, (long long)total);
}

int memra_cuda_stage(const char * function, memra_cuda * cuda, const void * host, int64_t bytes, const void ** device) {
    return memra_cuda_stage_many(function, cuda, 1, &host, &bytes, device);
}

/* ---- context ---- */

static void release(memra_cuda * cuda) {
    cudaSetDevice(cuda->device);
    memra_cuda_profile_release(cuda);
    memra_cuda_graphs_release(cuda);
    if (cuda->stream) cudaStreamSynchronize(cuda->stream);
    if (cuda->live) {
        for (auto & entry : *cuda->live) cudaFree(entry.first);
        delete cuda->live;
    }
    int64_t bytes = 0;
    for (void * block; (block = memra_cuda_cache_pop(&cuda->cache, &bytes)) != NULL;) cudaFree(block);
    memra_cuda_cache_dispose(&cuda->cache);
    for (int i = 0; i < 2; i++) {
        if (cuda->upload_pinned[i]) cudaFreeHost(cuda->upload_pinned[i]);
        if (cuda->upload_done[i]) cudaEventDestroy(cuda->upload_done[i]);
    }
    if (cuda->arena_host) cudaFreeHost(cuda->arena_host);
    if (cuda->arena_device) cudaFree(cuda->arena_device);
    if (cuda->attention_counters) cudaFree(cuda->attention_counters);
    if (cuda->swiglu_counters) cudaFree(cuda->swiglu_counters);
    if (cuda->norm_tail_counter) cudaFree(cuda->norm_tail_counter);
    if (cuda->stream) cudaStreamDestroy(cuda->stream);
    free(cuda);
}

/* Nothing but every kernel's first statement: the probe of programmatic dependent launch. */
static __global__ void pdl_probe_kernel() {
    memra_grid_dependencies();
}

/* Whether two dependent launches (MEMRA_LAUNCH with memra_cuda_pdl set) run on `stream`, eagerly
 * and captured in a graph that is instantiated and replayed; every error on the way is cleared,
 * so that a driver or device without programmatic dependent launch leaves the context as plain
 * launches would. */
static bool probe_pdl(cudaStream_t stream) {
#ifdef MEMRA_CUDA_EMULATED
    (void)stream;
    return false; /* the emulator runs launches one after another: nothing to overlap */
#else
    const int previous = memra_cuda_pdl;
    memra_cuda_pdl = 1;
    MEMRA_LAUNCH(1, 32, 0, stream, pdl_probe_kernel)();
    MEMRA_LAUNCH(1, 32, 0, stream, pdl_probe_kernel)();
    cudaError_t error = cudaGetLastError();
    if (error == cudaSuccess) error = cudaStreamSynchronize(stream);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (error == cudaSuccess) error = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (error == cudaSuccess) {
        MEMRA_LAUNCH(1, 32, 0, stream, pdl_probe_kernel)();
        MEMRA_LAUNCH(1, 32, 0, stream, pdl_probe_kernel)();
        const cudaError_t launched = cudaGetLastError();
        error = cudaStreamEndCapture(stream, &graph);
        if (error == cudaSuccess) error = launched;
    }
    if (error == cudaSuccess) error = cudaGraphInstantiate(&exec, graph, 0);
    if (error == cudaSuccess) error = cudaGraphLaunch(exec, stream);
    if (error == cudaSuccess) error = cudaStreamSynchronize(stream);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    memra_cuda_pdl = previous;
    return error == cudaSuccess;
#endif
}

static int create_into(memra_cuda * cuda, int device) {
    static const char function[] = "memra_cuda_create";
    int32_t count = 0;
    CHECK(memra_cuda_device_count(&count));
    if (device < 0 || device >= count) FAIL(MEMRA_CUDA_ERROR_NO_DEVICE, "%s: device %d does not exist (%d CUDA devices)", function, device, count);
    cuda->device = device;
    CUDA_CHECK(function, cudaSetDevice(device));
    cudaDeviceProp properties;
    CUDA_CHECK(function, cudaGetDeviceProperties(&properties, device));
    snprintf(cuda->device_name, sizeof cuda->device_name, "%s", properties.name);
    cuda->compute_capability = properties.major * 10 + properties.minor;
    cuda->multiprocessors = properties.multiProcessorCount;
    if (cuda->compute_capability < 80) {
        FAIL(MEMRA_CUDA_ERROR_NO_DEVICE, "%s: %s has compute capability %d.%d; libmemra_cuda is built for 8.0 and newer", function, properties.name,
             properties.major, properties.minor);
    }
    const char * gemm = getenv("MEMRA_CUDA_GEMM");
    cuda->gemm = !(gemm && strcmp(gemm, "0") == 0);
    const char * int8_gemm = getenv("MEMRA_CUDA_INT8_GEMM");
    cuda->int8_gemm = !(int8_gemm && strcmp(int8_gemm, "0") == 0);
    /* The pipelined int8 GEMM: opt-in until it has been timed against gemm_int8_kernel; only where a
     * block may have its shared memory (H100/H200, A100: yes; sm_89's 99 KiB: no). */
    const char * int8_pipeline = getenv("MEMRA_CUDA_INT8_PIPELINE");
    cuda->int8_pipeline = int8_pipeline && strcmp(int8_pipeline, "1") == 0 && (int64_t)properties.sharedMemPerBlockOptin >= memra_cuda_int8_pipe_shared_bytes(MEMRA_CUDA_INT8_GEMM_TILE_M);
    if (cuda->int8_pipeline) CHECK(memra_cuda_prepare_int8_pipeline());
    const char * rounding = getenv("MEMRA_CUDA_ACTIVATION_ROUNDING");
    cuda->activation_rounding = !(rounding && strcmp(rounding, "0") == 0);
    const char * mmv_steps = getenv("MEMRA_CUDA_MMV_STEPS");
    cuda->mmv_steps = mmv_steps && strcmp(mmv_steps, "2") == 0 ? 2 : 4;
    const char * mmv_wide = getenv("MEMRA_CUDA_MMV_WIDE");
    cuda->mmv_wide = !(mmv_wide && strcmp(mmv_wide, "0") == 0);
    const char * mmv_split = getenv("MEMRA_CUDA_MMV_SPLIT");
    cuda->mmv_split = !mmv_split ? 0 : strcmp(mmv_split, "1") == 0 ? 1 : strcmp(mmv_split, "2") == 0 ? 2 : strcmp(mmv_split, "4") == 0 ? 4 : 0;
    const char * graph_input_copy = getenv("MEMRA_CUDA_GRAPH_INPUT_COPY");
    cuda->graph_input_copy = graph_input_copy && strcmp(graph_input_copy, "0") == 0 ? 0 : 1;
    const char * early_weights = getenv("MEMRA_CUDA_EARLY_WEIGHTS");
    cuda->early_weights = early_weights && strcmp(early_weights, "0") == 0 ? 0 : 1;
    const char * codes_dp4a = getenv("MEMRA_CUDA_CODES_DP4A");
    cuda->codes_mmv = !(codes_dp4a && strcmp(codes_dp4a, "0") == 0);
    const char * flash = getenv("MEMRA_CUDA_FLASH_ATTENTION");
    cuda->flash_attention = !(flash && strcmp(flash, "0") == 0);
    CUDA_CHECK(function, cudaStreamCreateWithFlags(&cuda->stream, cudaStreamNonBlocking));
    /* Programmatic dependent launch (sm_90 and newer; MEMRA_CUDA_PDL=0 turns it off): one setting
     * for the process, on only while every context's device has it. */
    static bool pdl_decided = false;
    const char * pdl = getenv("MEMRA_CUDA_PDL");
    const bool pdl_here = !(pdl && strcmp(pdl, "0") == 0) && cuda->compute_capability >= 90 && probe_pdl(cuda->stream);
    memra_cuda_pdl = (pdl_decided ? memra_cuda_pdl != 0 : true) && pdl_here;
    pdl_decided = true;
    cuda->live = new (std::nothrow) std::unordered_map<void *, int64_t>();
    if (!cuda->live) FAIL(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
    for (int i = 0; i < 2; i++) {
        CUDA_CHECK(function, cudaMallocHost(&cuda->upload_pinned[i], (size_t)MEMRA_CUDA_UPLOAD_CHUNK));
        CUDA_CHECK(function, cudaEventCreateWithFlags(&cuda->upload_done[i], cudaEventDisableTiming));
    }
    cuda->arena.capacity = 1 << 20;
    CUDA_CHECK(function, cudaMallocHost(&cuda->arena_host, (size_t)cuda->arena.capacity));
    CUDA_CHECK(function, cudaMalloc(&cuda->arena_device, (size_t)cuda->arena.capacity));
    CUDA_CHECK(function, cudaMalloc((void **)&cuda->attention_counters, MEMRA_CUDA_ATTENTION_COUNTERS * sizeof(int)));
    CUDA_CHECK(function, cudaMemsetAsync(cuda->attention_counters, 0, MEMRA_CUDA_ATTENTION_COUNTERS * sizeof(int), cuda->stream));
    CUDA_CHECK(function, cudaMalloc((void **)&cuda->swiglu_counters, MEMRA_CUDA_SWIGLU_COUNTERS * sizeof(int)));
    CUDA_CHECK(function, cudaMemsetAsync(cuda->swiglu_counters, 0, MEMRA_CUDA_SWIGLU_COUNTERS * sizeof(int), cuda->stream));
    CUDA_CHECK(function, cudaMalloc((void **)&cuda->norm_tail_counter, sizeof(int)));
    CUDA_CHECK(function, cudaMemsetAsync(cuda->norm_tail_counter, 0, sizeof(int), cuda->stream));
    return MEMRA_CUDA_OK;
}

extern "C" memra_cuda * memra_cuda_create(int device) {
    memra_cuda * cuda = (memra_cuda *)calloc(1, sizeof(memra_cuda));
    if (!cuda) {
        memra_cuda_fail(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "memra_cuda_create: out of host memory");
        return NULL;
    }
    if (create_into(cuda, device) != MEMRA_CUDA_OK) {
        if (cuda->stream || cuda->live) release(cuda);
        else free(cuda);
        return NULL;
    }
    last_status = MEMRA_CUDA_OK;
    return cuda;
}

extern "C" void memra_cuda_destroy(memra_cuda * cuda) {
    if (cuda) release(cuda);
}

extern "C" int memra_cuda_device_info(memra_cuda * cuda, char * name, int64_t name_bytes, int32_t * compute_capability, int32_t * multiprocessors) {
    static const char function[] = "memra_cuda_device_info";
    if (!cuda) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: cuda is NULL", function);
    if (name && name_bytes > 0) snprintf(name, (size_t)name_bytes, "%s", cuda->device_name);
    if (compute_capability) *compute_capability = cuda->compute_capability;
    if (multiprocessors) *multiprocessors = cuda->multiprocessors;
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_programmatic_launch(void) { return memra_cuda_pdl; }

extern "C" int memra_cuda_memory_info(memra_cuda * cuda, int64_t * free_bytes, int64_t * total_bytes, int64_t * cached_bytes) {
    static const char function[] = "memra_cuda_memory_info";
    CHECK(memra_cuda_enter(function, cuda));
    size_t free_memory = 0, total_memory = 0;
    CUDA_CHECK(function, cudaMemGetInfo(&free_memory, &total_memory));
    if (free_bytes) *free_bytes = (int64_t)free_memory;
    if (total_bytes) *total_bytes = (int64_t)total_memory;
    if (cached_bytes) *cached_bytes = cuda->cache.cached_bytes;
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_synchronize(memra_cuda * cuda) {
    static const char function[] = "memra_cuda_synchronize";
    CHECK(memra_cuda_enter(function, cuda));
    return memra_cuda_wait(function, cuda);
}

/* ---- memory ---- */

extern "C" int memra_cuda_release_cached(memra_cuda * cuda) {
    static const char function[] = "memra_cuda_release_cached";
    CHECK(memra_cuda_enter(function, cuda));
    CHECK(memra_cuda_wait(function, cuda));
    int64_t bytes = 0;
    for (void * block; (block = memra_cuda_cache_pop(&cuda->cache, &bytes)) != NULL;) CUDA_CHECK(function, cudaFree(block));
    return MEMRA_CUDA_OK;
}

extern "C" void * memra_cuda_alloc(memra_cuda * cuda, int64_t bytes) {
    static const char function[] = "memra_cuda_alloc";
    if (use_device(function, cuda) != MEMRA_CUDA_OK) return NULL;
    if (bytes < 0 || bytes > ((int64_t)1 << 44)) {
        memra_cuda_fail(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %lld bytes", function, (long long)bytes);
        return NULL;
    }
    const int64_t size_class = memra_cuda_allocation_class(bytes);
    if (cuda->capture) {
        /* workspace given back earlier in the same capture: the graph's own, reused in stream order */
        void * reused = memra_cuda_capture_reuse(cuda, size_class);
        /* replayed later in graph order, each of its users with its own size: none poisoned */
        if (reused) {
            memra_cuda_unpoison(reused, size_class);
            return reused;
        }
    }
    void * pointer = memra_cuda_cache_take(&cuda->cache, size_class);
    if (!pointer) {
        cudaError_t error = cudaMalloc(&pointer, (size_t)size_class);
        if (error == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            if (memra_cuda_release_cached(cuda) != MEMRA_CUDA_OK) return NULL;
            error = cudaMalloc(&pointer, (size_t)size_class);
        }
        if (error != cudaSuccess) {
            cudaGetLastError();
            memra_cuda_fail(status_of(error), "%s: cudaMalloc of %lld bytes failed: %s", function, (long long)size_class, cudaGetErrorString(error));
            return NULL;
        }
    }
    try {
        cuda->live->emplace(pointer, size_class);
    } catch (...) {
        cudaFree(pointer);
        memra_cuda_fail(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
        return NULL;
    }
    if (cuda->capture && !memra_cuda_capture_track(cuda, pointer, size_class)) {
        memra_cuda_free(cuda, pointer);
        memra_cuda_fail(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
        return NULL;
    }
    if (cuda->capture) memra_cuda_unpoison(pointer, size_class); /* may be reused within the capture */
    else memra_cuda_poison_tail(pointer, bytes, size_class);
    return pointer;
}

extern "C" int memra_cuda_free(memra_cuda * cuda, void * device) {
    static const char function[] = "memra_cuda_free";
    if (!device) return MEMRA_CUDA_OK;
    CHECK(use_device(function, cuda));
    /* Given back within a capture: stays the capture's (its graph's), for its later ops. */
    if (cuda->capture && memra_cuda_capture_give_back(cuda, device)) return MEMRA_CUDA_OK;
    auto found = cuda->live->find(device);
    if (found == cuda->live->end()) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %p was not allocated by this context (or freed twice)", function, device);
    const int64_t size_class = found->second;
    cuda->live->erase(found);
    /* Stream-ordered reuse: the block is handed out again only to ops queued after this point on
     * the same stream, which run after every op that used it before. */
    memra_cuda_unpoison(device, size_class);
    if (memra_cuda_cache_put(&cuda->cache, device, size_class) != 0) {
        CHECK(memra_cuda_wait(function, cuda));
        CUDA_CHECK(function, cudaFree(device));
    }
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_upload(memra_cuda * cuda, void * device, const void * host, int64_t bytes) {
    static const char function[] = "memra_cuda_upload";
    CHECK(memra_cuda_enter(function, cuda));
    REFUSE_WHILE_CAPTURING(function, cuda, "cannot upload");
    if (bytes < 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: negative size", function);
    if (bytes == 0) return MEMRA_CUDA_OK;
    if (!device || !host) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: device or host is NULL", function);
    const int64_t chunks = memra_cuda_staging_chunks(bytes, MEMRA_CUDA_UPLOAD_CHUNK);
    for (int64_t chunk = 0; chunk < chunks; chunk++) {
        const int half = (int)(chunk & 1);
        const int64_t offset = chunk * MEMRA_CUDA_UPLOAD_CHUNK;
        const int64_t size = bytes - offset < MEMRA_CUDA_UPLOAD_CHUNK ? bytes - offset : MEMRA_CUDA_UPLOAD_CHUNK;
        if (chunk >= 2) CUDA_CHECK(function, cudaEventSynchronize(cuda->upload_done[half]));
        memcpy(cuda->upload_pinned[half], (const uint8_t *)host + offset, (size_t)size);
        CUDA_CHECK(function, cudaMemcpyAsync((uint8_t *)device + offset, cuda->upload_pinned[half], (size_t)size, cudaMemcpyHostToDevice, cuda->stream));
        CUDA_CHECK(function, cudaEventRecord(cuda->upload_done[half], cuda->stream));
    }
    /* The pinned halves are reused by the next upload: wait for the last copies out of them. */
    CUDA_CHECK(function, cudaEventSynchronize(cuda->upload_done[(chunks - 1) & 1]));
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_download(memra_cuda * cuda, void * host, const void * device, int64_t bytes) {
    static const char function[] = "memra_cuda_download";
    CHECK(memra_cuda_enter(function, cuda));
    REFUSE_WHILE_CAPTURING(function, cuda, "cannot download");
    if (bytes < 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: negative size", function);
    if (bytes == 0) return MEMRA_CUDA_OK;
    if (!device || !host) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: device or host is NULL", function);
    /* Pageable destination: cudaMemcpyAsync stages it itself; waiting on the stream afterwards
     * makes the bytes visible and also resets the index arena. */
    CUDA_CHECK(function, cudaMemcpyAsync(host, device, (size_t)bytes, cudaMemcpyDeviceToHost, cuda->stream));
    return memra_cuda_wait(function, cuda);
}

extern "C" int memra_cuda_copy(memra_cuda * cuda, void * target, const void * source, int64_t bytes) {
    static const char function[] = "memra_cuda_copy";
    CHECK(memra_cuda_enter(function, cuda));
    if (bytes < 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: negative size", function);
    if (bytes == 0) return MEMRA_CUDA_OK;
    if (!target || !source) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: target or source is NULL", function);
    CUDA_CHECK(function, cudaMemcpyAsync(target, source, (size_t)bytes, cudaMemcpyDeviceToDevice, cuda->stream));
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_zero(memra_cuda * cuda, void * device, int64_t bytes) {
    static const char function[] = "memra_cuda_zero";
    CHECK(memra_cuda_enter(function, cuda));
    if (bytes < 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: negative size", function);
    if (bytes == 0) return MEMRA_CUDA_OK;
    if (!device) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: device is NULL", function);
    CUDA_CHECK(function, cudaMemsetAsync(device, 0, (size_t)bytes, cuda->stream));
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_configure(memra_cuda * cuda, int gemm, int activation_rounding) {
    static const char function[] = "memra_cuda_configure";
    CHECK(memra_cuda_enter(function, cuda));
    if (gemm < -1 || gemm > 1 || activation_rounding < -1 || activation_rounding > 1)
        FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: gemm %d and activation_rounding %d must be -1, 0 or 1", function, gemm, activation_rounding);
    if (gemm >= 0) cuda->gemm = gemm;
    if (activation_rounding >= 0) cuda->activation_rounding = activation_rounding;
    return MEMRA_CUDA_OK;
}
