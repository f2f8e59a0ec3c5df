"""Reading a PyTorch weights file (`torch.save` of a state dict: HuggingFace's `pytorch_model.bin`) without torch,
into numpy arrays.

Two layouts exist. Since torch 1.6 the file is a zip archive: `<name>/data.pkl`, a pickle of the dict, refers to
each storage (a flat typed buffer) by a key, and `<name>/data/<key>` holds that storage's bytes. Before, the file
was a row of pickles (a magic number, the format version 1001, the machine's byte order; the dict; the list of
storage keys) followed by each storage as an int64 element count and its bytes, in the list's order: XLNet's
checkpoints on the HuggingFace hub date from 2019. In both, a tensor is a storage, an offset, a shape and strides
(`torch._utils._rebuild_tensor_v2`).

The unpickler makes only those objects: ordered dicts, tensors (and parameters, which hold one) and storages. Any
other class in the file is refused, so reading a file never runs its code (as torch.load(weights_only=True)).
"""

import collections
import io
import math
import pickle
import struct
import sys
import zipfile
import zlib

import ml_dtypes
import numpy as np

from xlnet_tf import fileio

# torch's typed storage classes, by the name a file gives them (`torch.FloatStorage`), and their elements.
_STORAGE_DTYPES = {"DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16,
                   "BFloat16Storage": ml_dtypes.bfloat16, "LongStorage": np.int64, "IntStorage": np.int32,
                   "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_}
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_VERSION = 1001


class _StorageType:
  """A storage class the file names (`torch.FloatStorage`): its elements' dtype."""

  def __init__(self, name):
    self.dtype = np.dtype(_STORAGE_DTYPES[name])


class _Storage:
  """One storage: its elements' dtype and count; `values` (1-D numpy) once its bytes are read."""

  def __init__(self, dtype, numel):
    self.dtype, self.numel, self.values = dtype, numel, None

  def fill(self, buffer, byteorder):
    if len(buffer) < self.numel * self.dtype.itemsize:
      raise ValueError(f"a storage of {self.numel} {self.dtype} elements has {len(buffer)} bytes")
    if byteorder == sys.byteorder or self.dtype.itemsize == 1:
      self.values = np.frombuffer(buffer, self.dtype, self.numel)
    else:  # written on a machine of the other byte order (bfloat16 has no swapped numpy dtype: swapped as uint16)
      swapped = np.frombuffer(buffer, np.dtype(f"u{self.dtype.itemsize}"), self.numel).byteswap()
      self.values = swapped.view(self.dtype)


class _Tensor:
  """A tensor as the file describes it; `array()` once its storage is read."""

  def __init__(self, storage, offset, size, stride):
    self.storage, self.offset, self.size, self.stride = storage, int(offset), tuple(size), tuple(stride)

  def array(self):
    values = self.storage.values
    if len(self.stride) != len(self.size) or self.offset < 0 or min(self.stride + self.size, default=0) < 0:
      raise ValueError(f"a tensor of shape {self.size}, strides {self.stride}, offset {self.offset}")
    if math.prod(self.size) > values.size:  # strides of 0 (an expanded view): GBs from a file of KBs, before any check
      raise ValueError(f"a tensor of shape {self.size} holds more elements than its storage of {values.size}")
    if 0 not in self.size:
      end = self.offset + sum((n - 1) * s for n, s in zip(self.size, self.stride))
      if end >= values.size:
        raise ValueError(f"a tensor of shape {self.size} reaches element {end} of a storage of {values.size}")
    view = np.lib.stride_tricks.as_strided(values[self.offset:], self.size,
                                           [s * values.itemsize for s in self.stride], writeable=False)
    array = np.array(view)
    return array.astype(np.float32, copy=False) if array.dtype.kind == "f" or array.dtype == ml_dtypes.bfloat16 \
        else array


def _rebuild_tensor(storage, offset, size, stride, *unused):  # _rebuild_tensor_v2 adds requires_grad, hooks, ...
  return _Tensor(storage, offset, size, stride)


def _rebuild_parameter(data, *unused):  # an nn.Parameter: its tensor
  return data


class _Unpickler(pickle.Unpickler):
  """Makes ordered dicts, tensors and storages (one `_Storage` per key, kept in the dict `storages`); refuses every
  other class. Without `storages`, a pickle that refers to a storage is refused."""

  _CLASSES = {("collections", "OrderedDict"): collections.OrderedDict,
              ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
              ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
              ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
              ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter}

  def __init__(self, file, storages=None):
    super().__init__(file)
    self._storages = storages

  def load(self):
    try:
      return super().load()
    except MemoryError:  # the pickle is the weights' names and shapes (kilobytes): a damaged length field asked it
      raise ValueError("a length in its pickle asks for more memory than there is") from None

  def find_class(self, module, name):
    if module == "torch" and name in _STORAGE_DTYPES:
      return _StorageType(name)
    if (module, name) in self._CLASSES:
      return self._CLASSES[(module, name)]
    raise pickle.UnpicklingError(f"it holds a {module}.{name}, which is not part of a state dict of tensors")

  def persistent_load(self, pid):
    if self._storages is None or not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"
                                     and isinstance(pid[1], _StorageType)):
      raise pickle.UnpicklingError(f"it refers to {str(pid)[:80]}, which is not a storage")
    if len(pid) > 5 and pid[5] is not None:  # a view into another storage: torch before 1.0
      raise pickle.UnpicklingError("it holds a storage view (torch before 1.0): save it again with a newer torch")
    key = str(pid[2])
    if key not in self._storages:
      self._storages[key] = _Storage(pid[1].dtype, int(pid[4]))
    return self._storages[key]


def _load_zip(archive):
  pickles = [name for name in archive.namelist() if name.endswith("/data.pkl") and name.count("/") == 1]
  if len(pickles) != 1:
    raise ValueError(f"the zip archive has {len(pickles)} data.pkl entries, not one")
  prefix = pickles[0][:-len("data.pkl")]
  byteorder = (archive.read(prefix + "byteorder").decode().strip() if prefix + "byteorder" in archive.namelist()
               else "little")
  storages = {}
  state = _Unpickler(io.BytesIO(archive.read(pickles[0])), storages).load()
  for key, stored in storages.items():
    stored.fill(archive.read(f"{prefix}data/{key}"), byteorder)
  return state


def _load_legacy(data):
  stream = io.BytesIO(data)
  if _Unpickler(stream).load() != _LEGACY_MAGIC:
    raise ValueError("it is neither a zip archive nor a pickle of torch's older format")
  version = _Unpickler(stream).load()
  if version != _LEGACY_VERSION:
    raise ValueError(f"its format version is {version}, not {_LEGACY_VERSION}")
  system = _Unpickler(stream).load()
  byteorder = "little" if not isinstance(system, dict) or system.get("little_endian", True) else "big"
  storages = {}
  state = _Unpickler(stream, storages).load()
  keys = _Unpickler(stream).load()
  position = stream.tell()
  for key in keys:
    stored = storages[str(key)]
    numel = struct.unpack_from("<q" if byteorder == "little" else ">q", data, position)[0]
    if numel != stored.numel:
      raise ValueError(f"storage {key} has {numel} elements where the pickle says {stored.numel}")
    position += 8
    size = numel * stored.dtype.itemsize
    stored.fill(data[position:position + size], byteorder)
    position += size
  return state


def load(path):
  """{name: numpy array} of the PyTorch weights file `path` (floating tensors as float32, as torch's `.float()`;
  others in their own dtype); ValueError naming the file if it is not one."""
  try:
    with fileio.open_file(path, "rb") as f:
      if f.read(4) == b"PK\x03\x04":  # a zip archive: its storages read one by one
        f.seek(0)
        with zipfile.ZipFile(f) as archive:
          state = _load_zip(archive)
      else:
        f.seek(0)
        state = _load_legacy(f.read())
    if not isinstance(state, dict) or not all(isinstance(t, _Tensor) for t in state.values()):
      inner = [k for k, v in (state.items() if isinstance(state, dict) else ()) if isinstance(v, dict) and v
               and all(isinstance(t, _Tensor) for t in v.values())]
      raise ValueError(f"it is a training script's checkpoint, its weights under {inner[0]!r}: save them alone, "
                       f"e.g. torch.save(checkpoint[{inner[0]!r}], path)" if inner else "it holds no dict of tensors")
    return {str(name): tensor.array() for name, tensor in state.items()}
  except (ValueError, pickle.UnpicklingError, zipfile.BadZipFile, KeyError, EOFError, struct.error, TypeError,
          IndexError, AttributeError, OverflowError, NotImplementedError, zlib.error) as e:  # (sweep 28, A6)
    fix = "" if "training script's" in str(e) else " Download it again."  # downloading again cannot help that
    raise ValueError(fileio.lfs_pointer_line(path) or f"{path} is not a readable PyTorch weights file "
                     f"({' '.join(str(e).split())[:160]}).{fix}") from None
