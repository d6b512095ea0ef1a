/*
 * doca_gpunetio.h: the name the open DOCA GPUNetIO rebuild uses for its host header;
 * the same declarations as doca_gpunetio_host.h (gdaki's DOCA-compatible API).
 */
#ifndef GDAKI_DOCA_GPUNETIO_H
#define GDAKI_DOCA_GPUNETIO_H
#include "doca_gpunetio_host.h"
#endif
