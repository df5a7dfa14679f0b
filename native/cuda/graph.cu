/*
 * graph.cu — ops captured as CUDA graphs and replayed (memra_cuda_graph_*), so that a decode step
 * of a small model costs one graph launch instead of hundreds of kernel launches.
 *
 * Between memra_cuda_graph_begin and memra_cuda_graph_end the context's stream captures: the ops
 * called in between are recorded, not run. What changes for them while capturing:
 *  - Host index arrays (tokens, positions, slots, block tables, sequences) are staged into the
 *    graph's own pinned and device buffers, one pair per distinct host array (the same address and
 *    size are staged once: the positions every layer's RoPE reads are copied once per replay).
 *    These arrays are the graph's inputs; a replay first refreshes their pinned copies from the
 *    caller's arrays. They are laid out one after another in one pinned and one device buffer of
 *    the capture (MEMRA_CUDA_GRAPH_INPUT_BYTES), which a replay copies in one cudaMemcpyAsync
 *    before it launches the graph: one copy per step instead of a copy node per input inside the
 *    graph, each of which holds up the kernels after it. An input that does not fit (long block
 *    tables of a large batch), or every input with MEMRA_CUDA_GRAPH_INPUT_COPY=0, gets buffers of
 *    its own and a captured copy that reads the pinned buffer when the graph runs.
 *  - The host-side checks of those arrays (token and row ids inside their tables, KV slots inside
 *    the storage, block tables and sequences) are recorded as well and run again on the refreshed
 *    copies before every replay: a replay with a bad index fails with the op's own message and
 *    launches nothing.
 *  - Workspace that an op takes and gives back within the capture (activation rounding) comes from
 *    the capture's pool: a block given back is reused by the later ops of the same capture (they
 *    run in stream order) and stays the graph's until it is destroyed, so nothing allocated later
 *    can alias memory a replay writes.
 *  - Ops that need the host to wait for the device (download, upload, moe_route, synchronize)
 *    fail, and so does memra_cuda_graph_end afterwards: any op that fails while capturing makes
 *    the capture fail, so a graph never silently lacks an op.
 * Kernel choices made from array contents are fixed at capture: attention uses its paged kernel
 * (not the flash prefill kernel, whose tiles are planned from the sequences on the host).
 */
#include <stdio.h>
#include <string.h>

#include <new>
#include <vector>

#include "cuda-internal.cuh"

namespace {

struct graph_input {
    const void * host; /* the caller's array at capture time (what memra_cuda_graph_input reports) */
    int64_t bytes;
    void * pinned;     /* refreshed from the caller's array before each replay */
    void * device;     /* the copy's target, read by the kernels */
    bool in_arena;     /* pinned and device lie in the inputs' buffers (input_arena), not its own */
};

/* The inputs' shared buffers: `used` bytes of both are copied before each replay. */
struct input_arena {
    void * pinned = nullptr;
    void * device = nullptr;
    int64_t used = 0;
};

struct pool_block {
    void * pointer;
    int64_t size_class;
    bool given_back; /* freed within the capture: the graph's from then on */
};

}  // namespace

struct memra_cuda_capture {
    std::vector<graph_input> inputs;
    input_arena arena;
    std::vector<std::function<int()>> checks;
    std::vector<pool_block> pool;
    int failed_status = MEMRA_CUDA_OK;
    char failed_message[512] = {0};
};

struct memra_cuda_graph {
    memra_cuda * cuda = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaEvent_t done = nullptr; /* recorded after each replay: its pinned inputs have been read */
    std::vector<graph_input> inputs;
    input_arena arena;
    std::vector<std::function<int()>> checks;
    std::vector<void *> workspace; /* pool blocks given back during the capture */
    int64_t workspace_bytes = 0;
    int64_t nodes = 0;
};

/* The capture whose ops fail on this thread: a failure is remembered, and ends the capture with an error. */
static thread_local memra_cuda_capture * failing_capture;

void memra_cuda_capture_note_failure(int status, const char * message) {
    memra_cuda_capture * capture = failing_capture;
    if (!capture || capture->failed_status != MEMRA_CUDA_OK) return;
    capture->failed_status = status;
    snprintf(capture->failed_message, sizeof capture->failed_message, "%s", message);
}

/* ---- hooks of the staging, allocator and launchers (cuda-internal.cuh) ---- */

int memra_cuda_capture_stage(const char * function, memra_cuda * cuda, int count, const void * const * hosts, const int64_t * bytes, const void ** devices) {
    memra_cuda_capture * capture = cuda->capture;
    for (int i = 0; i < count; i++) {
        devices[i] = NULL;
        if (bytes[i] < 0) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: negative index array size", function);
        if (bytes[i] == 0) continue;
        if (!hosts[i]) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: a host index array is NULL", function);
        for (const graph_input & input : capture->inputs) {
            if (input.host == hosts[i] && input.bytes == bytes[i]) devices[i] = input.device;
        }
        if (devices[i]) continue;
        graph_input input = {hosts[i], bytes[i], nullptr, nullptr, false};
        /* In the inputs' buffers when it fits (allocated by the first input of the capture). */
        const int64_t offset = (capture->arena.used + 15) / 16 * 16;
        if (cuda->graph_input_copy && offset + bytes[i] <= MEMRA_CUDA_GRAPH_INPUT_BYTES) {
            if (!capture->arena.pinned) {
                CUDA_CHECK(function, cudaMallocHost(&capture->arena.pinned, MEMRA_CUDA_GRAPH_INPUT_BYTES));
                capture->arena.device = memra_cuda_alloc(cuda, MEMRA_CUDA_GRAPH_INPUT_BYTES);
                if (!capture->arena.device) {
                    cudaFreeHost(capture->arena.pinned);
                    capture->arena.pinned = nullptr;
                    return memra_cuda_last_status();
                }
            }
            input.pinned = (char *)capture->arena.pinned + offset;
            input.device = (char *)capture->arena.device + offset;
            input.in_arena = true;
            try {
                capture->inputs.push_back(input);
            } catch (...) {
                FAIL(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
            }
            capture->arena.used = offset + bytes[i];
            memcpy(input.pinned, hosts[i], (size_t)bytes[i]);
            devices[i] = input.device;
            continue;
        }
        CUDA_CHECK(function, cudaMallocHost(&input.pinned, (size_t)bytes[i]));
        input.device = memra_cuda_alloc(cuda, bytes[i]);
        if (!input.device) {
            cudaFreeHost(input.pinned);
            return memra_cuda_last_status();
        }
        try {
            capture->inputs.push_back(input);
        } catch (...) {
            cudaFreeHost(input.pinned);
            memra_cuda_free(cuda, input.device);
            FAIL(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
        }
        memcpy(input.pinned, hosts[i], (size_t)bytes[i]);
        CUDA_CHECK(function, cudaMemcpyAsync(input.device, input.pinned, (size_t)bytes[i], cudaMemcpyHostToDevice, cuda->stream));
        devices[i] = input.device;
    }
    return MEMRA_CUDA_OK;
}

const void * memra_cuda_capture_host_copy(memra_cuda * cuda, const void * device) {
    for (const graph_input & input : cuda->capture->inputs) {
        if (input.device == device) return input.pinned;
    }
    return NULL;
}

int memra_cuda_capture_check(const char * function, memra_cuda * cuda, std::function<int()> check) {
    try {
        cuda->capture->checks.push_back(std::move(check));
    } catch (...) {
        FAIL(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
    }
    return MEMRA_CUDA_OK;
}

void * memra_cuda_capture_reuse(memra_cuda * cuda, int64_t size_class) {
    for (pool_block & block : cuda->capture->pool) {
        if (block.given_back && block.size_class == size_class) {
            block.given_back = false;
            return block.pointer;
        }
    }
    return NULL;
}

int memra_cuda_capture_track(memra_cuda * cuda, void * pointer, int64_t size_class) {
    try {
        cuda->capture->pool.push_back(pool_block{pointer, size_class, false});
    } catch (...) {
        return 0;
    }
    return 1;
}

int memra_cuda_capture_give_back(memra_cuda * cuda, void * pointer) {
    for (pool_block & block : cuda->capture->pool) {
        if (block.pointer == pointer && !block.given_back) {
            block.given_back = true;
            return 1;
        }
    }
    return 0;
}

/* ---- the API ---- */

/* Frees inputs' buffers (those of their own, then the shared ones). */
static void free_inputs(memra_cuda * cuda, const std::vector<graph_input> & inputs, const input_arena & arena) {
    for (const graph_input & input : inputs) {
        if (input.in_arena) continue;
        cudaFreeHost(input.pinned);
        memra_cuda_free(cuda, input.device);
    }
    if (arena.pinned) cudaFreeHost(arena.pinned);
    if (arena.device) memra_cuda_free(cuda, arena.device);
}

/* Frees what a capture holds (its inputs and its pool's given-back blocks); the context no longer captures. */
static void discard_capture(memra_cuda * cuda, memra_cuda_capture * capture) {
    free_inputs(cuda, capture->inputs, capture->arena);
    for (const pool_block & block : capture->pool) {
        if (block.given_back) memra_cuda_free(cuda, block.pointer);
    }
    delete capture;
}

static void destroy_graph(memra_cuda * cuda, memra_cuda_graph * graph) {
    if (graph->done) cudaEventSynchronize(graph->done);
    if (graph->exec) cudaGraphExecDestroy(graph->exec);
    if (graph->done) cudaEventDestroy(graph->done);
    free_inputs(cuda, graph->inputs, graph->arena);
    for (void * block : graph->workspace) memra_cuda_free(cuda, block);
    delete graph;
}

void memra_cuda_graphs_release(memra_cuda * cuda) {
    if (cuda->capture) {
        cudaGraph_t graph = NULL;
        if (cudaStreamEndCapture(cuda->stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
        cudaGetLastError();
        if (failing_capture == cuda->capture) failing_capture = NULL;
        memra_cuda_capture * capture = cuda->capture;
        cuda->capture = NULL;
        discard_capture(cuda, capture);
    }
    if (cuda->graphs) {
        for (memra_cuda_graph * graph : *cuda->graphs) destroy_graph(cuda, graph);
        delete cuda->graphs;
        cuda->graphs = NULL;
    }
}

/* `graph` is one of the context's graphs (not destroyed, not another context's): checked before it is dereferenced. */
static bool live_graph(memra_cuda * cuda, const memra_cuda_graph * graph) {
    if (!graph || !cuda->graphs) return false;
    for (const memra_cuda_graph * candidate : *cuda->graphs) {
        if (candidate == graph) return true;
    }
    return false;
}

extern "C" int memra_cuda_graph_begin(memra_cuda * cuda) {
    static const char function[] = "memra_cuda_graph_begin";
    CHECK(memra_cuda_enter(function, cuda));
    if (cuda->capture) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: the context is already capturing a graph", function);
    /* Nothing staged before the capture may be recycled by it: start from an idle stream. */
    CHECK(memra_cuda_wait(function, cuda));
    if (!cuda->graphs) {
        cuda->graphs = new (std::nothrow) std::vector<memra_cuda_graph *>();
        if (!cuda->graphs) FAIL(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
    }
    memra_cuda_capture * capture = new (std::nothrow) memra_cuda_capture();
    if (!capture) FAIL(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
    /* Relaxed: the pool's first allocations (cudaMalloc) happen during the capture. */
    const cudaError_t error = cudaStreamBeginCapture(cuda->stream, cudaStreamCaptureModeRelaxed);
    if (error != cudaSuccess) {
        delete capture;
        return memra_cuda_fail_cuda(error, function, "cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed)");
    }
    cuda->capture = capture;
    failing_capture = capture;
    return MEMRA_CUDA_OK;
}

/* Ends the capture; `keep` 0 discards it (memra_cuda_graph_abort). */
static int end_capture(const char * function, memra_cuda * cuda, memra_cuda_graph ** out, bool keep) {
    CHECK(memra_cuda_enter(function, cuda));
    if (!cuda->capture) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: the context is not capturing a graph", function);
    memra_cuda_capture * capture = cuda->capture;
    cuda->capture = NULL;
    if (failing_capture == capture) failing_capture = NULL;
    cudaGraph_t graph = NULL;
    const cudaError_t ended = cudaStreamEndCapture(cuda->stream, &graph);
    int status = MEMRA_CUDA_OK;
    if (!keep) {
        /* discarded: nothing to report */
    } else if (capture->failed_status != MEMRA_CUDA_OK) {
        status = memra_cuda_fail(capture->failed_status, "%s: an op failed while capturing, so the graph would lack it: %s", function, capture->failed_message);
    } else if (ended != cudaSuccess) {
        status = memra_cuda_fail_cuda(ended, function, "cudaStreamEndCapture(stream, &graph)");
    }
    if (ended != cudaSuccess) cudaGetLastError();
    memra_cuda_graph * result = NULL;
    if (keep && status == MEMRA_CUDA_OK) {
        /* Everything that can fail first; then the capture's inputs, checks and pool move over. */
        size_t nodes = 0;
        cudaGraphExec_t exec = NULL;
        cudaEvent_t done = NULL;
        cudaError_t error = cudaGraphGetNodes(graph, NULL, &nodes);
        if (error == cudaSuccess) error = cudaGraphInstantiate(&exec, graph, 0);
        if (error == cudaSuccess) error = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
        if (error != cudaSuccess) status = memra_cuda_fail_cuda(error, function, "instantiating the captured graph");
        if (status == MEMRA_CUDA_OK) {
            try {
                result = new memra_cuda_graph();
                result->workspace.reserve(capture->pool.size());
                cuda->graphs->reserve(cuda->graphs->size() + 1);
            } catch (...) {
                delete result;
                result = NULL;
                status = memra_cuda_fail(MEMRA_CUDA_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
            }
        }
        if (status != MEMRA_CUDA_OK) {
            if (exec) cudaGraphExecDestroy(exec);
            if (done) cudaEventDestroy(done);
        } else {
            result->cuda = cuda;
            result->exec = exec;
            result->done = done;
            result->nodes = (int64_t)nodes;
            result->inputs.swap(capture->inputs);
            result->arena = capture->arena;
            capture->arena = input_arena(); /* the graph's now, not the capture's to free */
            result->checks.swap(capture->checks);
            for (pool_block & block : capture->pool) {
                if (!block.given_back) continue;
                result->workspace.push_back(block.pointer);
                result->workspace_bytes += block.size_class;
                block.given_back = false; /* the graph's now, not the capture's to free */
            }
            cuda->graphs->push_back(result);
        }
    }
    if (graph) cudaGraphDestroy(graph);
    discard_capture(cuda, capture);
    if (out) *out = result;
    return status;
}

extern "C" int memra_cuda_graph_end(memra_cuda * cuda, memra_cuda_graph ** graph) {
    static const char function[] = "memra_cuda_graph_end";
    if (!graph) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: graph is NULL", function);
    *graph = NULL;
    return end_capture(function, cuda, graph, true);
}

extern "C" int memra_cuda_graph_abort(memra_cuda * cuda) {
    static const char function[] = "memra_cuda_graph_abort";
    CHECK(memra_cuda_enter(function, cuda));
    if (!cuda->capture) return MEMRA_CUDA_OK;
    return end_capture(function, cuda, NULL, false);
}

extern "C" int memra_cuda_graph_info(memra_cuda * cuda, memra_cuda_graph * graph, int64_t * inputs, int64_t * nodes, int64_t * workspace_bytes) {
    static const char function[] = "memra_cuda_graph_info";
    if (!cuda) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: cuda is NULL", function);
    if (!live_graph(cuda, graph)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %p is not a live graph of this context", function, (void *)graph);
    if (inputs) *inputs = (int64_t)graph->inputs.size();
    if (nodes) *nodes = graph->nodes;
    if (workspace_bytes) *workspace_bytes = graph->workspace_bytes;
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_graph_input(memra_cuda * cuda, memra_cuda_graph * graph, int64_t index, uint64_t * host, int64_t * bytes) {
    static const char function[] = "memra_cuda_graph_input";
    if (!cuda) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: cuda is NULL", function);
    if (!live_graph(cuda, graph)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %p is not a live graph of this context", function, (void *)graph);
    if (index < 0 || index >= (int64_t)graph->inputs.size()) {
        FAIL(MEMRA_CUDA_ERROR_OUT_OF_RANGE, "%s: input %lld of a graph with %zu inputs", function, (long long)index, graph->inputs.size());
    }
    if (host) *host = (uint64_t)(uintptr_t)graph->inputs[(size_t)index].host;
    if (bytes) *bytes = graph->inputs[(size_t)index].bytes;
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_graph_replay(memra_cuda * cuda, memra_cuda_graph * graph, const uint64_t * hosts, const int64_t * bytes, int64_t count) {
    static const char function[] = "memra_cuda_graph_replay";
    CHECK(memra_cuda_enter(function, cuda));
    if (!live_graph(cuda, graph)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %p is not a live graph of this context", function, (void *)graph);
    if (cuda->capture) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: the context is capturing a graph", function);
    if (count != (int64_t)graph->inputs.size()) {
        FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: the graph has %zu inputs, %lld given", function, graph->inputs.size(), (long long)count);
    }
    if (count > 0 && (!hosts || !bytes)) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: hosts or bytes is NULL", function);
    for (int64_t i = 0; i < count; i++) {
        const graph_input & input = graph->inputs[(size_t)i];
        if (bytes[i] != input.bytes) {
            FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: input %lld holds %lld bytes, the graph was captured with %lld", function, (long long)i,
                 (long long)bytes[i], (long long)input.bytes);
        }
        if (!hosts[i]) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: input %lld is NULL", function, (long long)i);
    }
    /* The previous replay's copies out of the pinned inputs have run. */
    CUDA_CHECK(function, cudaEventSynchronize(graph->done));
    for (int64_t i = 0; i < count; i++) {
        const graph_input & input = graph->inputs[(size_t)i];
        memcpy(input.pinned, (const void *)(uintptr_t)hosts[i], (size_t)input.bytes);
    }
    for (const std::function<int()> & check : graph->checks) CHECK(check());
    if (graph->arena.used > 0) {
        CUDA_CHECK(function, cudaMemcpyAsync(graph->arena.device, graph->arena.pinned, (size_t)graph->arena.used, cudaMemcpyHostToDevice, cuda->stream));
    }
    CUDA_CHECK(function, cudaGraphLaunch(graph->exec, cuda->stream));
    CUDA_CHECK(function, cudaEventRecord(graph->done, cuda->stream));
    return MEMRA_CUDA_OK;
}

extern "C" int memra_cuda_graph_destroy(memra_cuda * cuda, memra_cuda_graph * graph) {
    static const char function[] = "memra_cuda_graph_destroy";
    if (!graph) return MEMRA_CUDA_OK;
    CHECK(memra_cuda_enter(function, cuda));
    if (cuda->capture) FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: the context is capturing a graph", function);
    for (size_t i = 0; cuda->graphs && i < cuda->graphs->size(); i++) {
        if ((*cuda->graphs)[i] != graph) continue;
        cuda->graphs->erase(cuda->graphs->begin() + (long)i);
        destroy_graph(cuda, graph);
        return MEMRA_CUDA_OK;
    }
    FAIL(MEMRA_CUDA_ERROR_INVALID_ARGUMENT, "%s: %p is not a live graph of this context (destroyed twice?)", function, (void *)graph);
}
