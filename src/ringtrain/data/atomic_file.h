// A file written atomically: bytes go to a temporary file in the target's directory; commit() fsyncs
// it, renames it over the target and fsyncs the directory. Readers see the old file or the complete
// new one, never a part; a writer that fails or is destroyed before commit() leaves no temporary behind.
#pragma once
#include <cstddef>
#include <string>

namespace ringtrain::data {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // creates the temporary; throws Error naming path
  ~AtomicFile();                          // removes the temporary unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t size);  // throws Error naming path
  void commit();

 private:
  std::string path_, temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace ringtrain::data
