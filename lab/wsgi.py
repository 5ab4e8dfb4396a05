"""One WSGI entry point for every lab API under gunicorn.

Stock OpenStack WSGI modules read ``sys.argv`` or fixed ``/etc`` paths. The
lab sets, per service, in the gunicorn process environment:

- ``LAB_WSGI_ARGV``: JSON list that becomes ``sys.argv`` before the import
  (e.g. ``["cinder-api", "--config-file", ".../cinder.conf"]``);
- one of ``LAB_WSGI_MODULE`` (a module with ``application``),
  ``LAB_WSGI_FACTORY`` (``module:function`` called with ``argv=``) or
  ``LAB_WSGI_PASTE`` (a paste.deploy ini file).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any

sys.argv = json.loads(os.environ.get("LAB_WSGI_ARGV", '["lab-wsgi"]'))


def _load() -> Any:
    if "LAB_WSGI_PASTE" in os.environ:
        from paste import deploy

        return deploy.loadapp("config:" + os.environ["LAB_WSGI_PASTE"])
    if "LAB_WSGI_FACTORY" in os.environ:
        module_name, func = os.environ["LAB_WSGI_FACTORY"].split(":")
        return getattr(importlib.import_module(module_name), func)(argv=sys.argv)
    return importlib.import_module(os.environ["LAB_WSGI_MODULE"]).application


application = _load()
