"""Read a logdir back the way the HParams dashboard does: through TensorBoard's own plugin.

:class:`HParamsReader` loads the logdir with TensorBoard's event multiplexer, builds its
``HParamsPlugin`` and posts to the plugin's ``/experiment`` and ``/session_groups`` routes the JSON
bodies the dashboard sends (:data:`EXPERIMENT_REQUEST`, :func:`session_groups_request`), in process.
The same bodies work against a running ``tensorboard`` at ``/data/plugin/hparams/...``.

    >>> reader = HParamsReader("~/tuner_results/my_sweep/tensorboard")   # doctest: +SKIP
    >>> [h["name"] for h in reader.experiment()["hparamInfos"]]           # doctest: +SKIP
    ['lr', 'model.depth']
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: What the dashboard posts to ``/data/plugin/hparams/experiment``.
EXPERIMENT_REQUEST = {"experimentName": ""}
ALL_STATUSES = ["STATUS_FAILURE", "STATUS_RUNNING", "STATUS_SUCCESS", "STATUS_UNKNOWN"]


def session_groups_request(experiment: dict[str, Any]) -> dict[str, Any]:
    """What the dashboard posts to ``/data/plugin/hparams/session_groups`` once it has the
    experiment: every hparam and metric as a column, every status, one page of everything."""
    cols: list[dict[str, Any]] = [{"hparam": h["name"]} for h in experiment.get("hparamInfos", [])]
    cols += [{"metric": m["name"]} for m in experiment.get("metricInfos", [])]
    return {"experimentName": "", "allowedStatuses": list(ALL_STATUSES), "colParams": cols,
            "startIndex": 0, "sliceSize": 1_000_000}


class HParamsReader:
    """TensorBoard's HParams plugin over ``logdir``, in process (data loaded once, at construction;
    :meth:`reload` reads what was written since)."""

    def __init__(self, logdir: str | os.PathLike[str]) -> None:
        from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
        from tensorboard.plugins import base_plugin
        from tensorboard.plugins.hparams import hparams_plugin
        from werkzeug.test import Client

        self.logdir = str(Path(logdir).expanduser().absolute())
        self._multiplexer = plugin_event_multiplexer.EventMultiplexer(max_reload_threads=1)
        self._multiplexer.AddRunsFromDirectory(self.logdir)
        self._multiplexer.Reload()
        context = base_plugin.TBContext(
            logdir=self.logdir,
            multiplexer=self._multiplexer,
            data_provider=data_provider.MultiplexerDataProvider(self._multiplexer, self.logdir),
            plugin_name_to_instance={},
        )
        self.plugin = hparams_plugin.HParamsPlugin(context)
        routes = self.plugin.get_plugin_apps()
        self._clients = {path: Client(app) for path, app in routes.items()}

    def reload(self) -> None:
        self._multiplexer.AddRunsFromDirectory(self.logdir)
        self._multiplexer.Reload()

    def post(self, route: str, body: dict[str, Any]) -> Any:
        """POST ``body`` (JSON) to one of the plugin's routes ("/experiment", "/session_groups")."""
        response = self._clients[route].post(route, data=json.dumps(body), content_type="application/json")
        if response.status_code != 200:
            raise RuntimeError(f"HParams plugin {route}: HTTP {response.status_code}: {response.get_data(as_text=True)}")
        return json.loads(response.get_data(as_text=True))

    def experiment(self) -> dict[str, Any]:
        return self.post("/experiment", EXPERIMENT_REQUEST)

    def session_groups(self, experiment: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.post("/session_groups", session_groups_request(experiment or self.experiment()))

    def sessions(self) -> dict[str, dict[str, Any]]:
        """Session name -> {"hparams", "status", "metrics": {tag: (step, value)}} (the table)."""
        return sessions_table(self.session_groups())


def sessions_table(groups: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``session_groups`` answer as session name -> hparams, status and last metric values."""
    out: dict[str, dict[str, Any]] = {}
    for group in groups.get("sessionGroups", []):
        for session in group.get("sessions", []):
            if session["name"] in out:
                raise AssertionError(f"session {session['name']!r} appears twice")
            out[session["name"]] = {
                "hparams": dict(group.get("hparams", {})),
                "status": session.get("status", "STATUS_UNKNOWN"),
                "metrics": {
                    m["name"]["tag"]: (int(m.get("trainingStep", 0)), m["value"])
                    for m in session.get("metricValues", [])
                },
            }
    return out
