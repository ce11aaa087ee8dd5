#include "ringtrain/cli/options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "ringtrain/core/error.h"

namespace ringtrain::cli {

Options::Options(std::string usage, std::string summary) : usage_(std::move(usage)), summary_(std::move(summary)) {}

void Options::add(const std::string& name, const std::string& default_value, const std::string& help) {
  order_.push_back(name);
  specs_[name] = {default_value, help, false};
}

void Options::add_flag(const std::string& name, const std::string& help) {
  order_.push_back(name);
  specs_[name] = {"", help, true};
}

const Options::Spec& Options::spec(const std::string& name) const {
  auto it = specs_.find(name);
  if (it == specs_.end()) throw Error("internal: option --" + name + " was never declared");
  return it->second;
}

bool Options::parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      check(!positionals_name_.empty(), "unexpected argument '" + arg + "' (see --help)");
      positionals_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    auto it = specs_.find(name);
    check(it != specs_.end(), "unknown option --" + name + " (see --help)");
    if (it->second.is_flag) {
      check(!inline_value, "option --" + name + " takes no value");
      values_[name] = "1";
      continue;
    }
    if (!inline_value) {
      check(i + 1 < argc, "option --" + name + " needs a value");
      value = argv[++i];
    }
    values_[name] = value;
  }
  return true;
}

std::string Options::str(const std::string& name) const {
  const Spec& s = spec(name);
  auto it = values_.find(name);
  return it != values_.end() ? it->second : s.default_value;
}

int64_t Options::integer(const std::string& name) const {
  std::string v = str(name);
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  check(!v.empty() && end && *end == '\0' && errno == 0,
        "option --" + name + ": '" + v + "' is not a whole number");
  return x;
}

double Options::number(const std::string& name) const {
  std::string v = str(name);
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  check(!v.empty() && end && *end == '\0' && errno == 0 && std::isfinite(x),
        "option --" + name + ": '" + v + "' is not a finite number");
  return x;
}

bool Options::flag(const std::string& name) const {
  spec(name);
  return values_.count(name) > 0;
}

bool Options::given(const std::string& name) const {
  spec(name);
  return values_.count(name) > 0;
}

std::string Options::help() const {
  std::string out = "usage: " + usage_ + "\n\n" + summary_ + "\n\noptions:\n";
  for (const auto& name : order_) {
    const Spec& s = specs_.at(name);
    std::string left = "  --" + name + (s.is_flag ? "" : " VALUE");
    if (left.size() < 26) left.resize(26, ' ');
    else left += "  ";
    out += left + s.help;
    if (!s.is_flag) out += " (default: " + (s.default_value.empty() ? std::string("none") : s.default_value) + ")";
    out += "\n";
  }
  out += "  --help                  show this help\n";
  return out;
}

}  // namespace ringtrain::cli
