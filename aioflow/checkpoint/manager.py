"""``flow.train.SimpleCheckPointManager``: OneFlow's automatic checkpoint folder.

Each :meth:`~SimpleCheckPointManager.save` writes a complete checkpoint (OneFlow's layout,
see :mod:`aioflow.checkpoint`) into ``<root_path>/<prefix><YYYYmmdd_HHMMSS_ffffff>``, so
names sort in the order they were saved; :meth:`~SimpleCheckPointManager.
initialize_or_restore` loads the newest complete one, or initializes the variables and
saves a first checkpoint when there is none. Called where an event loop runs, both return
awaitables, like ``CheckPoint.save``/``load`` (``await manager.save()``).

Each save has a new name, so the per-path clean-up of ``CheckPoint.save``/``load`` (see
:mod:`aioflow.checkpoint.recovery`) never meets a killed save's leftover again: ``save``
and ``initialize_or_restore`` remove the ``.<prefix>*.tmp-*``/``.old-*`` leftovers of
dead saves under ``root_path`` themselves (a running save's, locked, are left alone).

>>> import numpy as np, tempfile, aioflow as flow, aioflow.typing as tp
>>> flow.clear_default_session()
>>> @flow.global_function(type="predict")
... def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
...     return x + flow.get_variable("b", shape=(2,), initializer=flow.ones_initializer())
>>> manager = flow.train.SimpleCheckPointManager(tempfile.mkdtemp())
>>> manager.initialize_or_restore()        # nothing saved yet: initialize, save
>>> len(manager.list_checkpoints())
1
>>> flow.load_variables({"b": np.array([5.0, 6.0], np.float32)})
>>> manager.save()
>>> flow.load_variables({"b": np.zeros(2, np.float32)})
>>> manager.initialize_or_restore()        # the newest checkpoint
>>> job(np.zeros(2, np.float32)).tolist()
[5.0, 6.0]
"""
from __future__ import annotations

import datetime
import os
import re
from typing import List, Optional

from . import CheckPoint
from .io import DONE_FILENAME
from .recovery import tidy
from .thread import checkpoint_entry

__all__ = ["SimpleCheckPointManager"]

_STAMP = "%Y%m%d_%H%M%S_%f"


class SimpleCheckPointManager:
    """Checkpoints named ``<prefix><timestamp>`` under ``root_path`` (created if missing)."""

    def __init__(self, root_path: str, prefix: str = "snapshot_") -> None:
        root_path = os.fspath(root_path)
        if not isinstance(prefix, str) or not prefix or os.sep in prefix:
            raise ValueError("SimpleCheckPointManager: prefix must be a non-empty folder-name "
                             f"prefix, got {prefix!r}")
        if os.path.exists(root_path) and not os.path.isdir(root_path):
            raise NotADirectoryError(f"SimpleCheckPointManager: root_path {root_path!r} "
                                     "exists and is not a folder")
        os.makedirs(root_path, exist_ok=True)
        self._root_path = root_path
        self._prefix = prefix
        self._checkpoint = CheckPoint()

    def list_checkpoints(self) -> List[str]:
        """The names of the complete checkpoints (with ``snapshot_done``), oldest first."""
        return sorted(name for name in os.listdir(self._root_path)
                      if name.startswith(self._prefix)
                      and os.path.isfile(os.path.join(self._path(name), DONE_FILENAME)))

    def latest_checkpoint(self) -> Optional[str]:
        """The newest complete checkpoint's name, or None."""
        names = self.list_checkpoints()
        return names[-1] if names else None

    @checkpoint_entry
    def initialize_or_restore(self) -> None:
        """Load the newest checkpoint (strictly: see ``flow.train.CheckPoint.load``); with
        none, initialize every variable and save the first checkpoint."""
        self._tidy()
        name = self.latest_checkpoint()
        if name is not None:
            self._checkpoint.load(self._path(name))
        else:
            self._checkpoint.init()
            self._save()

    @checkpoint_entry
    def save(self) -> None:
        """Save every variable into a new checkpoint named after the current time."""
        self._tidy()
        self._save()

    def _save(self) -> None:
        self._checkpoint.save(self._path(self._next_name()))

    def _tidy(self) -> None:
        """Remove the leftovers of dead saves of any ``<prefix>*`` name under the root."""
        pattern = re.compile(rf"\.({re.escape(self._prefix)}.*)\.(tmp|old)-[0-9a-f]{{8}}")
        bases = {match.group(1) for match in map(pattern.fullmatch,
                                                  os.listdir(self._root_path)) if match}
        for base in sorted(bases):
            tidy(self._path(base), DONE_FILENAME)

    def _next_name(self) -> str:
        # Later than every existing name, even within one microsecond or after the clock
        # went back, so that sorting by name stays sorting by age.
        stamp = datetime.datetime.now()
        for name in reversed(self._all_names()):
            try:
                last = datetime.datetime.strptime(name[len(self._prefix):], _STAMP)
            except ValueError:
                continue
            if stamp <= last:
                stamp = last + datetime.timedelta(microseconds=1)
            break
        return self._prefix + stamp.strftime(_STAMP)

    def _all_names(self) -> List[str]:
        return sorted(n for n in os.listdir(self._root_path) if n.startswith(self._prefix))

    def _path(self, name: str) -> str:
        return os.path.join(self._root_path, name)
