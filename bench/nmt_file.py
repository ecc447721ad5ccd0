"""An nmt model file as the bench scripts read it, with the standard library
alone: a safetensors file whose metadata holds the model config (see
lib/model/model_file.h)."""
import json
import struct


class ModelFile:
    """raw: the file's bytes; header: its tensors by name (dtype, shape,
    data_offsets); meta: the metadata strings; cfg: the model config.
    `fail(message)` is called (and must not return) for a file that is not
    an nmt model."""

    def __init__(self, path, fail):
        self.raw = open(path, "rb").read()
        if len(self.raw) < 8:
            fail("not an nmt model file (shorter than a safetensors header)")
        n = struct.unpack("<Q", self.raw[:8])[0]
        try:
            self.header = json.loads(self.raw[8:8 + n])
        except ValueError:
            fail("not an nmt model file (no safetensors header)")
        self.meta = self.header.pop("__metadata__", {})
        self.base = 8 + n
        if "config" not in self.meta:
            fail("no model config in the file's metadata")
        self.cfg = json.loads(self.meta["config"])

    def blob(self, name):
        """A tensor's bytes as stored."""
        a, b = self.header[name]["data_offsets"]
        return self.raw[self.base + a:self.base + b]
