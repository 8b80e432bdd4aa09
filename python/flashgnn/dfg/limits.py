"""The DFG's named limits and its error type, shared by the graph codec
(``graph.py``) and the op registry (``registry.py``) without either
importing the other at module level."""

from __future__ import annotations

import re

# Named limits. A DFG arrives from the network, so every count is bounded
# before anything is allocated for it. The defaults leave room for large
# models (a 3-layer SAGE with 1024 hidden units is ~25 MB of float32
# weights) while refusing a payload that would tie a server up.
MAX_DFG_BYTES = 256 << 20  # whole serialised DFG (header + JSON + params + CRC)
MAX_JSON_BYTES = 16 << 20
MAX_NODES = 4096
MAX_PARAMS = 4096
MAX_GRAPH_INPUTS = 256
MAX_GRAPH_OUTPUTS = 256
MAX_NODE_INPUTS = 64
MAX_NODE_OUTPUTS = 16
MAX_NAME_BYTES = 128
MAX_NDIM = 8
MAX_DIM = 2**31 - 1  # one dimension of a param; the product is bounded by the blob length
MAX_ATTRS_PER_NODE = 64
MAX_ATTR_LIST_LEN = 4096
MAX_ATTR_STR_BYTES = 1024
MAX_ATTR_DEPTH = 4  # dict/list nesting inside one attribute value
MAX_SEQ = 2**31 - 1

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


class DFGError(ValueError):
    """A DFG that is malformed, inconsistent or refused by a limit."""
