"""``python -m lab.k8s --etcd URLS --port N --data-dir DIR [--encryption-config FILE --kms-cloud-config FILE]``"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from .api import Api
from .controllers import Controllers
from .etcd import Etcd, EtcdError
from .kms import Encryption, load_encryption_config
from .pki import ensure_pki, ensure_token, write_kubeconfig
from .resources import by_kind
from .server import LabApiServer, tls_context
from .store import ApiError, Store

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m lab.k8s", description=__doc__)
    parser.add_argument("--etcd", required=True, help="etcd client URLs, comma-separated")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--data-dir", type=Path, required=True, help="CA, certificate, token, kubeconfig")
    parser.add_argument("--prefix", default="/registry", help="etcd key prefix (tests use their own)")
    parser.add_argument("--kubeconfig", type=Path, help="where to write the kubeconfig (default DATA_DIR/kubeconfig)")
    parser.add_argument("--encryption-config", type=Path, help="an EncryptionConfiguration (kube-apiserver's "
                        "--encryption-provider-config)")
    parser.add_argument("--kms-cloud-config", action="append", default=[], metavar="[NAME=]PATH",
                        help="the barbican-kms-plugin cloud.conf for the kms provider NAME (or for every kms provider)")
    parser.add_argument("--no-controllers", action="store_true", help="no scheduler, kubelet stand-in or workload "
                        "controllers")
    parser.add_argument("--pod-gc-seconds", type=float, default=40.0, help="delete a pod whose Node has been gone "
                        "this long (kube-controller-manager's pod GC)")
    parser.add_argument("--no-kubelet", action="store_true", help="controllers, but no kubelet stand-in: bound pods "
                        "stay Pending until another process sets their status")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    encryption = Encryption()
    if args.encryption_config:
        named: dict[str, Path] = {}
        default: Path | None = None
        for item in args.kms_cloud_config:
            name, sep, path = item.partition("=")
            if sep:
                named[name] = Path(path)
            else:
                default = Path(item)
        try:
            encryption = load_encryption_config(args.encryption_config, named, default)
        except (OSError, ValueError, KeyError) as exc:
            print(f"lab.k8s: bad encryption configuration: {exc}", file=sys.stderr)
            return 2
    store = Store(Etcd(args.etcd.split(",")), args.prefix, encryption)
    api = Api(store)
    for namespace in SYSTEM_NAMESPACES:
        try:
            api.create(by_kind("Namespace"), None, {"metadata": {"name": namespace}})
        except ApiError as exc:
            if exc.code != 409:
                raise
        except EtcdError as exc:
            print(f"lab.k8s: etcd at {args.etcd} does not answer: {exc}", file=sys.stderr)
            return 1
    ca_crt, server_crt, server_key = ensure_pki(args.data_dir, args.host)
    token = ensure_token(args.data_dir)
    server = LabApiServer((args.host, args.port), api, token, tls_context(str(server_crt), str(server_key)))
    url = f"https://{args.host}:{server.server_address[1]}"
    write_kubeconfig(args.kubeconfig or args.data_dir / "kubeconfig", url, ca_crt, token)
    controllers = Controllers(api, kubelet=not args.no_kubelet, orphan_quarantine=args.pod_gc_seconds)
    if not args.no_controllers:
        controllers.start()

    def stop(signum: int, frame: FrameType | None) -> None:
        controllers.stop()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"lab Kubernetes API at {url} (etcd prefix {args.prefix}, secrets "
          f"{'encrypted: ' + ', '.join(p.name for p in encryption.providers.get('secrets', [])) if encryption.providers else 'not encrypted'})",
          flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
