"""OneFlow's ``data_type.proto``: the ``DataType`` enum, numbered as OneFlow numbers it
(``kFloat`` is 2). ``flow.float.oneflow_proto_dtype`` is ``kFloat``, and
``flow.dtypes.from_proto(kFloat)`` is ``flow.float``."""
from .._enum import Enum

DataType = Enum("DataType", {
    "kInvalidDataType": 0, "kChar": 1, "kFloat": 2, "kDouble": 3, "kInt8": 4, "kInt32": 5,
    "kInt64": 6, "kUInt8": 7, "kOFRecord": 8, "kFloat16": 9, "kTensorBuffer": 10})
globals().update(DataType.items())
__all__ = ["DataType", *DataType.keys()]
