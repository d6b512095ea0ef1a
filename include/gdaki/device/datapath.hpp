// Umbrella for the header-only data path (compiles as nvcc device code, nvcc host code
// and g++ host code).
#pragma once

#include "gdaki/device/arch.hpp"
#include "gdaki/device/cq.hpp"
#include "gdaki/device/dma.hpp"
#include "gdaki/device/handles.hpp"
#include "gdaki/device/ops.hpp"
#include "gdaki/device/ring.hpp"
#include "gdaki/device/sq.hpp"
#include "gdaki/device/twosided.hpp"
#include "gdaki/device/wqe.hpp"
