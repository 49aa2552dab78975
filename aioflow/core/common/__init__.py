"""OneFlow's ``oneflow.core.common`` protobuf modules."""
