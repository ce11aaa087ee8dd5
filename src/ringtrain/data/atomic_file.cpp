#include "ringtrain/data/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ringtrain/core/error.h"

namespace ringtrain::data {

namespace {

std::string parent_dir(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  check(!path_.empty() && path_.back() != '/', path_ + ": not a file name");
  std::string pattern = path_ + ".tmp.XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  fd_ = mkstemp(buf.data());
  if (fd_ < 0) throw Error(path_ + ": cannot create a temporary file beside it: " + std::strerror(errno));
  temp_path_ = buf.data();
  // mkstemp makes the file 0600; a dataset or checkpoint is an ordinary file (0644 less the umask).
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd_, 0666 & ~mask);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) close(fd_);
  if (!committed_ && !temp_path_.empty()) unlink(temp_path_.c_str());
}

void AtomicFile::write(const void* data, std::size_t size) {
  check(fd_ >= 0 && !committed_, path_ + ": write after commit");
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(path_ + ": write failed: " + std::strerror(errno));
    p += n;
    size -= std::size_t(n);
  }
}

void AtomicFile::commit() {
  check(fd_ >= 0 && !committed_, path_ + ": committed twice");
  if (fsync(fd_) != 0) throw Error(path_ + ": fsync failed: " + std::strerror(errno));
  int rc = close(fd_);
  fd_ = -1;
  if (rc != 0) throw Error(path_ + ": close failed: " + std::strerror(errno));
  if (rename(temp_path_.c_str(), path_.c_str()) != 0)
    throw Error(path_ + ": cannot rename the temporary file into place: " + std::strerror(errno));
  committed_ = true;
  // Make the rename itself durable. Failure here loses nothing already visible, so it is not an error.
  int dir = open(parent_dir(path_).c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    fsync(dir);
    close(dir);
  }
}

}  // namespace ringtrain::data
