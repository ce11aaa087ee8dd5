// Errors: one exception type whose message is a complete one-line explanation
// ("<file or option>: <what is wrong>"). The CLI prints it and exits non-zero.
#pragma once
#include <stdexcept>
#include <string>

namespace ringtrain {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws Error(message) when the condition is false.
inline void check(bool condition, const std::string& message) {
  if (!condition) throw Error(message);
}

}  // namespace ringtrain
