"""OneFlow's ``initializer_conf.proto``: ``InitializerConf`` (a oneof of the initializer
messages) and the ``VarianceNorm`` / ``RandomDistribution`` enums, with OneFlow's field
names, numbers of enum values and defaults. Protobuf messages (the ``protobuf`` package
is needed). ``function_config.default_initializer_conf`` takes the same content as a
dict (``google.protobuf.json_format.MessageToDict(conf, preserving_proto_field_name=True)``).

>>> import aioflow.core.job.initializer_conf_pb2 as initializer_conf_util
>>> conf = initializer_conf_util.InitializerConf()
>>> conf.truncated_normal_conf.std
0.05000000074505806
"""
from .._enum import Enum
from .._schema import build

_ENUMS = {"VarianceNorm": {"kFanIn": 0, "kFanOut": 1, "kAverage": 2},
          "RandomDistribution": {"kRandomUniform": 0, "kRandomNormal": 1,
                                 "kTruncatedNormal": 2}}
_SCALING = [("variance_norm", "VarianceNorm", None), ("data_format", "string", None)]
_MESSAGES = {
    "ConstantInitializerConf": [("value", "float", 0)],
    "ConstantIntInitializerConf": [("value", "int64", 0)],
    "RandomUniformInitializerConf": [("min", "float", 0), ("max", "float", 1)],
    "RandomUniformIntInitializerConf": [("min", "int32", 0), ("max", "int32", 1)],
    "RandomNormalInitializerConf": [("mean", "float", 0), ("std", "float", 1)],
    "TruncatedNormalInitializerConf": [("mean", "float", 0), ("std", "float", 0.05)],
    "XavierInitializerConf": _SCALING,
    "MsraInitializerConf": _SCALING,
    "RangeInitializerConf": [("start", "double", 0), ("stride", "double", 1),
                             ("axis", "int64", -1)],
    "IntRangeInitializerConf": [("start", "int64", 0), ("stride", "int64", 1),
                                ("axis", "int64", -1)],
    "VarianceScalingInitializerConf": [("scale", "float", None),
                                       ("variance_norm", "VarianceNorm", None),
                                       ("distribution", "RandomDistribution", None),
                                       ("data_format", "string", None)],
    "InitializerConf": [(field, message, None) for field, message in [
        ("constant_conf", "ConstantInitializerConf"),
        ("constant_int_conf", "ConstantIntInitializerConf"),
        ("random_uniform_conf", "RandomUniformInitializerConf"),
        ("random_uniform_int_conf", "RandomUniformIntInitializerConf"),
        ("random_normal_conf", "RandomNormalInitializerConf"),
        ("truncated_normal_conf", "TruncatedNormalInitializerConf"),
        ("xavier_conf", "XavierInitializerConf"), ("msra_conf", "MsraInitializerConf"),
        ("range_conf", "RangeInitializerConf"), ("int_range_conf", "IntRangeInitializerConf"),
        ("variance_scaling_conf", "VarianceScalingInitializerConf")]],
}

globals().update(build("oneflow/core/job/initializer_conf.proto", "oneflow", _ENUMS,
                       _MESSAGES, {"InitializerConf": "type"}))
VarianceNorm = Enum("VarianceNorm", _ENUMS["VarianceNorm"])
RandomDistribution = Enum("RandomDistribution", _ENUMS["RandomDistribution"])
globals().update(VarianceNorm.items())
globals().update(RandomDistribution.items())
__all__ = [*_MESSAGES, "VarianceNorm", "RandomDistribution", *VarianceNorm.keys(),
           *RandomDistribution.keys()]
