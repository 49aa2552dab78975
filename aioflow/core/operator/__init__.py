"""OneFlow's ``oneflow.core.operator`` protobuf modules."""
