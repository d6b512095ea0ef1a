/*
 * A stand-in for NVIDIA's libdoca_common.so, built by the SDK mode test (sdk_mode_test.cpp):
 * doca_error_get_name answers with a text gdaki never gives, so the test sees whether a
 * call reached it. doca_error_get_descr is left out on purpose: gdaki must serve it.
 */
#include "doca_error.h"

const char *doca_error_get_name(doca_error_t error) {
  return error == DOCA_SUCCESS ? "stand-in: DOCA_SUCCESS" : "stand-in: other";
}
