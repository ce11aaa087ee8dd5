// A small command-line option parser: every option is declared with its default and help text, so
// --help always lists every option with its default, and a value that does not parse is a one-line
// error naming the option.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ringtrain::cli {

class Options {
 public:
  Options(std::string usage, std::string summary);

  // A valued option "--name VALUE" (also "--name=VALUE").
  void add(const std::string& name, const std::string& default_value, const std::string& help);
  // A boolean flag "--name" (default off).
  void add_flag(const std::string& name, const std::string& help);
  // Allows positional arguments (otherwise any is an error).
  void allow_positionals(const std::string& what) { positionals_name_ = what; }

  // Parses argv[first..argc). Returns false after printing help for --help/-h.
  // Throws Error for unknown options, missing values and unexpected positionals.
  bool parse(int argc, char** argv, int first = 1);

  std::string str(const std::string& name) const;
  int64_t integer(const std::string& name) const;  // whole number or error naming the option
  double number(const std::string& name) const;    // finite number or error naming the option
  bool flag(const std::string& name) const;
  bool given(const std::string& name) const;       // set on the command line (not the default)
  const std::vector<std::string>& positionals() const { return positionals_; }
  std::string help() const;

 private:
  struct Spec {
    std::string default_value, help;
    bool is_flag = false;
  };
  const Spec& spec(const std::string& name) const;
  std::string usage_, summary_, positionals_name_;
  std::vector<std::string> order_;
  std::map<std::string, Spec> specs_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positionals_;
};

}  // namespace ringtrain::cli
