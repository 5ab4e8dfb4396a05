"""Cinder CSI with its sidecars (external-provisioner, external-attacher), the kube-controller-manager loops
they rely on (PV binder, PVC protection, attach/detach controller) and the node plugin's view of the data,
against the lab cloud's Cinder and Nova with cloud.conf's credential."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from openstack import exceptions as os_exc

from . import logic
from .component import Component, faults, log, now_rfc3339
from .kube import KubeError


class CinderCSI(Component):
    name = "csi"
    workloads = (("Deployment", "csi-cinder-controllerplugin"),
                 ("Deployment", "openstack-cinder-csi-controllerplugin"))
    event_source = "cinder.csi.openstack.org"

    def reconcile(self) -> None:
        assert self.conn is not None
        classes = {sc["metadata"]["name"]: sc for sc in self.kube.list("StorageClass")}
        pvcs = self.kube.list("PersistentVolumeClaim")
        pvs = self.kube.list("PersistentVolume")
        pods = self.kube.list("Pod")
        nodes = {n["metadata"]["name"]: n for n in self.kube.list("Node")}
        if not self._has_work(classes, pvcs, pvs):
            return  # nothing of Cinder CSI's in the cluster: Cinder is not asked (the lab's 2 cores are shared)
        volumes = {v.id: v.to_dict() for v in self.conn.block_storage.volumes(details=True)}
        changed = self.provision(classes, pvcs, pvs, pods, volumes)
        changed |= self.reclaim(pvcs, pvs, volumes)
        if changed:
            pvcs, pvs = self.kube.list("PersistentVolumeClaim"), self.kube.list("PersistentVolume")
        self.attach_detach(pods, pvcs, pvs)
        self.attacher(pvs, nodes, volumes)
        self.node_data(pods, pvcs, pvs, nodes, volumes)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._warned: set[str] = set()

    def _has_work(self, classes: dict[str, Any], pvcs: list[dict[str, Any]], pvs: list[dict[str, Any]]) -> bool:
        if self.state.section("provisioned") or self.kube.list("VolumeAttachment"):
            return True
        if any(((pv.get("spec") or {}).get("csi") or {}).get("driver") == logic.CINDER_DRIVER for pv in pvs):
            return True
        return any((classes.get(logic.claim_class(c)) or {}).get("provisioner") == logic.CINDER_DRIVER for c in pvcs)

    # ------------------------------------------------------------------ provisioning and binding

    def provision(self, classes: dict[str, Any], pvcs: list[dict[str, Any]], pvs: list[dict[str, Any]],
                  pods: list[dict[str, Any]], volumes: dict[str, dict[str, Any]]) -> bool:
        assert self.conn is not None
        records: dict[str, Any] = self.state.section("provisioned")
        pv_names = {pv["metadata"]["name"]: pv for pv in pvs}
        changed = False
        for pvc in pvcs:
            meta = pvc["metadata"]
            ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
            if meta.get("deletionTimestamp"):
                if logic.PVC_PROTECTION_FINALIZER in (meta.get("finalizers") or []) and \
                        not logic.pods_using_claim(pods, ns, name):
                    self.kube.patch("PersistentVolumeClaim", ns, name, {"metadata": {
                        "finalizers": [f for f in meta["finalizers"] if f != logic.PVC_PROTECTION_FINALIZER] or None}})
                    changed = True
                continue
            volume_name = (pvc.get("spec") or {}).get("volumeName")
            if volume_name:
                pv = pv_names.get(volume_name)
                if pv is not None and (pv.get("status") or {}).get("phase") != "Bound":
                    self.kube.patch("PersistentVolume", None, volume_name, {"status": {"phase": "Bound"}}, sub="status")
                continue
            storage_class = classes.get(logic.claim_class(pvc))
            wanted, why = logic.needs_provisioning(pvc, storage_class, pods)
            if not wanted or storage_class is None:
                continue
            record = records.get(uid)
            if record is None:
                request = logic.volume_request(pvc, storage_class, self.cluster)
                existing = next((v for v in volumes.values() if v.get("name") == request["name"]), None)
                if existing is None:
                    created = self.conn.block_storage.create_volume(**request)
                    existing = created.to_dict()
                    log(self.name, f"creating Cinder volume {request['name']} ({created.id}, {request['size']} GiB, "
                                   f"type {request.get('volume_type', '(default)')}) for claim {ns}/{name}")
                    self.event(pvc, "Provisioning", f'External provisioner is provisioning volume for claim "{ns}/{name}"')
                record = {"volume_id": existing["id"], "namespace": ns, "name": name,
                          "pv_name": logic.pv_name_for(pvc), "since": now_rfc3339()}
                records[uid] = record
                self.state.save()
                continue
            volume = volumes.get(record["volume_id"])
            if volume is None:
                continue  # created after this pass listed volumes
            if volume["status"] == "error":
                if uid not in self._warned:
                    self._warned.add(uid)
                    self.event(pvc, "ProvisioningFailed", f"Cinder volume {volume['id']} is in error", warning=True)
                self.error = f"Cinder volume {volume['id']} of claim {ns}/{name} is in error"
                continue
            if volume["status"] not in ("available", "in-use"):
                continue
            if record["pv_name"] not in pv_names:
                body = logic.pv_body(pvc, storage_class, volume["id"], int(volume["size"]),
                                     str(volume.get("availability_zone") or ""))
                try:
                    self.kube.create("PersistentVolume", None, body)
                except KubeError as exc:
                    if exc.code != 409:
                        raise
            self.kube.patch("PersistentVolumeClaim", ns, name, {
                "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes",
                                             "pv.kubernetes.io/bound-by-controller": "yes",
                                             "volume.kubernetes.io/storage-provisioner": logic.CINDER_DRIVER,
                                             "volume.beta.kubernetes.io/storage-provisioner": logic.CINDER_DRIVER},
                             "finalizers": sorted({*(meta.get("finalizers") or []), logic.PVC_PROTECTION_FINALIZER})},
                "spec": {"volumeName": record["pv_name"]}})
            self.kube.patch("PersistentVolumeClaim", ns, name, {"status": {
                "phase": "Bound", "accessModes": (pvc.get("spec") or {}).get("accessModes") or ["ReadWriteOnce"],
                "capacity": {"storage": f"{volume['size']}Gi"}}}, sub="status")
            self.kube.patch("PersistentVolume", None, record["pv_name"], {"status": {"phase": "Bound"}}, sub="status")
            log(self.name, f"claim {ns}/{name} bound to {record['pv_name']} (Cinder volume {volume['id']})")
            self.event(pvc, "ProvisioningSucceeded", f'Successfully provisioned volume {record["pv_name"]}')
            records.pop(uid)  # the PV owns the volume now: its reclaim policy decides
            self.state.save()
            changed = True
        # A claim deleted before its PV existed: the volume the provisioner made goes with it.
        live = {p["metadata"]["uid"] for p in pvcs}
        for uid in [u for u, r in records.items() if u not in live]:
            record = records[uid]
            if record["pv_name"] in pv_names:
                records.pop(uid)  # the PV owns the volume now: reclaim decides
                self.state.save()
                continue
            if faults(self.state_dir).get("leak_volumes"):
                log(self.name, f"fault leak_volumes: Cinder volume {record['volume_id']} left behind")
            else:
                try:
                    # Not only the listed ones: a volume created in this pass is not in the list yet.
                    self.conn.block_storage.delete_volume(record["volume_id"], ignore_missing=True)
                except os_exc.SDKException as exc:  # still creating: Cinder refuses, the next pass retries
                    log(self.name, f"Cinder volume {record['volume_id']} not deleted yet: {exc}")
                    continue
                log(self.name, f"deleted Cinder volume {record['volume_id']}: claim gone before binding")
            records.pop(uid)
            self.state.save()
        return changed

    # ------------------------------------------------------------------ reclaim

    def reclaim(self, pvcs: list[dict[str, Any]], pvs: list[dict[str, Any]],
                volumes: dict[str, dict[str, Any]]) -> bool:
        assert self.conn is not None
        # A claim being deleted still holds its PV (pvc-protection): the PV is released once the claim is gone.
        live = {p["metadata"]["uid"] for p in pvcs}
        vas = self.kube.list("VolumeAttachment")
        attached_pvs = {(va.get("spec") or {}).get("source", {}).get("persistentVolumeName") for va in vas}
        changed = False
        for pv in pvs:
            spec = pv.get("spec") or {}
            if (spec.get("csi") or {}).get("driver") != logic.CINDER_DRIVER:
                continue
            name = pv["metadata"]["name"]
            claim_uid = (spec.get("claimRef") or {}).get("uid")
            released = claim_uid not in live if claim_uid else False
            deleting = bool(pv["metadata"].get("deletionTimestamp"))
            if not released and not deleting:
                continue
            if spec.get("persistentVolumeReclaimPolicy") != "Delete" and not deleting:
                if (pv.get("status") or {}).get("phase") != "Released":
                    self.kube.patch("PersistentVolume", None, name, {"status": {"phase": "Released"}}, sub="status")
                continue
            if name in attached_pvs:
                continue  # detach first (the attach/detach controller removes the VolumeAttachment)
            handle = spec["csi"]["volumeHandle"]
            volume = volumes.get(handle)
            if volume is not None and spec.get("persistentVolumeReclaimPolicy") == "Delete":
                if faults(self.state_dir).get("leak_volumes"):
                    log(self.name, f"fault leak_volumes: Cinder volume {handle} left behind")
                elif volume["status"] in ("available", "error", "error_deleting"):
                    self.conn.block_storage.delete_volume(handle, ignore_missing=True)
                    log(self.name, f"deleting Cinder volume {handle} of {name} (reclaim Delete)")
                    continue
                else:
                    continue  # in-use, detaching, deleting: next pass
            finalizers = [f for f in pv["metadata"].get("finalizers") or [] if f != logic.PROVISIONER_FINALIZER]
            self.kube.patch("PersistentVolume", None, name, {"metadata": {"finalizers": finalizers or None}})
            self.kube.delete("PersistentVolume", None, name)
            log(self.name, f"deleted PersistentVolume {name}")
            changed = True
        return changed

    # ------------------------------------------------------------------ attach / detach

    def attach_detach(self, pods: list[dict[str, Any]], pvcs: list[dict[str, Any]], pvs: list[dict[str, Any]]) -> None:
        vas = self.kube.list("VolumeAttachment")
        wanted = logic.desired_attachments(pods, pvcs, pvs)
        create, delete = logic.plan_attachments(wanted, pvs, vas)
        for body in create:
            try:
                self.kube.create("VolumeAttachment", None, body)
                log(self.name, f"VolumeAttachment {body['metadata']['name']}: "
                               f"{body['spec']['source']['persistentVolumeName']} on {body['spec']['nodeName']}")
            except KubeError as exc:
                if exc.code != 409:
                    raise
        for name in delete:
            self.kube.delete("VolumeAttachment", None, name)
            log(self.name, f"VolumeAttachment {name} deleted: no pod on its node uses the volume")

    def attacher(self, pvs: list[dict[str, Any]], nodes: dict[str, dict[str, Any]],
                 volumes: dict[str, dict[str, Any]]) -> None:
        """external-attacher + ControllerPublish/Unpublish: Nova attaches/detaches the volume to the node's server."""
        assert self.conn is not None
        handles = {pv["metadata"]["name"]: pv["spec"]["csi"]["volumeHandle"] for pv in pvs
                   if ((pv.get("spec") or {}).get("csi") or {}).get("driver") == logic.CINDER_DRIVER}
        for va in self.kube.list("VolumeAttachment"):
            spec, meta = va.get("spec") or {}, va["metadata"]
            if spec.get("attacher") != logic.CINDER_DRIVER:
                continue
            name = meta["name"]
            handle = handles.get(str(spec.get("source", {}).get("persistentVolumeName")))
            node = nodes.get(str(spec.get("nodeName") or ""))
            server_id = logic.server_id_of(node) if node else ""
            volume = volumes.get(handle or "")
            on_server = bool(volume and server_id in logic.attached_servers(volume))
            finalizers = meta.get("finalizers") or []
            if meta.get("deletionTimestamp"):
                if on_server and volume and volume["status"] == "in-use":
                    try:
                        self.conn.compute.delete_volume_attachment(server_id, volume["id"])
                    except os_exc.SDKException as exc:
                        self._va_error(va, f"detach of volume {volume['id']} failed: {exc}", "detachError")
                        continue
                    log(self.name, f"detaching volume {volume['id']} from server {server_id} ({spec['nodeName']})")
                elif not on_server and (volume is None or volume["status"] != "detaching"):
                    self.kube.patch("VolumeAttachment", None, name, {"metadata": {"finalizers": [
                        f for f in finalizers if f != logic.ATTACHER_FINALIZER] or None}})
                continue
            if logic.ATTACHER_FINALIZER not in finalizers:
                self.kube.patch("VolumeAttachment", None, name,
                                {"metadata": {"finalizers": [*finalizers, logic.ATTACHER_FINALIZER]}})
            if volume is None or not server_id:
                self._va_error(va, f"volume {handle} or the server of node {spec.get('nodeName')} not found")
                continue
            attached = on_server and volume["status"] == "in-use"
            if attached:
                if not (va.get("status") or {}).get("attached"):
                    device = next((a.get("device") for a in volume.get("attachments") or []
                                   if a.get("server_id") == server_id), "") or ""
                    self.kube.patch("VolumeAttachment", None, name, {"status": {
                        "attached": True, "attachmentMetadata": {"DevicePath": device}, "attachError": None}},
                        sub="status")
                    log(self.name, f"volume {volume['id']} attached to server {server_id} ({spec['nodeName']})")
                continue
            if volume["status"] == "available":
                try:
                    self.conn.compute.create_volume_attachment(server_id, volume=volume["id"])
                except os_exc.SDKException as exc:
                    self._va_error(va, f"attach of volume {volume['id']} failed: {exc}")
                    continue
                log(self.name, f"attaching volume {volume['id']} to server {server_id} ({spec['nodeName']})")
            elif volume["status"] == "in-use":
                others = logic.attached_servers(volume) - {server_id}
                self._va_error(va, f"volume {volume['id']} is attached to server(s) {', '.join(sorted(others))}: "
                                   "waiting for it to be detached")

    def _va_error(self, va: dict[str, Any], message: str, field: str = "attachError") -> None:
        current = ((va.get("status") or {}).get(field) or {}).get("message")
        if current != message:
            status: dict[str, Any] = {field: {"time": now_rfc3339(), "message": message}}
            if field == "attachError":
                status["attached"] = False
            self.kube.patch("VolumeAttachment", None, va["metadata"]["name"], {"status": status}, sub="status")

    # ------------------------------------------------------------------ node plugin: the data

    def data_file(self, volume_id: str) -> Path:
        path = self.state_dir / "volumes" / f"{volume_id}.data"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def node_data(self, pods: list[dict[str, Any]], pvcs: list[dict[str, Any]], pvs: list[dict[str, Any]],
                  nodes: dict[str, dict[str, Any]], volumes: dict[str, dict[str, Any]]) -> None:
        """A pod's volume is readable only where Cinder says it is attached: the pod's node's server. There the
        pod's write annotation is appended (once per pod and value) and the file's sha256 reported."""
        writes: dict[str, Any] = self.state.section("writes")
        claims = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in pvcs}
        handles = {pv["metadata"]["name"]: pv["spec"]["csi"]["volumeHandle"] for pv in pvs
                   if ((pv.get("spec") or {}).get("csi") or {}).get("driver") == logic.CINDER_DRIVER}
        for pod in pods:
            meta = pod["metadata"]
            node = nodes.get((pod.get("spec") or {}).get("nodeName") or "")
            annotations = meta.get("annotations") or {}
            patch: dict[str, Any] = {}
            for claim in logic.pod_claims(pod):
                handle = handles.get(((claims.get((meta["namespace"], claim)) or {}).get("spec") or {})
                                     .get("volumeName") or "")
                if handle is None:
                    continue
                volume = volumes.get(handle)
                server_id = logic.server_id_of(node) if node else ""
                readable = bool(volume and server_id and volume["status"] == "in-use"
                                and server_id in logic.attached_servers(volume))
                key = logic.sha_annotation(claim)
                if not readable:
                    if key in annotations:
                        patch[key] = None
                    continue
                path = self.data_file(handle)
                value = annotations.get(logic.WRITE_ANNOTATION)
                if value is not None:
                    write = logic.write_key(meta["uid"], claim, str(value))
                    if write not in writes:
                        with open(path, "ab") as out:
                            out.write(str(value).encode())
                        writes[write] = now_rfc3339()
                        self.state.save()
                        log(self.name, f"pod {meta['namespace']}/{meta['name']} wrote {len(str(value))} bytes "
                                       f"to volume {handle}")
                digest = hashlib.sha256(path.read_bytes() if path.exists() else b"").hexdigest()
                if annotations.get(key) != digest:
                    patch[key] = digest
            if patch:
                self.kube.patch("Pod", meta["namespace"], meta["name"], {"metadata": {"annotations": patch}})
