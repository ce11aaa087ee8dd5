#include "ringtrain/train/pipeline_trace.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "ringtrain/core/error.h"

namespace ringtrain::train {

namespace {
constexpr std::size_t kFields = 7;  // kind, stage, micro, in_pass, step, begin, end
}

std::vector<PipeEvent> gather_pipe_events(const std::vector<PipeEvent>& mine, dist::Communicator& pp) {
  const std::size_t P = std::size_t(pp.size()), s = std::size_t(pp.rank());
  std::vector<int64_t> counts(P, 0);
  counts[s] = int64_t(mine.size());
  pp.allreduce_sum(counts.data(), counts.size());
  std::size_t at = 0, total = 0;  // this stage's first slot; all events
  for (std::size_t r = 0; r < P; ++r) {
    if (r == s) at = total;
    total += std::size_t(counts[r]);
  }
  // Each stage fills its own rows, the others hold zeros: the sum is every stage's rows, exactly.
  std::vector<double> rows(total * kFields, 0.0);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    double* row = rows.data() + (at + i) * kFields;
    const PipeEvent& e = mine[i];
    row[0] = e.kind, row[1] = e.stage, row[2] = e.micro, row[3] = e.in_pass, row[4] = double(e.step);
    row[5] = e.begin, row[6] = e.end;
  }
  pp.allreduce_sum(rows.data(), rows.size());
  std::vector<PipeEvent> all(total);
  for (std::size_t i = 0; i < total; ++i) {
    const double* row = rows.data() + i * kFields;
    all[i] = PipeEvent{int(row[0]), int(row[1]), int(row[2]), int(row[3]), int64_t(row[4]), row[5], row[6]};
  }
  return all;
}

void write_chrome_trace(const std::string& path, const std::vector<PipeEvent>& events) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "w"), &std::fclose);
  check(f != nullptr, "--pp-trace: cannot write '" + path + "'");
  double origin = 0.0;
  if (!events.empty())
    origin = std::min_element(events.begin(), events.end(), [](const PipeEvent& a, const PipeEvent& b) {
               return a.begin < b.begin;
             })->begin;
  int stages = 0;
  for (const PipeEvent& e : events) stages = std::max(stages, e.stage + 1);
  std::fprintf(f.get(), "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
  for (int s = 0; s < stages; ++s)
    std::fprintf(f.get(),
                 "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"stage %d\"}},\n"
                 "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": \"passes\"}},\n"
                 "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 1, \"args\": {\"name\": \"waits\"}},\n",
                 s, s, s, s);
  for (std::size_t i = 0; i < events.size(); ++i) {
    const PipeEvent& e = events[i];
    // "F3", "B3"; a wait: "wait in F3", or "wait after the passes" (the step's last sends).
    const auto pass_name = [](int kind, int micro) { return (kind == PipeEvent::Forward ? "F" : "B") + std::to_string(micro); };
    const std::string name = e.kind != PipeEvent::Wait ? pass_name(e.kind, e.micro)
                             : e.in_pass >= 0        ? "wait in " + pass_name(e.in_pass, e.micro)
                                                     : std::string("wait after the passes");
    std::fprintf(f.get(),
                 "{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
                 "\"dur\": %.3f, \"args\": {\"step\": %lld}}%s\n",
                 name.c_str(), e.kind == PipeEvent::Wait ? "wait" : "pass", e.stage, e.kind == PipeEvent::Wait ? 1 : 0,
                 1e6 * (e.begin - origin), 1e6 * (e.end - e.begin), (long long)e.step, i + 1 < events.size() ? "," : "");
  }
  std::fprintf(f.get(), "]}\n");
  check(std::ferror(f.get()) == 0, "--pp-trace: writing '" + path + "' failed");
}

}  // namespace ringtrain::train
