"""The Ray session a RayVecEnv runs in: start or join one, and end only what marl_vec started.

With ``address=None`` and no Ray session in this process, `acquire_session`
starts a local cluster; ``"auto"`` or ``"ray://host:port"`` connects to a running
one; a session the caller already opened with ``ray.init`` is used as is and
never shut down. Every RayVecEnv that acquired the session marl_vec opened
releases it at ``close()``; the last one shuts it down.

Imports: the standard library and `marl_vec.envs.registry.require` (Ray
itself is imported lazily, so that importing this module costs nothing). Nothing
here knows of envs, groups or buffers.

Example (what RayVecEnv does; not run here)::

    owned = acquire_session(None, num_cpus=2, temp_dir="/tmp/ray_run")
    ...
    if owned:
        release_session()
"""

from __future__ import annotations

import os
import threading
from typing import Any

from marl_vec.envs.registry import require


def ray_module():
    return require("ray", "ray", "the Ray backend")


# -- the local cluster that marl_vec started ------------------------------------

_MAX_TEMP_DIR = 107 - len("/session_2026-01-01_00-00-00_000000_1234567/sockets/plasma_store")
_session_lock = threading.Lock()
_session = {"owned": False, "users": 0}


def acquire_session(address: str | None, num_cpus: int, temp_dir: str | None) -> bool:
    """Make sure this process has a Ray session; True if marl_vec opened it."""
    ray = ray_module()
    with _session_lock:
        if ray.is_initialized():
            if _session["owned"]:
                _session["users"] += 1
                return True
            return False  # the caller's own session: use it, never shut it down
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
        if address is None:
            kwargs["num_cpus"] = num_cpus
            if temp_dir is not None:
                temp_dir = os.path.abspath(temp_dir)
                # Ray puts unix sockets at <temp_dir>/session_<date>_<pid>/sockets/plasma_store,
                # and such a path may not exceed 107 bytes.
                if len(temp_dir.encode()) > _MAX_TEMP_DIR:
                    raise ValueError(
                        f"ray temp_dir {temp_dir!r} is {len(temp_dir.encode())} bytes long; allowed: at most "
                        f"{_MAX_TEMP_DIR} (Ray's socket paths under it must fit in 107), e.g. /tmp/ray_run"
                    )
                os.makedirs(temp_dir, exist_ok=True)
                kwargs["_temp_dir"] = temp_dir
        else:
            if temp_dir is not None:
                raise ValueError(
                    "ray temp_dir applies to a local cluster that marl_vec starts (address=None); "
                    "for an existing cluster pass --temp-dir to `ray start` instead"
                )
            kwargs = {"address": address}
        ray.init(**kwargs)
        _session.update(owned=True, users=1)
        return True


def release_session() -> None:
    ray = ray_module()
    with _session_lock:
        if not _session["owned"]:
            return
        _session["users"] -= 1
        if _session["users"] <= 0:
            _session.update(owned=False, users=0)
            ray.shutdown()


def driver_node(ray: Any) -> str | None:
    """This process's Ray node, or None when it is not one (a ``ray://`` client)."""
    try:
        from ray.util.client import ray as client

        if client.is_connected():
            return None
    except ImportError:
        pass
    try:
        return ray.get_runtime_context().get_node_id()
    except Exception:  # Ray raises several types where no node id exists
        return None

