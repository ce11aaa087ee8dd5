// The subcommands of `ringtrain`. Each takes the full argv and the index of its first own argument,
// and returns the process exit code. Errors are thrown as ringtrain::Error and reported by main.
#pragma once

namespace ringtrain::cli {

int train_command(int argc, char** argv, int first);
int eval_command(int argc, char** argv, int first);
int export_command(int argc, char** argv, int first);
int data_command(int argc, char** argv, int first);
int plot_command(int argc, char** argv, int first);
int bench_command(int argc, char** argv, int first);

}  // namespace ringtrain::cli
