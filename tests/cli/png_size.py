#!/usr/bin/env python3
"""Prints a PNG's width and height ("W H") from its IHDR chunk; exits 1 if the file is not a PNG."""
import struct, sys
data = open(sys.argv[1], "rb").read(24)
if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
    sys.exit(1)
print(*struct.unpack(">II", data[16:24]))
