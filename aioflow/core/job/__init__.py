"""OneFlow's ``oneflow.core.job`` protobuf modules."""
