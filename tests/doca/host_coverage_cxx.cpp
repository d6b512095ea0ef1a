#include "host_coverage.c"
