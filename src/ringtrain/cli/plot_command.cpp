// `ringtrain plot METRICS -o curves.png`: draws a run's loss, test accuracy and throughput curves.
#include <cstdio>

#include "ringtrain/cli/commands.h"
#include "ringtrain/cli/options.h"
#include "ringtrain/core/error.h"
#include "ringtrain/train/plot.h"

namespace ringtrain::cli {

int plot_command(int argc, char** argv, int first) {
  Options opt("ringtrain plot METRICS_FILE [-o curves.png]",
              "Draws the curves of a metrics file written by `ringtrain train --metrics FILE`: training loss,\n"
              "test accuracy at the end of each epoch, and throughput, as one PNG.");
  opt.allow_positionals("METRICS_FILE");
  opt.add("o", "curves.png", "PNG file to write");
  opt.add("title", "", "figure title (default: the metrics file's name)");
  // "-o FILE" as well as "--o FILE".
  for (int i = first; i < argc; ++i)
    if (std::string(argv[i]) == "-o") argv[i] = const_cast<char*>("--o");
  if (!opt.parse(argc, argv, first)) return 0;
  check(opt.positionals().size() == 1, "plot needs exactly one metrics file (see --help)");
  const std::string path = opt.positionals()[0];
  const std::string title = opt.str("title").empty() ? "ringtrain: " + path : opt.str("title");
  train::plot_metrics(train::read_metrics(path), title).write_png(opt.str("o"));
  std::printf("wrote %s\n", opt.str("o").c_str());
  return 0;
}

}  // namespace ringtrain::cli
