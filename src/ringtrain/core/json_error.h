// One line describing an nlohmann-json exception, for ringtrain's "<file>: <what is wrong>" errors.
#pragma once
#include <exception>
#include <string>

namespace ringtrain {

// e.what() without nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 6: " prefix
// and without the token it quotes ("; last read: '...'"): that may be raw bytes, or a whole 100 MB string
// (other quotes are cut at 200 characters).
std::string json_error_text(const std::exception& e);

}  // namespace ringtrain
