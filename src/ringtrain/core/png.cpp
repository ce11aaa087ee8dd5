// PNG encoding through libpng (Debian's libpng-dev), with its simplified write API: 8-bit gray or RGB,
// written to memory and then to the file atomically.
#include "ringtrain/core/png.h"

#include <png.h>
#include <unistd.h>

#include <cstdio>

#include "ringtrain/core/error.h"

namespace ringtrain {

std::vector<uint8_t> encode_png(const uint8_t* pixels, int width, int height, int channels) {
  check(width > 0 && height > 0 && (channels == 1 || channels == 3), "png: bad image size or channels");
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = png_uint_32(width);
  image.height = png_uint_32(height);
  image.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  // Room for the worst case (libpng's bound on an incompressible image), so one call encodes; row stride 0:
  // the rows are packed.
  png_alloc_size_t size = PNG_IMAGE_PNG_SIZE_MAX(image);
  std::vector<uint8_t> out(size);
  check(png_image_write_to_memory(&image, out.data(), &size, 0, pixels, 0, nullptr) != 0,
        std::string("png: libpng cannot encode the image: ") + image.message);
  out.resize(size);
  return out;
}

void Image::write_png(const std::string& path) const {
  std::vector<uint8_t> bytes = encode_png(rgb_.data(), width_, height_, 3);
  std::string temp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(temp.c_str(), "wb");
  check(f != nullptr, path + ": cannot open for writing");
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    throw Error(path + ": write failed");
  }
}

}  // namespace ringtrain
