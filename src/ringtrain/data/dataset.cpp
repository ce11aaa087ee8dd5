#include "ringtrain/data/dataset.h"

#include <sys/stat.h>

#include <cstdlib>

#include "ringtrain/core/error.h"
#include "ringtrain/data/idx.h"

namespace ringtrain::data {

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string base_name(const std::string& split, const std::string& kind) {
  return split + "-" + kind + (kind == "images" ? "-idx3-ubyte" : "-idx1-ubyte");
}

// How to get a missing dataset, for the folders of the names that have a known source (by folder, so
// that callers of load_split with a resolved folder get the hint too).
std::string hint_for_dir(const std::string& dir) {
  if (dir == resolve_dataset_dir("digits")) return "; run `ringtrain data prepare` to create the digits dataset";
  if (dir == kFashionDir) return "; install Debian's dataset-fashion-mnist package (apt-get install dataset-fashion-mnist)";
  return "";
}

}  // namespace

std::string data_root() {
  const char* env = std::getenv("RINGTRAIN_DATA");
  return env && *env ? std::string(env) : std::string("./data");
}

std::string resolve_dataset_dir(const std::string& name) {
  check(!name.empty(), "dataset: empty name (use digits, fashion or a directory)");
  if (name == "digits") return data_root() + "/digits";
  if (name == "fashion") return kFashionDir;
  return name;
}

std::string find_idx_file(const std::string& dir, const std::string& split, const std::string& kind) {
  std::string path = dir + "/" + base_name(split, kind);
  if (exists(path)) return path;
  if (exists(path + ".gz")) return path + ".gz";
  return "";
}

Split load_split(const std::string& dir, const std::string& split) {
  check(split == "train" || split == "t10k", dir + ": unknown split '" + split + "' (train or t10k)");
  std::string images_path = find_idx_file(dir, split, "images");
  std::string labels_path = find_idx_file(dir, split, "labels");
  check(!images_path.empty(),
        dir + "/" + base_name(split, "images") + ": missing (neither it nor .gz exists)" + hint_for_dir(dir));
  check(!labels_path.empty(),
        dir + "/" + base_name(split, "labels") + ": missing (neither it nor .gz exists)" + hint_for_dir(dir));

  MappedIdx images = map_idx(images_path);
  check(images.dims.size() == 3, images_path + ": images must have 3 dimensions (N x rows x cols), this file has " +
                                     std::to_string(images.dims.size()) + " (" + idx_dims_str(images.dims) + ")");
  check(images.dims[1] <= 65535 && images.dims[2] <= 65535,
        images_path + ": image size " + std::to_string(images.dims[1]) + " x " + std::to_string(images.dims[2]) +
            " is too large");
  IdxArray labels = read_idx(labels_path);
  check(labels.dims.size() == 1, labels_path + ": labels must have 1 dimension (N), this file has " +
                                     std::to_string(labels.dims.size()) + " (" + idx_dims_str(labels.dims) + ")");
  check(images.dims[0] == labels.dims[0],
        images_path + " has " + std::to_string(images.dims[0]) + " images but " + labels_path + " has " +
            std::to_string(labels.dims[0]) + " labels");
  for (std::size_t i = 0; i < labels.data.size(); ++i)
    check(labels.data[i] < kNumClasses, labels_path + ": label " + std::to_string(i) + " is " +
                                            std::to_string(labels.data[i]) + ", outside 0..9");

  Split out;
  out.count = images.dims[0];
  out.rows = int(images.dims[1]);
  out.cols = int(images.dims[2]);
  out.images = ByteArray::view(images.data, std::size_t(images.dims[0] * images.dims[1] * images.dims[2]), images.keep_alive);
  out.labels = std::move(labels.data);
  return out;
}

Dataset load_dataset(const std::string& name) {
  Dataset ds;
  ds.name = name;
  ds.dir = resolve_dataset_dir(name);
  check(is_dir(ds.dir), ds.dir + ": no such dataset directory" + hint_for_dir(ds.dir));
  for (const char* split : {"train", "t10k"})
    for (const char* kind : {"images", "labels"})
      check(!find_idx_file(ds.dir, split, kind).empty(),
            ds.dir + "/" + base_name(split, kind) + ": missing (neither it nor .gz exists)" + hint_for_dir(ds.dir));
  ds.train = load_split(ds.dir, "train");
  ds.test = load_split(ds.dir, "t10k");
  check(ds.train.rows == ds.test.rows && ds.train.cols == ds.test.cols,
        ds.dir + ": train images are " + std::to_string(ds.train.rows) + " x " + std::to_string(ds.train.cols) +
            " but test images are " + std::to_string(ds.test.rows) + " x " + std::to_string(ds.test.cols));
  return ds;
}

}  // namespace ringtrain::data
