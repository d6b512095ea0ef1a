// write_bw as nvcc builds it for sm_90, with its kernel instantiated (compile only).
#include "write_bw.cpp"
namespace {
template __global__ void write_bw_kernel<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_CTA>(kernel_args);
}
