"""Protobuf message classes from a compact schema, in a private descriptor pool: the
messages of OneFlow's ``.proto`` files that scripts build (``InitializerConf``...)."""
from __future__ import annotations

_SCALARS = {"float": "TYPE_FLOAT", "double": "TYPE_DOUBLE", "int32": "TYPE_INT32",
            "int64": "TYPE_INT64", "string": "TYPE_STRING", "bool": "TYPE_BOOL"}


def build(file_name: str, package: str, enums: dict, messages: dict, oneofs: dict = ()):
    """Classes of ``messages`` ({name: [(field, type, default or None), ...]}; a type not a
    scalar names an enum or message of this schema). ``oneofs``: {message: oneof name},
    holding all the message's fields. Returns {name: class or enum descriptor}."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    field_proto = descriptor_pb2.FieldDescriptorProto
    schema = descriptor_pb2.FileDescriptorProto(name=file_name, package=package,
                                                syntax="proto2")
    for enum_name, values in enums.items():
        enum = schema.enum_type.add(name=enum_name)
        for key, number in values.items():
            enum.value.add(name=key, number=number)
    oneofs = dict(oneofs)
    for message_name, fields in messages.items():
        message = schema.message_type.add(name=message_name)
        if message_name in oneofs:
            message.oneof_decl.add(name=oneofs[message_name])
        for number, (field, kind, default) in enumerate(fields, start=1):
            entry = message.field.add(name=field, number=number,
                                      label=field_proto.LABEL_OPTIONAL)
            if kind in _SCALARS:
                entry.type = getattr(field_proto, _SCALARS[kind])
            else:
                entry.type = field_proto.TYPE_ENUM if kind in enums else field_proto.TYPE_MESSAGE
                entry.type_name = f".{package}.{kind}"
            if default is not None:
                entry.default_value = str(default)
            if message_name in oneofs:
                entry.oneof_index = 0
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(
        f"{package}.{name}")) for name in messages}
