#!/usr/bin/env bash
# Regenerate the committed gRPC stubs from proto/flashgnn.proto.
#
#   pip install 'grpcio-tools>=1.70,<2'   # once (not a runtime dependency)
#   python/flashgnn/serve/gen_proto.sh
#
# The stubs are committed so that neither users nor tests need grpcio-tools.
# grpc_tools.protoc writes `import flashgnn_pb2` into the _grpc module; the sed
# line makes it a package-relative import. After regenerating, keep the
# `protobuf` range in pyproject.toml / requirements-dev.txt at or above the
# gencode version printed in flashgnn_pb2.py (ValidateProtobufRuntimeVersion).
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
out="$root/python/flashgnn/serve"
python -m grpc_tools.protoc -I "$root/proto" --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" "$root/proto/flashgnn.proto"
sed -i 's/^import flashgnn_pb2 as flashgnn__pb2$/from . import flashgnn_pb2 as flashgnn__pb2/' "$out/flashgnn_pb2_grpc.py"
echo "gen_proto: wrote $(cd "$out" && ls flashgnn_pb2*.py* | tr '\n' ' ')"
