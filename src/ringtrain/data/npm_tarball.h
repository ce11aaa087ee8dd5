// Fetching one pinned package from the npm registry without npm: the registry serves every published
// version as an immutable tarball (.tgz, a top folder `package/`), so curl, sha512sum and tar (all from
// Debian, the latter two always installed) do what `npm install` would, without Node.js and its ~360
// Debian packages (~180 MB) on a machine that only trains.
#pragma once
#include <ostream>
#include <string>

namespace ringtrain::data {

struct NpmTarball {
  std::string name, version;
  std::string url;         // https://registry.npmjs.org/<name>/-/<name>-<version>.tgz
  std::string sha512_hex;  // the registry's dist.integrity (sha512, base64) as hex: checked before unpacking
};

// The unpacked package folder dir/<name>-<version> (the tarball's `package/`), downloaded into dir and
// checked against the pinned SHA-512 first if it is not there yet. Throws Error naming what failed:
// curl missing or failing (its messages go to stderr), a download whose digest differs (the file is
// removed), tar failing.
std::string fetch_npm_tarball(const NpmTarball& tarball, const std::string& dir, std::ostream& log);

}  // namespace ringtrain::data
