// Options over CLI11: CLI11 splits argv ("--name VALUE", "--name=VALUE", flags, positionals, "--") and
// generates the help text; this file declares each option to it, lays the help out as ringtrain's
// commands always have (usage, summary, one line an option ending in its default) and turns CLI11's
// parse errors into one-line ringtrain::Errors. Values stay text until a typed accessor converts them.
#include "ringtrain/cli/options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "ringtrain/core/error.h"

namespace ringtrain::cli {

namespace {

constexpr std::size_t kHelpColumn = 26;  // where an option's help text starts

// CLI11's help generator with ringtrain's layout: "usage: ..." first, then the summary, then the options,
// each on one line however long its name (the tests read an option and its default from one line).
class HelpFormatter : public CLI::Formatter {
 public:
  explicit HelpFormatter(std::string usage) : usage_(std::move(usage)) {}

  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const override {
    return "usage: " + usage_ + "\n\n" + app->get_description() + "\n" + make_groups(app, mode);
  }
  // The usage line already names the positionals; they have no options of their own to list.
  std::string make_positionals(const CLI::App*) const override { return ""; }
  std::string make_option(const CLI::Option* opt, bool is_positional) const override {
    std::string left = "  " + make_option_name(opt, is_positional) + make_option_opts(opt);
    left.resize(std::max(left.size() + 2, kHelpColumn), ' ');
    return left + make_option_desc(opt) + "\n";
  }

 private:
  std::string usage_;
};

[[noreturn]] void undeclared(const std::string& name) {
  throw Error("internal: option --" + name + " was never declared");
}

std::string format_bound(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

struct Options::Parser {
  CLI::App app;
  std::map<std::string, std::string> values;  // CLI11 writes an option's text into its entry
  std::vector<std::string> positionals;
};

Options::Options(std::string usage, std::string summary) : parser_(std::make_unique<Parser>()) {
  CLI::App& app = parser_->app;
  app.description(std::move(summary));
  app.formatter(std::make_shared<HelpFormatter>(std::move(usage)));
  // Unclaimed arguments are reported by parse() itself, naming the first one.
  app.allow_extras();
  // Commands re-run themselves with options appended (bench, --max-restarts): the last value given wins.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->group("options");
  app.set_help_flag("-h,--help", "show this help");
}

Options::~Options() = default;
Options::Options(Options&&) noexcept = default;
Options& Options::operator=(Options&&) noexcept = default;

void Options::add(const std::string& name, const std::string& default_value, const std::string& help) {
  parser_->values[name] = default_value;
  parser_->app.add_option("--" + name, parser_->values[name],
                          help + " (default: " + (default_value.empty() ? "none" : default_value) + ")")
      ->type_name("VALUE");
}

void Options::add_flag(const std::string& name, const std::string& help) {
  parser_->app.add_flag("--" + name)->description(help)->disable_flag_override();
}

void Options::allow_positionals(const std::string& what) {
  parser_->app.add_option(what, parser_->positionals)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

bool Options::parse(int argc, char** argv, int first) {
  std::vector<std::string> args(argv + first, argv + argc);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    parser_->app.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::fputs(help().c_str(), stdout);
    return false;
  } catch (const CLI::ParseError& e) {  // a missing value ("--epochs: 1 required VALUE missing"), ...
    throw Error(std::string(e.what()) + " (see --help)");
  }
  for (const std::string& arg : parser_->app.remaining()) {
    if (arg == "--") continue;
    check(arg.empty() || arg[0] != '-', "unknown option " + arg + " (see --help)");
    throw Error("unexpected argument '" + arg + "' (see --help)");
  }
  return true;
}

const std::string& Options::value(const std::string& name) const {
  auto it = parser_->values.find(name);
  if (it == parser_->values.end()) undeclared(name);
  return it->second;
}

std::string Options::str(const std::string& name) const { return value(name); }

int64_t Options::integer(const std::string& name) const {
  const std::string& v = value(name);
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  check(!v.empty() && end && *end == '\0' && errno == 0,
        "option --" + name + ": '" + v + "' is not a whole number");
  return x;
}

double Options::number(const std::string& name) const {
  const std::string& v = value(name);
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  check(!v.empty() && end && *end == '\0' && errno == 0 && std::isfinite(x),
        "option --" + name + ": '" + v + "' is not a finite number");
  return x;
}

int64_t Options::integer(const std::string& name, int64_t min, int64_t max) const {
  const int64_t x = integer(name);
  check(x >= min && x <= max, "--" + name + " must be between " + std::to_string(min) + " and " +
                                  std::to_string(max) + ", got " + value(name));
  return x;
}

double Options::number(const std::string& name, double min, double max) const {
  const double x = number(name);
  check(x >= min && x <= max,
        "--" + name + " must be between " + format_bound(min) + " and " + format_bound(max) + ", got " + value(name));
  return x;
}

bool Options::flag(const std::string& name) const { return given(name); }

bool Options::given(const std::string& name) const {
  const CLI::Option* opt = parser_->app.get_option_no_throw("--" + name);
  if (!opt) undeclared(name);
  return opt->count() > 0;
}

const std::vector<std::string>& Options::positionals() const { return parser_->positionals; }

std::string Options::help() const { return parser_->app.help(); }

}  // namespace ringtrain::cli
