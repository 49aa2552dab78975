"""OneFlow's ``record.proto``: ``OFRecord`` (a map of feature names to ``Feature``) and
``Feature`` holding one of ``BytesList``, ``FloatList``, ``DoubleList``, ``Int32List``,
``Int64List``: the messages scripts build to write OFRecord files and parse to read them
(``of_record.Feature(int32_list=of_record.Int32List(value=[1]))``). The same classes as
``aioflow.data.ofrecord.messages()``; the ``protobuf`` package is needed.

>>> import aioflow.core.record.record_pb2 as of_record
>>> record = of_record.OFRecord(feature={"label": of_record.Feature(
...     int32_list=of_record.Int32List(value=[7]))})
>>> of_record.OFRecord.FromString(record.SerializeToString()).feature["label"].int32_list.value[0]
7
"""
from ...data.ofrecord import messages as _messages

_classes = vars(_messages())
globals().update(_classes)
__all__ = sorted(_classes)
