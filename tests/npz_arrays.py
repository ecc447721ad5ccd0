"""The arrays of a NumPy .npz archive, read with the standard library (the
tests need no numpy): {name: (shape, dtype descr, raw bytes)}."""
import ast
import struct
import zipfile


def arrays(path):
    out = {}
    with zipfile.ZipFile(path) as z:
        for n in z.namelist():
            b = z.read(n)
            hl = struct.unpack("<H", b[8:10])[0]
            h = ast.literal_eval(b[10:10 + hl].decode("latin1"))
            out[n[:-len(".npy")]] = (tuple(h["shape"]), h["descr"], b[10 + hl:])
    return out


def marian_options_text(path):
    """special:model.yml of a Marian model, up to its first NUL."""
    return arrays(path)["special:model.yml"][2].split(b"\0")[0].decode()
