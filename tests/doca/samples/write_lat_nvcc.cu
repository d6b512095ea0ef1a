// write_lat as nvcc builds it for sm_90, with its kernel instantiated (compile only).
#include "write_lat.cpp"
namespace {
template __global__ void write_lat_kernel<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE,
                                         DOCA_GPUNETIO_VERBS_NIC_HANDLER_CPU_PROXY>(kernel_args);
}
