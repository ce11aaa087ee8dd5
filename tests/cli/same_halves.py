#!/usr/bin/env python3
"""Exits 0 if an IDX image file of 2n samples holds the same n images twice (standard library only)."""
import struct, sys
raw = open(sys.argv[1], "rb").read()
n, rows, cols = struct.unpack(">III", raw[4:16])
body = raw[16:]
half = (n // 2) * rows * cols
sys.exit(0 if n % 2 == 0 and body[:half] == body[half:2 * half] else 1)
