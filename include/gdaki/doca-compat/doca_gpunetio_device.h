/*
 * doca_gpunetio_device.h: every DOCA GPUNetIO device header at once (common types, QP
 * building blocks, CQ polling, one-sided calls, counters), as DOCA's umbrella device
 * header offers them; gdaki's implementation (see each header). C++ (nvcc or g++).
 */
#ifndef GDAKI_DOCA_GPUNETIO_DEVICE_H
#define GDAKI_DOCA_GPUNETIO_DEVICE_H
#include "doca_gpunetio_dev_verbs_common.cuh"
#include "doca_gpunetio_dev_verbs_counter.cuh"
#include "doca_gpunetio_dev_verbs_cq.cuh"
#include "doca_gpunetio_dev_verbs_onesided.cuh"
#include "doca_gpunetio_dev_verbs_qp.cuh"
#endif
