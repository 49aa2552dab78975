"""``aioflow.core``: OneFlow's protobuf module paths that v0.3 scripts import
(``import oneflow.core.common.data_type_pb2 as data_type_util``), with the enum values
and message classes those scripts read and build:

* ``core.common.data_type_pb2``: ``DataType`` and ``kFloat``, ``kInt32``...
* ``core.operator.op_conf_pb2``: ``ActivationType`` and ``kNone``, ``kTanH``...
* ``core.job.initializer_conf_pb2``: ``InitializerConf`` and the initializer messages
  (protobuf messages; the ``protobuf`` package is needed, as for OneFlow's).
* ``core.record.record_pb2``: ``OFRecord``, ``Feature``, ``BytesList``... (protobuf).

>>> import aioflow.core.common.data_type_pb2 as data_type_util
>>> import aioflow as flow
>>> data_type_util.kFloat == flow.float.oneflow_proto_dtype
True
"""
