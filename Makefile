# Two commands for a newcomer:  `make lab`  and  `make test`.
# Everything installs on demand and is reused by the next run (stamp files).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PY311 := $(shell scripts/find-python 3.11)
PY312 := $(shell scripts/find-python 3.12)
VENV := .venv
VENV_NEWEST := .venv-newest
COLLECTION_LINK := .build/ansible_collections/deployopen/k8s_openstack
SANITY_ROOT := .build/sanity/ansible_collections/deployopen/k8s_openstack
LAB := python3 -m lab
EVIDENCE_ROOT ?= $(CURDIR)/evidence
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.build
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: help lab lab-up lab-down lab-status test test-unit test-integration-all test-integration test-integration-newest sanity lint typecheck build venvs molecule molecule-deps molecule-image

help:
	@echo "make lab         set up everything (venvs, system packages, the lab) and run site.yml on it"
	@echo "make test        all tests: unit, sanity, lint, build, integration against the lab"
	@echo "make lab-down    stop the lab's own processes"
	@echo "make lab-status  what is up"
	@echo "make molecule    the roles' Molecule scenarios on podman (MOLECULE_SCENARIOS=\"host_prep compute\")"

$(COLLECTION_LINK):
	@mkdir -p $(dir $@)
	@ln -sfn ../../.. $@

# A venv is rebuilt only when its requirement files change.
$(VENV)/.stamp: tests/requirements/ansible-2.19.txt requirements.txt
	@test -x $(VENV)/bin/python || $(PY311) -m venv $(VENV)
	$(VENV)/bin/pip install -q -r tests/requirements/ansible-2.19.txt
	@touch $@

$(VENV_NEWEST)/.stamp: tests/requirements/ansible-newest.txt requirements.txt
	@test -x $(VENV_NEWEST)/bin/python || $(PY312) -m venv $(VENV_NEWEST)
	$(VENV_NEWEST)/bin/pip install -q -r tests/requirements/ansible-newest.txt
	@touch $@

venvs: $(VENV)/.stamp $(VENV_NEWEST)/.stamp $(COLLECTION_LINK)

lab-up:
	$(LAB) up

lab-down:
	$(LAB) down

lab-status:
	$(LAB) status

# The main job on the embedded lab: site.yml against inventories/lab.
lab: $(VENV)/.stamp $(COLLECTION_LINK) lab-up
	source <($(LAB) env) && \
	  $(VENV)/bin/ansible-playbook -i inventories/lab playbooks/site.yml -e k8s_openstack_evidence_root=$(EVIDENCE_ROOT)
	@latest=$$(ls -td $(EVIDENCE_ROOT)/*/*/ 2>/dev/null | head -1); \
	  echo; echo "Evidence report: $${latest}report.md"; echo "Evidence bundle: $${latest}"

# Integration (mostly waiting on the lab's services) and Molecule (mostly waiting on apt in containers) run
# side by side: on two cores that saves about ten minutes. --output-sync keeps each one's log in one piece.
test: venvs lab-up test-unit typecheck sanity lint build
	$(MAKE) -j2 --output-sync=target test-integration-all molecule

test-integration-all:
	$(MAKE) test-integration
	$(MAKE) test-integration-newest

test-unit: $(VENV)/.stamp $(VENV_NEWEST)/.stamp $(COLLECTION_LINK)
	$(VENV)/bin/python -m pytest -q tests/unit
	$(VENV_NEWEST)/bin/python -m pytest -q tests/unit

# ansible-test needs a real tree at ansible_collections/<ns>/<name>: copy the tracked files there.
sanity: $(VENV)/.stamp $(VENV_NEWEST)/.stamp
	@# ansible-test bootstraps pip in its venvs with a script it downloads from a host we cannot reach.
	@mkdir -p ~/.ansible/test/cache; for v in $$(grep -ho "pip='[0-9.]*'" $(VENV)/lib/python*/site-packages/ansible_test/_internal/python_requirements.py $(VENV_NEWEST)/lib/python*/site-packages/ansible_test/_internal/python_requirements.py | tr -dc "0-9.\n" | sort -u); do \
	  cp scripts/ansible-test-get-pip.py ~/.ansible/test/cache/get_pip_$${v//./_}.py; done
	rm -rf $(SANITY_ROOT) && mkdir -p $(SANITY_ROOT)
	git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t $(SANITY_ROOT)
	cd $(SANITY_ROOT) && git init -q && git add -A && \
	  $(CURDIR)/$(VENV)/bin/ansible-test sanity --python 3.11 --color no && \
	  $(CURDIR)/$(VENV_NEWEST)/bin/ansible-test sanity --python 3.12 --color no

typecheck: $(VENV_NEWEST)/.stamp $(COLLECTION_LINK)
	$(VENV_NEWEST)/bin/mypy plugins lab tests

lint: $(VENV_NEWEST)/.stamp $(COLLECTION_LINK)
	$(VENV_NEWEST)/bin/ansible-lint --offline

# The built tarball must install with ansible-galaxy and its module docs must render.
build: $(VENV)/.stamp
	rm -rf .build/dist .build/installed && mkdir -p .build/dist
	$(VENV)/bin/ansible-galaxy collection build --output-path .build/dist --force .
	# Dependencies (openstack.cloud, kubernetes.core) resolve from the `ansible` package: no Galaxy needed.
	ANSIBLE_COLLECTIONS_PATH=$(CURDIR)/.build/installed \
	  $(VENV)/bin/ansible-galaxy collection install -p .build/installed .build/dist/deployopen-k8s_openstack-*.tar.gz
	# Every module and filter of the installed tarball renders its documentation.
	for plugin in $$(ls plugins/modules/*.py | xargs -n1 basename | sed 's/\.py$$//' | grep -v '^__init__$$'); do \
	  doc=$$(ANSIBLE_NOCOLOR=1 ANSIBLE_COLLECTIONS_PATH=$(CURDIR)/.build/installed \
	    $(VENV)/bin/ansible-doc deployopen.k8s_openstack.$$plugin 2>&1); \
	  [[ "$$doc" == "> MODULE deployopen.k8s_openstack.$$plugin "* ]] || { echo "ansible-doc failed: $$doc"; exit 1; }; done
	for filter in $$(ls plugins/filter/*.yml | xargs -n1 basename | sed 's/\.yml$$//'); do \
	  ANSIBLE_COLLECTIONS_PATH=$(CURDIR)/.build/installed $(VENV)/bin/ansible-doc -t filter deployopen.k8s_openstack.$$filter >/dev/null \
	    || { echo "ansible-doc failed for filter $$filter"; exit 1; }; done
	@echo "build: tarball installs, module docs render"

# Run alone, first: the preflight tests lower the lab project's quotas for a moment; test_site runs
# site.yml, which leaves the lab cluster as `make lab` does (Barbican KMS files, cloud-config Secret) - the
# drills' tests start from that state; the end-to-end rotation tests stop Keystone and rotate the credential
# the lab cluster's stand-ins use; the barbican_kms tests rewrite every Secret of the lab cluster. The rest runs on two workers, a test file per worker (module fixtures
# stay whole); every test uses its own names, and none writes what the lab cluster itself uses.
SERIAL_INTEGRATION := tests/integration/test_preflight.py tests/integration/test_site.py \
  tests/integration/test_rotation_end_to_end.py tests/integration/test_barbican_kms.py
test-integration: $(VENV)/.stamp $(COLLECTION_LINK)
	source <($(LAB) env) && $(VENV)/bin/python -m pytest -q $(SERIAL_INTEGRATION)
	source <($(LAB) env) && $(VENV)/bin/python -m pytest -q -n 2 --dist loadfile --durations=15 \
	  $(addprefix --ignore ,$(SERIAL_INTEGRATION)) tests/integration

# The drill end to end on the newest ansible-core too (the module tests above run on 2.19).
test-integration-newest: $(VENV_NEWEST)/.stamp $(COLLECTION_LINK)
	source <($(LAB) env) && $(VENV_NEWEST)/bin/python -m pytest -q tests/integration/test_credential_rotation_drill.py

# Molecule on podman with systemd as PID 1. Podman's settings for hosts like ours are in
# molecule/containers.conf; the Debian 12 image is built locally (molecule/image/build.sh) and cached.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo -n)
MOLECULE_SCENARIOS ?= host_prep compute
export CONTAINERS_CONF := $(CURDIR)/molecule/containers.conf
export MOLECULE_APT_CACHE ?= /var/cache/deployopen-molecule-apt

molecule-deps:
	@command -v podman >/dev/null && command -v debootstrap >/dev/null && command -v runc >/dev/null || { \
	  $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends \
	    podman runc uidmap slirp4netns fuse-overlayfs containernetworking-plugins catatonit iptables debootstrap; }
	@$(SUDO) mkdir -p $(MOLECULE_APT_CACHE)

molecule-image: molecule-deps
	molecule/image/build.sh

molecule: $(VENV_NEWEST)/.stamp $(COLLECTION_LINK) molecule-image
	PATH=$(CURDIR)/$(VENV_NEWEST)/bin:$$PATH molecule/run.sh $(MOLECULE_SCENARIOS)
