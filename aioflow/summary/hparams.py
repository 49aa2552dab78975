"""``flow.summary.text`` and ``flow.summary.hparams``: ``Summary`` messages for TensorBoard's
Text and HParams tabs, written with ``flow.summary.pb``; the hyperparameter descriptions
``HParam``, ``IntegerRange``, ``RealRange``, ``ValueSet`` and ``Metric``.

As in OneFlow, these build messages (of tensorboardX's protobuf types) and write nothing.

>>> import aioflow as flow
>>> summary = flow.summary.hparams({
...     flow.summary.HParam("learning_rate", flow.summary.RealRange(1e-2, 1e-1)): 0.02,
...     flow.summary.HParam("optimizer", flow.summary.ValueSet(["adam", "sgd"])): "adam",
...     flow.summary.Metric("loss", float): 0.5,
...     "dropout": 0.6})
>>> sorted(v.tag for v in summary.value)
['_hparams_/experiment', '_hparams_/session_end_info', '_hparams_/session_start_info', 'loss']
"""
from __future__ import annotations

import hashlib
import json
import time

import numpy as np

from .writer import protos

__all__ = ["text", "hparams", "HParam", "Hparam", "IntegerRange", "RealRange", "ValueSet",
           "Metric"]

_PLUGIN = "hparams"


class IntegerRange:
    """The integers from ``min_value`` to ``max_value`` (both ints, min <= max)."""

    def __init__(self, min_value: int, max_value: int):
        _check_range("IntegerRange", min_value, max_value, int)
        self.min_value, self.max_value = min_value, max_value


class RealRange:
    """The real numbers from ``min_value`` to ``max_value`` (both floats, min <= max)."""

    def __init__(self, min_value: float, max_value: float):
        _check_range("RealRange", min_value, max_value, float)
        self.min_value, self.max_value = min_value, max_value


class ValueSet:
    """A finite set of values, all of one type among int, float, bool and str (``dtype``,
    or the type of the first value); kept sorted."""

    def __init__(self, values, dtype=None):
        values = list(values)
        if dtype is None and values:
            dtype = type(values[0])
        if dtype not in (int, float, bool, str):
            raise ValueError(f"ValueSet: dtype must be int, float, bool or str, got {dtype!r}")
        for value in values:
            if type(value) is not dtype:
                raise TypeError(f"ValueSet: every value must be a {dtype.__name__}, got "
                                f"{value!r}")
        self.dtype = dtype
        self.values = sorted(values)


class HParam:
    """A hyperparameter's ``name`` and its domain (``IntegerRange``, ``RealRange``,
    ``ValueSet`` or None), as a key of the dict given to ``flow.summary.hparams``."""

    def __init__(self, name: str, dtype=None):
        if not isinstance(name, str) or not name:
            raise TypeError(f"HParam: name must be a non-empty str, got {name!r}")
        if not isinstance(dtype, (IntegerRange, RealRange, ValueSet, type(None))):
            raise ValueError("HParam: dtype must be an IntegerRange, a RealRange, a ValueSet "
                             f"or None, got {dtype!r}")
        self.name, self.dtype = name, dtype


Hparam = HParam   # OneFlow exported the class as summary.Hparam


class Metric:
    """A metric's ``name`` (the tag of its scalar) and type (``int`` or ``float``), as a key
    of the dict given to ``flow.summary.hparams``."""

    def __init__(self, name: str, dtype=None):
        if not isinstance(name, str) or not name:
            raise TypeError(f"Metric: name must be a non-empty str, got {name!r}")
        dtype = float if dtype is None else dtype
        if dtype not in (int, float):
            raise ValueError(f"Metric: dtype must be int or float, got {dtype!r}")
        self.name, self.dtype = name, dtype


def text(text, tag=None):
    """A ``Summary`` showing the strings of ``text`` (a non-empty list) in TensorBoard's Text
    tab under ``tag`` (default "text")."""
    if not isinstance(text, (list, tuple)) or not text or not all(
            isinstance(t, str) for t in text):
        raise TypeError(f"flow.summary.text: text must be a non-empty list of str, got {text!r}")
    proto = protos()
    tensor = proto.tensor_pb2.TensorProto(
        dtype=proto.types_pb2.DT_STRING,
        tensor_shape=proto.tensor_shape_pb2.TensorShapeProto(
            dim=[proto.tensor_shape_pb2.TensorShapeProto.Dim(size=len(text))]),
        string_val=[t.encode("utf-8") for t in text])
    summary_pb2 = proto.summary_pb2
    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(
        tag=tag if isinstance(tag, str) and tag else "text", metadata=metadata, tensor=tensor)])


def hparams(hparams: dict):
    """A ``Summary`` for TensorBoard's HParams tab: the experiment (each hyperparameter
    with its domain, each metric), this run's values, and each ``Metric``'s value as a
    scalar of its name. Keys are ``HParam``, ``Metric`` or str; values str, bool, int or
    float (numpy scalars too). TypeError for other values; ValueError for a name twice."""
    values, domains, metrics = {}, {}, {}
    for key, value in dict.items(hparams):
        value = value.item() if isinstance(value, np.generic) else value
        name = key.name if isinstance(key, (HParam, Metric)) else key
        if not isinstance(name, str):
            raise TypeError(f"flow.summary.hparams: keys must be HParam, Metric or str, got "
                            f"{key!r}")
        if name in values or name in metrics:
            raise ValueError(f"flow.summary.hparams: {name!r} appears twice")
        if isinstance(key, Metric):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"flow.summary.hparams: metric {name!r} must be a number, "
                                f"got {value!r}")
            metrics[name] = float(value)
            continue
        if not isinstance(value, (str, bool, int, float)):
            raise TypeError(f"flow.summary.hparams: hparam {name!r} must be a str, bool, int "
                            f"or float, got {value!r}")
        values[name] = value
        domains[name] = key.dtype if isinstance(key, HParam) else None
    return _summary(values, domains, metrics)


def _summary(values: dict, domains: dict, metrics: dict):
    proto = protos()
    api, plugin, summary_pb2 = proto.api_pb2, proto.plugin_hparams_pb2, proto.summary_pb2
    start = plugin.SessionStartInfo(
        group_name=hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest(),
        start_time_secs=time.time())
    infos = []
    for name in sorted(values):
        value = values[name]
        info = api.HParamInfo(name=name, type=_data_type(api, value))
        _set_domain(info, domains[name])
        infos.append(info)
        if isinstance(value, str):
            start.hparams[name].string_value = value
        elif isinstance(value, bool):
            start.hparams[name].bool_value = value
        else:
            start.hparams[name].number_value = float(value)
    experiment = api.Experiment(hparam_infos=infos, metric_infos=[
        api.MetricInfo(name=api.MetricName(tag=name)) for name in sorted(metrics)])
    end = plugin.SessionEndInfo(status=api.Status.Value("STATUS_SUCCESS"))

    def tagged(tag, **content):
        data = plugin.HParamsPluginData(version=0, **content).SerializeToString()
        metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=_PLUGIN,
                                                               content=data))
        return summary_pb2.Summary.Value(tag=tag, metadata=metadata)

    entries = [tagged("_hparams_/experiment", experiment=experiment),
               tagged("_hparams_/session_start_info", session_start_info=start),
               tagged("_hparams_/session_end_info", session_end_info=end)]
    entries += [summary_pb2.Summary.Value(tag=name, simple_value=value)
                for name, value in sorted(metrics.items())]
    return summary_pb2.Summary(value=entries)


def _data_type(api, value):
    if isinstance(value, str):
        return api.DataType.Value("DATA_TYPE_STRING")
    if isinstance(value, bool):
        return api.DataType.Value("DATA_TYPE_BOOL")
    return api.DataType.Value("DATA_TYPE_FLOAT64")


def _set_domain(info, domain) -> None:
    if isinstance(domain, (IntegerRange, RealRange)):
        info.domain_interval.min_value = float(domain.min_value)
        info.domain_interval.max_value = float(domain.max_value)
    elif isinstance(domain, ValueSet):
        for value in domain.values:
            entry = info.domain_discrete.values.add()
            if isinstance(value, str):
                entry.string_value = value
            elif isinstance(value, bool):
                entry.bool_value = value
            else:
                entry.number_value = float(value)


def _check_range(what: str, low, high, kind) -> None:
    for arg, value in (("min_value", low), ("max_value", high)):
        if type(value) is not kind:
            raise TypeError(f"{what}: {arg} must be a {kind.__name__}, got {value!r}")
    if low > high:
        raise ValueError(f"{what}: min_value must not exceed max_value, got {low!r} > {high!r}")
