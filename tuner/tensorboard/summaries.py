"""The summaries of the HParams export, built with TensorBoard's own functions (no TensorFlow).

* the experiment: ``summary_v2.hparams_config_pb`` (hparams with their domains, and the metrics);
* a session start: ``summary_v2.hparams_pb`` (a trial's hparam values; its group is the trial);
* a session end: ``plugin_data_pb2.SessionEndInfo`` wrapped by ``metadata.create_summary_metadata``
  (``summary_v2`` has no ``*_pb`` function for it);
* scalars: the proto ``scalar.summary_v2.scalar_pb`` makes (a float32 tensor with the scalars
  plugin's metadata), built directly because ``scalar_pb`` costs ~40 us per value; the metadata
  goes with the first value of each tag in a file, as TensorFlow's own writer does.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from tensorboard.compat.proto import event_pb2, summary_pb2, types_pb2
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.plugins.hparams import summary_v2 as hp
from tensorboard.plugins.scalar import summary_v2 as scalar_summary

EXPERIMENT_TAG = hparams_metadata.EXPERIMENT_TAG
SESSION_START_TAG = hparams_metadata.SESSION_START_INFO_TAG
SESSION_END_TAG = hparams_metadata.SESSION_END_INFO_TAG

#: Session-end statuses by the names the exporter uses.
STATUSES = {"success": api_pb2.STATUS_SUCCESS, "failure": api_pb2.STATUS_FAILURE}
_STATUS_NAMES = {v: k for k, v in STATUSES.items()}

_TYPES = {"float": api_pb2.DATA_TYPE_FLOAT64, "bool": api_pb2.DATA_TYPE_BOOL, "str": api_pb2.DATA_TYPE_STRING}
_PY_TYPES = {"float": float, "bool": bool, "str": str}
_SCALAR_METADATA = scalar_summary.scalar_pb("_", 0.0).value[0].metadata


class _Column(hp.Domain):
    """A domain as ``hparams_config_pb`` takes it: a real one (or none), plus the column's type
    where there is no domain to give it, and ``differs`` (searched), which the plugin sorts by."""

    def __init__(self, inner: hp.Domain | None, dtype: str, differs: bool) -> None:
        self._inner = inner
        self._dtype = dtype
        self._differs = differs

    @property
    def dtype(self) -> type:
        return self._inner.dtype if self._inner is not None else _PY_TYPES[self._dtype]

    def sample_uniform(self, rng: Any = None) -> Any:  # pragma: no cover - not used by the export
        if self._inner is None:
            raise IndexError("no domain to sample from")
        return self._inner.sample_uniform(rng) if rng is not None else self._inner.sample_uniform()

    def update_hparam_info(self, hparam_info: api_pb2.HParamInfo) -> None:
        if self._inner is not None:
            self._inner.update_hparam_info(hparam_info)
        else:
            hparam_info.type = _TYPES[self._dtype]
        hparam_info.differs = self._differs


def _domain(entry: Mapping[str, Any]) -> hp.Domain | None:
    kind = entry.get("kind")
    if kind == "interval":
        return hp.RealInterval(float(entry["min"]), float(entry["max"]))
    if kind == "int_interval":
        return hp.IntInterval(int(entry["min"]), int(entry["max"]))
    if kind == "discrete":
        dtype = _PY_TYPES[entry["dtype"]]
        return hp.Discrete([dtype(v) for v in entry["values"]], dtype=dtype)
    return None


def hparam(entry: Mapping[str, Any], observed: Iterable[str] = ()) -> hp.HParam:
    """The ``HParam`` of a :func:`tuner.tensorboard.domains.describe_search_space` entry;
    ``observed`` are the value types seen for an hparam without a known type."""
    dtype = entry.get("dtype")
    if dtype is None:
        kinds = set(observed)
        dtype = kinds.pop() if len(kinds) == 1 else "str"
    differs = bool(entry.get("searched", True))
    if entry.get("kind") == "discrete" and len(entry.get("values", ())) < 2:
        differs = False
    return hp.HParam(entry["name"], _Column(_domain(entry), dtype, differs),
                     description=entry.get("source"))


def experiment(entries: Iterable[Mapping[str, Any]], observed: Mapping[str, Iterable[str]],
               metrics: Iterable[str], time_created: float) -> summary_pb2.Summary:
    """The experiment summary: every hparam with its domain, and the metrics (scalar tags)."""
    return hp.hparams_config_pb(
        [hparam(e, observed.get(e["name"], ())) for e in entries],
        [hp.Metric(tag) for tag in metrics],
        time_created_secs=time_created,
    )


def session_start(hparams: Mapping[str, Any], group: str, start_time: float) -> summary_pb2.Summary:
    return hp.hparams_pb(dict(hparams), trial_id=group, start_time_secs=start_time)


def session_end(status: str, end_time: float) -> summary_pb2.Summary:
    info = plugin_data_pb2.SessionEndInfo(status=STATUSES[status], end_time_secs=end_time)
    data = plugin_data_pb2.HParamsPluginData(session_end_info=info)
    summary = summary_pb2.Summary()
    summary.value.add(tag=SESSION_END_TAG, metadata=hparams_metadata.create_summary_metadata(data),
                      tensor=hparams_metadata.NULL_TENSOR)
    return summary


def event(summary: summary_pb2.Summary, step: int, wall_time: float) -> event_pb2.Event:
    return event_pb2.Event(wall_time=wall_time, step=step, summary=summary)


def scalars_event(values: Iterable[tuple[str, float]], step: int, wall_time: float,
                  tags_with_metadata: set[str]) -> event_pb2.Event:
    """One event holding every scalar of a result; ``tags_with_metadata`` (the tags already
    written to this file) is updated."""
    ev = event_pb2.Event(wall_time=wall_time, step=step)
    add = ev.summary.value.add
    for tag, number in values:
        value = add(tag=tag)
        tensor = value.tensor
        tensor.dtype = types_pb2.DT_FLOAT
        tensor.tensor_shape.SetInParent()
        tensor.float_val.append(number)
        if tag not in tags_with_metadata:
            tags_with_metadata.add(tag)
            value.metadata.CopyFrom(_SCALAR_METADATA)
    return ev


def content(summary: summary_pb2.Summary) -> bytes:
    """The plugin data of a one-value hparams summary (what TensorBoard reads)."""
    return summary.value[0].metadata.plugin_data.content


def parse_experiment(data: bytes) -> api_pb2.Experiment:
    return hparams_metadata.parse_experiment_plugin_data(data)


def end_status_name(data: bytes) -> str | None:
    """"success", "failure" (or None) of a session-end summary's plugin data."""
    return _STATUS_NAMES.get(hparams_metadata.parse_session_end_info_plugin_data(data).status)


TYPE_NAMES = {v: k for k, v in _TYPES.items()}
