#include "ringtrain/dist/allreduce_calibration.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "ringtrain/core/error.h"

namespace ringtrain::dist {

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Rank 0's string on every rank.
std::string broadcast_text(Communicator& comm, const std::string& mine) {
  uint64_t len = mine.size();
  comm.broadcast(&len, sizeof len, 0);
  std::string text = comm.rank() == 0 ? mine : std::string(len, '\0');
  comm.broadcast(text.data(), len, 0);
  return text;
}

// Rank 0's error (empty: none), thrown on every rank.
void throw_if_any(Communicator& comm, const std::string& rank0_error) {
  const std::string e = broadcast_text(comm, rank0_error);
  if (!e.empty()) throw Error(e);
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}
}  // namespace

AllreduceCostModel agree_on_model(Communicator& comm, const AllreduceCostModel& mine) {
  return AllreduceCostModel::from_json(broadcast_text(comm, mine.to_json()), "rank 0's all-reduce calibration");
}

AllreduceCostModel calibrate_allreduce(MpiCommunicator& comm, const CalibrationOptions& opt) {
  const std::vector<AllreduceAlgorithm>& algos = concrete_allreduce_algorithms();
  const std::size_t A = algos.size(), R = std::size_t(std::max(1, opt.repeats));
  check(!opt.sizes_bytes.empty() && std::is_sorted(opt.sizes_bytes.begin(), opt.sizes_bytes.end()),
        "all-reduce calibration: the sizes must be given, ascending");
  std::vector<std::size_t> timed;             // the sizes timed
  std::vector<std::vector<double>> medians;   // medians[i][a]: algorithm a at timed[i], the slowest rank's
  double spent = 0.0;                         // seconds of calls so far, from the agreed times
  std::vector<double> t(A * R);               // [algorithm][repeat]
  std::vector<float> buf;
  for (std::size_t bytes : opt.sizes_bytes) {
    if (bytes > opt.always_bytes && !timed.empty()) {
      if (timed.back() >= opt.largest_message_bytes) break;  // the sizes timed already cover every message
      double last = 0.0;  // one round of every algorithm at the last size timed
      for (double m : medians.back()) last += m;
      const double predicted = last * double(bytes) / double(timed.back()) * double(R + 1);
      if (spent + predicted > opt.budget_s) break;
    }
    buf.assign(bytes / sizeof(float), 0.0f);  // zeros: the same adds, no overflow over repeats
    for (std::size_t r = 0; r <= R; ++r) {    // r == 0 warms up (connections, scratch)
      for (std::size_t a = 0; a < A; ++a) {   // interleaved, so machine noise hits every algorithm alike
        MPI_Barrier(comm.comm());
        const auto t0 = std::chrono::steady_clock::now();
        comm.allreduce_sum_with(algos[a], buf.data(), buf.size());
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r > 0) t[a * R + (r - 1)] = dt;
      }
    }
    MPI_Allreduce(MPI_IN_PLACE, t.data(), int(t.size()), MPI_DOUBLE, MPI_MAX, comm.comm());  // the slowest rank
    std::vector<double>& med = medians.emplace_back(A);
    for (std::size_t a = 0; a < A; ++a) {
      med[a] = median(std::vector<double>(t.begin() + std::ptrdiff_t(a * R), t.begin() + std::ptrdiff_t((a + 1) * R)));
      spent += med[a] * double(R + 1);
    }
    timed.push_back(bytes);
  }
  AllreduceCostModel m;
  m.world_size = comm.size();
  m.hosts = comm.hosts();
  m.max_bytes = timed.back();
  const std::vector<double> bytes(timed.begin(), timed.end());
  for (std::size_t a = 0; a < A; ++a) {
    std::vector<double> seconds;
    for (const std::vector<double>& per_size : medians) seconds.push_back(per_size[a]);
    m.lines[algos[a]] = fit_alpha_beta(bytes, seconds);
  }
  return agree_on_model(comm, m);
}

Calibration load_or_calibrate(MpiCommunicator& comm, const std::string& path, const CalibrationOptions& opt) {
  Calibration c;
  std::string text, error;
  int exists = 0;
  if (comm.rank() == 0 && !path.empty() && file_exists(path)) {
    exists = 1;
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    if (!in) error = path + ": cannot read the all-reduce calibration";
    text = ss.str();
  }
  throw_if_any(comm, error);
  comm.broadcast(&exists, sizeof exists, 0);
  if (exists) {
    c.model = AllreduceCostModel::from_json(broadcast_text(comm, text), path);
    check(c.model.world_size == comm.size() && c.model.hosts == comm.hosts(),
          path + ": all-reduce calibration for " + std::to_string(c.model.world_size) + " rank(s) on " +
              std::to_string(c.model.hosts) + " host(s), this run has " + std::to_string(comm.size()) + " on " +
              std::to_string(comm.hosts()) + " (delete the file to calibrate again)");
    c.how = "read from " + path;
    return c;
  }
  const auto t0 = std::chrono::steady_clock::now();
  c.model = calibrate_allreduce(comm, opt);
  char took[64];
  std::snprintf(took, sizeof took, "calibrated in %.2f s",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  c.how = took;
  if (!path.empty()) {
    if (comm.rank() == 0) {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << c.model.to_json() << "\n";
      out.close();
      if (!out) error = path + ": cannot write the all-reduce calibration";
    }
    throw_if_any(comm, error);
    c.how += ", written to " + path;
  }
  return c;
}

}  // namespace ringtrain::dist
