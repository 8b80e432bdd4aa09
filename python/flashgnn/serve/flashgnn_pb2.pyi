from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Tensor(_message.Message):
    __slots__ = ("dtype", "shape", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthReply(_message.Message):
    __slots__ = ("status", "version", "uptime_s")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    status: str
    version: str
    uptime_s: float
    def __init__(self, status: _Optional[str] = ..., version: _Optional[str] = ..., uptime_s: _Optional[float] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RpcStats(_message.Message):
    __slots__ = ("requests", "ok", "errors", "latency_p50_ms", "latency_p99_ms")
    class ErrorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P50_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P99_MS_FIELD_NUMBER: _ClassVar[int]
    requests: int
    ok: int
    errors: _containers.ScalarMap[str, int]
    latency_p50_ms: float
    latency_p99_ms: float
    def __init__(self, requests: _Optional[int] = ..., ok: _Optional[int] = ..., errors: _Optional[_Mapping[str, int]] = ..., latency_p50_ms: _Optional[float] = ..., latency_p99_ms: _Optional[float] = ...) -> None: ...

class StatsReply(_message.Message):
    __slots__ = ("rpcs", "rejected", "in_flight", "max_inflight", "uptime_s", "graph_stats_json", "limits_json", "dfg_cache_entries")
    class RpcsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: RpcStats
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[RpcStats, _Mapping]] = ...) -> None: ...
    class RejectedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    RPCS_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    MAX_INFLIGHT_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    GRAPH_STATS_JSON_FIELD_NUMBER: _ClassVar[int]
    LIMITS_JSON_FIELD_NUMBER: _ClassVar[int]
    DFG_CACHE_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    rpcs: _containers.MessageMap[str, RpcStats]
    rejected: _containers.ScalarMap[str, int]
    in_flight: int
    max_inflight: int
    uptime_s: float
    graph_stats_json: str
    limits_json: str
    dfg_cache_entries: int
    def __init__(self, rpcs: _Optional[_Mapping[str, RpcStats]] = ..., rejected: _Optional[_Mapping[str, int]] = ..., in_flight: _Optional[int] = ..., max_inflight: _Optional[int] = ..., uptime_s: _Optional[float] = ..., graph_stats_json: _Optional[str] = ..., limits_json: _Optional[str] = ..., dfg_cache_entries: _Optional[int] = ...) -> None: ...

class VertexRequest(_message.Message):
    __slots__ = ("vid",)
    VID_FIELD_NUMBER: _ClassVar[int]
    vid: int
    def __init__(self, vid: _Optional[int] = ...) -> None: ...

class EdgeRequest(_message.Message):
    __slots__ = ("dst", "src")
    DST_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    dst: int
    src: int
    def __init__(self, dst: _Optional[int] = ..., src: _Optional[int] = ...) -> None: ...

class AddVertexRequest(_message.Message):
    __slots__ = ("embed",)
    EMBED_FIELD_NUMBER: _ClassVar[int]
    embed: Tensor
    def __init__(self, embed: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class AddVertexReply(_message.Message):
    __slots__ = ("vid", "seq")
    VID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    vid: int
    seq: int
    def __init__(self, vid: _Optional[int] = ..., seq: _Optional[int] = ...) -> None: ...

class UpdateEmbedRequest(_message.Message):
    __slots__ = ("vid", "embed")
    VID_FIELD_NUMBER: _ClassVar[int]
    EMBED_FIELD_NUMBER: _ClassVar[int]
    vid: int
    embed: Tensor
    def __init__(self, vid: _Optional[int] = ..., embed: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class MutationReply(_message.Message):
    __slots__ = ("seq",)
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...

class EmbedReply(_message.Message):
    __slots__ = ("embed",)
    EMBED_FIELD_NUMBER: _ClassVar[int]
    embed: Tensor
    def __init__(self, embed: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class NeighborsReply(_message.Message):
    __slots__ = ("neighbors",)
    NEIGHBORS_FIELD_NUMBER: _ClassVar[int]
    neighbors: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, neighbors: _Optional[_Iterable[int]] = ...) -> None: ...

class Op(_message.Message):
    __slots__ = ("add_vertex", "delete_vertex", "add_edge", "delete_edge", "update_embed")
    ADD_VERTEX_FIELD_NUMBER: _ClassVar[int]
    DELETE_VERTEX_FIELD_NUMBER: _ClassVar[int]
    ADD_EDGE_FIELD_NUMBER: _ClassVar[int]
    DELETE_EDGE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_EMBED_FIELD_NUMBER: _ClassVar[int]
    add_vertex: AddVertexRequest
    delete_vertex: VertexRequest
    add_edge: EdgeRequest
    delete_edge: EdgeRequest
    update_embed: UpdateEmbedRequest
    def __init__(self, add_vertex: _Optional[_Union[AddVertexRequest, _Mapping]] = ..., delete_vertex: _Optional[_Union[VertexRequest, _Mapping]] = ..., add_edge: _Optional[_Union[EdgeRequest, _Mapping]] = ..., delete_edge: _Optional[_Union[EdgeRequest, _Mapping]] = ..., update_embed: _Optional[_Union[UpdateEmbedRequest, _Mapping]] = ...) -> None: ...

class ApplyBatchRequest(_message.Message):
    __slots__ = ("ops",)
    OPS_FIELD_NUMBER: _ClassVar[int]
    ops: _containers.RepeatedCompositeFieldContainer[Op]
    def __init__(self, ops: _Optional[_Iterable[_Union[Op, _Mapping]]] = ...) -> None: ...

class OpResult(_message.Message):
    __slots__ = ("has_vid", "vid")
    HAS_VID_FIELD_NUMBER: _ClassVar[int]
    VID_FIELD_NUMBER: _ClassVar[int]
    has_vid: bool
    vid: int
    def __init__(self, has_vid: _Optional[bool] = ..., vid: _Optional[int] = ...) -> None: ...

class ApplyBatchReply(_message.Message):
    __slots__ = ("results", "seq")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[OpResult]
    seq: int
    def __init__(self, results: _Optional[_Iterable[_Union[OpResult, _Mapping]]] = ..., seq: _Optional[int] = ...) -> None: ...

class UpdateGraphChunk(_message.Message):
    __slots__ = ("src", "dst", "embeddings", "labels", "commit")
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    src: _containers.RepeatedScalarFieldContainer[int]
    dst: _containers.RepeatedScalarFieldContainer[int]
    embeddings: Tensor
    labels: _containers.RepeatedScalarFieldContainer[int]
    commit: UpdateGraphCommit
    def __init__(self, src: _Optional[_Iterable[int]] = ..., dst: _Optional[_Iterable[int]] = ..., embeddings: _Optional[_Union[Tensor, _Mapping]] = ..., labels: _Optional[_Iterable[int]] = ..., commit: _Optional[_Union[UpdateGraphCommit, _Mapping]] = ...) -> None: ...

class UpdateGraphCommit(_message.Message):
    __slots__ = ("chunks", "edges", "embedding_rows", "labels", "crc32")
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_ROWS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CRC32_FIELD_NUMBER: _ClassVar[int]
    chunks: int
    edges: int
    embedding_rows: int
    labels: int
    crc32: int
    def __init__(self, chunks: _Optional[int] = ..., edges: _Optional[int] = ..., embedding_rows: _Optional[int] = ..., labels: _Optional[int] = ..., crc32: _Optional[int] = ...) -> None: ...

class UpdateGraphReply(_message.Message):
    __slots__ = ("report_json", "chunks", "edges", "embedding_rows")
    REPORT_JSON_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_ROWS_FIELD_NUMBER: _ClassVar[int]
    report_json: str
    chunks: int
    edges: int
    embedding_rows: int
    def __init__(self, report_json: _Optional[str] = ..., chunks: _Optional[int] = ..., edges: _Optional[int] = ..., embedding_rows: _Optional[int] = ...) -> None: ...

class RunRequest(_message.Message):
    __slots__ = ("dfg_id", "dfg", "batch")
    DFG_ID_FIELD_NUMBER: _ClassVar[int]
    DFG_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    dfg_id: str
    dfg: bytes
    batch: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dfg_id: _Optional[str] = ..., dfg: _Optional[bytes] = ..., batch: _Optional[_Iterable[int]] = ...) -> None: ...

class RunReply(_message.Message):
    __slots__ = ("outputs", "profile_json", "dfg_id")
    class OutputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Tensor
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_JSON_FIELD_NUMBER: _ClassVar[int]
    DFG_ID_FIELD_NUMBER: _ClassVar[int]
    outputs: _containers.MessageMap[str, Tensor]
    profile_json: str
    dfg_id: str
    def __init__(self, outputs: _Optional[_Mapping[str, Tensor]] = ..., profile_json: _Optional[str] = ..., dfg_id: _Optional[str] = ...) -> None: ...

class PluginRequest(_message.Message):
    __slots__ = ("name", "source")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    source: str
    def __init__(self, name: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class PluginReply(_message.Message):
    __slots__ = ("result_json",)
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    result_json: str
    def __init__(self, result_json: _Optional[str] = ...) -> None: ...

class RecommendRequest(_message.Message):
    __slots__ = ("node", "k", "exclude_seen")
    NODE_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_SEEN_FIELD_NUMBER: _ClassVar[int]
    node: int
    k: int
    exclude_seen: bool
    def __init__(self, node: _Optional[int] = ..., k: _Optional[int] = ..., exclude_seen: _Optional[bool] = ...) -> None: ...

class RecommendReply(_message.Message):
    __slots__ = ("ids", "scores", "seq", "stale")
    IDS_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    scores: Tensor
    seq: int
    stale: int
    def __init__(self, ids: _Optional[_Iterable[int]] = ..., scores: _Optional[_Union[Tensor, _Mapping]] = ..., seq: _Optional[int] = ..., stale: _Optional[int] = ...) -> None: ...
