#include "device_coverage.cu"
