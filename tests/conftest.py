"""Make the repo importable as ansible_collections.deployopen.k8s_openstack (via .build) and the lab as `lab`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINK = REPO / ".build" / "ansible_collections" / "deployopen" / "k8s_openstack"

if not LINK.exists():
    LINK.parent.mkdir(parents=True, exist_ok=True)
    os.symlink("../../..", LINK)
for path in (str(REPO / ".build"), str(REPO)):
    if path not in sys.path:
        sys.path.insert(0, path)
