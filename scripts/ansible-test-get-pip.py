"""Stand-in for the get-pip bootstrap script that ansible-test downloads from a host our CI cannot reach.

ansible-test runs it inside each sanity virtualenv as ``get_pip.py [pip options] pip==X ...``. Like
get-pip.py it leaves pip installed at the requested version: pip comes from the standard library's
ensurepip, then upgrades itself from the package index. `make sanity` copies it into ansible-test's cache.
"""

import ensurepip
import os
import subprocess
import sys

# get-pip.py's own flags; plain pip does not know them.
args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
# ensurepip switches pip's configuration off in os.environ (PIP_CONFIG_FILE=/dev/null); pip itself must
# then run with the machine's configuration (index, certificates), so keep the environment from before.
environment = dict(os.environ)
ensurepip.bootstrap(upgrade=True)
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *args], env=environment))
