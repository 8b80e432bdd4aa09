"""Array <-> protobuf conversion shared by the server and the client.

Dense arrays travel as ``flashgnn.v1.Tensor``: raw little-endian bytes in C
order, a numpy dtype name and a shape. Decoding treats the message as
untrusted: the dtype must be one of ``DTYPES``, every dimension non-negative,
and ``len(data)`` must equal ``prod(shape) * itemsize`` exactly (computed with
Python integers, so a hostile shape cannot overflow). Errors are ``ValueError``
naming the field, which the server answers as INVALID_ARGUMENT.

Node-id lists are packed ``repeated int64`` fields and need no codec beyond
``np.asarray(field, dtype=np.int64)``.
"""

from __future__ import annotations

import numpy as np

from . import flashgnn_pb2 as pb

# The dtypes a Tensor may carry; little-endian explicitly, whatever the host.
DTYPES = {
    name: np.dtype(name).newbyteorder("<")
    for name in ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
}
# Dimensions a Tensor may have; embeddings are 1-D or 2-D, model outputs rarely more.
MAX_NDIM = 8


def to_tensor(arr) -> pb.Tensor:
    """Encode a numpy array (or anything np.asarray accepts, e.g. a CPU torch tensor)."""
    a = np.asarray(arr)
    name = a.dtype.name
    if name not in DTYPES:
        raise ValueError(f"dtype {name} cannot travel as a Tensor (supported: {', '.join(DTYPES)})")
    a = np.ascontiguousarray(a, dtype=DTYPES[name])
    return pb.Tensor(dtype=name, shape=list(a.shape), data=a.tobytes())


def from_tensor(t: pb.Tensor, field: str) -> np.ndarray:
    """Decode and check a Tensor; ``field`` names it in errors (e.g. 'UpdateEmbed.embed')."""
    if t.dtype not in DTYPES:
        raise ValueError(f"{field}.dtype: {t.dtype!r} is not one of {', '.join(DTYPES)}")
    shape = tuple(int(s) for s in t.shape)
    if len(shape) > MAX_NDIM:
        raise ValueError(f"{field}.shape: {len(shape)} dimensions > {MAX_NDIM}")
    if any(s < 0 for s in shape):
        raise ValueError(f"{field}.shape: {list(shape)} has a negative dimension")
    dt = DTYPES[t.dtype]
    want = dt.itemsize
    for s in shape:
        want *= s
    if len(t.data) != want:
        raise ValueError(f"{field}.data: {len(t.data)} bytes != {want} for shape {list(shape)} of {t.dtype}")
    return np.frombuffer(t.data, dtype=dt).reshape(shape).astype(dt.newbyteorder("="), copy=False)
