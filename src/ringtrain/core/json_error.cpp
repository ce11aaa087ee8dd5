#include "ringtrain/core/json_error.h"

namespace ringtrain {

std::string json_error_text(const std::exception& e) {
  std::string text = e.what();
  if (text.rfind("[json.exception.", 0) == 0 && text.find("] ") != std::string::npos)
    text = text.substr(text.find("] ") + 2);
  if (text.rfind("parse error", 0) == 0 && text.find(": ") != std::string::npos)  // "... at line 1, column 6: "
    text = text.substr(text.find(": ") + 2);
  // "...; last read: '<token>'" possibly followed by "; expected <what>": keep the expectation only.
  if (const std::size_t token = text.find("; last read: '"); token != std::string::npos) {
    const std::size_t expected = text.rfind("'; expected ");
    text = text.substr(0, token) + (expected != std::string::npos && expected > token ? text.substr(expected + 1) : "");
  }
  constexpr std::size_t kMaxChars = 200;  // "number overflow parsing '<token>'" quotes the token too
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars) + "...";
  return text;
}

}  // namespace ringtrain
