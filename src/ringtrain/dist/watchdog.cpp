#include "ringtrain/dist/watchdog.h"

#include <mpi.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace ringtrain::dist {

void Watchdog::abort_job(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  // The other ranks waiting on the same failure armed their watchdogs within milliseconds of this one and
  // check several times a second: half a second lets theirs print too before MPI_Abort ends them, so the
  // job's output names every waiting rank's peer, the dead or hung one among them (the first to fire may
  // only name a neighbour that waits on it).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

Watchdog::Watchdog(double timeout_s, int rank, int world_size, TimeoutAction action)
    : timeout_s_(timeout_s), rank_(rank), world_size_(world_size), action_(std::move(action)) {
  if (timeout_s_ <= 0) return;
  install_terminate_handler();
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
    remove_terminate_handler();
  }
}

Watchdog::Guard Watchdog::claim(const Armed& a) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < kSlots; ++i) {
    if (used_[i]) continue;
    used_[i] = true;
    slots_[i] = a;
    return Guard(this, uint64_t(i));
  }
  return Guard(nullptr, 0);  // more than kSlots threads in collectives at once: this one goes unwatched
}

Watchdog::Guard Watchdog::arm(const char* operation, const char* dtype, std::size_t count, const char* algo) {
  if (timeout_s_ <= 0) return Guard(nullptr, 0);
  return claim(Armed{operation, dtype, count, algo, std::chrono::steady_clock::now()});
}

Watchdog::Guard Watchdog::arm_p2p(const char* operation, std::size_t bytes, int peer, int peer_world) {
  if (timeout_s_ <= 0) return Guard(nullptr, 0);
  return claim(Armed{operation, "byte", bytes, "", std::chrono::steady_clock::now(), peer, peer_world});
}

void Watchdog::set_group(const std::string& group, int world_rank, const std::vector<int>& peers_world) {
  std::lock_guard<std::mutex> lock(mu_);
  group_ = " in the " + group + " group (world rank " + std::to_string(world_rank) + ")";
  peers_.clear();
  for (std::size_t i = 0; i < peers_world.size() && i < 8; ++i)
    peers_ += (i ? ", " : "") + std::to_string(peers_world[i]);
  if (peers_world.size() > 8) peers_ += ", ...";
  if (!peers_.empty()) peers_ = std::string(" (world rank") + (peers_world.size() > 1 ? "s " : " ") + peers_ + ")";
}

void Watchdog::disarm(uint64_t slot) {
  std::lock_guard<std::mutex> lock(mu_);
  used_[slot] = false;
}

bool Watchdog::fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

namespace {
// SIGTERM (what mpirun sends the other ranks when one dies): the handler only records it; the watchdog
// threads say what their rank was waiting in and end the process (Watchdog::run).
std::atomic<int> g_terminate_signal{0};
extern "C" void record_terminate(int sig) { g_terminate_signal.store(sig); }
std::mutex g_handler_mu;
int g_running = 0;  // watchdog threads; the handler is installed while any runs (someone must exit)
}  // namespace

void Watchdog::install_terminate_handler() {
  std::lock_guard<std::mutex> lock(g_handler_mu);
  if (g_running++ > 0) return;
  struct sigaction old {};
  sigaction(SIGTERM, nullptr, &old);
  if (old.sa_handler != SIG_DFL) return;  // the application handles SIGTERM itself
  struct sigaction sa {};
  sa.sa_handler = record_terminate;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
}

void Watchdog::remove_terminate_handler() {
  std::lock_guard<std::mutex> lock(g_handler_mu);
  if (--g_running > 0) return;
  struct sigaction cur {};
  sigaction(SIGTERM, nullptr, &cur);
  if (cur.sa_handler == record_terminate) signal(SIGTERM, SIG_DFL);
  if (const int sig = g_terminate_signal.load()) std::_Exit(128 + sig);  // arrived as the last thread stopped
}

std::string Watchdog::describe(const Armed& a) const {
  char what[128] = "", msg[384];
  if (a.peer >= 0) {
    std::snprintf(msg, sizeof msg, "point-to-point %s(%zu bytes) with rank %d (world rank %d)", a.operation, a.count,
                  a.peer, a.peer_world);
  } else {
    if (*a.dtype) std::snprintf(what, sizeof what, "%s x %zu%s%s", a.dtype, a.count, *a.algo ? ", " : "", a.algo);
    std::snprintf(msg, sizeof msg, "collective %s(%s)", a.operation, what);
  }
  return msg;
}

void Watchdog::run() {
  using namespace std::chrono;
  // Check often enough that the job stops within ~10% past the timeout, and a SIGTERM is answered well
  // within the second mpirun leaves before its SIGKILL.
  const auto period = duration_cast<steady_clock::duration>(
      duration<double>(std::clamp(timeout_s_ / 10.0, 0.01, 0.05)));
  const auto limit = duration_cast<steady_clock::duration>(duration<double>(timeout_s_));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, period);
    if (const int sig = g_terminate_signal.load()) {
      // Another rank died and the launcher is stopping this one: say what it was waiting in (the dead
      // rank is among the peers named), give the process's other watchdogs a moment to say theirs, exit.
      for (int i = 0; i < kSlots; ++i) {
        if (!used_[i]) continue;
        std::string with;  // a collective's suspects: the group's other ranks
        if (slots_[i].peer < 0 && !peers_.empty()) with.append(" with the group's other rank(s)").append(peers_);
        std::fprintf(stderr,
                     "ringtrain: rank %d of %d%s: stopped by the launcher (signal %d: another rank of the job "
                     "failed) while waiting in %s%s\n",
                     rank_, world_size_, group_.c_str(), sig, describe(slots_[i]).c_str(), with.c_str());
      }
      std::fflush(stderr);
      lock.unlock();
      std::this_thread::sleep_for(milliseconds(100));
      std::_Exit(128 + sig);
    }
    if (stop_ || fired_) continue;
    auto now = steady_clock::now();
    for (int i = 0; i < kSlots; ++i) {
      if (!used_[i] || now - slots_[i].start < limit) continue;
      const Armed a = slots_[i];
      fired_ = true;
      char msg[640];
      if (a.peer >= 0)
        std::snprintf(msg, sizeof msg,
                      "ringtrain: rank %d of %d%s: %s did not finish within %g s (--timeout); that rank has probably "
                      "died or hung; aborting the whole job",
                      rank_, world_size_, group_.c_str(), describe(a).c_str(), timeout_s_);
      else
        std::snprintf(msg, sizeof msg,
                      "ringtrain: rank %d of %d%s: %s did not finish within %g s (--timeout); a peer rank%s has "
                      "probably died or hung; aborting the whole job",
                      rank_, world_size_, group_.c_str(), describe(a).c_str(), timeout_s_, peers_.c_str());
      std::string message = msg;
      lock.unlock();
      action_(message);
      lock.lock();
      break;
    }
  }
}

}  // namespace ringtrain::dist
