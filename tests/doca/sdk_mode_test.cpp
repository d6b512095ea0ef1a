// SDK mode (docs/doca-compat.md, SDK mode): with DOCA_SDK_LIB_PATH naming the stand-in
// libraries this test builds (sdk_standin/), a call the stand-in has reaches it; a symbol or
// library it lacks, or a missing directory, falls back to gdaki with one log line; unset,
// gdaki serves everything. One behaviour per case: `gdaki_doca_sdk_mode <case>`, run by
// ctest with the environment each case needs. Exit 0 = pass, 1 = fail.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "doca_error.h"
#include "doca_gpunetio_host.h"
#include "doca_verbs.h"

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) ++failures;
}

// Runs body with stderr captured; returns what it wrote (and echoes it to the real stderr).
std::string captured_stderr(const std::function<void()>& body) {
  std::fflush(stderr);
  std::FILE* tmp = std::tmpfile();
  const int saved = ::dup(2);
  if (tmp == nullptr || saved < 0 || ::dup2(::fileno(tmp), 2) < 0) {
    std::perror("capturing stderr");
    std::exit(1);
  }
  body();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string text;
  std::rewind(tmp);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), tmp)) > 0;) text.append(buf, n);
  std::fclose(tmp);
  std::fputs(text.c_str(), stderr);
  return text;
}

// Lines of text containing every one of the words.
int lines_with(const std::string& text, std::initializer_list<const char*> words) {
  int n = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    bool all = true;
    for (const char* w : words) all = all && line.find(w) != std::string::npos;
    n += all ? 1 : 0;
    start = end + 1;
  }
  return n;
}

const char* sdk_dir() {
  const char* d = std::getenv("DOCA_SDK_LIB_PATH");
  return d != nullptr ? d : "";
}

// The stand-in's fake GPU handle and memory (sdk_standin/gpunetio.c).
void* const standin_gpu = reinterpret_cast<void*>(uintptr_t{0x5d0c0001u});
void* const standin_mem = reinterpret_cast<void*>(uintptr_t{0x5d0c1000u});

void a_forwarded_call_reaches_the_stand_in() {
  check(std::strcmp(doca_error_get_name(DOCA_SUCCESS), "stand-in: DOCA_SUCCESS") == 0,
        "doca_error_get_name answered by the stand-in libdoca_common.so");
  doca_gpu_t* gpu = nullptr;
  check(doca_gpu_create("0000:00:00.0", &gpu) == DOCA_SUCCESS && gpu != nullptr, "doca_gpu_create succeeds");
  if (gpu == nullptr) return;
  check(gpu->type == DOCA_GPU_LIB_TYPE_SDK && gpu->sdk == standin_gpu,
        "the handle is an SDK handle wrapping the stand-in's own GPU object");
  void* mem_gpu = nullptr;
  void* mem_cpu = nullptr;
  // The stand-in refuses any handle but its own: success shows gdaki unwrapped it.
  check(doca_gpu_mem_alloc(gpu, 4096, 0, DOCA_GPU_MEM_TYPE_GPU_CPU, &mem_gpu, &mem_cpu) == DOCA_SUCCESS &&
            mem_gpu == standin_mem,
        "doca_gpu_mem_alloc reaches the stand-in with its own handle and returns its memory");
  check(doca_gpu_mem_free(gpu, mem_gpu) == DOCA_SUCCESS, "doca_gpu_mem_free reaches the stand-in");
  check(doca_gpu_destroy(gpu) == DOCA_SUCCESS, "doca_gpu_destroy reaches the stand-in (and frees the wrapper)");
}

void handles_do_not_cross_between_gdaki_and_the_sdk() {
  const std::string log = captured_stderr([] {
    // A gdaki handle given to a call the stand-in has: gdaki serves it (and this one is
    // empty, so gdaki refuses it; the stand-in would have answered DOCA_ERROR_INVALID_VALUE
    // too, so the count of stand-in calls is what shows where it went).
    doca_gpu_t gdaki_gpu{};
    gdaki_gpu.type = DOCA_GPU_LIB_TYPE_OPEN;
    gdaki_gpu.open = nullptr;
    void* mem = nullptr;
    void* cpu = nullptr;
    check(doca_gpu_mem_alloc(&gdaki_gpu, 64, 0, DOCA_GPU_MEM_TYPE_GPU_CPU, &mem, &cpu) == DOCA_ERROR_INVALID_VALUE &&
              mem == nullptr,
          "doca_gpu_mem_alloc given a gdaki handle is refused by gdaki");
    // An SDK handle given to a call gdaki serves (libdoca_verbs.so is absent): refused.
    doca_verbs_qp_attr_t sdk_attr{};
    sdk_attr.type = DOCA_VERBS_SDK_LIB_TYPE_SDK;
    sdk_attr.sdk = standin_gpu;
    check(doca_verbs_qp_attr_set_rq_psn(&sdk_attr, 7) == DOCA_ERROR_INVALID_VALUE,
          "a gdaki-served setter refuses a handle the SDK made");
  });
  check(lines_with(log, {"SDK mode", "doca_gpu_mem_alloc was given a handle gdaki made", "gdaki serves"}) == 1,
        "one log line says the SDK call was given a gdaki handle");
  check(lines_with(log, {"doca_gpu_mem_alloc", "not gdaki's"}) == 1, "gdaki's refusal names the call");
}

void a_symbol_the_stand_in_lacks_is_served_by_gdaki_with_one_log_line() {
  const std::string log = captured_stderr([] {
    check(std::strcmp(doca_error_get_descr(DOCA_SUCCESS), "Success") == 0,
          "doca_error_get_descr (not in the stand-in) is gdaki's");
    check(std::strcmp(doca_error_get_descr(DOCA_ERROR_AGAIN), doca_error_get_descr(DOCA_ERROR_AGAIN)) == 0,
          "later calls are gdaki's too");
    check(doca_gpu_verbs_check_host_version(DOCA_GPUNETIO_VERSION) == DOCA_SUCCESS &&
              doca_gpu_verbs_check_host_version(1u << 16) == DOCA_ERROR_UNSUPPORTED_VERSION,
          "doca_gpu_verbs_check_host_version (not in the stand-in) is gdaki's");
  });
  check(lines_with(log, {"DOCA_SDK_LIB_PATH", sdk_dir(), "libdoca_common.so", "no symbol doca_error_get_descr",
                         "gdaki serves"}) == 1,
        "one log line names the directory, the library and the missing symbol");
  check(lines_with(log, {"libdoca_gpunetio.so", "no symbol doca_gpu_verbs_check_host_version"}) == 1,
        "one log line for the missing gpunetio symbol, however often it is called");
}

void a_library_the_directory_lacks_is_served_by_gdaki_with_one_log_line() {
  const std::string log = captured_stderr([] {
    doca_verbs_qp_attr_t* attr = nullptr;
    check(doca_verbs_qp_attr_create(&attr) == DOCA_SUCCESS && attr != nullptr &&
              attr->type == DOCA_VERBS_SDK_LIB_TYPE_OPEN,
          "doca_verbs_qp_attr_create (libdoca_verbs.so absent) makes a gdaki handle");
    if (attr != nullptr) {
      check(doca_verbs_qp_attr_set_rq_psn(attr, 7) == DOCA_SUCCESS, "setters on it are gdaki's");
      check(doca_verbs_qp_attr_destroy(attr) == DOCA_SUCCESS, "doca_verbs_qp_attr_destroy is gdaki's");
    }
  });
  check(lines_with(log, {"DOCA_SDK_LIB_PATH", sdk_dir(), "cannot load libdoca_verbs.so", "gdaki serves"}) == 1,
        "one log line names the directory, the library and why it did not load");
  check(lines_with(log, {"no symbol doca_verbs_"}) == 0, "no per-symbol lines for a library that is absent");
}

void a_missing_directory_falls_back_to_gdaki_with_one_log_line() {
  const std::string log = captured_stderr([] {
    check(std::strcmp(doca_error_get_name(DOCA_SUCCESS), "DOCA_SUCCESS") == 0, "doca_error_get_name is gdaki's");
    doca_gpu_t* gpu = nullptr;
    check(doca_gpu_create("0000:00:00.0", &gpu) == DOCA_SUCCESS && gpu != nullptr &&
              gpu->type == DOCA_GPU_LIB_TYPE_OPEN,
          "doca_gpu_create makes a gdaki handle");
    if (gpu != nullptr) check(doca_gpu_destroy(gpu) == DOCA_SUCCESS, "doca_gpu_destroy is gdaki's");
  });
  check(lines_with(log, {"DOCA_SDK_LIB_PATH", sdk_dir(), "cannot be used", "No such file or directory",
                         "gdaki serves every DOCA host call"}) == 1,
        "one log line names the directory and the cause");
  check(lines_with(log, {"SDK mode"}) == 1, "and no other SDK mode line");
}

void unset_gdaki_serves_everything_without_sdk_log_lines() {
  check(std::getenv("DOCA_SDK_LIB_PATH") == nullptr, "DOCA_SDK_LIB_PATH is unset");
  const std::string log = captured_stderr([] {
    check(std::strcmp(doca_error_get_name(DOCA_SUCCESS), "DOCA_SUCCESS") == 0, "doca_error_get_name is gdaki's");
    check(std::strcmp(doca_error_get_descr(DOCA_SUCCESS), "Success") == 0, "doca_error_get_descr is gdaki's");
    doca_gpu_t* gpu = nullptr;
    check(doca_gpu_create("0000:00:00.0", &gpu) == DOCA_SUCCESS && gpu != nullptr &&
              gpu->type == DOCA_GPU_LIB_TYPE_OPEN,
          "doca_gpu_create makes a gdaki handle");
    if (gpu != nullptr) check(doca_gpu_destroy(gpu) == DOCA_SUCCESS, "doca_gpu_destroy is gdaki's");
    doca_verbs_qp_attr_t* attr = nullptr;
    check(doca_verbs_qp_attr_create(&attr) == DOCA_SUCCESS && attr->type == DOCA_VERBS_SDK_LIB_TYPE_OPEN,
          "doca_verbs_qp_attr_create makes a gdaki handle");
    if (attr != nullptr) doca_verbs_qp_attr_destroy(attr);
  });
  check(lines_with(log, {"SDK mode"}) == 0, "no SDK mode log line");
}

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, void (*)()> cases = {
      {"a_forwarded_call_reaches_the_stand_in", a_forwarded_call_reaches_the_stand_in},
      {"handles_do_not_cross_between_gdaki_and_the_sdk", handles_do_not_cross_between_gdaki_and_the_sdk},
      {"a_symbol_the_stand_in_lacks_is_served_by_gdaki_with_one_log_line",
       a_symbol_the_stand_in_lacks_is_served_by_gdaki_with_one_log_line},
      {"a_library_the_directory_lacks_is_served_by_gdaki_with_one_log_line",
       a_library_the_directory_lacks_is_served_by_gdaki_with_one_log_line},
      {"a_missing_directory_falls_back_to_gdaki_with_one_log_line",
       a_missing_directory_falls_back_to_gdaki_with_one_log_line},
      {"unset_gdaki_serves_everything_without_sdk_log_lines", unset_gdaki_serves_everything_without_sdk_log_lines},
  };
  const auto it = argc == 2 ? cases.find(argv[1]) : cases.end();
  if (it == cases.end()) {
    std::fprintf(stderr, "usage: %s <case>; cases:\n", argv[0]);
    for (const auto& c : cases) std::fprintf(stderr, "  %s\n", c.first.c_str());
    return 2;
  }
  std::printf("DOCA_SDK_LIB_PATH=%s\n", sdk_dir());
  it->second();
  return failures == 0 ? 0 : 1;
}
