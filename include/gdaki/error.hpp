// gdaki::error: the exception the control path throws. It carries one value of the closed
// status vocabulary (status.hpp) and a message that names the object and the cause, e.g.
// "qp 0x000102 on soft0: modify INIT->RTR: missing attribute dest_qp_num". The data path
// never throws; it returns status values instead.
#pragma once

#include <stdexcept>
#include <string>

#include "gdaki/status.hpp"

namespace gdaki {

class error : public std::runtime_error {
 public:
  // code: the status class of the failure (never ok). what: object and cause, in words.
  error(status code, const std::string& what) : std::runtime_error(what), code_(code) {}

  // Returns the status class of the failure.
  status code() const noexcept { return code_; }

 private:
  status code_;
};

}  // namespace gdaki
