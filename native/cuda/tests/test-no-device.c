/*
 * libmemra_cuda without a GPU (or without a driver): the library loads, answers the questions that
 * need no GPU, and every entry point that does returns an error code with a message naming the
 * problem; nothing aborts. On a machine with a GPU the device checks are reported and skipped.
 * Usage: test-no-device path/to/libmemra_cuda.so
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "memra_cuda.h"

static int failures = 0;
#define EXPECT(condition)                                                         \
    do {                                                                          \
        if (!(condition)) {                                                       \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #condition); \
            failures++;                                                           \
        }                                                                         \
    } while (0)

#define LOAD(name) __typeof__(&name) p_##name = (__typeof__(&name))dlsym(library, #name); EXPECT(p_##name != NULL); if (!p_##name) return 1

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s libmemra_cuda.so\n", argv[0]);
        return 2;
    }
    void * library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        fprintf(stderr, "dlopen failed: %s\n", dlerror());
        return 1;
    }
    LOAD(memra_cuda_version); LOAD(memra_cuda_abi_version); LOAD(memra_cuda_last_error); LOAD(memra_cuda_last_status); LOAD(memra_cuda_supports);
    LOAD(memra_cuda_device_count); LOAD(memra_cuda_create); LOAD(memra_cuda_destroy); LOAD(memra_cuda_alloc); LOAD(memra_cuda_free);
    LOAD(memra_cuda_upload); LOAD(memra_cuda_download); LOAD(memra_cuda_add); LOAD(memra_cuda_matmul); LOAD(memra_cuda_paged_attention);
    LOAD(memra_cuda_moe_route); LOAD(memra_cuda_synchronize); LOAD(memra_cuda_plan_matmul); LOAD(memra_cuda_embedding); LOAD(memra_cuda_repack); LOAD(memra_cuda_repacked_type_of);
    LOAD(memra_cuda_graph_begin); LOAD(memra_cuda_graph_end); LOAD(memra_cuda_graph_abort); LOAD(memra_cuda_graph_info);
    LOAD(memra_cuda_graph_input); LOAD(memra_cuda_graph_replay); LOAD(memra_cuda_graph_destroy);

    EXPECT(p_memra_cuda_abi_version() == MEMRA_CUDA_ABI_VERSION);
    EXPECT(strlen(p_memra_cuda_version()) >= 5);
    EXPECT(p_memra_cuda_supports(MEMRA_CUDA_OP_MATMUL, 8) == 1);
    EXPECT(p_memra_cuda_supports(MEMRA_CUDA_OP_MATMUL, 16) == 1); /* iq2_xxs */
    EXPECT(p_memra_cuda_supports(MEMRA_CUDA_OP_MATMUL, 34) == 0); /* tq1_0 */
    EXPECT(p_memra_cuda_supports(MEMRA_CUDA_OP_ADD, MEMRA_CUDA_NO_WEIGHT_TYPE) == 1);
    EXPECT(p_memra_cuda_supports(99, MEMRA_CUDA_NO_WEIGHT_TYPE) == 0);
    int64_t plan[7];
    EXPECT(p_memra_cuda_plan_matmul(8, 1, 4096, 4096, plan, 7) == MEMRA_CUDA_OK && plan[0] == 1 && plan[1] == 1024);
    EXPECT(p_memra_cuda_plan_matmul(34, 1, 4096, 4096, plan, 7) == MEMRA_CUDA_ERROR_UNSUPPORTED_TYPE);
    /* q8_0 prefill: the int8 GEMM, 128 × 128 tiles of 256 threads (128 tiles: one wave of an H200's 132 SMs, unsplit; a 64-row
     * batch of them: 4 split-K parts, a wave of 16 k-tiles); q4_K: the 64 × 64 code GEMM */
    EXPECT(p_memra_cuda_plan_matmul(8, 512, 4096, 4096, plan, 7) == MEMRA_CUDA_OK && plan[0] == 2 && plan[1] == 32 && plan[2] == 4 && plan[3] == 1 && plan[4] == 256);
    EXPECT(p_memra_cuda_plan_matmul(8, 64, 4096, 4096, plan, 7) == MEMRA_CUDA_OK && plan[0] == 2 && plan[1] == 32 && plan[2] == 1 && plan[3] == 4);
    EXPECT(p_memra_cuda_plan_matmul(12, 512, 4096, 4096, plan, 7) == MEMRA_CUDA_OK && plan[0] == 2 && plan[1] == 64 && plan[2] == 8 && plan[4] == 128);

    /* A NULL context is an argument error on every entry point, before any CUDA call. */
    float host[4] = {0};
    EXPECT(p_memra_cuda_add(NULL, host, 4, host, 4, host, 4, 4) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(p_memra_cuda_last_error(), "memra_cuda_add: cuda is NULL") != NULL);
    EXPECT(p_memra_cuda_matmul(NULL, host, 4, host, 4, 1, 8, host, 16, 32, 1) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(p_memra_cuda_upload(NULL, host, host, 16) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(p_memra_cuda_repack(NULL, 8, host, 272, 1, 256) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(p_memra_cuda_last_error(), "memra_cuda_repack: cuda is NULL") != NULL);
    EXPECT(p_memra_cuda_repacked_type_of(8, 512) == 200 && p_memra_cuda_repacked_type_of(14, 4096) == 201 && p_memra_cuda_repacked_type_of(14, 1024) == 14);
    EXPECT(p_memra_cuda_download(NULL, host, host, 16) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(p_memra_cuda_synchronize(NULL) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(p_memra_cuda_alloc(NULL, 16) == NULL);
    EXPECT(p_memra_cuda_free(NULL, NULL) == MEMRA_CUDA_OK);
    /* graphs: a NULL context or graph is an error code, never a crash */
    memra_cuda_graph * graph = (memra_cuda_graph *)host; /* not a graph: must not be dereferenced */
    EXPECT(p_memra_cuda_graph_begin(NULL) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(p_memra_cuda_graph_end(NULL, NULL) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(p_memra_cuda_graph_end(NULL, &graph) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT && graph == NULL);
    EXPECT(p_memra_cuda_graph_abort(NULL) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(p_memra_cuda_graph_info(NULL, NULL, NULL, NULL, NULL) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(p_memra_cuda_graph_input(NULL, NULL, 0, NULL, NULL) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(p_memra_cuda_graph_replay(NULL, (memra_cuda_graph *)host, NULL, NULL, 0) == MEMRA_CUDA_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(p_memra_cuda_last_error(), "memra_cuda_graph_replay: cuda is NULL") != NULL);
    EXPECT(p_memra_cuda_graph_destroy(NULL, NULL) == MEMRA_CUDA_OK);
    p_memra_cuda_destroy(NULL);

    int32_t count = -1;
    const int status = p_memra_cuda_device_count(&count);
    if (status == MEMRA_CUDA_OK) {
        printf("test-no-device: %d CUDA device(s) present: device checks skipped\n", count);
    } else {
        EXPECT(status == MEMRA_CUDA_ERROR_NO_DEVICE);
        EXPECT(count == 0);
        const char * message = p_memra_cuda_last_error();
        printf("test-no-device: memra_cuda_device_count: %s\n", message);
        EXPECT(strstr(message, "no usable CUDA device") != NULL || strstr(message, "no CUDA-capable device") != NULL);
        memra_cuda * cuda = p_memra_cuda_create(0);
        EXPECT(cuda == NULL);
        EXPECT(p_memra_cuda_last_status() == MEMRA_CUDA_ERROR_NO_DEVICE);
        EXPECT(strstr(p_memra_cuda_last_error(), "memra_cuda_device_count") != NULL);
        /* Asking twice gives the same answer (the runtime's error is not sticky for us). */
        EXPECT(p_memra_cuda_device_count(&count) == MEMRA_CUDA_ERROR_NO_DEVICE);
    }
    if (failures) {
        fprintf(stderr, "test-no-device: %d failure(s)\n", failures);
        return 1;
    }
    printf("test-no-device: all checks passed\n");
    return 0;
}
