#include "ringtrain/train/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>

namespace ringtrain::train {

namespace {
std::string clock_text(double seconds) {
  char buf[32];
  long s = long(seconds + 0.5);
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}
}  // namespace

bool stdout_is_terminal() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDOUT_FILENO) && !(term && std::strcmp(term, "dumb") == 0);
}

Progress::Progress(std::ostream& out, bool terminal, int log_every, bool quiet)
    : out_(out), terminal_(terminal), quiet_(quiet), log_every_(log_every) {}

void Progress::clear_bar() {
  if (bar_drawn_) out_ << "\r\033[2K" << std::flush;
  bar_drawn_ = false;
}

void Progress::step(int epoch, int64_t batch, int64_t total, double loss, double rate) {
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  if (batch == 1) epoch_start_ = now;
  if (!terminal_) {
    if (log_every_ > 0 && batch % log_every_ == 0) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "epoch %d batch %lld/%lld loss %.4f samples/s %.0f", epoch + 1, (long long)batch,
                    (long long)total, loss, rate);
      out_ << buf << std::endl;
    }
    return;
  }
  // Redraw at most ten times a second, and always for the last batch.
  if (batch != total && bar_drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - epoch_start_).count();
  const double eta = batch > 0 ? elapsed / double(batch) * double(total - batch) : 0.0;
  constexpr int kWidth = 30;
  const int filled = int(kWidth * batch / std::max<int64_t>(total, 1));
  std::string bar(std::size_t(filled), '#');
  bar.resize(kWidth, '.');
  char buf[200];
  std::snprintf(buf, sizeof buf, "\r\033[2Kepoch %d [%s] %lld/%lld %.0f samples/s loss %.4f ETA %s", epoch + 1,
                bar.c_str(), (long long)batch, (long long)total, rate, loss, clock_text(eta).c_str());
  out_ << buf << std::flush;
  bar_drawn_ = true;
}

void Progress::epoch_done(const std::string& summary) {
  clear_bar();
  out_ << summary << std::endl;
}

void Progress::message(const std::string& line) {
  clear_bar();
  out_ << line << std::endl;
}

}  // namespace ringtrain::train
