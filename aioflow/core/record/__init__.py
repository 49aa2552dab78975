"""OneFlow's ``oneflow.core.record`` protobuf modules."""
