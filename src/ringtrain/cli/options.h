// A command's options: a thin adapter over CLI11 (Debian's libcli11-dev), which parses argv and
// generates --help. Every option is declared with its default and help text, so --help lists every
// option with its default; values are kept as text and converted by the typed accessors, whose errors
// are one line naming the option.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ringtrain::cli {

class Options {
 public:
  Options(std::string usage, std::string summary);
  ~Options();
  Options(Options&&) noexcept;
  Options& operator=(Options&&) noexcept;

  // A valued option "--name VALUE" (also "--name=VALUE"); given twice, the last one counts.
  void add(const std::string& name, const std::string& default_value, const std::string& help);
  // A boolean flag "--name" (default off; takes no value).
  void add_flag(const std::string& name, const std::string& help);
  // Allows positional arguments (otherwise any is an error).
  void allow_positionals(const std::string& what);

  // Parses argv[first..argc). Returns false after printing help for --help/-h.
  // Throws Error for unknown options, missing values and unexpected positionals.
  bool parse(int argc, char** argv, int first = 1);

  std::string str(const std::string& name) const;
  int64_t integer(const std::string& name) const;  // whole number or error naming the option
  double number(const std::string& name) const;    // finite number or error naming the option
  // The same, also refusing a value outside [min, max] with an error naming the option and the range.
  int64_t integer(const std::string& name, int64_t min, int64_t max) const;
  double number(const std::string& name, double min, double max) const;
  bool flag(const std::string& name) const;
  bool given(const std::string& name) const;       // set on the command line (not the default)
  const std::vector<std::string>& positionals() const;
  std::string help() const;

 private:
  struct Parser;  // the CLI::App and the variables it writes to (options.cpp), on the heap so that they
                  // keep their addresses when an Options is moved
  const std::string& value(const std::string& name) const;
  std::unique_ptr<Parser> parser_;
};

}  // namespace ringtrain::cli
