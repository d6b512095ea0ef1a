// put_bw as nvcc builds it for sm_90 (compile only: no GPU here), with one
// instantiation of its __global__ kernel, so the kernel as a DOCA program
// launches it is checked as device code.
#include "put_bw.cpp"
namespace {
template __global__ void put_bw_kernel<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
                                       DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO, DOCA_GPUNETIO_VERBS_EXEC_SCOPE_WARP>(
    kernel_args);
}
