/*
 * A stand-in for NVIDIA's libdoca_gpunetio.so, built by the SDK mode test
 * (sdk_mode_test.cpp). Its GPU handle and memory are recognisable fake addresses that are
 * never dereferenced; each call checks it was given its own handle (not gdaki's wrapper),
 * and counts its calls. doca_gpu_verbs_check_host_version is left out: gdaki must serve it.
 */
#include <stddef.h>
#include <stdint.h>

#include "doca_error.h"

#define STANDIN_GPU ((void *)(uintptr_t)0x5d0c0001u)
#define STANDIN_MEM ((void *)(uintptr_t)0x5d0c1000u)

int standin_gpunetio_calls = 0;

doca_error_t doca_gpu_create(const char *gpu_bus_id, void **gpu_dev) {
  ++standin_gpunetio_calls;
  if (gpu_bus_id == NULL || gpu_dev == NULL) return DOCA_ERROR_INVALID_VALUE;
  *gpu_dev = STANDIN_GPU;
  return DOCA_SUCCESS;
}

doca_error_t doca_gpu_mem_alloc(void *gpu_dev, size_t size, size_t alignment, int mtype, void **memptr_gpu,
                                void **memptr_cpu) {
  (void)size;
  (void)alignment;
  (void)mtype;
  ++standin_gpunetio_calls;
  if (gpu_dev != STANDIN_GPU || memptr_gpu == NULL) return DOCA_ERROR_INVALID_VALUE;
  *memptr_gpu = STANDIN_MEM;
  if (memptr_cpu != NULL) *memptr_cpu = NULL;
  return DOCA_SUCCESS;
}

doca_error_t doca_gpu_mem_free(void *gpu_dev, void *memptr_gpu) {
  ++standin_gpunetio_calls;
  return gpu_dev == STANDIN_GPU && memptr_gpu == STANDIN_MEM ? DOCA_SUCCESS : DOCA_ERROR_INVALID_VALUE;
}

doca_error_t doca_gpu_destroy(void *gpu_dev) {
  ++standin_gpunetio_calls;
  return gpu_dev == STANDIN_GPU ? DOCA_SUCCESS : DOCA_ERROR_INVALID_VALUE;
}
