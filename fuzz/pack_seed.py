#!/usr/bin/env python3
"""Packs model files into one input of an importer's fuzz target (each file
but the last behind its 32-bit little-endian length; fuzz_import.h):
  pack_seed.py OUT FILE... ("-" for a file that is absent)."""
import struct
import sys
from pathlib import Path

out, files = sys.argv[1], sys.argv[2:]
parts = [b"" if f == "-" else Path(f).read_bytes() for f in files]
blob = b"".join(struct.pack("<I", len(p)) + p for p in parts[:-1]) + parts[-1]
Path(out).write_bytes(blob)
